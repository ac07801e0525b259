/*
 * field_errors: rendering of Kubernetes field errors and the NewInvalid denial. Type names
 * and cause reasons follow k8s.io/apimachinery util/validation/field; the aggregate message
 * follows util/errors (one error bare, several in brackets, duplicates once).
 */
#include "field_errors.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "admission.h"
#include "xalloc.h"

struct type_info {
        const char *text;   /* ErrorType.String() */
        const char *reason; /* the StatusCause reason */
        bool show_value;    /* Required, Forbidden and TooLong never show the value */
};

static const struct type_info types[FIELD_ERR_COUNT] = {
        [FIELD_ERR_INVALID] = { "Invalid value", "FieldValueInvalid", true },
        [FIELD_ERR_REQUIRED] = { "Required value", "FieldValueRequired", false },
        [FIELD_ERR_DUPLICATE] = { "Duplicate value", "FieldValueDuplicate", true },
        [FIELD_ERR_NOT_SUPPORTED] = { "Unsupported value", "FieldValueNotSupported", true },
        [FIELD_ERR_FORBIDDEN] = { "Forbidden", "FieldValueForbidden", false },
        [FIELD_ERR_TOO_LONG] = { "Too long", "FieldValueTooLong", false },
        [FIELD_ERR_TYPE_INVALID] = { "Invalid value", "FieldValueTypeInvalid", true },
        [FIELD_ERR_TOO_MANY] = { "Too many", "FieldValueTooMany", true },
};

/* Only n and dropped: the items past n are never read (two lists per review, 2 KiB each,
 * were zeroed twice per request). */
void field_errors_init(struct field_errors *fe)
{
        fe->n = 0;
        fe->dropped = 0;
}

static void field_error_release(struct field_error *e)
{
        free(e->field);
        free(e->value);
        free(e->detail);
        memset(e, 0, sizeof(*e));
}

void field_errors_release(struct field_errors *fe)
{
        for (size_t i = 0; i < fe->n; i++)
                field_error_release(&fe->items[i]);
        field_errors_init(fe);
}

static void field_errors_vadd(struct field_errors *fe,
                              enum field_error_type type,
                              const char *field,
                              char *value,
                              const char *fmt,
                              va_list ap) PRINTF_LIKE(5, 0);

/* Takes ownership of value. */
static void field_errors_vadd(struct field_errors *fe,
                              enum field_error_type type,
                              const char *field,
                              char *value,
                              const char *fmt,
                              va_list ap)
{
        struct field_error *e;

        if (fe->n == FIELD_ERRORS_MAX) {
                fe->dropped++;
                free(value);
                return;
        }
        e = &fe->items[fe->n++];
        e->type = type;
        e->field = xstrdup(field);
        e->value = value;
        e->detail = fmt ? xvasprintf(fmt, ap) : xstrdup("");
}

void field_errors_add(struct field_errors *fe,
                      enum field_error_type type,
                      const char *field,
                      const char *value,
                      const char *fmt,
                      ...)
{
        va_list ap;

        va_start(ap, fmt);
        field_errors_vadd(fe, type, field, value ? xstrdup(value) : NULL, fmt, ap);
        va_end(ap);
}

void field_invalid_str(
        struct field_errors *fe, const char *field, const char *value, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        field_errors_vadd(fe, FIELD_ERR_INVALID, field, field_quote(value), fmt, ap);
        va_end(ap);
}

void field_invalid_int(
        struct field_errors *fe, const char *field, int64_t value, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        field_errors_vadd(fe, FIELD_ERR_INVALID, field, xasprintf("%" PRId64, value), fmt, ap);
        va_end(ap);
}

void field_required(struct field_errors *fe, const char *field)
{
        field_errors_add(fe, FIELD_ERR_REQUIRED, field, NULL, NULL);
}

static size_t quote_char(unsigned char c, char *out)
{
        static const char esc_from[] = "\a\b\f\n\r\t\v\"\\";
        static const char esc_to[] = "abfnrtv\"\\";
        const char *hit = c ? strchr(esc_from, c) : NULL;

        if (hit) {
                out[0] = '\\';
                out[1] = esc_to[hit - esc_from];
                return 2;
        }
        if (c < 0x20 || c == 0x7f)
                return (size_t)snprintf(out, 5, "\\x%02x", c);
        out[0] = (char)c;
        return 1;
}

