#pragma once
/*
 * schema_priv: the table-driven engine behind schema.h, private to server/schema_*.c.
 *
 * A struct type is described by a struct schema_type: its size and one struct schema_field
 * per JSON member (kind, offset of the C member, offset of its has_/present flag). One
 * generic walker decodes, encodes and releases any described type, so adding a CRD field
 * is one table line. Kinds:
 *   SK_STRING  char *                        NULL = absent
 *   SK_INT64   int64_t + bool has_           +-2^53-1
 *   SK_INT32   int64_t + bool has_           int32 range (Go int32 fields)
 *   SK_BOOL    bool + bool has_
 *   SK_STRV    struct schema_strv
 *   SK_STRMAP  struct schema_strmap
 *   SK_OBJECT  pointer to a struct of `type`  NULL = absent
 *   SK_LIST    { T *items; size_t n; bool present; } of elements of `type`; raw entries are
 *              matched by type->list_key (a string member) or by index when NULL.
 *   SK_DROP    no C member: a member an older version wrote that the current shape lacks
 *              (v1beta1 conditions' severity); any value is accepted and encode removes it.
 * Legacy shapes (objects the reference provider v0.7/v0.8 wrote) decode into the current
 * structs, so the next encode writes the current shape:
 *  - SF_LIST_OR_MAP: a list-map that CAPI v1beta1 wrote as a map keyed by list_key
 *    ({"az1": {"controlPlane": true}}) decodes as the list [{"name": "az1", ...}], the
 *    map's members in their order (Go writes them sorted);
 *  - SF_STR_OR: a string the old shape could omit reads as a fixed value when absent
 *    (a v1beta1 condition without reason reads as CAPI's "NoReasonReported").
 * Same ownership and threading rules as schema.h.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "json.h"
#include "schema.h"

enum schema_kind {
        SK_STRING,
        SK_INT64,
        SK_INT32,
        SK_BOOL,
        SK_STRV,
        SK_STRMAP,
        SK_OBJECT,
        SK_LIST,
        SK_DROP,
        SK_COUNT,
};

struct schema_type;

struct schema_field {
        const char *json;
        enum schema_kind kind;
        size_t off;                     /* offset of the C member */
        size_t has_off;                 /* SK_INT64/SK_INT32/SK_BOOL: offset of has_ flag */
        const struct schema_type *type; /* SK_OBJECT: pointee; SK_LIST: element */
        const char *absent;             /* SK_STRING: the value an absent member reads as */
        bool map_form;                  /* SK_LIST: the legacy map form is accepted too */
};

/* Where a type's fields are, by the length of their JSON names: built by the decoder the
 * first time it meets the type (any thread; the first to start builds it, the others walk
 * the fields until it is ready). */
#define SCHEMA_INDEX_FIELDS 32 /* fields indexed; the rest are looked up by name */
#define SCHEMA_INDEX_LEN    32 /* names of this length or longer share the last slot */

struct schema_index {
        _Atomic int state;                     /* 0 not built, 1 being built, 2 ready */
        uint32_t by_len[SCHEMA_INDEX_LEN + 1]; /* bit i: fields[i].json has that length */
};

struct schema_type {
        size_t size;
        const struct schema_field *fields;
        size_t n_fields;
        const char *list_key;       /* as a list element: JSON member that identifies an entry */
        struct schema_index *index; /* mutable, static; see above */
};

/* Generic list layout shared by schema_conditions, schema_addresses, ... */
struct schema_list_layout {
        void *items;
        size_t n;
        bool present;
};

#define SF_STR(j, T, m)                                             \
        {                                                           \
                .json = j, .kind = SK_STRING, .off = offsetof(T, m) \
        }
#define SF_I64(j, T, m)                                             \
        {                                                           \
                .json = j, .kind = SK_INT64, .off = offsetof(T, m), \
                .has_off = offsetof(T, has_##m)                     \
        }
#define SF_I32(j, T, m)                                             \
        {                                                           \
                .json = j, .kind = SK_INT32, .off = offsetof(T, m), \
                .has_off = offsetof(T, has_##m)                     \
        }
#define SF_BOOL(j, T, m)                                                                           \
        {                                                                                          \
                .json = j, .kind = SK_BOOL, .off = offsetof(T, m), .has_off = offsetof(T, has_##m) \
        }
#define SF_STRV(j, T, m)                                          \
        {                                                         \
                .json = j, .kind = SK_STRV, .off = offsetof(T, m) \
        }
#define SF_MAP(j, T, m)                                             \
        {                                                           \
                .json = j, .kind = SK_STRMAP, .off = offsetof(T, m) \
        }
#define SF_OBJ(j, T, m, t)                                                     \
        {                                                                      \
                .json = j, .kind = SK_OBJECT, .off = offsetof(T, m), .type = t \
        }
#define SF_LIST(j, T, m, t)                                                  \
        {                                                                    \
                .json = j, .kind = SK_LIST, .off = offsetof(T, m), .type = t \
        }
#define SF_STR_OR(j, T, m, dflt)                                                    \
        {                                                                           \
                .json = j, .kind = SK_STRING, .off = offsetof(T, m), .absent = dflt \
        }
#define SF_LIST_OR_MAP(j, T, m, t)                                                             \
        {                                                                                      \
                .json = j, .kind = SK_LIST, .off = offsetof(T, m), .type = t, .map_form = true \
        }
#define SF_DROP(j)                         \
        {                                  \
                .json = j, .kind = SK_DROP \
        }

/* Decodes every described member of obj (an object at d's path) into dst. */
void schema_type_decode(struct json_dec *d,
                        const cJSON *obj,
                        const struct schema_type *t,
                        void *dst);
/* Writes every described member of src into obj in place (removing absent ones). */
void schema_type_encode(cJSON *obj, const struct schema_type *t, const void *src);
/* Frees every member of dst and zeroes it. */
void schema_type_release(const struct schema_type *t, void *dst);

/* Types shared between files. */
extern const struct schema_type schema_meta_type;
extern const struct schema_type schema_conditions_elem_type;

/*
 * A top-level kind: metadata, a spec at spec_path (NULL-terminated member names) and an
 * optional status whose struct starts with the common status prefix (present, ready,
 * provisioned), or, with plain_status, only with present (nothing but the described fields
 * is read or written). status_type NULL = the kind has no status.
 */
struct schema_kind_desc {
        const char *kind;
        const char *const *spec_path;
        const struct schema_type *spec_type;
        const struct schema_type *status_type;
        size_t meta_off;
        size_t spec_off;
        size_t status_off;
        size_t raw_off;
        size_t size;
        bool plain_status;
};

enum schema_decode_mode {
        SCHEMA_DECODE_FULL,      /* and a deep copy of obj, so encode keeps unknown fields */
        SCHEMA_DECODE_VIEW,      /* every known field, no copy */
        SCHEMA_DECODE_SPEC_VIEW, /* the header, metadata and spec; status is not looked at */
};

/* Decodes obj into dst (zeroed by the caller) as mode says; on error releases dst and
 * returns CM_EINVAL. */
int schema_kind_decode(const struct schema_kind_desc *k,
                       const cJSON *obj,
                       enum schema_decode_mode mode,
                       void *dst,
                       struct json_errors *reterr);
int schema_kind_encode(const struct schema_kind_desc *k, const void *src, cJSON **ret);
void schema_kind_release(const struct schema_kind_desc *k, void *dst);
