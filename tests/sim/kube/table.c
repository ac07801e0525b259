/* kube-sim Table output (meta.k8s.io/v1) with printer columns and a small JSONPath. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ks.h"
#include "xalloc.h"

bool ks_wants_table(const char *accept)
{
        return accept && strstr(accept, "as=Table") != NULL;
}

/* Copies the next path segment (handling "\." escapes) into seg; returns the rest. */
static const char *next_seg(const char *p, char *seg, size_t cap)
{
        size_t n = 0;

        while (*p && *p != '.' && *p != '[') {
                if (*p == '\\' && p[1])
                        p++;
                if (n + 1 < cap)
                        seg[n++] = *p;
                p++;
        }
        seg[n] = 0;
        return p;
}

static const cJSON *filter_items(const cJSON *arr, const char *expr)
{
        char key[128], val[256];
        const cJSON *it;
        const char *eq;
        size_t kl, vl;

        /* expr: ?(@.key=="val") */
        if (strncmp(expr, "?(@.", 4) != 0)
                return NULL;
        expr += 4;
        eq = strstr(expr, "==");
        if (!eq)
                return NULL;
        kl = (size_t)(eq - expr);
        if (kl >= sizeof(key))
                return NULL;
        memcpy(key, expr, kl);
        key[kl] = 0;
        eq += 2;
        if (*eq == '"' || *eq == '\'')
                eq++;
        vl = strcspn(eq, "\"')");
        if (vl >= sizeof(val))
                return NULL;
        memcpy(val, eq, vl);
        val[vl] = 0;
        cJSON_ArrayForEach (it, arr) {
                const char *v = ks_obj_str(it, key, NULL);

                if (v && !strcmp(v, val))
                        return it;
        }
        return NULL;
}

static const char *index_step(const cJSON **cur, const char *p)
{
        const char *end = strchr(p, ']');
        char expr[512];
        size_t n;

        if (!end)
                return NULL;
        n = (size_t)(end - p - 1);
        if (n >= sizeof(expr))
                return NULL;
        memcpy(expr, p + 1, n);
        expr[n] = 0;
        if (!cJSON_IsArray(*cur))
                *cur = NULL;
        else if (expr[0] == '?')
                *cur = filter_items(*cur, expr);
        else if (expr[0] == '*')
                *cur = cJSON_GetArrayItem(*cur, 0);
        else
                *cur = cJSON_GetArrayItem(*cur, (int)strtol(expr, NULL, 10));
        return end + 1;
}

cJSON *ks_jsonpath(const cJSON *obj, const char *path)
{
        const cJSON *cur = obj;
        const char *p = path;
        char seg[256];

        if (*p == '{')
                p++;
        while (cur && *p && *p != '}') {
                if (*p == '.') {
                        p = next_seg(p + 1, seg, sizeof(seg));
                        if (seg[0])
                                cur = cJSON_IsObject(cur)
                                              ? cJSON_GetObjectItemCaseSensitive(cur, seg)
                                              : NULL;
                } else if (*p == '[') {
                        p = index_step(&cur, p);
                        if (!p)
                                return NULL;
                } else {
                        p = next_seg(p, seg, sizeof(seg));
                        cur = cJSON_IsObject(cur) ? cJSON_GetObjectItemCaseSensitive(cur, seg)
                                                  : NULL;
                }
        }
        return (cJSON *)(uintptr_t)cur;
}

static char *human_age(long long s)
{
        long long m = s / 60, h = s / 3600, d = h / 24;

        if (s < 0)
                return xstrdup("0s");
        if (s < 120)
                return xasprintf("%llds", s);
        if (m < 10)
                return s % 60 ? xasprintf("%lldm%llds", m, s % 60) : xasprintf("%lldm", m);
        if (m < 180)
                return xasprintf("%lldm", m);
        if (h < 8)
                return m % 60 ? xasprintf("%lldh%lldm", h, m % 60) : xasprintf("%lldh", h);
        if (h < 48)
                return xasprintf("%lldh", h);
        if (h < 24 * 8)
                return h % 24 ? xasprintf("%lldd%lldh", d, h % 24) : xasprintf("%lldd", d);
        if (d < 365 * 2)
                return xasprintf("%lldd", d);
        return xasprintf("%lldy", d / 365);
}

static cJSON *age_cell(const cJSON *v)
{
        struct tm tm = { 0 };
        char *s;
        cJSON *out;

        if (!cJSON_IsString(v) || !strptime(v->valuestring, "%Y-%m-%dT%H:%M:%S", &tm))
                return cJSON_CreateString("<unknown>");
        s = human_age((long long)(time(NULL) - timegm(&tm)));
        out = cJSON_CreateString(s);
        free(s);
        return out;
}

