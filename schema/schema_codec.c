/*
 * schema_codec: the generic, table-driven decoder/encoder of schema_priv.h. Each member
 * kind has a {decode, encode, release} triple in kind_ops[]; objects and lists recurse
 * through their schema_type. Decoding never stops at the first error: a member of the
 * wrong type is reported and left absent, and the walk goes on, so the caller gets every
 * error of the object. Encoding edits a copy of the raw JSON in place so unknown members
 * survive; list entries start from the raw entry with the same key.
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "schema_priv.h"
#include "xalloc.h"

#define SCHEMA_INT32_MIN (-2147483647LL - 1)
#define SCHEMA_INT32_MAX 2147483647LL

static void *at(void *base, size_t off)
{
        return (char *)base + off;
}

static const void *cat(const void *base, size_t off)
{
        return (const char *)base + off;
}

/* List items pointers are read and written with memcpy: the element type differs. */
static void *list_items(const void *list)
{
        void *p;

        memcpy(&p, list, sizeof(p));
        return p;
}

static void list_set_items(void *list, void *items)
{
        memcpy(list, &items, sizeof(items));
}

static size_t *list_n(void *list)
{
        return at(list, offsetof(struct schema_list_layout, n));
}

static bool *list_present(void *list)
{
        return at(list, offsetof(struct schema_list_layout, present));
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

static cJSON *strv_to_json(const struct schema_strv *v)
{
        cJSON *arr = cJSON_CreateArray();

        if (!arr)
                abort();
        for (size_t i = 0; i < v->n; i++) {
                if (!cJSON_AddItemToArray(arr, cJSON_CreateString(v->items[i])))
                        abort();
        }
        return arr;
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

static cJSON *strmap_to_json(const struct schema_strmap *m)
{
        cJSON *obj = cJSON_CreateObject();

        if (!obj)
                abort();
        for (size_t i = 0; i < m->n; i++) {
                if (!cJSON_AddStringToObject(obj, m->items[i].key, m->items[i].value))
                        abort();
        }
        return obj;
}

/* ---- per-kind decode ---- */

static void dec_string(struct json_dec *d,
                       const cJSON *obj,
                       const struct schema_field *f,
                       void *dst)
{
        const char *s;

        if (json_get_string(d, obj, f->json, &s) == CM_OK)
                *(char **)at(dst, f->off) = xstrdup(s);
}

static void dec_int(struct json_dec *d, const cJSON *obj, const struct schema_field *f, void *dst)
{
        int64_t v;
        size_t mark;

        if (json_get_int64(d, obj, f->json, &v) != CM_OK)
                return;
        if (f->kind == SK_INT32 && (v < SCHEMA_INT32_MIN || v > SCHEMA_INT32_MAX)) {
                mark = json_path_push_field(&d->path, f->json);
                json_dec_fail(d, "integer out of range (must be between %lld and %lld)",
                              SCHEMA_INT32_MIN, SCHEMA_INT32_MAX);
                json_path_pop(&d->path, mark);
                return;
        }
        *(int64_t *)at(dst, f->off) = v;
        *(bool *)at(dst, f->has_off) = true;
}

static void dec_bool(struct json_dec *d, const cJSON *obj, const struct schema_field *f, void *dst)
{
        bool v;

        if (json_get_bool(d, obj, f->json, &v) != CM_OK)
                return;
        *(bool *)at(dst, f->off) = v;
        *(bool *)at(dst, f->has_off) = true;
}

static void dec_strv(struct json_dec *d, const cJSON *obj, const struct schema_field *f, void *dst)
{
        const cJSON *arr;
        size_t mark;

        if (json_get_array(d, obj, f->json, &arr) != CM_OK)
                return;
        mark = json_path_push_field(&d->path, f->json);
        strv_decode(d, arr, at(dst, f->off));
        json_path_pop(&d->path, mark);
}

static void dec_strmap(struct json_dec *d,
                       const cJSON *obj,
                       const struct schema_field *f,
                       void *dst)
{
        const cJSON *m;
        size_t mark;

        if (json_get_object(d, obj, f->json, &m) != CM_OK)
                return;
        mark = json_path_push_field(&d->path, f->json);
        strmap_decode(d, m, at(dst, f->off));
        json_path_pop(&d->path, mark);
}

static void dec_object(struct json_dec *d,
                       const cJSON *obj,
                       const struct schema_field *f,
                       void *dst)
{
        const cJSON *sub;
        void *p;
        size_t mark;

        if (json_get_object(d, obj, f->json, &sub) != CM_OK)
                return;
        p = xcalloc(1, f->type->size);
        mark = json_path_push_field(&d->path, f->json);
        schema_type_decode(d, sub, f->type, p);
        json_path_pop(&d->path, mark);
        *(void **)at(dst, f->off) = p;
}

static void dec_list(struct json_dec *d, const cJSON *obj, const struct schema_field *f, void *dst)
{
        const struct schema_type *t = f->type;
        void *list = at(dst, f->off);
        const cJSON *arr;
        const cJSON *it;
        char *items;
        size_t i = 0;
        size_t mark;

        if (json_get_array(d, obj, f->json, &arr) != CM_OK)
                return;
        items = xcalloc((size_t)cJSON_GetArraySize(arr) + 1, t->size);
        mark = json_path_push_field(&d->path, f->json);
        cJSON_ArrayForEach (it, arr) {
                size_t m2 = json_path_push_index(&d->path, i++);

                if (json_as_object(d, it) == CM_OK)
                        schema_type_decode(d, it, t, items + t->size * (*list_n(list))++);
                json_path_pop(&d->path, m2);
        }
        json_path_pop(&d->path, mark);
        list_set_items(list, items);
        *list_present(list) = true;
}

/* ---- per-kind encode ---- */

static void enc_string(cJSON *obj, const struct schema_field *f, const void *src)
{
        const char *s = *(char *const *)cat(src, f->off);

        if (s)
                json_set_string(obj, f->json, s);
        else
                json_remove_unless_null(obj, f->json);
}

static void enc_int(cJSON *obj, const struct schema_field *f, const void *src)
{
        if (*(const bool *)cat(src, f->has_off))
                json_set_int64(obj, f->json, *(const int64_t *)cat(src, f->off));
        else
                json_remove_unless_null(obj, f->json);
}

static void enc_bool(cJSON *obj, const struct schema_field *f, const void *src)
{
        if (*(const bool *)cat(src, f->has_off))
                json_set_bool(obj, f->json, *(const bool *)cat(src, f->off));
        else
                json_remove_unless_null(obj, f->json);
}

static void enc_strv(cJSON *obj, const struct schema_field *f, const void *src)
{
        const struct schema_strv *v = cat(src, f->off);

        if (v->present)
                json_set_item(obj, f->json, strv_to_json(v));
        else
                json_remove_unless_null(obj, f->json);
}

static void enc_strmap(cJSON *obj, const struct schema_field *f, const void *src)
{
        const struct schema_strmap *m = cat(src, f->off);

        if (m->present)
                json_set_item(obj, f->json, strmap_to_json(m));
        else
                json_remove_unless_null(obj, f->json);
}

static void enc_object(cJSON *obj, const struct schema_field *f, const void *src)
{
        const void *p = *(const void *const *)cat(src, f->off);

        if (p)
                schema_type_encode(json_child_object(obj, f->json, NULL), f->type, p);
        else
                json_remove_unless_null(obj, f->json);
}

/* The string value of member `key` of a described element, or NULL. */
static const char *elem_key(const struct schema_type *t, const void *elem)
{
        for (size_t i = 0; i < t->n_fields; i++) {
                if (t->fields[i].kind == SK_STRING && !strcmp(t->fields[i].json, t->list_key))
                        return *(char *const *)cat(elem, t->fields[i].off);
        }
        return NULL;
}

/* The raw entry that elem (the i-th) continues, or NULL. */
static const cJSON *elem_match(const struct schema_type *t,
                               const cJSON *old,
                               size_t i,
                               const void *elem)
{
        const char *key;
        const cJSON *it;

        if (!cJSON_IsArray(old))
                return NULL;
        if (!t->list_key) {
                it = cJSON_GetArrayItem(old, (int)i);
                return cJSON_IsObject(it) ? it : NULL;
        }
        key = elem_key(t, elem);
        cJSON_ArrayForEach (it, old) {
                const cJSON *k = cJSON_GetObjectItemCaseSensitive(it, t->list_key);

                if (key && cJSON_IsObject(it) && cJSON_IsString(k) && !strcmp(k->valuestring, key))
                        return it;
        }
        return NULL;
}

static void enc_list(cJSON *obj, const struct schema_field *f, const void *src)
{
        const void *list = cat(src, f->off);
        const cJSON *old = cJSON_GetObjectItemCaseSensitive(obj, f->json);
        const char *items = list_items(list);
        size_t n = *(const size_t *)cat(list, offsetof(struct schema_list_layout, n));
        cJSON *arr;
        cJSON *e;

        if (!*(const bool *)cat(list, offsetof(struct schema_list_layout, present))) {
                json_remove_unless_null(obj, f->json);
                return;
        }
        arr = cJSON_CreateArray();
        for (size_t i = 0; arr && i < n; i++) {
                const void *elem = items + i * f->type->size;
                const cJSON *match = elem_match(f->type, old, i, elem);

                e = match ? cJSON_Duplicate(match, true) : cJSON_CreateObject();
                if (!e || !cJSON_AddItemToArray(arr, e))
                        abort();
                schema_type_encode(e, f->type, elem);
        }
        if (!arr)
                abort();
        json_set_item(obj, f->json, arr);
}

/* ---- per-kind release ---- */

static void rel_string(const struct schema_field *f, void *dst)
{
        char **s = at(dst, f->off);

        free(*s);
        *s = NULL;
}

static void rel_scalar(const struct schema_field *f, void *dst)
{
        (void)f;
        (void)dst;
}

static void rel_strv(const struct schema_field *f, void *dst)
{
        schema_strv_release(at(dst, f->off));
}

static void rel_strmap(const struct schema_field *f, void *dst)
{
        schema_strmap_release(at(dst, f->off));
}

static void rel_object(const struct schema_field *f, void *dst)
{
        void **p = at(dst, f->off);

        if (*p)
                schema_type_release(f->type, *p);
        free(*p);
        *p = NULL;
}

static void rel_list(const struct schema_field *f, void *dst)
{
        void *list = at(dst, f->off);
        char *items = list_items(list);

        for (size_t i = 0; i < *list_n(list); i++)
                schema_type_release(f->type, items + i * f->type->size);
        free(items);
        list_set_items(list, NULL);
        *list_n(list) = 0;
        *list_present(list) = false;
}

struct kind_ops {
        void (*decode)(struct json_dec *d,
                       const cJSON *obj,
                       const struct schema_field *f,
                       void *dst);
        void (*encode)(cJSON *obj, const struct schema_field *f, const void *src);
        void (*release)(const struct schema_field *f, void *dst);
};

static const struct kind_ops kind_ops[SK_COUNT] = {
        [SK_STRING] = { dec_string, enc_string, rel_string },
        [SK_INT64] = { dec_int, enc_int, rel_scalar },
        [SK_INT32] = { dec_int, enc_int, rel_scalar },
        [SK_BOOL] = { dec_bool, enc_bool, rel_scalar },
        [SK_STRV] = { dec_strv, enc_strv, rel_strv },
        [SK_STRMAP] = { dec_strmap, enc_strmap, rel_strmap },
        [SK_OBJECT] = { dec_object, enc_object, rel_object },
        [SK_LIST] = { dec_list, enc_list, rel_list },
};

void schema_type_decode(struct json_dec *d,
                        const cJSON *obj,
                        const struct schema_type *t,
                        void *dst)
{
        for (size_t i = 0; i < t->n_fields; i++)
                kind_ops[t->fields[i].kind].decode(d, obj, &t->fields[i], dst);
}

void schema_type_encode(cJSON *obj, const struct schema_type *t, const void *src)
{
        for (size_t i = 0; i < t->n_fields; i++)
                kind_ops[t->fields[i].kind].encode(obj, &t->fields[i], src);
}

void schema_type_release(const struct schema_type *t, void *dst)
{
        for (size_t i = 0; i < t->n_fields; i++)
                kind_ops[t->fields[i].kind].release(&t->fields[i], dst);
}
