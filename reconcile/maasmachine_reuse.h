#pragma once
/*
 * maasmachine_reuse: hosts kept for the MachineDeployment or control plane that owned them
 * (spec.nodeReuse; docs/host-reuse.md). MAAS wipes owner data on release, so the owner is
 * remembered in a MAAS tag, which survives release: capmaas-reuse-<12 hex of the FNV-1a of
 * "<namespace>/<cluster>/<kind>/<owner name>">.
 *
 *   - before a reusing MaasMachine's host is released (the MaasMachine deleted, its Cluster
 *     not), the tag is created if absent and put on the host; then the release, with the
 *     erase policy. A crash in between repeats both: tagging twice tags once;
 *   - a reusing MaasMachine of that owner allocates with its own constraints plus the tag
 *     while a tagged host is Ready; while none is but one is on its way back (a MaasMachine
 *     of the same owner being deleted with its host, or a tagged host Releasing or Disk
 *     erasing) it waits, for at most the hold time since it was created; otherwise it
 *     allocates as any other;
 *   - a host deployed again loses the tag; a tagged host Ready for longer than the hold time
 *     (--host-reuse-hold) loses it too (maasmachine_reuse_sweep), so other owners get it.
 *     The hold is counted from when a sweep first saw the host Ready with the tag, and that
 *     time is kept in MAAS, in the tag's comment ("...; held since: <sid>=<RFC 3339>, ..."),
 *     so a restart, a new leader or a clusterctl move goes on with the same clock;
 *   - a reuse tag no machine carries is deleted by the sweep (a keep racing with it creates
 *     it again);
 *   - every MAAS is swept: the process-wide one, and each identity's (spec.identityRef,
 *     maas_identity.h) that a MaasMachineTemplate's cluster names.
 * Metrics: capmaas_host_reuse_allocations_total{source="reused"|"fresh"},
 * capmaas_host_reuse_waiting_hosts, capmaas_host_reuse_tags_expired_total.
 */

#include <stdbool.h>

#include "maas_client.h"
#include "maasmachine_context.h"

#define MAASMACHINE_REUSE_TAG_PREFIX "capmaas-reuse-"
#define MAASMACHINE_REUSE_TAG_MAX    (sizeof(MAASMACHINE_REUSE_TAG_PREFIX) + 12)

/* The pass's owner tag in out; false when the MaasMachine does not reuse hosts, or names no
 * MachineDeployment or control plane. */
bool maasmachine_reuse_tag(const struct maasmachine_ctx *c, char out[MAASMACHINE_REUSE_TAG_MAX]);

/* Before releasing sid for a deleting MaasMachine: tags it for its owner (not when the
 * Cluster is being deleted). A MAAS refusal (403, 400) is reported in an event and the
 * release goes on without reuse; a transient failure is returned (the pass retries). */
MUST_CHECK int maasmachine_reuse_keep(struct maasmachine_ctx *c, const char *sid);

enum maasmachine_reuse_outcome {
        MAASMACHINE_REUSE_NONE, /* allocate as usual */
        MAASMACHINE_REUSE_WAIT, /* a kept host is on its way back: res holds the requeue */
        MAASMACHINE_REUSE_GOT,  /* *ret is the reused host, allocated with o plus the tag */
};

/* The reuse step of an allocate with o (see the top). */
MUST_CHECK int maasmachine_reuse_allocate(struct maasmachine_ctx *c,
                                          const struct maas_allocate_opts *o,
                                          struct maas_node *ret,
                                          struct reconcile_result *res,
                                          enum maasmachine_reuse_outcome *ret_outcome);

/* Before a fresh allocate with *o: points o's not_tags at a new list, o's own plus every
 * reuse tag but the MaasMachine's that the last sweep or keep saw (hosts kept for their
 * owners during the hold), so others leave them. Returns that list (*ret_n strings, each
 * owned; maasmachine_reuse_exclude_free after the allocate; the caller keeps o's old
 * not_tags to retry without it when nothing else matches), or NULL: nothing to add. */
char **maasmachine_reuse_exclude(struct maasmachine_ctx *c,
                                 struct maas_allocate_opts *o,
                                 size_t *ret_n);
void maasmachine_reuse_exclude_free(char **v, size_t n);

/* Counts an allocation as reused or fresh. Any thread. */
void maasmachine_reuse_count(struct provider *p, bool reused);

/* A Deployed c->node carrying a reuse tag: removes it (best effort; the next pass retries). */
void maasmachine_reuse_deployed(struct maasmachine_ctx *c);

/* Sweeps w's current MAAS (w->maas; w->ident names it, NULL = the process-wide one): records
 * new hold starts in the tags' comments, untags hosts Ready longer than the hold time,
 * deletes reuse tags no machine carries, and refreshes what maasmachine_reuse_exclude leaves
 * alone in that MAAS. At most every 5 s per MAAS across workers; called on each inventory
 * refresh. Best effort: a failed call waits for the next sweep. */
void maasmachine_reuse_sweep(struct reconciler_worker *w);
/* The same in the MAAS of identity Secret ns/secret: w uses that identity for the sweep and
 * the process-wide MAAS again after it. An identity that cannot be used is skipped. */
void maasmachine_reuse_sweep_ident(struct reconciler_worker *w, const char *ns, const char *secret);

/* Registers the metrics above (provider_new). */
MUST_CHECK int maasmachine_reuse_metrics(struct provider *p);
