/* kube-sim discovery: /version, health, aggregated and legacy discovery, OpenAPI v3. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks.h"
#include "xalloc.h"

#define AGG_CT "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

static const char *const verbs[] = { "create", "delete", "deletecollection", "get",
                                     "list",   "patch",  "update",           "watch" };

/* Rank of a Kubernetes version string: higher sorts first. */
static long version_rank(const char *v)
{
        long major = 0, minor = 0, stage = 3;
        const char *p = v;
        char *end;

        if (*p != 'v')
                return -1;
        major = strtol(p + 1, &end, 10);
        if (end == p + 1)
                return -1;
        if (!strncmp(end, "beta", 4)) {
                stage = 2;
                minor = strtol(end + 4, NULL, 10);
        } else if (!strncmp(end, "alpha", 5)) {
                stage = 1;
                minor = strtol(end + 5, NULL, 10);
        } else if (*end) {
                return -1;
        }
        return stage * 1000000 + major * 1000 + minor;
}

/* Served versions of group in preference order (array of strings). lock held */
static cJSON *group_versions(const char *group)
{
        cJSON *out = cJSON_CreateArray();
        const struct kres *r;

        for (r = ks.res; r; r = r->next) {
                const cJSON *v;
                int idx = 0;
                bool seen = false;

                if (!r->served || strcmp(r->group, group) != 0)
                        continue;
                cJSON_ArrayForEach (v, out) {
                        if (!strcmp(v->valuestring, r->version))
                                seen = true;
                        else if (!seen && version_rank(v->valuestring) >= version_rank(r->version))
                                idx++;
                }
                if (!seen)
                        cJSON_InsertItemInArray(out, idx, cJSON_CreateString(r->version));
        }
        return out;
}

/* Distinct named groups in registration order. lock held */
static cJSON *named_groups(void)
{
        cJSON *out = cJSON_CreateArray();
        const struct kres *r;

        for (r = ks.res; r; r = r->next) {
                const cJSON *g;
                bool seen = false;

                if (!r->served || !r->group[0])
                        continue;
                cJSON_ArrayForEach (g, out) {
                        seen = seen || !strcmp(g->valuestring, r->group);
                }
                if (!seen)
                        cJSON_AddItemToArray(out, cJSON_CreateString(r->group));
        }
        return out;
}

static cJSON *verbs_array(void)
{
        return cJSON_CreateStringArray(verbs, (int)ARRAY_SIZE(verbs));
}

static cJSON *gvk(const struct kres *r)
{
        cJSON *k = cJSON_CreateObject();

        cJSON_AddStringToObject(k, "group", r->group);
        cJSON_AddStringToObject(k, "version", r->version);
        cJSON_AddStringToObject(k, "kind", r->kind);
        return k;
}

static cJSON *agg_resource(const struct kres *r)
{
        const char *sv[] = { "get", "patch", "update" };
        cJSON *o = cJSON_CreateObject();
        cJSON *subs, *s;

        cJSON_AddStringToObject(o, "resource", r->plural);
        cJSON_AddItemToObject(o, "responseKind", gvk(r));
        cJSON_AddStringToObject(o, "scope", r->namespaced ? "Namespaced" : "Cluster");
        cJSON_AddStringToObject(o, "singularResource", r->singular);
        cJSON_AddItemToObject(o, "verbs", verbs_array());
        if (cJSON_GetArraySize(r->short_names))
                cJSON_AddItemToObject(o, "shortNames", cJSON_Duplicate(r->short_names, true));
        if (cJSON_GetArraySize(r->categories))
                cJSON_AddItemToObject(o, "categories", cJSON_Duplicate(r->categories, true));
        if (r->status_sub) {
                subs = cJSON_AddArrayToObject(o, "subresources");
                s = cJSON_CreateObject();
                cJSON_AddStringToObject(s, "subresource", "status");
                cJSON_AddItemToObject(s, "responseKind", gvk(r));
                cJSON_AddItemToObject(s, "verbs", cJSON_CreateStringArray(sv, 3));
                cJSON_AddItemToArray(subs, s);
        }
        return o;
}

/* A group object whose "versions" holds one_version(group, v) for each version v of group. */
static cJSON *group_with_versions(const char *group,
                                  cJSON *(*one_version)(const char *group, const char *version))
{
        cJSON *g = cJSON_CreateObject();
        cJSON *vers = cJSON_AddArrayToObject(g, "versions");
        cJSON *names = group_versions(group);
        const cJSON *v;

        cJSON_ArrayForEach (v, names)
                cJSON_AddItemToArray(vers, one_version(group, v->valuestring));
        cJSON_Delete(names);
        return g;
}

