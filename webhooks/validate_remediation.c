/*
 * validate_remediation: MaasRemediation and MaasRemediationTemplate rules
 * (docs/remediation.md). spec.strategy is Metal3's shape: type Reboot (the only strategy
 * capmaas has), retryLimit the power cycles before the Machine is handed back to Cluster
 * API (0 .. REMEDIATION_RETRY_MAX), timeout how long each cycle waits for the Node (a
 * positive Go duration, at most REMEDIATION_TIMEOUT_MAX_MS).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "field_errors.h"
#include "json.h"
#include "parse.h"
#include "validate.h"
#include "xalloc.h"

#define REMEDIATION_RETRY_MAX      10
#define REMEDIATION_TIMEOUT_MAX_MS (24ULL * 3600 * 1000)

static const char *at(struct json_path *p, const char *path, const char *field)
{
        json_path_init(p, path);
        (void)json_path_push_field(p, field);
        return json_path_str(p);
}

static void check_timeout(const char *timeout, const char *field, struct field_errors *fe)
{
        uint64_t ms = 0;

        if (parse_duration_ms(timeout, &ms) != 0 || ms == 0)
                field_invalid_str(fe, field, timeout,
                                  "must be a positive duration, such as \"5m\" or \"300s\"");
        else if (ms > REMEDIATION_TIMEOUT_MAX_MS)
                field_invalid_str(fe, field, timeout, "must be at most 24h");
}

void validate_remediation_spec(const struct maas_remediation_spec *s,
                               const char *path,
                               struct field_errors *fe)
{
        const struct maas_remediation_strategy *st = s->strategy;
        struct json_path p;
        char *q;

        if (!st)
                return; /* the mutating webhook fills it in */
        if (st->type && strcmp(st->type, SCHEMA_REMEDIATION_REBOOT) != 0) {
                q = field_quote(st->type);
                field_errors_add(fe, FIELD_ERR_NOT_SUPPORTED, at(&p, path, "strategy.type"), q,
                                 "supported values: \"%s\"", SCHEMA_REMEDIATION_REBOOT);
                free(q);
        }
        if (st->has_retry_limit && st->retry_limit < 0)
                field_invalid_int(fe, at(&p, path, "strategy.retryLimit"), st->retry_limit,
                                  "must be greater than or equal to 0");
        else if (st->has_retry_limit && st->retry_limit > REMEDIATION_RETRY_MAX)
                field_invalid_int(fe, at(&p, path, "strategy.retryLimit"), st->retry_limit,
                                  "must be less than or equal to %d", REMEDIATION_RETRY_MAX);
        if (st->timeout)
                check_timeout(st->timeout, at(&p, path, "strategy.timeout"), fe);
}

static void remediation_check(const void *spec,
                              const char *path,
                              struct field_errors *fe,
                              struct admission_response *warn)
{
        (void)warn;
        validate_remediation_spec(spec, path, fe);
}

/* No checks against MAAS (maas_check NULL): what a remediation names is the Machine's. */
const struct spec_ops spec_ops_remediation = {
        .check = remediation_check,
        .defaults = defaults_remediation_spec,
};
