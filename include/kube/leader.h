#pragma once
/*
 * leader: leader election on a coordination.k8s.io/v1 Lease with client-go's semantics
 * (kubernetes.md §5.4): lease duration 15 s, renew deadline 10 s, retry period 2 s; a
 * candidate takes the Lease only when its holder has not renewed it for leaseDuration as
 * measured by the candidate's OWN clock since it last saw the Lease change (never by
 * comparing timestamps across machines); the leader renews every retry period and gives
 * up leadership if it could not renew within the renew deadline; on shutdown the leader
 * releases the Lease (holderIdentity cleared, leaseDurationSeconds 1) so a successor takes
 * over at once. leader_election_master_status{name} is 1 while leading.
 *
 * Threads: one elector thread. on_started runs on it once leadership is acquired;
 * on_stopped runs on it when leadership is lost (the process should exit, as
 * controller-runtime does) — not when leader_stop() releases it. leader_is_leader is
 * thread-safe. Ownership: config, limiter, clock and metrics are borrowed.
 *
 * Time: the waits between attempts are real time (retry_ms); lease expiry and the renew
 * deadline are measured on `clock`, so tests drive a fake clock with a short retry_ms.
 * Candidates wait retry_ms plus up to 1.2 x retry_ms of jitter between attempts (client-go's
 * JitterUntil). A leader renews every retry_ms with a PUT of its cached Lease (no GET) and
 * falls back to GET+PUT when that conflicts; it gives up at once when it sees another holder.
 */

#include <stdbool.h>
#include <stdint.h>

#include "compiler.h"

struct clock_ops;
struct kube_config;
struct token_bucket;
struct metrics;
struct leader;

struct leader_opts {
        const struct kube_config *config;
        struct token_bucket *limiter;  /* NULL = unlimited */
        const char *namespace;         /* Lease namespace */
        const char *name;              /* controller-leader-election-capmaas */
        const char *identity;          /* hostname_<uuid>; NULL = generated */
        uint64_t lease_ms;             /* 0 = 15000 */
        uint64_t renew_deadline_ms;    /* 0 = 10000 */
        uint64_t retry_ms;             /* 0 = 2000 */
        const struct clock_ops *clock; /* NULL = system */
        struct metrics *metrics;       /* NULL = none */
        void (*on_started)(void *arg);
        void (*on_stopped)(void *arg);
        void *arg;
};

/* CM_EINVAL when namespace/name are missing or the periods break client-go's rule:
 * 1.2 x retry < renew deadline < lease duration. */
MUST_CHECK int leader_new(const struct leader_opts *o, struct leader **ret);
/* Starts campaigning on the elector thread. CM_EINVAL when already started. */
MUST_CHECK int leader_start(struct leader *l);
bool leader_is_leader(struct leader *l);
/* The identity this elector campaigns with (borrowed). */
const char *leader_identity(const struct leader *l);
/* Stops campaigning, releases the Lease if held, joins the thread. Idempotent. Called from
 * on_started/on_stopped it only asks the thread to stop; a later call (or leader_free)
 * from another thread joins it. */
void leader_stop(struct leader *l);
/* Tests: stops like a killed process would: joins the thread without releasing the Lease
 * and without calling on_stopped. Idempotent; leader_stop() after it does nothing more. */
void leader_abandon(struct leader *l);
/* Tests: the number of acquire/renew attempts completed so far (to wait for progress). */
uint64_t leader_attempts(struct leader *l);
/* leader_stop(), then frees. Accepts NULL; returns NULL. */
struct leader *leader_free(struct leader *l);
