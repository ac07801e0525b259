/* kube-sim PATCH: merge patch, JSON patch, strategic merge patch and the PATCH verb (server-side
 * apply itself is apply.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "json.h"
#include "ks.h"
#include "xalloc.h"

#define CT_MERGE "application/merge-patch+json"
#define CT_JSON  "application/json-patch+json"
#define CT_SMP   "application/strategic-merge-patch+json"
#define CT_APPLY "application/apply-patch+yaml"

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

bool patch_has_merge_key(const char *path)
{
        return find_merge_key(path) != NULL;
}

cJSON *patch_merge_list(cJSON *target, const cJSON *patch, const char *path)
{
        return merge_list(target, patch, find_merge_key(path), path);
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

/* Applies the patch to cur (consumed); NULL with resp filled on failure. */
static cJSON *apply_patch(
        enum ptype pt, cJSON *cur, const cJSON *body, const struct kwrite *w, struct kresp *resp)
{
        char *err = NULL;
        char *av = ks_api_version(w->t->res);

        switch (pt) {
        case PT_MERGE:
                cur = json_merge_patch(cur, body);
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
                cJSON *cur = ks_load_copy(w->t);
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
