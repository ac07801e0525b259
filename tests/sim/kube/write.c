/* kube-sim writes: create, update (PUT and the tail of PATCH), delete, finalizers, garbage
 * collection and namespace termination. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "err.h"
#include "ks.h"
#include "xalloc.h"

static const char *const owned_meta[] = { "uid",
                                          "creationTimestamp",
                                          "deletionTimestamp",
                                          "deletionGracePeriodSeconds",
                                          "generation",
                                          "resourceVersion",
                                          "name",
                                          "namespace" };

void ks_set_rv(cJSON *obj, uint64_t rv)
{
        char s[32];

        snprintf(s, sizeof(s), "%" PRIu64, rv);
        ks_obj_set_str(ks_obj_ensure(obj, "metadata"), "resourceVersion", s);
}

void ks_set_gvk(const struct kres *res, cJSON *obj)
{
        char *av = ks_api_version(res);

        ks_obj_set_str(obj, "apiVersion", av);
        ks_obj_set_str(obj, "kind", res->kind);
        free(av);
}

void ks_conflict(const struct kres *res, const char *name, struct kresp *resp, const char *why)
{
        char *rn = ks_resname(res);

        kresp_status(resp, 409, "Conflict", ks_details(res, name, false),
                     "Operation cannot be fulfilled on %s \"%s\": %s", rn, name, why);
        free(rn);
}

static void invalid_r(const struct kres *res,
                      const char *name,
                      const char *field,
                      const char *reason,
                      const char *why,
                      struct kresp *resp)
{
        cJSON *d = ks_details(res, name, true);
        cJSON *c = cJSON_CreateObject();
        char *kn = res->group[0] ? xasprintf("%s.%s", res->kind, res->group) : xstrdup(res->kind);

        cJSON_AddStringToObject(c, "reason", reason);
        cJSON_AddStringToObject(c, "message", why);
        cJSON_AddStringToObject(c, "field", field);
        cJSON_AddItemToArray(cJSON_AddArrayToObject(d, "causes"), c);
        kresp_status(resp, 422, "Invalid", d, "%s \"%s\" is invalid: %s: %s", kn, name, field, why);
        free(kn);
}

static void invalid(const struct kres *res,
                    const char *name,
                    const char *field,
                    const char *why,
                    struct kresp *resp)
{
        invalid_r(res, name, field, "FieldValueInvalid", why, resp);
}

/* ---- per-kind hooks ---- */

static void secret_hook(cJSON *obj)
{
        cJSON *sd = cJSON_GetObjectItemCaseSensitive(obj, "stringData");
        cJSON *data, *it;

        if (!cJSON_GetObjectItemCaseSensitive(obj, "type"))
                cJSON_AddStringToObject(obj, "type", "Opaque");
        if (!cJSON_IsObject(sd)) {
                cJSON_DeleteItemFromObjectCaseSensitive(obj, "stringData");
                return;
        }
        data = ks_obj_ensure(obj, "data");
        cJSON_ArrayForEach (it, sd) {
                char *b;

                if (!cJSON_IsString(it))
                        continue;
                b = base64_encode((const unsigned char *)it->valuestring, strlen(it->valuestring));
                ks_obj_set_str(data, it->string, b);
                free(b);
        }
        cJSON_DeleteItemFromObjectCaseSensitive(obj, "stringData");
}

static cJSON *condition(const char *type, const char *reason, const char *msg, const char *now)
{
        cJSON *c = cJSON_CreateObject();

        cJSON_AddStringToObject(c, "type", type);
        cJSON_AddStringToObject(c, "status", "True");
        cJSON_AddStringToObject(c, "lastTransitionTime", now);
        cJSON_AddStringToObject(c, "reason", reason);
        cJSON_AddStringToObject(c, "message", msg);
        return c;
}

