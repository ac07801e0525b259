/* kube-sim deletes: preconditions, finalizers and propagation policies, garbage collection
 * of dependents by ownerReferences and namespace termination. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "ks.h"
#include "xalloc.h"

/* ---- delete ---- */

struct del_opts {
        char *policy;
        char *pre_uid, *pre_rv;
};

static void del_opts_parse(const struct kreq *r, struct del_opts *o)
{
        cJSON *b = ks_parse_body(r->body, r->body_len);
        const char *p = ks_obj_str(b, "propagationPolicy", NULL);
        const char *q = kq(r, "propagationPolicy");
        const char *u = ks_obj_str(b, "preconditions", "uid");
        const char *v = ks_obj_str(b, "preconditions", "resourceVersion");

        o->policy = xstrdup(p ? p : q ? q : "Background");
        o->pre_uid = u ? xstrdup(u) : NULL;
        o->pre_rv = v ? xstrdup(v) : NULL;
        if (ks_obj_get(b, "orphanDependents", NULL) &&
            cJSON_IsTrue(ks_obj_get(b, "orphanDependents", NULL))) {
                free(o->policy);
                o->policy = xstrdup("Orphan");
        }
        cJSON_Delete(b);
}

static void del_opts_release(struct del_opts *o)
{
        free(o->policy);
        free(o->pre_uid);
        free(o->pre_rv);
}

static void add_finalizer(cJSON *obj, const char *f)
{
        cJSON *md = ks_obj_ensure(obj, "metadata");
        cJSON *fin = cJSON_GetObjectItemCaseSensitive(md, "finalizers");

        if (!cJSON_IsArray(fin))
                fin = cJSON_AddArrayToObject(md, "finalizers");
        if (!ks_contains_str(fin, f))
                cJSON_AddItemToArray(fin, cJSON_CreateString(f));
}

/* lock held: marks obj (a copy) for deletion and stores it. */
static void mark_deleting(const struct kres *res, cJSON *obj)
{
        cJSON *md = ks_obj_ensure(obj, "metadata");
        char *now;

        if (cJSON_GetObjectItemCaseSensitive(md, "deletionTimestamp"))
                return;
        now = ks_now_rfc3339();
        cJSON_AddStringToObject(md, "deletionTimestamp", now);
        cJSON_AddNumberToObject(md, "deletionGracePeriodSeconds", 0);
        free(now);
        ks_bump_generation(obj);
        if (!res->crd && !strcmp(res->plural, "namespaces"))
                ks_obj_set_str(ks_obj_ensure(obj, "status"), "phase", "Terminating");
        ks_set_rv(obj, store_next_rv());
        store_event(KEV_MODIFIED, res->coll, obj, ks.rv);
        store_put(res->coll, cJSON_Duplicate(obj, true));
}

static bool is_namespace(const struct kres *res)
{
        return !res->crd && !strcmp(res->plural, "namespaces");
}

static bool preconditions_ok(const struct kwrite *w,
                             const struct del_opts *o,
                             const cJSON *old,
                             struct kresp *resp)
{
        const char *uid = ks_obj_str(old, "metadata", "uid");
        char *why;

        if (o->pre_uid && strcmp(o->pre_uid, uid ? uid : "") != 0) {
                why = xasprintf("Precondition failed: UID in precondition: %s, UID in object "
                                "meta: %s",
                                o->pre_uid, uid ? uid : "");
                ks_conflict(w->t->res, w->t->name, resp, why);
                free(why);
                return false;
        }
        if (o->pre_rv && strcmp(o->pre_rv, ks_rv_of(old)) != 0) {
                why = xasprintf("Precondition failed: ResourceVersion in precondition: %s, "
                                "ResourceVersion in object meta: %s",
                                o->pre_rv, ks_rv_of(old));
                ks_conflict(w->t->res, w->t->name, resp, why);
                free(why);
                return false;
        }
        return true;
}

static void delete_success(const struct ktarget *t, const cJSON *old, struct kresp *resp)
{
        cJSON *d = ks_details(t->res, t->name, false);
        const char *uid = ks_obj_str(old, "metadata", "uid");

        if (uid)
                cJSON_AddStringToObject(d, "uid", uid);
        kresp_status(resp, 200, "", d, "%s", "");
        {
                cJSON *st = cJSON_Parse(resp->body);

                cJSON_DeleteItemFromObjectCaseSensitive(st, "message");
                cJSON_DeleteItemFromObjectCaseSensitive(st, "reason");
                kresp_json(resp, 200, st);
        }
}

