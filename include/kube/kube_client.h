#pragma once
/*
 * kube_client: a typed REST client for the Kubernetes API (kubernetes.md §1, §5), used by
 * the informers, the reconcilers, leader election, events and capi-sim.
 *
 * Three pieces:
 *   - struct kube_config: where the API server is and how to authenticate, loaded the way
 *     controller-runtime does (--kubeconfig, else $KUBECONFIG, else in-cluster). Loaded once
 *     at start-up; read-only afterwards, so every thread may share one.
 *   - struct token_bucket (token_bucket.h): the client-side request budget
 *     (--kube-api-qps/--kube-api-burst) shared by every client of the process.
 *   - struct kube_client: one per thread (it owns a libcurl handle); it borrows the config
 *     and the limiter, which must outlive it.
 *
 * Objects travel as cJSON trees. A returned tree belongs to the caller (cJSON_Delete); an
 * object passed in is borrowed and never modified.
 *
 * Errors: 0, or a negative enum cm_err mapped from the HTTP status: CM_ENOTFOUND (404),
 * CM_ECONFLICT (409 Conflict: stale resourceVersion), CM_EEXIST (409 AlreadyExists),
 * CM_EGONE (410 Expired/Gone), CM_EINVAL (422 Invalid, 400 BadRequest), CM_EUNAUTHORIZED
 * (401), CM_EFORBIDDEN (403), CM_ETIMEDOUT (504 or a local deadline), CM_ESERVER (other 5xx,
 * 429 after retries), CM_EUNSUPPORTED (415, e.g. strategic merge patch on a custom
 * resource), CM_ETRANSPORT / CM_ETOOBIG (no usable response), CM_EPARSE (2xx with
 * malformed JSON). The server's Status (reason, message, causes) is copied into a struct
 * kube_error when the caller passes one (it must start zeroed or released; every call
 * resets it). Tokens and certificate material never appear in an error.
 *
 * Retries: reads (GET, LIST pages) are retried up to max_retries times on transport
 * errors, 429 and 5xx with jittered exponential backoff (or Retry-After); writes are
 * retried only on a 429 that says when to come back (Retry-After header or the Status's
 * details.retryAfterSeconds: the server did not act on them). Every attempt takes a token
 * from the limiter. Watches are never retried: the caller re-lists or re-watches.
 */

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "compiler.h"
#include "memfile.h"

struct clock_ops;

/* --- configuration ------------------------------------------------------------------- */

#define KUBE_CONFIG_DATA_MAX 3 /* certificate-authority, client-certificate, client-key */

struct kube_config {
        char *server;           /* "https://host:port" (no trailing slash) */
        char *ca_file;          /* PEM bundle to trust; NULL = system CAs */
        char *client_cert_file; /* PEM client certificate, or NULL */
        char *client_key_file;  /* PEM client key, or NULL */
        char *token;            /* bearer token read at load time, or NULL */
        char *token_file;       /* re-read by clients when its mtime changes, or NULL */
        bool insecure_skip_verify;
        char *namespace; /* the context's (or the pod's) namespace, "default" if none */
        /* the *-data fields (CA, client certificate, key) as memory files: *_file above
         * then names /proc/self/fd/N (memfile.h); closed by kube_config_release() */
        struct memfile data[KUBE_CONFIG_DATA_MAX];
        unsigned n_data;
};

/* Loads a kubeconfig file (libyaml): current-context (or `context` when non-NULL), its
 * cluster's server, certificate-authority[-data], insecure-skip-tls-verify, its user's
 * client-certificate[-data], client-key[-data], token and tokenFile. Relative paths are
 * resolved against the file's directory. *-data fields are held in memory files (data).
 * CM_ENOTFOUND (no file), CM_EINVAL (no such context, no server, cert without key),
 * CM_EPARSE (malformed YAML or base64), CM_EIO, with a message in *reterr (malloc'd; the
 * caller frees it; reterr may be NULL). Only the first file of a KUBECONFIG list is read. */
MUST_CHECK int kube_config_from_kubeconfig(const char *path,
                                           const char *context,
                                           struct kube_config *ret,
                                           char **reterr);
/* In-cluster configuration: KUBERNETES_SERVICE_HOST/_PORT from envp, and token, ca.crt
 * and namespace from sa_dir (NULL = /var/run/secrets/kubernetes.io/serviceaccount). The
 * token is given as token_file, so rotations are picked up. */
MUST_CHECK int kube_config_in_cluster(const char *sa_dir,
                                      char *const envp[],
                                      struct kube_config *ret,
                                      char **reterr);
/* controller-runtime's order: kubeconfig_flag if non-NULL, else $KUBECONFIG from envp,
 * else in-cluster. */
