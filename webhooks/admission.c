/*
 * admission: AdmissionReview decode and encode. Decoding copies the scalar fields and
 * detaches the object trees from the parsed document, so the request owns exactly what it
 * keeps and the document is freed before the handler runs.
 */
#include "admission.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "err.h"
#include "json.h"
#include "json_scan.h"
#include "xalloc.h"

static const char *const op_names[ADMISSION_OP_COUNT] = {
        [ADMISSION_OP_CREATE] = "CREATE",
        [ADMISSION_OP_UPDATE] = "UPDATE",
        [ADMISSION_OP_DELETE] = "DELETE",
        [ADMISSION_OP_CONNECT] = "CONNECT",
};

static const char *const api_versions[] = {
        [ADMISSION_V1] = "admission.k8s.io/v1",
        [ADMISSION_V1BETA1] = "admission.k8s.io/v1beta1",
};

const char *admission_op_name(enum admission_op op)
{
        return op >= 0 && op < ADMISSION_OP_COUNT ? op_names[op] : "UNKNOWN";
}

static enum admission_op op_parse(const char *s)
{
        for (int i = 0; i < ADMISSION_OP_COUNT; i++)
                if (strcmp(s, op_names[i]) == 0)
                        return (enum admission_op)i;
        return ADMISSION_OP_INVALID;
}

/* A string member: absent (or null) gives dflt; present but not a string is an error. */
static int get_str(const cJSON *obj,
                   const char *key,
                   const char *path,
                   const char *dflt,
                   char **ret,
                   char **reterr)
{
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);

        if (!item || cJSON_IsNull(item)) {
                if (!dflt) {
                        *reterr = xasprintf("%s%s: required field missing", path, key);
                        return CM_EPARSE;
                }
                *ret = xstrdup(dflt);
                return CM_OK;
        }
        if (!cJSON_IsString(item)) {
                *reterr =
                        xasprintf("%s%s: expected string, got %s", path, key, json_type_name(item));
                return CM_EPARSE;
        }
        *ret = xstrdup(item->valuestring);
        return CM_OK;
}

/* Detaches an optional object member; a non-object is an error. */
static int take_object(cJSON *obj, const char *key, cJSON **ret, char **reterr)
{
        cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);

        if (!item || cJSON_IsNull(item))
                return CM_OK;
        if (!cJSON_IsObject(item)) {
                *reterr =
                        xasprintf("request.%s: expected object, got %s", key, json_type_name(item));
                return CM_EPARSE;
        }
        *ret = cJSON_DetachItemViaPointer(obj, item);
        return CM_OK;
}

static int decode_envelope(const cJSON *root, enum admission_version *ret_version, char **reterr)
{
        const cJSON *api = cJSON_GetObjectItemCaseSensitive(root, "apiVersion");
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "kind");

        if (!cJSON_IsString(kind) || strcmp(kind->valuestring, "AdmissionReview") != 0) {
                *reterr = xstrdup("kind: expected \"AdmissionReview\"");
                return CM_EPARSE;
        }
        if (!cJSON_IsString(api)) {
                *reterr = xstrdup("apiVersion: expected admission.k8s.io/v1 or v1beta1");
                return CM_EPARSE;
        }
        for (size_t i = 0; i < ARRAY_SIZE(api_versions); i++) {
                if (strcmp(api->valuestring, api_versions[i]) == 0) {
                        *ret_version = (enum admission_version)i;
                        return CM_OK;
                }
        }
        *reterr = xasprintf("apiVersion: unsupported \"%s\" (expected admission.k8s.io/v1 or "
                            "admission.k8s.io/v1beta1)",
                            api->valuestring);
        return CM_EPARSE;
}

static int decode_operation(const cJSON *request, struct admission_request *req, char **reterr)
{
        char *op = NULL;
        int r = get_str(request, "operation", "request.", NULL, &op, reterr);

        if (r < 0)
                return r;
        req->op = op_parse(op);
        if (req->op == ADMISSION_OP_INVALID) {
                *reterr = xasprintf("request.operation: unknown operation \"%s\"", op);
                r = CM_EPARSE;
        }
        free(op);
        return r;
}

