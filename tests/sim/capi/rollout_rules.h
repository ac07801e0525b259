#pragma once
/*
 * capi-sim's rollout rules (rollout_rules.c): the arithmetic of Cluster API's
 * MachineDeployment and KubeadmControlPlane rollouts, as pure functions of the members an
 * owner has (see rollout.c for what CAPI does). Apart from the simulator's clients and
 * informers, so that tests/unit/sim/test_capi_rollout.c can drive them on base alone.
 * Every function may be called from any thread; nothing is kept.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#define CAPI_HASH_LEN     64
#define CAPI_SET_NAME_LEN 64

/* What the index keeps of one Machine (copied out by capi_index_members). */
struct capi_member {
        char name[254];
        char created[40]; /* metadata.creationTimestamp, "" while only created locally */
        uint64_t seq;     /* insertion order: the tie-break for equal timestamps */
        bool ready;       /* infrastructure provisioned (either contract's field) */
        bool deleting;    /* metadata.deletionTimestamp set (or deleted by us) */
        bool remediate;   /* OwnerRemediated False: marked by a MachineHealthCheck */
        /* spec.failureDomain, "" for none */
        char failure_domain[64];
        char hash[64];    /* a MachineDeployment's: its MachineSet's machine-template-hash */
        char tmpl[254];   /* the MaasMachineTemplate it was cloned from */
        char version[64]; /* spec.version, "" for none */
};

/* A rolling-update intOrString: an integer, or "N%" of replicas (rounded up when round_up,
 * else down); def when absent or not one of those. */
size_t capi_int_or_percent(const cJSON *v, size_t replicas, bool round_up, size_t def);
/* The owner's rolling-update settings: v1beta2 spec.rollout.strategy.rollingUpdate, v1beta1
 * spec.strategy.rollingUpdate (MachineDeployment) or spec.rolloutStrategy.rollingUpdate
 * (KubeadmControlPlane); NULL when none. */
const cJSON *capi_rolling_update(const cJSON *owner);
/* A MachineDeployment's maxSurge and maxUnavailable for `want` replicas (defaults 1 and 0;
 * both 0 reads as maxUnavailable 1). */
void capi_md_strategy(const cJSON *md, size_t want, size_t *ret_surge, size_t *ret_unavailable);
/* The hash of the template's rollout fields, in decimal. */
void capi_md_template_hash(const cJSON *md, char out[CAPI_HASH_LEN]);
/* The new MachineSet's name (<md>-<5 characters>) and its machine-template-hash label
 * (<hash>-<the same 5>), both derived from the hash and the MachineDeployment's uid. */
void capi_md_set_name(const char *md_name,
                      const char *md_uid,
                      const char *hash,
                      char name[CAPI_SET_NAME_LEN],
                      char label[CAPI_HASH_LEN]);
/* One rolling-update step over m[0..n) (oldest first; is_new[i]: member i is the new
 * MachineSet's): returns how many new Machines to create and sets del[i] for each old one
 * to delete now. Pure. */
size_t capi_md_rollout_plan(const struct capi_member *m,
                            const bool *is_new,
                            size_t n,
                            size_t want,
                            size_t surge,
                            size_t unavailable,
                            bool *del);

enum capi_kcp_step {
        CAPI_KCP_NONE, /* nothing to roll out, or the replica count acts first */
        CAPI_KCP_WAIT, /* a Machine is not ready or is being deleted */
        CAPI_KCP_UP,   /* create one new Machine */
        CAPI_KCP_DOWN, /* delete m[*ret_del] */
};

/* Whether a control-plane Machine is outdated against the KCP's template name and version
 * (NULL or "": not compared). */
bool capi_kcp_outdated(const struct capi_member *m, const char *tmpl, const char *version);
/* The next KubeadmControlPlane rollout step over m[0..n) (oldest first, outdated[i]), with
 * rolloutStrategy.rollingUpdate.maxSurge `surge` (0 or 1). Pure. */
enum capi_kcp_step capi_kcp_rollout_step(const struct capi_member *m,
                                         const bool *outdated,
                                         size_t n,
                                         size_t want,
                                         size_t surge,
                                         size_t *ret_del);
