#pragma once
/*
 * kube-sim internals: one process-wide state (struct ks) guarded by one mutex, ks.mu.
 *
 * Ownership: the registry (struct kres), collections (struct kcoll) and their cJSON objects
 * belong to the state and are read or changed only with ks.mu held. Request handlers copy
 * what they need (cJSON_Duplicate) under the lock and work on copies unlocked; admission
 * webhooks are always called without the lock. kres entries are never freed before exit (a
 * deleted CRD only stops being served), so a kres pointer stays valid for the process life.
 *
 * Threads: libmicrohttpd runs one thread per connection; every function here may be called
 * from any of them unless its comment says "lock held".
 */

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "compiler.h"

#define KS_MAX_BODY    (3u * 1024u * 1024u)
#define KS_MAX_WARN    8
#define KS_NS_DELETING "kubernetes"

struct kcoll;

/* One served group/version/resource. */
struct kres {
        char *group;    /* "" for core */
        char *version;  /* "v1" */
        char *plural;   /* "secrets" */
        char *singular; /* "secret" */
        char *kind;     /* "Secret" */
        char *list_kind;
        bool namespaced;
        bool crd;        /* custom resource: merge-patch only, RV required on PUT */
        bool status_sub; /* has a /status subresource */
        bool served;
        bool storage;       /* CRD storage version */
        cJSON *short_names; /* array of strings, owned */
        cJSON *categories;  /* array of strings, owned */
        cJSON *columns;     /* additionalPrinterColumns, owned, may be NULL */
        cJSON *schema;      /* openAPIV3Schema, owned, may be NULL */
        struct kcoll *coll; /* storage shared by every version of the resource */
        struct kres *next;
};

/* The sort key of a stored object, its own copy (lookups compare these, not the trees). */
struct kkey {
        char *ns; /* "" for cluster-scoped */
        char *name;
};

/* Objects of one group/resource, sorted by (namespace, name); keys[i] is objs[i]'s. */
struct kcoll {
        char *group;
        char *plural;
        cJSON **objs;
        struct kkey *keys;
        size_t n, cap;
        struct kcoll *next;
        /* broadcast (with ks.mu) on an event of this collection: only its watches wake,
         * not every watch of the server on every write */
        pthread_cond_t cond;
};

enum kev_type {
        KEV_ADDED,
        KEV_MODIFIED,
        KEV_DELETED,
};

struct kevent {
        uint64_t rv;
        enum kev_type type;
        struct kcoll *coll;
        cJSON *obj; /* owned, immutable */
        char *line; /* owned: the serialized watch event, made by the first watcher */
        size_t line_len;
};

struct kfaults {
        bool expire_next_watch;
        unsigned delay_ms;
        double error_rate;   /* 0..1 */
        unsigned error_code; /* 429 or 500 */
        uint64_t drop_epoch; /* bumped to end every open watch */
        /* failNext: the next fail_count requests with this method whose path contains
         * fail_path answer 500 (a targeted, one-shot fault for crash-window tests) */
        char fail_method[16];
        char fail_path[256];
        unsigned fail_count;
};

struct ks_override {
        char *service; /* "ns/name" */
        char *target;  /* "host:port" */
};

struct ks {
        pthread_mutex_t mu;
        pthread_cond_t cond; /* broadcast on every event and on stop */
        uint64_t rv;
        struct kres *res;
        struct kcoll *colls;
        struct kevent *hist; /* ring */
        size_t hist_cap, hist_start, hist_len;
        uint64_t compacted_rv; /* events at or below this RV are gone */
        bool stopping;
        char *token;
        char *host;           /* "127.0.0.1:port"; set before the server's threads start */
        const char *dir;      /* --dir (argv, not owned); set before the threads start */
        uint64_t bookmark_ms; /* --bookmark-interval */
        struct kfaults faults;
        struct ks_override *overrides;
        size_t n_overrides;
        cJSON *reqlog;   /* array, capped */
        size_t reqlog_n; /* its length (cJSON_GetArraySize walks the list) */
        cJSON *counts;   /* {"<user agent product> <METHOD>": n}, never capped */
        cJSON *access;   /* {"<agent> <verb> <group> <resource> <ns>": n}, never capped */
        uint64_t rng;
};

extern struct ks ks;

/* A parsed request handed to the handlers. */
struct kreq {
        void *conn; /* struct MHD_Connection * */
        const char *method;
        const char *path;
        const char *accept;
        const char *content_type;
        const char *user_agent;
        const char *body;
        size_t body_len;
};

