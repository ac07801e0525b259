/*
 * defaults: the mutating webhooks' defaulting, as JSON Patch operations on the received
 * object. Works on the raw JSON (a field of the wrong type is left alone: validation
 * reports it, as it does a list longer than RULE_NAMES_MAX, which keeps the duplicate
 * search small). Nothing is appended when nothing changes.
 */
#include <stdlib.h>
#include <string.h>

#include "validate.h"
#include "validate_rules.h"
#include "xalloc.h"

#define DEFAULT_API_SERVER_PORT 6443

/* Appends {"op": op, "path": pointer + suffix, "value": value} (takes value). */
static void patch_op(
        cJSON *patch, const char *op, const char *pointer, const char *suffix, cJSON *value)
{
        cJSON *o = cJSON_CreateObject();
        char *path = xasprintf("%s%s", pointer, suffix);

        cJSON_AddStringToObject(o, "op", op);
        cJSON_AddStringToObject(o, "path", path);
        cJSON_AddItemToObject(o, "value", value);
        cJSON_AddItemToArray(patch, o);
        free(path);
}

static bool seen_before(const cJSON *arr, const cJSON *item)
{
        for (const cJSON *p = arr->child; p && p != item; p = p->next)
                if (strcmp(p->valuestring, item->valuestring) == 0)
                        return true;
        return false;
}

static bool all_strings(const cJSON *arr)
{
        const cJSON *it;

        cJSON_ArrayForEach (it, arr) {
                if (!cJSON_IsString(it))
                        return false;
        }
        return true;
}

void defaults_machine_spec(const cJSON *spec, const char *pointer, cJSON *patch)
{
        const cJSON *tags = cJSON_GetObjectItemCaseSensitive(spec, "tags");
        const cJSON *it;
        cJSON *uniq;
        bool changed = false;

        if (!cJSON_IsArray(tags) || cJSON_GetArraySize(tags) > RULE_NAMES_MAX || !all_strings(tags))
                return;
        uniq = cJSON_CreateArray();
        cJSON_ArrayForEach (it, tags) {
                if (seen_before(tags, it))
                        changed = true;
                else
                        cJSON_AddItemToArray(uniq, cJSON_CreateString(it->valuestring));
        }
        if (changed)
                patch_op(patch, "replace", pointer, "/tags", uniq);
        else
                cJSON_Delete(uniq);
}

void defaults_cluster_spec(const cJSON *spec, const char *pointer, cJSON *patch)
{
        const cJSON *ep = cJSON_GetObjectItemCaseSensitive(spec, "controlPlaneEndpoint");
        const cJSON *host = cJSON_GetObjectItemCaseSensitive(ep, "host");
        const cJSON *port = cJSON_GetObjectItemCaseSensitive(ep, "port");
        bool no_port =
                !port || cJSON_IsNull(port) || (cJSON_IsNumber(port) && port->valuedouble == 0);

        if (!cJSON_IsObject(ep) || !cJSON_IsString(host) || !host->valuestring[0] || !no_port)
                return;
        patch_op(patch, "add", pointer, "/controlPlaneEndpoint/port",
                 cJSON_CreateNumber(DEFAULT_API_SERVER_PORT));
}

/* Adds member key (value taken) to the strategy at pointer when it lacks it. */
static void default_member(
        const cJSON *strategy, const char *pointer, const char *key, cJSON *value, cJSON *patch)
{
        char *suffix;

        if (cJSON_GetObjectItemCaseSensitive(strategy, key)) {
                cJSON_Delete(value);
                return;
        }
        suffix = xasprintf("/strategy/%s", key);
        patch_op(patch, "add", pointer, suffix, value);
        free(suffix);
}

void defaults_remediation_spec(const cJSON *spec, const char *pointer, cJSON *patch)
{
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(spec, "strategy");
        cJSON *v;

        if (!st || cJSON_IsNull(st)) {
                v = cJSON_CreateObject();
                cJSON_AddStringToObject(v, "type", SCHEMA_REMEDIATION_REBOOT);
                cJSON_AddNumberToObject(v, "retryLimit", SCHEMA_REMEDIATION_RETRY_LIMIT);
                cJSON_AddStringToObject(v, "timeout", SCHEMA_REMEDIATION_TIMEOUT);
                patch_op(patch, st ? "replace" : "add", pointer, "/strategy", v);
                return;
        }
        if (!cJSON_IsObject(st))
                return; /* validation names the type error */
        default_member(st, pointer, "type", cJSON_CreateString(SCHEMA_REMEDIATION_REBOOT), patch);
        default_member(st, pointer, "retryLimit",
                       cJSON_CreateNumber(SCHEMA_REMEDIATION_RETRY_LIMIT), patch);
        default_member(st, pointer, "timeout", cJSON_CreateString(SCHEMA_REMEDIATION_TIMEOUT),
                       patch);
}
