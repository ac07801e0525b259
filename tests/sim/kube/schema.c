/*
 * kube-sim structural schemas for custom objects: pruning of unknown fields (or a strict
 * decoding error / warnings, per fieldValidation), defaulting, and the common validations
 * (type, required, enum, minimum/maximum, minLength/maxLength, pattern, minItems/maxItems),
 * answered with a 422 Invalid Status carrying causes. CEL rules are not evaluated.
 *
 * On UPDATE, validation ratchets as kube-apiserver does since 1.30 (CRDValidationRatcheting):
 * a value equal to the old object's value at the same place is not validated again, so an
 * object stored under an older CRD can still be updated where it did not change. Values are
 * correlated by object member, and list entries by the x-kubernetes-list-map-keys of a
 * list-type map (other lists are not correlated: a changed atomic list is validated whole).
 */
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks.h"
#include "xalloc.h"

struct sctx {
        cJSON *causes;  /* validation failures */
        cJSON *unknown; /* pruned field paths */
};

static char *join(const char *path, const char *key)
{
        return *path ? xasprintf("%s.%s", path, key) : xstrdup(key);
}

static void cause(struct sctx *s, const char *reason, const char *field, const char *fmt, ...)
        PRINTF_LIKE(4, 5);

static void cause(struct sctx *s, const char *reason, const char *field, const char *fmt, ...)
{
        cJSON *c = cJSON_CreateObject();
        va_list ap;

        cJSON_AddStringToObject(c, "reason", reason);
        va_start(ap, fmt);
        ks_add_vfmt(c, "message", fmt, ap);
        va_end(ap);
        cJSON_AddStringToObject(c, "field", field);
        cJSON_AddItemToArray(s->causes, c);
}

static bool flag(const cJSON *schema, const char *name)
{
        return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(schema, name));
}

/* ---- pruning and defaulting ---- */

static void walk(cJSON *v, const cJSON *schema, const char *path, struct sctx *s, int depth);

static void walk_object(cJSON *v, const cJSON *schema, const char *path, struct sctx *s, int depth)
{
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
        const cJSON *addl = cJSON_GetObjectItemCaseSensitive(schema, "additionalProperties");
        const cJSON *p;
        cJSON *it, *next;

        cJSON_ArrayForEach (p, props) {
                const cJSON *def = cJSON_GetObjectItemCaseSensitive(p, "default");

                if (def && !cJSON_GetObjectItemCaseSensitive(v, p->string))
                        cJSON_AddItemToObject(v, p->string, cJSON_Duplicate(def, true));
        }
        for (it = v->child; it; it = next) {
                const cJSON *sub = cJSON_GetObjectItemCaseSensitive(props, it->string);
                char *fp = join(path, it->string);

                next = it->next;
                if (depth == 0 &&
                    (!strcmp(it->string, "apiVersion") || !strcmp(it->string, "kind"))) {
                        free(fp);
                        continue;
                }
                if (!sub && cJSON_IsObject(addl))
                        sub = addl;
                if (sub)
                        walk(it, sub, fp, s, depth + 1);
                else if (!flag(schema, "x-kubernetes-preserve-unknown-fields") &&
                         !cJSON_IsTrue(addl)) {
                        cJSON_AddItemToArray(s->unknown, cJSON_CreateString(fp));
                        cJSON_DeleteItemFromObjectCaseSensitive(v, it->string);
                }
                free(fp);
        }
}

static void walk(cJSON *v, const cJSON *schema, const char *path, struct sctx *s, int depth)
{
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(schema, "items");
        cJSON *it;
        int i = 0;

        if (depth > 64 || !cJSON_IsObject(schema))
                return;
        if (cJSON_IsObject(v) && !flag(schema, "x-kubernetes-embedded-resource"))
                walk_object(v, schema, path, s, depth);
        if (cJSON_IsArray(v) && cJSON_IsObject(items))
                cJSON_ArrayForEach (it, v) {
                        char *fp = xasprintf("%s[%d]", path, i++);

                        walk(it, items, fp, s, depth + 1);
                        free(fp);
                }
}

/* ---- validation ---- */

static bool type_ok(const cJSON *v, const char *type, const cJSON *schema)
{
        if (flag(schema, "x-kubernetes-int-or-string"))
                return cJSON_IsString(v) ||
                       (cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble));
        if (!type)
                return true;
        if (!strcmp(type, "object"))
                return cJSON_IsObject(v);
        if (!strcmp(type, "array"))
                return cJSON_IsArray(v);
        if (!strcmp(type, "string"))
                return cJSON_IsString(v);
        if (!strcmp(type, "boolean"))
                return cJSON_IsBool(v);
        if (!strcmp(type, "number"))
                return cJSON_IsNumber(v);
        if (!strcmp(type, "integer"))
                return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
        return true;
}