static void crd_hook(cJSON *obj, const cJSON *old)
{
        cJSON *spec = ks_obj_get(obj, "spec", NULL);
        cJSON *names = ks_obj_get(spec, "names", NULL);
        cJSON *st = cJSON_CreateObject(), *conds, *stored, *v;
        const cJSON *oldc = ks_obj_get(old, "status", "conditions");
        char *now = ks_now_rfc3339();
        const char *kind = ks_obj_str(names, "kind", NULL);

        if (cJSON_IsObject(names) && kind && !ks_obj_str(names, "singular", NULL)) {
                char *lower = xstrdup(kind);
                size_t i;

                for (i = 0; lower[i]; i++)
                        if (lower[i] >= 'A' && lower[i] <= 'Z')
                                lower[i] = (char)(lower[i] + 32);
                cJSON_AddStringToObject(names, "singular", lower);
                free(lower);
        }
        if (cJSON_IsObject(names) && kind && !ks_obj_str(names, "listKind", NULL)) {
                char *lk = xasprintf("%sList", kind);

                cJSON_AddStringToObject(names, "listKind", lk);
                free(lk);
        }
        if (cJSON_IsObject(names))
                cJSON_AddItemToObject(st, "acceptedNames", cJSON_Duplicate(names, true));
        if (cJSON_IsArray(oldc)) {
                cJSON_AddItemToObject(st, "conditions", cJSON_Duplicate(oldc, true));
        } else {
                conds = cJSON_AddArrayToObject(st, "conditions");
                cJSON_AddItemToArray(conds, condition("NamesAccepted", "NoConflicts",
                                                      "no conflicts found", now));
                cJSON_AddItemToArray(conds, condition("Established", "InitialNamesAccepted",
                                                      "the initial names have been accepted", now));
        }
        stored = cJSON_AddArrayToObject(st, "storedVersions");
        cJSON_ArrayForEach (v, ks_obj_get(spec, "versions", NULL)) {
                if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "storage")) &&
                    ks_obj_str(v, "name", NULL))
                        cJSON_AddItemToArray(stored,
                                             cJSON_CreateString(ks_obj_str(v, "name", NULL)));
        }
        ks_obj_set(obj, "status", st);
        free(now);
}

static void namespace_hook(cJSON *obj, const cJSON *old)
{
        const char *fin[] = { "kubernetes" };
        cJSON *spec = ks_obj_ensure(obj, "spec");
        cJSON *st = ks_obj_ensure(obj, "status");
        const char *name = ks_obj_str(obj, "metadata", "name");
        cJSON *labels = ks_obj_ensure(ks_obj_ensure(obj, "metadata"), "labels");

        if (!cJSON_GetObjectItemCaseSensitive(spec, "finalizers"))
                cJSON_AddItemToObject(spec, "finalizers", cJSON_CreateStringArray(fin, 1));
        if (!ks_obj_str(st, "phase", NULL))
                cJSON_AddStringToObject(st, "phase", "Active");
        if (ks_obj_get(old, "metadata", "deletionTimestamp"))
                ks_obj_set_str(st, "phase", "Terminating");
        if (name)
                ks_obj_set_str(labels, "kubernetes.io/metadata.name", name);
}

static void kind_hooks(const struct kres *res, cJSON *obj, const cJSON *old)
{
        if (res->crd)
                return;
        if (!strcmp(res->plural, "secrets"))
                secret_hook(obj);
        else if (!strcmp(res->plural, "customresourcedefinitions"))
                crd_hook(obj, old);
        else if (!strcmp(res->plural, "namespaces"))
                namespace_hook(obj, old);
}

static bool is_crd(const struct kres *res)
{
        return !res->crd && !strcmp(res->plural, "customresourcedefinitions");
}

/* lock held: a deleted CRD takes its custom objects with it. */
static void drop_custom_objects(const cJSON *crd)
{
        const char *group = ks_obj_str(ks_obj_get(crd, "spec", NULL), "group", NULL);
        const char *plural = ks_obj_str(ks_obj_get(crd, "spec", "names"), "plural", NULL);
        struct kcoll *c;

        if (!group || !plural)
                return;
        c = store_coll(group, plural);
        while (c->n > 0) {
                cJSON *o = c->objs[c->n - 1];

                ks_set_rv(o, store_next_rv());
                store_event(KEV_DELETED, c, o, ks.rv);
                store_remove(c, o);
        }
}

/* lock held: side effects of a stored change. */
static void after_store(const struct kres *res, const cJSON *obj, bool removed)
{
        if (!is_crd(res))
                return;
        if (removed) {
                drop_custom_objects(obj);
                registry_drop_crd(obj);
        } else {
                registry_apply_crd(obj);
        }
}

/* ---- create ---- */

