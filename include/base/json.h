#pragma once
/*
 * json: small helpers over cJSON used project-wide.
 *
 *  - json_parse(): size-bounded parse that rejects trailing garbage.
 *  - json_array_each(): a top-level array's elements one at a time, as text.
 *  - struct json_path: builds Kubernetes-style field paths ("spec.template.spec.tags[2]").
 *  - struct json_errors: a capped list of "path: message" errors, so a webhook can report
 *    every problem of an object at once.
 *  - struct json_dec + json_get_*(): typed getters that check the JSON type and record a
 *    path-qualified error ("spec.minCPU: expected integer, got string").
 *  - json_set_*(): replace-or-add setters that keep the key's position in the object.
 *
 * Ownership: getters return pointers borrowed from the tree (valid while the tree lives);
 * json_errors owns its strings. Nothing here is shared: every function is reentrant and may
 * be called from any thread on objects that thread owns.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "compiler.h"

#define JSON_PATH_MAX     512
#define JSON_ERRORS_MAX   64
/* Largest integer a JSON number (IEEE double) holds exactly: 2^53 - 1. */
#define JSON_SAFE_INT_MAX 9007199254740991LL

/* "integer" for a number with an integral value, "number" for other numbers, else "string",
 * "object", "array", "boolean", "null"; "missing" for NULL, "invalid" otherwise. */
const char *json_type_name(const cJSON *item);

/* Parses exactly len bytes (no NUL needed). Trailing bytes other than JSON whitespace are
 * an error. *ret (owned by the caller, cJSON_Delete) is written only on success.
 * CM_EPARSE on malformed input. */
MUST_CHECK int json_parse(const char *buf, size_t len, cJSON **ret);

/* Receives one element of a top-level array as text (borrowed, not NUL-terminated, no
 * surrounding whitespace). Nonzero stops json_array_each, which returns it. */
typedef int json_elem_fn(void *arg, const char *elem, size_t len);

/* Walks the top-level array in the len bytes of text and hands each element's text to fn,
 * without building a tree of the whole array: a large list is decoded one element at a
 * time. Only the array's structure is checked here (brackets, strings, commas); each
 * element is for fn to parse (json_parse). CM_EPARSE when text is not one array. */
MUST_CHECK int json_array_each(const char *text, size_t len, json_elem_fn *fn, void *arg);

/* Escapes one JSON Pointer (RFC 6901) segment: '~' -> "~0", '/' -> "~1". Caller frees. */
char *json_pointer_escape(const char *segment);

/*
 * Field paths. Fields are joined with '.', array indices as "[i]". Map keys made only of
 * [A-Za-z0-9_-] render as fields ("metadata.labels.foo"); other keys render in brackets as
 * Kubernetes does ("metadata.labels[cluster.x-k8s.io/cluster-name]"). A path longer than
 * JSON_PATH_MAX - 1 is truncated. Push functions return a mark for json_path_pop().
 */
struct json_path {
        char buf[JSON_PATH_MAX]; /* NUL-terminated */
        size_t len;
};

void json_path_init(struct json_path *p, const char *root); /* root may be NULL or "" */
size_t json_path_push_field(struct json_path *p, const char *name);
size_t json_path_push_key(struct json_path *p, const char *key);
size_t json_path_push_index(struct json_path *p, size_t index);
void json_path_pop(struct json_path *p, size_t mark);
const char *json_path_str(const struct json_path *p);

/* A capped error list. Errors past JSON_ERRORS_MAX are counted in dropped, not stored. */
struct json_error {
        char *path;    /* owned; "" for the whole object */
        char *message; /* owned; without the path */
};

struct json_errors {
        struct json_error items[JSON_ERRORS_MAX];
        size_t n;
        size_t dropped;
};

void json_errors_init(struct json_errors *e);
void json_errors_release(struct json_errors *e);
/* Appends an error (path may be NULL or ""). */
void json_errors_add(struct json_errors *e, const char *path, const char *fmt, ...)
        PRINTF_LIKE(3, 4);
/* "path: message" of item i (just "message" for an empty path). Caller frees. */
char *json_error_text(const struct json_error *err);
/* All errors as "path: message" joined by sep, plus ", and N more errors" when some were
 * dropped. "" when empty. Caller frees. */
char *json_errors_join(const struct json_errors *e, const char *sep);
/* True when some error's text (path: message) equals text exactly. For tests and callers. */
bool json_errors_contains(const struct json_errors *e, const char *text);

/*
 * Decoding context: the path of the object being decoded and where errors go. errs may be
 * NULL (errors are then only counted). failures counts every error recorded through this
 * context, so a decoder knows whether its part failed.
 */
struct json_dec {
        struct json_path path;
        const char *leaf;         /* a scalar member being checked: errors name it below
                                   * path, which it is joined to only then */
        struct json_errors *errs; /* borrowed; may be NULL */
        size_t failures;
};