char *field_quote(const char *s)
{
        size_t len = strlen(s);
        char *out = xmalloc(len * 4 + 3);
        size_t n = 0;

        out[n++] = '"';
        for (size_t i = 0; i < len; i++)
                n += quote_char((unsigned char)s[i], out + n);
        out[n++] = '"';
        out[n] = '\0';
        return out;
}

char *field_error_body(const struct field_error *e)
{
        const struct type_info *t = &types[e->type];
        bool value = t->show_value && e->value;
        bool detail = e->detail && e->detail[0];

        return xasprintf("%s%s%s%s%s", t->text, value ? ": " : "", value ? e->value : "",
                         detail ? ": " : "", detail ? e->detail : "");
}

char *field_error_text(const struct field_error *e)
{
        char *body = field_error_body(e);
        char *text = xasprintf("%s: %s", e->field, body);

        free(body);
        return text;
}

bool field_errors_contains(const struct field_errors *fe, const char *text)
{
        bool found = false;

        for (size_t i = 0; i < fe->n && !found; i++) {
                char *t = field_error_text(&fe->items[i]);

                found = strcmp(t, text) == 0;
                free(t);
        }
        return found;
}

void field_errors_subtract(struct field_errors *fe, const struct field_errors *old)
{
        size_t kept = 0;

        for (size_t i = 0; i < fe->n; i++) {
                char *t = field_error_text(&fe->items[i]);

                if (field_errors_contains(old, t))
                        field_error_release(&fe->items[i]);
                else
                        fe->items[kept++] = fe->items[i];
                free(t);
        }
        for (size_t i = kept; i < fe->n; i++)
                memset(&fe->items[i], 0, sizeof(fe->items[i]));
        fe->n = kept;
}

/* The aggregate's text: distinct messages in order, bracketed when more than one. */
static char *aggregate_text(const struct field_errors *fe)
{
        char *out = xstrdup("");
        size_t distinct = 0;

        for (size_t i = 0; i < fe->n; i++) {
                char *t = field_error_text(&fe->items[i]);
                char *next;
                bool seen = false;

                for (size_t j = 0; j < i && !seen; j++) {
                        char *u = field_error_text(&fe->items[j]);

                        seen = strcmp(t, u) == 0;
                        free(u);
                }
                if (!seen) {
                        next = xasprintf("%s%s%s", out, distinct ? ", " : "", t);
                        free(out);
                        out = next;
                        distinct++;
                }
                free(t);
        }
        if (distinct > 1) {
                char *wrapped = xasprintf("[%s]", out);

                free(out);
                out = wrapped;
        }
        return out;
}

static cJSON *causes_json(const struct field_errors *fe)
{
        cJSON *causes = cJSON_CreateArray();

        for (size_t i = 0; i < fe->n; i++) {
                cJSON *c = cJSON_CreateObject();
                char *body = field_error_body(&fe->items[i]);

                cJSON_AddStringToObject(c, "reason", types[fe->items[i].type].reason);
                cJSON_AddStringToObject(c, "message", body);
                cJSON_AddStringToObject(c, "field", fe->items[i].field);
                cJSON_AddItemToArray(causes, c);
                free(body);
        }
        return causes;
}

void field_errors_deny(const struct field_errors *fe,
                       const char *group,
                       const char *kind,
                       const char *name,
                       struct admission_response *resp)
{
        char *agg = aggregate_text(fe);
        char *quoted = field_quote(name);

        resp->allowed = false;
        resp->code = 422;
        free(resp->reason);
        resp->reason = xstrdup("Invalid");
        free(resp->message);
        resp->message = xasprintf("%s.%s %s is invalid: %s", kind, group, quoted, agg);
        cJSON_Delete(resp->details);
        resp->details = cJSON_CreateObject();
        cJSON_AddStringToObject(resp->details, "name", name);
        cJSON_AddStringToObject(resp->details, "group", group);
        cJSON_AddStringToObject(resp->details, "kind", kind);
        cJSON_Delete(resp->causes);
        resp->causes = causes_json(fe);
        free(quoted);
        free(agg);
}
