/*
 * maas_setup: the MAAS endpoint and key as the process uses them outside the reconcilers:
 * checked once at start-up, hidden from the logs, and behind the admission inventory cache.
 */
#include "maas_setup.h"

#include <string.h>

#include "config.h"
#include "err.h"
#include "log.h"
#include "maas_client.h"
#include "maas_inventory.h"
#include "token_bucket.h"
#include "xalloc.h"

#define INVENTORY_CALL_TIMEOUT_MS 10000

int maas_setup_check(const struct config *cfg, char **reterr)
{
        struct maas_config mc = { 0 };
        int r;

        if (!cfg->maas_endpoint && !cfg->maas_api_key)
                return CM_OK;
        if (!cfg->maas_endpoint || !cfg->maas_api_key) {
                *reterr =
                        xstrdup(cfg->maas_endpoint ? "MAAS_API_KEY is not set (MAAS_ENDPOINT is)"
                                                   : "MAAS_ENDPOINT is not set (MAAS_API_KEY is)");
                return CM_EINVAL;
        }
        r = maas_config_parse(cfg->maas_endpoint, cfg->maas_api_key, &mc, reterr);
        maas_config_release(&mc);
        return r;
}

void maas_setup_hide_secrets(const struct config *cfg)
{
        const char *key = cfg->maas_api_key;
        const char *last;

        if (!key)
                return;
        /* The whole key and its token secret (the part after the last ':'), which is what
         * an OAuth PLAINTEXT signature carries. */
        log_add_secret(key);
        last = strrchr(key, ':');
        if (last)
                log_add_secret(last + 1);
}

int maas_setup_budget(const struct config *cfg,
                      struct metrics *m,
                      struct token_bucket **ret,
                      char **reterr)
{
        int r = token_bucket_new(cfg->maas_api_qps, cfg->maas_api_burst, NULL, ret);

        if (r == 0 && m)
                r = token_bucket_export(*ret, m, "maas");
        if (r < 0) {
                *ret = token_bucket_free(*ret);
                *reterr = xasprintf("MAAS request budget: %s", cm_strerror(r));
        }
        return r;
}

int maas_setup_inventory(const struct config *cfg,
                         struct metrics *m,
                         struct token_bucket *budget,
                         struct maas_inventory **ret,
                         char **reterr)
{
        struct maas_config mc = { 0 };
        int r;

        if (!cfg->admission_maas_checks || !cfg->maas_endpoint || !cfg->maas_api_key)
                log_info("setup", "admission MAAS checks are off", "reason=%s",
                         cfg->admission_maas_checks ? "MAAS is not configured"
                                                    : "--admission-maas-checks=false");
        /* The controllers read it too (template capacity, discovered failure domains). */
        if (!cfg->maas_endpoint || !cfg->maas_api_key ||
            (!cfg->admission_maas_checks && cfg->webhooks_only))
                return CM_OK;
        r = maas_config_parse(cfg->maas_endpoint, cfg->maas_api_key, &mc, reterr);
        if (r == 0)
                r = maas_inventory_new(
                        &(struct maas_inventory_opts){
                                .cfg = &mc,
                                .http = { .ca_file = cfg->maas_ca_file,
                                          .insecure_skip_verify = cfg->maas_insecure_skip_verify },
                                .interval_ms = cfg->maas_inventory_interval_ms,
                                .call_timeout_ms = cfg->maas_timeout_ms < INVENTORY_CALL_TIMEOUT_MS
                                                           ? (uint32_t)cfg->maas_timeout_ms
                                                           : INVENTORY_CALL_TIMEOUT_MS,
                                .budget = budget,
                                .metrics = m },
                        ret);
        maas_config_release(&mc);
        if (r < 0 && !*reterr)
                *reterr = xasprintf("MAAS inventory: %s", cm_strerror(r));
        return r;
}
