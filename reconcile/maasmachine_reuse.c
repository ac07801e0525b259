/*
 * maasmachine_reuse: hosts kept for their owner through a rollout (what and why:
 * maasmachine_reuse.h, docs/host-reuse.md).
 */
#include "maasmachine_reuse.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "fleet_snapshot.h"
#include "json.h"
#include "log.h"
#include "maasmachine_steps.h"
#include "metrics.h"
#include "xalloc.h"

#define LOGGER            MAASMACHINE_LOGGER
#define LABEL_DEPLOYMENT  "cluster.x-k8s.io/deployment-name"
#define LABEL_CP_NAME     "cluster.x-k8s.io/control-plane-name"
#define WAIT_POLL_MS      2000
#define SWEEP_EVERY_MS    5000
#define UNTAG_AGAIN_S     30 /* a steady node's tags may be a refresh interval old */
#define REASON_WAIT_REUSE "WaitingForReusedHost"

/* --- the owner and its tag ------------------------------------------------------------- */

/* The owner of a MaasMachine from its labels (as Cluster API copies its Machine's), else its
 * Machine's: "MachineDeployment/<name>" or "KubeadmControlPlane/<name>". */
static bool owner_of(const struct schema_strmap *labels,
                     const cJSON *machine,
                     const cJSON *cluster,
                     char *out,
                     size_t len)
{
        const char *md = schema_strmap_get(labels, LABEL_DEPLOYMENT);
        const char *cp = schema_strmap_get(labels, LABEL_CP_NAME);
        bool is_cp = schema_strmap_get(labels, SCHEMA_LABEL_CONTROL_PLANE) != NULL;

        if (!md && machine)
                md = json_find_str(machine, "metadata", "labels", LABEL_DEPLOYMENT, NULL);
        if (!cp && machine)
                cp = json_find_str(machine, "metadata", "labels", LABEL_CP_NAME, NULL);
        is_cp = is_cp || (machine && json_find_str(machine, "metadata", "labels",
                                                   SCHEMA_LABEL_CONTROL_PLANE, NULL));
        if (!cp && is_cp && cluster)
                cp = json_find_str(cluster, "spec", "controlPlaneRef", "name", NULL);
        if (md && *md)
                return snprintf(out, len, "MachineDeployment/%s", md) < (int)len;
        if (is_cp && cp && *cp)
                return snprintf(out, len, "KubeadmControlPlane/%s", cp) < (int)len;
        return false;
}

static void tag_for(const char *ns,
                    const char *cluster,
                    const char *owner,
                    char out[MAASMACHINE_REUSE_TAG_MAX])
{
        char *key = xasprintf("%s/%s/%s", ns, cluster, owner);
        uint64_t h = reconciler_digest(key, strlen(key));

        (void)snprintf(out, MAASMACHINE_REUSE_TAG_MAX, MAASMACHINE_REUSE_TAG_PREFIX "%012" PRIx64,
                       (uint64_t)(h & 0xffffffffffffu));
        free(key);
}

static const char *cluster_name(const struct maasmachine_ctx *c)
{
        const char *l = schema_strmap_get(&c->mm.meta.labels, SCHEMA_LABEL_CLUSTER_NAME);

        return l ? l : c->cluster ? kube_object_name(c->cluster) : NULL;
}

bool maasmachine_reuse_tag(const struct maasmachine_ctx *c, char out[MAASMACHINE_REUSE_TAG_MAX])
{
        const char *cl = cluster_name(c);
        char owner[320];

        if (!c->mm.spec.node_reuse || !cl ||
            !owner_of(&c->mm.meta.labels, c->machine ? kube_object_json(c->machine) : NULL,
                      c->cluster ? kube_object_json(c->cluster) : NULL, owner, sizeof(owner)))
                return false;
        tag_for(c->ns, cl, owner, out);
        return true;
}

/* --- keep: tag, then release ----------------------------------------------------------- */

static bool refused(const struct maas_error *me)
{
        return me->cls == MAAS_ERR_FORBIDDEN || me->cls == MAAS_ERR_VALIDATION ||
               me->cls == MAAS_ERR_UNAUTHORIZED;
}