static cJSON *agg_version(const char *group, const char *version)
{
        cJSON *ver = cJSON_CreateObject();
        cJSON *res = cJSON_AddArrayToObject(ver, "resources");
        const struct kres *r;

        cJSON_AddStringToObject(ver, "version", version);
        for (r = ks.res; r; r = r->next)
                if (r->served && !strcmp(r->group, group) && !strcmp(r->version, version))
                        cJSON_AddItemToArray(res, agg_resource(r));
        cJSON_AddStringToObject(ver, "freshness", "Current");
        return ver;
}

static cJSON *agg_group(const char *group)
{
        cJSON *g = group_with_versions(group, agg_version);

        cJSON_AddStringToObject(cJSON_AddObjectToObject(g, "metadata"), "name", group);
        return g;
}

static void agg_reply(struct kresp *resp, bool core)
{
        cJSON *out = cJSON_CreateObject();
        cJSON *items;
        const cJSON *g;
        cJSON *groups;

        cJSON_AddStringToObject(out, "kind", "APIGroupDiscoveryList");
        cJSON_AddStringToObject(out, "apiVersion", "apidiscovery.k8s.io/v2");
        cJSON_AddObjectToObject(out, "metadata");
        items = cJSON_AddArrayToObject(out, "items");
        if (core) {
                cJSON_AddItemToArray(items, agg_group(""));
        } else {
                groups = named_groups();
                cJSON_ArrayForEach (g, groups) {
                        cJSON_AddItemToArray(items, agg_group(g->valuestring));
                }
                cJSON_Delete(groups);
        }
        kresp_json(resp, 200, out);
        resp->content_type = AGG_CT;
}

static cJSON *legacy_resource(const struct kres *r, bool status)
{
        const char *sv[] = { "get", "patch", "update" };
        cJSON *o = cJSON_CreateObject();
        char *name = status ? xasprintf("%s/status", r->plural) : xstrdup(r->plural);

        cJSON_AddStringToObject(o, "name", name);
        cJSON_AddStringToObject(o, "singularName", status ? "" : r->singular);
        cJSON_AddBoolToObject(o, "namespaced", r->namespaced);
        cJSON_AddStringToObject(o, "kind", r->kind);
        cJSON_AddItemToObject(o, "verbs", status ? cJSON_CreateStringArray(sv, 3) : verbs_array());
        if (!status && cJSON_GetArraySize(r->short_names))
                cJSON_AddItemToObject(o, "shortNames", cJSON_Duplicate(r->short_names, true));
        if (!status && cJSON_GetArraySize(r->categories))
                cJSON_AddItemToObject(o, "categories", cJSON_Duplicate(r->categories, true));
        free(name);
        return o;
}

static bool resource_list(struct kresp *resp, const char *group, const char *version)
{
        cJSON *out = cJSON_CreateObject();
        cJSON *res;
        const struct kres *r;
        char *gv = group[0] ? xasprintf("%s/%s", group, version) : xstrdup(version);
        bool any = false;

        cJSON_AddStringToObject(out, "kind", "APIResourceList");
        cJSON_AddStringToObject(out, "apiVersion", "v1");
        cJSON_AddStringToObject(out, "groupVersion", gv);
        res = cJSON_AddArrayToObject(out, "resources");
        for (r = ks.res; r; r = r->next) {
                if (!r->served || strcmp(r->group, group) != 0 || strcmp(r->version, version) != 0)
                        continue;
                any = true;
                cJSON_AddItemToArray(res, legacy_resource(r, false));
                if (r->status_sub)
                        cJSON_AddItemToArray(res, legacy_resource(r, true));
        }
        free(gv);
        if (!any) {
                cJSON_Delete(out);
                return false;
        }
        kresp_json(resp, 200, out);
        return true;
}

static cJSON *api_version(const char *group, const char *version)
{
        cJSON *o = cJSON_CreateObject();
        char *gv = xasprintf("%s/%s", group, version);

        cJSON_AddStringToObject(o, "groupVersion", gv);
        cJSON_AddStringToObject(o, "version", version);
        free(gv);
        return o;
}

static cJSON *api_group(const char *group)
{
        cJSON *g = group_with_versions(group, api_version);
        const cJSON *vers = cJSON_GetObjectItemCaseSensitive(g, "versions");

        cJSON_AddStringToObject(g, "name", group);
        if (cJSON_GetArraySize(vers) > 0)
                cJSON_AddItemToObject(g, "preferredVersion",
                                      cJSON_Duplicate(cJSON_GetArrayItem(vers, 0), true));
        return g;
}

