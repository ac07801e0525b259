/* kube-sim request routing and the read verbs (get, list); writes go to write.c. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "err.h"
#include "ks.h"
#include "xalloc.h"

/* Sets apiVersion/kind of obj to what res serves (CRs may be stored under another version). */
static void set_gvk(const struct kres *res, cJSON *obj)
{
        char *av = ks_api_version(res);

        ks_obj_set_str(obj, "apiVersion", av);
        ks_obj_set_str(obj, "kind", res->kind);
        free(av);
}

static void not_found(const struct ktarget *t, struct kresp *resp)
{
        char *rn = ks_resname(t->res);

        kresp_status(resp, 404, "NotFound", ks_details(t->res, t->name, false),
                     "%s \"%s\" not found", rn, t->name);
        free(rn);
}

static void reply_obj(const struct kreq *r,
                      const struct ktarget *t,
                      cJSON *obj,
                      unsigned code,
                      struct kresp *resp)
{
        cJSON *items;

        set_gvk(t->res, obj);
        if (!ks_wants_table(r->accept)) {
                kresp_json(resp, code, obj);
                return;
        }
        items = cJSON_CreateArray();
        cJSON_AddItemToArray(items, obj);
        kresp_json(resp, code, table_build(t->res, items, true));
        cJSON_Delete(items);
}

static void do_get(const struct kreq *r, const struct ktarget *t, struct kresp *resp)
{
        cJSON *obj;

        pthread_mutex_lock(&ks.mu);
        obj = store_get(t->res->coll, t->ns, t->name);
        obj = obj ? cJSON_Duplicate(obj, true) : NULL;
        pthread_mutex_unlock(&ks.mu);
        if (!obj) {
                not_found(t, resp);
                return;
        }
        reply_obj(r, t, obj, 200, resp);
}

/* ---- list ---- */

struct list_q {
        struct ksel *lsel, *fsel;
        long limit;
        char *cont_ns, *cont_name; /* resume strictly after this key */
        uint64_t cont_rv;
};

static void list_q_release(struct list_q *q)
{
        ksel_free(q->lsel);
        ksel_free(q->fsel);
        free(q->cont_ns);
        free(q->cont_name);
}

static int parse_continue(const char *tok, struct list_q *q)
{
        unsigned char *raw = NULL;
        size_t n = 0;
        char *p1, *p2;
        int err = CM_EPARSE;

        if (base64_decode(tok, strlen(tok), &raw, &n) < 0)
                return CM_EPARSE;
        p1 = strchr((char *)raw, '|');
        p2 = p1 ? strchr(p1 + 1, '|') : NULL;
        if (p2) {
                *p1 = *p2 = 0;
                q->cont_rv = strtoull((char *)raw, NULL, 10);
                q->cont_ns = xstrdup(p1 + 1);
                q->cont_name = xstrdup(p2 + 1);
                err = 0;
        }
        free(raw);
        return err;
}

static bool parse_list_q(const struct kreq *r,
                         const struct ktarget *t,
                         struct list_q *q,
                         struct kresp *resp)
{
        const char *lim = kq(r, "limit"), *cont = kq(r, "continue");
        char *msg = NULL;

        if (ksel_parse_labels(kq(r, "labelSelector"), &q->lsel, &msg) < 0 ||
            ksel_parse_fields(kq(r, "fieldSelector"), t->res, &q->fsel, &msg) < 0) {
                kresp_status(resp, 400, "BadRequest", NULL, "%s", msg);
                free(msg);
                return false;
        }
        q->limit = lim ? strtol(lim, NULL, 10) : 0;
        if (cont && *cont && parse_continue(cont, q) < 0) {
                kresp_status(resp, 400, "BadRequest", NULL, "continue key is not valid");
                return false;
        }
        return true;
}

static bool after_cont(const struct list_q *q, const cJSON *obj)
{
        const char *ns = ks_obj_str(obj, "metadata", "namespace");
        const char *name = ks_obj_str(obj, "metadata", "name");
        int d;

        if (!q->cont_name)
                return true;
        d = strcmp(ns ? ns : "", q->cont_ns);
        return d > 0 || (d == 0 && strcmp(name ? name : "", q->cont_name) > 0);
}

static bool obj_in_ns(const cJSON *obj, const char *ns)
{
        const char *ons;

        if (!ns)
                return true;
        ons = ks_obj_str(obj, "metadata", "namespace");
        return ons && !strcmp(ons, ns);
}

