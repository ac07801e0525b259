#pragma once
/*
 * admission: the AdmissionReview codec (admission.k8s.io v1 and v1beta1). A request is
 * decoded into a struct that owns its object trees; a response is encoded in the version
 * the request came in, with the request's uid echoed. Pure functions; thread-safe.
 */

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "compiler.h"

enum admission_op {
        ADMISSION_OP_CREATE,
        ADMISSION_OP_UPDATE,
        ADMISSION_OP_DELETE,
        ADMISSION_OP_CONNECT,
        ADMISSION_OP_COUNT,
        ADMISSION_OP_INVALID = -1,
};

enum admission_version {
        ADMISSION_V1,      /* admission.k8s.io/v1 */
        ADMISSION_V1BETA1, /* admission.k8s.io/v1beta1 */
};

struct admission_request {
        enum admission_version version;
        char *strings; /* owned: the block uid, kind, group, name, namespace and username
                        * point into (decoded reviews; NULL when the caller set them) */
        char *uid;     /* never empty */
        enum admission_op op;
        char *kind;      /* request.kind.kind ("MaasMachine") */
        char *group;     /* request.kind.group, "" when absent */
        char *name;      /* "" when absent (generateName) */
        char *namespace; /* "" when absent */
        char *username;  /* request.userInfo.username, "" when absent */
        bool dry_run;
        cJSON *object;     /* owned; NULL when absent (DELETE) */
        cJSON *old_object; /* owned; NULL when absent (CREATE) */
};

#define ADMISSION_WARNINGS_MAX 16

struct admission_response {
        bool allowed;
        unsigned code;  /* status.code of a denial: 403 Forbidden or 422 Invalid */
        char *reason;   /* owned; status.reason of a denial ("Forbidden", "Invalid") */
        char *message;  /* owned; status.message of a denial */
        cJSON *causes;  /* owned; status.details.causes array, may be NULL */
        cJSON *details; /* owned; other status.details members (group, kind, name), or NULL */
        char *warnings[ADMISSION_WARNINGS_MAX]; /* owned */
        size_t n_warnings;
        cJSON *patch; /* owned; JSON Patch operations array; NULL or empty = no patch */
};

/*
 * Budgets of one review, checked by admission_request_scan before any tree is built:
 * nesting, and values (of any type) at most ADMISSION_VALUES_MIN plus one per
 * ADMISSION_BYTES_PER_VALUE bytes of body, never more than ADMISSION_VALUES_MAX. A real
 * review (object and oldObject as the API server writes them) holds a value per 20 to 40
 * bytes; one array of small numbers holds one per 2 bytes and would build a tree 40 times
 * the body. Strings need no budget of their own: their decoded bytes never exceed the body.
 */
#define ADMISSION_DEPTH_MAX       64
#define ADMISSION_VALUES_MIN      4096
#define ADMISSION_BYTES_PER_VALUE 16
#define ADMISSION_VALUES_MAX      65536

const char *admission_op_name(enum admission_op op);
/* The members of a review the decoder reads: apiVersion, kind, request and, in request,
 * uid, operation, kind, name, namespace, userInfo, dryRun, object and oldObject. */
#define ADMISSION_MEMBERS    12
/* ... and in request.kind, kind and group; in request.userInfo, username. */
#define ADMISSION_SUBMEMBERS 3

/* What admission_request_scan found. */
struct admission_scan {
        size_t tree_bytes; /* what decoding the whole body would allocate, at most */
        bool object;       /* the body is a JSON object */

        struct {
                size_t off, end; /* the member's value; end 0 = absent */
        } member[ADMISSION_MEMBERS], sub[ADMISSION_SUBMEMBERS];
};

/* Checks a body before it is parsed: strict JSON (json_scan.h: duplicate keys, \u0000,
 * invalid UTF-8, ...) within the budgets above, and finds the members the decoder reads
 * (the rest, resource, requestKind, userInfo's groups, options, are never built). CM_EPARSE
 * or CM_ETOOBIG with *reterr (malloc'd, valid UTF-8) naming the place or the limit:
 * "request.operation: duplicate key (offset 120)", "request body has 1572865 JSON values;
 * the limit is 65536". *ret is written on success. */
MUST_CHECK int admission_request_scan(const char *body,
                                      size_t len,
                                      struct admission_scan *ret,
                                      char **reterr);
/* Decodes an AdmissionReview body (admission_request_scan first). CM_EPARSE or CM_ETOOBIG
 * with *reterr (malloc'd) naming what is wrong: not strict JSON, over a budget, not an
 * AdmissionReview, missing request or uid, a field of the wrong type. */
MUST_CHECK int admission_request_decode(const char *body,
                                        size_t len,
                                        struct admission_request *ret,
                                        char **reterr);
/* admission_request_decode for a body admission_request_scan accepted (with scan). */
MUST_CHECK int admission_request_decode_scanned(const char *body,
                                                const struct admission_scan *scan,
                                                struct admission_request *ret,
                                                char **reterr);
void admission_request_release(struct admission_request *req);
/* Encodes the AdmissionReview answering req; *ret_json is freed with free(). */
MUST_CHECK int admission_response_encode(const struct admission_request *req,
                                         const struct admission_response *resp,
                                         char **ret_json);
void admission_response_release(struct admission_response *resp);
/* Adds a warning (copied); warnings beyond the cap are dropped. */
void admission_response_warn(struct admission_response *resp, const char *fmt, ...)
        PRINTF_LIKE(2, 3);