int maasmachine_reuse_keep(struct maasmachine_ctx *c, const char *sid)
{
        char tag[MAASMACHINE_REUSE_TAG_MAX], owner[320];
        const char *const add[] = { sid };
        struct maas_error me = { 0 };
        char *comment;
        int err;

        if (!maasmachine_reuse_tag(c, tag) ||
            (c->cluster &&
             json_find_str(kube_object_json(c->cluster), "metadata", "deletionTimestamp", NULL)))
                return 0; /* no reuse, or the whole cluster goes: nothing to come back to */
        (void)owner_of(&c->mm.meta.labels, c->machine ? kube_object_json(c->machine) : NULL,
                       c->cluster ? kube_object_json(c->cluster) : NULL, owner, sizeof(owner));
        comment = xasprintf("capmaas: hosts kept for %s/%s %s", c->ns, cluster_name(c), owner);
        err = maas_create_tag(c->w->maas, tag, comment, &me);
        reconciler_maas_count(c->p, "create_tag", err == CM_EEXIST ? 0 : err, &me);
        free(comment);
        if (err == CM_EEXIST)
                err = 0;
        maas_error_release(&me);
        if (err == 0) {
                err = maas_tag_update_nodes(c->w->maas, tag, add, 1, NULL, 0, &me);
                reconciler_maas_count(c->p, "tag_update_nodes", err, &me);
        }
        if (err && refused(&me)) {
                reconciler_event(c->p, c->cur, "Warning", "HostReuseFailed",
                                 "MAAS refused tag %s for host %s (%s): released without reuse",
                                 tag, sid, me.message ? me.message : maas_strerror(err));
                err = 0;
        } else if (err == 0) {
                pthread_mutex_lock(&c->p->lock);
                reconciler_table_put(&c->p->reuse_tags, tag)->a = (int64_t)c->now;
                pthread_mutex_unlock(&c->p->lock);
                log_info(LOGGER, "host kept for its owner", "object=%s/%s system_id=%s tag=%s",
                         c->ns, c->name, sid, tag);
        }
        maas_error_release(&me);
        return err;
}

/* --- allocate the kept hosts first ------------------------------------------------------ */

/* A MaasMachine of the same owner is being deleted and still names a host. */
static bool sibling_returning(const struct maasmachine_ctx *c, const char *tag)
{
        const char *cl = cluster_name(c);
        struct kube_object **objs = NULL;
        size_t n = 0;
        bool found = false;

        if (!cl || informer_list(c->p->maasmachines, c->ns, cl, &objs, &n) != 0)
                return false;
        for (size_t i = 0; i < n && !found; i++) {
                const cJSON *o = kube_object_json(objs[i]);
                const cJSON *labels = json_find(o, "metadata", "labels", NULL);
                struct schema_strmap lm = { 0 };
                const cJSON *l;
                char owner[320], t[MAASMACHINE_REUSE_TAG_MAX];

                if (!json_find_str(o, "metadata", "deletionTimestamp", NULL) ||
                    !cJSON_IsTrue(json_find(o, "spec", "nodeReuse", NULL)) ||
                    !json_find_str(o, "spec", "systemID", NULL))
                        continue;
                cJSON_ArrayForEach (l, labels)
                        if (cJSON_IsString(l))
                                schema_strmap_set(&lm, l->string, l->valuestring);
                if (owner_of(&lm, NULL, c->cluster ? kube_object_json(c->cluster) : NULL, owner,
                             sizeof(owner))) {
                        tag_for(c->ns, cl, owner, t);
                        found = strcmp(t, tag) == 0;
                }
                schema_strmap_release(&lm);
        }
        kube_object_list_free(objs, n);
        return found;
}

/* The tagged hosts: how many Ready, how many on their way to Ready. */
static int tagged_hosts(struct maasmachine_ctx *c, const char *tag, size_t *ready, size_t *coming)
{
        const char *const tags[] = { tag };
        struct maas_node_list l = { 0 };
        struct maas_error me = { 0 };
        int err;

        *ready = *coming = 0;
        err = maas_list_machines(c->w->maas,
                                 &(struct maas_node_filter){ .tags = tags, .n_tags = 1 }, &l, &me);
        reconciler_maas_count(c->p, "list_machines", err, &me);
        if (err && me.cls == MAAS_ERR_VALIDATION)
                err = 0; /* no such tag yet: nothing kept */
        maas_error_release(&me);
        for (size_t i = 0; i < l.n; i++) {
                const char *st = l.items[i].status_name ? l.items[i].status_name : "";

                *ready += strcmp(st, "Ready") == 0;
                *coming += strcmp(st, "Releasing") == 0 || strcmp(st, "Disk erasing") == 0;
        }
        maas_node_list_release(&l);
        return err;
}