static char *gen_name(const char *prefix)
{
        static const char alpha[] = "bcdfghjklmnpqrstvwxz2456789";
        char suffix[6];
        size_t i;
        uint64_t r = ks_random();

        for (i = 0; i < 5; i++) {
                suffix[i] = alpha[r % (sizeof(alpha) - 1)];
                r /= sizeof(alpha) - 1;
        }
        suffix[5] = 0;
        return xasprintf("%s%s", prefix, suffix);
}

static bool create_meta(const struct kwrite *w, cJSON *obj, struct kresp *resp)
{
        cJSON *md = ks_obj_ensure(obj, "metadata");
        const char *name = ks_obj_str(md, "name", NULL);
        const char *gn = ks_obj_str(md, "generateName", NULL);
        const char *bns = ks_obj_str(md, "namespace", NULL);
        const struct ktarget *t = w->t;
        size_t i;

        if (t->res->namespaced && bns && *bns && strcmp(bns, t->ns) != 0) {
                kresp_status(resp, 400, "BadRequest", NULL,
                             "the namespace of the provided object does not match the namespace "
                             "sent on the request");
                return false;
        }
        for (i = 0; i < ARRAY_SIZE(owned_meta); i++)
                if (strcmp(owned_meta[i], "name") != 0)
                        cJSON_DeleteItemFromObjectCaseSensitive(md, owned_meta[i]);
        if ((!name || !*name) && gn) {
                char *n = gen_name(gn);

                ks_obj_set_str(md, "name", n);
                free(n);
        } else if (!name || !*name) {
                invalid(t->res, "", "metadata.name",
                        "Required value: name or generateName is "
                        "required",
                        resp);
                return false;
        }
        if (t->res->namespaced)
                ks_obj_set_str(md, "namespace", t->ns);
        ks_set_gvk(t->res, obj);
        if (t->res->status_sub && t->res->crd)
                cJSON_DeleteItemFromObjectCaseSensitive(obj, "status");
        return true;
}

static void stamp_new(cJSON *obj)
{
        cJSON *md = ks_obj_ensure(obj, "metadata");
        char *uid = ks_uuid(), *now = ks_now_rfc3339();

        ks_obj_set_str(md, "uid", uid);
        ks_obj_set_str(md, "creationTimestamp", now);
        ks_obj_set(md, "generation", cJSON_CreateNumber(1));
        free(uid);
        free(now);
}

/* lock held. 0, or fills resp when the namespace is missing or terminating. */
static int check_ns(const struct ktarget *t, struct kresp *resp)
{
        struct kres *nsr;
        const cJSON *ns;

        if (!t->res->namespaced)
                return 0;
        nsr = registry_find("", "v1", "namespaces");
        ns = store_get(nsr->coll, NULL, t->ns);
        if (!ns) {
                kresp_status(resp, 404, "NotFound", ks_details(nsr, t->ns, false),
                             "namespaces \"%s\" not found", t->ns);
                return CM_ENOTFOUND;
        }
        if (ks_obj_get(ns, "metadata", "deletionTimestamp")) {
                char *rn = ks_resname(t->res);

                kresp_status(resp, 403, "Forbidden", ks_details(t->res, NULL, false),
                             "%s is forbidden: unable to create new content in namespace %s "
                             "because it is being terminated",
                             rn, t->ns);
                free(rn);
                return CM_EFORBIDDEN;
        }
        return 0;
}

/* Answers with obj and stores obj itself (consumed): printed under the lock instead of
 * copied for the store, one copy fewer per write. Lock held. */
static void store_and_answer(struct kcoll *c, cJSON *obj, unsigned status, struct kresp *resp)
{
        free(resp->body);
        resp->status = status;
        resp->content_type = NULL;
        resp->body = cJSON_PrintUnformatted(obj);
        store_put(c, obj);
}

