/*
 * maasmachine_network: a static address applied in MAAS between allocate and deploy, and
 * undone before the address can go back to whoever handed it out (docs/static-ips.md).
 *
 * Apply (an Allocated machine): the STATIC link is made on the named or the boot interface
 * (maas_link_static_ip: its AUTO link unlinked first). The machine it is made on is written
 * first in the static-ip-host annotation, so whatever releases the machine afterwards (a
 * failed deploy, a replacement, a lost host, a delete), the next pass finds the link to undo.
 * Any MAAS refusal releases the machine (after undoing what was done on it), sets
 * StaticIPApplied False/StaticIPFailed and a Warning event naming the address and MAAS's
 * message, and holds the next allocation back: 10 s, doubling per failure up to 5 min,
 * in the static-ip-retry annotation ("<failures> <not before, unix s>"), so no
 * allocate/release loop runs faster than that, whatever wakes the MaasMachine.
 *
 * Undo: MAAS changes links only on a New, Ready, Allocated or Broken machine, so a deployed
 * one is released first and undone once MAAS shows it Ready (the delete pass keeps its
 * finalizer until then): the STATIC link holding the address is unlinked and AUTO linked
 * again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "maasmachine_context.h"
#include "maasmachine_steps.h"
#include "xalloc.h"

#define LOGGER           MAASMACHINE_LOGGER
/* An earlier host still releasing: looked at again this soon. */
#define UNDO_WAIT_MS     2000u
#define ANNOTATION_HOST  RECONCILER_ANNOTATION_STATIC_IP_HOST
#define ANNOTATION_RETRY RECONCILER_ANNOTATION_STATIC_IP_RETRY

/* What the static-ip-host annotation records: "<system_id> <ip> <cidr> <interface|->", all
 * an undo needs (it never depends on the spec or on a claim still being there). */
struct linked {
        char *sid, *ip, *cidr, *iface; /* iface NULL = the boot interface */
};

static void linked_release(struct linked *l)
{
        free(l->sid);
        free(l->ip);
        free(l->cidr);
        free(l->iface);
        *l = (struct linked){ 0 };
}

static char *word(const char **p)
{
        const char *s = *p, *e;

        while (*s == ' ')
                s++;
        e = s + strcspn(s, " ");
        *p = e;
        return e > s ? xstrndup(s, (size_t)(e - s)) : NULL;
}

/* false when there is no annotation (or it is not one of ours). */
static bool linked_get(const struct maasmachine_ctx *c, struct linked *ret)
{
        const char *p = schema_strmap_get(&c->mm.meta.annotations, ANNOTATION_HOST);
        struct linked l = { 0 };

        if (!p)
                return false;
        l.sid = word(&p);
        l.ip = word(&p);
        l.cidr = word(&p);
        l.iface = word(&p);
        if (l.iface && strcmp(l.iface, "-") == 0) {
                free(l.iface);
                l.iface = NULL;
        }
        if (!l.sid || !l.ip || !l.cidr) {
                linked_release(&l);
                return false;
        }
        *ret = l;
        return true;
}

static void linked_set(struct maasmachine_ctx *c,
                       const char *sid,
                       const struct schema_static_ip *sip)
{
        char *v = xasprintf("%s %s %s %s", sid, sip->ip, sip->cidr,
                            sip->interface && *sip->interface ? sip->interface : "-");

        maasmachine_set_annotation(c, ANNOTATION_HOST, v);
        free(v);
}

static bool linked_on(const struct maasmachine_ctx *c, const char *sid)
{
        struct linked l;
        bool yes;

        if (!linked_get(c, &l))
                return false;
        yes = strcmp(l.sid, sid) == 0;
        linked_release(&l);
        return yes;
}

static const char *iface_name(const struct schema_static_ip *sip)
{
        return sip->interface && *sip->interface ? sip->interface : "the boot interface";
}

static struct maas_static_ip opts_of(const struct schema_static_ip *sip, int boot_interface_id)
{
        return (struct maas_static_ip){
                .interface = sip->interface && *sip->interface ? sip->interface : NULL,
                .boot_interface_id = boot_interface_id,
                .ip = sip->ip,
                .cidr = sip->cidr,
                .gateway = sip->gateway && *sip->gateway ? sip->gateway : NULL,
                .nameservers = (const char *const *)sip->nameservers.items,
                .n_nameservers = sip->nameservers.n,
        };
}

/* MAAS changes links only in these states (api/interfaces.py). */
static bool links_editable(const char *status)
{
        static const char *const ok[] = { "New", "Ready", "Allocated", "Broken", "Failed testing" };

        for (size_t i = 0; status && i < sizeof(ok) / sizeof(ok[0]); i++)
                if (strcmp(status, ok[i]) == 0)
                        return true;
        return false;
}

static bool releasing(const char *status)
{
        return status && (strcmp(status, "Releasing") == 0 || strcmp(status, "Disk erasing") == 0);
}

static const char *message_of(int err, const struct maas_error *me)
{
        if (err == CM_EFORBIDDEN)
                return "MAAS refused (403): only a MAAS administrator may change a machine's "
                       "interfaces";
        return me->message && *me->message ? me->message : maas_strerror(err);
}