static char *show(const cJSON *v)
{
        return cJSON_PrintUnformatted(v);
}

static void check_enum(const cJSON *v, const cJSON *schema, const char *path, struct sctx *s)
{
        const cJSON *en = cJSON_GetObjectItemCaseSensitive(schema, "enum"), *e;
        struct buf b;
        char *val, *list;

        if (!cJSON_IsArray(en))
                return;
        cJSON_ArrayForEach (e, en) {
                if (cJSON_Compare(e, v, true))
                        return;
        }
        buf_init(&b, 64 * 1024);
        cJSON_ArrayForEach (e, en) {
                char *t = show(e);

                if (buf_printf(&b, "%s%s", b.len ? ", " : "", t) < 0) {
                        free(t);
                        break;
                }
                free(t);
        }
        val = show(v);
        list = buf_take(&b, NULL);
        cause(s, "FieldValueNotSupported", path, "Unsupported value: %s: supported values: %s", val,
              list);
        free(val);
        free(list);
}

static void check_number(const cJSON *v, const cJSON *schema, const char *path, struct sctx *s)
{
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(schema, "minimum");
        const cJSON *mx = cJSON_GetObjectItemCaseSensitive(schema, "maximum");
        bool exmin = flag(schema, "exclusiveMinimum"), exmax = flag(schema, "exclusiveMaximum");
        char *val;

        if (!cJSON_IsNumber(v))
                return;
        val = show(v);
        if (cJSON_IsNumber(mn) &&
            (exmin ? v->valuedouble <= mn->valuedouble : v->valuedouble < mn->valuedouble))
                cause(s, "FieldValueInvalid", path,
                      "Invalid value: %s: %s in body should be greater than %s%g", val, path,
                      exmin ? "" : "or equal to ", mn->valuedouble);
        if (cJSON_IsNumber(mx) &&
            (exmax ? v->valuedouble >= mx->valuedouble : v->valuedouble > mx->valuedouble))
                cause(s, "FieldValueInvalid", path,
                      "Invalid value: %s: %s in body should be less than %s%g", val, path,
                      exmax ? "" : "or equal to ", mx->valuedouble);
        free(val);
}

static void check_pattern(const char *str, const char *pat, const char *path, struct sctx *s)
{
        regex_t re;

        if (regcomp(&re, pat, REG_EXTENDED | REG_NOSUB) != 0)
                return;
        if (regexec(&re, str, 0, NULL, 0) != 0)
                cause(s, "FieldValueInvalid", path,
                      "Invalid value: \"%s\": %s in body should "
                      "match '%s'",
                      str, path, pat);
        regfree(&re);
}

static void check_string(const cJSON *v, const cJSON *schema, const char *path, struct sctx *s)
{
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(schema, "minLength");
        const cJSON *mx = cJSON_GetObjectItemCaseSensitive(schema, "maxLength");
        const char *pat = ks_obj_str(schema, "pattern", NULL);
        double len;

        if (!cJSON_IsString(v))
                return;
        len = (double)strlen(v->valuestring);
        if (cJSON_IsNumber(mn) && len < mn->valuedouble)
                cause(s, "FieldValueInvalid", path,
                      "Invalid value: \"%s\": %s in body should be at least %g chars long",
                      v->valuestring, path, mn->valuedouble);
        if (cJSON_IsNumber(mx) && len > mx->valuedouble)
                cause(s, "FieldValueTooLong", path, "Too long: may not be more than %g bytes",
                      mx->valuedouble);
        if (pat)
                check_pattern(v->valuestring, pat, path, s);
}

static void check_array(const cJSON *v, const cJSON *schema, const char *path, struct sctx *s)
{
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(schema, "minItems");
        const cJSON *mx = cJSON_GetObjectItemCaseSensitive(schema, "maxItems");
        double n;

        if (!cJSON_IsArray(v))
                return;
        n = cJSON_GetArraySize(v);
        if (cJSON_IsNumber(mn) && n < mn->valuedouble)
                cause(s, "FieldValueInvalid", path,
                      "Invalid value: %g: %s in body should have at least %g items", n, path,
                      mn->valuedouble);
        if (cJSON_IsNumber(mx) && n > mx->valuedouble)
                cause(s, "FieldValueTooMany", path, "Too many: %g: must have at most %g items", n,
                      mx->valuedouble);
}

