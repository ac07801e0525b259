/*
 * maascluster: the MaasCluster reconciler (upstream-capmaas.md §3.3–3.4, beyond.md B5).
 *
 * The API endpoint is a MAAS DNS record <cluster>-<6 hex>.<dnsDomain> (TTL 10) holding the
 * first ExternalIP of every healthy control-plane machine, or with spec.dnsRecordAddresses
 * its addresses in that CIDR (and on that interface): maascluster_addresses.h. Its name is
 * persisted in the dns-record annotation (and status.network.dnsName, as the reference writes it)
 * BEFORE the record is created, so a lost write never creates a second record, and clusterctl move,
 * which copies metadata and spec but never status, carries the record's identity to the target. The
 * record is written only when its address set changes and is never emptied while control planes
 * merely look down or have not reported yet (an empty status after a move); it is deleted with the
 * cluster, but not for a move (delete-for-move). Pause (the Cluster's or ours) stops every branch,
 * delete included; a MaasCluster managed by another controller (cluster.x-k8s.io/managed-by) is
 * left alone. spec.endpoint.type VIP or External: maascluster_vip.h instead of the record.
 */
#include "maascluster.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "kube_events.h"
#include "legacy.h"
#include "log.h"
#include "maas_inventory.h"
#include "maascluster_addresses.h"
#include "maascluster_vip.h"
#include "patch_helper.h"
#include "reconciler.h"
#include "worker.h"
#include "xalloc.h"

#define LOGGER          "maascluster"
#define DNS_TTL         10
#define MAX_CP_IPS      64
#define API_PROBE_MAX_S 60

struct maascluster_ctx {
        struct reconciler_worker *w;
        struct provider *p;
        const char *ns, *name;
        struct kube_object *obj, *cluster;
        struct maas_cluster mc;
        cJSON *cur;
        const char *cluster_name;
        time_t now;
        struct reconciler_conditions conds; /* into mc.status and now */
};

/* Ready from LoadBalancerReady and APIServerAvailable. */
static void summary(struct maascluster_ctx *c)
{
        static const char *const types[] = { SCHEMA_COND_LOAD_BALANCER_READY,
                                             SCHEMA_COND_API_SERVER_AVAILABLE };

        reconciler_ready_summary(&c->conds, types, 2);
}

/* As maasmachine_flush: the diff is against what this pass read and wrote, so other clients'
 * concurrent changes are never reverted. */
static int flush(struct maascluster_ctx *c, bool metadata_only)
{
        cJSON *after = NULL;
        int err;

        if (!metadata_only && c->mc.status.present)
                summary(c);
        err = maas_cluster_encode(&c->mc, &after);
        if (err)
                return err;
        return reconciler_write(c->w, &KUBE_RES_MAASCLUSTERS, &c->cur, after, metadata_only, NULL);
}

static void failure_domains_set(struct schema_failure_domains *fd,
                                const char *const *zones,
                                size_t n)
{
        for (size_t i = 0; i < fd->n; i++) {
                free(fd->items[i].name);
                schema_strmap_release(&fd->items[i].attributes);
        }
        free(fd->items);
        fd->items = n ? xcalloc(n, sizeof(*fd->items)) : NULL;
        fd->n = n;
        fd->present = true;
        for (size_t i = 0; i < n; i++) {
                fd->items[i].name = xstrdup(zones[i]);
                fd->items[i].control_plane = true;
                fd->items[i].has_control_plane = true;
        }
}

/* status.failureDomains, every one eligible for control planes: spec.failureDomains as the
 * user wrote it; when that is empty, the MAAS zones that hold machines (from the inventory,
 * in name order). Without a current inventory the discovered list stays as last written. */
static void failure_domains(struct maascluster_ctx *c)
{
        const struct schema_strv *spec = &c->mc.spec.failure_domains;
        struct maas_inventory_snapshot *s;
        enum maas_inv_state st;
        const char **zones = NULL;
        size_t n;

        c->mc.status.present = true;
        if (spec->n || !c->p->inventory) {
                failure_domains_set(&c->mc.status.failure_domains, (const char *const *)spec->items,
                                    spec->n);
                return;
        }
        /* a cluster with its own MAAS: the zones of that MAAS's inventory */
        if (c->mc.spec.identity_ref && c->mc.spec.identity_ref->name) {
                s = reconciler_ident_inventory(c->p, c->ns, c->mc.spec.identity_ref->name);
                st = s ? MAAS_INV_OK : MAAS_INV_NOT_LOADED;
        } else {
                s = maas_inventory_acquire(c->p->inventory, &st, NULL);
        }
        if (s && st == MAAS_INV_OK) {
                n = maas_inv_zones_with_machines(s, &zones);
                failure_domains_set(&c->mc.status.failure_domains, zones, n);
                free(zones);
        }
        maas_inventory_snapshot_release(s);
}