/* --- backoff ------------------------------------------------------------------------------- */

/* The backoff of a refused static address. */
#define STATIC_IP_BACKOFF(c) \
        (&(const struct maasmachine_backoff){ ANNOTATION_RETRY, &(c)->p->static_ip_retry, 0 })

bool maasmachine_static_ip_backoff(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        return maasmachine_backoff_wait(c, STATIC_IP_BACKOFF(c), res);
}

/* --- undo ------------------------------------------------------------------------------------ */

/* Undoes the link l records. *ret_done: nothing of ours is left linked there (then the
 * annotation goes, when it is l's). Not done and no error: MAAS cannot change the links yet
 * (releasing, or deployed: *ret_status says which). */
static int undo_on(struct maasmachine_ctx *c,
                   const struct linked *l,
                   bool *ret_done,
                   char **ret_status)
{
        struct maas_node n = { 0 };
        struct maas_error me = { 0 };
        struct maas_static_ip o;
        int err = 0;

        *ret_done = false;
        if (c->have_node && strcmp(c->node.system_id, l->sid) == 0) {
                n.status_name = xstrdup(c->node.status_name ? c->node.status_name : "");
                n.boot_interface_id = c->node.boot_interface_id;
        } else {
                err = maas_get_machine(c->w->maas, l->sid, &n, &me);
                reconciler_maas_count(c->p, "get_machine", err, &me);
        }
        if (err == CM_ENOTFOUND) { /* gone from MAAS, and its addresses with it */
                err = 0;
                *ret_done = true;
                goto out;
        }
        if (err)
                goto out;
        if (!links_editable(n.status_name)) {
                *ret_status = xstrdup(n.status_name ? n.status_name : "");
                goto out;
        }
        o = (struct maas_static_ip){ .interface = l->iface,
                                     .boot_interface_id = n.boot_interface_id,
                                     .ip = l->ip,
                                     .cidr = l->cidr };
        err = maas_unlink_static_ip(c->w->maas, l->sid, &o, NULL, &me);
        reconciler_maas_count(c->p, "unlink_static_ip", err, &me);
        if (err == CM_ENOTFOUND && me.http_status == 404)
                err = 0; /* the machine went meanwhile */
        if (err)
                log_warn(LOGGER, "undoing the static address failed",
                         "object=%s/%s system_id=%s ip=%s error=%s", c->ns, c->name, l->sid, l->ip,
                         message_of(err, &me));
        else
                *ret_done = true;
out:
        if (*ret_done && linked_on(c, l->sid)) {
                maasmachine_set_annotation(c, ANNOTATION_HOST, NULL);
                log_info(LOGGER, "static address unlinked", "object=%s/%s system_id=%s ip=%s",
                         c->ns, c->name, l->sid, l->ip);
        }
        maas_node_release(&n);
        maas_error_release(&me);
        return err;
}

int maasmachine_network_undo(struct maasmachine_ctx *c, bool *ret_done, bool *ret_release)
{
        struct linked l = { 0 };
        char *status = NULL;
        int err;

        *ret_done = true;
        *ret_release = false;
        if (!linked_get(c, &l))
                return 0;
        err = undo_on(c, &l, ret_done, &status);
        if (err || *ret_done || releasing(status))
                goto out;
        /* a deployed machine of ours: released first, undone once Ready */
        *ret_release = c->have_node && strcmp(c->node.system_id, l.sid) == 0;
        if (*ret_release)
                goto out;
        /* deployed again, by someone else: not ours to change any more */
        reconciler_event(c->p, c->cur, "Warning", SCHEMA_REASON_STATIC_IP_FAILED,
                         "%s stays linked STATIC on MAAS machine %s, which is %s and no longer "
                         "held for this MaasMachine: unlink it in MAAS",
                         l.ip, l.sid, status ? status : "");
        maasmachine_set_annotation(c, ANNOTATION_HOST, NULL);
        *ret_done = true;
out:
        free(status);
        linked_release(&l);
        return err;
}

void maasmachine_static_ip_status(struct maasmachine_ctx *c)
{
        /* status is rebuilt every pass: applied while the machine we linked is held */
        if (c->have_node && linked_on(c, c->node.system_id))
                reconciler_cond(&c->conds, SCHEMA_COND_STATIC_IP_APPLIED, SCHEMA_CONDITION_TRUE,
                                SCHEMA_REASON_STATIC_IP_APPLIED, NULL);
}

/* --- apply ----------------------------------------------------------------------------------- */

/* MAAS refused: undo what was done on the machine, release it, report, back off. */
static void failed(struct maasmachine_ctx *c,
                   const struct schema_static_ip *sip,
                   const char *msg,
                   struct reconcile_result *res)
{
        char *sid = xstrdup(c->node.system_id);
        struct linked l = { .sid = xstrdup(sid),
                            .ip = xstrdup(sip->ip),
                            .cidr = xstrdup(sip->cidr ? sip->cidr : ""),
                            .iface = sip->interface && *sip->interface ? xstrdup(sip->interface)
                                                                       : NULL };
        bool done = false;
        char *status = NULL;
        unsigned delay;

