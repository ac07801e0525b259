/*
 * worker: a reconcile worker's clients (see worker.h).
 */
#include "worker.h"

#include <stdlib.h>

#include "err.h"
#include "maas_identity.h"
#include "reconciler.h"
#include "xalloc.h"

/* The clients' retry sleep, ending early once the provider stops, so a shutdown never
 * waits out the backoff of a MAAS or Kubernetes outage. */
static void retry_sleep(void *arg, uint64_t ms)
{
        (void)reconciler_sleep(arg, ms);
}

static void ident_conn_release(struct ident_conn *c)
{
        maas_client_free(c->client);
        http_transport_free(c->transport);
        maas_ident_put(c->id);
        *c = (struct ident_conn){ 0 };
}

struct reconciler_worker *reconciler_worker_free(struct reconciler_worker *w)
{
        if (!w)
                return NULL;
        reconciler_worker_use_default(w);
        for (size_t i = 0; i < IDENT_CONNS; i++)
                ident_conn_release(&w->idconn[i]);
        for (size_t i = 0; i < WORKLOAD_CONNS; i++)
                reconciler_workload_conn_release(&w->workload[i]);
        maas_client_free(w->maas_default);
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
                        &w->maas_default);
        w->maas = w->maas_default;
        w->fleets = &p->fleets;
        w->sleep_ms = o->sleep_ms ? o->sleep_ms : retry_sleep;
        w->sleep_ud = o->sleep_ms ? o->sleep_ud : p;
        if (err) {
                reconciler_worker_free(w);
                return err;
        }
        *ret = w;
        return 0;
}

/* A client of id for this worker: its kept one, else a new one in a free slot or the least
 * recently used (whose identity was retired first of all). */
static int ident_conn_get(struct reconciler_worker *w,
                          struct maas_ident *id,
                          struct maas_client **ret)
{
        struct ident_conn *slot = NULL;
        struct http_transport_opts to = {
                .ca_file = id->ca.fd >= 0 ? id->ca.path : NULL,
                .timeout_ms = (uint32_t)w->p->settings.maas_timeout_ms,
        };
        int err;

        for (size_t i = 0; i < IDENT_CONNS; i++) {
                struct ident_conn *c = &w->idconn[i];

                if (c->id && atomic_load(&c->id->retired)) /* rotated or unused: in-flight
                                                            * work on it has finished here */
                        ident_conn_release(c);
                if (c->id && c->id->serial == id->serial) {
                        c->used = ++w->ident_uses;
                        *ret = c->client;
                        return 0;
                }
                if (!slot || !c->id || (slot->id && c->used < slot->used))
                        slot = c;
        }
        ident_conn_release(slot);
        err = http_transport_curl_new(&to, &slot->transport);
        if (err == 0)
                err = maas_client_new(&(struct maas_client_opts){ .cfg = &id->cfg,
                                                                  .transport = slot->transport,
                                                                  .budget = id->budget,
                                                                  .sleep_ms = w->sleep_ms,
                                                                  .sleep_ud = w->sleep_ud,
                                                                  .observe = maas_ident_observe,
                                                                  .observe_ud = id },
                                      &slot->client);
        if (err) {
                ident_conn_release(slot);
                return err;
        }
        slot->id = maas_ident_ref(id);
        slot->used = ++w->ident_uses;
        *ret = slot->client;
        return 0;
}

int reconciler_worker_use_ident(struct reconciler_worker *w, struct maas_ident *id)
{
        struct maas_client *mc;
        int err;

        reconciler_worker_use_default(w);
        err = ident_conn_get(w, id, &mc);
        if (err) {
                maas_ident_put(id);
                return err;
        }
        w->ident = id;
        w->maas = mc;
        w->fleets = &id->fleets;
        return 0;
}

void reconciler_worker_use_default(struct reconciler_worker *w)
{
        for (size_t i = 0; i < IDENT_CONNS; i++) /* rotated or unused: drop its connection */
                if (w->idconn[i].id && atomic_load(&w->idconn[i].id->retired))
                        ident_conn_release(&w->idconn[i]);
        maas_ident_put(w->ident);
        w->ident = NULL;
        w->maas = w->maas_default;
        w->fleets = &w->p->fleets;
}
