#pragma once
/*
 * kube_events: a core/v1 Event recorder (what `kubectl describe` shows), with client-go's
 * aggregation of repeats: an event with the same involved object, type, reason and message
 * as one recorded in the last 10 minutes increments that Event's count and lastTimestamp
 * (a PATCH) instead of creating another object.
 *
 * Recording never blocks a reconciler: event_record() copies the event into a bounded queue
 * (1024; when full the event is dropped and counted) and a background thread writes it.
 * Events are named <object name>.<hex nanoseconds> in the object's namespace ("default"
 * for cluster-scoped objects); first/lastTimestamp come from the clock's wall time at
 * event_record(); the aggregation window is measured on the clock's monotonic time.
 * Like client-go, each involved object may have 25 events written at once and then one per
 * 5 minutes (repeats included); the rest are dropped and counted. And once one (object,
 * type, reason) had 10 distinct messages within 10 minutes, further ones are combined into
 * a single Event whose message is "(combined from similar events): <newest message>".
 * Messages are truncated to 1024 bytes. No secrets belong in events (callers' duty).
 *
 * Threads: every function is thread-safe. Ownership: the recorder owns its queue and
 * thread; config, limiter and clock are borrowed.
 */

#include <stdint.h>

#include <cjson/cJSON.h>

#include "compiler.h"

struct clock_ops;
struct kube_config;
struct token_bucket;
struct metrics;
struct event_recorder;

struct event_recorder_opts {
        const struct kube_config *config;
        struct token_bucket *limiter;  /* NULL = unlimited */
        const char *component;         /* source.component / reportingController */
        const char *host;              /* source.host; NULL = hostname */
        const struct clock_ops *clock; /* NULL = system */
        struct metrics *metrics;       /* NULL = none; else capmaas_events_dropped_total */
        unsigned queue_len;            /* 0 = 1024 (tests use a small queue) */
};

MUST_CHECK int event_recorder_new(const struct event_recorder_opts *o, struct event_recorder **ret);
/* Queues an event about obj (apiVersion, kind, metadata.namespace/name/uid/resourceVersion
 * are copied from it). type is "Normal" or "Warning"; reason is CamelCase. Never blocks on
 * the API server. r NULL = no recorder: does nothing (reconciler tests). */
void event_record(struct event_recorder *r,
                  const cJSON *obj,
                  const char *type,
                  const char *reason,
                  const char *fmt,
                  ...) PRINTF_LIKE(5, 6);
/* Waits until every queued event was written (or timeout_ms passed): for tests and
 * shutdown. CM_ETIMEDOUT otherwise. */
MUST_CHECK int event_recorder_flush(struct event_recorder *r, uint64_t timeout_ms);
/* Events dropped so far (queue full, stopping, spam filter, or invalid: type not
 * Normal/Warning, no reason, object without metadata.name). */
uint64_t event_recorder_dropped(const struct event_recorder *r);
/* Flushes for up to a second, stops the thread (after the write in progress), drops what
 * is still queued, frees. Accepts NULL; returns NULL. */
struct event_recorder *event_recorder_free(struct event_recorder *r);
