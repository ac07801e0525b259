/*
 * legacy: the status migration of objects the reference provider wrote (legacy.h).
 */
#include "legacy.h"

#include <stdlib.h>
#include <string.h>

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

bool legacy_reference_record_name(const char *host, const char *cluster, const char *dns_domain)
{
        size_t nc, nd;

        if (!host || !cluster || !dns_domain || !*cluster || !*dns_domain)
                return false;
        nc = strlen(cluster);
        nd = strlen(dns_domain);
        /* <cluster> "-" <6 hex> "." <domain> */
        if (strlen(host) != nc + 1 + 6 + 1 + nd || strncmp(host, cluster, nc) != 0 ||
            host[nc] != '-' || host[nc + 7] != '.' || strcmp(host + nc + 8, dns_domain) != 0)
                return false;
        for (size_t i = nc + 1; i < nc + 7; i++)
                if (!((host[i] >= '0' && host[i] <= '9') || (host[i] >= 'a' && host[i] <= 'f')))
                        return false;
        return true;
}