static cJSON *cell(const cJSON *obj, const cJSON *col)
{
        const char *type = ks_obj_str(col, "type", NULL);
        const char *path = ks_obj_str(col, "jsonPath", NULL);
        const cJSON *v = path ? ks_jsonpath(obj, path) : NULL;
        char *txt;
        cJSON *out;

        if (type && !strcmp(type, "count"))
                return cJSON_CreateNumber(v ? cJSON_GetArraySize(v) : 0);
        if (!v || cJSON_IsNull(v))
                return cJSON_CreateNull();
        if (type && !strcmp(type, "date"))
                return age_cell(v);
        if (type && strcmp(type, "string") != 0)
                return cJSON_Duplicate(v, true);
        if (cJSON_IsString(v))
                return cJSON_CreateString(v->valuestring);
        txt = cJSON_PrintUnformatted(v);
        out = cJSON_CreateString(txt);
        free(txt);
        return out;
}

static void add_coldef(cJSON *defs,
                       const char *name,
                       const char *type,
                       const char *format,
                       const char *desc,
                       double prio)
{
        cJSON *c = cJSON_CreateObject();

        cJSON_AddStringToObject(c, "name", name);
        cJSON_AddStringToObject(c, "type", !strcmp(type, "count") ? "integer" : type);
        cJSON_AddStringToObject(c, "format", format);
        cJSON_AddStringToObject(c, "description", desc);
        cJSON_AddNumberToObject(c, "priority", prio);
        cJSON_AddItemToArray(defs, c);
}

static bool default_age(const struct kres *res)
{
        return !res->crd || cJSON_GetArraySize(res->columns) == 0;
}

static cJSON *column_defs(const struct kres *res)
{
        cJSON *defs = cJSON_CreateArray();
        const cJSON *c;

        add_coldef(defs, "Name", "string", "name", "Name must be unique within a namespace.", 0);
        cJSON_ArrayForEach (c, res->columns) {
                const cJSON *prio = cJSON_GetObjectItemCaseSensitive(c, "priority");
                const char *fmt = ks_obj_str(c, "format", NULL);
                const char *desc = ks_obj_str(c, "description", NULL);

                add_coldef(defs, ks_obj_str(c, "name", NULL) ? ks_obj_str(c, "name", NULL) : "",
                           ks_obj_str(c, "type", NULL) ? ks_obj_str(c, "type", NULL) : "string",
                           fmt ? fmt : "", desc ? desc : "",
                           cJSON_IsNumber(prio) ? prio->valuedouble : 0);
        }
        if (default_age(res))
                add_coldef(defs, "Age", "date", "",
                           "CreationTimestamp is a timestamp representing the server time when "
                           "this object was created.",
                           0);
        return defs;
}

static cJSON *row(const struct kres *res, const cJSON *obj)
{
        cJSON *r = cJSON_CreateObject();
        cJSON *cells = cJSON_AddArrayToObject(r, "cells");
        cJSON *po = cJSON_CreateObject();
        const char *name = ks_obj_str(obj, "metadata", "name");
        const cJSON *c;

        cJSON_AddItemToArray(cells, cJSON_CreateString(name ? name : ""));
        cJSON_ArrayForEach (c, res->columns) {
                cJSON_AddItemToArray(cells, cell(obj, c));
        }
        if (default_age(res))
                cJSON_AddItemToArray(cells,
                                     age_cell(ks_obj_get(obj, "metadata", "creationTimestamp")));
        cJSON_AddStringToObject(po, "kind", "PartialObjectMetadata");
        cJSON_AddStringToObject(po, "apiVersion", "meta.k8s.io/v1");
        cJSON_AddItemToObject(po, "metadata",
                              cJSON_Duplicate(ks_obj_get(obj, "metadata", NULL), true));
        cJSON_AddItemToObject(r, "object", po);
        return r;
}

cJSON *table_build(const struct kres *res, cJSON *items, bool with_columns)
{
        cJSON *t = cJSON_CreateObject();
        cJSON *rows;
        const cJSON *it;

        cJSON_AddStringToObject(t, "kind", "Table");
        cJSON_AddStringToObject(t, "apiVersion", "meta.k8s.io/v1");
        cJSON_AddObjectToObject(t, "metadata");
        cJSON_AddItemToObject(t, "columnDefinitions",
                              with_columns ? column_defs(res) : cJSON_CreateArray());
        rows = cJSON_AddArrayToObject(t, "rows");
        cJSON_ArrayForEach (it, items) {
                cJSON_AddItemToArray(rows, row(res, it));
        }
        return t;
}
