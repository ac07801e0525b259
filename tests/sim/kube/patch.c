/* kube-sim PATCH: merge patch, JSON patch, strategic merge patch, server-side apply and
 * managedFields bookkeeping. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "ks.h"
#include "xalloc.h"

#define CT_MERGE "application/merge-patch+json"
#define CT_JSON  "application/json-patch+json"
#define CT_SMP   "application/strategic-merge-patch+json"
#define CT_APPLY "application/apply-patch+yaml"

/* ---- merge patch ---- */

cJSON *patch_merge(cJSON *target, const cJSON *patch)
{
        const cJSON *p;

        if (!cJSON_IsObject(patch)) {
                cJSON_Delete(target);
                return cJSON_Duplicate(patch, true);
        }
        if (!cJSON_IsObject(target)) {
                cJSON_Delete(target);
                target = cJSON_CreateObject();
        }
        cJSON_ArrayForEach (p, patch) {
                cJSON *cur;

                if (cJSON_IsNull(p)) {
                        cJSON_DeleteItemFromObjectCaseSensitive(target, p->string);
                        continue;
                }
                cur = cJSON_DetachItemFromObjectCaseSensitive(target, p->string);
                cJSON_AddItemToObject(target, p->string, patch_merge(cur, p));
        }
        return target;
}

/* ---- JSON patch ---- */

static char *unescape_tok(const char *s, size_t n)
{
        char *out = xmalloc(n + 1);
        size_t i, j = 0;

        for (i = 0; i < n; i++) {
                if (s[i] == '~' && i + 1 < n && (s[i + 1] == '0' || s[i + 1] == '1')) {
                        out[j++] = s[i + 1] == '0' ? '~' : '/';
                        i++;
                } else {
                        out[j++] = s[i];
                }
        }
        out[j] = 0;
        return out;
}

static cJSON *child(cJSON *c, const char *tok)
{
        char *end;
        long idx;

        if (cJSON_IsObject(c))
                return cJSON_GetObjectItemCaseSensitive(c, tok);
        if (!cJSON_IsArray(c))
                return NULL;
        idx = strtol(tok, &end, 10);
        if (end == tok || *end || idx < 0)
                return NULL;
        return cJSON_GetArrayItem(c, (int)idx);
}

/* Resolves the parent of ptr; *ret_last is the unescaped last token (caller frees). */
static cJSON *ptr_parent(cJSON *doc, const char *ptr, char **ret_last)
{
        const char *p = ptr, *slash;
        cJSON *cur = doc;

        if (*p != '/')
                return NULL;
        for (;;) {
                char *tok;

                p++;
                slash = strchr(p, '/');
                tok = unescape_tok(p, slash ? (size_t)(slash - p) : strlen(p));
                if (!slash) {
                        *ret_last = tok;
                        return cur;
                }
                cur = child(cur, tok);
                free(tok);
                if (!cur)
                        return NULL;
                p = slash;
        }
}

static int arr_index(const cJSON *arr, const char *tok, bool allow_end, int *ret)
{
        char *end;
        long i;

        if (allow_end && !strcmp(tok, "-")) {
                *ret = cJSON_GetArraySize(arr);
                return 0;
        }
        i = strtol(tok, &end, 10);
        if (end == tok || *end || i < 0 || i > cJSON_GetArraySize(arr) - (allow_end ? 0 : 1))
                return CM_ECONFLICT;
        *ret = (int)i;
        return 0;
}

static int op_add(cJSON *doc, const char *path, cJSON *val)
{
        char *last = NULL;
        cJSON *parent = ptr_parent(doc, path, &last);
        int idx, err = CM_ECONFLICT;

        if (cJSON_IsObject(parent)) {
                cJSON_DeleteItemFromObjectCaseSensitive(parent, last);
                cJSON_AddItemToObject(parent, last, val);
                val = NULL;
                err = 0;
        } else if (cJSON_IsArray(parent) && arr_index(parent, last, true, &idx) == 0) {
                if (idx == cJSON_GetArraySize(parent))
                        cJSON_AddItemToArray(parent, val);
                else
                        cJSON_InsertItemInArray(parent, idx, val);
                val = NULL;
                err = 0;
        }
        cJSON_Delete(val);
        free(last);
        return err;
}

static cJSON *op_detach(cJSON *doc, const char *path)
{
        char *last = NULL;
        cJSON *parent = ptr_parent(doc, path, &last);
        cJSON *out = NULL;
        int idx;

        if (cJSON_IsObject(parent))
                out = cJSON_DetachItemFromObjectCaseSensitive(parent, last);
        else if (cJSON_IsArray(parent) && arr_index(parent, last, false, &idx) == 0)
                out = cJSON_DetachItemFromArray(parent, idx);
        free(last);
        return out;
}

