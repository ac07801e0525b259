/*
 * maascluster_vip: the VIP reservation in MAAS and the External endpoint (maascluster_vip.h,
 * docs/endpoints.md).
 */
#include "maascluster_vip.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "informer.h"
#include "log.h"
#include "maas_client.h"
#include "worker.h"
#include "xalloc.h"

#define LOGGER "maascluster"

enum endpoint_type maascluster_endpoint_type(const struct maas_cluster_spec *s)
{
        const char *t = s->endpoint ? s->endpoint->type : NULL;

        if (t && strcmp(t, SCHEMA_ENDPOINT_VIP) == 0)
                return ENDPOINT_VIP;
        if (t && strcmp(t, SCHEMA_ENDPOINT_EXTERNAL) == 0)
                return ENDPOINT_EXTERNAL;
        return ENDPOINT_DNS;
}

const char *maascluster_vip_address(const struct maas_cluster *mc)
{
        const char *a = mc->spec.endpoint ? mc->spec.endpoint->address : NULL;
        const char *ann = schema_strmap_get(&mc->meta.annotations, RECONCILER_ANNOTATION_VIP);

        if (a && *a)
                return a;
        return ann && *ann ? ann : NULL;
}

/* Whether ip is one of the caller's reservations (GET ipaddresses/?ip=). */
static int held(struct vip_pass *v, const char *ip, bool *ret)
{
        struct maas_ip_address_list l = { 0 };
        struct maas_error me = { 0 };
        int err = maas_list_ip_addresses(v->w->maas, ip, false, &l, &me);

        reconciler_maas_count(v->p, "list_ip_addresses", err, &me);
        *ret = false;
        for (size_t i = 0; err == 0 && i < l.n; i++)
                *ret = *ret || (l.items[i].alloc_type == MAAS_ALLOC_USER_RESERVED ||
                                l.items[i].alloc_type < 0);
        if (err)
                log_info(LOGGER, "cannot read the VIP's reservation", "object=%s/%s ip=%s error=%s",
                         v->ns, v->name, ip, me.message ? me.message : maas_strerror(err));
        maas_ip_address_list_release(&l);
        maas_error_release(&me);
        return err;
}

/* The DNS label the reservation is made with: MAAS puts the address in the record of that
 * name (the reserve's hostname), which proves the reservation is this MaasCluster's; NULL
 * without a UID. Malloc'd. */
static char *proof_label(const struct vip_pass *v)
{
        const char *uid = v->mc->meta.uid;

        return uid && *uid ? xasprintf(MAASCLUSTER_VIP_PROOF_PREFIX "%s", uid) : NULL;
}

/* The records of this MaasCluster's label (GET dnsresources/?name=) into *ret: the
 * addresses it reserved, even before the annotation was written. */
static int proof_records(struct vip_pass *v, struct maas_dns_list *ret)
{
        struct maas_error me = { 0 };
        char *label = proof_label(v);
        int err = 0;

        *ret = (struct maas_dns_list){ 0 };
        if (!label)
                return 0;
        err = maas_list_dns_resources_named(v->w->maas, label, ret, &me);
        reconciler_maas_count(v->p, "list_dns_resources", err, &me);
        if (err)
                log_info(LOGGER, "cannot read the VIP's ownership record",
                         "object=%s/%s record=%s error=%s", v->ns, v->name, label,
                         me.message ? me.message : maas_strerror(err));
        maas_error_release(&me);
        free(label);
        return err;
}

static bool records_hold(const struct maas_dns_list *l, const char *ip)
{
        for (size_t i = 0; i < l->n; i++)
                for (size_t j = 0; j < l->items[i].ips.n; j++)
                        if (strcmp(l->items[i].ips.v[j], ip) == 0)
                                return true;
        return false;
}

/* Whether the reservation of ip is this MaasCluster's: its vip annotation names ip (it was
 * written after capmaas reserved or proved it, and clusterctl move copies it), or MAAS's
 * record of its label holds ip. */