static void validate(const cJSON *v,
                     const cJSON *old,
                     const cJSON *schema,
                     const char *path,
                     struct sctx *s,
                     int depth);

/* The entry of the old list that item continues: the one with the same values of the
 * list-map keys, or NULL (also for lists that are not list-type maps). */
static const cJSON *old_entry(const cJSON *item, const cJSON *old, const cJSON *schema)
{
        const cJSON *keys = cJSON_GetObjectItemCaseSensitive(schema, "x-kubernetes-list-map-keys");
        const char *lt = ks_obj_str(schema, "x-kubernetes-list-type", NULL);
        const cJSON *o, *k;

        if (!cJSON_IsArray(old) || !cJSON_IsObject(item) || !lt || strcmp(lt, "map") != 0 ||
            !cJSON_IsArray(keys))
                return NULL;
        cJSON_ArrayForEach (o, old) {
                bool same = cJSON_IsObject(o);

                cJSON_ArrayForEach (k, keys) {
                        const char *key = cJSON_IsString(k) ? k->valuestring : "";

                        same = same &&
                               cJSON_Compare(cJSON_GetObjectItemCaseSensitive(o, key),
                                             cJSON_GetObjectItemCaseSensitive(item, key), true);
                }
                if (same)
                        return o;
        }
        return NULL;
}

static void validate_children(const cJSON *v,
                              const cJSON *old,
                              const cJSON *schema,
                              const char *path,
                              struct sctx *s,
                              int depth)
{
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(schema, "items");
        const cJSON *req = cJSON_GetObjectItemCaseSensitive(schema, "required"), *it;
        int i = 0;

        if (cJSON_IsObject(v)) {
                cJSON_ArrayForEach (it, req) {
                        char *fp = cJSON_IsString(it) ? join(path, it->valuestring) : NULL;

                        if (fp && !cJSON_GetObjectItemCaseSensitive(v, it->valuestring))
                                cause(s, "FieldValueRequired", fp, "Required value");
                        free(fp);
                }
                cJSON_ArrayForEach (it, v) {
                        const cJSON *sub = cJSON_GetObjectItemCaseSensitive(props, it->string);
                        char *fp = join(path, it->string);

                        if (sub && !(depth == 0 && !strcmp(it->string, "metadata")))
                                validate(it,
                                         cJSON_IsObject(old)
                                                 ? cJSON_GetObjectItemCaseSensitive(old, it->string)
                                                 : NULL,
                                         sub, fp, s, depth + 1);
                        free(fp);
                }
        }
        if (cJSON_IsArray(v) && cJSON_IsObject(items))
                cJSON_ArrayForEach (it, v) {
                        char *fp = xasprintf("%s[%d]", path, i++);

                        validate(it, old_entry(it, old, schema), items, fp, s, depth + 1);
                        free(fp);
                }
}

static const char *json_type(const cJSON *v)
{
        if (cJSON_IsString(v))
                return "string";
        if (cJSON_IsNumber(v))
                return v->valuedouble == floor(v->valuedouble) ? "integer" : "number";
        if (cJSON_IsBool(v))
                return "boolean";
        if (cJSON_IsArray(v))
                return "array";
        if (cJSON_IsObject(v))
                return "object";
        return "null";
}

/* old: the value v continues in the old object (NULL on CREATE or when there is none); an
 * unchanged value ratchets. */
static void validate(const cJSON *v,
                     const cJSON *old,
                     const cJSON *schema,
                     const char *path,
                     struct sctx *s,
                     int depth)
{
        const char *type = ks_obj_str(schema, "type", NULL);
        char *val;

        if (depth > 64 || (old && cJSON_Compare(v, old, true)))
                return;
        if (cJSON_IsNull(v) && flag(schema, "nullable"))
                return;
        if (!type_ok(v, type, schema)) {
                val = xasprintf("\"%s\"", json_type(v));
                cause(s, "FieldValueTypeInvalid", path,
                      "Invalid value: %s: %s in body must be of type %s: %s", val, path,
                      type ? type : "integer or string", val);
                free(val);
                return;
        }
        check_enum(v, schema, path, s);
        check_number(v, schema, path, s);
        check_string(v, schema, path, s);
        check_array(v, schema, path, s);
        validate_children(v, old, schema, path, s, depth);
}