/* --- the DNS record ---------------------------------------------------------------------- */

static int find_record(struct maascluster_ctx *c,
                       const char *fqdn,
                       struct maas_dns_resource *ret,
                       bool *ret_found)
{
        struct maas_dns_list l = { 0 };
        struct maas_error me = { 0 };
        int err;

        *ret_found = false;
        err = maas_list_dns_resources(c->w->maas, fqdn, &l, &me);
        reconciler_maas_count(c->p, "list_dns_resources", err, &me);
        if (err == 0 && l.n > 1)
                err = CM_ECONFLICT;
        if (err == 0 && l.n == 1) {
                *ret = l.items[0];
                l.items[0] = (struct maas_dns_resource){ 0 };
                *ret_found = true;
        }
        maas_dns_list_release(&l);
        maas_error_release(&me);
        return err;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool in_list(const char *const *v, size_t n, const char *s)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(v[i], s) == 0)
                        return true;
        return false;
}

/* The record capmaas owns: the annotation (which move copies), else status (an object from
 * before the annotation, migrated by reconcile_endpoint), else NULL. */
static const char *record_name(const struct maascluster_ctx *c)
{
        const char *ann =
                schema_strmap_get(&c->mc.meta.annotations, RECONCILER_ANNOTATION_DNS_RECORD);

        if (ann && *ann)
                return ann;
        return c->mc.status.network && c->mc.status.network->dns_name &&
                               *c->mc.status.network->dns_name
                       ? c->mc.status.network->dns_name
                       : NULL;
}

/* A machine that holds a MAAS machine but has not reported it yet (its status is empty, as
 * after clusterctl move, or not yet written): its address is unknown, not gone. */
static bool unreported(const cJSON *mm)
{
        const char *sid = json_find_str(mm, "spec", "systemID", NULL);
        const char *pid = json_find_str(mm, "spec", "providerID", NULL);

        return ((sid && *sid) || (pid && *pid)) &&
               !json_find_str(mm, "status", "machineState", NULL);
}

static bool healthy(const cJSON *mm)
{
        const char *st = json_find_str(mm, "status", "machineState", NULL);

        return cJSON_IsTrue(json_find(mm, "status", "machinePowered", NULL)) && st &&
               strcmp(st, "Deployed") == 0;
}

static void add_unique(const char **out, size_t *k, const char *ip)
{
        if (*k < MAX_CP_IPS && !in_list(out, *k, ip))
                out[(*k)++] = ip;
}

/* The addresses the record should hold into out, *ret_k of them (borrowed pointers into the
 * cached objects, current and pick, valid while all are held): each control plane's
 * addresses as pick chooses them (spec.dnsRecordAddresses). Machines being deleted are
 * dropped; machines that merely look down keep their addresses when nothing healthy is left
 * (B5); while any control plane has not reported its machine yet, no address leaves the
 * record. A MAAS error reading interfaces is returned. */
static int desired_ips(struct maascluster_ctx *c,
                       struct kube_object **objs,
                       size_t n,
                       const struct maas_strv *current,
                       struct endpoint_pick *pick,
                       const char **out,
                       size_t *ret_k)
{
        const char *held[MAX_CP_IPS];
        const char *mine[ENDPOINT_ADDRS_PER_CP];
        size_t k = 0, h = 0, m;
        bool unknown = false;
        int err;

        for (size_t i = 0; i < n; i++) {
                const cJSON *mm = kube_object_json(objs[i]);

                if (!kube_label(mm, SCHEMA_LABEL_CONTROL_PLANE) ||
                    kube_meta_str(mm, "deletionTimestamp"))
                        continue;
                unknown = unknown || unreported(mm);
                err = endpoint_pick_addresses(pick, c->p, c->w->maas, mm, mine, ARRAY_SIZE(mine),
                                              &m);
                if (err)
                        return err;
                for (size_t j = 0; j < m; j++) {
                        if (healthy(mm))
                                add_unique(out, &k, mine[j]);
                        else if (h < MAX_CP_IPS &&
                                 in_list((const char *const *)current->v, current->n, mine[j]))
                                held[h++] = mine[j];
                }
        }
        if (k == 0)
                for (size_t i = 0; i < h; i++)
                        add_unique(out, &k, held[i]);
        for (size_t i = 0; unknown && i < current->n; i++)
                add_unique(out, &k, current->v[i]);
        qsort(out, k, sizeof(*out), cmp_str);
        *ret_k = k;
        return 0;
}

