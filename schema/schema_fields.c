/*
 * schema_fields: the members of a kind's spec, walked from the type tables (schema.h,
 * schema_spec_fields), so a test can hold every CRD spec field against what acts on it.
 */
#include <stdio.h>
#include <string.h>

#include "schema_priv.h"

static long walk(const struct schema_type *t,
                 const char *prefix,
                 void (*fn)(void *ud, const char *path),
                 void *ud)
{
        long n = 0;

        for (size_t i = 0; i < t->n_fields; i++) {
                const struct schema_field *f = &t->fields[i];
                char path[256];

                if (f->kind == SK_DROP)
                        continue;
                (void)snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", f->json);
                fn(ud, path);
                n++;
                if (f->kind == SK_OBJECT && f->type) {
                        n += walk(f->type, path, fn, ud);
                } else if (f->kind == SK_LIST && f->type) {
                        char elem[260];

                        (void)snprintf(elem, sizeof(elem), "%s[]", path);
                        n += walk(f->type, elem, fn, ud);
                }
        }
        return n;
}

long schema_spec_fields(const char *kind, void (*fn)(void *ud, const char *path), void *ud)
{
        const struct schema_kind_desc *k = schema_codec_find(kind);

        return k ? walk(k->spec_type, "", fn, ud) : -1;
}