MUST_CHECK int kube_config_load(const char *kubeconfig_flag,
                                char *const envp[],
                                struct kube_config *ret,
                                char **reterr);
/* Frees every field, closes the memory files and zeroes *c. Accepts a zeroed config. */
void kube_config_release(struct kube_config *c);

/* --- client --------------------------------------------------------------------------- */

struct kube_client;
struct token_bucket;

struct kube_client_opts {
        const struct kube_config *config; /* borrowed */
        struct token_bucket *limiter;     /* borrowed; NULL = unlimited */
        uint32_t timeout_ms;              /* per request (not watches); 0 = 30000 */
        size_t max_body;                  /* response cap; 0 = 64 MiB */
        const char *user_agent;           /* NULL = "capmaas/<version>" */
        const char *field_manager;        /* for writes; NULL = "capmaas" */
        unsigned max_retries;             /* extra attempts (see kube_get); 0 = 3 */
        /* Sleeps between retries; NULL = nanosleep. Tests record the delays instead. */
        void (*sleep_ms)(void *arg, uint64_t ms);
        void *sleep_arg;
        /* The seam for tests (http_transport.h): a transport the client uses instead of its
         * own libcurl one; borrowed, same thread, must outlive the client. NULL = libcurl. */
        struct http_transport *transport;
};

/* Creates a client (its own libcurl transport unless o->transport, TLS from the config). CM_EINVAL
 * when the config has no server or names unreadable files. The client re-reads config->token_file
 * before a request whenever the file's mtime, size or inode changed. */
MUST_CHECK int kube_client_new(const struct kube_client_opts *o, struct kube_client **ret);
struct kube_client *kube_client_free(struct kube_client *c);

/* What a request addresses. Static descriptors for the kinds we use are below. */
struct kube_resource {
        const char *group;   /* "" for the core group */
        const char *version; /* "v1", "v1beta1" */
        const char *plural;  /* "secrets" */
        const char *kind;    /* "Secret" */
        bool namespaced;
};

/* Core v1: Namespace, Secret, ConfigMap, Event (core/v1, not events.k8s.io), Node;
 * coordination.k8s.io/v1 Lease; apiextensions.k8s.io/v1 CRDs; cluster.x-k8s.io/v1beta1
 * Cluster and Machine; infrastructure.cluster.x-k8s.io/v1beta1 for the Maas kinds. */
extern const struct kube_resource KUBE_RES_NAMESPACES, KUBE_RES_SECRETS, KUBE_RES_CONFIGMAPS,
        KUBE_RES_EVENTS, KUBE_RES_NODES, KUBE_RES_LEASES, KUBE_RES_CRDS, KUBE_RES_CLUSTERS,
        KUBE_RES_MACHINES, KUBE_RES_MAASCLUSTERS, KUBE_RES_MAASMACHINES,
        KUBE_RES_MAASMACHINETEMPLATES, KUBE_RES_MAASCLUSTERTEMPLATES, KUBE_RES_MAASREMEDIATIONS,
        KUBE_RES_MAASREMEDIATIONTEMPLATES;

struct kube_error {
        long http_status; /* 0 when no response arrived */
        char *reason;     /* Status.reason ("NotFound", "Conflict", …) or NULL */
        char *message;    /* Status.message, or the transport's reason */
        cJSON *causes;    /* Status.details.causes array, or NULL */
};

void kube_error_release(struct kube_error *e);

/* GET one object. ns is ignored for cluster-scoped resources (for every call below). */
MUST_CHECK int kube_get(struct kube_client *c,
                        const struct kube_resource *r,
                        const char *ns,
                        const char *name,
                        cJSON **ret,
                        struct kube_error *e);

struct kube_list_opts {
        const char *label_selector; /* NULL = none */
        const char *field_selector; /* NULL = none */
        unsigned page_size;         /* limit per page; 0 = 500 */
};

/* LIST every page (following metadata.continue) into one List object whose "items" hold
 * every object and whose metadata.resourceVersion is the first page's (the snapshot the
 * watch continues from). ns NULL or "" = all namespaces. A continue token that expires
 * (410) restarts the list from the beginning once. */
MUST_CHECK int kube_list(struct kube_client *c,
                         const struct kube_resource *r,
                         const char *ns,
                         const struct kube_list_opts *o,
                         cJSON **ret,
                         struct kube_error *e);

/* Receives one page of a LIST and owns it (page: the List object as the server sent it,
 * items and metadata.resourceVersion included). first marks the first page of a pass;
 * restart marks the first page of the second pass after an expired continue token, when
 * whatever the earlier pages gave must be dropped. Nonzero stops the list and is returned. */
typedef int kube_page_fn(void *arg, cJSON *page, bool first, bool restart);

/* LIST page by page (following metadata.continue), each page handed to on_page as it
 * arrives, so no more than one page is held at a time. A continue token that expires (410)
 * restarts the list from the beginning once. */
