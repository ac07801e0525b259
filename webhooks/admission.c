/*
 * admission: AdmissionReview decode and encode. The review is scanned once (json_scan: strict
 * JSON, the members' spans); decoding copies the scalar fields out of the text and builds
 * the trees of object and oldObject from their spans (json_scan_tree, no second parse), so
 * the request owns exactly what it keeps.
 */
#include "admission.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "buf.h"
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

enum {
        M_API_VERSION,
        M_KIND,
        M_REQUEST,
        M_UID, /* the first of request's */
        M_OPERATION,
        M_REQUEST_KIND,
        M_NAME,
        M_NAMESPACE,
        M_USER_INFO,
        M_DRY_RUN,
        M_OBJECT,
        M_OLD_OBJECT, /* the last */
        M_KIND_KIND,  /* the sub-members: request.kind.kind */
        M_KIND_GROUP,
        M_USERNAME,
        M_ALL,
};

/* A member's name and its length. */
struct name {
        const char *s;
        size_t n;
};

#define NAME(lit) lit, sizeof(lit) - 1 /* a struct name's members, of a string literal */

static const struct name member_names[ADMISSION_MEMBERS] = {
        { NAME("apiVersion") }, { NAME("kind") },   { NAME("request") }, { NAME("uid") },
        { NAME("operation") },  { NAME("kind") },   { NAME("name") },    { NAME("namespace") },
        { NAME("userInfo") },   { NAME("dryRun") }, { NAME("object") },  { NAME("oldObject") },
};

/* Members of request.kind and request.userInfo: the object they are in, their name. */
static const struct name sub_parents[ADMISSION_SUBMEMBERS] = { { NAME("kind") },
                                                               { NAME("kind") },
                                                               { NAME("userInfo") } };
static const struct name sub_names[ADMISSION_SUBMEMBERS] = { { NAME("kind") },
                                                             { NAME("group") },
                                                             { NAME("username") } };

struct finder {
        const char *text;
        struct admission_scan *scan;
        size_t request_key; /* key_off of the root's "request" member, once seen */
        size_t other_key;   /* key_off of the last root member known not to be it */
        size_t sub_key;     /* key_off of the last member holding depth-3 members */
        int sub_first;      /* and which sub_names its key allows: [sub_first, sub_end) */
        int sub_end;

        struct {
                size_t parent; /* key_off of the member whose object holds it */
                size_t off, end;
        } cand[ADMISSION_SUBMEMBERS]; /* the last seen: request's, once its member ends */
};

/* Whether m's key is name. */
static bool key_is(const char *text, const struct json_scan_member *m, const struct name *name)
{
        return json_scan_key_eq(text, m->key_off, m->key_len, m->key_escaped, name->s, name->n);
}

/* Whether the key of the member holding m's object is name. */
static bool parent_is(const char *text, const struct json_scan_member *m, const struct name *name)
{
        return json_scan_key_eq(text, m->parent_key_off, m->parent_key_len, m->parent_key_escaped,
                                name->s, name->n);
}

/* Is the root member holding m's object "request"? (asked once per member of it) */
static bool is_request(struct finder *f, const struct json_scan_member *m)
{
        if (m->parent_key_off == f->request_key)
                return true;
        if (m->parent_key_off == f->other_key)
                return false;
        if (parent_is(f->text, m, &member_names[M_REQUEST])) {
                f->request_key = m->parent_key_off;
                return true;
        }
        f->other_key = m->parent_key_off;
        return false;
}

/* The sub_names a member whose object is held by m's parent may be: decided once per
 * holding member (its members come one after the other), from its key. */
static void sub_range(struct finder *f, const struct json_scan_member *m)
{
        int i = 0;

        if (m->parent_key_off == f->sub_key)
                return;
        f->sub_key = m->parent_key_off;
        while (i < ADMISSION_SUBMEMBERS && !parent_is(f->text, m, &sub_parents[i]))
                i++;
        f->sub_first = i;
        while (i < ADMISSION_SUBMEMBERS && parent_is(f->text, m, &sub_parents[i]))
                i++;
        f->sub_end = i;
}

/* A member three levels down: a candidate for request.kind's or request.userInfo's, kept
 * until the member holding its object ends (members end before the one holding them). */