static bool same_set(const char *const *want, size_t n, const struct maas_strv *have)
{
        if (n != have->n)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!in_list((const char *const *)have->v, have->n, want[i]))
                        return false;
        return true;
}

/* The control-plane MaasMachines of a cluster (owned references). */
struct cps {
        struct kube_object **v;
        size_t n, cap;
};

/* informer_each: keeps the control planes, so a pass over a cluster of thousands of
 * workers holds a handful of trees. */
static void keep_control_plane(void *arg, struct kube_object *obj)
{
        struct cps *cps = arg;

        if (!kube_label(kube_object_json(obj), SCHEMA_LABEL_CONTROL_PLANE))
                return;
        if (cps->n == cps->cap) {
                cps->cap = cps->cap ? cps->cap * 2 : 8;
                cps->v = xrealloc(cps->v, cps->cap * sizeof(*cps->v));
        }
        cps->v[cps->n++] = kube_object_ref(obj);
}

static int sync_record(struct maascluster_ctx *c, const char *fqdn)
{
        struct maas_dns_resource rec = { 0 };
        struct maas_error me = { 0 };
        struct cps cps = { 0 };
        const char *want[MAX_CP_IPS];
        struct endpoint_pick pick;
        size_t k = 0;
        bool found = false;
        int err;

        /* the record as last read or written, within --machine-refresh-interval: a
         * rollout's many passes read it once an interval, not once a pass */
        found = reconciler_dns_cached(c->p, fqdn, &rec);
        if (!found) {
                err = find_record(c, fqdn, &rec, &found);
                if (err)
                        return err;
                reconciler_dns_remember(c->p, fqdn, found ? &rec : NULL);
        }
        if (!endpoint_pick_init(&pick, c->mc.spec.dns_record_addresses))
                log_warn(LOGGER,
                         "spec.dnsRecordAddresses.cidr is not a CIDR: the record holds "
                         "each control plane's first ExternalIP",
                         "object=%s/%s", c->ns, c->name);
        (void)informer_each(c->p->maasmachines, c->ns, c->cluster_name, keep_control_plane, &cps);
        err = desired_ips(c, cps.v, cps.n, &rec.ips, &pick, want, &k);
        if (err == 0 && !found) {
                struct maas_dns_resource made = { 0 };

                err = maas_create_dns_resource(c->w->maas, fqdn, DNS_TTL, want, k, &made, &me);
                reconciler_maas_count(c->p, "create_dns_resource", err, &me);
                if (err == 0) {
                        reconciler_dns_remember(c->p, fqdn, &made);
                        reconciler_event(c->p, c->cur, "Normal", "DNSRecordCreated",
                                         "Created MAAS DNS record %s with %zu addresses", fqdn, k);
                }
                maas_dns_resource_release(&made);
        } else if (err == 0 && !same_set(want, k, &rec.ips)) {
                struct maas_dns_resource now = { 0 };

                err = maas_update_dns_resource_ips(c->w->maas, rec.id, want, k, &now, &me);
                reconciler_maas_count(c->p, "update_dns_resource", err, &me);
                if (err == 0) {
                        reconciler_dns_remember(c->p, fqdn, &now);
                        reconciler_event(c->p, c->cur, "Normal", "DNSRecordUpdated",
                                         "MAAS DNS record %s now holds %zu control-plane addresses",
                                         fqdn, k);
                }
                maas_dns_resource_release(&now);
        }
        if (err) {
                /* MAAS's record is unknown now (gone, changed, or not written): read it next */
                reconciler_dns_remember(c->p, fqdn, NULL);
                reconciler_cond(&c->conds, SCHEMA_COND_LOAD_BALANCER_READY, SCHEMA_CONDITION_FALSE,
                                SCHEMA_REASON_LOAD_BALANCER_FAILED, "%s",
                                me.message ? me.message : maas_strerror(err));
        }
        kube_object_list_free(cps.v, cps.n);
        endpoint_pick_release(&pick);
        maas_dns_resource_release(&rec);
        maas_error_release(&me);
        return err;
}