void json_dec_init(struct json_dec *d, const char *root, struct json_errors *errs);
/* Records an error at the current path. */
void json_dec_fail(struct json_dec *d, const char *fmt, ...) PRINTF_LIKE(2, 3);
/* Records "expected <want>, got <type of item>" at the current path. */
void json_dec_type_error(struct json_dec *d, const char *want, const cJSON *item);

/*
 * Item checkers: item is at the current path of d (d may be NULL). Return 0 and write *ret,
 * or CM_EINVAL after recording an error. Integers must be integral and within
 * +-JSON_SAFE_INT_MAX (never trust cJSON's valueint).
 */
MUST_CHECK int json_as_string(struct json_dec *d, const cJSON *item, const char **ret);
MUST_CHECK int json_as_int64(struct json_dec *d, const cJSON *item, int64_t *ret);
MUST_CHECK int json_as_bool(struct json_dec *d, const cJSON *item, bool *ret);
MUST_CHECK int json_as_object(struct json_dec *d, const cJSON *item);
MUST_CHECK int json_as_array(struct json_dec *d, const cJSON *item);

/*
 * Member getters: look up obj[key] (case-sensitive). 0 and *ret written when present and of
 * the right type; CM_ENOTFOUND when absent or JSON null (Kubernetes treats null as unset);
 * CM_EINVAL when of the wrong type (error recorded at "<path>.<key>"). d may be NULL.
 */
MUST_CHECK int json_get_string(struct json_dec *d,
                               const cJSON *obj,
                               const char *key,
                               const char **ret);
MUST_CHECK int json_get_int64(struct json_dec *d, const cJSON *obj, const char *key, int64_t *ret);
MUST_CHECK int json_get_bool(struct json_dec *d, const cJSON *obj, const char *key, bool *ret);
MUST_CHECK int json_get_object(struct json_dec *d,
                               const cJSON *obj,
                               const char *key,
                               const cJSON **ret);
MUST_CHECK int json_get_array(struct json_dec *d,
                              const cJSON *obj,
                              const char *key,
                              const cJSON **ret);

/* Converts a number item to int64: 0, CM_EINVAL (not a number or not integral) or
 * CM_ETOOBIG (outside +-JSON_SAFE_INT_MAX). Records nothing. */
MUST_CHECK int json_number_to_int64(const cJSON *item, int64_t *ret);

/* RFC 7386 merge patch: applies patch to target (consumed) and returns the result (a patch
 * that is not an object replaces the target; a null member removes the key). */
cJSON *json_merge_patch(cJSON *target, const cJSON *patch);

/*
 * Nested lookups, the one accessor for reading a field deep in a tree. Both return a
 * borrowed item or NULL when any step is missing or of the wrong type.
 *   json_find(obj, "metadata", "annotations", "cluster.x-k8s.io/paused", NULL): keys as
 *     given (a key may hold dots); every step must be an object.
 *   json_at(obj, "status.addresses.1.address"): a dotted path; an all-digit segment
 *     indexes an array. For paths whose keys hold no dot.
 * The _str forms return the string value, or NULL when the item is not a string.
 */
const cJSON *json_find(const cJSON *obj, ...);

/* cJSON_GetObjectItemCaseSensitive with the first byte compared before strcmp: the member
 * of obj named key (the first of that name; the walk stops at a nameless item, as cJSON's
 * does), or NULL (obj or key NULL, obj not an object). */
cJSON *json_item(const cJSON *obj, const char *key);
const char *json_find_str(const cJSON *obj, ...);
const cJSON *json_at(const cJSON *obj, const char *path);
const char *json_at_str(const cJSON *obj, const char *path);

/*
 * Setters: replace obj[key] in place (keeping its position) or append it. json_set_item
 * takes ownership of item in every case. Abort on OOM (cJSON hooks), so they cannot fail.
 * Beware: cJSON's printer writes integers of 16+ digits with 15 significant digits
 * (9007199254740991 prints as 9.00719925474099e+15); values up to 10^15 print exactly.
 */
void json_set_item(cJSON *obj, const char *key, cJSON *item);
void json_set_string(cJSON *obj, const char *key, const char *value);
void json_set_int64(cJSON *obj, const char *key, int64_t value);
void json_set_bool(cJSON *obj, const char *key, bool value);
/* Returns obj[key] if it is an object, else replaces/adds an empty object and returns it
 * (*ret_created = true when it did; ret_created may be NULL). */
cJSON *json_child_object(cJSON *obj, const char *key, bool *ret_created);
/* Removes obj[key] unless it is JSON null (so "field: null" survives a round trip). */
void json_remove_unless_null(cJSON *obj, const char *key);