static void find_sub_member(struct finder *f, const struct json_scan_member *m)
{
        if (m->parent_key_off == SIZE_MAX)
                return;
        sub_range(f, m);
        for (int i = f->sub_first; i < f->sub_end; i++) {
                if (!key_is(f->text, m, &sub_names[i]))
                        continue;
                f->cand[i].parent = m->parent_key_off;
                f->cand[i].off = m->value_off;
                f->cand[i].end = m->value_end;
                return;
        }
}

/* request's member i just ended at key_off: its own sub-members are the candidates. */
static void settle_sub_members(struct finder *f, int i, size_t key_off)
{
        for (int j = 0; j < ADMISSION_SUBMEMBERS; j++) {
                if (strcmp(sub_parents[j].s, member_names[i].s) != 0 ||
                    f->cand[j].parent != key_off)
                        continue;
                f->scan->sub[j].off = f->cand[j].off;
                f->scan->sub[j].end = f->cand[j].end;
        }
}

/* by_len[depth - 1][n]: the members of that depth whose name has n bytes (a bit each). */
#define NAME_LEN_MAX 16

static uint32_t by_len[2][NAME_LEN_MAX + 1];
static pthread_once_t by_len_once = PTHREAD_ONCE_INIT;

static void by_len_init(void)
{
        for (int i = 0; i < ADMISSION_MEMBERS; i++) {
                if (member_names[i].n > NAME_LEN_MAX)
                        abort(); /* a name the table cannot hold: raise NAME_LEN_MAX */
                by_len[i >= M_UID][member_names[i].n] |= 1u << i;
        }
}

/* The members a key may be: those of its depth, or only those of its length when it holds
 * no escape. */
static uint32_t candidates(const struct json_scan_member *m)
{
        uint32_t all = m->depth == 1 ? (1u << M_UID) - 1
                                     : ((1u << ADMISSION_MEMBERS) - 1) ^ ((1u << M_UID) - 1);

        if (m->key_escaped)
                return all;
        return m->key_len <= NAME_LEN_MAX ? by_len[m->depth - 1][m->key_len] : 0;
}

static void find_member(void *ud, const struct json_scan_member *m)
{
        struct finder *f = ud;
        uint32_t cand;

        if (m->depth == 3) {
                find_sub_member(f, m);
                return;
        }
        if (m->depth == 2 && !is_request(f, m))
                return;
        for (cand = candidates(m); cand; cand &= cand - 1) {
                int i = __builtin_ctz(cand);

                if (!key_is(f->text, m, &member_names[i]))
                        continue;
                f->scan->member[i].off = m->value_off;
                f->scan->member[i].end = m->value_end;
                if (i == M_REQUEST_KIND || i == M_USER_INFO)
                        settle_sub_members(f, i, m->key_off);
                return;
        }
}

/* A value json_scan accepted: text[at.off, at.end); at.end 0 = absent. */
struct value {
        const char *text;

        struct {
                size_t off, end;
        } at;
};

static char first_byte(const struct value *v)
{
        return v->at.end ? v->text[v->at.off] : '\0';
}

/* Absent or null (Kubernetes treats null as unset). */
static bool unset(const struct value *v)
{
        return !v->at.end || first_byte(v) == 'n';
}

/* json_type_name of the value (a number is parsed to tell an integer). */
static const char *type_of(const struct value *v)
{
        const char *t = "invalid";
        cJSON *item = NULL;

        switch (first_byte(v)) {
        case '\0':
                return "missing";
        case '"':
                return "string";
        case '{':
                return "object";
        case '[':
                return "array";
        case 't':
        case 'f':
                return "boolean";
        case 'n':
                return "null";
        default:
                break;
        }
        if (json_parse(v->text + v->at.off, v->at.end - v->at.off, &item) == 0)
                t = json_type_name(item);
        cJSON_Delete(item);
        return t;
}

/* The review's strings, decoded into one block sized from their spans before any is put:
 * one allocation a review instead of one a string. */
struct strings {
        char *buf;
        size_t len, cap;
};

/* Room for the string values m[i] of the members named in which (quoted text and a NUL
 * each; an absent one takes its default, "" or a literal no longer than its member). */
static void strings_init(struct strings *b, const struct value *m, const int *which, size_t n)
{
        size_t cap = 0;

        for (size_t i = 0; i < n; i++)
                cap += m[which[i]].at.end - m[which[i]].at.off + 1;
        b->cap = cap;
        b->len = 0;
        b->buf = xmalloc(cap ? cap : 1);
}