static bool young(const struct maasmachine_ctx *c)
{
        int64_t born = reconciler_parse_time(c->mm.meta.creation_timestamp);

        return born < 0 || (uint64_t)(c->now - born) * 1000u < c->p->settings.reuse_hold_ms;
}

static int allocate_tagged(struct maasmachine_ctx *c,
                           const struct maas_allocate_opts *o,
                           const char *tag,
                           struct maas_node *ret,
                           bool *ret_got)
{
        const char **tags = xcalloc(o->n_tags + 1, sizeof(*tags));
        struct maas_allocate_opts t = *o;
        struct maas_error me = { 0 };
        int err;

        *ret_got = false;
        for (size_t i = 0; i < o->n_tags; i++)
                tags[i] = o->tags[i];
        tags[o->n_tags] = tag;
        t.tags = tags;
        t.n_tags = o->n_tags + 1;
        if (c->mm.meta.uid) /* as any allocate: only a list by its UID tells what MAAS did */
                fleet_snapshot_allocating(c->p, c->mm.meta.uid);
        err = maas_allocate(c->w->maas, &t, ret, &me);
        reconciler_maas_count(c->p, "allocate", err, &me);
        if (err == MAAS_ENOMATCH) { /* the kept hosts do not fit this template: a fresh one */
                log_info(LOGGER, "no kept host matches; allocating another", "object=%s/%s tag=%s",
                         c->ns, c->name, tag);
                err = 0;
        } else if (err == 0) {
                *ret_got = true;
        }
        maas_error_release(&me);
        free(tags);
        return err;
}

int maasmachine_reuse_allocate(struct maasmachine_ctx *c,
                               const struct maas_allocate_opts *o,
                               struct maas_node *ret,
                               struct reconcile_result *res,
                               enum maasmachine_reuse_outcome *ret_outcome)
{
        char tag[MAASMACHINE_REUSE_TAG_MAX];
        size_t ready = 0, coming = 0;
        bool got = false;
        int err;

        *ret_outcome = MAASMACHINE_REUSE_NONE;
        if (!maasmachine_reuse_tag(c, tag))
                return 0;
        err = tagged_hosts(c, tag, &ready, &coming);
        if (err)
                return err;
        if (ready) {
                err = allocate_tagged(c, o, tag, ret, &got);
                if (err || !got)
                        return err;
                *ret_outcome = MAASMACHINE_REUSE_GOT;
                reconciler_event(c->p, c->cur, "Normal", "HostReused",
                                 "Reused MAAS machine %s (%s), kept for this owner (tag %s)",
                                 ret->system_id, ret->hostname ? ret->hostname : "", tag);
                return 0;
        }
        if ((coming || sibling_returning(c, tag)) && young(c)) {
                *ret_outcome = MAASMACHINE_REUSE_WAIT;
                reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                                REASON_WAIT_REUSE,
                                "waiting for a host of this owner to come back from release "
                                "(tag %s)",
                                tag);
                maasmachine_requeue(res, WAIT_POLL_MS);
        }
        return 0;
}

char **maasmachine_reuse_exclude(struct maasmachine_ctx *c,
                                 struct maas_allocate_opts *o,
                                 size_t *ret_n)
{
        char own[MAASMACHINE_REUSE_TAG_MAX] = "";
        char **v = NULL;
        size_t n = 0;

        *ret_n = 0;
        (void)maasmachine_reuse_tag(c, own);
        pthread_mutex_lock(&c->p->lock);
        for (size_t i = 0; i < c->p->reuse_tags.n; i++) {
                const char *t = c->p->reuse_tags.items[i].key;

                if (strcmp(t, own) == 0)
                        continue;
                if (!v) {
                        v = xcalloc(o->n_not_tags + c->p->reuse_tags.n, sizeof(*v));
                        for (; n < o->n_not_tags; n++)
                                v[n] = xstrdup(o->not_tags[n]);
                }
                v[n++] = xstrdup(t);
        }
        pthread_mutex_unlock(&c->p->lock);
        if (v) {
                o->not_tags = (const char *const *)v;
                o->n_not_tags = n;
                *ret_n = n;
        }
        return v;
}

