#pragma once
/*
 * maas_setup: the MAAS side of the process configuration (server/maas_setup.c): checked at
 * start-up so a typo is a clear error at once rather than a failed reconcile later, its API
 * key kept out of the logs, and the inventory cache behind the admission MAAS checks.
 * Threads: main's thread, before and after the other threads run.
 */

#include "compiler.h"

struct config;
struct maas_inventory;
struct metrics;
struct token_bucket;

/* Both or neither of the MAAS endpoint and key must be set, and they must parse. */
MUST_CHECK int maas_setup_check(const struct config *cfg, char **reterr);
/* Registers the API key and its token secret with the log redaction (log_add_secret). */
void maas_setup_hide_secrets(const struct config *cfg);
/* The process's MAAS request budget (--maas-api-qps, --maas-api-burst), shared by the
 * inventory and every controller worker, with its counters exported on m. The caller owns
 * *ret (token_bucket_free) and frees it after both users and the last metrics render. */
MUST_CHECK int maas_setup_budget(const struct config *cfg,
                                 struct metrics *m,
                                 struct token_bucket **ret,
                                 char **reterr);
/* Starts the inventory cache (beyond.md B1) when MAAS is configured and either
 * --admission-maas-checks is on or the controllers run (they read it for the templates'
 * capacity and the discovered failure domains); logs when the admission checks are off.
 * Otherwise sets nothing. The caller owns
 * *ret (maas_inventory_free); budget (borrowed) must outlive it. */
MUST_CHECK int maas_setup_inventory(const struct config *cfg,
                                    struct metrics *m,
                                    struct token_bucket *budget,
                                    struct maas_inventory **ret,
                                    char **reterr);
