/*
 * kube-sim authentication and authorization APIs, as kube-apiserver answers them:
 *
 *   POST /api/v1/namespaces/NS/serviceaccounts/NAME/token   TokenRequest: mints a bearer
 *        token for an existing ServiceAccount (what `kubectl create token` calls)
 *   POST /apis/authentication.k8s.io/v1/tokenreviews        TokenReview: the admin token
 *        (user kube-sim-admin in system:masters) and the minted tokens of ServiceAccounts
 *        that still exist with the same UID and whose token has not expired
 *   POST /apis/authorization.k8s.io/v1/subjectaccessreviews  SubjectAccessReview, decided
 *        by the stored RBAC objects: system:masters is always allowed; otherwise a
 *        ClusterRoleBinding (any namespace) or a RoleBinding (the request's namespace) whose
 *        subject is the user, one of its groups or its ServiceAccount, and whose role has a
 *        rule matching the non-resource URL or the resource attributes and the verb.
 *        Aggregated ClusterRoles are not expanded.
 *   POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews  for the only API user,
 *        the admin: always allowed (kubectl auth can-i)
 *
 * Other methods on these paths get 405, as on a real server (the reviews are never
 * stored). Minted tokens live in memory until exit; they are never logged. Tokens are not
 * accepted for other API requests: those still need the admin token.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <microhttpd.h>

#include "ks.h"
#include "xalloc.h"

#define TOKENS_MAX          4096
#define TOKEN_DEFAULT_TTL_S 3600
#define ADMIN_USER          "kube-sim-admin"
#define RBAC_GROUP          "rbac.authorization.k8s.io"

struct sa_token {
        char *token;
        char *ns, *name, *uid;
        int64_t expires; /* wall seconds */
};

static struct {
        struct sa_token *v;
        size_t n;
} tokens; /* ks.mu held */

void authn_free(void)
{
        for (size_t i = 0; i < tokens.n; i++) {
                explicit_bzero(tokens.v[i].token, strlen(tokens.v[i].token));
                free(tokens.v[i].token);
                free(tokens.v[i].ns);
                free(tokens.v[i].name);
                free(tokens.v[i].uid);
        }
        free(tokens.v);
        tokens.v = NULL;
        tokens.n = 0;
}

static bool is_post(const struct kreq *r, struct kresp *resp)
{
        if (!strcmp(r->method, "POST"))
                return true;
        kresp_status(resp, 405, "MethodNotAllowed", NULL,
                     "the server does not allow this method on the requested resource");
        return false;
}

/* The JSON body as an object of kind (apiVersion checked too), or NULL with a 400. */
static cJSON *review_body(const struct kreq *r,
                          const char *api_version,
                          const char *kind,
                          struct kresp *resp)
{
        cJSON *b = r->content_type && strstr(r->content_type, "protobuf")
                           ? ks_proto_to_json(r->body, r->body_len)
                           : ks_parse_body(r->body, r->body_len);

        if (!b && r->content_type && strstr(r->content_type, "yaml"))
                b = ks_yaml_to_json(r->body, r->body_len);
        if (!cJSON_IsObject(b)) {
                cJSON_Delete(b);
                kresp_status(resp, 400, "BadRequest", NULL,
                             "the body of the request could not be decoded as an object");
                return NULL;
        }
        if (!ks_obj_str(b, "kind", NULL))
                ks_obj_set_str(b, "kind", kind);
        if (!ks_obj_str(b, "apiVersion", NULL))
                ks_obj_set_str(b, "apiVersion", api_version);
        if (strcmp(ks_obj_str(b, "kind", NULL), kind) != 0 ||
            strcmp(ks_obj_str(b, "apiVersion", NULL), api_version) != 0) {
                kresp_status(resp, 400, "BadRequest", NULL,
                             "the API version in the data (%s) does not match the expected API "
                             "version (%s)",
                             ks_obj_str(b, "apiVersion", NULL), api_version);
                cJSON_Delete(b);
                return NULL;
        }
        return b;
}

/* metadata becomes {creationTimestamp: null} plus what the request gave, as the API server
 * echoes a review. */
static void review_metadata(cJSON *obj)
{
        cJSON *md = ks_obj_ensure(obj, "metadata");

        if (!cJSON_GetObjectItemCaseSensitive(md, "creationTimestamp"))
                cJSON_AddNullToObject(md, "creationTimestamp");
}