static int delete_record(struct maascluster_ctx *c, const char *fqdn)
{
        struct maas_dns_resource rec = { 0 };
        struct maas_error me = { 0 };
        bool found = false;
        int err;

        reconciler_dns_remember(c->p, fqdn, NULL);
        err = find_record(c, fqdn, &rec, &found);
        if (err == 0 && found) {
                err = maas_delete_dns_resource(c->w->maas, rec.id, &me);
                reconciler_maas_count(c->p, "delete_dns_resource", err, &me);
                if (err == CM_ENOTFOUND)
                        err = 0;
                if (err == 0)
                        reconciler_event(c->p, c->cur, "Normal", "DNSRecordDeleted",
                                         "Deleted MAAS DNS record %s", fqdn);
        }
        maas_dns_resource_release(&rec);
        maas_error_release(&me);
        return err;
}

/* --- endpoint and API server ---------------------------------------------------------------- */

/* <cluster>-<6 hex>.<dnsDomain>, the hex from the MaasCluster's UID (FNV-1a): every pass
 * names the same record, so a pass that reads the object before its own write of the name
 * has reached the cache cannot pick a second name and leave a second record behind. */
static char *generate_dns_name(struct maascluster_ctx *c)
{
        const char *uid = c->mc.meta.uid ? c->mc.meta.uid : c->cluster_name;
        uint32_t h = 2166136261u;

        for (const unsigned char *p = (const unsigned char *)uid; *p; p++)
                h = (h ^ *p) * 16777619u;
        return xasprintf("%s-%06x.%s", c->cluster_name, (unsigned)(h & 0xffffffu),
                         c->mc.spec.dns_domain ? c->mc.spec.dns_domain : "maas");
}

static int64_t api_port(const cJSON *cluster)
{
        const cJSON *port = json_find(cluster, "spec", "clusterNetwork", "apiServerPort", NULL);

        /* a port, or 6443 (a value out of range must not reach the integer conversion) */
        return cJSON_IsNumber(port) && port->valuedouble >= 1 && port->valuedouble <= 65535
                       ? (int64_t)port->valuedouble
                       : 6443;
}

static void set_endpoint(struct maascluster_ctx *c, const char *host, int64_t port)
{
        struct schema_api_endpoint *ep = c->mc.spec.control_plane_endpoint;

        if (!ep)
                ep = c->mc.spec.control_plane_endpoint = xcalloc(1, sizeof(*ep));
        free(ep->host);
        ep->host = xstrdup(host);
        ep->port = port;
        ep->has_port = true;
        c->mc.status.ready = true;
        c->mc.status.has_ready = true;
        c->mc.status.provisioned = true;
        c->mc.status.has_provisioned = true;
}

static uint64_t probe_delay(struct provider *p, const char *key, bool ok)
{
        struct reconciler_entry *e;
        uint64_t d;

        pthread_mutex_lock(&p->lock);
        if (ok) {
                reconciler_table_del(&p->api_probe, key);
                pthread_mutex_unlock(&p->lock);
                return 0;
        }
        e = reconciler_table_put(&p->api_probe, key);
        d = 2000ull << (e->a < 5 ? e->a : 5);
        e->a++;
        pthread_mutex_unlock(&p->lock);
        return d > API_PROBE_MAX_S * 1000ull ? API_PROBE_MAX_S * 1000ull : d;
}

static int api_server(struct maascluster_ctx *c, struct reconcile_result *res)
{
        struct kube_client *wl = NULL;
        cJSON *ns = NULL;
        char key[600];
        uint64_t delay;
        int err;

        if (schema_conditions_is_true(&c->mc.status.conditions, SCHEMA_COND_API_SERVER_AVAILABLE))
                return 0;
        (void)snprintf(key, sizeof(key), "%s/%s", c->ns, c->name);
        err = reconciler_workload_client(c->w, c->ns, c->cluster_name, &wl);
        if (err == 0)
                err = kube_get(wl, &KUBE_RES_NAMESPACES, NULL, "kube-system", &ns, NULL);
        if (err == CM_ENOTFOUND && wl)
                err = 0; /* the API answered */
        if (err && wl)
                reconciler_workload_drop(c->w, c->ns, c->cluster_name);
        delay = probe_delay(c->p, key, err == 0);
        if (err == 0)
                reconciler_cond(&c->conds, SCHEMA_COND_API_SERVER_AVAILABLE, SCHEMA_CONDITION_TRUE,
                                SCHEMA_REASON_API_SERVER_AVAILABLE, NULL);
        else {
                reconciler_cond(&c->conds, SCHEMA_COND_API_SERVER_AVAILABLE, SCHEMA_CONDITION_FALSE,
                                SCHEMA_REASON_API_SERVER_NOT_READY, "%s",
                                wl ? "the workload API server does not answer yet"
                                   : "waiting for the cluster's kubeconfig secret");
                res->outcome = RECONCILE_REQUEUE_AFTER;
                res->after_ms = delay;
        }
        cJSON_Delete(ns);
        return 0;
}

