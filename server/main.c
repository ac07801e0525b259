/*
 * main: the process. Parses the flags into the configuration, blocks the termination
 * signals before any thread exists (every thread inherits the mask; main waits for them
 * with sigwait), assembles the parts — serving (webhooks over HTTPS, health and metrics
 * over plain HTTP), the MAAS inventory behind the admission checks, the controllers — and
 * on SIGTERM or SIGINT stops accepting, lets requests in flight finish within
 * --graceful-shutdown-timeout, and tears everything down in reverse order.
 *
 * Only server/ sees both the webhooks and the reconcile libraries.
 */
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "controllers.h"
#include "curl_lib.h"
#include "log.h"
#include "maas_inventories.h"
#include "maas_inventory.h"
#include "maas_setup.h"
#include "serving.h"
#include "tls_alloc.h"
#include "token_bucket.h"
#include "xalloc.h"

struct app {
        const struct config *cfg;         /* borrowed */
        struct serving *serving;          /* owned */
        struct token_bucket *maas_budget; /* owned; shared by the inventory and controllers */
        struct maas_inventory *inventory; /* owned; NULL without MAAS, or for webhooks alone
                                           * with the MAAS checks off */
        /* owned; the per-cluster MAAS's inventories (spec.identityRef) for admission and the
         * controllers; NULL without an inventory */
        struct maas_inventories *inventories;
        struct controllers *ctl; /* owned; NULL with --webhooks-only */
};

static int app_start(struct app *app, char **reterr)
{
        int r;

        r = serving_new(app->cfg, &app->serving, reterr);
        if (r == 0)
                r = maas_setup_budget(app->cfg, serving_metrics(app->serving), &app->maas_budget,
                                      reterr);
        if (r == 0)
                r = maas_setup_inventory(app->cfg, serving_metrics(app->serving), app->maas_budget,
                                         &app->inventory, reterr);
        if (r == 0 && app->inventory)
                r = maas_inventories_new(app->cfg, &app->inventories, reterr);
        if (r == 0)
                r = serving_start(app->serving,
                                  app->cfg->admission_maas_checks ? app->inventory : NULL,
                                  app->inventories, reterr);
        if (r == 0)
                r = controllers_start(
                        app->cfg, serving_metrics(app->serving), app->maas_budget, app->inventory,
                        maas_inventories_provider_source(app->inventories), &app->ctl, reterr);
        return r;
}

static void app_stop(struct app *app)
{
        app->ctl = controllers_free(app->ctl);
        if (app->serving)
                serving_stop(app->serving);
        app->inventories = maas_inventories_free(app->inventories);
        app->inventory = maas_inventory_free(app->inventory);
        app->serving = serving_free(app->serving);
        app->maas_budget = token_bucket_free(app->maas_budget);
}

/* Waits for SIGTERM or SIGINT (blocked in every thread since before they started). */
static int wait_for_signal(const sigset_t *set)
{
        int sig = 0;

        while (sigwait(set, &sig) != 0 || (sig != SIGTERM && sig != SIGINT))
                ;
        return sig;
}

/* The feature gates given; none changes what capmaas does. */
static void log_feature_gates(const struct config *cfg)
{
        char *gates;

        if (!cfg->feature_gates.set)
                return;
        gates = config_feature_gates_format(&cfg->feature_gates);
        log_info("setup", "feature gates recorded (capmaas has no gated behaviour)", "gates=%s",
                 gates);
        free(gates);
}

static int run(const struct config *cfg)
{
        struct app app = { .cfg = cfg };
        sigset_t set;
        char *err = NULL;
        bool lost;
        int sig;

        log_feature_gates(cfg);
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        if (app_start(&app, &err) < 0) {
                log_error("setup", "cannot start", "err=%s", err ? err : "unknown");
                free(err);
                app_stop(&app);
                return 1;
        }
        sig = wait_for_signal(&set);
        lost = controllers_lost(app.ctl);
        log_info("shutdown", "signal received; stopping", "signal=%s", sigabbrev_np(sig));
        app_stop(&app);
        log_info("shutdown", "stopped", "");
        return lost ? 1 : 0;
}

int main(int argc, char *argv[])
{
        struct config *cfg = NULL;
        char *err = NULL;
        int status;

        signal(SIGPIPE, SIG_IGN);
#ifdef __GLIBC__
        /* Two malloc arenas instead of eight per core: the workers' short-lived cJSON trees
         * otherwise leave each thread its own fragmented arena (about 8 MiB more peak RSS
         * with 1 000 machines, bench/scale.sh), for no measurable throughput on 2 cores. */
        (void)mallopt(M_ARENA_MAX, 2);
#endif
        xalloc_install_cjson_hooks();
        tls_alloc_install();
        if (config_load(argc, argv, environ, &cfg, &err) < 0) {
                fprintf(stderr, "capmaas: %s\nRun 'capmaas --help' for the options.\n",
                        err ? err : "invalid configuration");
                free(err);
                curl_lib_cleanup();
                return 2;
        }
        if (cfg->help)
                config_print_help(stdout);
        else if (cfg->version)
                printf("capmaas %s\n", CAPMAAS_VERSION);
        log_setup(cfg->logging_format, cfg->verbosity, 2);
        maas_setup_hide_secrets(cfg);
        if (!cfg->help && !cfg->version && maas_setup_check(cfg, &err) < 0) {
                fprintf(stderr, "capmaas: %s\n", err ? err : "invalid MAAS configuration");
                free(err);
                status = 2;
                goto out;
        }
        status = cfg->help || cfg->version ? 0 : run(cfg);
out:
        log_clear_secrets();
        config_free(cfg);
        curl_lib_cleanup();
        return status;
}