static char *make_continue(uint64_t rv, const cJSON *last)
{
        const char *ns = ks_obj_str(last, "metadata", "namespace");
        char *raw = xasprintf("%" PRIu64 "|%s|%s", rv, ns ? ns : "",
                              ks_obj_str(last, "metadata", "name"));
        char *tok = base64_encode((const unsigned char *)raw, strlen(raw));

        free(raw);
        return tok;
}

/* lock held. Fills items; returns the continue token (or NULL) and remaining count. */
static char *collect(const struct ktarget *t,
                     const struct list_q *q,
                     cJSON *items,
                     long *ret_remaining)
{
        const struct kcoll *c = t->res->coll;
        const cJSON *last = NULL;
        long n = 0, remaining = 0;
        size_t i;

        for (i = 0; i < c->n; i++) {
                const cJSON *o = c->objs[i];

                if (!obj_in_ns(o, t->ns) || !after_cont(q, o) || !ksel_match(q->lsel, q->fsel, o))
                        continue;
                if (q->limit > 0 && n >= q->limit) {
                        remaining++;
                        continue;
                }
                cJSON_AddItemToArray(items, cJSON_Duplicate(o, true));
                last = o;
                n++;
        }
        *ret_remaining = remaining;
        return remaining && last ? make_continue(ks.rv, last) : NULL;
}

static cJSON *list_wrap(const struct kreq *r,
                        const struct ktarget *t,
                        cJSON *items,
                        uint64_t rv,
                        char *cont,
                        long remaining)
{
        cJSON *out, *md, *it;
        char rvs[32];

        snprintf(rvs, sizeof(rvs), "%" PRIu64, rv);
        cJSON_ArrayForEach (it, items) {
                set_gvk(t->res, it);
        }
        if (ks_wants_table(r->accept)) {
                out = table_build(t->res, items, !kq(r, "continue"));
                cJSON_Delete(items);
        } else {
                char *av = ks_api_version(t->res);

                out = cJSON_CreateObject();
                cJSON_AddStringToObject(out, "kind", t->res->list_kind);
                cJSON_AddStringToObject(out, "apiVersion", av);
                cJSON_AddObjectToObject(out, "metadata");
                cJSON_AddItemToObject(out, "items", items);
                free(av);
        }
        md = ks_obj_ensure(out, "metadata");
        cJSON_AddStringToObject(md, "resourceVersion", rvs);
        if (cont) {
                cJSON_AddStringToObject(md, "continue", cont);
                cJSON_AddNumberToObject(md, "remainingItemCount", (double)remaining);
        }
        return out;
}

static bool rv_expired(const struct kreq *r, const struct list_q *q, struct kresp *resp)
{
        const char *rv = kq(r, "resourceVersion"), *match = kq(r, "resourceVersionMatch");

        if (q->cont_name && q->cont_rv < ks.compacted_rv) {
                kresp_status(resp, 410, "Expired", NULL,
                             "The provided continue parameter is too old to display a "
                             "consistent list result. You can start a new list without the "
                             "continue parameter, or use the continue token in this response "
                             "to retrieve the remainder of the results. Continuing with the "
                             "provided token results in an inconsistent list - objects that "
                             "were created, modified, or deleted between the time the first "
                             "chunk was returned and now may show up in the list.");
                return true;
        }
        if (rv && match && !strcmp(match, "Exact") && strtoull(rv, NULL, 10) != ks.rv) {
                kresp_status(resp, 410, "Expired", NULL,
                             "too old resource version: %s (%" PRIu64 ")", rv, ks.rv);
                return true;
        }
        return false;
}

static void do_list(const struct kreq *r, const struct ktarget *t, struct kresp *resp)
{
        struct list_q q = { 0 };
        cJSON *items;
        char *cont = NULL;
        long remaining = 0;
        uint64_t rv;

        if (!parse_list_q(r, t, &q, resp))
                goto out;
        items = cJSON_CreateArray();
        pthread_mutex_lock(&ks.mu);
        if (rv_expired(r, &q, resp)) {
                pthread_mutex_unlock(&ks.mu);
                cJSON_Delete(items);
                goto out;
        }
        cont = collect(t, &q, items, &remaining);
        rv = ks.rv;
        pthread_mutex_unlock(&ks.mu);
        kresp_json(resp, 200, list_wrap(r, t, items, rv, cont, remaining));
out:
        free(cont);
        list_q_release(&q);
}

/* ---- routing ---- */

static char *split(char *path, char **segs, size_t max, size_t *ret_n)
{
        size_t n = 0;
        char *p = path;

        while (*p && n < max) {
                char *s;

                while (*p == '/')
                        p++;
                if (!*p)
                        break;
                s = p;
                while (*p && *p != '/')
                        p++;
                if (*p)
                        *p++ = 0;
                segs[n++] = s;
        }
        *ret_n = (*p && n == max) ? max + 1 : n;
        return path;
}

