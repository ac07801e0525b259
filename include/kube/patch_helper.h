#pragma once
/*
 * patch_helper: write only what a reconcile changed, as controller-runtime's patch helper
 * does. Given the object as read (before) and as the reconciler wants it (after), it
 * computes RFC 7386 merge patches and sends metadata+spec as one PATCH and status as one
 * PATCH on /status. Nothing is sent for a part that did not change, so a steady-state
 * reconcile writes nothing. (No PATCH carries a resourceVersion unless the caller changed
 * it: like controller-runtime's MergeFrom, the last writer wins per field.)
 *
 * Pure functions plus one call on a caller-owned kube_client; same threading as the client.
 */

#include <cjson/cJSON.h>

#include "compiler.h"

struct kube_client;
struct kube_error;
struct kube_resource;

/* The merge patch that turns before into after (objects recurse, arrays and scalars are
 * replaced, removed members become null). *ret is NULL when they are equal. */
MUST_CHECK int merge_patch_diff(const cJSON *before, const cJSON *after, cJSON **ret);

/* Patches the object named by after's metadata (name, namespace): the diff of status via
 * /status first, then the diff of everything else (metadata, spec) on the object. Status
 * goes first because removing the last finalizer of a deleting object deletes it, after
 * which a status PATCH would 404. A changed metadata.resourceVersion lands in the patch and
 * so acts as a precondition (409 when stale). r needs a status subresource when status
 * changed. *ret_writes (may be NULL) gets the number of PATCH calls made (0, 1 or 2).
 * *ret_latest (may be NULL) gets the object the last PATCH returned, or NULL when nothing
 * was written. Both are written only on success. CM_EINVAL when before/after are not
 * objects or after has no metadata.name; otherwise errors as kube_patch. */
MUST_CHECK int patch_helper_write(struct kube_client *c,
                                  const struct kube_resource *r,
                                  const cJSON *before,
                                  const cJSON *after,
                                  cJSON **ret_latest,
                                  unsigned *ret_writes,
                                  struct kube_error *e);
