/*
 * schema_decode: the generic, table-driven decoder of schema_priv.h: JSON in, described C
 * structs out. Objects and lists recurse through their schema_type. Decoding never stops at
 * the first error: a member of the wrong type is reported and left absent, and the walk goes
 * on, so the caller gets every error of the object.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "schema_layout.h"
#include "schema_priv.h"
#include "xalloc.h"

#define SCHEMA_INT32_MIN (-2147483647LL - 1)
#define SCHEMA_INT32_MAX 2147483647LL

/* ---- members found once per object ---- */

/* The json_get_*() of json.h on a member already found (NULL = absent): a null member is
 * absent too, and the member's name is on d's path while its value is checked. */
/* A present member is checked with its key as d's leaf (named by errors, not pushed). */
static bool member_open(struct json_dec *d, const cJSON *item, const char *key)
{
        if (!item || cJSON_IsNull(item))
                return false;
        if (d)
                d->leaf = key;
        return true;
}

static void member_close(struct json_dec *d)
{
        if (d)
                d->leaf = NULL;
}

static int member_string(struct json_dec *d, const cJSON *item, const char *key, const char **ret)
{
        int r;

        if (!member_open(d, item, key))
                return CM_ENOTFOUND;
        r = json_as_string(d, item, ret);
        member_close(d);
        return r;
}

static int member_int64(struct json_dec *d, const cJSON *item, const char *key, int64_t *ret)
{
        int r;

        if (!member_open(d, item, key))
                return CM_ENOTFOUND;
        r = json_as_int64(d, item, ret);
        member_close(d);
        return r;
}

static int member_bool(struct json_dec *d, const cJSON *item, const char *key, bool *ret)
{
        int r;

        if (!member_open(d, item, key))
                return CM_ENOTFOUND;
        r = json_as_bool(d, item, ret);
        member_close(d);
        return r;
}

/* json_as_object (want_object) or json_as_array of a found member. */
static int member_container(struct json_dec *d,
                            const cJSON *item,
                            const char *key,
                            bool want_object)
{
        int r;

        if (!member_open(d, item, key))
                return CM_ENOTFOUND;
        r = want_object ? json_as_object(d, item) : json_as_array(d, item);
        member_close(d);
        return r;
}

static size_t index_slot(size_t len)
{
        return len < SCHEMA_INDEX_LEN ? len : SCHEMA_INDEX_LEN;
}

/* The type's index, built now if no other thread is building it; NULL until it is ready. */
static const struct schema_index *type_index(const struct schema_type *t)
{
        struct schema_index *ix = t->index;
        int unbuilt = 0;
        size_t n = t->n_fields < SCHEMA_INDEX_FIELDS ? t->n_fields : SCHEMA_INDEX_FIELDS;

        if (!ix)
                return NULL;
        if (atomic_load_explicit(&ix->state, memory_order_acquire) == 2)
                return ix;
        if (!atomic_compare_exchange_strong_explicit(&ix->state, &unbuilt, 1, memory_order_acquire,
                                                     memory_order_relaxed))
                return NULL;
        for (size_t i = 0; i < n; i++)
                ix->by_len[index_slot(strlen(t->fields[i].json))] |= 1u << i;
        atomic_store_explicit(&ix->state, 2, memory_order_release);
        return ix;
}

/* found[i] = the member cJSON_GetObjectItemCaseSensitive(obj, t->fields[i].json) returns
 * (the first of that name; the walk stops at a nameless item as it does), for the first
 * SCHEMA_INDEX_FIELDS fields, in one pass over obj instead of one per field: each member
 * is compared only with the fields whose names have its length. */
static void find_members(const cJSON *obj, const struct schema_type *t, const cJSON **found)
{
        size_t n = t->n_fields < SCHEMA_INDEX_FIELDS ? t->n_fields : SCHEMA_INDEX_FIELDS;
        const struct schema_index *ix = type_index(t);
        uint32_t all = n == 32 ? UINT32_MAX : (1u << n) - 1;

        memset(found, 0, n * sizeof(*found));
        for (const cJSON *it = obj ? obj->child : NULL; it && it->string; it = it->next) {
                uint32_t cand = ix ? ix->by_len[index_slot(strlen(it->string))] : all;

                for (; cand; cand &= cand - 1) {
                        int i = __builtin_ctz(cand);
                        const char *name = t->fields[i].json;

                        if (!found[i] && it->string[0] == name[0] && strcmp(it->string, name) == 0)
                                found[i] = it;
                }
        }
}

