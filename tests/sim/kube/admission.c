/*
 * kube-sim admission: calls the webhooks of MutatingWebhookConfiguration (in order, patches
 * applied) and then ValidatingWebhookConfiguration objects over HTTPS, verified against
 * caBundle, with "?timeout=Ns" appended, failurePolicy, dryRun and warnings. Runs without
 * ks.mu held (it takes the lock only to snapshot the configurations and namespace labels).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "base64.h"
#include "err.h"
#include "ks.h"
#include "log.h"
#include "xalloc.h"

#define REVIEW_MAX (16u * 1024u * 1024u)

struct call {
        const struct kwrite *w;
        const cJSON *hook;
        const char *op;
        bool mutating;
        cJSON *obj; /* may be patched (mutating) */
        const cJSON *old;
        struct kresp *resp;
};

/* ---- matching ---- */

static bool list_has(const cJSON *arr, const char *v)
{
        const cJSON *it;

        cJSON_ArrayForEach (it, arr) {
                if (cJSON_IsString(it) &&
                    (!strcmp(it->valuestring, "*") || !strcmp(it->valuestring, v)))
                        return true;
        }
        return false;
}

static bool resource_match(const cJSON *arr, const char *plural, const char *sub)
{
        const cJSON *it;

        cJSON_ArrayForEach (it, arr) {
                const char *r = cJSON_IsString(it) ? it->valuestring : "";
                const char *slash = strchr(r, '/');

                if (!slash && !sub && (!strcmp(r, "*") || !strcmp(r, plural)))
                        return true;
                if (!slash || !sub)
                        continue;
                if ((!strncmp(r, "*", 1) || !strncmp(r, plural, (size_t)(slash - r))) &&
                    (!strcmp(slash + 1, "*") || !strcmp(slash + 1, sub)) &&
                    (r[0] == '*' || strlen(plural) == (size_t)(slash - r)))
                        return true;
        }
        return false;
}

static bool rule_match(const cJSON *rule, const struct call *c)
{
        const struct kres *res = c->w->t->res;
        const char *scope = ks_obj_str(rule, "scope", NULL);

        if (!list_has(ks_obj_get(rule, "operations", NULL), c->op) ||
            !list_has(ks_obj_get(rule, "apiGroups", NULL), res->group) ||
            !list_has(ks_obj_get(rule, "apiVersions", NULL), res->version) ||
            !resource_match(ks_obj_get(rule, "resources", NULL), res->plural, c->w->t->sub))
                return false;
        if (scope && !strcmp(scope, "Cluster"))
                return !res->namespaced;
        if (scope && !strcmp(scope, "Namespaced"))
                return res->namespaced;
        return true;
}

static bool hook_match(const struct call *c, const cJSON *ns_labels)
{
        const cJSON *rule, *os = ks_obj_get(c->hook, "objectSelector", NULL);
        bool any = false;

        cJSON_ArrayForEach (rule, ks_obj_get(c->hook, "rules", NULL)) {
                any = any || rule_match(rule, c);
        }
        if (!any)
                return false;
        if (!ksel_match_labels_obj(os, ks_obj_get(c->obj, "metadata", "labels")) &&
            !ksel_match_labels_obj(os, ks_obj_get(c->old, "metadata", "labels")))
                return false;
        return ksel_match_labels_obj(ks_obj_get(c->hook, "namespaceSelector", NULL), ns_labels);
}

/* ---- the request ---- */

static cJSON *gvk_obj(const struct kres *r, bool resource)
{
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "group", r->group);
        cJSON_AddStringToObject(o, "version", r->version);
        cJSON_AddStringToObject(o, resource ? "resource" : "kind", resource ? r->plural : r->kind);
        return o;
}