static void legacy_api(struct kresp *resp)
{
        cJSON *out = cJSON_CreateObject();
        cJSON *cidrs = cJSON_AddArrayToObject(out, "serverAddressByClientCIDRs");
        cJSON *c = cJSON_CreateObject();
        const char *v1[] = { "v1" };

        cJSON_AddStringToObject(out, "kind", "APIVersions");
        cJSON_AddItemToObject(out, "versions", cJSON_CreateStringArray(v1, 1));
        cJSON_AddStringToObject(c, "clientCIDR", "0.0.0.0/0");
        cJSON_AddStringToObject(c, "serverAddress", ks.host);
        cJSON_AddItemToArray(cidrs, c);
        kresp_json(resp, 200, out);
}

static void legacy_apis(struct kresp *resp)
{
        cJSON *out = cJSON_CreateObject();
        cJSON *arr = cJSON_AddArrayToObject(out, "groups");
        cJSON *groups = named_groups();
        const cJSON *g;

        cJSON_AddStringToObject(out, "kind", "APIGroupList");
        cJSON_AddStringToObject(out, "apiVersion", "v1");
        cJSON_ArrayForEach (g, groups) {
                cJSON_AddItemToArray(arr, api_group(g->valuestring));
        }
        cJSON_Delete(groups);
        kresp_json(resp, 200, out);
}

static void version_reply(struct kresp *resp)
{
        cJSON *v = cJSON_CreateObject();

        cJSON_AddStringToObject(v, "major", "1");
        cJSON_AddStringToObject(v, "minor", "32");
        cJSON_AddStringToObject(v, "gitVersion", "v1.32.0");
        cJSON_AddStringToObject(v, "gitCommit", "kube-sim");
        cJSON_AddStringToObject(v, "gitTreeState", "clean");
        cJSON_AddStringToObject(v, "buildDate", "2026-01-01T00:00:00Z");
        cJSON_AddStringToObject(v, "goVersion", "go1.23.0");
        cJSON_AddStringToObject(v, "compiler", "gc");
        cJSON_AddStringToObject(v, "platform", "linux/amd64");
        kresp_json(resp, 200, v);
}

/* ---- OpenAPI v3 ---- */

static cJSON *param(const char *name)
{
        cJSON *p = cJSON_CreateObject();

        cJSON_AddStringToObject(p, "name", name);
        cJSON_AddStringToObject(p, "in", "query");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(p, "schema"), "type", "string");
        cJSON_AddStringToObject(p, "description", name);
        return p;
}

static cJSON *operation(const struct kres *r, const char *verb, bool write)
{
        cJSON *op = cJSON_CreateObject();
        cJSON *params;
        char *id = xasprintf("%s%s", verb, r->kind);

        cJSON_AddStringToObject(op, "operationId", id);
        cJSON_AddStringToObject(op, "x-kubernetes-action", verb);
        cJSON_AddItemToObject(op, "x-kubernetes-group-version-kind", gvk(r));
        params = cJSON_AddArrayToObject(op, "parameters");
        cJSON_AddItemToArray(params, param("dryRun"));
        if (write) {
                cJSON_AddItemToArray(params, param("fieldManager"));
                cJSON_AddItemToArray(params, param("fieldValidation"));
                cJSON_AddItemToArray(params, param("force"));
        }
        cJSON_AddObjectToObject(op, "responses");
        free(id);
        return op;
}

static cJSON *gv_doc(const char *group, const char *version)
{
        cJSON *doc = cJSON_CreateObject();
        cJSON *info = cJSON_AddObjectToObject(doc, "info");
        cJSON *paths;
        const struct kres *r;

        cJSON_AddStringToObject(doc, "openapi", "3.0.0");
        cJSON_AddStringToObject(info, "title", "Kubernetes");
        cJSON_AddStringToObject(info, "version", "v1.32.0");
        paths = cJSON_AddObjectToObject(doc, "paths");
        cJSON_AddObjectToObject(cJSON_AddObjectToObject(doc, "components"), "schemas");
        for (r = ks.res; r; r = r->next) {
                char *p;
                cJSON *item;

                if (!r->served || strcmp(r->group, group) != 0 || strcmp(r->version, version) != 0)
                        continue;
                if (group[0])
                        p = xasprintf("/apis/%s/%s%s/%s/{name}", group, version,
                                      r->namespaced ? "/namespaces/{namespace}" : "", r->plural);
                else
                        p = xasprintf("/api/%s%s/%s/{name}", version,
                                      r->namespaced ? "/namespaces/{namespace}" : "", r->plural);
                item = cJSON_AddObjectToObject(paths, p);
                cJSON_AddItemToObject(item, "get", operation(r, "get", false));
                cJSON_AddItemToObject(item, "put", operation(r, "put", true));
                cJSON_AddItemToObject(item, "patch", operation(r, "patch", true));
                cJSON_AddItemToObject(item, "delete", operation(r, "delete", false));
                free(p);
        }
        return doc;
}