/* A Cluster.spec.controlPlaneEndpoint host the user set (not the record we own). */
static const char *user_endpoint(struct maascluster_ctx *c)
{
        const char *host =
                c->cluster ? capi_cluster_endpoint_host(kube_object_json(c->cluster)) : NULL;
        const char *ours = record_name(c);

        if (!host || !*host || (ours && strcmp(host, ours) == 0))
                return NULL;
        return host;
}

/* A MaasCluster whose record the reference provider named, with neither our annotation nor
 * a status (copied by clusterctl move, which copies no status): its
 * spec.controlPlaneEndpoint.host, which the reference set to the record's name, names the
 * record to adopt (and the annotation is then written from it); it is not a host the user
 * set. */
static void adopt_reference_record(struct maascluster_ctx *c)
{
        const struct schema_api_endpoint *ep = c->mc.spec.control_plane_endpoint;
        const char *host = capi_cluster_endpoint_host(kube_object_json(c->cluster));

        if (record_name(c) || !ep ||
            !legacy_reference_record_name(ep->host, c->cluster_name, c->mc.spec.dns_domain) ||
            (host && *host && strcmp(host, ep->host) != 0))
                return;
        if (!c->mc.status.network)
                c->mc.status.network = xcalloc(1, sizeof(*c->mc.status.network));
        free(c->mc.status.network->dns_name); /* "" names nothing */
        c->mc.status.network->dns_name = xstrdup(ep->host);
        c->mc.status.present = true;
        log_info(LOGGER, "adopting the reference provider's endpoint record",
                 "object=%s/%s fqdn=%s", c->ns, c->name, ep->host);
}

/* status.network.dnsName = name (the reference's field; rebuilt after a move). */
static void status_dns_name(struct maascluster_ctx *c, const char *name)
{
        struct maas_cluster_network *net = c->mc.status.network;

        if (!net)
                net = c->mc.status.network = xcalloc(1, sizeof(*net));
        if (net->dns_name && strcmp(net->dns_name, name) == 0)
                return;
        free(net->dns_name);
        net->dns_name = xstrdup(name);
        c->mc.status.present = true;
}

/* Writes the record's name into the annotation before the record exists in MAAS: the
 * name status already holds (an object from before the annotation keeps its record), else
 * a new one. */
static int persist_record_name(struct maascluster_ctx *c)
{
        const char *have = record_name(c);
        char *name = have ? xstrdup(have) : generate_dns_name(c);
        int err;

        schema_strmap_set(&c->mc.meta.annotations, RECONCILER_ANNOTATION_DNS_RECORD, name);
        status_dns_name(c, name);
        free(name);
        err = flush(c, true);
        if (err == 0)
                log_info(LOGGER, "endpoint record named", "object=%s/%s fqdn=%s", c->ns, c->name,
                         record_name(c));
        return err;
}

/* --- the VIP and External endpoints (maascluster_vip.h, docs/endpoints.md) ------------------ */

static struct vip_pass vip_pass_of(struct maascluster_ctx *c)
{
        return (struct vip_pass){ .w = c->w,
                                  .p = c->p,
                                  .ns = c->ns,
                                  .name = c->name,
                                  .mc = &c->mc,
                                  .obj = c->cur,
                                  .conds = &c->conds };
}

/* spec.endpoint.dnsRecord with dnsDomain: a MAAS record (named as the DNS endpoint's)
 * holding the VIP alone, named before it is created. */
