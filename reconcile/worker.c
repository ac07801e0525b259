/*
 * worker: a reconcile worker's clients (see worker.h).
 */
#include "worker.h"

#include <stdlib.h>

#include "err.h"
#include "reconciler.h"
#include "xalloc.h"

/* The clients' retry sleep, ending early once the provider stops, so a shutdown never
 * waits out the backoff of a MAAS or Kubernetes outage. */
static void retry_sleep(void *arg, uint64_t ms)
{
        (void)reconciler_sleep(arg, ms);
}

struct reconciler_worker *reconciler_worker_free(struct reconciler_worker *w)
{
        if (!w)
                return NULL;
        for (size_t i = 0; i < WORKLOAD_CONNS; i++)
                reconciler_workload_conn_release(&w->workload[i]);
        maas_client_free(w->maas);
        if (w->own_maas_transport)
                http_transport_free(w->maas_transport);
        kube_client_free(w->kube);
        free(w);
        return NULL;
}

int reconciler_worker_new(struct provider *p,
                          const struct reconciler_worker_opts *o,
                          struct reconciler_worker **ret)
{
        static const struct reconciler_worker_opts none = { 0 };
        struct reconciler_worker *w = xcalloc(1, sizeof(*w));
        struct http_transport_opts to = {
                .ca_file = p->maas_ca_file,
                .insecure_skip_verify = p->maas_insecure,
                .timeout_ms = (uint32_t)p->settings.maas_timeout_ms,
        };
        int err;

        if (!o)
                o = &none;
        w->p = p;
        w->workload_transport = o->workload_transport;
        err = kube_client_new(&(struct kube_client_opts){ .config = p->kube,
                                                          .limiter = p->limiter,
                                                          .transport = o->kube_transport },
                              &w->kube);
        if (err == 0 && o->maas_transport)
                w->maas_transport = o->maas_transport;
        else if (err == 0) {
                err = http_transport_curl_new(&to, &w->maas_transport);
                w->own_maas_transport = err == 0;
        }
        if (err == 0)
                err = maas_client_new(
                        &(struct maas_client_opts){ .cfg = p->maas,
                                                    .transport = w->maas_transport,
                                                    .budget = p->maas_budget,
                                                    .sleep_ms =
                                                            o->sleep_ms ? o->sleep_ms : retry_sleep,
                                                    .sleep_ud = o->sleep_ms ? o->sleep_ud : p },
                        &w->maas);
        if (err) {
                reconciler_worker_free(w);
                return err;
        }
        *ret = w;
        return 0;
}