/* lock held. Deletes a stored object (obj: a copy, consumed) the way DELETE does, without
 * admission. */
static void delete_locked(const struct kres *res, cJSON *obj, const char *policy)
{
        if (!strcmp(policy, "Foreground"))
                add_finalizer(obj, "foregroundDeletion");
        else if (!strcmp(policy, "Orphan"))
                add_finalizer(obj, "orphan");
        if (is_namespace(res) || !ks_finalizers_empty(obj))
                mark_deleting(res, obj);
        else
                ks_remove_locked(res, res->coll, obj);
        cJSON_Delete(obj);
}

static void commit_delete(const struct kwrite *w,
                          const struct del_opts *o,
                          cJSON *old,
                          struct kresp *resp)
{
        const struct ktarget *t = w->t;
        cJSON *cur;

        pthread_mutex_lock(&ks.mu);
        cur = store_get(t->res->coll, t->ns, t->name);
        if (!cur) {
                pthread_mutex_unlock(&ks.mu);
                delete_success(t, old, resp);
                return;
        }
        if (!w->dry_run) {
                delete_locked(t->res, cJSON_Duplicate(cur, true), o->policy);
                gc_sweep();
        }
        if (store_get(t->res->coll, t->ns, t->name)) {
                cur = cJSON_Duplicate(store_get(t->res->coll, t->ns, t->name), true);
                pthread_mutex_unlock(&ks.mu);
                ks_set_gvk(t->res, cur);
                kresp_json(resp, 200, cur);
                return;
        }
        pthread_mutex_unlock(&ks.mu);
        delete_success(t, old, resp);
}

void write_delete(const struct kwrite *w, struct kresp *resp)
{
        struct del_opts o = { 0 };
        cJSON *old = ks_load_copy(w->t);

        del_opts_parse(w->req, &o);
        if (write_precheck(w, old, NULL, false, resp) < 0 || !preconditions_ok(w, &o, old, resp) ||
            !admission_run(w, "DELETE", NULL, old, resp))
                goto out;
        commit_delete(w, &o, old, resp);
out:
        cJSON_Delete(old);
        del_opts_release(&o);
}

/* ---- garbage collection (lock held) ---- */

struct uidset {
        char **v;
        size_t n, cap;
};

static int str_cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static void uidset_build(struct uidset *s)
{
        const struct kcoll *c;
        size_t i;

        for (c = ks.colls; c; c = c->next)
                for (i = 0; i < c->n; i++) {
                        const char *u = ks_obj_str(c->objs[i], "metadata", "uid");

                        if (!u)
                                continue;
                        if (s->n == s->cap) {
                                s->cap = s->cap ? s->cap * 2 : 64;
                                s->v = xrealloc(s->v, s->cap * sizeof(*s->v));
                        }
                        s->v[s->n++] = (char *)(uintptr_t)u;
                }
        if (s->n)
                qsort(s->v, s->n, sizeof(*s->v), str_cmp);
}

static bool uidset_has(const struct uidset *s, const char *u)
{
        return s->n && bsearch(&u, s->v, s->n, sizeof(*s->v), str_cmp) != NULL;
}

static struct kres *res_of(const struct kcoll *c)
{
        struct kres *r;

        for (r = ks.res; r; r = r->next)
                if (r->coll == c && r->storage)
                        return r;
        for (r = ks.res; r; r = r->next)
                if (r->coll == c)
                        return r;
        return NULL;
}

enum gc_action {
        GC_NONE,
        GC_DELETE,
        GC_STRIP,
};

/* What to do with a dependent: delete when every owner is gone or being deleted in the
 * foreground; strip the refs of owners that orphan. */
static enum gc_action gc_decide(const cJSON *obj,
                                const struct uidset *live,
                                const struct uidset *fg,
                                const struct uidset *orphan)
{
        const cJSON *ref;
        int n = 0, gone = 0;

        cJSON_ArrayForEach (ref, ks_obj_get(obj, "metadata", "ownerReferences")) {
                const char *u = ks_obj_str(ref, "uid", NULL);

                n++;
                if (!u)
                        continue;
                if (uidset_has(orphan, u))
                        return GC_STRIP;
                if (!uidset_has(live, u) || uidset_has(fg, u))
                        gone++;
        }
        if (n == 0 || ks_obj_get(obj, "metadata", "deletionTimestamp"))
                return GC_NONE;
        return gone == n ? GC_DELETE : GC_NONE;
}