static int vip_record(struct maascluster_ctx *c, const char *ip)
{
        struct maas_dns_resource rec = { 0 }, made = { 0 };
        struct maas_error me = { 0 };
        const char *want[1] = { ip };
        bool found = false;
        int err = 0;

        if (!schema_strmap_get(&c->mc.meta.annotations, RECONCILER_ANNOTATION_DNS_RECORD))
                err = persist_record_name(c);
        if (err == 0)
                err = find_record(c, record_name(c), &rec, &found);
        if (err == 0 && !found) {
                err = maas_create_dns_resource(c->w->maas, record_name(c), DNS_TTL, want, 1, &made,
                                               &me);
                reconciler_maas_count(c->p, "create_dns_resource", err, &me);
                if (err == 0)
                        reconciler_event(c->p, c->cur, "Normal", "DNSRecordCreated",
                                         "Created MAAS DNS record %s for the VIP %s",
                                         record_name(c), ip);
        } else if (err == 0 && !same_set(want, 1, &rec.ips)) {
                err = maas_update_dns_resource_ips(c->w->maas, rec.id, want, 1, &made, &me);
                reconciler_maas_count(c->p, "update_dns_resource", err, &me);
        }
        if (err)
                reconciler_cond(&c->conds, SCHEMA_COND_LOAD_BALANCER_READY, SCHEMA_CONDITION_FALSE,
                                SCHEMA_REASON_LOAD_BALANCER_FAILED, "%s",
                                me.message ? me.message : maas_strerror(err));
        else
                status_dns_name(c, record_name(c));
        maas_dns_resource_release(&made);
        maas_dns_resource_release(&rec);
        maas_error_release(&me);
        return err;
}

static int endpoint_vip(struct maascluster_ctx *c, bool *ret_go)
{
        struct vip_pass v = vip_pass_of(c);
        bool fresh = false;
        char *ip;
        int err, ferr = 0;

        *ret_go = false;
        err = maascluster_vip_ensure(&v, &fresh);
        if (fresh) /* MAAS picked it: persisted before anything else can go wrong */
                ferr = flush(c, true);
        if (err || ferr)
                return err ? err : ferr;
        ip = xstrdup(maascluster_vip_address(&c->mc));
        if (c->mc.spec.endpoint->dns_record && c->mc.spec.dns_domain)
                err = vip_record(c, ip);
        if (err == 0) {
                set_endpoint(c, ip, api_port(kube_object_json(c->cluster)));
                err = flush(c, true);
        }
        if (err == 0) {
                reconciler_cond(&c->conds, SCHEMA_COND_LOAD_BALANCER_READY, SCHEMA_CONDITION_TRUE,
                                SCHEMA_REASON_LOAD_BALANCER_READY, "VIP %s reserved in MAAS", ip);
                *ret_go = true;
        }
        free(ip);
        return err;
}

/* External: the endpoint the user set (the MaasCluster's, else the Cluster's); no MAAS call. */
static int endpoint_external(struct maascluster_ctx *c, bool *ret_go)
{
        const struct schema_api_endpoint *ep = c->mc.spec.control_plane_endpoint;
        const char *mine = ep && ep->host && *ep->host ? ep->host : NULL;
        const char *theirs = capi_cluster_endpoint_host(kube_object_json(c->cluster));
        char *host = mine ? xstrdup(mine) : theirs && *theirs ? xstrdup(theirs) : NULL;
        int64_t port = mine && ep->has_port && ep->port ? ep->port
                                                        : api_port(kube_object_json(c->cluster));
        int err;

        *ret_go = false;
        if (!host) {
                reconciler_cond(&c->conds, SCHEMA_COND_LOAD_BALANCER_READY, SCHEMA_CONDITION_FALSE,
                                SCHEMA_REASON_WAITING_FOR_ENDPOINT,
                                "spec.endpoint.type is External: set spec.controlPlaneEndpoint "
                                "(or the Cluster's)");
                return 0;
        }
        set_endpoint(c, host, port);
        free(host);
        err = flush(c, true);
        if (err)
                return err;
        reconciler_cond(&c->conds, SCHEMA_COND_LOAD_BALANCER_READY, SCHEMA_CONDITION_TRUE,
                        SCHEMA_REASON_LOAD_BALANCER_READY, "the External endpoint is set");
        *ret_go = true;
        return 0;
}

/* At cluster deletion, the machines gone: the VIP's record, then its reservation. */
static int delete_vip(struct maascluster_ctx *c)
{
        struct vip_pass v = vip_pass_of(c);
        int err = 0;

        if (schema_strmap_get(&c->mc.meta.annotations, RECONCILER_ANNOTATION_DNS_RECORD))
                err = delete_record(c, record_name(c));
        return err ? err : maascluster_vip_release(&v);
}