static char *strings_put(struct strings *b, const struct value *v)
{
        char *out = b->buf + b->len;

        b->len += json_scan_string_into(v->text, v->at.off, v->at.end, out) + 1;
        return out;
}

/* A string member at path, in b: unset gives "", or an error when it is required; present
 * but not a string is an error. */
static int get_str(struct strings *b,
                   const struct value *v,
                   const char *path,
                   bool required,
                   char **ret,
                   char **reterr)
{
        if (unset(v)) {
                if (required) {
                        *reterr = xasprintf("%s: required field missing", path);
                        return CM_EPARSE;
                }
                *ret = b->buf + b->len; /* "": a NUL of the block */
                b->buf[b->len++] = '\0';
                return CM_OK;
        }
        if (first_byte(v) != '"') {
                *reterr = xasprintf("%s: expected string, got %s", path, type_of(v));
                return CM_EPARSE;
        }
        *ret = strings_put(b, v);
        return CM_OK;
}

/* An optional object member, as a tree (built from the scanned text, which is not parsed
 * again); a non-object is an error. */
static int take_object(const struct value *v, const char *key, cJSON **ret, char **reterr)
{
        if (unset(v))
                return CM_OK;
        if (first_byte(v) != '{') {
                *reterr = xasprintf("request.%s: expected object, got %s", key, type_of(v));
                return CM_EPARSE;
        }
        *ret = json_scan_tree(v->text, v->at.off, v->at.end);
        if (!*ret) {
                *reterr = xasprintf("request.%s: out of memory", key);
                return CM_ENOMEM;
        }
        return CM_OK;
}

static int decode_envelope(struct strings *b,
                           const struct value *m,
                           enum admission_version *ret_version,
                           char **reterr)
{
        const char *api;

        if (first_byte(&m[M_KIND]) != '"' ||
            strcmp(strings_put(b, &m[M_KIND]), "AdmissionReview")) {
                *reterr = xstrdup("kind: expected \"AdmissionReview\"");
                return CM_EPARSE;
        }
        if (first_byte(&m[M_API_VERSION]) != '"') {
                *reterr = xstrdup("apiVersion: expected admission.k8s.io/v1 or v1beta1");
                return CM_EPARSE;
        }
        api = strings_put(b, &m[M_API_VERSION]);
        for (size_t i = 0; i < ARRAY_SIZE(api_versions); i++) {
                if (strcmp(api, api_versions[i]) == 0) {
                        *ret_version = (enum admission_version)i;
                        return CM_OK;
                }
        }
        *reterr = xasprintf("apiVersion: unsupported \"%s\" (expected admission.k8s.io/v1 or "
                            "admission.k8s.io/v1beta1)",
                            api);
        return CM_EPARSE;
}

static int decode_operation(struct strings *b,
                            const struct value *m,
                            struct admission_request *req,
                            char **reterr)
{
        char *op = NULL;
        int r = get_str(b, &m[M_OPERATION], "request.operation", true, &op, reterr);

        if (r < 0)
                return r;
        req->op = op_parse(op);
        if (req->op == ADMISSION_OP_INVALID) {
                *reterr = xasprintf("request.operation: unknown operation \"%s\"", op);
                r = CM_EPARSE;
        }
        return r;
}

static int decode_kind(struct strings *b,
                       const struct value *m,
                       struct admission_request *req,
                       char **reterr)
{
        int r;

        if (first_byte(&m[M_REQUEST_KIND]) != '{') {
                *reterr = xasprintf("request.kind: expected object, got %s",
                                    type_of(&m[M_REQUEST_KIND]));
                return CM_EPARSE;
        }
        r = get_str(b, &m[M_KIND_KIND], "request.kind.kind", true, &req->kind, reterr);
        if (r == 0)
                r = get_str(b, &m[M_KIND_GROUP], "request.kind.group", false, &req->group, reterr);
        return r;
}

