#pragma once
/*
 * field_errors: Kubernetes field errors (k8s.io/apimachinery util/validation/field) and the
 * denial apierrors.NewInvalid builds from them. Private to the webhooks library.
 *
 * An error renders as "<field>: <Type>[: <value>][: <detail>]", e.g.
 * `spec.minCPU: Invalid value: -1: must be greater than or equal to 0`. A list is capped at
 * FIELD_ERRORS_MAX (later errors are counted, not stored); it owns its strings. A list has
 * one owner thread; the functions are reentrant.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"

struct admission_response;

enum field_error_type {
        FIELD_ERR_INVALID,       /* "Invalid value", FieldValueInvalid */
        FIELD_ERR_REQUIRED,      /* "Required value", FieldValueRequired */
        FIELD_ERR_DUPLICATE,     /* "Duplicate value", FieldValueDuplicate */
        FIELD_ERR_NOT_SUPPORTED, /* "Unsupported value", FieldValueNotSupported */
        FIELD_ERR_FORBIDDEN,     /* "Forbidden", FieldValueForbidden */
        FIELD_ERR_TOO_LONG,      /* "Too long", FieldValueTooLong */
        FIELD_ERR_TYPE_INVALID,  /* "Invalid value", FieldValueTypeInvalid */
        FIELD_ERR_TOO_MANY,      /* "Too many", FieldValueTooMany */
        FIELD_ERR_COUNT,
};

#define FIELD_ERRORS_MAX 64

struct field_error {
        enum field_error_type type;
        char *field;  /* owned; "spec.tags[1]" */
        char *value;  /* owned; rendered bad value ("\"x\"", "-1"), NULL when omitted */
        char *detail; /* owned; may be "" */
};

struct field_errors {
        struct field_error items[FIELD_ERRORS_MAX];
        size_t n;
        size_t dropped;
};

void field_errors_init(struct field_errors *fe);
void field_errors_release(struct field_errors *fe);

/* Appends an error; value is an already rendered value or NULL (omitted). */
void field_errors_add(struct field_errors *fe,
                      enum field_error_type type,
                      const char *field,
                      const char *value,
                      const char *fmt,
                      ...) PRINTF_LIKE(5, 6);
/* Invalid value with a string value (rendered quoted, as Go's %q does). */
void field_invalid_str(struct field_errors *fe,
                       const char *field,
                       const char *value,
                       const char *fmt,
                       ...) PRINTF_LIKE(4, 5);
/* Invalid value with an integer value. */
void field_invalid_int(struct field_errors *fe,
                       const char *field,
                       int64_t value,
                       const char *fmt,
                       ...) PRINTF_LIKE(4, 5);
void field_required(struct field_errors *fe, const char *field);

/* s quoted as Go's %q quotes it. Caller frees. */
char *field_quote(const char *s);
/* "Invalid value: -1: must be ..." (the cause message). Caller frees. */
char *field_error_body(const struct field_error *e);
/* "<field>: <body>". Caller frees. */
char *field_error_text(const struct field_error *e);
/* True when some error's text equals text. */
bool field_errors_contains(const struct field_errors *fe, const char *text);
/* Removes from fe every error whose text also occurs in old (ratcheting: problems the
 * stored object already had are not reported again). */
void field_errors_subtract(struct field_errors *fe, const struct field_errors *old);

/*
 * Fills resp with the denial apierrors.NewInvalid makes: code 422, reason "Invalid",
 * message `<kind>.<group> "<name>" is invalid: <err>` (several errors in "[a, b]",
 * duplicates once), details {group, kind, name, causes[{reason, message, field}]}.
 * fe must not be empty.
 */
void field_errors_deny(const struct field_errors *fe,
                       const char *group,
                       const char *kind,
                       const char *name,
                       struct admission_response *resp);