static int decode_kind(const cJSON *request, struct admission_request *req, char **reterr)
{
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(request, "kind");
        int r;

        if (!cJSON_IsObject(kind)) {
                *reterr = xasprintf("request.kind: expected object, got %s", json_type_name(kind));
                return CM_EPARSE;
        }
        r = get_str(kind, "kind", "request.kind.", NULL, &req->kind, reterr);
        if (r == 0)
                r = get_str(kind, "group", "request.kind.", "", &req->group, reterr);
        return r;
}

static int decode_user_and_flags(const cJSON *request, struct admission_request *req, char **reterr)
{
        const cJSON *user = cJSON_GetObjectItemCaseSensitive(request, "userInfo");
        const cJSON *dry = cJSON_GetObjectItemCaseSensitive(request, "dryRun");

        if (dry && !cJSON_IsNull(dry) && !cJSON_IsBool(dry)) {
                *reterr =
                        xasprintf("request.dryRun: expected boolean, got %s", json_type_name(dry));
                return CM_EPARSE;
        }
        req->dry_run = cJSON_IsTrue(dry);
        if (user && !cJSON_IsNull(user) && !cJSON_IsObject(user)) {
                *reterr = xasprintf("request.userInfo: expected object, got %s",
                                    json_type_name(user));
                return CM_EPARSE;
        }
        return get_str(cJSON_IsObject(user) ? user : NULL, "username", "request.userInfo.", "",
                       &req->username, reterr);
}

static int decode_request(cJSON *request, struct admission_request *req, char **reterr)
{
        int r;

        r = get_str(request, "uid", "request.", NULL, &req->uid, reterr);
        if (r == 0 && !*req->uid) {
                *reterr = xstrdup("request.uid: must not be empty");
                r = CM_EPARSE;
        }
        if (r == 0)
                r = decode_operation(request, req, reterr);
        if (r == 0)
                r = decode_kind(request, req, reterr);
        if (r == 0)
                r = get_str(request, "name", "request.", "", &req->name, reterr);
        if (r == 0)
                r = get_str(request, "namespace", "request.", "", &req->namespace, reterr);
        if (r == 0)
                r = decode_user_and_flags(request, req, reterr);
        if (r == 0)
                r = take_object(request, "object", &req->object, reterr);
        if (r == 0)
                r = take_object(request, "oldObject", &req->old_object, reterr);
        return r;
}

enum {
        M_API_VERSION,
        M_KIND,
        M_REQUEST,
        M_FIRST_OF_REQUEST,
        M_LAST = ADMISSION_MEMBERS - 1,
};

static const char *const member_names[ADMISSION_MEMBERS] = {
        "apiVersion", "kind",      "request",  "uid",    "operation", "kind",
        "name",       "namespace", "userInfo", "dryRun", "object",    "oldObject",
};

struct finder {
        const char *text;
        struct admission_scan *scan;
        size_t request_key; /* key_off of the root's "request" member, once seen */
        size_t other_key;   /* key_off of the last root member known not to be it */
};

/* Is the root member whose key is at key_off "request"? (asked once per member of it) */
static bool is_request(struct finder *f, size_t key_off)
{
        if (key_off == f->request_key)
                return true;
        if (key_off == f->other_key)
                return false;
        if (json_scan_key_is(f->text, key_off, "request")) {
                f->request_key = key_off;
                return true;
        }
        f->other_key = key_off;
        return false;
}

static void find_member(void *ud, const struct json_scan_member *m)
{
        struct finder *f = ud;
        int first = m->depth == 1 ? M_API_VERSION : M_FIRST_OF_REQUEST;
        int last = m->depth == 1 ? M_REQUEST : M_LAST;

        if (m->depth == 2 && !is_request(f, m->parent_key_off))
                return;
        for (int i = first; i <= last; i++) {
                if (json_scan_key_is(f->text, m->key_off, member_names[i])) {
                        f->scan->member[i].off = m->value_off;
                        f->scan->member[i].end = m->value_end;
                        return;
                }
        }
}