static const char *or_empty(const char *s)
{
        return s ? s : "";
}

/* ---- TokenRequest ---- */

static char *make_token(void)
{
        return xasprintf("kube-sim-sa.%016" PRIx64 "%016" PRIx64 "%016" PRIx64, ks_random(),
                         ks_random(), ks_random());
}

static char *rfc3339_of(int64_t t)
{
        time_t tt = (time_t)t;
        struct tm tm;
        char buf[32];

        gmtime_r(&tt, &tm);
        strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
        return xstrdup(buf);
}

static void token_request(const struct kreq *r,
                          const char *ns,
                          const char *name,
                          struct kresp *resp)
{
        struct kres *res;
        cJSON *sa, *body = NULL, *spec;
        const cJSON *exp;
        char *uid = NULL, *token, *ts;
        int64_t ttl = TOKEN_DEFAULT_TTL_S, now = (int64_t)time(NULL);

        if (!is_post(r, resp))
                return;
        if (r->body_len) {
                body = review_body(r, "authentication.k8s.io/v1", "TokenRequest", resp);
                if (!body)
                        return;
        }
        if (!body) {
                body = cJSON_CreateObject();
                cJSON_AddStringToObject(body, "kind", "TokenRequest");
                cJSON_AddStringToObject(body, "apiVersion", "authentication.k8s.io/v1");
        }
        spec = ks_obj_ensure(body, "spec");
        exp = cJSON_GetObjectItemCaseSensitive(spec, "expirationSeconds");
        if (cJSON_IsNumber(exp)) {
                if (exp->valuedouble < 600 || exp->valuedouble > 4294967296.0) {
                        kresp_status(resp, 422, "Invalid", NULL,
                                     "TokenRequest.authentication.k8s.io \"%s\" is invalid: "
                                     "spec.expirationSeconds: Invalid value: %.0f: may not "
                                     "specify a duration less than 10 minutes",
                                     name, exp->valuedouble);
                        cJSON_Delete(body);
                        return;
                }
                ttl = (int64_t)exp->valuedouble;
        }
        pthread_mutex_lock(&ks.mu);
        res = registry_find("", "v1", "serviceaccounts");
        sa = res ? store_get(res->coll, ns, name) : NULL;
        if (sa && ks_obj_str(sa, "metadata", "uid"))
                uid = xstrdup(ks_obj_str(sa, "metadata", "uid"));
        if (uid && tokens.n < TOKENS_MAX) {
                token = make_token();
                tokens.v = xrealloc(tokens.v, (tokens.n + 1) * sizeof(*tokens.v));
                tokens.v[tokens.n++] = (struct sa_token){ .token = xstrdup(token),
                                                          .ns = xstrdup(ns),
                                                          .name = xstrdup(name),
                                                          .uid = xstrdup(uid),
                                                          .expires = now + ttl };
        } else {
                token = NULL;
        }
        pthread_mutex_unlock(&ks.mu);
        if (!uid || !token) {
                if (!uid)
                        kresp_status(resp, 404, "NotFound", NULL,
                                     "serviceaccounts \"%s\" not found", name);
                else
                        kresp_status(resp, 429, "TooManyRequests", NULL, "too many tokens");
                cJSON_Delete(body);
                free(uid);
                return;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(spec, "expirationSeconds");
        cJSON_AddNumberToObject(spec, "expirationSeconds", (double)ttl);
        if (!cJSON_GetObjectItemCaseSensitive(spec, "audiences")) {
                const char *aud[] = { "https://kubernetes.default.svc.cluster.local" };

                cJSON_AddItemToObject(spec, "audiences", cJSON_CreateStringArray(aud, 1));
        }
        cJSON_DeleteItemFromObjectCaseSensitive(body, "metadata");
        cJSON *md = cJSON_AddObjectToObject(body, "metadata");
        cJSON_AddStringToObject(md, "name", name);
        cJSON_AddStringToObject(md, "namespace", ns);
        cJSON_AddNullToObject(md, "creationTimestamp");
        ts = rfc3339_of(now + ttl);
        cJSON_DeleteItemFromObjectCaseSensitive(body, "status");
        cJSON *st = cJSON_AddObjectToObject(body, "status");
        cJSON_AddStringToObject(st, "token", token);
        cJSON_AddStringToObject(st, "expirationTimestamp", ts);
        kresp_json(resp, 201, body);
        explicit_bzero(token, strlen(token));
        free(token);
        free(ts);
        free(uid);
}

/* ---- TokenReview ---- */

/* The user a token names (into user, a new object), or false. */
static bool authenticate(const char *token, cJSON *user)
{
        struct kres *res;
        const cJSON *sa;
        int64_t now = (int64_t)time(NULL);
        bool ok = false;

        if (!strcmp(token, ks.token)) {
                const char *groups[] = { "system:masters", "system:authenticated" };

                cJSON_AddStringToObject(user, "username", ADMIN_USER);
                cJSON_AddItemToObject(user, "groups", cJSON_CreateStringArray(groups, 2));
                return true;
        }
        pthread_mutex_lock(&ks.mu);
        res = registry_find("", "v1", "serviceaccounts");
        for (size_t i = 0; i < tokens.n && res; i++) {
                const struct sa_token *t = &tokens.v[i];
                char *uname, *g_ns;
                const char *groups[3];

                if (strcmp(t->token, token) != 0 || t->expires <= now)
                        continue;
                sa = store_get(res->coll, t->ns, t->name);
                if (!sa || strcmp(or_empty(ks_obj_str(sa, "metadata", "uid")), t->uid) != 0)
                        break; /* deleted (or re-created) since: the token is dead */
                uname = xasprintf("system:serviceaccount:%s:%s", t->ns, t->name);
                g_ns = xasprintf("system:serviceaccounts:%s", t->ns);
                groups[0] = "system:serviceaccounts";
                groups[1] = g_ns;
                groups[2] = "system:authenticated";
                cJSON_AddStringToObject(user, "username", uname);
                cJSON_AddStringToObject(user, "uid", t->uid);
                cJSON_AddItemToObject(user, "groups", cJSON_CreateStringArray(groups, 3));
                free(uname);
                free(g_ns);
                ok = true;
                break;
        }
        pthread_mutex_unlock(&ks.mu);
        return ok;
}

static void token_review(const struct kreq *r, struct kresp *resp)
{
        cJSON *b, *st, *user;
        const char *token;

        if (!is_post(r, resp))
                return;
        b = review_body(r, "authentication.k8s.io/v1", "TokenReview", resp);
        if (!b)
                return;
        token = ks_obj_str(b, "spec", "token");
        if (!token || !*token) {
                kresp_status(resp, 400, "BadRequest", NULL,
                             "token is required for TokenReview in authentication");
                cJSON_Delete(b);
                return;
        }
        review_metadata(b);
        cJSON_DeleteItemFromObjectCaseSensitive(b, "status");
        st = cJSON_AddObjectToObject(b, "status");
        user = cJSON_CreateObject();
        if (authenticate(token, user)) {
                const char *aud[] = { "https://kubernetes.default.svc.cluster.local" };

                cJSON_AddBoolToObject(st, "authenticated", true);
                cJSON_AddItemToObject(st, "user", user);
                cJSON_AddItemToObject(st, "audiences", cJSON_CreateStringArray(aud, 1));
        } else {
                cJSON_Delete(user);
                cJSON_AddObjectToObject(st, "user");
                cJSON_AddStringToObject(st, "error", "[invalid bearer token, token lookup failed]");
        }
        kresp_json(resp, 201, b);
}

/* ---- SubjectAccessReview ---- */

/* The attributes being reviewed; every string borrowed from the request. */
struct attrs {
        const char *user;
        const cJSON *groups;
        const char *verb;
        const char *path; /* non-resource; NULL for a resource request */
        const char *ns, *group, *resource, *sub, *name;
};

/* items holds s, or "*". */
static bool list_has(const cJSON *items, const char *s)
{
        const cJSON *it;

        cJSON_ArrayForEach (it, items)
                if (cJSON_IsString(it) &&
                    (!strcmp(it->valuestring, "*") || !strcmp(it->valuestring, s)))
                        return true;
        return false;
}

/* nonResourceURLs: exact, "*", or a prefix ending in '*'. */
static bool url_matches(const cJSON *urls, const char *path)
{
        const cJSON *it;
        size_t n;

        cJSON_ArrayForEach (it, urls) {
                if (!cJSON_IsString(it))
                        continue;
                n = strlen(it->valuestring);
                if (!strcmp(it->valuestring, path) || (n > 0 && it->valuestring[n - 1] == '*' &&
                                                       !strncmp(it->valuestring, path, n - 1)))
                        return true;
        }
        return false;
}

static bool resource_matches(const cJSON *rule, const struct attrs *a)
{
        const cJSON *names = cJSON_GetObjectItemCaseSensitive(rule, "resourceNames");
        char *combined =
                a->sub && *a->sub ? xasprintf("%s/%s", a->resource, a->sub) : xstrdup(a->resource);
        bool ok;

        ok = list_has(cJSON_GetObjectItemCaseSensitive(rule, "apiGroups"), a->group) &&
             list_has(cJSON_GetObjectItemCaseSensitive(rule, "resources"), combined) &&
             (cJSON_GetArraySize(names) == 0 || (a->name && list_has(names, a->name)));
        free(combined);
        return ok;
}

static bool rule_allows(const cJSON *rule, const struct attrs *a)
{
        if (!list_has(cJSON_GetObjectItemCaseSensitive(rule, "verbs"), a->verb))
                return false;
        if (a->path)
                return url_matches(cJSON_GetObjectItemCaseSensitive(rule, "nonResourceURLs"),
                                   a->path);
        return resource_matches(rule, a);
}

static bool in_groups(const cJSON *groups, const char *name)
{
        const cJSON *it;

        cJSON_ArrayForEach (it, groups)
                if (cJSON_IsString(it) && !strcmp(it->valuestring, name))
                        return true;
        return false;
}

static bool subject_matches(const cJSON *s, const struct attrs *a, const char *binding_ns)
{
        const char *kind = ks_obj_str(s, "kind", NULL), *name = ks_obj_str(s, "name", NULL);
        const char *ns = ks_obj_str(s, "namespace", NULL);
        char *sa;
        bool ok;

        if (!kind || !name)
                return false;
        if (!strcmp(kind, "User"))
                return a->user && !strcmp(name, a->user);
        if (!strcmp(kind, "Group"))
                return in_groups(a->groups, name);
        if (strcmp(kind, "ServiceAccount") != 0 || !a->user)
                return false;
        sa = xasprintf("system:serviceaccount:%s:%s",
                       ns && *ns    ? ns
                       : binding_ns ? binding_ns
                                    : "",
                       name);
        ok = !strcmp(sa, a->user);
        free(sa);
        return ok;
}

/* The role a binding points to (borrowed), or NULL. lock held */
static const cJSON *bound_role(const cJSON *binding, const char *binding_ns)
{
        const char *kind = ks_obj_str(binding, "roleRef", "kind");
        const char *name = ks_obj_str(binding, "roleRef", "name");
        struct kres *res;

        if (!kind || !name)
                return NULL;
        if (!strcmp(kind, "ClusterRole")) {
                res = registry_find(RBAC_GROUP, "v1", "clusterroles");
                return res ? store_get(res->coll, NULL, name) : NULL;
        }
        if (!strcmp(kind, "Role") && binding_ns) {
                res = registry_find(RBAC_GROUP, "v1", "roles");
                return res ? store_get(res->coll, binding_ns, name) : NULL;
        }
        return NULL;
}

/* The reason text when a binding of coll allows a, else NULL (caller frees). lock held */
static char *bindings_allow(const char *plural, const struct attrs *a)
{
        struct kres *res = registry_find(RBAC_GROUP, "v1", plural);
        bool cluster = !strcmp(plural, "clusterrolebindings");

        for (size_t i = 0; res && i < res->coll->n; i++) {
                const cJSON *b = res->coll->objs[i], *role, *s, *rule;
                const char *bns = ks_obj_str(b, "metadata", "namespace");

                if (!cluster && (!a->ns || !bns || strcmp(bns, a->ns) != 0 || a->path))
                        continue;
                role = bound_role(b, cluster ? NULL : bns);
                if (!role)
                        continue;
                cJSON_ArrayForEach (s, cJSON_GetObjectItemCaseSensitive(b, "subjects")) {
                        if (!subject_matches(s, a, bns))
                                continue;
                        cJSON_ArrayForEach (rule, cJSON_GetObjectItemCaseSensitive(role, "rules"))
                                if (rule_allows(rule, a))
                                        return xasprintf("RBAC: allowed by %s \"%s\" of %s "
                                                         "\"%s\" to %s \"%s\"",
                                                         cluster ? "ClusterRoleBinding"
                                                                 : "RoleBinding",
                                                         ks_obj_str(b, "metadata", "name"),
                                                         ks_obj_str(b, "roleRef", "kind"),
                                                         ks_obj_str(b, "roleRef", "name"),
                                                         ks_obj_str(s, "kind", NULL),
                                                         ks_obj_str(s, "name", NULL));
                }
        }
        return NULL;
}

/* In system:masters (named exactly: a "*" in the request's groups is no wildcard). */
static bool is_master(const cJSON *groups)
{
        const cJSON *it;

        cJSON_ArrayForEach (it, groups)
                if (cJSON_IsString(it) && !strcmp(it->valuestring, "system:masters"))
                        return true;
        return false;
}

/* 422 for a spec the API server's validation refuses; true when it is fine. */
static bool sar_valid(const cJSON *spec, struct kresp *resp)
{
        const cJSON *ra = cJSON_GetObjectItemCaseSensitive(spec, "resourceAttributes");
        const cJSON *na = cJSON_GetObjectItemCaseSensitive(spec, "nonResourceAttributes");
        const char *user = ks_obj_str(spec, "user", NULL);
        const char *why = NULL, *field = NULL;

        if (!ra && !na) {
                field = "spec.resourceAttributes";
                why = "Required value: exactly one of nonResourceAttributes or resourceAttributes "
                      "must be specified";
        } else if (ra && na) {
                field = "spec.nonResourceAttributes";
                why = "Invalid value: \"null\": cannot be specified in combination with "
                      "resourceAttributes";
        } else if ((!user || !*user) &&
                   cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(spec, "groups")) == 0) {
                field = "spec.user";
                why = "Invalid value: \"\": at least one of user or group must be specified";
        }
        if (!why)
                return true;
        kresp_status(resp, 422, "Invalid", NULL,
                     "SubjectAccessReview.authorization.k8s.io \"\" is invalid: %s: %s", field,
                     why);
        return false;
}