/* A response being built. */
struct kresp {
        unsigned status;
        const char *content_type; /* static; NULL = application/json */
        char *body;               /* owned */
        char *warnings[KS_MAX_WARN];
        size_t n_warnings;
        void *stream; /* struct kwatch * when a watch stream was started */
};

/* Where a resource request points. */
struct ktarget {
        struct kres *res;
        const char *ns;   /* NULL for cluster-wide */
        const char *name; /* NULL for collection */
        const char *sub;  /* NULL, "status" */
};

/* ---- util.c ---- */
/* Decoded query parameter of the request, NULL when absent. */
const char *kq(const struct kreq *r, const char *name);
/* True for "true", "1" or "True" (python3-kubernetes sends watch=True). */
bool kq_bool(const struct kreq *r, const char *name);
/* Now as RFC 3339 in UTC, seconds ("…Z") or microseconds ("….000000Z"); caller frees. */
char *ks_now_rfc3339(void);
char *ks_now_micro(void);
/* Random version-4 UUID; caller frees. */
char *ks_uuid(void);
/* Uniformly random 64 bits from GnuTLS's nonce generator. */
uint64_t ks_random(void);
/* Sets status and a JSON body (body consumed). */
void kresp_json(struct kresp *resp, unsigned status, cJSON *body);
/* Adds key: the string fmt formats from ap to o. */
void ks_add_vfmt(cJSON *o, const char *key, const char *fmt, va_list ap) PRINTF_LIKE(3, 0);
/* Sets a meta.k8s.io Status body (details consumed, may be NULL). */
void kresp_status(
        struct kresp *resp, unsigned code, const char *reason, cJSON *details, const char *fmt, ...)
        PRINTF_LIKE(5, 6);
/* Status details {name, group, kind}: kind is the plural, or the Kind when kind_is_kind. */
cJSON *ks_details(const struct kres *res, const char *name, bool kind_is_kind);
/* Adds a "Warning: 299 - …" header (at most KS_MAX_WARN). */
void kresp_warn(struct kresp *resp, const char *text);
/* obj[a] or obj[a][b] (b may be NULL), type-checked; borrowed. */
const char *ks_obj_str(const cJSON *obj, const char *a, const char *b);
cJSON *ks_obj_get(const cJSON *obj, const char *a, const char *b);
/* obj[key] as an object, created (or replacing a non-object) when needed. */
cJSON *ks_obj_ensure(cJSON *obj, const char *key);
/* Sets obj[key], replacing any value (val consumed). */
void ks_obj_set_str(cJSON *obj, const char *key, const char *val);
void ks_obj_set(cJSON *obj, const char *key, cJSON *val);
/* "plural.group" (or "plural" for core); caller frees. */
char *ks_resname(const struct kres *res);
/* "group/version" (or "version" for core); caller frees. */
char *ks_api_version(const struct kres *res);
/* JSON of a capped request body; NULL when empty or malformed. */
cJSON *ks_parse_body(const char *body, size_t len);
/* JSON or a single YAML mapping document as cJSON; NULL when malformed. */
cJSON *ks_yaml_to_json(const char *body, size_t len);

/* ---- protobuf.c ---- */
/* Decodes a protobuf-encoded ConfigMap, Secret, Namespace or ServiceAccount; NULL otherwise. */
cJSON *ks_proto_to_json(const char *body, size_t len);

/* ---- registry.c ---- */
/* Registers the built-in resources; main thread, before serving. */
void registry_init(void);
/* Frees every kres (at exit). */
void registry_free(void);
/* The served resource group/version/plural, or NULL. lock held */
struct kres *registry_find(const char *group, const char *version, const char *plural);
/* Registers (or re-registers) the resources of a stored CRD. lock held */
void registry_apply_crd(const cJSON *crd);
/* Stops serving the resources of a CRD. lock held */
void registry_drop_crd(const cJSON *crd);
/* Validates a CRD body; fills a 422 on error and returns false. */
bool registry_check_crd(const cJSON *crd, struct kresp *resp);
/* True when some resource of group is served. lock held */
bool ks_group_served(const char *group);

