/*
 * kube_authn: TokenReview, then SubjectAccessReview, behind a small cache. The cache is a
 * fixed array searched linearly (a few scrapers hold an entry each); a miss replaces an
 * expired entry or else the one that expires first. The SubjectAccessReview carries the
 * user, uid, groups and extra the TokenReview returned, as the API server's delegating
 * authorizer sends them.
 */
#include "kube_authn.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <gnutls/crypto.h>

#include "clock.h"
#include "err.h"
#include "json.h"
#include "kube_client.h"
#include "log.h"
#include "xalloc.h"

#define KEY_LEN     32 /* SHA-256 */
#define USER_MAX    256
#define DEFAULT_TTL 60000u

static const struct kube_resource RES_TOKENREVIEWS = { "authentication.k8s.io", "v1",
                                                       "tokenreviews", "TokenReview", false };
static const struct kube_resource RES_SARS = { "authorization.k8s.io", "v1", "subjectaccessreviews",
                                               "SubjectAccessReview", false };

struct entry {
        unsigned char key[KEY_LEN];
        uint64_t expires_ms; /* 0 = free */
        enum kube_authn_result result;
        char user[USER_MAX];
};

struct kube_authn {
        pthread_mutex_t lock; /* the client, the cache, the stats */
        struct kube_client *client;
        const struct clock_ops *clock;
        uint64_t allow_ttl_ms, deny_ttl_ms;
        struct entry *cache;
        unsigned cache_size;
        struct kube_authn_stats stats;
};

int kube_authn_new(const struct kube_authn_opts *o, struct kube_authn **ret)
{
        struct kube_authn *a = xcalloc(1, sizeof(*a));
        int r;

        r = kube_client_new(
                &(struct kube_client_opts){ .config = o->config,
                                            .timeout_ms = o->timeout_ms ? o->timeout_ms : 5000,
                                            .max_body = 1u << 20,
                                            .transport = o->transport },
                &a->client);
        if (r < 0) {
                free(a);
                return r;
        }
        pthread_mutex_init(&a->lock, NULL);
        a->clock = o->clock;
        a->allow_ttl_ms = o->allow_ttl_ms ? o->allow_ttl_ms : DEFAULT_TTL;
        a->deny_ttl_ms = o->deny_ttl_ms ? o->deny_ttl_ms : 10000;
        a->cache_size = o->cache_size ? o->cache_size : 256;
        a->cache = xcalloc(a->cache_size, sizeof(*a->cache));
        *ret = a;
        return CM_OK;
}

struct kube_authn *kube_authn_free(struct kube_authn *a)
{
        if (!a)
                return NULL;
        kube_client_free(a->client);
        explicit_bzero(a->cache, a->cache_size * sizeof(*a->cache));
        free(a->cache);
        pthread_mutex_destroy(&a->lock);
        free(a);
        return NULL;
}

/* SHA-256 over token, verb and path, each NUL-terminated. */
static void cache_key(const char *token,
                      const char *verb,
                      const char *path,
                      unsigned char key[static KEY_LEN])
{
        gnutls_hash_hd_t h;

        if (gnutls_hash_init(&h, GNUTLS_DIG_SHA256) < 0)
                abort(); /* SHA-256 is always there */
        (void)gnutls_hash(h, token, strlen(token) + 1);
        (void)gnutls_hash(h, verb, strlen(verb) + 1);
        (void)gnutls_hash(h, path, strlen(path) + 1);
        gnutls_hash_deinit(h, key);
}

/* The live entry for key, or NULL. lock held */
static const struct entry *cache_find(struct kube_authn *a, const unsigned char *key, uint64_t now)
{
        for (unsigned i = 0; i < a->cache_size; i++)
                if (a->cache[i].expires_ms > now && memcmp(a->cache[i].key, key, KEY_LEN) == 0)
                        return &a->cache[i];
        return NULL;
}

/* lock held */
static void cache_put(struct kube_authn *a,
                      const unsigned char *key,
                      uint64_t now,
                      enum kube_authn_result result,
                      const char *user)
{
        struct entry *victim = &a->cache[0];

        for (unsigned i = 0; i < a->cache_size; i++) {
                if (a->cache[i].expires_ms <= now || memcmp(a->cache[i].key, key, KEY_LEN) == 0) {
                        victim = &a->cache[i];
                        break;
                }
                if (a->cache[i].expires_ms < victim->expires_ms)
                        victim = &a->cache[i];
        }
        memcpy(victim->key, key, KEY_LEN);
        victim->result = result;
        victim->expires_ms =
                now + (result == KUBE_AUTHN_ALLOWED ? a->allow_ttl_ms : a->deny_ttl_ms);
        (void)snprintf(victim->user, sizeof(victim->user), "%s", user);
}

static void log_review_error(const char *what, int r, const struct kube_error *e)
{
        log_warn("diagnostics", "review failed", "review=%s err=%s status=%ld message=%s", what,
                 cm_strerror(r), e->http_status, e->message ? e->message : "");
}

