/*
 * json: cJSON helpers (c-style.md 6.10). The getters never read valueint (it saturates) and
 * check that a number is integral and inside the exactly representable range before
 * converting. Paths are built in a fixed buffer on the caller's stack, so decoding an
 * object allocates only for the errors it reports. cJSON allocation failures abort, like
 * xmalloc, so setters have no error path.
 */
#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "xalloc.h"

static cJSON *json_must(cJSON *item)
{
        if (!item)
                abort(); /* out of memory with the default cJSON hooks */
        return item;
}

/* Whether d is a whole number: every double of magnitude 2^52 or more is one; below that a
 * conversion to int64_t drops any fraction (no libm: see CMakeLists.txt, base). */
static bool json_is_integral(double d)
{
        return isfinite(d) && (fabs(d) >= 4503599627370496.0 || (double)(int64_t)d == d);
}

const char *json_type_name(const cJSON *item)
{
        if (!item)
                return "missing";
        if (cJSON_IsString(item))
                return "string";
        if (cJSON_IsNumber(item))
                return json_is_integral(item->valuedouble) ? "integer" : "number";
        if (cJSON_IsObject(item))
                return "object";
        if (cJSON_IsArray(item))
                return "array";
        if (cJSON_IsBool(item))
                return "boolean";
        if (cJSON_IsNull(item))
                return "null";
        return "invalid";
}

static bool json_only_whitespace(const char *p, const char *end)
{
        for (; p < end; p++) {
                if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
                        return false;
        }
        return true;
}

int json_parse(const char *buf, size_t len, cJSON **ret)
{
        const char *end = NULL;
        cJSON *root;

        if (!buf || len == 0)
                return CM_EPARSE;
        root = cJSON_ParseWithLengthOpts(buf, len, &end, false);
        if (!root)
                return CM_EPARSE;
        if (!end || end < buf || end > buf + len || !json_only_whitespace(end, buf + len)) {
                cJSON_Delete(root);
                return CM_EPARSE;
        }
        *ret = root;
        return CM_OK;
}

/* Between tokens cJSON skips every byte up to and including ' ' (control characters too);
 * json_array_each does the same so that it and cJSON agree on where an element starts. */
static bool is_space(char c)
{
        return (unsigned char)c <= ' ';
}

static const char *skip_ws(const char *p, const char *end)
{
        while (p < end && is_space(*p))
                p++;
        return p;
}

/* Just past the closing quote of the string whose opening quote is at p; NULL when it does
 * not close before end. */
static const char *string_end(const char *p, const char *end)
{
        for (p++; p < end; p++) {
                if (*p == '\\') {
                        if (end - p < 2)
                                return NULL;
                        p++;
                } else if (*p == '"') {
                        return p + 1;
                }
        }
        return NULL;
}

/* The ',' or ']' that ends the element starting at p (outside strings and nested brackets);
 * NULL when the structure is broken. Bracket kinds are not matched here: a mismatch is
 * left for the element's own parse. */
static const char *elem_end(const char *p, const char *end)
{
        size_t depth = 0;

        while (p < end) {
                switch (*p) {
                case '"':
                        p = string_end(p, end);
                        if (!p)
                                return NULL;
                        continue;
                case '[':
                case '{':
                        depth++;
                        break;
                case ']':
                case '}':
                        if (depth == 0)
                                return *p == ']' ? p : NULL;
                        depth--;
                        break;
                case ',':
                        if (depth == 0)
                                return p;
                        break;
                default:
                        break;
                }
                p++;
        }
        return NULL;
}

int json_array_each(const char *text, size_t len, json_elem_fn *fn, void *arg)
{
        const char *end = text + len, *p, *e, *last;
        int r;

        if (!text)
                return CM_EPARSE;
        p = skip_ws(text, end);
        if (p == end || *p != '[')
                return CM_EPARSE;
        p = skip_ws(p + 1, end);
        if (p < end && *p == ']')
                return json_only_whitespace(p + 1, end) ? 0 : CM_EPARSE;
        for (;;) {
                e = elem_end(p, end);
                if (!e)
                        return CM_EPARSE;
                last = e;
                while (last > p && is_space(last[-1]))
                        last--;
                if (last == p) /* an empty element: "[,1]", "[1,]" */
                        return CM_EPARSE;
                r = fn(arg, p, (size_t)(last - p));
                if (r)
                        return r;
                if (*e == ']')
                        return json_only_whitespace(e + 1, end) ? 0 : CM_EPARSE;
                p = skip_ws(e + 1, end);
        }
}