static int reconcile_endpoint(struct maascluster_ctx *c, struct reconcile_result *res, bool *ret_go)
{
        const char *host;
        int err;

        switch (maascluster_endpoint_type(&c->mc.spec)) {
        case ENDPOINT_VIP:
                return endpoint_vip(c, ret_go);
        case ENDPOINT_EXTERNAL:
                return endpoint_external(c, ret_go);
        case ENDPOINT_DNS:
                break;
        }
        adopt_reference_record(c);
        host = user_endpoint(c);

        *ret_go = false;
        if (host) {
                set_endpoint(c, host, api_port(kube_object_json(c->cluster)));
                err = flush(c, true);
                if (err)
                        return err;
                reconciler_cond(&c->conds, SCHEMA_COND_LOAD_BALANCER_READY, SCHEMA_CONDITION_TRUE,
                                SCHEMA_REASON_LOAD_BALANCER_READY,
                                "using the endpoint set on the Cluster");
                *ret_go = true;
                return 0;
        }
        if (!schema_strmap_get(&c->mc.meta.annotations, RECONCILER_ANNOTATION_DNS_RECORD)) {
                /* A new name waits a pass for the record; an older object's goes on. */
                bool fresh = record_name(c) == NULL;

                err = persist_record_name(c);
                if (err)
                        return err;
                if (fresh) {
                        reconciler_cond(&c->conds, SCHEMA_COND_LOAD_BALANCER_READY,
                                        SCHEMA_CONDITION_FALSE, SCHEMA_REASON_WAIT_FOR_DNS_NAME,
                                        "creating DNS record %s", record_name(c));
                        res->outcome = RECONCILE_REQUEUE_AFTER;
                        res->after_ms = 1;
                        return 0;
                }
        }
        status_dns_name(c, record_name(c));
        err = sync_record(c, record_name(c));
        if (err)
                return err;
        set_endpoint(c, record_name(c), api_port(kube_object_json(c->cluster)));
        /* The endpoint (spec) lands before ready (status): whoever sees ready sees it. */
        err = flush(c, true);
        if (err)
                return err;
        reconciler_cond(&c->conds, SCHEMA_COND_LOAD_BALANCER_READY, SCHEMA_CONDITION_TRUE,
                        SCHEMA_REASON_LOAD_BALANCER_READY, NULL);
        *ret_go = true;
        return 0;
}

static int reconcile_normal(struct maascluster_ctx *c, struct reconcile_result *res)
{
        bool go = false;
        int err;

        if (!schema_meta_has_finalizer(&c->mc.meta, SCHEMA_FINALIZER_CLUSTER)) {
                schema_strv_add(&c->mc.meta.finalizers, SCHEMA_FINALIZER_CLUSTER);
                return 0;
        }
        err = reconcile_endpoint(c, res, &go);
        if (err || !go)
                return err;
        return api_server(c, res);
}

static void count_key(void *arg, const char *ns, const char *name)
{
        (void)arg;
        (void)ns;
        (void)name;
}

/* Ready False/Deleting with the count still waited for (CAPI's deletion shape): written
 * directly, not summarised from LoadBalancerReady and APIServerAvailable, which still hold. */
static int flush_deleting(struct maascluster_ctx *c, size_t remaining)
{
        cJSON *after = NULL;
        int err;

        reconciler_cond(&c->conds, SCHEMA_COND_READY, SCHEMA_CONDITION_FALSE,
                        RECONCILER_REASON_DELETING, "waiting for %zu MaasMachine%s to be deleted",
                        remaining, remaining == 1 ? "" : "s");
        err = maas_cluster_encode(&c->mc, &after);
        if (err)
                return err;
        return reconciler_write(c->w, &KUBE_RES_MAASCLUSTERS, &c->cur, after, false, NULL);
}