/* POSTs a TokenReview; *ret_user gets the status.user object (owned) when authenticated. */
static enum kube_authn_result review_token(struct kube_authn *a,
                                           const char *token,
                                           cJSON **ret_user)
{
        cJSON *req = cJSON_CreateObject(), *spec, *resp = NULL;
        struct kube_error e = { 0 };
        enum kube_authn_result res = KUBE_AUTHN_ERROR;
        const cJSON *user;
        int r;

        cJSON_AddStringToObject(req, "apiVersion", "authentication.k8s.io/v1");
        cJSON_AddStringToObject(req, "kind", "TokenReview");
        spec = cJSON_AddObjectToObject(req, "spec");
        cJSON_AddStringToObject(spec, "token", token);
        a->stats.token_reviews++;
        r = kube_create(a->client, &RES_TOKENREVIEWS, NULL, req, &resp, &e);
        if (r < 0) {
                log_review_error("TokenReview", r, &e);
                goto out;
        }
        user = json_find(resp, "status", "user", NULL);
        if (!cJSON_IsTrue(json_find(resp, "status", "authenticated", NULL)) || !user ||
            !json_find_str(user, "username", NULL)) {
                res = KUBE_AUTHN_UNAUTHENTICATED;
                goto out;
        }
        *ret_user = cJSON_Duplicate(user, true);
        res = KUBE_AUTHN_ALLOWED;
out:
        /* the request held the token: wipe it before it goes back to the allocator */
        explicit_bzero(cJSON_GetStringValue(cJSON_GetObjectItem(spec, "token")), strlen(token));
        cJSON_Delete(req);
        cJSON_Delete(resp);
        kube_error_release(&e);
        return res;
}

/* Copies the TokenReview's user fields into a SubjectAccessReview spec. */
static void spec_set_user(cJSON *spec, const cJSON *user)
{
        static const char *const fields[][2] = { { "username", "user" },
                                                 { "uid", "uid" },
                                                 { "groups", "groups" },
                                                 { "extra", "extra" } };
        const cJSON *v;

        for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
                v = cJSON_GetObjectItemCaseSensitive(user, fields[i][0]);
                if (v)
                        cJSON_AddItemToObject(spec, fields[i][1], cJSON_Duplicate(v, true));
        }
}

static enum kube_authn_result review_access(struct kube_authn *a,
                                            const cJSON *user,
                                            const char *verb,
                                            const char *path)
{
        cJSON *req = cJSON_CreateObject(), *spec, *attrs, *resp = NULL;
        struct kube_error e = { 0 };
        enum kube_authn_result res = KUBE_AUTHN_ERROR;
        int r;

        cJSON_AddStringToObject(req, "apiVersion", "authorization.k8s.io/v1");
        cJSON_AddStringToObject(req, "kind", "SubjectAccessReview");
        spec = cJSON_AddObjectToObject(req, "spec");
        spec_set_user(spec, user);
        attrs = cJSON_AddObjectToObject(spec, "nonResourceAttributes");
        cJSON_AddStringToObject(attrs, "path", path);
        cJSON_AddStringToObject(attrs, "verb", verb);
        a->stats.access_reviews++;
        r = kube_create(a->client, &RES_SARS, NULL, req, &resp, &e);
        if (r < 0) {
                log_review_error("SubjectAccessReview", r, &e);
                goto out;
        }
        res = cJSON_IsTrue(json_find(resp, "status", "allowed", NULL)) ? KUBE_AUTHN_ALLOWED
                                                                       : KUBE_AUTHN_DENIED;
out:
        cJSON_Delete(req);
        cJSON_Delete(resp);
        kube_error_release(&e);
        return res;
}

/* Both reviews; lock held. */
static enum kube_authn_result review(struct kube_authn *a,
                                     const char *token,
                                     const char *verb,
                                     const char *path,
                                     char *user,
                                     size_t user_size)
{
        cJSON *u = NULL;
        enum kube_authn_result res;

        res = review_token(a, token, &u);
        if (res == KUBE_AUTHN_ALLOWED) {
                (void)snprintf(user, user_size, "%s", json_find_str(u, "username", NULL));
                res = review_access(a, u, verb, path);
        }
        cJSON_Delete(u);
        return res;
}

enum kube_authn_result kube_authn_check(struct kube_authn *a,
                                        const char *token,
                                        const char *verb,
                                        const char *path,
                                        char *user,
                                        size_t user_size)
{
        unsigned char key[KEY_LEN];
        char name[USER_MAX] = "";
        const struct entry *hit;
        enum kube_authn_result res;
        uint64_t now;

        cache_key(token, verb, path, key);
        pthread_mutex_lock(&a->lock);
        now = clock_now_ms(a->clock);
        hit = cache_find(a, key, now);
        if (hit) {
                a->stats.cache_hits++;
                res = hit->result;
                (void)snprintf(name, sizeof(name), "%s", hit->user);
        } else {
                res = review(a, token, verb, path, name, sizeof(name));
                if (res != KUBE_AUTHN_ERROR)
                        cache_put(a, key, clock_now_ms(a->clock), res, name);
        }
        pthread_mutex_unlock(&a->lock);
        (void)snprintf(user, user_size, "%s", res == KUBE_AUTHN_UNAUTHENTICATED ? "" : name);
        return res;
}

void kube_authn_stats(struct kube_authn *a, struct kube_authn_stats *ret)
{
        pthread_mutex_lock(&a->lock);
        *ret = a->stats;
        pthread_mutex_unlock(&a->lock);
}