/* ---- driver ---- */

static void fail(const struct kres *res, const cJSON *obj, struct sctx *s, struct kresp *resp)
{
        const char *name = ks_obj_str(obj, "metadata", "name");
        cJSON *d = ks_details(res, name ? name : "", true);
        struct buf b;
        const cJSON *c;
        char *msg;
        int n = cJSON_GetArraySize(s->causes);

        buf_init(&b, 256 * 1024);
        cJSON_ArrayForEach (c, s->causes) {
                if (buf_printf(&b, "%s%s: %s", b.len ? ", " : "", ks_obj_str(c, "field", NULL),
                               ks_obj_str(c, "message", NULL)) < 0)
                        break;
        }
        msg = buf_take(&b, NULL);
        cJSON_AddItemToObject(d, "causes", cJSON_Duplicate(s->causes, true));
        kresp_status(resp, 422, "Invalid", d, "%s.%s \"%s\" is invalid: %s%s%s", res->kind,
                     res->group, name ? name : "", n > 1 ? "[" : "", msg, n > 1 ? "]" : "");
        free(msg);
}

static bool unknown_fields(const cJSON *unknown, const char *fv, struct kresp *resp)
{
        const cJSON *u;
        struct buf b;
        char *msg;

        if (cJSON_GetArraySize(unknown) == 0 || (fv && !strcmp(fv, "Ignore")))
                return true;
        if (!fv || strcmp(fv, "Strict") != 0) {
                cJSON_ArrayForEach (u, unknown) {
                        char *w = xasprintf("unknown field \"%s\"", u->valuestring);

                        kresp_warn(resp, w);
                        free(w);
                }
                return true;
        }
        buf_init(&b, 64 * 1024);
        cJSON_ArrayForEach (u, unknown) {
                if (buf_printf(&b, "%sunknown field \"%s\"", b.len ? ", " : "", u->valuestring) < 0)
                        break;
        }
        msg = buf_take(&b, NULL);
        kresp_status(resp, 400, "BadRequest", NULL, "strict decoding error: %s", msg);
        free(msg);
        return false;
}

/* A copy of old (NULL: NULL) pruned and defaulted by the current schema: the old object
 * as kube-apiserver sees it, which prunes what it reads from etcd, so that a member the
 * schema no longer describes does not count as changed. */
static cJSON *pruned(const struct kres *res, const cJSON *old)
{
        struct sctx scratch;
        cJSON *copy, *md;

        if (!old)
                return NULL;
        scratch = (struct sctx){ cJSON_CreateArray(), cJSON_CreateArray() };
        copy = cJSON_Duplicate(old, true);
        md = cJSON_DetachItemFromObjectCaseSensitive(copy, "metadata");
        walk(copy, res->schema, "", &scratch, 0);
        if (md)
                ks_obj_set(copy, "metadata", md);
        cJSON_Delete(scratch.causes);
        cJSON_Delete(scratch.unknown);
        return copy;
}

static bool schema_run(const struct kres *res,
                       cJSON *obj,
                       const cJSON *old,
                       const char *field_validation,
                       bool check,
                       struct kresp *resp)
{
        struct sctx s = { cJSON_CreateArray(), cJSON_CreateArray() };
        cJSON *md, *seen;
        bool ok = true;

        if (!cJSON_IsObject(res->schema))
                goto out;
        md = cJSON_DetachItemFromObjectCaseSensitive(obj, "metadata");
        walk(obj, res->schema, "", &s, 0);
        if (md)
                ks_obj_set(obj, "metadata", md);
        ok = unknown_fields(s.unknown, field_validation, resp);
        if (!ok || !check)
                goto out;
        seen = pruned(res, old);
        validate(obj, seen, res->schema, "", &s, 0);
        cJSON_Delete(seen);
        if (cJSON_GetArraySize(s.causes) > 0) {
                fail(res, obj, &s, resp);
                ok = false;
        }
out:
        cJSON_Delete(s.causes);
        cJSON_Delete(s.unknown);
        return ok;
}

bool schema_apply(const struct kres *res,
                  cJSON *obj,
                  const cJSON *old,
                  const char *field_validation,
                  struct kresp *resp)
{
        return schema_run(res, obj, old, field_validation, true, resp);
}

bool schema_prune_default(const struct kres *res,
                          cJSON *obj,
                          const char *field_validation,
                          struct kresp *resp)
{
        return schema_run(res, obj, NULL, field_validation, false, resp);
}