void maasmachine_reuse_exclude_free(char **v, size_t n)
{
        for (size_t i = 0; v && i < n; i++)
                free(v[i]);
        free(v);
}

/* --- metrics ---------------------------------------------------------------------------- */

void maasmachine_reuse_count(struct provider *p, bool reused)
{
        if (p->reuse_allocations)
                metric_counter_inc(
                        metric_series(p->reuse_allocations, reused ? "reused" : "fresh"));
}

int maasmachine_reuse_metrics(struct provider *p)
{
        static const char *const source[] = { "source", NULL };
        struct metric_family *f = NULL;
        int err;

        if (!p->metrics)
                return 0;
        err = metrics_counter(p->metrics, "capmaas_host_reuse_allocations_total",
                              "MAAS machines allocated for MaasMachines, by source: a host kept "
                              "for the owner (reused) or any other (fresh).",
                              source, &p->reuse_allocations);
        if (err == 0)
                err = metrics_gauge(p->metrics, "capmaas_host_reuse_waiting_hosts",
                                    "Ready MAAS machines carrying a capmaas reuse tag, kept for "
                                    "their owner until the hold time ends.",
                                    NULL, &f);
        if (err == 0) {
                p->reuse_waiting = metric_series(f, NULL);
                f = NULL;
                err = metrics_counter(p->metrics, "capmaas_host_reuse_tags_expired_total",
                                      "Reuse tags removed from hosts left unused for the hold "
                                      "time (--host-reuse-hold).",
                                      NULL, &f);
        }
        if (err == 0) {
                p->reuse_expired = metric_series(f, NULL);
                /* both sources shown from the start, at 0 */
                (void)metric_series(p->reuse_allocations, "reused");
                (void)metric_series(p->reuse_allocations, "fresh");
        }
        return err;
}

/* --- untag once deployed again ---------------------------------------------------------- */

void maasmachine_reuse_deployed(struct maasmachine_ctx *c)
{
        const char *sid = c->node.system_id;
        const char *const remove[] = { sid };
        struct reconciler_entry *e;
        int64_t now = (int64_t)c->now;

        for (size_t i = 0; c->have_node && sid && i < c->node.tags.n; i++) {
                const char *tag = c->node.tags.v[i];
                struct maas_error me = { 0 };
                bool recent;
                int err;

                if (strncmp(tag, MAASMACHINE_REUSE_TAG_PREFIX,
                            strlen(MAASMACHINE_REUSE_TAG_PREFIX)) != 0)
                        continue;
                pthread_mutex_lock(&c->p->lock);
                e = reconciler_table_get(&c->p->reuse_untagged, sid);
                recent = e && now - e->a < UNTAG_AGAIN_S;
                pthread_mutex_unlock(&c->p->lock);
                if (recent)
                        continue;
                err = maas_tag_update_nodes(c->w->maas, tag, NULL, 0, remove, 1, &me);
                reconciler_maas_count(c->p, "tag_update_nodes", err, &me);
                if (err == 0 || err == CM_ENOTFOUND) {
                        log_info(LOGGER, "deployed again: reuse tag removed",
                                 "object=%s/%s system_id=%s tag=%s", c->ns, c->name, sid, tag);
                        pthread_mutex_lock(&c->p->lock);
                        reconciler_table_put(&c->p->reuse_untagged, sid)->a = now;
                        pthread_mutex_unlock(&c->p->lock);
                } else {
                        log_warn(LOGGER, "removing the reuse tag failed",
                                 "object=%s/%s system_id=%s tag=%s error=%s", c->ns, c->name, sid,
                                 tag, me.message ? me.message : maas_strerror(err));
                }
                maas_error_release(&me);
        }
}

/* --- hold time -------------------------------------------------------------------------- */

struct tagged {
        char *sid, *tag;
        bool ready, expire;
};

