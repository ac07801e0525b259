#pragma once
/*
 * informer: a list+watch cache of one resource kind (kubernetes.md §5.5), the read side of
 * every controller.
 *
 * An informer lists the kind, then watches from the list's resourceVersion; on a dropped
 * watch it reconnects from the last resourceVersion it saw (backoff with jitter, 1 s → 30 s),
 * and on 410 Gone it relists and emits the differences. Every --sync-period it replays the
 * cache to the handlers as updates (old == new) without any API call.
 *
 * Objects are immutable, reference-counted snapshots (struct kube_object): a reader takes a
 * reference and may keep it as long as it likes while the informer moves on. Nobody ever
 * modifies a kube_object's JSON; to change an object, copy it (cJSON_Duplicate) and write it.
 *
 * Indexes: by namespace/name, and by the `cluster.x-k8s.io/cluster-name` label.
 *
 * Memory: the cache keeps each object as compact JSON text, without metadata.managedFields
 * (never read by a controller, often the largest part of an object): ~2.3 KiB per
 * MaasMachine against ~14 KiB as a cJSON tree, so 10 000 of them take ~22 MiB. Each
 * informer_get/informer_list therefore returns a snapshot parsed for that call (~20 us for
 * a MaasMachine at -O2): two gets of an unchanged object give equal, distinct kube_objects. Take
 * what a reconcile needs once and keep the reference, rather than getting it repeatedly.
 *
 * Events: a watch event's object reaches the handlers as delivered (no re-parse); an
 * update's old object and resync replays are parsed from the cache. A relist reports an
 * update only for objects whose resourceVersion changed, adds for new ones and deletes
 * for vanished ones (with the last cached state).
 *
 * Threads: one watch thread per informer. Handlers run on that thread, in event order, and
 * must be quick (enqueue a key, nothing more). informer_get/informer_list/has_synced are
 * thread-safe (a read lock). Ownership: the informer owns its cache; kube_object references
 * returned to callers belong to them (kube_object_unref / kube_object_list_free). The config,
 * limiter, clock and metrics are borrowed and must outlive the informer.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "compiler.h"

struct clock_ops;
struct kube_config;
struct token_bucket;
struct kube_resource;
struct metrics;

/* ---- immutable object snapshots ---- */

struct kube_object;

/* The object (never modify it). Valid while the reference is held. */
const cJSON *kube_object_json(const struct kube_object *o);
const char *kube_object_namespace(const struct kube_object *o); /* "" for cluster-scoped */
const char *kube_object_name(const struct kube_object *o);
const char *kube_object_uid(const struct kube_object *o);
const char *kube_object_resource_version(const struct kube_object *o);
/* The cluster.x-k8s.io/cluster-name label, or NULL. */
const char *kube_object_cluster_name(const struct kube_object *o);
/* Takes a reference (thread-safe); returns o. */
struct kube_object *kube_object_ref(struct kube_object *o);
/* Drops a reference; the last one frees. Accepts NULL. */
void kube_object_unref(struct kube_object *o);
/* Wraps obj (taking ownership) in a new snapshot with one reference. CM_EINVAL if it has
 * no metadata.name; obj is consumed (freed) then too. For tests and for handing freshly
 * written objects around. */
MUST_CHECK int kube_object_new(cJSON *obj, struct kube_object **ret);
/* Unrefs n objects and frees the array. Accepts NULL. */
void kube_object_list_free(struct kube_object **objs, size_t n);

/* ---- informer ---- */

struct informer;

struct informer_handler {
        /* Any may be NULL. Objects are borrowed for the call (kube_object_ref to keep one). */
        void (*on_add)(void *arg, const struct kube_object *obj);
        void (*on_update)(void *arg, const struct kube_object *old, const struct kube_object *cur);
        void (*on_delete)(void *arg, const struct kube_object *last);
        void *arg;
};

struct informer_opts {
        const struct kube_resource *resource; /* borrowed, usually static */
        const struct kube_config *config;     /* borrowed */
        struct token_bucket *limiter;         /* borrowed; NULL = unlimited */
        const char *namespace;                /* NULL or "" = all (--namespace) */
        const char *label_selector;           /* NULL = none (--watch-filter becomes
                                                 "cluster.x-k8s.io/watch-filter=<v>") */
        uint64_t resync_ms;                   /* 0 = never (--sync-period) */
        const char *user_agent;               /* copied; NULL = the client's default */
        const struct clock_ops *clock;        /* NULL = system */
        struct metrics *metrics;              /* NULL = none (reserved: no series yet) */
};

MUST_CHECK int informer_new(const struct informer_opts *o, struct informer **ret);
/* Registers a handler (copied); only before informer_start (CM_EINVAL). Up to 8 per
 * informer (CM_ETOOBIG). */
MUST_CHECK int informer_add_handler(struct informer *inf, const struct informer_handler *h);
/* Starts the list+watch thread. CM_EINVAL without a config or when already started. */
MUST_CHECK int informer_start(struct informer *inf);
/* True once the first list has been delivered to the handlers. */
bool informer_has_synced(struct informer *inf);
/* Waits up to timeout_ms for has_synced; CM_ETIMEDOUT otherwise. */
MUST_CHECK int informer_wait_synced(struct informer *inf, uint64_t timeout_ms);
/* Stops and joins the thread (within about a second; a list in flight first finishes or
 * times out). Idempotent. */
void informer_stop(struct informer *inf);
/* Stops, then frees the cache. Accepts NULL; returns NULL. */
struct informer *informer_free(struct informer *inf);

/* A new snapshot of ns/name (one reference, the caller's), or NULL when not cached. ns ""
 * or NULL for cluster-scoped. */
struct kube_object *informer_get(struct informer *inf, const char *ns, const char *name);
/* Snapshots of every cached object in ns (NULL = all) whose cluster-name label equals
 * cluster (NULL = any; uses the index), sorted by namespace/name. *ret is NULL when n is 0.
 * Only matching objects are parsed; prefer a filter to listing everything. */
MUST_CHECK int informer_list(struct informer *inf,
                             const char *ns,
                             const char *cluster,
                             struct kube_object ***ret,
                             size_t *ret_n);
/* Calls fn(arg, ns, name) for the same objects informer_list would return (unsorted),
 * without parsing any: for controller map functions that only need keys (fn may be the
 * `add` a controller_map_fn receives, with arg = its ctl). fn runs after the read lock is
 * released, so it may call anything. Returns the number of calls. */
size_t informer_each_key(struct informer *inf,
                         const char *ns,
                         const char *cluster,
                         void (*fn)(void *arg, const char *ns, const char *name),
                         void *arg);
/* Calls fn(arg, obj) for the same objects informer_list would return (unsorted), parsing
 * one at a time and dropping each when fn returns: a pass over thousands of objects holds
 * one tree, not thousands (informer_list of 3 000 MaasMachines is about 40 MiB of trees).
 * obj is borrowed (kube_object_ref to keep it); objects deleted during the pass are skipped. fn
 * runs with no lock held. Returns the number of calls. */
size_t informer_each(struct informer *inf,
                     const char *ns,
                     const char *cluster,
                     void (*fn)(void *arg, struct kube_object *obj),
                     void *arg);
/* Number of cached objects. */
size_t informer_len(struct informer *inf);
