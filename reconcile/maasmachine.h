#pragma once
/*
 * maasmachine: one MaasMachine reconcile (internal). struct maasmachine_ctx lives on the worker's
 * stack for the duration of maasmachine_reconcile(); it holds references to the cached objects it
 * read, the decoded MaasMachine it mutates, and the server's last known copy (cur) that
 * maasmachine_flush() diffs against, so a pass writes only what changed.
 */

#include <stdbool.h>
#include <time.h>

#include "reconciler.h"

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
        bool control_plane;
        time_t now;
        unsigned writes; /* PATCH calls made by this pass */
};

/* Sets a condition on the MaasMachine (observedGeneration and transition time handled). */
void maasmachine_cond(struct maasmachine_ctx *c,
                      const char *type,
                      const char *status,
                      const char *reason,
                      const char *fmt,
                      ...) PRINTF_LIKE(5, 6);
/* Event on the MaasMachine. */
void maasmachine_event(struct maasmachine_ctx *c,
                       const char *type,
                       const char *reason,
                       const char *fmt,
                       ...) PRINTF_LIKE(4, 5);
/* Writes the difference between cur and the mutated object (metadata_only: not status). */
MUST_CHECK int maasmachine_flush(struct maasmachine_ctx *c, bool metadata_only);
/* Sets or clears spec.systemID and spec.providerID. */
void maasmachine_set_ids(struct maasmachine_ctx *c, const char *zone, const char *system_id);
void maasmachine_set_annotation(struct maasmachine_ctx *c, const char *key, const char *value);

/* A deleting MaasMachine (maasmachine_delete.c): DNS detach, release, finalizer. */
MUST_CHECK int maasmachine_delete_pass(struct maasmachine_ctx *c, struct reconcile_result *res);

/* MAAS side (maasmachine_maas.c). Each returns 0 or a negative error and may set res. */
MUST_CHECK int maasmachine_find_node(struct maasmachine_ctx *c);
MUST_CHECK int maasmachine_allocate(struct maasmachine_ctx *c,
                                    struct reconcile_result *res,
                                    bool *ret_got);
MUST_CHECK int maasmachine_deploy(struct maasmachine_ctx *c);
MUST_CHECK int maasmachine_replace(struct maasmachine_ctx *c,
                                   const char *why,
                                   struct reconcile_result *res);
MUST_CHECK int maasmachine_release(struct maasmachine_ctx *c, const char *system_id);
/* The Deployed-machine power policy (B4). */
MUST_CHECK int maasmachine_power(struct maasmachine_ctx *c, struct reconcile_result *res);
/* DNS attachment of a control-plane machine: true when its IP is in the record. */
MUST_CHECK int maasmachine_dns_registered(struct maasmachine_ctx *c, bool *ret);
/* Sets the workload Node's spec.providerID once. */
MUST_CHECK int maasmachine_node_provider_id(struct maasmachine_ctx *c,
                                            struct reconcile_result *res);
/* Copies a node (deep). */
void maasmachine_node_copy(const struct maas_node *src, struct maas_node *dst);
/* The fleet snapshot (B6): a copy of system_id's entry when fresh, else CM_ENOTFOUND. */
MUST_CHECK int reconciler_fleet_lookup(struct reconciler_worker *w,
                                       const char *system_id,
                                       struct maas_node *ret);