/* ---- string lists and maps ---- */

static void strv_decode(struct json_dec *d, const cJSON *arr, struct schema_strv *v)
{
        const cJSON *it;
        const char *s;
        size_t i = 0;
        size_t mark;

        v->present = true;
        v->items = xcalloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof(char *));
        cJSON_ArrayForEach (it, arr) {
                mark = json_path_push_index(&d->path, i++);
                if (json_as_string(d, it, &s) == CM_OK)
                        v->items[v->n++] = xstrdup(s);
                json_path_pop(&d->path, mark);
        }
}

static void strmap_decode(struct json_dec *d, const cJSON *obj, struct schema_strmap *m)
{
        const cJSON *it;
        const char *s;
        size_t mark;

        m->present = true;
        m->items = xcalloc((size_t)cJSON_GetArraySize(obj) + 1, sizeof(*m->items));
        cJSON_ArrayForEach (it, obj) {
                if (!it->string)
                        continue;
                mark = json_path_push_key(&d->path, it->string);
                if (json_as_string(d, it, &s) == CM_OK) {
                        m->items[m->n].key = xstrdup(it->string);
                        m->items[m->n].value = xstrdup(s);
                        m->n++;
                }
                json_path_pop(&d->path, mark);
        }
}

/* ---- per-kind decode ---- */

static void dec_string(struct json_dec *d,
                       const cJSON *item,
                       const struct schema_field *f,
                       void *dst)
{
        const char *s;
        int r = member_string(d, item, f->json, &s);

        if (r == CM_OK && !(f->absent && !*s))
                *(char **)schema_at(dst, f->off) = xstrdup(s);
        else if (r != CM_EINVAL && f->absent) /* absent, null or "" */
                *(char **)schema_at(dst, f->off) = xstrdup(f->absent);
}

static void dec_int(struct json_dec *d, const cJSON *item, const struct schema_field *f, void *dst)
{
        int64_t v;
        size_t mark;

        if (member_int64(d, item, f->json, &v) != CM_OK)
                return;
        if (f->kind == SK_INT32 && (v < SCHEMA_INT32_MIN || v > SCHEMA_INT32_MAX)) {
                mark = json_path_push_field(&d->path, f->json);
                json_dec_fail(d, "integer out of range (must be between %lld and %lld)",
                              SCHEMA_INT32_MIN, SCHEMA_INT32_MAX);
                json_path_pop(&d->path, mark);
                return;
        }
        *(int64_t *)schema_at(dst, f->off) = v;
        *(bool *)schema_at(dst, f->has_off) = true;
}

static void dec_bool(struct json_dec *d, const cJSON *item, const struct schema_field *f, void *dst)
{
        bool v;

        if (member_bool(d, item, f->json, &v) != CM_OK)
                return;
        *(bool *)schema_at(dst, f->off) = v;
        *(bool *)schema_at(dst, f->has_off) = true;
}

static void dec_strv(struct json_dec *d, const cJSON *item, const struct schema_field *f, void *dst)
{
        size_t mark;

        if (member_container(d, item, f->json, false) != CM_OK)
                return;
        mark = json_path_push_field(&d->path, f->json);
        strv_decode(d, item, schema_at(dst, f->off));
        json_path_pop(&d->path, mark);
}

static void dec_strmap(struct json_dec *d,
                       const cJSON *item,
                       const struct schema_field *f,
                       void *dst)
{
        size_t mark;

        if (member_container(d, item, f->json, true) != CM_OK)
                return;
        mark = json_path_push_field(&d->path, f->json);
        strmap_decode(d, item, schema_at(dst, f->off));
        json_path_pop(&d->path, mark);
}

static void dec_object(struct json_dec *d,
                       const cJSON *item,
                       const struct schema_field *f,
                       void *dst)
{
        void *p;
        size_t mark;

        if (member_container(d, item, f->json, true) != CM_OK)
                return;
        p = xcalloc(1, f->type->size);
        mark = json_path_push_field(&d->path, f->json);
        schema_type_decode(d, item, f->type, p);
        json_path_pop(&d->path, mark);
        *(void **)schema_at(dst, f->off) = p;
}