static cJSON *options(const struct call *c)
{
        cJSON *o = cJSON_CreateObject();
        const char *kind = !strcmp(c->op, "CREATE")   ? "CreateOptions"
                           : !strcmp(c->op, "DELETE") ? "DeleteOptions"
                                                      : "UpdateOptions";

        cJSON_AddStringToObject(o, "kind", kind);
        cJSON_AddStringToObject(o, "apiVersion", "meta.k8s.io/v1");
        if (c->w->manager && strcmp(kind, "DeleteOptions") != 0)
                cJSON_AddStringToObject(o, "fieldManager", c->w->manager);
        return o;
}

static cJSON *review(const struct call *c, const char *uid)
{
        const struct ktarget *t = c->w->t;
        cJSON *rv = cJSON_CreateObject(), *rq = cJSON_CreateObject(), *ui;
        const char *groups[] = { "system:masters", "system:authenticated" };
        const char *name = t->name ? t->name : ks_obj_str(c->obj, "metadata", "name");

        cJSON_AddStringToObject(rv, "kind", "AdmissionReview");
        cJSON_AddStringToObject(rv, "apiVersion", "admission.k8s.io/v1");
        cJSON_AddStringToObject(rq, "uid", uid);
        cJSON_AddItemToObject(rq, "kind", gvk_obj(t->res, false));
        cJSON_AddItemToObject(rq, "resource", gvk_obj(t->res, true));
        if (t->sub)
                cJSON_AddStringToObject(rq, "subResource", t->sub);
        cJSON_AddItemToObject(rq, "requestKind", gvk_obj(t->res, false));
        cJSON_AddItemToObject(rq, "requestResource", gvk_obj(t->res, true));
        if (t->sub)
                cJSON_AddStringToObject(rq, "requestSubResource", t->sub);
        cJSON_AddStringToObject(rq, "name", name ? name : "");
        if (t->ns)
                cJSON_AddStringToObject(rq, "namespace", t->ns);
        cJSON_AddStringToObject(rq, "operation", c->op);
        ui = cJSON_AddObjectToObject(rq, "userInfo");
        cJSON_AddStringToObject(ui, "username", "kubernetes-admin");
        cJSON_AddItemToObject(ui, "groups", cJSON_CreateStringArray(groups, 2));
        cJSON_AddItemToObject(rq, "object",
                              c->obj ? cJSON_Duplicate(c->obj, true) : cJSON_CreateNull());
        cJSON_AddItemToObject(rq, "oldObject",
                              c->old ? cJSON_Duplicate(c->old, true) : cJSON_CreateNull());
        cJSON_AddBoolToObject(rq, "dryRun", c->w->dry_run);
        cJSON_AddItemToObject(rq, "options", options(c));
        cJSON_AddItemToObject(rv, "request", rq);
        return rv;
}

/* ---- HTTP ---- */

struct target {
        char *url;        /* with ?timeout= */
        char *connect_to; /* "host:port:target-host:target-port" or NULL */
        long timeout_s;
};

static const char *override_for(const char *ns, const char *name)
{
        size_t i;
        char *key = xasprintf("%s/%s", ns, name);
        const char *out = NULL;

        for (i = 0; i < ks.n_overrides; i++)
                if (!strcmp(ks.overrides[i].service, key))
                        out = ks.overrides[i].target;
        free(key);
        return out;
}

static void target_init(const cJSON *hook, struct target *t)
{
        const cJSON *cc = ks_obj_get(hook, "clientConfig", NULL);
        const cJSON *svc = ks_obj_get(cc, "service", NULL);
        const cJSON *to = ks_obj_get(hook, "timeoutSeconds", NULL);
        const cJSON *port = ks_obj_get(svc, "port", NULL);
        const char *url = ks_obj_str(cc, "url", NULL);

        t->timeout_s = cJSON_IsNumber(to) ? (long)to->valuedouble : 10;
        if (t->timeout_s < 1 || t->timeout_s > 30)
                t->timeout_s = 10;
        t->connect_to = NULL;
        if (url) {
                t->url = xasprintf("%s?timeout=%lds", url, t->timeout_s);
                return;
        }
        {
                const char *ns = ks_obj_str(svc, "namespace", NULL);
                const char *name = ks_obj_str(svc, "name", NULL);
                const char *path = ks_obj_str(svc, "path", NULL);
                long p = cJSON_IsNumber(port) ? (long)port->valuedouble : 443;
                const char *ov;

                ns = ns ? ns : "";
                name = name ? name : "";
                t->url = xasprintf("https://%s.%s.svc:%ld%s?timeout=%lds", name, ns, p,
                                   path ? path : "", t->timeout_s);
                ov = override_for(ns, name);
                if (ov)
                        t->connect_to = xasprintf("%s.%s.svc:%ld:%s", name, ns, p, ov);
        }
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
        return buf_append(ud, p, size * n) < 0 ? 0 : size * n;
}