static unsigned long long fnv(const char *s)
{
        unsigned long long h = 1469598103934665603ull;

        while (*s) {
                h ^= (unsigned char)*s++;
                h *= 1099511628211ull;
        }
        return h;
}

static void add_index_entry(cJSON *paths, const char *group, const char *version)
{
        cJSON *doc = gv_doc(group, version);
        char *txt = cJSON_PrintUnformatted(doc);
        char *key =
                group[0] ? xasprintf("apis/%s/%s", group, version) : xasprintf("api/%s", version);
        char *url = xasprintf("/openapi/v3/%s?hash=%016llX", key, fnv(txt));

        cJSON_AddStringToObject(cJSON_AddObjectToObject(paths, key), "serverRelativeURL", url);
        free(key);
        free(url);
        free(txt);
        cJSON_Delete(doc);
}

static void openapi_index(struct kresp *resp)
{
        cJSON *out = cJSON_CreateObject();
        cJSON *paths = cJSON_AddObjectToObject(out, "paths");
        cJSON *groups = named_groups();
        const cJSON *g, *v;

        add_index_entry(paths, "", "v1");
        cJSON_ArrayForEach (g, groups) {
                cJSON *vers = group_versions(g->valuestring);

                cJSON_ArrayForEach (v, vers) {
                        add_index_entry(paths, g->valuestring, v->valuestring);
                }
                cJSON_Delete(vers);
        }
        cJSON_Delete(groups);
        kresp_json(resp, 200, out);
}

static bool openapi_gv(const char *rest, struct kresp *resp)
{
        char group[256], version[64];

        if (!strcmp(rest, "api/v1")) {
                kresp_json(resp, 200, gv_doc("", "v1"));
                return true;
        }
        if (strncmp(rest, "apis/", 5) != 0 ||
            sscanf(rest + 5, "%255[^/]/%63[^/]", group, version) != 2 || !ks_group_served(group))
                return false;
        kresp_json(resp, 200, gv_doc(group, version));
        return true;
}

static bool text_reply(struct kresp *resp, const char *text)
{
        resp->status = 200;
        resp->content_type = "text/plain; charset=utf-8";
        resp->body = xstrdup(text);
        return true;
}

/* Paths under /apis: /apis, /apis/<g>, /apis/<g>/<v>. */
static bool apis_discovery(const struct kreq *r, const char *rest, struct kresp *resp)
{
        char group[256], version[64];
        int n;

        if (!*rest) {
                if (ks_wants_table(r->accept) || !r->accept ||
                    !strstr(r->accept, "as=APIGroupDiscoveryList"))
                        legacy_apis(resp);
                else
                        agg_reply(resp, false);
                return true;
        }
        n = sscanf(rest, "/%255[^/]/%63[^/]", group, version);
        if (n == 1 && !strchr(rest + 1, '/')) {
                if (!ks_group_served(group))
                        return false;
                {
                        cJSON *g = api_group(group);

                        cJSON_AddStringToObject(g, "kind", "APIGroup");
                        cJSON_AddStringToObject(g, "apiVersion", "v1");
                        kresp_json(resp, 200, g);
                }
                return true;
        }
        if (n == 2 && !strchr(rest + 1 + strlen(group) + 1, '/'))
                return resource_list(resp, group, version);
        return false;
}

/* Answers discovery, version, health and OpenAPI requests; false when path is not one. The
 * caller holds ks.mu. */
bool discovery_handle(const struct kreq *r, struct kresp *resp)
{
        const char *p = r->path;

        if (!strcmp(p, "/version") || !strcmp(p, "/version/")) {
                version_reply(resp);
                return true;
        }
        if (!strcmp(p, "/healthz") || !strcmp(p, "/livez") || !strcmp(p, "/readyz"))
                return text_reply(resp, "ok");
        if (!strcmp(p, "/api") || !strcmp(p, "/api/")) {
                if (r->accept && strstr(r->accept, "as=APIGroupDiscoveryList"))
                        agg_reply(resp, true);
                else
                        legacy_api(resp);
                return true;
        }
        if (!strcmp(p, "/api/v1"))
                return resource_list(resp, "", "v1");
        if (!strncmp(p, "/apis", 5) && (p[5] == 0 || (p[5] == '/' && !p[6])))
                return apis_discovery(r, "", resp);
        if (!strncmp(p, "/apis/", 6))
                return apis_discovery(r, p + 5, resp);
        if (!strcmp(p, "/openapi/v3")) {
                openapi_index(resp);
                return true;
        }
        if (!strncmp(p, "/openapi/v3/", 12))
                return openapi_gv(p + 12, resp);
        return false;
}
