#pragma once
/*
 * json_scan: one pass over JSON text, before any tree is built, that checks it as strictly
 * as Go's encoding/json reads it and counts what a cJSON tree of it would cost.
 *
 * Strict (each a CM_EPARSE naming the place as a field path, "request.operation"):
 *  - RFC 8259 grammar only: no leading zeros, no BOM, whitespace is space, tab, CR, LF;
 *  - a key twice in one object (Go keeps the last, cJSON the first: they would disagree on
 *    what the object says);
 *  - \u0000 and raw control characters in strings (a C string would end there);
 *  - invalid UTF-8: stray continuation bytes, truncated sequences, overlong forms, UTF-16
 *    surrogates (raw or as a lone \ud800-\udfff escape) and code points past U+10FFFF;
 *  - numbers longer than JSON_SCAN_NUMBER_MAX characters (cJSON cannot read them).
 * What json_scan accepts, cJSON parses (tests/fuzz/fuzz_json_scan.c checks it).
 *
 * Counted (stats): values, members, strings and their decoded bytes, nesting depth. Over
 * a limit is CM_ETOOBIG; the message names the figure and the limit ("4194305 JSON
 * values; the limit is 262144"). Values and string bytes are counted to the end, so the
 * figure is the body's; nesting stops the scan at the first level past the limit.
 *
 * Memory: nothing is allocated unless more than JSON_SCAN_KEYS_INLINE object members are
 * open at once (then one table of at most JSON_SCAN_KEYS_MAX entries, freed before return).
 * Reentrant; any thread.
 */

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "compiler.h"
#include "json.h"

/* Nesting the scanner follows at most (its stack is on the caller's stack). */
#define JSON_SCAN_DEPTH_MAX   128
/* Members of the open objects checked for duplicates without allocating. */
#define JSON_SCAN_KEYS_INLINE 512
/* Members of the open objects at once, at most. */
#define JSON_SCAN_KEYS_MAX    65536
/* Longest number (cJSON reads 63 characters of a number and fails on the rest). */
#define JSON_SCAN_NUMBER_MAX  63

struct json_scan_limits {
        size_t max_values;       /* values of any type (members' values included); 0 = none */
        size_t max_string_bytes; /* decoded bytes of every string and key; 0 = none */
        unsigned max_depth;      /* nested objects and arrays; 0 = JSON_SCAN_DEPTH_MAX */
};

struct json_scan_stats {
        size_t values;       /* objects, arrays, strings, numbers, true, false, null */
        size_t members;      /* keys */
        size_t strings;      /* string values and keys */
        size_t string_bytes; /* their decoded bytes */
        unsigned depth;      /* deepest nesting: 0 for a scalar, 1 for {} or [] */
};

enum json_scan_fault {
        JSON_SCAN_NONE,
        JSON_SCAN_SYNTAX,    /* not JSON at all */
        JSON_SCAN_DUPLICATE, /* a key twice in one object */
        JSON_SCAN_NUL,       /* \u0000 in a string or key */
        JSON_SCAN_CONTROL,   /* a raw control character in a string or key */
        JSON_SCAN_UTF8,      /* invalid UTF-8, or a lone surrogate escape */
        JSON_SCAN_NUMBER,    /* a number longer than JSON_SCAN_NUMBER_MAX */
        JSON_SCAN_LIMIT,     /* over a limit (CM_ETOOBIG) */
};

struct json_scan_result {
        struct json_scan_stats stats; /* complete unless the scan stopped early */
        enum json_scan_fault fault;
        size_t offset; /* of the error: the byte where it was found */
        /* "request.operation: duplicate key (offset 33)"; for a limit "4194305 JSON
         * values; the limit is 262144" or "JSON nested more than 64 levels deep at
         * spec.a; the limit is 64", to follow "the body has";
         * valid UTF-8 whatever the input (a key's control characters are shown as '?').
         * "" on success. */
        char message[JSON_PATH_MAX + 160];
};

