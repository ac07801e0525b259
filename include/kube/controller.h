#pragma once
/*
 * controller: the controller runtime. A controller owns a work queue (workqueue.h) and N
 * worker threads; informer events become keys ("namespace/name"); each worker takes a key,
 * calls the reconcile function and acts on its result, as controller-runtime does:
 *
 *   - reconcile returns < 0 (an error): the key is re-queued rate-limited (5 ms → 1000 s)
 *     and counted in controller_runtime_reconcile_errors_total;
 *   - RECONCILE_REQUEUE_AFTER: forget the key's failures, add it back after after_ms;
 *   - RECONCILE_REQUEUE: re-queue rate-limited without counting an error;
 *   - RECONCILE_DONE: forget the key.
 *
 * Metrics (controller-runtime names, label controller=<name>):
 * controller_runtime_reconcile_total{controller,result=success|error|requeue|requeue_after},
 * controller_runtime_reconcile_errors_total, controller_runtime_reconcile_time_seconds,
 * controller_runtime_max_concurrent_reconciles, controller_runtime_active_workers, and
 * workqueue_{depth,adds_total,retries_total,queue_duration_seconds,work_duration_seconds,
 * unfinished_work_seconds,longest_running_processor_seconds}{name=<name>}.
 *
 * Errors are logged once here ("Reconciler error", controller=, key=, err=), as
 * controller-runtime does, so a reconciler need not log the error it returns.
 * The workqueue_queue_duration_seconds histogram has exact _count and _sum; the queue only
 * keeps sums, so each scrape files the keys taken since the last one under their average.
 *
 * Threads: controller_enqueue* are thread-safe. worker_new/worker_free/reconcile run on the
 * worker threads: worker_new once per worker when it starts (per-thread state: its own
 * kube_client and maas_client), worker_free when it ends (also when worker_new returned
 * NULL). The same key is never reconciled by two workers at once. Ownership: the controller
 * owns its queue and threads; ops, arg, informers and metrics are borrowed. The informers'
 * handlers point into the controller: stop the informers before controller_free. The
 * metrics registry may outlive the controller (its collector then reports nothing).
 */

#include <stdbool.h>
#include <stdint.h>

#include "compiler.h"

struct clock_ops;
struct informer;
struct kube_object;
struct metrics;
struct controller;
struct workqueue_stats;

enum reconcile_outcome {
        RECONCILE_DONE,
        RECONCILE_REQUEUE,
        RECONCILE_REQUEUE_AFTER,
};

struct reconcile_result {
        enum reconcile_outcome outcome;
        uint64_t after_ms; /* RECONCILE_REQUEUE_AFTER only */
};

struct controller_ops {
        /* Per-worker state; NULL return is allowed (no state). idx is 0..workers-1. */
        void *(*worker_new)(void *arg, unsigned idx);
        void (*worker_free)(void *wctx);
        /* Reconciles ns/name (ns "" for cluster-scoped). res starts as RECONCILE_DONE. 0 or a
         * negative error (then res is ignored). */
        int (*reconcile)(void *wctx,
                         const char *ns,
                         const char *name,
                         struct reconcile_result *res);
};

struct controller_opts {
        const char *name; /* "maasmachine": the metrics' controller label */
        unsigned workers; /* 0 = 1 */
        const struct controller_ops *ops;
        void *arg;
        const struct clock_ops *clock; /* NULL = system */
        struct metrics *metrics;       /* NULL = none */
};

/* Maps an object seen by a watched informer to the keys to reconcile. Calls add(ctl, ns,
 * name) for each (any number; ns NULL or "" for cluster-scoped). Runs on the informer's
 * thread. */
typedef void (*controller_map_fn)(void *map_arg,
                                  const struct kube_object *obj,
                                  void (*add)(void *ctl, const char *ns, const char *name),
                                  void *ctl);

MUST_CHECK int controller_new(const struct controller_opts *o, struct controller **ret);
/* Enqueues keys for inf's events: the object's own key when map is NULL, else map's keys.
 * For updates both the old and the new object are mapped. Only before controller_start and
 * informer_start; up to 16 per controller (CM_ETOOBIG), 8 handlers per informer. */
MUST_CHECK int controller_watch(struct controller *c,
                                struct informer *inf,
                                controller_map_fn map,
                                void *map_arg);
/* Starts the workers. */
MUST_CHECK int controller_start(struct controller *c);
/* Queues ns/name now / after delay_ms. Thread-safe. Dropped after stop. */
void controller_enqueue(struct controller *c, const char *ns, const char *name);
void controller_enqueue_after(struct controller *c,
                              const char *ns,
                              const char *name,
                              uint64_t delay_ms);
/* Shuts the queue down and joins the workers (each finishes its current reconcile).
 * Idempotent. */
void controller_stop(struct controller *c);
/* Stops, then frees. Accepts NULL; returns NULL. */
struct controller *controller_free(struct controller *c);

/* The queue's counters (workqueue_stats): for tests and debugging. Thread-safe. */
void controller_queue_stats(struct controller *c, struct workqueue_stats *ret);
/* Wakes the workers to pick up delayed keys that became due: for tests that advance a
 * fake clock. Thread-safe. */
void controller_tick(struct controller *c);