/* Sets elem's list_key member (a string) to a copy of key. */
static void set_key(const struct schema_type *t, void *elem, const char *key)
{
        for (size_t i = 0; i < t->n_fields; i++) {
                char **p = schema_at(elem, t->fields[i].off);

                if (t->fields[i].kind != SK_STRING || strcmp(t->fields[i].json, t->list_key) != 0)
                        continue;
                free(*p);
                *p = xstrdup(key);
        }
}

/* The legacy map form of a list-map: each member {key: {rest}} is the entry whose list_key
 * member is key (the rest decoded from its value). */
static void dec_map_form(struct json_dec *d,
                         const cJSON *map,
                         const struct schema_field *f,
                         void *list)
{
        const struct schema_type *t = f->type;
        char *items = xcalloc((size_t)cJSON_GetArraySize(map) + 1, t->size);
        const cJSON *it;

        cJSON_ArrayForEach (it, map) {
                size_t mark = json_path_push_key(&d->path, it->string);
                char *elem = items + t->size * (*schema_list_n(list));

                if (it->string && json_as_object(d, it) == CM_OK) {
                        schema_type_decode(d, it, t, elem);
                        set_key(t, elem, it->string);
                        (*schema_list_n(list))++;
                }
                json_path_pop(&d->path, mark);
        }
        schema_list_set_items(list, items);
        *schema_list_present(list) = true;
}

static void dec_list(struct json_dec *d, const cJSON *item, const struct schema_field *f, void *dst)
{
        const struct schema_type *t = f->type;
        void *list = schema_at(dst, f->off);
        const cJSON *arr = item;
        const cJSON *it;
        char *items;
        size_t i = 0;
        size_t mark;

        if (f->map_form && cJSON_IsObject(arr)) {
                mark = json_path_push_field(&d->path, f->json);
                dec_map_form(d, arr, f, list);
                json_path_pop(&d->path, mark);
                return;
        }
        if (member_container(d, item, f->json, false) != CM_OK)
                return;
        items = xcalloc((size_t)cJSON_GetArraySize(arr) + 1, t->size);
        mark = json_path_push_field(&d->path, f->json);
        cJSON_ArrayForEach (it, arr) {
                size_t m2 = json_path_push_index(&d->path, i++);

                if (json_as_object(d, it) == CM_OK)
                        schema_type_decode(d, it, t, items + t->size * (*schema_list_n(list))++);
                json_path_pop(&d->path, m2);
        }
        json_path_pop(&d->path, mark);
        schema_list_set_items(list, items);
        *schema_list_present(list) = true;
}

/* SK_DROP: whatever an old version wrote there is accepted (encode removes it). */
static void dec_drop(struct json_dec *d, const cJSON *item, const struct schema_field *f, void *dst)
{
        (void)d;
        (void)item;
        (void)f;
        (void)dst;
}

/* item: the field's member of the object being decoded, NULL when it has none. */
typedef void decode_fn(struct json_dec *d,
                       const cJSON *item,
                       const struct schema_field *f,
                       void *dst);

static decode_fn *const decode_ops[SK_COUNT] = {
        [SK_STRING] = dec_string, [SK_INT64] = dec_int, [SK_INT32] = dec_int,
        [SK_BOOL] = dec_bool,     [SK_STRV] = dec_strv, [SK_STRMAP] = dec_strmap,
        [SK_OBJECT] = dec_object, [SK_LIST] = dec_list, [SK_DROP] = dec_drop,
};

void schema_type_decode(struct json_dec *d,
                        const cJSON *obj,
                        const struct schema_type *t,
                        void *dst)
{
        const cJSON *found[SCHEMA_INDEX_FIELDS];

        find_members(obj, t, found);
        for (size_t i = 0; i < t->n_fields; i++) {
                const struct schema_field *f = &t->fields[i];
                const cJSON *item = i < SCHEMA_INDEX_FIELDS
                                            ? found[i]
                                            : cJSON_GetObjectItemCaseSensitive(obj, f->json);

                /* an absent member leaves its field unset, but for a string's default */
                if (item || (f->kind == SK_STRING && f->absent))
                        decode_ops[f->kind](d, item, f, dst);
        }
}