static cJSON *op_get(cJSON *doc, const char *path)
{
        char *last = NULL;
        cJSON *parent;
        cJSON *out;

        if (!*path)
                return doc;
        parent = ptr_parent(doc, path, &last);
        out = parent ? child(parent, last) : NULL;
        free(last);
        return out;
}

static int one_op(cJSON *doc, const cJSON *op, char **ret_err)
{
        const char *name = ks_obj_str(op, "op", NULL);
        const char *path = ks_obj_str(op, "path", NULL);
        const char *from = ks_obj_str(op, "from", NULL);
        const cJSON *value = cJSON_GetObjectItemCaseSensitive(op, "value");
        cJSON *x;

        if (!name || !path) {
                *ret_err = xstrdup("invalid JSON patch operation: missing op or path");
                return CM_EINVAL;
        }
        if (!strcmp(name, "add") && value)
                return op_add(doc, path, cJSON_Duplicate(value, true));
        if (!strcmp(name, "remove") || (!strcmp(name, "replace") && value)) {
                x = op_detach(doc, path);
                if (!x) {
                        *ret_err = xasprintf("unable to %s nonexistent path: %s", name, path);
                        return CM_ECONFLICT;
                }
                cJSON_Delete(x);
                return strcmp(name, "remove") ? op_add(doc, path, cJSON_Duplicate(value, true)) : 0;
        }
        if ((!strcmp(name, "move") || !strcmp(name, "copy")) && from) {
                x = !strcmp(name, "move") ? op_detach(doc, from)
                                          : cJSON_Duplicate(op_get(doc, from), true);
                if (!x) {
                        *ret_err = xasprintf("unable to %s from nonexistent path: %s", name, from);
                        return CM_ECONFLICT;
                }
                return op_add(doc, path, x);
        }
        if (!strcmp(name, "test") && value) {
                x = op_get(doc, path);
                if (!x || !cJSON_Compare(x, value, true)) {
                        *ret_err = xasprintf("testing value %s failed", path);
                        return CM_ECONFLICT;
                }
                return 0;
        }
        *ret_err = xasprintf("unexpected kind of JSON patch operation: %s", name);
        return CM_EINVAL;
}

int patch_json(cJSON **doc, const cJSON *ops, char **ret_err)
{
        const cJSON *op;
        int err;

        if (!cJSON_IsArray(ops)) {
                *ret_err = xstrdup("json: cannot unmarshal object into Go value of type "
                                   "jsonpatch.Patch");
                return CM_EINVAL;
        }
        cJSON_ArrayForEach (op, ops) {
                err = one_op(*doc, op, ret_err);
                if (err < 0) {
                        if (err == CM_ECONFLICT && !*ret_err)
                                *ret_err = xasprintf("the server rejected our request due to "
                                                     "an error in our request");
                        return err;
                }
        }
        return 0;
}

/* ---- strategic merge patch ---- */

struct merge_key {
        const char *path;
        const char *key; /* NULL: list of primitives merged as a set */
};

static const struct merge_key merge_keys[] = {
        { "metadata.ownerReferences", "uid" },
        { "metadata.finalizers", NULL },
        { "webhooks", "name" },
        { "status.conditions", "type" },
        { "status.addresses", "type" },
        { "spec.ports", "port" },
        { "secrets", "name" },
        { "imagePullSecrets", "name" },
        { "spec.finalizers", NULL },
};

static const struct merge_key *find_merge_key(const char *path)
{
        size_t i;

        for (i = 0; i < ARRAY_SIZE(merge_keys); i++)
                if (!strcmp(merge_keys[i].path, path))
                        return &merge_keys[i];
        return NULL;
}

static cJSON *find_keyed(cJSON *arr, const char *key, const cJSON *val, int *ret_idx)
{
        cJSON *it;
        int i = 0;

        cJSON_ArrayForEach (it, arr) {
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(it, key);

                if (v && cJSON_Compare(v, val, true)) {
                        *ret_idx = i;
                        return it;
                }
                i++;
        }
        return NULL;
}