/* Scans the len bytes of text (no NUL needed). lim may be NULL (no limits but the depth).
 * Returns CM_OK, CM_EPARSE (not strict JSON) or CM_ETOOBIG (over a limit); *ret is always
 * written. */
MUST_CHECK int json_scan(const char *text,
                         size_t len,
                         const struct json_scan_limits *lim,
                         struct json_scan_result *ret);

/* A member of an object, handed over once its value has been scanned (and found valid). */
struct json_scan_member {
        unsigned depth;        /* 1 for the root object's members */
        size_t key_off;        /* the key's opening quote (json_scan_key_is) */
        size_t key_len;        /* the key's bytes between its quotes, as written */
        bool key_escaped;      /* the key holds an escape (then compare it decoded) */
        size_t parent_key_off; /* the key of the member this object is the value of;
                                * SIZE_MAX at the root or for an object in an array */
        size_t parent_key_len; /* and its bytes and escape, as for the key */
        bool parent_key_escaped;
        size_t value_off; /* the value is text[value_off, value_end) */
        size_t value_end;
};

typedef void json_scan_member_fn(void *ud, const struct json_scan_member *m);

/* Members of the objects at most depth levels deep go to fn, in the order their values
 * end (an object's members before the member that holds it). Only a scan that succeeds
 * has handed over a complete set. */
struct json_scan_members {
        unsigned depth;
        json_scan_member_fn *fn;
        void *ud;
};

/* json_scan, also handing the members of the top levels to members->fn (a caller can then
 * parse only the members it needs). */
MUST_CHECK int json_scan_members(const char *text,
                                 size_t len,
                                 const struct json_scan_limits *lim,
                                 const struct json_scan_members *members,
                                 struct json_scan_result *ret);

/* True when the key whose opening quote is at key_off (in text json_scan accepted) decodes
 * to name. */
bool json_scan_key_is(const char *text, size_t key_off, const char *name);

/* json_scan_key_is for a key whose raw length and escape the scan reported (a member's):
 * without an escape, a length and first-byte compare, then memcmp. name_len is
 * strlen(name). */
static inline bool json_scan_key_eq(const char *text,
                                    size_t key_off,
                                    size_t key_len,
                                    bool key_escaped,
                                    const char *name,
                                    size_t name_len)
{
        if (key_escaped)
                return json_scan_key_is(text, key_off, name);
        return key_len == name_len && (!name_len || text[key_off + 1] == name[0]) &&
               memcmp(text + key_off + 1, name, name_len) == 0;
}

/* The string whose opening quote is at off (in text json_scan accepted), decoded (malloc'd;
 * it holds no NUL: the scan refused \u0000). */
char *json_scan_string_dup(const char *text, size_t off);

/* The cJSON tree of text[off, end), a value json_scan accepted, built without checking it
 * again: node for node what cJSON_ParseWithLength builds from those bytes (types, keys,
 * strings, numbers as cJSON reads them, order, links). Allocated through cJSON's hooks
 * (the caller frees it with cJSON_Delete); NULL only when an allocation fails or the span
 * is all whitespace. */
cJSON *json_scan_tree(const char *text, size_t off, size_t end);

/* json_scan_string_dup of the string value text[off, end) (its quotes included, a span the
 * scan reported): without an escape, one copy of its bytes. */
char *json_scan_string_value(const char *text, size_t off, size_t end);

/* The same string decoded into out, which has room for end - off - 1 bytes (a decoded
 * string is never longer than its quoted text); returns its length, out NUL-terminated. */
size_t json_scan_string_into(const char *text, size_t off, size_t end, char *out);

/* What cJSON would allocate for a document with these stats, in bytes (an upper-bound
 * estimate: one item per value, one copy of every string and key, glibc's chunk overhead). */
size_t json_scan_tree_bytes(const struct json_scan_stats *st);