int admission_request_scan(const char *body, size_t len, struct admission_scan *ret, char **reterr)
{
        size_t values = ADMISSION_VALUES_MIN + len / ADMISSION_BYTES_PER_VALUE;
        struct json_scan_limits lim = {
                .max_values = values < ADMISSION_VALUES_MAX ? values : ADMISSION_VALUES_MAX,
                .max_depth = ADMISSION_DEPTH_MAX,
        };
        struct admission_scan scan = { 0 };
        struct finder f = {
                .text = body, .scan = &scan, .request_key = SIZE_MAX, .other_key = SIZE_MAX
        };
        struct json_scan_result res;
        int r = json_scan_members(
                body, len, &lim,
                &(struct json_scan_members){ .depth = 2, .fn = find_member, .ud = &f }, &res);

        if (r == 0) {
                scan.tree_bytes = json_scan_tree_bytes(&res.stats);
                scan.object = body[strspn(body, " \t\r\n")] == '{'; /* valid JSON: not all space */
                *ret = scan;
                return CM_OK;
        }
        if (res.fault == JSON_SCAN_LIMIT)
                *reterr = xasprintf("request body has %s", res.message);
        else if (res.fault == JSON_SCAN_SYNTAX)
                *reterr = xasprintf("body is not valid JSON: %s", res.message);
        else
                *reterr = xstrdup(res.message);
        return r;
}

int admission_request_decode(const char *body,
                             size_t len,
                             struct admission_request *ret,
                             char **reterr)
{
        struct admission_scan scan;
        int r = admission_request_scan(body, len, &scan, reterr);

        return r < 0 ? r : admission_request_decode_scanned(body, &scan, ret, reterr);
}

/* Parses member i of the scan into obj under its name (nothing when absent). */
static int add_member(const char *body, const struct admission_scan *scan, int i, cJSON *obj)
{
        cJSON *item = NULL;
        int r;

        if (!scan->member[i].end)
                return CM_OK;
        r = json_parse(body + scan->member[i].off, scan->member[i].end - scan->member[i].off,
                       &item);
        if (r == 0)
                cJSON_AddItemToObject(obj, member_names[i], item);
        return r;
}

/* The review as the decoder reads it: only the members it needs, each parsed from its span. */
static int build_review(const char *body, const struct admission_scan *scan, cJSON **ret)
{
        cJSON *root = cJSON_CreateObject(), *request;
        int r = 0;

        for (int i = M_API_VERSION; r == 0 && i < M_REQUEST; i++)
                r = add_member(body, scan, i, root);
        if (r == 0 && scan->member[M_REQUEST].end && body[scan->member[M_REQUEST].off] != '{') {
                r = add_member(body, scan, M_REQUEST, root); /* not an object: for the error */
        } else if (r == 0 && scan->member[M_REQUEST].end) {
                request = cJSON_AddObjectToObject(root, "request");
                for (int i = M_FIRST_OF_REQUEST; r == 0 && i <= M_LAST; i++)
                        r = add_member(body, scan, i, request);
        }
        if (r < 0) {
                cJSON_Delete(root);
                return r;
        }
        *ret = root;
        return CM_OK;
}

int admission_request_decode_scanned(const char *body,
                                     const struct admission_scan *scan,
                                     struct admission_request *ret,
                                     char **reterr)
{
        struct admission_request req = { .op = ADMISSION_OP_INVALID };
        cJSON *root = NULL;
        cJSON *request;
        int r;

        if (!scan->object) {
                *reterr = xstrdup("body is not a JSON object");
                r = CM_EPARSE;
                goto out;
        }
        r = build_review(body, scan, &root);
        if (r < 0) {
                *reterr = xstrdup("body is not valid JSON");
                goto out;
        }
        r = decode_envelope(root, &req.version, reterr);
        if (r < 0)
                goto out;
        request = cJSON_GetObjectItemCaseSensitive(root, "request");
        if (!cJSON_IsObject(request)) {
                *reterr = xstrdup("request: missing or not an object");
                r = CM_EPARSE;
                goto out;
        }
        r = decode_request(request, &req, reterr);
        if (r < 0)
                goto out;
        *ret = req;
        req = (struct admission_request){ .op = ADMISSION_OP_INVALID };
out:
        admission_request_release(&req);
        cJSON_Delete(root);
        return r;
}