static int decode_user_and_flags(struct strings *b,
                                 const struct value *m,
                                 struct admission_request *req,
                                 char **reterr)
{
        const struct value *user = &m[M_USER_INFO], *dry = &m[M_DRY_RUN];

        if (!unset(dry) && first_byte(dry) != 't' && first_byte(dry) != 'f') {
                *reterr = xasprintf("request.dryRun: expected boolean, got %s", type_of(dry));
                return CM_EPARSE;
        }
        req->dry_run = first_byte(dry) == 't';
        if (!unset(user) && first_byte(user) != '{') {
                *reterr = xasprintf("request.userInfo: expected object, got %s", type_of(user));
                return CM_EPARSE;
        }
        return get_str(b, &m[M_USERNAME], "request.userInfo.username", false, &req->username,
                       reterr);
}

/* The members whose strings go in the request's block. */
static const int string_members[] = { M_KIND,      M_API_VERSION, M_UID,
                                      M_OPERATION, M_KIND_KIND,   M_KIND_GROUP,
                                      M_NAME,      M_NAMESPACE,   M_USERNAME };

static int decode_request(struct strings *b,
                          const struct value *m,
                          struct admission_request *req,
                          char **reterr)
{
        int r;

        r = get_str(b, &m[M_UID], "request.uid", true, &req->uid, reterr);
        if (r == 0 && !*req->uid) {
                *reterr = xstrdup("request.uid: must not be empty");
                r = CM_EPARSE;
        }
        if (r == 0)
                r = decode_operation(b, m, req, reterr);
        if (r == 0)
                r = decode_kind(b, m, req, reterr);
        if (r == 0)
                r = get_str(b, &m[M_NAME], "request.name", false, &req->name, reterr);
        if (r == 0)
                r = get_str(b, &m[M_NAMESPACE], "request.namespace", false, &req->namespace,
                            reterr);
        if (r == 0)
                r = decode_user_and_flags(b, m, req, reterr);
        if (r == 0)
                r = take_object(&m[M_OBJECT], "object", &req->object, reterr);
        if (r == 0)
                r = take_object(&m[M_OLD_OBJECT], "oldObject", &req->old_object, reterr);
        return r;
}

int admission_request_decode_scanned(const char *body,
                                     const struct admission_scan *scan,
                                     struct admission_request *ret,
                                     char **reterr)
{
        struct admission_request req = { .op = ADMISSION_OP_INVALID };
        struct value m[M_ALL];
        struct strings b;
        int r;

        for (size_t i = 0; i < ADMISSION_MEMBERS; i++)
                m[i] = (struct value){ .text = body,
                                       .at = { scan->member[i].off, scan->member[i].end } };
        for (size_t i = 0; i < ADMISSION_SUBMEMBERS; i++)
                m[M_KIND_KIND + i] = (struct value){ .text = body,
                                                     .at = { scan->sub[i].off, scan->sub[i].end } };
        if (!scan->object) {
                *reterr = xstrdup("body is not a JSON object");
                r = CM_EPARSE;
                goto out;
        }
        strings_init(&b, m, string_members, ARRAY_SIZE(string_members));
        req.strings = b.buf;
        r = decode_envelope(&b, m, &req.version, reterr);
        if (r < 0)
                goto out;
        if (first_byte(&m[M_REQUEST]) != '{') {
                *reterr = xstrdup("request: missing or not an object");
                r = CM_EPARSE;
                goto out;
        }
        r = decode_request(&b, m, &req, reterr);
        if (r < 0)
                goto out;
        *ret = req;
        req = (struct admission_request){ .op = ADMISSION_OP_INVALID };
out:
        admission_request_release(&req);
        return r;
}