/* The caBundle as a PEM file, for libcurl (its GnuTLS build takes no in-memory CA). One
 * stable file per distinct bundle under --dir, so libcurl can reuse a connection across
 * calls (it only does when the CA file is the same). Caller frees the path. */
static char *ca_file(const cJSON *hook)
{
        const char *b64 = ks_obj_str(hook, "clientConfig", "caBundle");
        unsigned char *pem = NULL;
        uint64_t h = 1469598103934665603ull;
        char *path, *tmp = NULL;
        size_t n = 0;
        int fd = -1;

        if (!b64)
                return NULL;
        for (const char *c = b64; *c; c++)
                h = (h ^ (unsigned char)*c) * 1099511628211ull;
        path = xasprintf("%s/webhook-ca-%016llx.pem", ks.dir ? ks.dir : "/tmp",
                         (unsigned long long)h);
        if (access(path, R_OK) == 0)
                return path;
        if (base64_decode(b64, strlen(b64), &pem, &n) < 0)
                goto fail;
        tmp = xasprintf("%s.XXXXXX", path);
        fd = mkstemp(tmp);
        if (fd < 0 || write(fd, pem, n) != (ssize_t)n || close(fd) != 0 || rename(tmp, path)) {
                fd = -1;
                unlink(tmp);
                goto fail;
        }
        free(tmp);
        free(pem);
        return path;
fail:
        free(tmp);
        free(pem);
        free(path);
        return NULL;
}

/* One libcurl handle per thread, kept for its connection cache (keep-alive to the webhook
 * server, as the API server keeps its connections). */
static pthread_key_t curl_key;
static pthread_once_t curl_key_once = PTHREAD_ONCE_INIT;

static void curl_key_free(void *h)
{
        curl_easy_cleanup(h);
}

static void curl_key_init(void)
{
        (void)pthread_key_create(&curl_key, curl_key_free);
}

static CURL *thread_handle(void)
{
        CURL *h;

        (void)pthread_once(&curl_key_once, curl_key_init);
        h = pthread_getspecific(curl_key);
        if (h) {
                curl_easy_reset(h);
                return h;
        }
        h = curl_easy_init();
        if (h)
                (void)pthread_setspecific(curl_key, h);
        return h;
}

static const char *go_error(CURLcode rc, const struct target *t, char *tmp, size_t cap)
{
        switch (rc) {
        case CURLE_OPERATION_TIMEDOUT:
                return "context deadline exceeded";
        case CURLE_COULDNT_CONNECT:
                snprintf(tmp, cap, "dial tcp: connect: connection refused");
                return tmp;
        case CURLE_COULDNT_RESOLVE_HOST:
                snprintf(tmp, cap, "dial tcp: lookup: no such host");
                return tmp;
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CACERT_BADFILE:
                return "tls: failed to verify certificate: x509: certificate signed by unknown "
                       "authority";
        default:
                (void)t;
                return curl_easy_strerror(rc);
        }
}