char *json_pointer_escape(const char *segment)
{
        size_t n = strlen(segment);
        char *out = xmalloc(2 * n + 1);
        char *o = out;

        for (const char *s = segment; *s; s++) {
                if (*s == '~' || *s == '/') {
                        *o++ = '~';
                        *o++ = *s == '~' ? '0' : '1';
                } else {
                        *o++ = *s;
                }
        }
        *o = '\0';
        return out;
}

/* ---- paths ---- */

void json_path_init(struct json_path *p, const char *root)
{
        p->len = 0;
        p->buf[0] = '\0';
        if (root)
                (void)json_path_push_field(p, root);
}

static void json_path_append(struct json_path *p, const char *s, size_t n)
{
        size_t room = sizeof(p->buf) - 1 - p->len;

        if (n > room)
                n = room;
        memcpy(p->buf + p->len, s, n);
        p->len += n;
        p->buf[p->len] = '\0';
}

size_t json_path_push_field(struct json_path *p, const char *name)
{
        size_t mark = p->len;

        if (p->len > 0 && name[0] != '\0')
                json_path_append(p, ".", 1);
        json_path_append(p, name, strlen(name));
        return mark;
}

static bool json_key_is_plain(const char *key)
{
        if (!key[0])
                return false;
        return strspn(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") ==
               strlen(key);
}

size_t json_path_push_key(struct json_path *p, const char *key)
{
        size_t mark = p->len;

        if (json_key_is_plain(key))
                return json_path_push_field(p, key);
        json_path_append(p, "[", 1);
        json_path_append(p, key, strlen(key));
        json_path_append(p, "]", 1);
        return mark;
}

size_t json_path_push_index(struct json_path *p, size_t index)
{
        char tmp[32];
        size_t mark = p->len, n = sizeof(tmp);

        /* By hand, not snprintf: paths are built for every list item a decode or a rule
         * visits, error or not, and snprintf cost ~770 instructions a call (callgrind). */
        tmp[--n] = ']';
        do {
                tmp[--n] = (char)('0' + index % 10);
                index /= 10;
        } while (index > 0);
        tmp[--n] = '[';
        json_path_append(p, tmp + n, sizeof(tmp) - n);
        return mark;
}

void json_path_pop(struct json_path *p, size_t mark)
{
        if (mark < p->len) {
                p->len = mark;
                p->buf[mark] = '\0';
        }
}

const char *json_path_str(const struct json_path *p)
{
        return p->buf;
}

/* ---- errors ---- */

cJSON *json_item(const cJSON *obj, const char *key)
{
        if (!obj || !key)
                return NULL;
        for (cJSON *it = obj->child; it && it->string; it = it->next)
                if (it->string[0] == key[0] && strcmp(it->string, key) == 0)
                        return it;
        return NULL;
}

/* Only the counts: items past n are never read (json_errors_add writes each before n grows). */
void json_errors_init(struct json_errors *e)
{
        e->n = 0;
        e->dropped = 0;
}

void json_errors_release(struct json_errors *e)
{
        for (size_t i = 0; i < e->n; i++) {
                free(e->items[i].path);
                free(e->items[i].message);
        }
        json_errors_init(e);
}

static void json_errors_vadd(struct json_errors *e, const char *path, const char *fmt, va_list ap)
        PRINTF_LIKE(3, 0);

static void json_errors_vadd(struct json_errors *e, const char *path, const char *fmt, va_list ap)
{
        if (e->n == JSON_ERRORS_MAX) {
                e->dropped++;
                return;
        }
        e->items[e->n].path = xstrdup(path ? path : "");
        e->items[e->n].message = xvasprintf(fmt, ap);
        e->n++;
}

void json_errors_add(struct json_errors *e, const char *path, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        json_errors_vadd(e, path, fmt, ap);
        va_end(ap);
}

char *json_error_text(const struct json_error *err)
{
        if (!err->path[0])
                return xstrdup(err->message);
        return xasprintf("%s: %s", err->path, err->message);
}

char *json_errors_join(const struct json_errors *e, const char *sep)
{
        struct buf b;
        char *text;
        int r = 0;

        buf_init(&b, SIZE_MAX / 2);
        for (size_t i = 0; i < e->n; i++) {
                text = json_error_text(&e->items[i]);
                r |= buf_printf(&b, "%s%s", i ? sep : "", text);
                free(text);
        }
        if (e->dropped)
                r |= buf_printf(&b, ", and %zu more errors", e->dropped);
        (void)r; /* the cap is unreachable; allocation failure aborts */
        return buf_take(&b, NULL);
}

bool json_errors_contains(const struct json_errors *e, const char *text)
{
        bool found = false;
        char *t;

        for (size_t i = 0; i < e->n && !found; i++) {
                t = json_error_text(&e->items[i]);
                found = strcmp(t, text) == 0;
                free(t);
        }
        return found;
}

/* ---- decoding context ---- */

void json_dec_init(struct json_dec *d, const char *root, struct json_errors *errs)
{
        json_path_init(&d->path, root);
        d->leaf = NULL;
        d->errs = errs;
        d->failures = 0;
}

void json_dec_fail(struct json_dec *d, const char *fmt, ...)
{
        va_list ap;
        size_t mark;

        if (!d)
                return;
        d->failures++;
        if (!d->errs)
                return;
        mark = d->leaf ? json_path_push_field(&d->path, d->leaf) : d->path.len;
        va_start(ap, fmt);
        json_errors_vadd(d->errs, d->path.buf, fmt, ap);
        va_end(ap);
        json_path_pop(&d->path, mark);
}

void json_dec_type_error(struct json_dec *d, const char *want, const cJSON *item)
{
        json_dec_fail(d, "expected %s, got %s", want, json_type_name(item));
}

int json_number_to_int64(const cJSON *item, int64_t *ret)
{
        double v;

        if (!cJSON_IsNumber(item) || !json_is_integral(item->valuedouble))
                return CM_EINVAL;
        v = item->valuedouble;
        if (v < -(double)JSON_SAFE_INT_MAX || v > (double)JSON_SAFE_INT_MAX)
                return CM_ETOOBIG;
        *ret = (int64_t)v;
        return CM_OK;
}

int json_as_string(struct json_dec *d, const cJSON *item, const char **ret)
{
        if (!cJSON_IsString(item) || !item->valuestring) {
                json_dec_type_error(d, "string", item);
                return CM_EINVAL;
        }
        *ret = item->valuestring;
        return CM_OK;
}

int json_as_int64(struct json_dec *d, const cJSON *item, int64_t *ret)
{
        int r = json_number_to_int64(item, ret);

        if (r == CM_EINVAL)
                json_dec_type_error(d, "integer", item);
        else if (r == CM_ETOOBIG)
                json_dec_fail(d, "integer out of range (must be between %lld and %lld)",
                              -JSON_SAFE_INT_MAX, JSON_SAFE_INT_MAX);
        return r < 0 ? CM_EINVAL : CM_OK;
}

int json_as_bool(struct json_dec *d, const cJSON *item, bool *ret)
{
        if (!cJSON_IsBool(item)) {
                json_dec_type_error(d, "boolean", item);
                return CM_EINVAL;
        }
        *ret = cJSON_IsTrue(item);
        return CM_OK;
}

int json_as_object(struct json_dec *d, const cJSON *item)
{
        if (!cJSON_IsObject(item)) {
                json_dec_type_error(d, "object", item);
                return CM_EINVAL;
        }
        return CM_OK;
}

int json_as_array(struct json_dec *d, const cJSON *item)
{
        if (!cJSON_IsArray(item)) {
                json_dec_type_error(d, "array", item);
                return CM_EINVAL;
        }
        return CM_OK;
}

/* Looks obj[key] up; NULL when absent or null. When found, key is d's leaf: the errors of
 * the item's check name it. */
static const cJSON *json_member(struct json_dec *d, const cJSON *obj, const char *key)
{
        const cJSON *item = json_item(obj, key);

        if (!item || cJSON_IsNull(item))
                return NULL;
        if (d)
                d->leaf = key;
        return item;
}

static void json_member_done(struct json_dec *d)
{
        if (d)
                d->leaf = NULL;
}

int json_get_string(struct json_dec *d, const cJSON *obj, const char *key, const char **ret)
{
        const cJSON *item = json_member(d, obj, key);
        int r;

        if (!item)
                return CM_ENOTFOUND;
        r = json_as_string(d, item, ret);
        json_member_done(d);
        return r;
}

int json_get_int64(struct json_dec *d, const cJSON *obj, const char *key, int64_t *ret)
{
        const cJSON *item = json_member(d, obj, key);
        int r;

        if (!item)
                return CM_ENOTFOUND;
        r = json_as_int64(d, item, ret);
        json_member_done(d);
        return r;
}

int json_get_bool(struct json_dec *d, const cJSON *obj, const char *key, bool *ret)
{
        const cJSON *item = json_member(d, obj, key);
        int r;

        if (!item)
                return CM_ENOTFOUND;
        r = json_as_bool(d, item, ret);
        json_member_done(d);
        return r;
}

int json_get_object(struct json_dec *d, const cJSON *obj, const char *key, const cJSON **ret)
{
        const cJSON *item = json_member(d, obj, key);
        int r;

        if (!item)
                return CM_ENOTFOUND;
        r = json_as_object(d, item);
        json_member_done(d);
        if (r == CM_OK)
                *ret = item;
        return r;
}

int json_get_array(struct json_dec *d, const cJSON *obj, const char *key, const cJSON **ret)
{
        const cJSON *item = json_member(d, obj, key);
        int r;

        if (!item)
                return CM_ENOTFOUND;
        r = json_as_array(d, item);
        json_member_done(d);
        if (r == CM_OK)
                *ret = item;
        return r;
}

/* ---- setters ---- */

void json_set_item(cJSON *obj, const char *key, cJSON *item)
{
        if (json_item(obj, key)) {
                if (!cJSON_ReplaceItemInObjectCaseSensitive(obj, key, item))
                        abort();
                return;
        }
        if (!cJSON_AddItemToObject(obj, key, item))
                abort();
}

void json_set_string(cJSON *obj, const char *key, const char *value)
{
        json_set_item(obj, key, json_must(cJSON_CreateString(value)));
}

void json_set_int64(cJSON *obj, const char *key, int64_t value)
{
        json_set_item(obj, key, json_must(cJSON_CreateNumber((double)value)));
}

void json_set_bool(cJSON *obj, const char *key, bool value)
{
        json_set_item(obj, key, json_must(cJSON_CreateBool(value)));
}

cJSON *json_child_object(cJSON *obj, const char *key, bool *ret_created)
{
        cJSON *item = json_item(obj, key);
        bool created = false;

        if (!cJSON_IsObject(item)) {
                item = json_must(cJSON_CreateObject());
                json_set_item(obj, key, item);
                created = true;
        }
        if (ret_created)
                *ret_created = created;
        return item;
}

void json_remove_unless_null(cJSON *obj, const char *key)
{
        const cJSON *item = json_item(obj, key);

        if (item && !cJSON_IsNull(item))
                cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
}

/* ---- nested lookups ---- */

static const cJSON *find_va(const cJSON *obj, va_list ap)
{
        const char *key;

        while (obj && (key = va_arg(ap, const char *)) != NULL)
                obj = cJSON_IsObject(obj) ? json_item(obj, key) : NULL;
        return obj;
}

const cJSON *json_find(const cJSON *obj, ...)
{
        const cJSON *it;
        va_list ap;

        va_start(ap, obj);
        it = find_va(obj, ap);
        va_end(ap);
        return it;
}

const char *json_find_str(const cJSON *obj, ...)
{
        const cJSON *it;
        va_list ap;

        va_start(ap, obj);
        it = find_va(obj, ap);
        va_end(ap);
        return cJSON_IsString(it) ? it->valuestring : NULL;
}

/* One step of a dotted path: seg[0..n) names a field of an object or indexes an array. */
static const cJSON *at_step(const cJSON *obj, const char *seg, size_t n)
{
        char key[256];
        size_t i, idx = 0;

        if (n == 0 || n >= sizeof(key))
                return NULL;
        if (cJSON_IsArray(obj)) {
                for (i = 0; i < n; i++) {
                        if (seg[i] < '0' || seg[i] > '9' || idx > 100000000u)
                                return NULL;
                        idx = idx * 10 + (size_t)(seg[i] - '0');
                }
                return cJSON_GetArrayItem(obj, (int)idx);
        }
        if (!cJSON_IsObject(obj))
                return NULL;
        memcpy(key, seg, n);
        key[n] = '\0';
        return json_item(obj, key);
}

const cJSON *json_at(const cJSON *obj, const char *path)
{
        const char *p = path, *dot;

        while (obj && p && *p) {
                dot = strchr(p, '.');
                obj = at_step(obj, p, dot ? (size_t)(dot - p) : strlen(p));
                p = dot ? dot + 1 : NULL;
        }
        return obj;
}

const char *json_at_str(const cJSON *obj, const char *path)
{
        const cJSON *it = json_at(obj, path);

        return cJSON_IsString(it) ? it->valuestring : NULL;
}

/* ---- merge patch ---- */

cJSON *json_merge_patch(cJSON *target, const cJSON *patch)
{
        const cJSON *m;

        if (!cJSON_IsObject(patch)) {
                cJSON_Delete(target);
                return cJSON_Duplicate(patch, true);
        }
        if (!cJSON_IsObject(target)) {
                cJSON_Delete(target);
                target = cJSON_CreateObject();
        }
        cJSON_ArrayForEach (m, patch) {
                cJSON *old = cJSON_DetachItemFromObjectCaseSensitive(target, m->string);

                if (cJSON_IsNull(m)) {
                        cJSON_Delete(old);
                        continue;
                }
                cJSON_AddItemToObject(target, m->string, json_merge_patch(old, m));
        }
        return target;
}