static void strip_refs(cJSON *obj, const struct uidset *orphan)
{
        cJSON *refs = ks_obj_get(obj, "metadata", "ownerReferences");
        int i;

        for (i = cJSON_GetArraySize(refs) - 1; i >= 0; i--) {
                const char *u = ks_obj_str(cJSON_GetArrayItem(refs, i), "uid", NULL);

                if (u && uidset_has(orphan, u))
                        cJSON_DeleteItemFromArray(refs, i);
        }
        if (cJSON_GetArraySize(refs) == 0)
                cJSON_DeleteItemFromObjectCaseSensitive(ks_obj_get(obj, "metadata", NULL),
                                                        "ownerReferences");
}

/* A terminating object o of collection c, with its uid and its garbage-collection finalizer
 * (NULL for none). Returns true to stop the walk. */
typedef bool terminating_fn(
        struct kcoll *c, const cJSON *o, const char *uid, const char *gc, void *arg);

/* Calls fn for each object marked for deletion that has a uid, gc being "foregroundDeletion"
 * when it holds that finalizer, else "orphan" when it holds that one, else NULL. Stops at
 * the first call that returns true and returns whether one did. */
static bool each_terminating(terminating_fn *fn, void *arg)
{
        struct kcoll *c;
        size_t i;

        for (c = ks.colls; c; c = c->next)
                for (i = 0; i < c->n; i++) {
                        const cJSON *o = c->objs[i];
                        const cJSON *fin = ks_obj_get(o, "metadata", "finalizers");
                        const char *uid = ks_obj_str(o, "metadata", "uid");
                        const char *gc = NULL;

                        if (!uid || !ks_obj_get(o, "metadata", "deletionTimestamp"))
                                continue;
                        if (ks_contains_str(fin, "foregroundDeletion"))
                                gc = "foregroundDeletion";
                        else if (ks_contains_str(fin, "orphan"))
                                gc = "orphan";
                        if (fn(c, o, uid, gc, arg))
                                return true;
                }
        return false;
}

struct owner_sets {
        struct uidset *fg, *orphan;
};

static bool add_owner(struct kcoll *c, const cJSON *o, const char *uid, const char *gc, void *arg)
{
        const struct owner_sets *sets = arg;
        struct uidset *s;

        (void)c;
        (void)o;
        if (!gc)
                return false;
        s = strcmp(gc, "orphan") == 0 ? sets->orphan : sets->fg;
        s->v = xrealloc(s->v, (s->n + 1) * sizeof(*s->v));
        s->v[s->n++] = (char *)(uintptr_t)uid;
        return false;
}

static void owner_sets(struct uidset *fg, struct uidset *orphan)
{
        (void)each_terminating(add_owner, &(struct owner_sets){ fg, orphan });
        if (fg->n)
                qsort(fg->v, fg->n, sizeof(*fg->v), str_cmp);
        if (orphan->n)
                qsort(orphan->v, orphan->n, sizeof(*orphan->v), str_cmp);
}

/* One pass over dependents: returns a list (array of copies) of objects to act on. */
static bool gc_dependents(void)
{
        struct uidset live = { 0 }, fg = { 0 }, orphan = { 0 };
        cJSON *del = cJSON_CreateArray(), *strip = cJSON_CreateArray(), *o;
        struct kcoll *c;
        size_t i;
        bool changed;

        uidset_build(&live);
        owner_sets(&fg, &orphan);
        for (c = ks.colls; c; c = c->next)
                for (i = 0; i < c->n; i++) {
                        enum gc_action a = gc_decide(c->objs[i], &live, &fg, &orphan);

                        if (a == GC_NONE)
                                continue;
                        o = cJSON_Duplicate(c->objs[i], true);
                        cJSON_AddItemToObject(o, "__coll",
                                              cJSON_CreateNumber((double)(uintptr_t)c));
                        cJSON_AddItemToArray(a == GC_DELETE ? del : strip, o);
                }
        cJSON_ArrayForEach (o, strip) {
                c = (struct kcoll *)(uintptr_t)cJSON_GetObjectItemCaseSensitive(o, "__coll")
                            ->valuedouble;
                cJSON_DeleteItemFromObjectCaseSensitive(o, "__coll");
                strip_refs(o, &orphan);
                ks_set_rv(o, store_next_rv());
                store_event(KEV_MODIFIED, c, o, ks.rv);
                store_put(c, cJSON_Duplicate(o, true));
        }
        cJSON_ArrayForEach (o, del) {
                c = (struct kcoll *)(uintptr_t)cJSON_GetObjectItemCaseSensitive(o, "__coll")
                            ->valuedouble;
                cJSON_DeleteItemFromObjectCaseSensitive(o, "__coll");
                delete_locked(res_of(c), cJSON_Duplicate(o, true), "Background");
        }
        changed = cJSON_GetArraySize(del) + cJSON_GetArraySize(strip) > 0;
        cJSON_Delete(del);
        cJSON_Delete(strip);
        free(live.v);
        free(fg.v);
        free(orphan.v);
        return changed;
}