/* Posts body; 0 with the reply, or an error text in *ret_err. */
static int post(const cJSON *hook,
                const struct target *t,
                const char *body,
                struct buf *out,
                char **ret_err)
{
        CURL *h = thread_handle();
        struct curl_slist *hdr = NULL, *ct = NULL;
        char *ca = ca_file(hook), tmp[256], ebuf[CURL_ERROR_SIZE] = "";
        long code = 0;
        CURLcode rc;

        hdr = curl_slist_append(hdr, "Content-Type: application/json");
        hdr = curl_slist_append(hdr, "Accept: application/json");
        if (t->connect_to)
                ct = curl_slist_append(ct, t->connect_to);
        curl_easy_setopt(h, CURLOPT_URL, t->url);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(h, CURLOPT_CONNECT_TO, ct);
        curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, t->timeout_s * 1000L);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
        if (ca) {
                curl_easy_setopt(h, CURLOPT_CAINFO, ca);
                curl_easy_setopt(h, CURLOPT_CAPATH, NULL); /* not all of /etc/ssl/certs */
        }
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
        rc = curl_easy_perform(h);
        if (rc != CURLE_OK)
                log_debug("admission", "webhook call failed", "url=%s curl=%d error=%s", t->url,
                          (int)rc, ebuf);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        if (rc != CURLE_OK)
                *ret_err = xasprintf("failed to call webhook: Post \"%s\": %s", t->url,
                                     go_error(rc, t, tmp, sizeof(tmp)));
        else if (code != 200)
                *ret_err = xasprintf("failed to call webhook: the server responded with status "
                                     "code %ld",
                                     code);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
        curl_easy_setopt(h, CURLOPT_CONNECT_TO, NULL);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
        curl_slist_free_all(hdr);
        curl_slist_free_all(ct);
        if (ca) {
                free(ca);
        }
        return *ret_err ? CM_ETRANSPORT : 0;
}

/* ---- responses ---- */

static char *check_reply(const cJSON *rv, const char *uid, bool mutating)
{
        const cJSON *r = ks_obj_get(rv, "response", NULL);
        const char *ruid = ks_obj_str(r, "uid", NULL);
        const char *av = ks_obj_str(rv, "apiVersion", NULL), *kind = ks_obj_str(rv, "kind", NULL);
        bool has_patch = ks_obj_get(r, "patch", NULL) != NULL;
        bool has_type = ks_obj_get(r, "patchType", NULL) != NULL;

        if (!av || strcmp(av, "admission.k8s.io/v1") != 0 || !kind ||
            strcmp(kind, "AdmissionReview") != 0)
                return xasprintf("received invalid webhook response: expected webhook response "
                                 "of admission.k8s.io/v1, Kind=AdmissionReview, got %s, Kind=%s",
                                 av ? av : "", kind ? kind : "");
        if (!cJSON_IsObject(r))
                return xstrdup("received invalid webhook response: webhook response was absent");
        if (!ruid || strcmp(ruid, uid) != 0)
                return xasprintf("received invalid webhook response: expected response.uid=\"%s\", "
                                 "got \"%s\"",
                                 uid, ruid ? ruid : "");
        if (!mutating && (has_patch || has_type))
                return xstrdup("received invalid webhook response: validating webhooks may not "
                               "return patches");
        if (has_patch != has_type)
                return xstrdup("received invalid webhook response: patch and patchType must be "
                               "set together");
        return NULL;
}

static void deny(const struct call *c, const cJSON *r)
{
        const char *name = ks_obj_str(c->hook, "name", NULL);
        const cJSON *st = ks_obj_get(r, "status", NULL);
        const char *msg = ks_obj_str(st, "message", NULL);
        const char *reason = ks_obj_str(st, "reason", NULL);
        const cJSON *code = ks_obj_get(st, "code", NULL);
        const cJSON *details = ks_obj_get(st, "details", NULL);
        unsigned http = cJSON_IsNumber(code) && code->valuedouble >= 400 && code->valuedouble < 600
                                ? (unsigned)code->valuedouble
                                : 403;

        kresp_status(c->resp, http, reason && *reason ? reason : "Forbidden",
                     cJSON_IsObject(details) ? cJSON_Duplicate(details, true) : NULL,
                     "admission webhook \"%s\" denied the request: %s", name ? name : "",
                     msg && *msg         ? msg
                     : reason && *reason ? reason
                                         : "without explanation");
}

