/*
 * controllers: the provider behind leader election. on_lead runs on the leader election
 * thread and starts the provider unless shutdown has begun (the lock orders the two);
 * on_lost marks the loss and sends SIGTERM, which main is waiting for.
 */
#include "controllers.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "config.h"
#include "err.h"
#include "kube_client.h"
#include "leader.h"
#include "log.h"
#include "maas_client.h"
#include "provider.h"
#include "token_bucket.h"
#include "xalloc.h"

struct controllers {
        struct kube_config kube;
        struct maas_config maas;
        struct token_bucket *limiter; /* owned */
        struct provider *provider;    /* owned */
        struct leader *leader;        /* owned; NULL without --leader-elect */
        pthread_mutex_t lock;         /* orders on_lead against shutdown */
        bool stopping;
        bool lost;
};

static void on_lead(void *arg)
{
        struct controllers *c = arg;

        pthread_mutex_lock(&c->lock);
        if (!c->stopping) {
                log_info("leader", "became the leader; starting the controllers", "");
                if (provider_start(c->provider) < 0)
                        (void)kill(getpid(), SIGTERM);
        }
        pthread_mutex_unlock(&c->lock);
}

static void on_lost(void *arg)
{
        struct controllers *c = arg;

        log_error("leader", "leadership lost; exiting", "");
        c->lost = true;
        (void)kill(getpid(), SIGTERM);
}

static struct provider_settings provider_settings_of(const struct config *cfg)
{
        return (struct provider_settings){
                .namespace = cfg->namespace,
                .watch_filter = cfg->watch_filter,
                .sync_period_ms = cfg->sync_period_ms,
                .machine_concurrency = cfg->machine_concurrency,
                .cluster_concurrency = cfg->cluster_concurrency,
                .deploy_timeout_ms = cfg->deploy_timeout_ms,
                .machine_refresh_ms = cfg->machine_refresh_ms,
                .maas_timeout_ms = cfg->maas_timeout_ms,
                .maas_api_qps = cfg->maas_api_qps,
                .maas_api_burst = cfg->maas_api_burst,
                .release_erase = cfg->release_erase != RELEASE_ERASE_NONE,
                .release_quick_erase = cfg->release_erase == RELEASE_ERASE_QUICK,
                .reuse_hold_ms = cfg->reuse_hold_ms,
        };
}

static int controllers_new(const struct config *cfg,
                           struct metrics *m,
                           struct token_bucket *maas_budget,
                           struct maas_inventory *inventory,
                           const struct provider_inventory_source *ident_inventories,
                           struct controllers **ret,
                           char **reterr)
{
        struct controllers *c = xcalloc(1, sizeof(*c));
        int r;

        pthread_mutex_init(&c->lock, NULL);
        r = kube_config_load(cfg->kubeconfig, environ, &c->kube, reterr);
        if (r == 0)
                r = maas_config_parse(cfg->maas_endpoint, cfg->maas_api_key, &c->maas, reterr);
        if (r == 0)
                r = token_bucket_new(cfg->kube_api_qps, cfg->kube_api_burst, NULL, &c->limiter);
        if (r == 0)
                r = provider_new(&(struct provider_opts){ .settings = provider_settings_of(cfg),
                                                          .kube = &c->kube,
                                                          .limiter = c->limiter,
                                                          .maas = &c->maas,
                                                          .maas_budget = maas_budget,
                                                          .metrics = m,
                                                          .inventory = inventory,
                                                          .ident_inventories = ident_inventories,
                                                          .maas_ca_file = cfg->maas_ca_file,
                                                          .maas_insecure_skip_verify =
                                                                  cfg->maas_insecure_skip_verify },
                                 &c->provider);
        if (r == 0 && cfg->leader_elect)
                r = leader_new(
                        &(struct leader_opts){ .config = &c->kube,
                                               .limiter = c->limiter,
                                               .namespace = cfg->leader_election_namespace,
                                               .name = cfg->leader_election_id,
                                               .lease_ms = cfg->leader_elect_lease_duration_ms,
                                               .renew_deadline_ms =
                                                       cfg->leader_elect_renew_deadline_ms,
                                               .retry_ms = cfg->leader_elect_retry_period_ms,
                                               .metrics = m,
                                               .on_started = on_lead,
                                               .on_stopped = on_lost,
                                               .arg = c },
                        &c->leader);
        *ret = c;
        return r;
}

int controllers_start(const struct config *cfg,
                      struct metrics *m,
                      struct token_bucket *maas_budget,
                      struct maas_inventory *inventory,
                      const struct provider_inventory_source *ident_inventories,
                      struct controllers **ret,
                      char **reterr)
{
        struct controllers *c;
        int r;

        *ret = NULL;
        if (cfg->webhooks_only)
                return CM_OK;
        if (!cfg->maas_endpoint || !cfg->maas_api_key) {
                *reterr = xstrdup("the controllers need MAAS_ENDPOINT and MAAS_API_KEY "
                                  "(or run with --webhooks-only)");
                return CM_EINVAL;
        }
        r = controllers_new(cfg, m, maas_budget, inventory, ident_inventories, ret, reterr);
        c = *ret;
        if (r == 0 && c->leader) {
                log_info("leader", "campaigning for leadership", "lease=%s/%s identity=%s",
                         cfg->leader_election_namespace, cfg->leader_election_id,
                         leader_identity(c->leader));
                r = leader_start(c->leader);
        } else if (r == 0) {
                r = provider_start(c->provider);
        }
        if (r < 0 && !*reterr)
                *reterr = xasprintf("controllers: %s", cm_strerror(r));
        return r;
}

bool controllers_lost(const struct controllers *c)
{
        return c && c->lost;
}

struct controllers *controllers_free(struct controllers *c)
{
        if (!c)
                return NULL;
        pthread_mutex_lock(&c->lock);
        c->stopping = true;
        pthread_mutex_unlock(&c->lock);
        /* Stop reconciling first, then hand the Lease over. */
        provider_stop(c->provider);
        if (c->leader)
                leader_stop(c->leader);
        c->leader = leader_free(c->leader);
        c->provider = provider_free(c->provider);
        c->limiter = token_bucket_free(c->limiter);
        maas_config_release(&c->maas);
        kube_config_release(&c->kube);
        pthread_mutex_destroy(&c->lock);
        free(c);
        return NULL;
}
