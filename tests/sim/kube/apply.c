/* kube-sim server-side apply: managedFields bookkeeping (field sets per manager), the merge
 * of an applied configuration into the live object and conflicts with other managers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "ks.h"
#include "xalloc.h"

/* ---- managedFields ---- */

static bool meta_tracked(const char *k)
{
        return !strcmp(k, "labels") || !strcmp(k, "annotations") || !strcmp(k, "finalizers") ||
               !strcmp(k, "ownerReferences");
}

/* FieldsV1 of v; when old is given, only of the leaves that differ from it. */
static cJSON *fieldset(const cJSON *v, const cJSON *old, int depth, bool top)
{
        cJSON *fs = cJSON_CreateObject();
        const cJSON *it;

        if (!cJSON_IsObject(v) || depth > 32)
                return fs;
        cJSON_ArrayForEach (it, v) {
                const cJSON *o = old ? cJSON_GetObjectItemCaseSensitive(old, it->string) : NULL;
                char *k;
                cJSON *sub;

                if (top && (!strcmp(it->string, "apiVersion") || !strcmp(it->string, "kind")))
                        continue;
                if (depth == 1 && top && !meta_tracked(it->string))
                        continue;
                if (old && o && cJSON_Compare(it, o, true))
                        continue;
                sub = fieldset(it, o, depth + 1,
                               top && depth == 0 && !strcmp(it->string, "metadata"));
                if (top && depth == 0 && !strcmp(it->string, "metadata") &&
                    cJSON_GetArraySize(sub) == 0) {
                        cJSON_Delete(sub);
                        continue;
                }
                k = xasprintf("f:%s", it->string);
                cJSON_AddItemToObject(fs, k, sub);
                free(k);
        }
        return fs;
}

/* Adds every path of src into dst. */
static void fs_union(cJSON *dst, const cJSON *src)
{
        const cJSON *it;

        cJSON_ArrayForEach (it, src) {
                cJSON *d = cJSON_GetObjectItemCaseSensitive(dst, it->string);

                if (!d)
                        cJSON_AddItemToObject(dst, it->string, cJSON_Duplicate(it, true));
                else
                        fs_union(d, it);
        }
}

static cJSON *entry_find(
        cJSON *mf, const char *manager, const char *op, const char *sub, int *ret_idx)
{
        cJSON *e;
        int i = 0;

        cJSON_ArrayForEach (e, mf) {
                const char *m = ks_obj_str(e, "manager", NULL);
                const char *o = ks_obj_str(e, "operation", NULL);
                const char *s = ks_obj_str(e, "subresource", NULL);

                if (m && o && !strcmp(m, manager) && !strcmp(o, op) &&
                    !strcmp(s ? s : "", sub ? sub : "")) {
                        *ret_idx = i;
                        return e;
                }
                i++;
        }
        return NULL;
}

static cJSON *entry_new(
        const char *manager, const char *op, const char *av, const char *sub, cJSON *fs)
{
        cJSON *e = cJSON_CreateObject();
        char *now = ks_now_rfc3339();

        cJSON_AddStringToObject(e, "manager", manager);
        cJSON_AddStringToObject(e, "operation", op);
        cJSON_AddStringToObject(e, "apiVersion", av);
        cJSON_AddStringToObject(e, "time", now);
        cJSON_AddStringToObject(e, "fieldsType", "FieldsV1");
        cJSON_AddItemToObject(e, "fieldsV1", fs);
        if (sub)
                cJSON_AddStringToObject(e, "subresource", sub);
        free(now);
        return e;
}

static cJSON *mf_array(cJSON *obj)
{
        cJSON *md = ks_obj_ensure(obj, "metadata");
        cJSON *mf = cJSON_GetObjectItemCaseSensitive(md, "managedFields");

        if (!cJSON_IsArray(mf)) {
                cJSON_DeleteItemFromObjectCaseSensitive(md, "managedFields");
                mf = cJSON_AddArrayToObject(md, "managedFields");
        }
        return mf;
}

void managed_fields_update(cJSON *obj,
                           const cJSON *old,
                           const char *manager,
                           const char *operation,
                           const char *api_version,
                           const char *sub)
{
        cJSON *mf, *e, *fs;
        int idx = -1;

        if (!manager || !*manager)
                manager = "unknown";
        if (old && !strcmp(operation, "Apply"))
                return;
        fs = fieldset(obj, old, 0, true);
        if (cJSON_GetArraySize(fs) == 0 && old) {
                cJSON_Delete(fs);
                return;
        }
        mf = mf_array(obj);
        e = entry_find(mf, manager, operation, sub, &idx);
        if (e) {
                fs_union(fs, ks_obj_get(e, "fieldsV1", NULL));
                cJSON_DeleteItemFromArray(mf, idx);
        }
        cJSON_AddItemToArray(mf, entry_new(manager, operation, api_version, sub, fs));
}