static bool apply_reply(struct call *c, const cJSON *r)
{
        const cJSON *w;
        const char *patch = ks_obj_str(r, "patch", NULL);
        unsigned char *raw = NULL;
        size_t n = 0;
        cJSON *ops;
        char *err = NULL;
        int rc;

        cJSON_ArrayForEach (w, ks_obj_get(r, "warnings", NULL)) {
                if (cJSON_IsString(w))
                        kresp_warn(c->resp, w->valuestring);
        }
        if (!cJSON_IsTrue(ks_obj_get(r, "allowed", NULL))) {
                deny(c, r);
                return false;
        }
        if (!patch || !c->obj)
                return true;
        if (base64_decode(patch, strlen(patch), &raw, &n) < 0)
                return true;
        ops = cJSON_ParseWithLengthOpts((const char *)raw, n, NULL, 0);
        rc = patch_json(&c->obj, ops, &err);
        if (rc < 0)
                kresp_status(c->resp, 500, "InternalError", NULL,
                             "Internal error occurred: failed calling webhook \"%s\": %s",
                             ks_obj_str(c->hook, "name", NULL), err ? err : "bad patch");
        free(err);
        free(raw);
        cJSON_Delete(ops);
        return rc == 0;
}

static bool call_failed(struct call *c, const char *err)
{
        const char *fp = ks_obj_str(c->hook, "failurePolicy", NULL);

        if (fp && !strcmp(fp, "Ignore"))
                return true;
        kresp_status(c->resp, 500, "InternalError", NULL,
                     "Internal error occurred: failed calling webhook \"%s\": %s",
                     ks_obj_str(c->hook, "name", NULL), err);
        return false;
}

static bool call_hook(struct call *c)
{
        struct target t;
        char *uid = ks_uuid(), *body, *err = NULL;
        cJSON *rv = review(c, uid), *reply;
        struct buf out;
        bool ok = false;

        target_init(c->hook, &t);
        body = cJSON_PrintUnformatted(rv);
        buf_init(&out, REVIEW_MAX);
        if (post(c->hook, &t, body, &out, &err) == 0) {
                reply = ks_parse_body(out.data, out.len);
                err = check_reply(reply, uid, c->mutating);
                if (!err)
                        ok = apply_reply(c, ks_obj_get(reply, "response", NULL));
                cJSON_Delete(reply);
        }
        if (err)
                ok = call_failed(c, err);
        free(err);
        free(body);
        free(uid);
        free(t.url);
        free(t.connect_to);
        buf_release(&out);
        cJSON_Delete(rv);
        return ok;
}

/* ---- driver ---- */

static bool dry_run_ok(const struct call *c)
{
        const char *se = ks_obj_str(c->hook, "sideEffects", NULL);

        if (!c->w->dry_run || (se && (!strcmp(se, "None") || !strcmp(se, "NoneOnDryRun"))))
                return true;
        kresp_status(c->resp, 400, "BadRequest", NULL,
                     "admission webhook \"%s\" does not support dry run",
                     ks_obj_str(c->hook, "name", NULL));
        return false;
}

/*
 * The webhooks of every configuration of a plural (sorted by name), shared by the writes
 * that run them: copied once per change of the configurations, not once per write (at
 * 10 000 machines the copies were 7% of kube-sim's CPU). A snapshot lives while the cache
 * or a write holds it (refs, under ks.mu).
 */
struct hook_snap {
        cJSON *hooks;
        uint64_t key; /* of the configurations' uids and resourceVersions */
        unsigned refs;
};

static struct hook_snap *hook_cache[2]; /* mutating, validating */

static uint64_t fnv_str(uint64_t h, const char *s)
{
        for (; s && *s; s++) {
                h ^= (unsigned char)*s;
                h *= 1099511628211ULL;
        }
        return h ^ 0xff;
}

/* lock held */
static void snap_unref(struct hook_snap *sn)
{
        if (sn && --sn->refs == 0) {
                cJSON_Delete(sn->hooks);
                free(sn);
        }
}