static int owns(struct vip_pass *v, const char *ip, bool *ret)
{
        const char *ann = schema_strmap_get(&v->mc->meta.annotations, RECONCILER_ANNOTATION_VIP);
        struct maas_dns_list l = { 0 };
        int err;

        *ret = ann && strcmp(ann, ip) == 0;
        if (*ret)
                return 0;
        err = proof_records(v, &l);
        *ret = err == 0 && records_hold(&l, ip);
        maas_dns_list_release(&l);
        return err;
}

struct claim_scan {
        const char *ns, *name, *ip;
        char *who; /* "ns/name" of another MaasCluster holding ip */
};

static void claim_of(void *arg, struct kube_object *obj)
{
        struct claim_scan *cs = arg;
        const cJSON *o = kube_object_json(obj);
        const char *ns = kube_meta_str(o, "namespace"), *name = kube_meta_str(o, "name");
        const char *ann =
                json_find_str(o, "metadata", "annotations", RECONCILER_ANNOTATION_VIP, NULL);

        if (cs->who || !ann || strcmp(ann, cs->ip) != 0 || !ns || !name ||
            (strcmp(ns, cs->ns) == 0 && strcmp(name, cs->name) == 0))
                return;
        cs->who = xasprintf("%s/%s", ns, name);
}

/* Another MaasCluster of this management cluster whose vip annotation names ip: capmaas's
 * user holds that reservation for it, not for us (every cluster reserves as the same MAAS
 * user). The malloc'd "ns/name", or NULL. */
static char *claimed_elsewhere(struct vip_pass *v, const char *ip)
{
        struct claim_scan cs = { .ns = v->ns, .name = v->name, .ip = ip };

        (void)informer_each(v->p->maasclusters, NULL, NULL, claim_of, &cs);
        return cs.who;
}

static void refused(struct vip_pass *v, const char *what, int err, const struct maas_error *me)
{
        const char *msg = me->message ? me->message : maas_strerror(err);

        reconciler_cond(v->conds, SCHEMA_COND_LOAD_BALANCER_READY, SCHEMA_CONDITION_FALSE,
                        SCHEMA_REASON_VIP_RESERVATION_FAILED, "MAAS refused to reserve %s: %s",
                        what, msg);
        reconciler_event(v->p, v->obj, "Warning", SCHEMA_REASON_VIP_RESERVATION_FAILED,
                         "MAAS refused to reserve %s: %s", what, msg);
}

static int reserve(struct vip_pass *v, const char *ip, bool *ret_fresh_pick)
{
        const char *subnet = v->mc->spec.endpoint ? v->mc->spec.endpoint->subnet : NULL;
        struct maas_ip_address got = { 0 };
        struct maas_error me = { 0 };
        char *what = ip ? xstrdup(ip) : xasprintf("an address in subnet %s", subnet ? subnet : "");
        char *label = NULL;
        int err;

        if (!ip && !(subnet && *subnet)) {
                reconciler_cond(v->conds, SCHEMA_COND_LOAD_BALANCER_READY, SCHEMA_CONDITION_FALSE,
                                SCHEMA_REASON_VIP_RESERVATION_FAILED,
                                "spec.endpoint: a VIP needs an address or a subnet");
                err = CM_EINVAL;
                goto out;
        }
        label = proof_label(v);
        err = maas_reserve_ip(
                v->w->maas,
                &(struct maas_reserve_ip){ .ip = ip, .subnet = subnet, .hostname = label }, &got,
                &me);
        reconciler_maas_count(v->p, "reserve_ip", err, &me);
        if (err) {
                refused(v, what, err, &me);
                goto out;
        }
        if (!ip) {
                schema_strmap_set(&v->mc->meta.annotations, RECONCILER_ANNOTATION_VIP, got.ip);
                *ret_fresh_pick = true;
        }
        reconciler_event(v->p, v->obj, "Normal", "VIPReserved",
                         "Reserved %s in MAAS for the API endpoint", got.ip);
        log_info(LOGGER, "VIP reserved", "object=%s/%s ip=%s", v->ns, v->name, got.ip);
out:
        free(what);
        free(label);
        maas_ip_address_release(&got);
        maas_error_release(&me);
        return err;
}