static bool has_dependents(const char *uid)
{
        const struct kcoll *c;
        const cJSON *ref;
        size_t i;

        for (c = ks.colls; c; c = c->next)
                for (i = 0; i < c->n; i++)
                        cJSON_ArrayForEach (ref,
                                            ks_obj_get(c->objs[i], "metadata", "ownerReferences")) {
                                const char *u = ks_obj_str(ref, "uid", NULL);

                                if (u && !strcmp(u, uid))
                                        return true;
                        }
        return false;
}

static void drop_finalizer(cJSON *obj, const char *f)
{
        cJSON *fin = ks_obj_get(obj, "metadata", "finalizers");
        int i;

        for (i = cJSON_GetArraySize(fin) - 1; i >= 0; i--) {
                const cJSON *it = cJSON_GetArrayItem(fin, i);

                if (cJSON_IsString(it) && !strcmp(it->valuestring, f))
                        cJSON_DeleteItemFromArray(fin, i);
        }
}

/* Finishes o when its foreground/orphan work is done or it is a namespace that emptied. */
static bool finish_owner(
        struct kcoll *c, const cJSON *o, const char *uid, const char *gc, void *arg)
{
        struct kres *res = res_of(c);
        const char *f = NULL;
        cJSON *copy;

        (void)arg;
        if (gc && !has_dependents(uid))
                f = gc;
        else if (is_namespace(res) && store_ns_empty(ks_obj_str(o, "metadata", "name")) &&
                 (cJSON_GetArraySize(ks_obj_get(o, "spec", "finalizers")) > 0 ||
                  ks_finalizers_empty(o)))
                f = "";
        if (!f)
                return false;
        copy = cJSON_Duplicate(o, true);
        drop_finalizer(copy, f);
        if (!*f)
                cJSON_DeleteItemFromObjectCaseSensitive(ks_obj_get(copy, "spec", NULL),
                                                        "finalizers");
        if (ks_finalizers_empty(copy) && (*f || !ks_obj_get(copy, "spec", "finalizers")))
                ks_remove_locked(res, c, copy);
        else {
                ks_set_rv(copy, store_next_rv());
                store_event(KEV_MODIFIED, c, copy, ks.rv);
                store_put(c, cJSON_Duplicate(copy, true));
        }
        cJSON_Delete(copy);
        return true;
}

/* Finishes the first owner whose foreground/orphan work is done or namespace that emptied. */
static bool gc_owners(void)
{
        return each_terminating(finish_owner, NULL);
}

/* Deletes everything inside terminating namespaces. */
static bool gc_namespaces(void)
{
        struct kres *nsr = registry_find("", "v1", "namespaces");
        struct kcoll *c;
        size_t i, j;
        bool changed = false;

        for (i = 0; nsr && i < nsr->coll->n; i++) {
                const cJSON *ns = nsr->coll->objs[i];
                const char *name = ks_obj_str(ns, "metadata", "name");

                if (!ks_obj_get(ns, "metadata", "deletionTimestamp") || !name)
                        continue;
                for (c = ks.colls; c; c = c->next)
                        for (j = c->n; j-- > 0;) {
                                const cJSON *o = c->objs[j];
                                const char *ons = ks_obj_str(o, "metadata", "namespace");

                                if (!ons || strcmp(ons, name) != 0 ||
                                    ks_obj_get(o, "metadata", "deletionTimestamp"))
                                        continue;
                                delete_locked(res_of(c), cJSON_Duplicate(o, true), "Background");
                                changed = true;
                        }
        }
        return changed;
}

void gc_sweep(void)
{
        int rounds;

        for (rounds = 0; rounds < 1000; rounds++)
                if (!gc_namespaces() && !gc_dependents() && !gc_owners())
                        break;
}