/* ---- server-side apply ---- */

static bool owned_by_other(const cJSON *mf, const char *manager, const char *const *path, size_t n)
{
        const cJSON *e;

        cJSON_ArrayForEach (e, mf) {
                const cJSON *fs = ks_obj_get(e, "fieldsV1", NULL);
                const char *m = ks_obj_str(e, "manager", NULL);
                size_t i;

                if (m && !strcmp(m, manager))
                        continue;
                for (i = 0; fs && i < n; i++)
                        fs = cJSON_GetObjectItemCaseSensitive(fs, path[i]);
                if (fs)
                        return true;
        }
        return false;
}

/* Removes from live the fields in prev but not in now (unless another manager owns them). */
static void ssa_prune(cJSON *live,
                      const cJSON *prev,
                      const cJSON *now,
                      const cJSON *mf,
                      const char *manager,
                      const char **path,
                      size_t depth)
{
        const cJSON *it;

        if (depth >= 16 || !cJSON_IsObject(live))
                return;
        cJSON_ArrayForEach (it, prev) {
                const cJSON *n = cJSON_GetObjectItemCaseSensitive(now, it->string);

                if (strncmp(it->string, "f:", 2) != 0)
                        continue;
                path[depth] = it->string;
                if (!n) {
                        if (!owned_by_other(mf, manager, path, depth + 1))
                                cJSON_DeleteItemFromObjectCaseSensitive(live, it->string + 2);
                } else if (cJSON_GetArraySize(it) > 0) {
                        ssa_prune(cJSON_GetObjectItemCaseSensitive(live, it->string + 2), it, n, mf,
                                  manager, path, depth + 1);
                }
        }
}

static cJSON *ssa_merge(cJSON *live, const cJSON *cfg, const char *path)
{
        const cJSON *p;

        if (!cJSON_IsObject(cfg) || !cJSON_IsObject(live)) {
                cJSON_Delete(live);
                return cJSON_Duplicate(cfg, true);
        }
        cJSON_ArrayForEach (p, cfg) {
                char *sub = *path ? xasprintf("%s.%s", path, p->string) : xstrdup(p->string);
                cJSON *cur = cJSON_DetachItemFromObjectCaseSensitive(live, p->string);

                if (cJSON_IsArray(p) && patch_has_merge_key(sub))
                        cur = patch_merge_list(cur, p, sub);
                else
                        cur = ssa_merge(cur, p, sub);
                cJSON_AddItemToObject(live, p->string, cur);
                free(sub);
        }
        return live;
}

/* ---- apply conflicts ---- */

struct conflicts {
        cJSON *list; /* [{manager, apiVersion, field}] */
        bool force;
};

static const cJSON *fs_lookup(const cJSON *fs, const char *const *path, size_t n)
{
        size_t i;

        for (i = 0; fs && i < n; i++)
                fs = cJSON_GetObjectItemCaseSensitive(fs, path[i]);
        return fs;
}

static const cJSON *value_at(const cJSON *v, const char *const *path, size_t n)
{
        size_t i;

        for (i = 0; v && i < n; i++)
                v = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, path[i] + 2) : NULL;
        return v;
}

static char *dotted(const char *const *path, size_t n)
{
        struct buf b;
        size_t i;

        buf_init(&b, 4096);
        for (i = 0; i < n; i++)
                if (buf_printf(&b, ".%s", path[i] + 2) < 0)
                        break;
        return buf_take(&b, NULL);
}

/* Records (or, with force, takes over) the leaves of fs owned by other managers whose live
 * value differs from the applied one. */
static void find_conflicts(const cJSON *fs,
                           const cJSON *cfg,
                           const cJSON *live,
                           cJSON *mf,
                           const char *manager,
                           const char **path,
                           size_t depth,
                           struct conflicts *cf)
{
        const cJSON *it;
        cJSON *e;