/* lock held. Resolves segs (after the group/version prefix) into t. */
static bool resolve(const char *group, const char *version, char **s, size_t n, struct ktarget *t)
{
        struct kres *res;

        if (n >= 3 && !strcmp(s[0], "namespaces")) {
                res = registry_find(group, version, s[2]);
                if (res && res->namespaced && n <= 5) {
                        t->res = res;
                        t->ns = s[1];
                        t->name = n > 3 ? s[3] : NULL;
                        t->sub = n > 4 ? s[4] : NULL;
                        return true;
                }
        }
        if (n < 1 || n > 3)
                return false;
        res = registry_find(group, version, s[0]);
        if (!res)
                return false;
        t->res = res;
        t->name = n > 1 ? s[1] : NULL;
        t->sub = n > 2 ? s[2] : NULL;
        return !(res->namespaced && t->name);
}

static bool parse_target(char *path, struct ktarget *t)
{
        char *s[8];
        size_t n = 0;

        split(path, s, ARRAY_SIZE(s), &n);
        if (n > ARRAY_SIZE(s))
                return false;
        if (n >= 2 && !strcmp(s[0], "api"))
                return resolve("", s[1], s + 2, n - 2, t);
        if (n >= 3 && !strcmp(s[0], "apis"))
                return resolve(s[1], s[2], s + 3, n - 3, t);
        return false;
}

static void no_route(struct kresp *resp)
{
        kresp_status(resp, 404, "NotFound", cJSON_CreateObject(),
                     "the server could not find the requested resource");
}

static void method_not_allowed(const struct kreq *r, struct kresp *resp)
{
        kresp_status(resp, 405, "MethodNotAllowed", cJSON_CreateObject(),
                     "the server does not allow this method on the requested resource");
        (void)r;
}

static cJSON *parse_write_body(const struct kreq *r, struct kresp *resp)
{
        cJSON *obj;

        if (r->content_type && strstr(r->content_type, "protobuf")) {
                obj = ks_proto_to_json(r->body, r->body_len);
                if (!obj) {
                        kresp_status(resp, 415, "UnsupportedMediaType", NULL,
                                     "the body of the request was in an unknown format - "
                                     "accepted media types include: application/json, "
                                     "application/yaml");
                        return NULL;
                }
                return obj;
        }
        obj = ks_parse_body(r->body, r->body_len);
        if (!obj && r->content_type && strstr(r->content_type, "yaml"))
                obj = ks_yaml_to_json(r->body, r->body_len);
        if (!cJSON_IsObject(obj)) {
                cJSON_Delete(obj);
                kresp_status(resp, 400, "BadRequest", NULL,
                             "the body of the request could not be decoded as an object");
                return NULL;
        }
        return obj;
}

static void init_write(const struct kreq *r, const struct ktarget *t, struct kwrite *w)
{
        const char *dry = kq(r, "dryRun");

        w->req = r;
        w->t = t;
        w->dry_run = dry && !strcmp(dry, "All");
        w->manager = kq(r, "fieldManager");
        w->operation = "Update";
}

static void do_put(const struct kreq *r, const struct ktarget *t, struct kresp *resp)
{
        cJSON *obj = parse_write_body(r, resp);
        struct kwrite w = { 0 };
        const char *name, *rv;
        char *rvc;

        if (!obj)
                return;
        name = ks_obj_str(obj, "metadata", "name");
        if (name && strcmp(name, t->name) != 0) {
                kresp_status(resp, 400, "BadRequest", NULL,
                             "the name of the object (%s) does not match the name on the URL "
                             "(%s)",
                             name, t->name);
                cJSON_Delete(obj);
                return;
        }
        init_write(r, t, &w);
        rv = ks_obj_str(obj, "metadata", "resourceVersion");
        rvc = xstrdup(rv ? rv : "");
        (void)write_update(&w, obj, rvc, true, resp);
        free(rvc);
}

static void do_post(const struct kreq *r, const struct ktarget *t, struct kresp *resp)
{
        cJSON *obj = parse_write_body(r, resp);
        struct kwrite w = { 0 };

        if (!obj)
                return;
        init_write(r, t, &w);
        write_create(&w, obj, resp);
}

static void do_delete(const struct kreq *r, const struct ktarget *t, struct kresp *resp)
{
        struct kwrite w = { 0 };

        init_write(r, t, &w);
        write_delete(&w, resp);
}