/* The first byte of valid JSON text that is not whitespace. */
static char first_token(const char *body, size_t len)
{
        size_t i = 0;

        while (i < len && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n'))
                i++;
        return i < len ? body[i] : '\0';
}

int admission_request_scan(const char *body, size_t len, struct admission_scan *ret, char **reterr)
{
        size_t values = ADMISSION_VALUES_MIN + len / ADMISSION_BYTES_PER_VALUE;
        struct json_scan_limits lim = {
                .max_values = values < ADMISSION_VALUES_MAX ? values : ADMISSION_VALUES_MAX,
                .max_depth = ADMISSION_DEPTH_MAX,
        };
        struct admission_scan scan = { 0 };
        struct finder f = { .text = body,
                            .scan = &scan,
                            .request_key = SIZE_MAX,
                            .other_key = SIZE_MAX,
                            .sub_key = SIZE_MAX };
        struct json_scan_result res;
        int r = pthread_once(&by_len_once, by_len_init);

        if (r != 0)
                abort();
        r = json_scan_members(
                body, len, &lim,
                &(struct json_scan_members){ .depth = 3, .fn = find_member, .ud = &f }, &res);

        if (r == 0) {
                scan.tree_bytes = json_scan_tree_bytes(&res.stats);
                scan.object = first_token(body, len) == '{';
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

void admission_request_release(struct admission_request *req)
{
        free(req->strings);
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

/* Appends s as a JSON string, escaped as cJSON_PrintUnformatted does (the two-character
 * escapes, other control characters as \u00xx, everything else as is). */
static void put_json_string(struct buf *b, const char *s)
{
        static const char hex[] = "0123456789abcdef";
        const char *run = s;

        (void)!buf_append(b, "\"", 1);
        for (;; s++) {
                unsigned char c = (unsigned char)*s;
                char esc[6] = { '\\', 0, '0', '0', 0, 0 };
                size_t n = 2;

                while (c >= 0x20 && c != '"' && c != '\\') /* the plain run, byte by byte */
                        c = (unsigned char)*++s;
                if (!c)
                        break;
                (void)!buf_append(b, run, (size_t)(s - run));
                run = s + 1;
                switch (c) {
                case '"':
                case '\\':
                        esc[1] = (char)c;
                        break;
                case '\b':
                        esc[1] = 'b';
                        break;
                case '\f':
                        esc[1] = 'f';
                        break;
                case '\n':
                        esc[1] = 'n';
                        break;
                case '\r':
                        esc[1] = 'r';
                        break;
                case '\t':
                        esc[1] = 't';
                        break;
                default:
                        esc[1] = 'u';
                        esc[4] = hex[c >> 4];
                        esc[5] = hex[c & 15];
                        n = 6;
                        break;
                }
                (void)!buf_append(b, esc, n);
        }
        (void)!buf_append(b, run, (size_t)(s - run));
        (void)!buf_append(b, "\"", 1);
}

/* Appends a string literal (its length known at compile time). */
#define PUT_LIT(b, lit) (void)!buf_append((b), (lit), sizeof(lit) - 1)

/* An allowed review's response, printed directly: the same bytes cJSON would print for the
 * tree admission_response_encode builds, without building it (the common answer). */
static char *encode_allowed(const struct admission_request *req,
                            const struct admission_response *resp)
{
        struct buf b;
        char *patch = NULL;

        buf_init(&b, SIZE_MAX / 2); /* no cap of its own: the review was capped */
        (void)!buf_reserve(&b, 128 + strlen(req->uid));
        PUT_LIT(&b, "{\"apiVersion\":\"");
        (void)!buf_append_str(&b, api_versions[req->version]);
        PUT_LIT(&b, "\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":");
        put_json_string(&b, req->uid);
        PUT_LIT(&b, ",\"allowed\":true");
        if (resp->patch && cJSON_GetArraySize(resp->patch) > 0) {
                char *text = cJSON_PrintUnformatted(resp->patch);

                patch = base64_encode(text, strlen(text));
                cJSON_free(text);
                PUT_LIT(&b, ",\"patchType\":\"JSONPatch\",\"patch\":");
                put_json_string(&b, patch);
        }
        if (resp->n_warnings) {
                PUT_LIT(&b, ",\"warnings\":[");
                for (size_t i = 0; i < resp->n_warnings; i++) {
                        if (i)
                                (void)!buf_append(&b, ",", 1);
                        put_json_string(&b, resp->warnings[i]);
                }
                (void)!buf_append(&b, "]", 1);
        }
        PUT_LIT(&b, "}}");
        free(patch);
        return buf_take(&b, NULL);
}

int admission_response_encode(const struct admission_request *req,
                              const struct admission_response *resp,
                              char **ret_json)
{
        cJSON *root;
        cJSON *r = NULL;
        cJSON *warnings;
        char *text;

        if (resp->allowed) {
                *ret_json = encode_allowed(req, resp);
                return CM_OK;
        }
        root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "apiVersion", api_versions[req->version]);
        cJSON_AddStringToObject(root, "kind", "AdmissionReview");
        r = cJSON_AddObjectToObject(root, "response");
        cJSON_AddStringToObject(r, "uid", req->uid);
        cJSON_AddBoolToObject(r, "allowed", resp->allowed);
        encode_status(r, resp);
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