static void commit_create(const struct kwrite *w, cJSON *obj, struct kresp *resp)
{
        const struct ktarget *t = w->t;
        const char *name = ks_obj_str(obj, "metadata", "name");
        char *rn;

        pthread_mutex_lock(&ks.mu);
        if (check_ns(t, resp) < 0)
                goto unlock;
        if (store_get(t->res->coll, t->ns, name)) {
                rn = ks_resname(t->res);
                kresp_status(resp, 409, "AlreadyExists", ks_details(t->res, name, false),
                             "%s \"%s\" already exists", rn, name);
                free(rn);
                goto unlock;
        }
        if (!w->dry_run) {
                ks_set_rv(obj, store_next_rv());
                store_event(KEV_ADDED, t->res->coll, obj, ks.rv);
                after_store(t->res, obj, false);
                store_and_answer(t->res->coll, obj, 201, resp);
                pthread_mutex_unlock(&ks.mu);
                return;
        }
        pthread_mutex_unlock(&ks.mu);
        kresp_json(resp, 201, obj);
        return;
unlock:
        pthread_mutex_unlock(&ks.mu);
        cJSON_Delete(obj);
}

void write_create(const struct kwrite *w, cJSON *obj, struct kresp *resp)
{
        const struct ktarget *t = w->t;
        char *av = ks_api_version(t->res);

        if (!create_meta(w, obj, resp))
                goto fail;
        kind_hooks(t->res, obj, NULL);
        if (is_crd(t->res) && !registry_check_crd(obj, resp))
                goto fail;
        if (t->res->crd && !schema_prune_default(t->res, obj, kq(w->req, "fieldValidation"), resp))
                goto fail;
        if (!admission_run(w, "CREATE", obj, NULL, resp))
                goto fail;
        stamp_new(obj);
        managed_fields_update(obj, NULL, w->manager, w->operation, av, NULL);
        free(av);
        commit_create(w, obj, resp);
        return;
fail:
        free(av);
        cJSON_Delete(obj);
}

/* ---- update ---- */

static void keep_owned_meta(cJSON *obj, const cJSON *old)
{
        cJSON *md = ks_obj_ensure(obj, "metadata");
        const cJSON *omd = ks_obj_get(old, "metadata", NULL);
        size_t i;

        for (i = 0; i < ARRAY_SIZE(owned_meta); i++) {
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(omd, owned_meta[i]);

                cJSON_DeleteItemFromObjectCaseSensitive(md, owned_meta[i]);
                if (v)
                        cJSON_AddItemToObject(md, owned_meta[i], cJSON_Duplicate(v, true));
        }
        if (!cJSON_GetObjectItemCaseSensitive(md, "managedFields") &&
            cJSON_GetObjectItemCaseSensitive(omd, "managedFields"))
                cJSON_AddItemToObject(
                        md, "managedFields",
                        cJSON_Duplicate(ks_obj_get(omd, "managedFields", NULL), true));
}