static void fill_attrs(const cJSON *spec, struct attrs *a)
{
        const cJSON *ra = cJSON_GetObjectItemCaseSensitive(spec, "resourceAttributes");
        const cJSON *na = cJSON_GetObjectItemCaseSensitive(spec, "nonResourceAttributes");

        a->user = ks_obj_str(spec, "user", NULL);
        a->groups = cJSON_GetObjectItemCaseSensitive(spec, "groups");
        if (na) {
                a->verb = or_empty(ks_obj_str(na, "verb", NULL));
                a->path = or_empty(ks_obj_str(na, "path", NULL));
                return;
        }
        a->verb = or_empty(ks_obj_str(ra, "verb", NULL));
        a->ns = ks_obj_str(ra, "namespace", NULL);
        a->group = or_empty(ks_obj_str(ra, "group", NULL));
        a->resource = or_empty(ks_obj_str(ra, "resource", NULL));
        a->sub = ks_obj_str(ra, "subresource", NULL);
        a->name = ks_obj_str(ra, "name", NULL);
        if (a->ns && !*a->ns)
                a->ns = NULL;
}

static void subject_access_review(const struct kreq *r, struct kresp *resp)
{
        struct attrs a = { 0 };
        cJSON *b, *spec, *st;
        char *reason = NULL;
        bool allowed;

        if (!is_post(r, resp))
                return;
        b = review_body(r, "authorization.k8s.io/v1", "SubjectAccessReview", resp);
        if (!b)
                return;
        spec = ks_obj_get(b, "spec", NULL);
        if (!sar_valid(spec, resp)) {
                cJSON_Delete(b);
                return;
        }
        fill_attrs(spec, &a);
        allowed = is_master(a.groups);
        if (!allowed) {
                pthread_mutex_lock(&ks.mu);
                reason = bindings_allow("clusterrolebindings", &a);
                if (!reason)
                        reason = bindings_allow("rolebindings", &a);
                pthread_mutex_unlock(&ks.mu);
                allowed = reason != NULL;
        }
        review_metadata(b);
        cJSON_DeleteItemFromObjectCaseSensitive(b, "status");
        st = cJSON_AddObjectToObject(b, "status");
        cJSON_AddBoolToObject(st, "allowed", allowed);
        if (reason)
                cJSON_AddStringToObject(st, "reason", reason);
        free(reason);
        kresp_json(resp, 201, b);
}