static int reconcile_delete(struct maascluster_ctx *c, struct reconcile_result *res)
{
        enum endpoint_type type = maascluster_endpoint_type(&c->mc.spec);
        size_t n = 0;
        int err;

        if (!schema_meta_has_finalizer(&c->mc.meta, SCHEMA_FINALIZER_CLUSTER))
                return 0;
        if (schema_strmap_get(&c->mc.meta.annotations, RECONCILER_ANNOTATION_DELETE_FOR_MOVE)) {
                /* Moved to another management cluster, which now owns the record (or the
                 * VIP's reservation: never released for a move). */
                log_info(LOGGER, "delete for move: keeping the DNS record", "object=%s/%s", c->ns,
                         c->name);
                (void)schema_strv_remove(&c->mc.meta.finalizers, SCHEMA_FINALIZER_CLUSTER);
                return flush(c, true);
        }
        if (c->cluster_name) /* a count: nothing parsed */
                n = informer_each_key(c->p->maasmachines, c->ns, c->cluster_name, count_key, NULL);
        if (n > 0 && type == ENDPOINT_DNS && record_name(c) && !user_endpoint(c)) {
                /* Deleting control planes wait for their address to leave the record. */
                err = sync_record(c, record_name(c));
                if (err)
                        return err;
        }
        if (n > 0) {
                log_info(LOGGER, "waiting for MaasMachines to be deleted",
                         "object=%s/%s remaining=%zu", c->ns, c->name, n);
                res->outcome = RECONCILE_REQUEUE_AFTER;
                res->after_ms = 10000;
                return flush_deleting(c, n);
        }
        if (type == ENDPOINT_VIP) {
                err = delete_vip(c);
                if (err)
                        return err;
        } else if (type == ENDPOINT_DNS && record_name(c) && !user_endpoint(c)) {
                err = delete_record(c, record_name(c));
                if (err)
                        return err;
        }
        (void)schema_strv_remove(&c->mc.meta.finalizers, SCHEMA_FINALIZER_CLUSTER);
        return flush(c, true);
}

static int pass(struct maascluster_ctx *c, struct reconcile_result *res)
{
        const struct schema_owner_ref *o =
                schema_meta_owner(&c->mc.meta, RECONCILER_CAPI_GROUP, "Cluster");
        int err, ferr;

        c->cluster_name = o ? o->name : NULL;
        if (reconciler_externally_managed(kube_object_json(c->obj))) {
                log_debug(LOGGER, "managed by another controller: left alone", "object=%s/%s",
                          c->ns, c->name);
                return 0;
        }
        c->cluster = reconciler_owner(c->p, &c->mc.meta, "Cluster");
        /* Pause first: a paused delete (clusterctl move pauses, then deletes) does nothing. */
        if (reconciler_pause_condition(&c->conds, c->cluster ? kube_object_json(c->cluster) : NULL,
                                       kube_object_json(c->obj)))
                return flush(c, false);
        /* spec.identityRef: the DNS record lives in the cluster's own MAAS */
        if (!reconciler_maas_pick(c->w, c->ns, c->cluster_name,
                                  c->mc.spec.identity_ref ? c->mc.spec.identity_ref->name : NULL,
                                  &c->conds, kube_object_json(c->obj), res))
                return flush(c, false);
        if (c->mc.meta.deletion_timestamp)
                return reconcile_delete(c, res);
        if (!c->cluster) {
                log_debug(LOGGER, "waiting for the Cluster owner reference", "object=%s/%s", c->ns,
                          c->name);
                return 0;
        }
        failure_domains(c);
        err = reconcile_normal(c, res);
        ferr = flush(c, false);
        return err ? err : ferr;
}

int maascluster_reconcile(void *wctx,
                          const char *ns,
                          const char *name,
                          struct reconcile_result *res)
{
        struct reconciler_worker *w = wctx;
        struct maascluster_ctx c = { .w = w, .p = w->p, .ns = ns, .name = name };
        cJSON *enc = NULL;
        int err = 0;

        c.conds = (struct reconciler_conditions){ .list = &c.mc.status.conditions,
                                                  .status_present = &c.mc.status.present,
                                                  .generation = &c.mc.meta.generation,
                                                  .now = &c.now };

        maas_cluster_init(&c.mc);
        c.now = (time_t)clock_wall_s(w->p->clock);
        c.obj = informer_get(w->p->maasclusters, ns, name);
        if (!c.obj)
                return 0;
        if (maas_cluster_decode(kube_object_json(c.obj), &c.mc, NULL) != 0) {
                log_warn(LOGGER, "cannot decode the MaasCluster", "object=%s/%s", ns, name);
                goto out;
        }
        c.cur = cJSON_Duplicate(kube_object_json(c.obj), true);
        err = maas_cluster_encode(&c.mc, &enc);
        if (err == 0)
                err = legacy_migrate_status(w, &KUBE_RES_MAASCLUSTERS, &c.cur, enc);
        if (err == 0)
                err = pass(&c, res);
        if (err)
                log_info(LOGGER, "reconcile failed", "object=%s/%s error=%s", ns, name,
                         maas_strerror(err));
out:
        reconciler_worker_use_default(w);
        kube_object_unref(c.obj);
        kube_object_unref(c.cluster);
        maas_cluster_release(&c.mc);
        cJSON_Delete(c.cur);
        return err;
}