        (void)!undo_on(c, &l, &done, &status);
        free(status);
        linked_release(&l);
        (void)!maasmachine_release(c, sid);
        maasmachine_set_ids(c, NULL, NULL);
        maasmachine_drop_node(c);
        delay = maasmachine_backoff_fail(c, STATIC_IP_BACKOFF(c));
        reconciler_cond(&c->conds, SCHEMA_COND_STATIC_IP_APPLIED, SCHEMA_CONDITION_FALSE,
                        SCHEMA_REASON_STATIC_IP_FAILED, "%s on %s: %s", sip->ip, iface_name(sip),
                        msg);
        reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                        SCHEMA_REASON_STATIC_IP_FAILED,
                        "static address %s could not be applied; released MAAS machine %s, "
                        "next try in %u s",
                        sip->ip, sid, delay);
        reconciler_event(c->p, c->cur, "Warning", SCHEMA_REASON_STATIC_IP_FAILED,
                         "%s on %s: %s; released MAAS machine %s", sip->ip, iface_name(sip), msg,
                         sid);
        log_info(LOGGER, "static address refused, machine released",
                 "object=%s/%s system_id=%s ip=%s error=%s retry_s=%u", c->ns, c->name, sid,
                 sip->ip, msg, delay);
        /* exactly the backoff, and long enough that this pass writes its status */
        res->outcome = RECONCILE_REQUEUE_AFTER;
        res->after_ms = (uint64_t)delay * 1000u;
        free(sid);
}

/* An earlier host still holds the link: undo it there first. *ret_go false: wait (it is
 * releasing) or give up (it is deployed by someone else: reported as a failure). */
static int undo_earlier_host(struct maasmachine_ctx *c,
                             const struct schema_static_ip *sip,
                             struct reconcile_result *res,
                             bool *ret_go)
{
        struct linked l = { 0 };
        char *status = NULL, *msg;
        bool done = false;
        int err = 0;

        *ret_go = true;
        if (!linked_get(c, &l))
                return 0;
        if (strcmp(l.sid, c->node.system_id) == 0)
                goto out;
        err = undo_on(c, &l, &done, &status);
        if (err || done)
                goto out;
        *ret_go = false;
        if (releasing(status)) {
                reconciler_cond(&c->conds, SCHEMA_COND_STATIC_IP_APPLIED, SCHEMA_CONDITION_FALSE,
                                SCHEMA_REASON_STATIC_IP_PENDING,
                                "%s is still linked on MAAS machine %s, which is %s", l.ip, l.sid,
                                status);
                maasmachine_requeue(res, UNDO_WAIT_MS);
                goto out;
        }
        msg = xasprintf("still linked on MAAS machine %s, which is %s: MAAS changes its links "
                        "only once it is released",
                        l.sid, status ? status : "");
        failed(c, sip, msg, res);
        free(msg);
out:
        free(status);
        linked_release(&l);
        return err;
}

int maasmachine_network_apply(struct maasmachine_ctx *c, struct reconcile_result *res, bool *ret_go)
{
        const struct schema_static_ip *sip = NULL;
        const struct schema_condition *k;
        struct maas_error me = { 0 };
        struct maas_static_ip o;
        char *sid;
        int err;

        *ret_go = true;
        if (!c->have_node)
                return 0;
        err = maasmachine_static_ip(c, &sip);
        if (err || !sip || !sip->ip || !sip->cidr) {
                *ret_go = err == 0;
                return err;
        }
        err = undo_earlier_host(c, sip, res, ret_go);
        if (err || !*ret_go)
                return err;
        sid = xstrdup(c->node.system_id);
        if (!linked_on(c, sid)) {
                /* recorded before the link exists: a crash in between leaves nothing unknown */
                linked_set(c, sid, sip);
                err = maasmachine_flush(c, true);
                if (err)
                        goto out;
        }
        o = opts_of(sip, c->node.boot_interface_id);
        err = maas_link_static_ip(c->w->maas, sid, &o, NULL, &me);
        reconciler_maas_count(c->p, "link_static_ip", err, &me);
        if (err) {
                *ret_go = false;
                failed(c, sip, message_of(err, &me), res);
                err = 0;
                goto out;
        }
        maasmachine_backoff_clear(c, STATIC_IP_BACKOFF(c));
        k = schema_conditions_find(&c->mm.status.conditions, SCHEMA_COND_STATIC_IP_APPLIED);
        if (!k || strcmp(k->status, SCHEMA_CONDITION_TRUE) != 0) /* once per link */
                reconciler_event(c->p, c->cur, "Normal", SCHEMA_REASON_STATIC_IP_APPLIED,
                                 "%s linked STATIC on %s of MAAS machine %s", sip->ip,
                                 iface_name(sip), sid);
        reconciler_cond(&c->conds, SCHEMA_COND_STATIC_IP_APPLIED, SCHEMA_CONDITION_TRUE,
                        SCHEMA_REASON_STATIC_IP_APPLIED, NULL);
out:
        maas_error_release(&me);
        free(sid);
        return err;
}
