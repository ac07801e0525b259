/*
 * patch_helper: RFC 7386 merge-patch diffs and the "write only what changed" step of a
 * reconcile (controller-runtime's client.MergeFrom + cluster-api's patch helper, reduced).
 *
 * Design: diff_member() is the one recursive rule: objects recurse member by member,
 * anything else (arrays, scalars, type changes) is replaced whole when it differs, and a
 * member that disappeared becomes null. A member that is JSON null on one side and absent
 * on the other is no change (Kubernetes treats null as unset).
 *
 * patch_helper_write() sends the status patch first and the metadata+spec patch second:
 * when the reconciler removes the last finalizer of a deleting object, the second PATCH
 * deletes the object, and a status PATCH after it would fail with 404.
 *
 * Pure functions plus calls on a caller-owned kube_client; no shared state.
 */
#include "patch_helper.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "err.h"
#include "kube_client.h"

static cJSON *diff_objects(const cJSON *before, const cJSON *after, const char *skip);

static bool is_unset(const cJSON *x)
{
        return !x || cJSON_IsNull(x);
}

/* The patch value turning b into a (either may be NULL = absent), or NULL when equal. */
static cJSON *diff_member(const cJSON *b, const cJSON *a)
{
        if (is_unset(a))
                return is_unset(b) ? NULL : cJSON_CreateNull();
        if (is_unset(b))
                return cJSON_Duplicate(a, true);
        if (cJSON_IsObject(b) && cJSON_IsObject(a))
                return diff_objects(b, a, NULL);
        if (cJSON_Compare(b, a, true))
                return NULL;
        return cJSON_Duplicate(a, true);
}

static bool skipped(const cJSON *item, const char *skip)
{
        return skip && item->string && !strcmp(item->string, skip);
}

/* Object diff, ignoring the top-level member named skip (may be NULL). NULL when equal. */
static cJSON *diff_objects(const cJSON *before, const cJSON *after, const char *skip)
{
        cJSON *out = cJSON_CreateObject();
        const cJSON *item;
        cJSON *d;

        cJSON_ArrayForEach (item, before) {
                if (!item->string || skipped(item, skip) || is_unset(item))
                        continue;
                if (!cJSON_GetObjectItemCaseSensitive(after, item->string))
                        cJSON_AddItemToObject(out, item->string, cJSON_CreateNull());
        }
        cJSON_ArrayForEach (item, after) {
                if (!item->string || skipped(item, skip))
                        continue;
                d = diff_member(cJSON_GetObjectItemCaseSensitive(before, item->string), item);
                if (d)
                        cJSON_AddItemToObject(out, item->string, d);
        }
        if (!out->child) {
                cJSON_Delete(out);
                return NULL;
        }
        return out;
}

int merge_patch_diff(const cJSON *before, const cJSON *after, cJSON **ret)
{
        if (!before || !after || !ret)
                return CM_EINVAL;
        *ret = diff_member(before, after);
        return 0;
}

/* Serializes patch and sends it; owns patch. Replaces *latest with the answer. */
static int send_patch(struct kube_client *c,
                      const struct kube_resource *r,
                      const cJSON *after,
                      const char *subresource,
                      cJSON *patch,
                      cJSON **latest,
                      struct kube_error *e)
{
        char *text = cJSON_PrintUnformatted(patch);
        cJSON *obj = NULL;
        int ret;

        cJSON_Delete(patch);
        if (!text)
                return CM_ENOMEM;
        ret = kube_patch(c,
                         &(struct kube_patch_opts){ .resource = r,
                                                    .ns = kube_meta_str(after, "namespace"),
                                                    .name = kube_meta_str(after, "name"),
                                                    .subresource = subresource,
                                                    .type = KUBE_PATCH_MERGE,
                                                    .body = text },
                         &obj, e);
        cJSON_free(text);
        if (ret < 0)
                return ret;
        cJSON_Delete(*latest);
        *latest = obj;
        return 0;
}

/* {"status": <diff of status>} or NULL when status did not change. */
static cJSON *status_patch(const cJSON *before, const cJSON *after)
{
        cJSON *d = diff_member(cJSON_GetObjectItemCaseSensitive(before, "status"),
                               cJSON_GetObjectItemCaseSensitive(after, "status"));
        cJSON *p;

        if (!d)
                return NULL;
        p = cJSON_CreateObject();
        cJSON_AddItemToObject(p, "status", d);
        return p;
}

int patch_helper_write(struct kube_client *c,
                       const struct kube_resource *r,
                       const cJSON *before,
                       const cJSON *after,
                       cJSON **ret_latest,
                       unsigned *ret_writes,
                       struct kube_error *e)
{
        cJSON *main_patch = NULL;
        cJSON *stat_patch = NULL;
        cJSON *latest = NULL;
        unsigned writes = 0;
        int ret = CM_EINVAL;

        if (!cJSON_IsObject(before) || !cJSON_IsObject(after) || !kube_meta_str(after, "name"))
                goto out;
        main_patch = diff_objects(before, after, "status");
        stat_patch = status_patch(before, after);
        ret = 0;
        if (stat_patch) {
                ret = send_patch(c, r, after, "status", stat_patch, &latest, e);
                stat_patch = NULL;
                if (ret < 0)
                        goto out;
                writes++;
        }
        if (main_patch) {
                ret = send_patch(c, r, after, NULL, main_patch, &latest, e);
                main_patch = NULL;
                if (ret < 0)
                        goto out;
                writes++;
        }
        if (ret_latest) {
                *ret_latest = latest;
                latest = NULL;
        }
        if (ret_writes)
                *ret_writes = writes;
out:
        cJSON_Delete(main_patch);
        cJSON_Delete(stat_patch);
        cJSON_Delete(latest);
        return ret;
}