/* ---- store.c (every function: lock held, except init/free at start and exit) ---- */
/* Allocates the event ring of hist_cap events. */
void store_init(size_t hist_cap);
void store_free(void);
/* The collection of group/plural, created empty on first use. */
struct kcoll *store_coll(const char *group, const char *plural);
/* The stored object (borrowed) or NULL; ns NULL for cluster-scoped. */
cJSON *store_get(struct kcoll *c, const char *ns, const char *name);
/* Stores obj (consumed), replacing an object with the same namespace/name. */
void store_put(struct kcoll *c, cJSON *obj);
/* Removes and frees the stored object with obj's namespace/name. */
void store_remove(struct kcoll *c, const cJSON *obj);
/* Advances and returns the global resourceVersion. */
/* Wakes every watch (stopping, dropped watches). ks.mu held. */
void store_wake_all(void);
uint64_t store_next_rv(void);
/* Appends a copy of obj to the event ring (evicting the oldest) and wakes watchers. */
void store_event(enum kev_type type, struct kcoll *c, const cJSON *obj, uint64_t rv);
/* True when no stored object lives in namespace ns. */
bool store_ns_empty(const char *ns);

/* ---- selector.c ---- */
struct ksel;
/* Parses a label selector (=, ==, !=, in, notin, key, !key); message in *ret_err. */
MUST_CHECK int ksel_parse_labels(const char *s, struct ksel **ret, char **ret_err);
/* Parses a field selector allowed for res ("field label not supported: …" otherwise). */
MUST_CHECK int ksel_parse_fields(const char *s,
                                 const struct kres *res,
                                 struct ksel **ret,
                                 char **ret_err);
/* True when obj matches both selectors (NULL matches everything). */
bool ksel_match(const struct ksel *labels, const struct ksel *fields, const cJSON *obj);
/* Matches labels against a metav1.LabelSelector object (NULL/empty matches everything). */
bool ksel_match_labels_obj(const cJSON *selector, const cJSON *labels);
struct ksel *ksel_free(struct ksel *s);

/* ---- table.c ---- */
/* True when Accept asks for a meta.k8s.io Table. */
bool ks_wants_table(const char *accept);
/* Table of items (borrowed) with the resource's printer columns. Reads res: lock held. */
cJSON *table_build(const struct kres *res, cJSON *items, bool with_columns);
/* Evaluates a printer-column JSONPath (dots, [n], [*], [?(@.k=="v")]); borrowed or NULL. */
cJSON *ks_jsonpath(const cJSON *obj, const char *path);

/* ---- discovery.c ---- */
/* Answers /version, health, discovery and OpenAPI paths; false otherwise. lock held */
bool discovery_handle(const struct kreq *r, struct kresp *resp);

/* ---- handlers.c ---- */
/* Routes one authenticated API request and fills resp. */
void handle_request(const struct kreq *r, struct kresp *resp);
/* Creates the default, kube-system, kube-public and kube-node-lease namespaces. */
void handlers_seed(void);

/* ---- write.c ---- */
struct kwrite {
        const struct kreq *req;
        const struct ktarget *t;
        bool dry_run;
        const char *manager;
        const char *operation; /* "Update" / "Apply" */
};

/* Creates obj (consumed) at w->t: metadata, kind hooks, schema, admission, store; 201. */
void write_create(const struct kwrite *w, cJSON *obj, struct kresp *resp);
/* Updates w->t to new_obj (consumed). expect_rv: the RV the change was based on ("" = none);
 * put: a PUT (custom resources then require an RV). CM_ECONFLICT lets PATCH retry. */
int write_update(const struct kwrite *w,
                 cJSON *new_obj,
                 const char *expect_rv,
                 bool put,
                 struct kresp *resp);
/* 404 when old is NULL, 409 when expect_rv ("" = any) is not old's RV, 422 for a PUT of a
 * custom resource without one; 0 to go on. */
int write_precheck(const struct kwrite *w,
                   const cJSON *old,
                   const char *expect_rv,
                   bool put,
                   struct kresp *resp);
/* A copy of the stored object at t (NULL if absent); takes the lock. */
cJSON *ks_load_copy(const struct ktarget *t);
/* Object helpers shared by write.c and delete.c. */
void ks_set_rv(cJSON *obj, uint64_t rv);
void ks_set_gvk(const struct kres *res, cJSON *obj);
const char *ks_rv_of(const cJSON *o); /* metadata.resourceVersion or "" */
bool ks_contains_str(const cJSON *arr, const char *s);
void ks_bump_generation(cJSON *obj);
bool ks_finalizers_empty(const cJSON *obj);
/* 409 Conflict on res/name with why. */
void ks_conflict(const struct kres *res, const char *name, struct kresp *resp, const char *why);
/* Removes obj from c with a DELETED event (lock held). */
void ks_remove_locked(const struct kres *res, struct kcoll *c, cJSON *obj);