/* No address yet: one MAAS picked for this MaasCluster before (the record of its label holds
 * it, the annotation was lost with a crash), else a new one. */
static int pick_or_find(struct vip_pass *v, bool *ret_fresh_pick)
{
        struct maas_dns_list l = { 0 };
        bool have = false;
        int err = proof_records(v, &l);

        for (size_t i = 0; err == 0 && i < l.n && !have; i++)
                for (size_t j = 0; err == 0 && j < l.items[i].ips.n && !have; j++) {
                        const char *ip = l.items[i].ips.v[j];

                        err = held(v, ip, &have);
                        if (err || !have)
                                continue;
                        schema_strmap_set(&v->mc->meta.annotations, RECONCILER_ANNOTATION_VIP, ip);
                        *ret_fresh_pick = true;
                        log_info(LOGGER, "VIP found by its ownership record", "object=%s/%s ip=%s",
                                 v->ns, v->name, ip);
                }
        maas_dns_list_release(&l);
        if (err == 0 && !have)
                err = reserve(v, NULL, ret_fresh_pick);
        return err;
}

static int not_ours(struct vip_pass *v, const char *ip)
{
        struct maas_error me = {
                .message = xasprintf("The IP address %s is reserved by capmaas's MAAS user, but "
                                     "not for this MaasCluster (no vip annotation, no DNS "
                                     "record " MAASCLUSTER_VIP_PROOF_PREFIX "%s holding it).",
                                     ip, v->mc->meta.uid ? v->mc->meta.uid : "")
        };

        refused(v, ip, CM_EEXIST, &me);
        maas_error_release(&me);
        return CM_EEXIST;
}

int maascluster_vip_ensure(struct vip_pass *v, bool *ret_fresh_pick)
{
        const char *ip = maascluster_vip_address(v->mc);
        bool have = false, mine = false;
        char *copy, *other;
        int err;

        *ret_fresh_pick = false;
        if (!ip)
                return pick_or_find(v, ret_fresh_pick);
        copy = xstrdup(ip); /* the annotation may be replaced below */
        other = claimed_elsewhere(v, copy);
        if (other) {
                struct maas_error me = { .message = xasprintf(
                                                 "The IP address %s is already reserved for "
                                                 "MaasCluster %s.",
                                                 copy, other) };

                refused(v, copy, CM_EEXIST, &me);
                maas_error_release(&me);
                free(other);
                free(copy);
                return CM_EEXIST;
        }
        err = held(v, copy, &have);
        if (err == 0 && have) /* adopted only with proof: another cluster of this user may */
                err = owns(v, copy, &mine); /* have reserved it and not annotated it yet */
        if (err == 0 && have && !mine)
                err = not_ours(v, copy);
        else if (err == 0 && !have)
                err = reserve(v, copy, ret_fresh_pick);
        if (err == 0)
                schema_strmap_set(&v->mc->meta.annotations, RECONCILER_ANNOTATION_VIP, copy);
        free(copy);
        return err;
}

int maascluster_vip_release(struct vip_pass *v)
{
        const char *ip = maascluster_vip_address(v->mc);
        struct maas_error me = { 0 };
        bool have = false;
        int err;

        if (!ip)
                return 0;
        err = held(v, ip, &have);
        if (err == 0 && have) /* a reservation this cluster was refused stays its owner's */
                err = owns(v, ip, &have);
        if (err || !have)
                return err;
        err = maas_release_ip(v->w->maas, ip, &me);
        reconciler_maas_count(v->p, "release_ip", err, &me);
        if (err == 0)
                reconciler_event(v->p, v->obj, "Normal", "VIPReleased",
                                 "Released %s, the API endpoint's reservation in MAAS", ip);
        else
                log_info(LOGGER, "cannot release the VIP", "object=%s/%s ip=%s error=%s", v->ns,
                         v->name, ip, me.message ? me.message : maas_strerror(err));
        maas_error_release(&me);
        return err;
}
