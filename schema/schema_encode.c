/*
 * schema_encode: the generic, table-driven encoder of schema_priv.h: described C structs
 * into JSON. Encoding edits a copy of the raw JSON in place so unknown members survive;
 * list entries start from the raw entry with the same key.
 */
#include <stdlib.h>
#include <string.h>

#include "schema_layout.h"
#include "schema_priv.h"

/* ---- string lists and maps ---- */

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

/* ---- per-kind encode ---- */

static void enc_string(cJSON *obj, const struct schema_field *f, const void *src)
{
        const char *s = *(char *const *)schema_cat(src, f->off);

        if (s)
                json_set_string(obj, f->json, s);
        else
                json_remove_unless_null(obj, f->json);
}

static void enc_int(cJSON *obj, const struct schema_field *f, const void *src)
{
        if (*(const bool *)schema_cat(src, f->has_off))
                json_set_int64(obj, f->json, *(const int64_t *)schema_cat(src, f->off));
        else
                json_remove_unless_null(obj, f->json);
}

static void enc_bool(cJSON *obj, const struct schema_field *f, const void *src)
{
        if (*(const bool *)schema_cat(src, f->has_off))
                json_set_bool(obj, f->json, *(const bool *)schema_cat(src, f->off));
        else
                json_remove_unless_null(obj, f->json);
}

static void enc_strv(cJSON *obj, const struct schema_field *f, const void *src)
{
        const struct schema_strv *v = schema_cat(src, f->off);

        if (v->present)
                json_set_item(obj, f->json, strv_to_json(v));
        else
                json_remove_unless_null(obj, f->json);
}

static void enc_strmap(cJSON *obj, const struct schema_field *f, const void *src)
{
        const struct schema_strmap *m = schema_cat(src, f->off);

        if (m->present)
                json_set_item(obj, f->json, strmap_to_json(m));
        else
                json_remove_unless_null(obj, f->json);
}

static void enc_object(cJSON *obj, const struct schema_field *f, const void *src)
{
        const void *p = *(const void *const *)schema_cat(src, f->off);

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
                        return *(char *const *)schema_cat(elem, t->fields[i].off);
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
        const void *list = schema_cat(src, f->off);
        const cJSON *old = cJSON_GetObjectItemCaseSensitive(obj, f->json);
        const char *items = schema_list_items(list);
        size_t n = *(const size_t *)schema_cat(list, offsetof(struct schema_list_layout, n));
        cJSON *arr;
        cJSON *e;

        if (!*(const bool *)schema_cat(list, offsetof(struct schema_list_layout, present))) {
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

static void enc_drop(cJSON *obj, const struct schema_field *f, const void *src)
{
        (void)src;
        cJSON_DeleteItemFromObjectCaseSensitive(obj, f->json);
}

typedef void encode_fn(cJSON *obj, const struct schema_field *f, const void *src);

static encode_fn *const encode_ops[SK_COUNT] = {
        [SK_STRING] = enc_string, [SK_INT64] = enc_int, [SK_INT32] = enc_int,
        [SK_BOOL] = enc_bool,     [SK_STRV] = enc_strv, [SK_STRMAP] = enc_strmap,
        [SK_OBJECT] = enc_object, [SK_LIST] = enc_list, [SK_DROP] = enc_drop,
};

void schema_type_encode(cJSON *obj, const struct schema_type *t, const void *src)
{
        for (size_t i = 0; i < t->n_fields; i++)
                encode_ops[t->fields[i].kind](obj, &t->fields[i], src);
}