/* ---- delete.c ---- */
/* Deletes w->t honouring finalizers, preconditions and propagationPolicy. */
void write_delete(const struct kwrite *w, struct kresp *resp);
/* Garbage collection: ownerReferences, foreground/orphan, terminating namespaces. lock held */
void gc_sweep(void);

/* ---- patch.c ---- */
/* RFC 6902 JSON patch applied in place; CM_EINVAL (malformed) or CM_ECONFLICT (cannot apply)
 * with a message in *ret_err. */
MUST_CHECK int patch_json(cJSON **doc, const cJSON *ops, char **ret_err);
/* Strategic merge patch for built-in kinds (merge keys of kubernetes.md §1.9); consumes
 * target. */
cJSON *patch_strategic(cJSON *target, const cJSON *patch, const char *path);
/* path (dotted, from the object's root) is a list merged by key or as a set ... */
bool patch_has_merge_key(const char *path);
/* ... and this merges patch into it (consumes target). */
cJSON *patch_merge_list(cJSON *target, const cJSON *patch, const char *path);

/* ---- apply.c ---- */
/* Server-side apply of cfg onto live (in place) with managedFields bookkeeping; CM_ECONFLICT
 * (409 filled in resp) when another manager owns a field with a different value and the
 * request has no force=true. */
MUST_CHECK int ssa_apply(cJSON *live,
                         const cJSON *cfg,
                         const struct kwrite *w,
                         const char *api_version,
                         struct kresp *resp);
/* Records the fields a non-apply write changed under manager (old NULL: a create). */
void managed_fields_update(cJSON *obj,
                           const cJSON *old,
                           const char *manager,
                           const char *operation,
                           const char *api_version,
                           const char *sub);
/* The PATCH verb: merge, JSON, strategic (415 for CRs) and apply patches. */
void handle_patch(const struct kreq *r, const struct ktarget *t, struct kresp *resp);

/* ---- watch.c ---- */
/* Starts a watch stream on resp->stream (or fills an error). */
void watch_start(const struct kreq *r, const struct ktarget *t, struct kresp *resp);
/* The struct MHD_Response * streaming resp->stream; it owns the stream from then on. */
void *watch_response(void *stream);

/* ---- schema.c ---- */
/* Prunes (or rejects unknown fields under fieldValidation=Strict), defaults and validates a
 * custom object; on failure fills a 400/422 and returns false. old (NULL on CREATE) is the
 * stored object of an UPDATE: what it already held unchanged is not validated again
 * (ratcheting, as kube-apiserver 1.30+). */
bool schema_apply(const struct kres *res,
                  cJSON *obj,
                  const cJSON *old,
                  const char *field_validation,
                  struct kresp *resp);
/* The decode half of schema_apply: prunes (or rejects unknown fields) and defaults, without
 * validating. As in kube-apiserver, validation runs after the mutating webhooks. */
bool schema_prune_default(const struct kres *res,
                          cJSON *obj,
                          const char *field_validation,
                          struct kresp *resp);

/* ---- admission.c ---- */
/* Frees the cached webhook snapshots (at exit). */
void admission_free(void);
/* Runs mutating then validating webhooks; obj may be changed. false = resp filled. */
bool admission_run(
        const struct kwrite *w, const char *op, cJSON *obj, const cJSON *old, struct kresp *resp);

/* ---- authn.c ---- */
/* Answers TokenRequest, TokenReview, SubjectAccessReview and SelfSubjectAccessReview;
 * false for other paths. */
bool authn_handle(const struct kreq *r, struct kresp *resp);
/* Frees the minted service-account tokens (at exit). */
void authn_free(void);

/* ---- simctl.c ---- */
/* Answers /_sim/faults and /_sim/requests; false for other paths. */
bool simctl_handle(const struct kreq *r, struct kresp *resp);
/* Appends the request to the request log (not /_sim paths). */
void simctl_log(const struct kreq *r, unsigned status);
/* Applies configured delay and injected errors; true when resp was filled with an error. */
bool simctl_fault(const struct kreq *r, struct kresp *resp);