static cJSON *merge_list(cJSON *target,
                         const cJSON *patch,
                         const struct merge_key *mk,
                         const char *path)
{
        const cJSON *p;

        if (!cJSON_IsArray(target)) {
                cJSON_Delete(target);
                target = cJSON_CreateArray();
        }
        cJSON_ArrayForEach (p, patch) {
                const cJSON *kv = mk->key ? cJSON_GetObjectItemCaseSensitive(p, mk->key) : NULL;
                const char *dir = ks_obj_str(p, "$patch", NULL);
                cJSON *cur;
                int idx = -1;

                if (!mk->key) {
                        bool seen = false;
                        const cJSON *t;

                        cJSON_ArrayForEach (t, target) {
                                seen = seen || cJSON_Compare(t, p, true);
                        }
                        if (!seen)
                                cJSON_AddItemToArray(target, cJSON_Duplicate(p, true));
                        continue;
                }
                cur = kv ? find_keyed(target, mk->key, kv, &idx) : NULL;
                if (dir && !strcmp(dir, "delete")) {
                        if (cur)
                                cJSON_DeleteItemFromArray(target, idx);
                        continue;
                }
                if (!cur) {
                        cJSON_AddItemToArray(target, patch_strategic(NULL, p, path));
                        continue;
                }
                cJSON_ReplaceItemInArray(
                        target, idx,
                        patch_strategic(cJSON_DetachItemFromArray(target, idx), p, path));
        }
        return target;
}

static void delete_from_primitive(cJSON *target, const char *field, const cJSON *vals)
{
        cJSON *arr = cJSON_GetObjectItemCaseSensitive(target, field);
        const cJSON *v;
        int i;

        cJSON_ArrayForEach (v, vals) {
                for (i = cJSON_GetArraySize(arr) - 1; i >= 0; i--)
                        if (cJSON_Compare(cJSON_GetArrayItem(arr, i), v, true))
                                cJSON_DeleteItemFromArray(arr, i);
        }
}

static bool smp_directive(cJSON *target, const cJSON *p)
{
        if (!strncmp(p->string, "$setElementOrder/", 17) || !strcmp(p->string, "$retainKeys") ||
            !strcmp(p->string, "$patch"))
                return true;
        if (!strncmp(p->string, "$deleteFromPrimitiveList/", 25)) {
                delete_from_primitive(target, p->string + 25, p);
                return true;
        }
        return false;
}

cJSON *patch_strategic(cJSON *target, const cJSON *patch, const char *path)
{
        const char *dir = ks_obj_str(patch, "$patch", NULL);
        const cJSON *p;

        if (!cJSON_IsObject(patch)) {
                cJSON_Delete(target);
                return cJSON_Duplicate(patch, true);
        }
        if (!cJSON_IsObject(target) || (dir && !strcmp(dir, "replace"))) {
                cJSON_Delete(target);
                target = cJSON_CreateObject();
        }
        cJSON_ArrayForEach (p, patch) {
                char *sub = *path ? xasprintf("%s.%s", path, p->string) : xstrdup(p->string);
                const struct merge_key *mk = find_merge_key(sub);
                cJSON *cur;

                if (smp_directive(target, p)) {
                        /* handled */
                } else if (cJSON_IsNull(p)) {
                        cJSON_DeleteItemFromObjectCaseSensitive(target, p->string);
                } else {
                        cur = cJSON_DetachItemFromObjectCaseSensitive(target, p->string);
                        if (cJSON_IsArray(p) && mk)
                                cur = merge_list(cur, p, mk, sub);
                        else
                                cur = patch_strategic(cur, p, sub);
                        cJSON_AddItemToObject(target, p->string, cur);
                }
                free(sub);
        }
        return target;
}

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
                const struct merge_key *mk = find_merge_key(sub);
                cJSON *cur = cJSON_DetachItemFromObjectCaseSensitive(live, p->string);

                if (cJSON_IsArray(p) && mk)
                        cur = merge_list(cur, p, mk, sub);
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

/* ---- the PATCH verb ---- */

enum ptype {
        PT_MERGE,
        PT_JSON,
        PT_SMP,
        PT_APPLY,
        PT_BAD,
};

static enum ptype patch_type(const char *ct)
{
        if (!ct)
                return PT_BAD;
        if (!strncmp(ct, CT_MERGE, strlen(CT_MERGE)))
                return PT_MERGE;
        if (!strncmp(ct, CT_JSON, strlen(CT_JSON)))
                return PT_JSON;
        if (!strncmp(ct, CT_SMP, strlen(CT_SMP)))
                return PT_SMP;
        if (!strncmp(ct, CT_APPLY, strlen(CT_APPLY)))
                return PT_APPLY;
        return PT_BAD;
}

static void unsupported(const struct kres *res, struct kresp *resp)
{
        kresp_status(resp, 415, "UnsupportedMediaType", NULL,
                     "the body of the request was in an unknown format - accepted media types "
                     "include: application/json-patch+json, application/merge-patch+json, "
                     "application/apply-patch+yaml%s",
                     res->crd ? "" : ", application/strategic-merge-patch+json");
}

static cJSON *load_copy(const struct ktarget *t)
{
        cJSON *o;

        pthread_mutex_lock(&ks.mu);
        o = store_get(t->res->coll, t->ns, t->name);
        o = o ? cJSON_Duplicate(o, true) : NULL;
        pthread_mutex_unlock(&ks.mu);
        return o;
}

