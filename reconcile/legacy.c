/*
 * legacy: the status migration of objects the reference provider wrote (legacy.h).
 */
#include "legacy.h"

#include <stdlib.h>

#include "json.h"
#include "kube_client.h"
#include "log.h"
#include "reconciler.h"

#define LOGGER "migration"

int legacy_migrate_status(struct reconciler_worker *w,
                          const struct kube_resource *r,
                          cJSON **cur,
                          cJSON *encoded)
{
        cJSON *status = cJSON_DetachItemFromObjectCaseSensitive(encoded, "status");
        const cJSON *stored = cJSON_GetObjectItemCaseSensitive(*cur, "status");
        cJSON *after = NULL;
        int err = 0;

        cJSON_Delete(encoded);
        if (!status || !stored || cJSON_Compare(stored, status, true))
                goto out;
        log_info(LOGGER, "writing the status in the current shape", "kind=%s object=%s/%s",
                 json_find_str(*cur, "kind", NULL), kube_meta_str(*cur, "namespace"),
                 kube_meta_str(*cur, "name"));
        after = cJSON_Duplicate(*cur, true);
        if (!after)
                abort();
        cJSON_ReplaceItemInObjectCaseSensitive(after, "status", status);
        status = NULL;
        err = reconciler_write(w, r, cur, after, false, NULL);
out:
        cJSON_Delete(status);
        return err;
}