static void do_delete_collection(const struct kreq *r, const struct ktarget *t, struct kresp *resp)
{
        struct list_q q = { 0 };
        cJSON *items = cJSON_CreateArray(), *it;
        long remaining = 0;
        char *cont;

        if (parse_list_q(r, t, &q, resp)) {
                pthread_mutex_lock(&ks.mu);
                cont = collect(t, &q, items, &remaining);
                pthread_mutex_unlock(&ks.mu);
                free(cont);
                cJSON_ArrayForEach (it, items) {
                        struct ktarget one = *t;
                        struct kresp sub = { 0 };
                        struct kwrite w = { 0 };

                        one.ns = ks_obj_str(it, "metadata", "namespace");
                        one.name = ks_obj_str(it, "metadata", "name");
                        init_write(r, &one, &w);
                        write_delete(&w, &sub);
                        free(sub.body);
                }
                kresp_status(resp, 200, "", NULL, "deleted %d objects", cJSON_GetArraySize(items));
        }
        cJSON_Delete(items);
        list_q_release(&q);
}

static void dispatch(const struct kreq *r, const struct ktarget *t, struct kresp *resp)
{
        const char *m = r->method;

        if (t->sub && (strcmp(t->sub, "status") != 0 || !t->res->status_sub)) {
                no_route(resp);
                return;
        }
        if (!strcmp(m, "GET") && t->name)
                do_get(r, t, resp);
        else if (!strcmp(m, "GET") && kq_bool(r, "watch"))
                watch_start(r, t, resp);
        else if (!strcmp(m, "GET"))
                do_list(r, t, resp);
        else if (!strcmp(m, "POST") && !t->name)
                do_post(r, t, resp);
        else if (!strcmp(m, "PUT") && t->name)
                do_put(r, t, resp);
        else if (!strcmp(m, "PATCH") && t->name)
                handle_patch(r, t, resp);
        else if (!strcmp(m, "DELETE") && t->name)
                do_delete(r, t, resp);
        else if (!strcmp(m, "DELETE"))
                do_delete_collection(r, t, resp);
        else
                method_not_allowed(r, resp);
}

void handle_request(const struct kreq *r, struct kresp *resp)
{
        struct ktarget t = { 0 };
        char *path;
        bool found;

        pthread_mutex_lock(&ks.mu);
        if (discovery_handle(r, resp)) {
                pthread_mutex_unlock(&ks.mu);
                return;
        }
        pthread_mutex_unlock(&ks.mu);
        if (!strncmp(r->path, "/_sim/", 6)) {
                if (!simctl_handle(r, resp))
                        no_route(resp);
                return;
        }
        if (!strcmp(r->path, "/openapi/v2") || !strncmp(r->path, "/openapi/", 9)) {
                no_route(resp);
                return;
        }
        if (authn_handle(r, resp))
                return;
        path = xstrdup(r->path);
        pthread_mutex_lock(&ks.mu);
        found = parse_target(path, &t);
        pthread_mutex_unlock(&ks.mu);
        if (found)
                dispatch(r, &t, resp);
        else
                no_route(resp);
        free(path);
}

/* ---- seed ---- */

static void seed_namespace(const char *name)
{
        cJSON *ns = cJSON_CreateObject();
        cJSON *md = cJSON_AddObjectToObject(ns, "metadata");
        cJSON *labels = cJSON_AddObjectToObject(md, "labels");
        const char *fin[] = { "kubernetes" };
        char *uid = ks_uuid(), *now = ks_now_rfc3339(), *rv;
        struct kres *res = registry_find("", "v1", "namespaces");

        cJSON_AddStringToObject(ns, "apiVersion", "v1");
        cJSON_AddStringToObject(ns, "kind", "Namespace");
        cJSON_AddStringToObject(md, "name", name);
        cJSON_AddStringToObject(md, "uid", uid);
        rv = xasprintf("%" PRIu64, store_next_rv());
        cJSON_AddStringToObject(md, "resourceVersion", rv);
        cJSON_AddStringToObject(md, "creationTimestamp", now);
        cJSON_AddStringToObject(labels, "kubernetes.io/metadata.name", name);
        cJSON_AddItemToObject(cJSON_AddObjectToObject(ns, "spec"), "finalizers",
                              cJSON_CreateStringArray(fin, 1));
        cJSON_AddStringToObject(cJSON_AddObjectToObject(ns, "status"), "phase", "Active");
        store_event(KEV_ADDED, res->coll, ns, ks.rv);
        store_put(res->coll, ns);
        free(uid);
        free(now);
        free(rv);
}

void handlers_seed(void)
{
        pthread_mutex_lock(&ks.mu);
        seed_namespace("default");
        seed_namespace("kube-system");
        seed_namespace("kube-public");
        seed_namespace("kube-node-lease");
        pthread_mutex_unlock(&ks.mu);
}