        if (depth >= 16)
                return;
        cJSON_ArrayForEach (it, fs) {
                path[depth] = it->string;
                if (cJSON_GetArraySize(it) > 0) {
                        find_conflicts(it, cfg, live, mf, manager, path, depth + 1, cf);
                        continue;
                }
                if (cJSON_Compare(value_at(cfg, path, depth + 1), value_at(live, path, depth + 1),
                                  true))
                        continue;
                cJSON_ArrayForEach (e, mf) {
                        const char *m = ks_obj_str(e, "manager", NULL);
                        cJSON *parent;
                        cJSON *c;
                        char *field;

                        if (!m || !strcmp(m, manager) ||
                            !fs_lookup(ks_obj_get(e, "fieldsV1", NULL), path, depth + 1))
                                continue;
                        if (cf->force) {
                                parent = (cJSON *)(uintptr_t)fs_lookup(
                                        ks_obj_get(e, "fieldsV1", NULL), path, depth);
                                cJSON_DeleteItemFromObjectCaseSensitive(parent, path[depth]);
                                continue;
                        }
                        c = cJSON_CreateObject();
                        cJSON_AddStringToObject(c, "manager", m);
                        cJSON_AddStringToObject(c, "apiVersion",
                                                ks_obj_str(e, "apiVersion", NULL)
                                                        ? ks_obj_str(e, "apiVersion", NULL)
                                                        : "");
                        field = dotted(path, depth + 1);
                        cJSON_AddStringToObject(c, "field", field);
                        free(field);
                        cJSON_AddItemToArray(cf->list, c);
                }
        }
}

static void conflict_status(const cJSON *list,
                            const char *name,
                            const struct kres *res,
                            struct kresp *resp)
{
        cJSON *d = ks_details(res, name, false), *causes = cJSON_AddArrayToObject(d, "causes");
        const cJSON *c;
        int n = cJSON_GetArraySize(list);
        struct buf b;
        char *msg;

        buf_init(&b, 64 * 1024);
        if (buf_printf(&b, "Apply failed with %d conflict%s: ", n, n > 1 ? "s" : "") < 0)
                n = 0;
        cJSON_ArrayForEach (c, list) {
                const char *m = ks_obj_str(c, "manager", NULL);
                const char *av = ks_obj_str(c, "apiVersion", NULL);
                const char *f = ks_obj_str(c, "field", NULL);
                cJSON *cause = cJSON_CreateObject();
                char *cm = xasprintf("conflict with \"%s\" using %s", m, av);

                if (buf_printf(&b, n == 1 ? "%s: %s" : "\n- %s: %s", cm, f) < 0)
                        n = 0;
                cJSON_AddStringToObject(cause, "reason", "FieldManagerConflict");
                cJSON_AddStringToObject(cause, "message", cm);
                cJSON_AddStringToObject(cause, "field", f);
                cJSON_AddItemToArray(causes, cause);
                free(cm);
        }
        msg = buf_take(&b, NULL);
        kresp_status(resp, 409, "Conflict", d, "%s", msg);
        free(msg);
}

int ssa_apply(cJSON *live,
              const cJSON *cfg,
              const struct kwrite *w,
              const char *api_version,
              struct kresp *resp)
{
        const char *manager = w->manager, *sub = w->t->sub;
        cJSON *mf = mf_array(live);
        cJSON *fs = fieldset(cfg, NULL, 0, true);
        struct conflicts cf = { cJSON_CreateArray(), kq_bool(w->req, "force") };
        cJSON *prev;
        const char *path[16];
        int idx = -1;
        const cJSON *it;

        find_conflicts(fs, cfg, live, mf, manager, path, 0, &cf);
        if (cJSON_GetArraySize(cf.list) > 0) {
                conflict_status(cf.list, w->t->name, w->t->res, resp);
                cJSON_Delete(cf.list);
                cJSON_Delete(fs);
                return CM_ECONFLICT;
        }
        cJSON_Delete(cf.list);
        prev = entry_find(mf, manager, "Apply", sub, &idx);
        if (prev)
                ssa_prune(live, ks_obj_get(prev, "fieldsV1", NULL), fs, mf, manager, path, 0);
        cJSON_ArrayForEach (it, cfg) {
                cJSON *cur;

                if (!strcmp(it->string, "apiVersion") || !strcmp(it->string, "kind"))
                        continue;
                cur = cJSON_DetachItemFromObjectCaseSensitive(live, it->string);
                cJSON_AddItemToObject(live, it->string, ssa_merge(cur, it, it->string));
        }
        mf = mf_array(live);
        prev = entry_find(mf, manager, "Apply", sub, &idx);
        if (prev && cJSON_Compare(ks_obj_get(prev, "fieldsV1", NULL), fs, true)) {
                cJSON_Delete(fs);
                return 0;
        }
        if (prev)
                cJSON_DeleteItemFromArray(mf, idx);
        cJSON_AddItemToArray(mf, entry_new(manager, "Apply", api_version, sub, fs));
        return 0;
}
