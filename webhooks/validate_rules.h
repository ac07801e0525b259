#pragma once
/*
 * validate_rules: single-field rules of the Maas kinds (image, MAAS names, ranges, DNS
 * names, hosts, ports, provider IDs). Each appends at most one error per value to fe under
 * the given field path. Private to the webhooks library; pure and reentrant.
 */

#include <stdbool.h>
#include <stdint.h>

struct field_errors;
struct schema_strv;

#define RULE_IMAGE_MAX     255
#define RULE_MAAS_NAME_MAX 256
#define RULE_DNS_NAME_MAX  253
#define RULE_DNS_LABEL_MAX 63
#define RULE_NAMES_MAX     64 /* items of a tag or failure-domain list */

/* True when osystem is one MAAS knows (ubuntu, centos, rhel, custom, windows, ...). */
bool rule_osystem_known(const char *osystem);
/* image: required; "<osystem>/<release>" with a known osystem, or a bare "<release>". */
void rule_image(struct field_errors *fe, const char *field, const char *image);

/* What rule_range accepts: an integer in [min, max] (max INT64_MAX = unbounded); absent is
 * an error if required. */
struct rule_bounds {
        int64_t min;
        int64_t max;
        bool required;
};

/* v (present says whether it was given) within b. */
void rule_range(struct field_errors *fe,
                const char *field,
                bool present,
                int64_t v,
                const struct rule_bounds *b);
/* A MAAS pool, zone or tag name when s is set: 1-256 of [A-Za-z0-9_-]. */
void rule_maas_name(struct field_errors *fe, const char *field, const char *s);
/* At most RULE_NAMES_MAX items ("Too many", and nothing else checked: this also bounds the
 * quadratic duplicate search), each a MAAS name, no item twice ("Duplicate value" at the
 * later index). */
void rule_maas_names(struct field_errors *fe, const char *field, const struct schema_strv *v);
/* "maas:///<zone>/<system_id>" when s is set. */
void rule_provider_id(struct field_errors *fe, const char *field, const char *s);
/* True when s is a lowercase RFC 1123 subdomain (labels of at most 63 characters). */
bool rule_is_dns_name(const char *s);
/* A DNS domain: required, a lowercase RFC 1123 subdomain. */
void rule_dns_domain(struct field_errors *fe, const char *field, const char *s);
/* An IP address or a DNS name. */
void rule_host(struct field_errors *fe, const char *field, const char *s);
/* A TCP port, 1-65535. */
void rule_port(struct field_errors *fe, const char *field, int64_t port);
