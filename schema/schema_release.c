/*
 * schema_release: frees what the decoder (or a caller) put into a described struct, member
 * by member through the same tables, and the string lists and maps every struct holds.
 */
#include <stdlib.h>

#include "schema.h"
#include "schema_layout.h"
#include "schema_priv.h"

/* ---- string lists and maps ---- */

void schema_strv_release(struct schema_strv *v)
{
        for (size_t i = 0; i < v->n; i++)
                free(v->items[i]);
        free(v->items);
        *v = (struct schema_strv){ 0 };
}

void schema_strmap_release(struct schema_strmap *m)
{
        for (size_t i = 0; i < m->n; i++) {
                free(m->items[i].key);
                free(m->items[i].value);
        }
        free(m->items);
        *m = (struct schema_strmap){ 0 };
}

/* ---- per-kind release ---- */

static void rel_string(const struct schema_field *f, void *dst)
{
        char **s = schema_at(dst, f->off);

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
        schema_strv_release(schema_at(dst, f->off));
}

static void rel_strmap(const struct schema_field *f, void *dst)
{
        schema_strmap_release(schema_at(dst, f->off));
}

static void rel_object(const struct schema_field *f, void *dst)
{
        void **p = schema_at(dst, f->off);

        if (*p)
                schema_type_release(f->type, *p);
        free(*p);
        *p = NULL;
}

static void rel_list(const struct schema_field *f, void *dst)
{
        void *list = schema_at(dst, f->off);
        char *items = schema_list_items(list);

        for (size_t i = 0; i < *schema_list_n(list); i++)
                schema_type_release(f->type, items + i * f->type->size);
        free(items);
        schema_list_set_items(list, NULL);
        *schema_list_n(list) = 0;
        *schema_list_present(list) = false;
}

typedef void release_fn(const struct schema_field *f, void *dst);

static release_fn *const release_ops[SK_COUNT] = {
        [SK_STRING] = rel_string, [SK_INT64] = rel_scalar, [SK_INT32] = rel_scalar,
        [SK_BOOL] = rel_scalar,   [SK_STRV] = rel_strv,    [SK_STRMAP] = rel_strmap,
        [SK_OBJECT] = rel_object, [SK_LIST] = rel_list,    [SK_DROP] = rel_scalar,
};

void schema_type_release(const struct schema_type *t, void *dst)
{
        for (size_t i = 0; i < t->n_fields; i++)
                release_ops[t->fields[i].kind](&t->fields[i], dst);
}