void admission_request_release(struct admission_request *req)
{
        free(req->uid);
        free(req->kind);
        free(req->group);
        free(req->name);
        free(req->namespace);
        free(req->username);
        cJSON_Delete(req->object);
        cJSON_Delete(req->old_object);
        *req = (struct admission_request){ .op = ADMISSION_OP_INVALID };
}

static void encode_status(cJSON *resp_obj, const struct admission_response *resp)
{
        cJSON *status = cJSON_AddObjectToObject(resp_obj, "status");
        cJSON *details;

        cJSON_AddNumberToObject(status, "code", resp->code ? resp->code : 403);
        cJSON_AddStringToObject(status, "status", "Failure");
        cJSON_AddStringToObject(status, "reason", resp->reason ? resp->reason : "Forbidden");
        cJSON_AddStringToObject(status, "message", resp->message ? resp->message : "denied");
        if (resp->details)
                cJSON_AddItemToObject(status, "details", cJSON_Duplicate(resp->details, true));
        if (resp->causes && cJSON_GetArraySize(resp->causes) > 0) {
                details = cJSON_GetObjectItemCaseSensitive(status, "details");
                if (!details)
                        details = cJSON_AddObjectToObject(status, "details");
                cJSON_AddItemToObject(details, "causes", cJSON_Duplicate(resp->causes, true));
        }
}

static void encode_patch(cJSON *resp_obj, const cJSON *patch)
{
        char *text;
        char *b64;

        if (!patch || cJSON_GetArraySize(patch) == 0)
                return;
        text = cJSON_PrintUnformatted(patch);
        b64 = base64_encode(text, strlen(text));
        cJSON_AddStringToObject(resp_obj, "patchType", "JSONPatch");
        cJSON_AddStringToObject(resp_obj, "patch", b64);
        free(b64);
        cJSON_free(text);
}

int admission_response_encode(const struct admission_request *req,
                              const struct admission_response *resp,
                              char **ret_json)
{
        cJSON *root = cJSON_CreateObject();
        cJSON *r = NULL;
        cJSON *warnings;
        char *text;

        cJSON_AddStringToObject(root, "apiVersion", api_versions[req->version]);
        cJSON_AddStringToObject(root, "kind", "AdmissionReview");
        r = cJSON_AddObjectToObject(root, "response");
        cJSON_AddStringToObject(r, "uid", req->uid);
        cJSON_AddBoolToObject(r, "allowed", resp->allowed);
        if (!resp->allowed)
                encode_status(r, resp);
        else
                encode_patch(r, resp->patch);
        if (resp->n_warnings) {
                warnings = cJSON_AddArrayToObject(r, "warnings");
                for (size_t i = 0; i < resp->n_warnings; i++)
                        cJSON_AddItemToArray(warnings, cJSON_CreateString(resp->warnings[i]));
        }
        text = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
        *ret_json = xstrdup(text);
        cJSON_free(text);
        return CM_OK;
}

void admission_response_release(struct admission_response *resp)
{
        free(resp->reason);
        free(resp->message);
        cJSON_Delete(resp->causes);
        cJSON_Delete(resp->details);
        for (size_t i = 0; i < resp->n_warnings; i++)
                free(resp->warnings[i]);
        cJSON_Delete(resp->patch);
        *resp = (struct admission_response){ 0 };
}

void admission_response_warn(struct admission_response *resp, const char *fmt, ...)
{
        va_list ap;

        if (resp->n_warnings == ADMISSION_WARNINGS_MAX)
                return;
        va_start(ap, fmt);
        resp->warnings[resp->n_warnings++] = xvasprintf(fmt, ap);
        va_end(ap);
}
