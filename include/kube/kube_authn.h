#pragma once
/*
 * kube_authn: delegated authentication and authorization against the API server, as
 * controller-runtime's metrics filter and kube-rbac-proxy do it: a bearer token is
 * authenticated with a TokenReview (POST authentication.k8s.io/v1 tokenreviews), and the
 * user it names is authorized with a SubjectAccessReview (POST authorization.k8s.io/v1
 * subjectaccessreviews) for a verb on a non-resource URL ("get" "/metrics").
 *
 * Answers are cached per (token, verb, path) for a short while — allowed answers for
 * allow_ttl, refusals for deny_ttl — so a scraper polling every 10 s costs two API calls
 * per allow_ttl. The cache is keyed by the SHA-256 of the token: the token itself is sent
 * to the API server and never stored, logged or put in an error. Errors (API server down,
 * timeout, 5xx) are not cached.
 *
 * The caller's service account needs create on tokenreviews and subjectaccessreviews.
 *
 * Ownership: the config is borrowed and must outlive the authenticator.
 * Threads: kube_authn_check may be called from any thread; one lock serializes the
 * reviews (they use one client), each bounded by timeout_ms. new and free from one owner.
 */

#include <stddef.h>
#include <stdint.h>

#include "compiler.h"

struct clock_ops;
struct http_transport;
struct kube_authn;
struct kube_config;

enum kube_authn_result {
        KUBE_AUTHN_ALLOWED,
        KUBE_AUTHN_UNAUTHENTICATED, /* the TokenReview says the token is not valid */
        KUBE_AUTHN_DENIED,          /* the SubjectAccessReview does not allow it */
        KUBE_AUTHN_ERROR,           /* a review failed; nothing cached */
};

struct kube_authn_opts {
        const struct kube_config *config; /* borrowed */
        uint32_t timeout_ms;              /* per review; 0 = 5000 */
        uint64_t allow_ttl_ms;            /* 0 = 60000 */
        uint64_t deny_ttl_ms;             /* refusals; 0 = 10000 */
        unsigned cache_size;              /* entries; 0 = 256 (the oldest goes first) */
        const struct clock_ops *clock;    /* NULL = the system clock */
        struct http_transport *transport; /* the test seam; NULL = libcurl */
};

/* Counters since creation (tests, logs). */
struct kube_authn_stats {
        uint64_t token_reviews;
        uint64_t access_reviews;
        uint64_t cache_hits;
};

/* CM_EINVAL when the config cannot make a client. */
MUST_CHECK int kube_authn_new(const struct kube_authn_opts *o, struct kube_authn **ret);
struct kube_authn *kube_authn_free(struct kube_authn *a);
/* May token `verb` path? On ALLOWED and DENIED, user (user_size bytes) receives the
 * authenticated user's name; "" otherwise. */
enum kube_authn_result kube_authn_check(struct kube_authn *a,
                                        const char *token,
                                        const char *verb,
                                        const char *path,
                                        char *user,
                                        size_t user_size);
void kube_authn_stats(struct kube_authn *a, struct kube_authn_stats *ret);