/* A reference to the current snapshot of plural's webhooks (snap_unref it). lock held */
static struct hook_snap *snapshot_hooks(int which, const char *plural)
{
        struct kres *r = registry_find("admissionregistration.k8s.io", "v1", plural);
        struct hook_snap *sn = hook_cache[which];
        uint64_t key = 14695981039346656037ULL;
        const cJSON *h;
        size_t i;

        for (i = 0; r && i < r->coll->n; i++) {
                key = fnv_str(key, ks_obj_str(r->coll->objs[i], "metadata", "uid"));
                key = fnv_str(key, ks_obj_str(r->coll->objs[i], "metadata", "resourceVersion"));
        }
        if (!sn || sn->key != key) {
                snap_unref(sn);
                sn = xcalloc(1, sizeof(*sn));
                sn->key = key;
                sn->refs = 1; /* the cache's */
                sn->hooks = cJSON_CreateArray();
                for (i = 0; r && i < r->coll->n; i++)
                        cJSON_ArrayForEach (h, ks_obj_get(r->coll->objs[i], "webhooks", NULL)) {
                                cJSON_AddItemToArray(sn->hooks, cJSON_Duplicate(h, true));
                        }
                hook_cache[which] = sn;
        }
        sn->refs++;
        return sn;
}

void admission_free(void)
{
        pthread_mutex_lock(&ks.mu);
        for (size_t i = 0; i < 2; i++) {
                snap_unref(hook_cache[i]);
                hook_cache[i] = NULL;
        }
        pthread_mutex_unlock(&ks.mu);
}

/* lock held */
static cJSON *ns_labels(const struct kwrite *w, const cJSON *obj, const cJSON *old)
{
        const struct ktarget *t = w->t;
        struct kres *nsr;
        const cJSON *ns;

        if (!t->res->namespaced) {
                if (t->res->crd || strcmp(t->res->plural, "namespaces") != 0)
                        return NULL;
                return cJSON_Duplicate(ks_obj_get(obj ? obj : old, "metadata", "labels"), true);
        }
        nsr = registry_find("", "v1", "namespaces");
        ns = nsr ? store_get(nsr->coll, NULL, t->ns) : NULL;
        return cJSON_Duplicate(ks_obj_get(ns, "metadata", "labels"), true);
}

static bool run_list(struct call *c, const cJSON *hooks, const cJSON *labels)
{
        const cJSON *h;

        cJSON_ArrayForEach (h, hooks) {
                c->hook = h;
                if (!hook_match(c, labels))
                        continue;
                if (!dry_run_ok(c) || !call_hook(c))
                        return false;
        }
        return true;
}

static bool is_webhook_config(const struct kres *r)
{
        return !r->crd && !strcmp(r->group, "admissionregistration.k8s.io");
}

bool admission_run(
        const struct kwrite *w, const char *op, cJSON *obj, const cJSON *old, struct kresp *resp)
{
        struct call c = { .w = w, .op = op, .obj = obj, .old = old, .resp = resp };
        struct hook_snap *mut, *val;
        cJSON *labels;
        bool ok;

        if (is_webhook_config(w->t->res))
                return true;
        pthread_mutex_lock(&ks.mu);
        mut = snapshot_hooks(0, "mutatingwebhookconfigurations");
        val = snapshot_hooks(1, "validatingwebhookconfigurations");
        labels = ns_labels(w, obj, old);
        pthread_mutex_unlock(&ks.mu);
        c.mutating = true;
        ok = run_list(&c, mut->hooks, labels);
        /* Schema validation comes after the mutating webhooks (which may fill required
         * fields), before the validating ones; their patches are pruned and defaulted too. */
        if (ok && obj && w->t->res->crd)
                ok = schema_apply(w->t->res, obj, old, "Ignore", resp);
        c.mutating = false;
        if (ok)
                ok = run_list(&c, val->hooks, labels);
        pthread_mutex_lock(&ks.mu);
        snap_unref(mut);
        snap_unref(val);
        pthread_mutex_unlock(&ks.mu);
        cJSON_Delete(labels);
        return ok;
}