/* Every host carrying a reuse tag (appended to *v). */
static int list_tagged(struct reconciler_worker *w, struct tagged **v, size_t *n)
{
        struct maas_named_list tags = { 0 };
        struct maas_error me = { 0 };
        int err = maas_list_tags(w->maas, &tags, &me);

        reconciler_maas_count(w->p, "list_tags", err, &me);
        maas_error_release(&me);
        for (size_t i = 0; err == 0 && i < tags.n; i++) {
                const char *name = tags.items[i].name;
                const char *const one[] = { name };
                struct maas_node_list l = { 0 };

                if (!name || strncmp(name, MAASMACHINE_REUSE_TAG_PREFIX,
                                     strlen(MAASMACHINE_REUSE_TAG_PREFIX)) != 0)
                        continue;
                err = maas_list_machines(
                        w->maas, &(struct maas_node_filter){ .tags = one, .n_tags = 1 }, &l, &me);
                reconciler_maas_count(w->p, "list_machines", err, &me);
                maas_error_release(&me);
                for (size_t j = 0; err == 0 && j < l.n; j++) {
                        *v = xrealloc(*v, (*n + 1) * sizeof(**v));
                        (*v)[(*n)++] = (struct tagged){
                                .sid = xstrdup(l.items[j].system_id),
                                .tag = xstrdup(name),
                                .ready = l.items[j].status_name &&
                                         strcmp(l.items[j].status_name, "Ready") == 0,
                        };
                }
                maas_node_list_release(&l);
        }
        maas_named_list_release(&tags);
        return err;
}

/* Under p->lock: first-seen times of the Ready ones (key "<sid> <tag>", a = ms), which are
 * due; entries not seen this sweep go. Returns how many wait. */
static size_t mark_due(struct provider *p, struct tagged *v, size_t n, uint64_t now_ms)
{
        size_t waiting = 0;

        for (size_t i = 0; i < p->reuse_held.n; i++)
                p->reuse_held.items[i].b = 0;
        for (size_t i = 0; i < n; i++) {
                char *key = xasprintf("%s %s", v[i].sid, v[i].tag);
                struct reconciler_entry *e = reconciler_table_get(&p->reuse_held, key);

                if (v[i].ready) {
                        if (!e) {
                                e = reconciler_table_put(&p->reuse_held, key);
                                e->a = (int64_t)now_ms;
                        }
                        e->b = 1;
                        v[i].expire = now_ms - (uint64_t)e->a >= p->settings.reuse_hold_ms;
                        waiting += !v[i].expire;
                }
                free(key);
        }
        for (size_t i = p->reuse_held.n; i-- > 0;)
                if (!p->reuse_held.items[i].b)
                        reconciler_table_del(&p->reuse_held, p->reuse_held.items[i].key);
        /* the tags others leave alone: those on a host still kept (or on its way back) */
        reconciler_table_release(&p->reuse_tags);
        p->reuse_tags = (struct reconciler_table){ 0 };
        for (size_t i = 0; i < n; i++)
                if (!v[i].expire)
                        reconciler_table_put(&p->reuse_tags, v[i].tag);
        return waiting;
}

void maasmachine_reuse_sweep(struct reconciler_worker *w)
{
        struct provider *p = w->p;
        uint64_t now = clock_now_ms(p->clock), last = atomic_load(&p->reuse_swept_ms);
        struct tagged *v = NULL;
        size_t n = 0, waiting;

        if ((last && now - last < SWEEP_EVERY_MS) ||
            !atomic_compare_exchange_strong(&p->reuse_swept_ms, &last, now ? now : 1))
                return;
        if (list_tagged(w, &v, &n) == 0) {
                pthread_mutex_lock(&p->lock);
                waiting = mark_due(p, v, n, now);
                pthread_mutex_unlock(&p->lock);
                if (p->reuse_waiting)
                        metric_gauge_set(p->reuse_waiting, (double)waiting);
        }
        for (size_t i = 0; i < n; i++) {
                const char *const remove[] = { v[i].sid };
                struct maas_error me = { 0 };
                int err;

                if (v[i].expire) {
                        err = maas_tag_update_nodes(w->maas, v[i].tag, NULL, 0, remove, 1, &me);
                        reconciler_maas_count(p, "tag_update_nodes", err, &me);
                        if (err == 0) {
                                log_info(LOGGER, "hold time over: reuse tag removed",
                                         "system_id=%s tag=%s", v[i].sid, v[i].tag);
                                if (p->reuse_expired)
                                        metric_counter_inc(p->reuse_expired);
                        }
                        maas_error_release(&me);
                }
                free(v[i].sid);
                free(v[i].tag);
        }
        free(v);
}
