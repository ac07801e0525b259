/*
 * validate_rules: the value rules. MAAS names follow MAAS's own model validators (letters,
 * digits, '-' and '_'); DNS names and ports follow Kubernetes' messages (apimachinery
 * util/validation) so the denials read like the API server's own.
 */
#include "validate_rules.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "field_errors.h"
#include "json.h"
#include "schema.h"
#include "xalloc.h"

#define LOWER_ALNUM "abcdefghijklmnopqrstuvwxyz0123456789"

#define DNS1123_MSG                                                                           \
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, " \
        "'-' or '.', and must start and end with an alphanumeric character (e.g. "            \
        "'example.com', regex used for validation is "                                        \
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"

/* Sorted; the list printed in the unknown-osystem message. */
static const char *const osystems[] = {
        "caringo", "centos", "custom", "esxi",        "ol",
        "rhel",    "suse",   "ubuntu", "ubuntu-core", "windows",
};

#define OSYSTEM_LIST "caringo, centos, custom, esxi, ol, rhel, suse, ubuntu, ubuntu-core, windows"

/* Whether the n bytes at osystem name a known operating system. */
static bool osystem_known(const char *osystem, size_t n)
{
        for (size_t i = 0; i < ARRAY_SIZE(osystems); i++)
                if (strncmp(osystem, osystems[i], n) == 0 && osystems[i][n] == '\0')
                        return true;
        return false;
}

bool rule_osystem_known(const char *osystem)
{
        return osystem_known(osystem, strlen(osystem));
}

static bool is_alnum(unsigned char c)
{
        return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
}

/* Whether s holds only ASCII letters, digits and bytes of extra (a few punctuation marks). */
static bool only_alnum_and(const char *s, const char *extra)
{
        for (; *s; s++)
                if (!is_alnum((unsigned char)*s) && !strchr(extra, *s))
                        return false;
        return true;
}

/* The shape problem of an image, or NULL. */
static const char *image_shape_error(const char *image)
{
        const char *slash = strchr(image, '/');
        size_t len = strlen(image);

        if (image[0] == '/')
                return "must not start with '/'";
        if (image[len - 1] == '/')
                return "must not end with '/'";
        if (slash && strchr(slash + 1, '/'))
                return "must contain at most one '/' (<osystem>/<release> or a bare <release>)";
        if (!only_alnum_and(image, "._-/"))
                return "must contain only letters, digits, '.', '-', '_' and one '/'";
        return NULL;
}

void rule_image(struct field_errors *fe, const char *field, const char *image)
{
        const char *shape;
        const char *slash;
        char *os = NULL;
        char *series = NULL;
        char *q;

        if (!image || !image[0]) {
                field_required(fe, field);
                return;
        }
        if (strlen(image) > RULE_IMAGE_MAX) {
                field_errors_add(fe, FIELD_ERR_TOO_LONG, field, NULL,
                                 "may not be more than %d bytes", RULE_IMAGE_MAX);
                return;
        }
        shape = image_shape_error(image);
        if (shape) {
                field_invalid_str(fe, field, image, "%s", shape);
                return;
        }
        slash = strchr(image, '/');
        if (!slash || osystem_known(image, (size_t)(slash - image)))
                return; /* a bare release is a custom image */
        schema_image_split(image, &os, &series);
        q = field_quote(os);
        field_invalid_str(fe, field, image, "unknown operating system %s (known: %s)", q,
                          OSYSTEM_LIST);
        free(q);
        free(os);
        free(series);
}

void rule_range(struct field_errors *fe,
                const char *field,
                bool present,
                int64_t v,
                const struct rule_bounds *b)
{
        if (!present) {
                if (b->required)
                        field_required(fe, field);
                return;
        }
        if (v < b->min)
                field_invalid_int(fe, field, v, "must be greater than or equal to %lld",
                                  (long long)b->min);
        else if (v > b->max)
                field_invalid_int(fe, field, v, "must be less than or equal to %lld",
                                  (long long)b->max);
}

void rule_maas_name(struct field_errors *fe, const char *field, const char *s)
{
        if (!s)
                return;
        if (!s[0])
                field_invalid_str(fe, field, s, "must not be empty");
        else if (strlen(s) > RULE_MAAS_NAME_MAX)
                field_errors_add(fe, FIELD_ERR_TOO_LONG, field, NULL,
                                 "may not be more than %d bytes", RULE_MAAS_NAME_MAX);
        else if (!only_alnum_and(s, "-_"))
                field_invalid_str(fe, field, s,
                                  "must be a MAAS name: letters, digits, '-' and '_' only");
}

void rule_maas_names(struct field_errors *fe, const char *field, const struct schema_strv *v)
{
        struct json_path p;

        if (v->n > RULE_NAMES_MAX) {
                char *n = xasprintf("%zu", v->n);

                field_errors_add(fe, FIELD_ERR_TOO_MANY, field, n, "must have at most %d items",
                                 RULE_NAMES_MAX);
                free(n);
                return;
        }
        for (size_t i = 0; i < v->n; i++) {
                size_t mark;
                bool dup = false;

                json_path_init(&p, field);
                mark = json_path_push_index(&p, i);
                for (size_t j = 0; j < i && !dup; j++)
                        dup = strcmp(v->items[i], v->items[j]) == 0;
                if (dup) {
                        char *q = field_quote(v->items[i]);

                        field_errors_add(fe, FIELD_ERR_DUPLICATE, json_path_str(&p), q, NULL);
                        free(q);
                } else {
                        rule_maas_name(fe, json_path_str(&p), v->items[i]);
                }
                json_path_pop(&p, mark);
        }
}

void rule_provider_id(struct field_errors *fe, const char *field, const char *s)
{
        char *zone = NULL;
        char *sysid = NULL;
        bool ok;

        if (!s)
                return;
        ok = schema_provider_id_parse(s, &zone, &sysid) == 0;
        ok = ok && only_alnum_and(zone, "-_") && only_alnum_and(sysid, "-_");
        if (!ok)
                field_invalid_str(fe, field, s,
                                  "must be maas:///<zone>/<system_id> (zone and system_id of "
                                  "letters, digits, '-' and '_')");
        free(zone);
        free(sysid);
}

static bool dns_label_ok(const char *label, size_t n)
{
        if (n == 0 || n > RULE_DNS_LABEL_MAX)
                return false;
        if (label[0] == '-' || label[n - 1] == '-')
                return false;
        return strspn(label, LOWER_ALNUM "-") >= n;
}

bool rule_is_dns_name(const char *s)
{
        const char *label = s;

        if (!s[0] || strlen(s) > RULE_DNS_NAME_MAX)
                return false;
        for (;;) {
                const char *dot = strchr(label, '.');
                size_t n = dot ? (size_t)(dot - label) : strlen(label);

                if (!dns_label_ok(label, n))
                        return false;
                if (!dot)
                        return true;
                label = dot + 1;
        }
}

void rule_dns_domain(struct field_errors *fe, const char *field, const char *s)
{
        if (!s || !s[0])
                field_required(fe, field);
        else if (strlen(s) > RULE_DNS_NAME_MAX)
                field_invalid_str(fe, field, s, "must be no more than %d characters",
                                  RULE_DNS_NAME_MAX);
        else if (!rule_is_dns_name(s))
                field_invalid_str(fe, field, s, "%s", DNS1123_MSG);
}

static bool is_ip(const char *s)
{
        unsigned char buf[16];

        return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

void rule_host(struct field_errors *fe, const char *field, const char *s)
{
        if (!is_ip(s) && !rule_is_dns_name(s))
                field_invalid_str(fe, field, s,
                                  "must be an IP address or a lowercase RFC 1123 DNS name");
}

void rule_port(struct field_errors *fe, const char *field, int64_t port)
{
        if (port < 1 || port > 65535)
                field_invalid_int(fe, field, port, "must be between 1 and 65535, inclusive");
}
