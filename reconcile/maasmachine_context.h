#pragma once
/*
 * maasmachine_context: the state of one MaasMachine reconcile pass and the helpers every
 * step of the pass shares (internal). struct maasmachine_ctx lives on the worker's stack for
 * the duration of maasmachine_reconcile(); it holds references to the cached objects it
 * read, the decoded MaasMachine it mutates, and the server's last known copy (cur) that
 * maasmachine_flush() diffs against, so a pass writes only what changed.
 *
 * The steps (maasmachine_allocate.c, _deploy.c, _power.c, _dns.c, _node.c, _release.c,
 * _delete.c) call only this module and the layers below; maasmachine.c's state machine
 * calls the steps. Nothing here calls a step.
 */

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "reconciler.h"
#include "worker.h"

struct maasmachine_ctx {
        struct reconciler_worker *w;
        struct provider *p;
        const char *ns, *name;
        struct kube_object *obj;     /* the MaasMachine as cached */
        struct kube_object *machine; /* owner CAPI Machine */
        struct kube_object *cluster; /* CAPI Cluster */
        struct maas_machine mm;      /* decoded; mutated by the pass */
        cJSON *cur;                  /* the object as the server last returned it (owned) */
        struct maas_node node;       /* the MAAS machine, when have_node */
        bool have_node;
        bool list_later;     /* in flight, not yet in the in-flight list: wait for the next */
        bool unplaced_later; /* no machine, not yet in the unplaced list: wait for the next */
        bool control_plane;
        time_t now;
        unsigned writes;                    /* PATCH calls made by this pass */
        struct reconciler_conditions conds; /* into mm.status and now, set as the pass begins */
        /* The address the IPAddressClaim was answered with, once read this pass (owned;
         * maasmachine_ipam.c), or NULL. */
        struct schema_static_ip *claimed_ip;
};

#define MAASMACHINE_LOGGER "maasmachine"

/* Writes the difference between cur and the mutated object (metadata_only: not status). */
MUST_CHECK int maasmachine_flush(struct maasmachine_ctx *c, bool metadata_only);
/* Sets or clears spec.systemID and spec.providerID. */
void maasmachine_set_ids(struct maasmachine_ctx *c, const char *zone, const char *system_id);
/* Sets an annotation, or removes it when value is NULL. */
void maasmachine_set_annotation(struct maasmachine_ctx *c, const char *key, const char *value);
/* Makes *n the pass's MAAS machine (moved: *n is left zeroed); the previous one is freed. */
void maasmachine_take_node(struct maasmachine_ctx *c, struct maas_node *n);
/* Makes ip (moved, may be NULL) the pass's claimed address; the previous one is freed. */
void maasmachine_set_claimed_ip(struct maasmachine_ctx *c, struct schema_static_ip *ip);
/* Forgets the pass's MAAS machine. */
void maasmachine_drop_node(struct maasmachine_ctx *c);
/* Asks for the next pass within ms (the sooner of this and an earlier request wins). */
void maasmachine_requeue(struct reconcile_result *res, uint64_t ms);
/* Frees what the pass holds. */
void maasmachine_ctx_release(struct maasmachine_ctx *c);

/*
 * The backoff of a step MAAS refused (a static address, a VM no host fits, a deploy): the
 * failures and a not-before time in an annotation ("<failures> <unix s>"), base_s (10 s when
 * 0) doubling to 5 min, and
 * the same kept in a provider table by the MaasMachine's UID (under c->p->lock), so a pass on
 * a cache that does not hold the annotation yet (an event queued during the failing pass)
 * waits all the same.
 */
struct maasmachine_backoff {
        const char *annotation;
        struct reconciler_table *mem; /* a table of c->p */
        unsigned base_s;              /* the first delay; 0: 10 s */
};

/* Whether the backoff still runs; then a requeue for its end is set in res. */
bool maasmachine_backoff_wait(struct maasmachine_ctx *c,
                              const struct maasmachine_backoff *b,
                              struct reconcile_result *res);
/* Records one more failure; returns the delay before the next try (s). */
unsigned maasmachine_backoff_fail(struct maasmachine_ctx *c, const struct maasmachine_backoff *b);
/* The step succeeded: the annotation and the memory go. */
void maasmachine_backoff_clear(struct maasmachine_ctx *c, const struct maasmachine_backoff *b);