/* The groups the API server gives an impersonated service account. */
static void add_sa_groups(cJSON *groups, const char *user)
{
        static const char pre[] = "system:serviceaccount:";
        const char *ns = user + sizeof(pre) - 1, *colon;
        char *g;

        if (strncmp(user, pre, sizeof(pre) - 1) != 0 || !(colon = strchr(ns, ':')))
                return;
        cJSON_AddItemToArray(groups, cJSON_CreateString("system:serviceaccounts"));
        g = xasprintf("system:serviceaccounts:%.*s", (int)(colon - ns), ns);
        cJSON_AddItemToArray(groups, cJSON_CreateString(g));
        free(g);
}

/* Collects the Impersonate-Group headers into the array cls. */
static enum MHD_Result add_group(void *cls,
                                 enum MHD_ValueKind kind,
                                 const char *key,
                                 const char *value)
{
        (void)kind;
        if (!strcasecmp(key, "Impersonate-Group") && value)
                cJSON_AddItemToArray(cls, cJSON_CreateString(value));
        return MHD_YES;
}

/* The admin asking for itself is allowed everything; impersonating a user (kubectl
 * --as=USER [--as-group=G]) reviews that user's access. */
static void self_subject_access_review(const struct kreq *r, struct kresp *resp)
{
        const char *as = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Impersonate-User");
        struct attrs a = { 0 };
        cJSON *b, *st, *spec, *groups = cJSON_CreateArray();
        char *reason = NULL;

        if (!is_post(r, resp))
                goto out;
        b = review_body(r, "authorization.k8s.io/v1", "SelfSubjectAccessReview", resp);
        if (!b)
                goto out;
        spec = ks_obj_ensure(b, "spec");
        if (as) {
                MHD_get_connection_values(r->conn, MHD_HEADER_KIND, add_group, groups);
                cJSON_AddItemToArray(groups, cJSON_CreateString("system:authenticated"));
                add_sa_groups(groups, as);
                fill_attrs(spec, &a);
                a.user = as;
                a.groups = groups;
                pthread_mutex_lock(&ks.mu);
                reason =
                        is_master(groups) ? xstrdup("") : bindings_allow("clusterrolebindings", &a);
                if (!reason)
                        reason = bindings_allow("rolebindings", &a);
                pthread_mutex_unlock(&ks.mu);
        } else {
                reason = xstrdup(ADMIN_USER " is in system:masters");
        }
        review_metadata(b);
        cJSON_DeleteItemFromObjectCaseSensitive(b, "status");
        st = cJSON_AddObjectToObject(b, "status");
        cJSON_AddBoolToObject(st, "allowed", reason != NULL);
        if (reason && *reason)
                cJSON_AddStringToObject(st, "reason", reason);
        free(reason);
        kresp_json(resp, 201, b);
out:
        cJSON_Delete(groups);
}