/* Applies the /status rules; returns the object to continue with (obj or a new one). */
static cJSON *status_rules(const struct ktarget *t, cJSON *obj, const cJSON *old)
{
        cJSON *out, *st;

        if (!t->res->status_sub)
                return obj;
        if (t->sub) {
                out = cJSON_Duplicate(old, true);
                st = cJSON_DetachItemFromObjectCaseSensitive(obj, "status");
                cJSON_DeleteItemFromObjectCaseSensitive(out, "status");
                if (st)
                        cJSON_AddItemToObject(out, "status", st);
                ks_obj_set(ks_obj_ensure(out, "metadata"), "managedFields",
                           cJSON_Duplicate(ks_obj_get(obj, "metadata", "managedFields"), true));
                if (!ks_obj_get(obj, "metadata", "managedFields"))
                        cJSON_DeleteItemFromObjectCaseSensitive(ks_obj_get(out, "metadata", NULL),
                                                                "managedFields");
                cJSON_Delete(obj);
                return out;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(obj, "status");
        st = cJSON_GetObjectItemCaseSensitive(old, "status");
        if (st)
                cJSON_AddItemToObject(obj, "status", cJSON_Duplicate(st, true));
        return obj;
}

/* True when anything outside metadata (and status, with a status subresource) differs. */
static bool spec_changed(const struct kres *res, const cJSON *a, const cJSON *b)
{
        const cJSON *it;

        cJSON_ArrayForEach (it, a) {
                const cJSON *o;

                if (!strcmp(it->string, "metadata") || !strcmp(it->string, "apiVersion") ||
                    !strcmp(it->string, "kind") ||
                    (res->status_sub && !strcmp(it->string, "status")))
                        continue;
                o = cJSON_GetObjectItemCaseSensitive(b, it->string);
                if (!o || !cJSON_Compare(it, o, true))
                        return true;
        }
        cJSON_ArrayForEach (it, b) {
                if (!strcmp(it->string, "metadata") || !strcmp(it->string, "apiVersion") ||
                    !strcmp(it->string, "kind") ||
                    (res->status_sub && !strcmp(it->string, "status")))
                        continue;
                if (!cJSON_GetObjectItemCaseSensitive(a, it->string))
                        return true;
        }
        return false;
}

bool ks_contains_str(const cJSON *arr, const char *s)
{
        const cJSON *it;

        cJSON_ArrayForEach (it, arr) {
                if (cJSON_IsString(it) && !strcmp(it->valuestring, s))
                        return true;
        }
        return false;
}

static bool new_finalizer_while_deleting(const cJSON *obj, const cJSON *old)
{
        const cJSON *nf = ks_obj_get(obj, "metadata", "finalizers");
        const cJSON *of = ks_obj_get(old, "metadata", "finalizers");
        const cJSON *it;

        if (!ks_obj_get(old, "metadata", "deletionTimestamp"))
                return false;
        cJSON_ArrayForEach (it, nf) {
                if (cJSON_IsString(it) && !ks_contains_str(of, it->valuestring))
                        return true;
        }
        return false;
}

void ks_bump_generation(cJSON *obj)
{
        cJSON *md = ks_obj_ensure(obj, "metadata");
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(md, "generation");
        double v = cJSON_IsNumber(g) ? g->valuedouble : 0;

        ks_obj_set(md, "generation", cJSON_CreateNumber(v + 1));
}

bool ks_finalizers_empty(const cJSON *obj)
{
        return cJSON_GetArraySize(ks_obj_get(obj, "metadata", "finalizers")) == 0;
}

/* lock held: removes obj (a copy of the stored one) for good. */
void ks_remove_locked(const struct kres *res, struct kcoll *c, cJSON *obj)
{
        ks_set_rv(obj, store_next_rv());
        store_event(KEV_DELETED, c, obj, ks.rv);
        after_store(res, obj, true);
        store_remove(c, obj);
}

const char *ks_rv_of(const cJSON *o)
{
        const char *rv = ks_obj_str(o, "metadata", "resourceVersion");

        return rv ? rv : "";
}

static int commit_update(const struct kwrite *w, cJSON *obj, const cJSON *old, struct kresp *resp)
{
        const struct ktarget *t = w->t;
        const cJSON *cur;

        pthread_mutex_lock(&ks.mu);
        cur = store_get(t->res->coll, t->ns, t->name);
        if (!cur || strcmp(ks_rv_of(cur), ks_rv_of(old)) != 0) {
                pthread_mutex_unlock(&ks.mu);
                ks_conflict(t->res, t->name, resp,
                            "the object has been modified; please apply your changes to the latest "
                            "version and try again");
                cJSON_Delete(obj);
                return CM_ECONFLICT;
        }
        if (w->dry_run) {
                /* nothing stored */
        } else if (ks_obj_get(obj, "metadata", "deletionTimestamp") && ks_finalizers_empty(obj)) {
                ks_remove_locked(t->res, t->res->coll, obj);
                gc_sweep();
        } else {
                ks_set_rv(obj, store_next_rv());
                store_event(KEV_MODIFIED, t->res->coll, obj, ks.rv);
                after_store(t->res, obj, false);
                store_and_answer(t->res->coll, obj, 200, resp);
                pthread_mutex_unlock(&ks.mu);
                return 0;
        }
        pthread_mutex_unlock(&ks.mu);
        kresp_json(resp, 200, obj);
        return 0;
}

cJSON *ks_load_copy(const struct ktarget *t)
{
        cJSON *o;

        pthread_mutex_lock(&ks.mu);
        o = store_get(t->res->coll, t->ns, t->name);
        o = o ? cJSON_Duplicate(o, true) : NULL;
        pthread_mutex_unlock(&ks.mu);
        return o;
}

int write_precheck(const struct kwrite *w,
                   const cJSON *old,
                   const char *expect_rv,
                   bool put,
                   struct kresp *resp)
{
        const struct ktarget *t = w->t;
        char *rn;

        if (!old) {
                rn = ks_resname(t->res);
                kresp_status(resp, 404, "NotFound", ks_details(t->res, t->name, false),
                             "%s \"%s\" not found", rn, t->name);
                free(rn);
                return CM_ENOTFOUND;
        }
        if (expect_rv && *expect_rv && strcmp(expect_rv, ks_rv_of(old)) != 0) {
                ks_conflict(t->res, t->name, resp,
                            "the object has been modified; please apply your changes to the latest "
                            "version and try again");
                return CM_ECONFLICT;
        }
        if (put && t->res->crd && (!expect_rv || !*expect_rv)) {
                invalid(t->res, t->name, "metadata.resourceVersion",
                        "Invalid value: 0x0: must be specified for an update", resp);
                return CM_EINVAL;
        }
        return 0;
}

static int update_steps(const struct kwrite *w, cJSON **objp, const cJSON *old, struct kresp *resp)
{
        const struct ktarget *t = w->t;
        cJSON *obj = *objp;

        ks_set_gvk(t->res, obj);
        keep_owned_meta(obj, old);
        obj = status_rules(t, obj, old);
        *objp = obj;
        kind_hooks(t->res, obj, old);
        if (new_finalizer_while_deleting(obj, old)) {
                invalid_r(t->res, t->name, "metadata.finalizers", "FieldValueForbidden",
                          "Forbidden: no new finalizers can be added if the object is being "
                          "deleted",
                          resp);
                return CM_EINVAL;
        }
        if (is_crd(t->res) && !registry_check_crd(obj, resp))
                return CM_EINVAL;
        if (t->res->crd && !schema_prune_default(t->res, obj, kq(w->req, "fieldValidation"), resp))
                return CM_EINVAL;
        if (!admission_run(w, "UPDATE", obj, old, resp))
                return CM_EFORBIDDEN;
        if (!t->sub && spec_changed(t->res, obj, old))
                ks_bump_generation(obj);
        return 0;
}

/* a and b (objects) have the same members, skip aside (compared in place: no copies) */
static bool same_members(const cJSON *a, const cJSON *b, const char *skip)
{
        const cJSON *x;
        size_t na = 0, nb = 0;

        cJSON_ArrayForEach (x, a) {
                const cJSON *y;

                if (skip && x->string && strcmp(x->string, skip) == 0)
                        continue;
                y = cJSON_GetObjectItemCaseSensitive(b, x->string);
                if (!y || !cJSON_Compare(x, y, true))
                        return false;
                na++;
        }
        cJSON_ArrayForEach (x, b)
                if (!skip || !x->string || strcmp(x->string, skip) != 0)
                        nb++;
        return na == nb;
}

/* Equal apart from managedFields (clients echo them back with re-formatted times). */
static bool same_content(const cJSON *a, const cJSON *b)
{
        const cJSON *ma = ks_obj_get(a, "metadata", NULL), *mb = ks_obj_get(b, "metadata", NULL);
        const cJSON *x;
        size_t na = 0, nb = 0;

        if (!cJSON_IsObject(ma) || !cJSON_IsObject(mb))
                return cJSON_Compare(a, b, true);
        if (!same_members(ma, mb, "managedFields"))
                return false;
        cJSON_ArrayForEach (x, a) {
                const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, x->string);

                if (!y || (x != ma && !cJSON_Compare(x, y, true)))
                        return false;
                na++;
        }
        cJSON_ArrayForEach (x, b)
                nb++;
        return na == nb;
}

int write_update(
        const struct kwrite *w, cJSON *obj, const char *expect_rv, bool put, struct kresp *resp)
{
        cJSON *old = ks_load_copy(w->t);
        char *av = ks_api_version(w->t->res);
        int err;

        err = write_precheck(w, old, expect_rv, put, resp);
        if (!err)
                err = update_steps(w, &obj, old, resp);
        if (err) {
                cJSON_Delete(obj);
                goto out;
        }
        if (same_content(obj, old)) {
                cJSON_Delete(obj);
                ks_set_gvk(w->t->res, old);
                kresp_json(resp, 200, old);
                old = NULL;
                goto out;
        }
        managed_fields_update(obj, old, w->manager, w->operation, av, w->t->sub);
        err = commit_update(w, obj, old, resp);
out:
        free(av);
        cJSON_Delete(old);
        return err;
}