MUST_CHECK int kube_list_pages(struct kube_client *c,
                               const struct kube_resource *r,
                               const char *ns,
                               const struct kube_list_opts *o,
                               kube_page_fn *on_page,
                               void *arg,
                               struct kube_error *e);

/* POST; *ret (may be NULL) receives the created object. */
MUST_CHECK int kube_create(struct kube_client *c,
                           const struct kube_resource *r,
                           const char *ns,
                           const cJSON *obj,
                           cJSON **ret,
                           struct kube_error *e);

/* The object a PUT replaces. Every pointer is borrowed for the call. */
struct kube_update_opts {
        const struct kube_resource *resource;
        const char *ns; /* NULL for cluster-scoped resources */
        const char *name;
        const char *subresource; /* NULL or "status" */
};

/* PUT the whole object obj at o (metadata.resourceVersion is the precondition: CM_ECONFLICT
 * when stale). */
MUST_CHECK int kube_update(struct kube_client *c,
                           const struct kube_update_opts *o,
                           const cJSON *obj,
                           cJSON **ret,
                           struct kube_error *e);

enum kube_patch_type {
        KUBE_PATCH_MERGE,     /* application/merge-patch+json */
        KUBE_PATCH_JSON,      /* application/json-patch+json */
        KUBE_PATCH_STRATEGIC, /* application/strategic-merge-patch+json (built-ins only) */
        KUBE_PATCH_APPLY,     /* application/apply-patch+yaml (JSON is YAML); force=true */
};

/* What to patch and how. Every pointer is borrowed for the call. */
struct kube_patch_opts {
        const struct kube_resource *resource;
        const char *ns; /* NULL for cluster-scoped resources */
        const char *name;
        const char *subresource; /* NULL or "status" */
        enum kube_patch_type type;
        const char *body; /* the serialized patch */
};

/* PATCH o->name with o->body. */
MUST_CHECK int kube_patch(struct kube_client *c,
                          const struct kube_patch_opts *o,
                          cJSON **ret,
                          struct kube_error *e);

struct kube_delete_opts {
        const char *propagation_policy; /* "Background", "Foreground", "Orphan" or NULL */
        int64_t grace_period_seconds;   /* < 0 = server default */
        const char *precondition_uid;   /* NULL = none */
        const char *precondition_rv;    /* NULL = none */
};

/* DELETE name. o may be NULL. CM_ENOTFOUND when already gone. */
MUST_CHECK int kube_delete(struct kube_client *c,
                           const struct kube_resource *r,
                           const char *ns,
                           const char *name,
                           const struct kube_delete_opts *o,
                           struct kube_error *e);

/* --- watch ---------------------------------------------------------------------------- */

enum kube_watch_event {
        KUBE_WATCH_ADDED,
        KUBE_WATCH_MODIFIED,
        KUBE_WATCH_DELETED,
        KUBE_WATCH_BOOKMARK,
};

/* Called on the watching thread for each event. `object` is owned by the callee (it must
 * cJSON_Delete it or keep it). Return 0 to go on, non-zero to end the watch (kube_watch
 * then returns 0). */
typedef int (*kube_watch_fn)(void *arg, enum kube_watch_event type, cJSON *object);

struct kube_watch_opts {
        const char *resource_version; /* start after this version; NULL/"" = from now */
        const char *label_selector;   /* NULL = none */
        unsigned timeout_seconds;     /* server-side timeoutSeconds; 0 = 300 */
        size_t max_event;             /* largest accepted event line; 0 = 16 MiB */
        const atomic_bool *stop;      /* polled at least every 500 ms; NULL = never */
};

/* Streams a watch (allowWatchBookmarks=true), framing events line by line as they arrive
 * (never re-parsing what was seen), until the server ends the stream (returns 0), *stop
 * becomes true (0), the callback asks to stop (0), an ERROR event arrives (its code
 * mapped: 410 → CM_EGONE), an event exceeds max_event (CM_ETOOBIG) or the connection
 * fails (CM_ETRANSPORT). The caller continues from the last resourceVersion it saw. */
MUST_CHECK int kube_watch(struct kube_client *c,
                          const struct kube_resource *r,
                          const char *ns,
                          const struct kube_watch_opts *o,
                          kube_watch_fn fn,
                          void *arg,
                          struct kube_error *e);

/* --- helpers -------------------------------------------------------------------------- */

/* metadata.<field> of obj as a string, or NULL (borrowed from obj). */
const char *kube_meta_str(const cJSON *obj, const char *field);
/* metadata.labels[key] / metadata.annotations[key], or NULL (borrowed). */
const char *kube_label(const cJSON *obj, const char *key);
const char *kube_annotation(const cJSON *obj, const char *key);