/* Applies the patch to cur (consumed); NULL with resp filled on failure. */
static cJSON *apply_patch(
        enum ptype pt, cJSON *cur, const cJSON *body, const struct kwrite *w, struct kresp *resp)
{
        char *err = NULL;
        char *av = ks_api_version(w->t->res);

        switch (pt) {
        case PT_MERGE:
                cur = patch_merge(cur, body);
                break;
        case PT_SMP:
                cur = patch_strategic(cur, body, "");
                break;
        case PT_APPLY:
                if (ssa_apply(cur, body, w, av, resp) < 0) {
                        cJSON_Delete(cur);
                        cur = NULL;
                }
                break;
        case PT_JSON:
        case PT_BAD:
                if (patch_json(&cur, body, &err) < 0) {
                        kresp_status(resp, err && strstr(err, "unmarshal") ? 400 : 422,
                                     err && strstr(err, "unmarshal") ? "BadRequest" : "Invalid",
                                     NULL, "%s", err ? err : "invalid patch");
                        cJSON_Delete(cur);
                        cur = NULL;
                }
                break;
        }
        free(err);
        free(av);
        return cur;
}

static bool apply_checks(const struct kreq *r, const cJSON *body, struct kresp *resp)
{
        const char *fm = kq(r, "fieldManager");

        if (!fm || !*fm) {
                kresp_status(resp, 422, "Invalid", NULL,
                             "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required "
                             "value: is required for apply patch");
                return false;
        }
        if (!ks_obj_str(body, "apiVersion", NULL) || !ks_obj_str(body, "kind", NULL) ||
            !ks_obj_str(body, "metadata", "name")) {
                kresp_status(resp, 400, "BadRequest", NULL,
                             "invalid object: apiVersion, kind and metadata.name are required");
                return false;
        }
        return true;
}

static void apply_create(const struct kwrite *w, const cJSON *body, struct kresp *resp)
{
        struct kwrite cw = *w;

        cw.operation = "Apply";
        write_create(&cw, cJSON_Duplicate(body, true), resp);
}

static cJSON *parse_patch_body(const struct kreq *r, enum ptype pt)
{
        if (pt == PT_APPLY)
                return ks_yaml_to_json(r->body, r->body_len);
        return ks_parse_body(r->body, r->body_len);
}

static void patch_loop(const struct kwrite *w, enum ptype pt, const cJSON *body, struct kresp *resp)
{
        int attempt;

        for (attempt = 0; attempt < 8; attempt++) {
                cJSON *cur = load_copy(w->t);
                const char *brv = ks_obj_str(body, "metadata", "resourceVersion");
                char *rv;
                int err;

                if (!cur && pt == PT_APPLY && !w->t->sub) {
                        apply_create(w, body, resp);
                        return;
                }
                if (!cur) {
                        rv = ks_resname(w->t->res);
                        kresp_status(resp, 404, "NotFound",
                                     ks_details(w->t->res, w->t->name, false),
                                     "%s \"%s\" not found", rv, w->t->name);
                        free(rv);
                        return;
                }
                rv = xstrdup(brv && pt != PT_JSON ? brv
                                                  : ks_obj_str(cur, "metadata", "resourceVersion"));
                cur = apply_patch(pt, cur, body, w, resp);
                if (!cur) {
                        free(rv);
                        return;
                }
                err = write_update(w, cur, rv, false, resp);
                free(rv);
                if (err != CM_ECONFLICT || (brv && pt != PT_JSON))
                        return;
                free(resp->body);
                resp->body = NULL;
        }
}

void handle_patch(const struct kreq *r, const struct ktarget *t, struct kresp *resp)
{
        enum ptype pt = patch_type(r->content_type);
        struct kwrite w = { 0 };
        cJSON *body;
        const char *dry = kq(r, "dryRun");

        if (pt == PT_BAD || (pt == PT_SMP && t->res->crd)) {
                unsupported(t->res, resp);
                return;
        }
        body = parse_patch_body(r, pt);
        if (!body) {
                kresp_status(resp, 400, "BadRequest", NULL,
                             "error decoding patch: invalid JSON or YAML");
                return;
        }
        if (pt == PT_APPLY && !apply_checks(r, body, resp)) {
                cJSON_Delete(body);
                return;
        }
        w.req = r;
        w.t = t;
        w.dry_run = dry && !strcmp(dry, "All");
        w.manager = kq(r, "fieldManager");
        w.operation = pt == PT_APPLY ? "Apply" : "Update";
        patch_loop(&w, pt, body, resp);
        cJSON_Delete(body);
}
