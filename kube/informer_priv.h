#pragma once
/*
 * informer_priv: the informer's internal seam, for unit tests (tests/unit/reconcile/
 * test_informer_store.c). These functions do exactly what the watch thread does with what
 * kube_list/kube_watch deliver (store update, then handlers), without any API call, so the
 * cache semantics can be tested with synthetic events. Call them only on an informer that
 * was never started (they run the handlers on the calling thread); informer_get/list may
 * run concurrently on other threads, as in production.
 */

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "compiler.h"
#include "kube_client.h"

struct informer;

/* One watch event, as the watch callback gets it (obj is consumed). BOOKMARK only moves the
 * last-seen resourceVersion. CM_EINVAL (and obj freed) when obj has no metadata.name. */
MUST_CHECK int informer_feed_event(struct informer *inf, enum kube_watch_event type, cJSON *obj);
/* A list result (consumed): replaces the cache, emitting adds for new objects, updates for
 * changed resourceVersions and deletes for objects gone; marks the informer synced. */
MUST_CHECK int informer_feed_list(struct informer *inf, cJSON *list);
/* Replays the cache to the handlers if the resync period has passed on the clock. Returns
 * the number of objects replayed. */
size_t informer_resync_if_due(struct informer *inf);
/* The last resourceVersion seen (list, event or bookmark), or "" (borrowed). */
const char *informer_last_rv(struct informer *inf);
/* API calls made so far (lists + watches). */
uint64_t informer_api_calls(struct informer *inf);
/* Lists made so far (the first one, and one per 410). */
uint64_t informer_list_calls(struct informer *inf);
/* Bytes the cache's entries take (text and index fields, not malloc overhead). */
size_t informer_cache_bytes(struct informer *inf);