/* /api/v1/namespaces/NS/serviceaccounts/NAME/token: NS and NAME into out (NUL-split). */
static bool token_path(const char *path, char *ns, char *name, size_t cap)
{
        static const char pre[] = "/api/v1/namespaces/";
        const char *p = path + sizeof(pre) - 1, *q, *e;

        if (strncmp(path, pre, sizeof(pre) - 1) != 0 || !(q = strchr(p, '/')))
                return false;
        if (strncmp(q, "/serviceaccounts/", 17) != 0)
                return false;
        e = strchr(q + 17, '/');
        if (!e || strcmp(e, "/token") != 0 || (size_t)(q - p) >= cap ||
            (size_t)(e - q - 17) >= cap || q == p || e == q + 17)
                return false;
        memcpy(ns, p, (size_t)(q - p));
        ns[q - p] = '\0';
        memcpy(name, q + 17, (size_t)(e - q - 17));
        name[e - q - 17] = '\0';
        return true;
}

bool authn_handle(const struct kreq *r, struct kresp *resp)
{
        char ns[256], name[256];

        if (!strcmp(r->path, "/apis/authentication.k8s.io/v1/tokenreviews"))
                token_review(r, resp);
        else if (!strcmp(r->path, "/apis/authorization.k8s.io/v1/subjectaccessreviews"))
                subject_access_review(r, resp);
        else if (!strcmp(r->path, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"))
                self_subject_access_review(r, resp);
        else if (token_path(r->path, ns, name, sizeof(ns)))
                token_request(r, ns, name, resp);
        else
                return false;
        return true;
}
