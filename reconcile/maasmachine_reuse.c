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

#include "buf.h"
#include "clock.h"
#include "err.h"
#include "fleet_snapshot.h"
#include "json.h"
#include "log.h"
#include "maas_identity.h"
#include "maasmachine_steps.h"
#include "metrics.h"
#include "rfc3339.h"
#include "worker.h"
#include "xalloc.h"

#define LOGGER            MAASMACHINE_LOGGER
#define LABEL_DEPLOYMENT  "cluster.x-k8s.io/deployment-name"
#define LABEL_CP_NAME     "cluster.x-k8s.io/control-plane-name"
#define WAIT_POLL_MS      2000
#define SWEEP_EVERY_MS    5000
#define UNTAG_AGAIN_S     30 /* a steady node's tags may be a refresh interval old */
#define REASON_WAIT_REUSE "WaitingForReusedHost"

#define MAAS_KEY_SHARED "-" /* the process-wide MAAS in reuse_tags and reuse_swept */

/* The MAAS w calls now, as reuse_tags and reuse_swept name it. */
static const char *maas_key(const struct reconciler_worker *w)
{
        return w->ident ? w->ident->key : MAAS_KEY_SHARED;
}

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

/* tag made when absent (with comment), then put on sid; *me holds MAAS's refusal. */
static int tag_host(struct maasmachine_ctx *c,
                    const char *tag,
                    const char *comment,
                    const char *sid,
                    struct maas_error *me)
{
        const char *const add[] = { sid };
        int err = maas_create_tag(c->w->maas, tag, comment, me);

        reconciler_maas_count(c->p, "create_tag", err == CM_EEXIST ? 0 : err, me);
        if (err && err != CM_EEXIST)
                return err;
        maas_error_release(me);
        err = maas_tag_update_nodes(c->w->maas, tag, add, 1, NULL, 0, me);
        reconciler_maas_count(c->p, "tag_update_nodes", err, me);
        return err;
}

int maasmachine_reuse_keep(struct maasmachine_ctx *c, const char *sid)
{
        char tag[MAASMACHINE_REUSE_TAG_MAX], owner[320];
        struct maas_error me = { 0 };
        char *comment, *key;
        int err;

        if (!maasmachine_reuse_tag(c, tag) ||
            (c->cluster &&
             json_find_str(kube_object_json(c->cluster), "metadata", "deletionTimestamp", NULL)))
                return 0; /* no reuse, or the whole cluster goes: nothing to come back to */
        (void)owner_of(&c->mm.meta.labels, c->machine ? kube_object_json(c->machine) : NULL,
                       c->cluster ? kube_object_json(c->cluster) : NULL, owner, sizeof(owner));
        comment = xasprintf("capmaas: hosts kept for %s/%s %s", c->ns, cluster_name(c), owner);
        err = tag_host(c, tag, comment, sid, &me);
        if (err == CM_ENOTFOUND) { /* a sweep deleted it, empty, before the tagging: again */
                maas_error_release(&me);
                err = tag_host(c, tag, comment, sid, &me);
        }
        if (err && refused(&me)) {
                reconciler_event(c->p, c->cur, "Warning", "HostReuseFailed",
                                 "MAAS refused tag %s for host %s (%s): released without reuse",
                                 tag, sid, me.message ? me.message : maas_strerror(err));
                err = 0;
        } else if (err == 0) {
                key = xasprintf("%s %s", maas_key(c->w), tag);
                pthread_mutex_lock(&c->p->lock);
                reconciler_table_put(&c->p->reuse_tags, key)->a = (int64_t)c->now;
                pthread_mutex_unlock(&c->p->lock);
                free(key);
                log_info(LOGGER, "host kept for its owner", "object=%s/%s system_id=%s tag=%s",
                         c->ns, c->name, sid, tag);
        }
        maas_error_release(&me);
        free(comment);
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
        const char *mkey = maas_key(c->w);
        size_t klen = strlen(mkey);
        char **v = NULL;
        size_t n = 0;

        *ret_n = 0;
        (void)maasmachine_reuse_tag(c, own);
        pthread_mutex_lock(&c->p->lock);
        for (size_t i = 0; i < c->p->reuse_tags.n; i++) {
                const char *t = c->p->reuse_tags.items[i].key;

                if (strncmp(t, mkey, klen) != 0 || t[klen] != ' ')
                        continue; /* a tag of another MAAS: unknown to this one */
                t += klen + 1;
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

/* --- hold time ------------------------------------------------------------------------- */

/*
 * When each kept host's hold started is kept in MAAS, in its tag's comment, so a restart, a
 * second replica taking the lead or a clusterctl move goes on with the same clock:
 *
 *     capmaas: hosts kept for ns/cluster MachineDeployment/md; held since: 4y3h7n=<RFC 3339>
 *
 * The part before HELD_MARK is what maasmachine_reuse_keep wrote (for people); the entries
 * are the tagged hosts Ready at the last sweep and since when. Only the sweep writes them
 * (one sweep of a MAAS at a time in a process; only the leader reconciles).
 */
#define HELD_MARK    "; held since: "
#define HELD_ENTRIES 256 /* per tag: more than any MachineDeployment keeps at once */

struct held {
        char *sid;
        int64_t since; /* wall s */
};

struct held_set {
        char *human; /* the comment before HELD_MARK */
        struct held *v;
        size_t n;
};

static void held_set_release(struct held_set *h)
{
        for (size_t i = 0; i < h->n; i++)
                free(h->v[i].sid);
        free(h->v);
        free(h->human);
        *h = (struct held_set){ 0 };
}

static void held_add(struct held_set *h, const char *sid, size_t sid_len, int64_t since)
{
        if (h->n >= HELD_ENTRIES)
                return;
        h->v = xrealloc(h->v, (h->n + 1) * sizeof(*h->v));
        h->v[h->n++] = (struct held){ .sid = xstrndup(sid, sid_len), .since = since };
}

/* The comment's entries; a malformed one is skipped (that host's clock starts again). */
static void held_parse(const char *comment, struct held_set *h)
{
        const char *mark = comment ? strstr(comment, HELD_MARK) : NULL;
        const char *p;

        *h = (struct held_set){ 0 };
        if (!comment)
                comment = "";
        h->human = mark ? xstrndup(comment, (size_t)(mark - comment)) : xstrdup(comment);
        for (p = mark ? mark + strlen(HELD_MARK) : ""; *p;) {
                size_t len = strcspn(p, ",");
                const char *eq = memchr(p, '=', len);
                char stamp[40];
                int64_t t;

                while (len && p[len - 1] == ' ')
                        len--;
                if (eq && eq > p && (size_t)(p + len - eq - 1) < sizeof(stamp)) {
                        memcpy(stamp, eq + 1, (size_t)(p + len - eq - 1));
                        stamp[p + len - eq - 1] = '\0';
                        t = rfc3339_parse(stamp);
                        if (t >= 0)
                                held_add(h, p, (size_t)(eq - p), t);
                }
                p += strcspn(p, ",");
                p += strspn(p, ", ");
        }
}

static const struct held *held_find(const struct held_set *h, const char *sid)
{
        for (size_t i = 0; i < h->n; i++)
                if (strcmp(h->v[i].sid, sid) == 0)
                        return &h->v[i];
        return NULL;
}

/* The comment for h (malloc'd). */
static char *held_format(const struct held_set *h)
{
        struct buf b;
        char stamp[RFC3339_LEN];
        char *out;

        buf_init(&b, 64 * 1024);
        if (buf_printf(&b, "%s", h->human ? h->human : "") < 0)
                abort();
        for (size_t i = 0; i < h->n; i++) {
                rfc3339_format((time_t)h->v[i].since, stamp);
                if (buf_printf(&b, "%s%s=%s", i ? ", " : HELD_MARK, h->v[i].sid, stamp) < 0)
                        abort(); /* 256 entries of ~40 bytes: far below the cap */
        }
        out = buf_take(&b, NULL);
        buf_release(&b);
        return out ? out : xstrdup("");
}

static bool held_same(const struct held_set *a, const struct held_set *b)
{
        if (a->n != b->n)
                return false;
        for (size_t i = 0; i < a->n; i++) {
                const struct held *o = held_find(b, a->v[i].sid);

                if (!o || o->since != a->v[i].since)
                        return false;
        }
        return true;
}

/* What one sweep of one MAAS found. */
struct sweep {
        struct reconciler_worker *w;
        int64_t now_s;
        size_t waiting;
        char **kept; /* the reuse tags still holding a host (others leave them) */
        size_t n_kept;
};

static void sweep_keep_tag(struct sweep *sw, const char *tag)
{
        sw->kept = xrealloc(sw->kept, (sw->n_kept + 1) * sizeof(*sw->kept));
        sw->kept[sw->n_kept++] = xstrdup(tag);
}

static bool is_reuse_tag(const char *name)
{
        return name && strncmp(name, MAASMACHINE_REUSE_TAG_PREFIX,
                               strlen(MAASMACHINE_REUSE_TAG_PREFIX)) == 0;
}

/* No machine carries tag: it goes (a keep racing with this creates it again). */
static void delete_empty(struct sweep *sw, const char *tag)
{
        struct maas_error me = { 0 };
        int err = maas_delete_tag(sw->w->maas, tag, &me);

        reconciler_maas_count(sw->w->p, "delete_tag", err == CM_ENOTFOUND ? 0 : err, &me);
        if (err == 0)
                log_info(LOGGER, "no host carries the reuse tag: deleted", "maas=%s tag=%s",
                         maas_key(sw->w), tag);
        else if (err != CM_ENOTFOUND)
                log_info(LOGGER, "deleting an empty reuse tag failed", "maas=%s tag=%s error=%s",
                         maas_key(sw->w), tag, me.message ? me.message : maas_strerror(err));
        maas_error_release(&me);
}

/* Takes an expired host out of its tag; true when done. */
static bool expire(struct sweep *sw, const char *tag, const char *sid)
{
        const char *const remove[] = { sid };
        struct maas_error me = { 0 };
        int err = maas_tag_update_nodes(sw->w->maas, tag, NULL, 0, remove, 1, &me);

        reconciler_maas_count(sw->w->p, "tag_update_nodes", err, &me);
        if (err == 0) {
                log_info(LOGGER, "hold time over: reuse tag removed", "maas=%s system_id=%s tag=%s",
                         maas_key(sw->w), sid, tag);
                if (sw->w->p->reuse_expired)
                        metric_counter_inc(sw->w->p->reuse_expired);
        }
        maas_error_release(&me);
        return err == 0;
}

/* One reuse tag: its hosts' hold times read from the comment, the expired ones untagged, the
 * comment written when the Ready set or a start changed, the tag deleted once empty. */
static int sweep_tag(struct sweep *sw, const struct maas_named *t)
{
        const char *const one[] = { t->name };
        struct provider *p = sw->w->p;
        struct maas_node_list l = { 0 };
        struct maas_error me = { 0 };
        struct held_set old, now = { 0 };
        size_t gone = 0;
        bool keep = false;
        int err = maas_list_machines(
                sw->w->maas, &(struct maas_node_filter){ .tags = one, .n_tags = 1 }, &l, &me);

        reconciler_maas_count(p, "list_machines", err, &me);
        maas_error_release(&me);
        if (err)
                return err;
        if (l.n == 0) {
                delete_empty(sw, t->name);
                goto out;
        }
        held_parse(t->description, &old);
        now.human = xstrdup(old.human);
        for (size_t i = 0; i < l.n; i++) {
                const char *sid = l.items[i].system_id;
                const struct held *h = sid ? held_find(&old, sid) : NULL;
                int64_t since = h && h->since <= sw->now_s ? h->since : sw->now_s;

                if (!sid || !l.items[i].status_name || strcmp(l.items[i].status_name, "Ready")) {
                        keep = true; /* on its way back (or in use): its clock starts once Ready */
                        continue;
                }
                if ((uint64_t)(sw->now_s - since) * 1000u >= p->settings.reuse_hold_ms &&
                    expire(sw, t->name, sid)) {
                        gone++;
                        continue;
                }
                held_add(&now, sid, strlen(sid), since);
                sw->waiting++;
                keep = true;
        }
        if (gone == l.n) {
                delete_empty(sw, t->name);
        } else if (!held_same(&old, &now) || strcmp(old.human, now.human) != 0) {
                char *comment = held_format(&now);

                err = maas_update_tag_comment(sw->w->maas, t->name, comment, &me);
                reconciler_maas_count(p, "update_tag", err, &me);
                if (err) /* the next sweep writes it; the hosts keep their tags until then */
                        log_info(LOGGER, "recording the hold times failed", "tag=%s error=%s",
                                 t->name, me.message ? me.message : maas_strerror(err));
                maas_error_release(&me);
                free(comment);
                err = 0;
        }
        if (keep)
                sweep_keep_tag(sw, t->name);
        held_set_release(&old);
        held_set_release(&now);
out:
        maas_node_list_release(&l);
        return err;
}

/* Under p->lock: the MAAS's kept tags replace what reuse_tags held for it. */
static void record_kept(struct provider *p, const char *mkey, const struct sweep *sw)
{
        size_t klen = strlen(mkey);

        for (size_t i = p->reuse_tags.n; i-- > 0;) {
                const char *k = p->reuse_tags.items[i].key;

                if (strncmp(k, mkey, klen) == 0 && k[klen] == ' ')
                        reconciler_table_del(&p->reuse_tags, k);
        }
        for (size_t i = 0; i < sw->n_kept; i++) {
                char *key = xasprintf("%s %s", mkey, sw->kept[i]);

                reconciler_table_put(&p->reuse_tags, key)->a = sw->now_s;
                free(key);
        }
}

/* Whether the MAAS mkey is due a sweep (and then marked swept now). */
static bool sweep_due(struct provider *p, const char *mkey, uint64_t now_ms)
{
        struct reconciler_entry *e;
        bool due;

        pthread_mutex_lock(&p->lock);
        e = reconciler_table_get(&p->reuse_swept, mkey);
        due = !e || (int64_t)now_ms - e->a >= SWEEP_EVERY_MS;
        if (due) {
                e = e ? e : reconciler_table_put(&p->reuse_swept, mkey);
                e->a = (int64_t)now_ms;
        }
        pthread_mutex_unlock(&p->lock);
        return due;
}

/* Sweeps w's current MAAS (the process-wide one, or the pass's identity's). */
static void sweep_current(struct reconciler_worker *w)
{
        struct provider *p = w->p;
        const char *mkey = maas_key(w);
        struct sweep sw = { .w = w, .now_s = clock_wall_s(p->clock) };
        struct maas_named_list tags = { 0 };
        struct maas_error me = { 0 };
        double waiting = 0;
        int err = maas_list_tags(w->maas, &tags, &me);

        reconciler_maas_count(p, "list_tags", err, &me);
        maas_error_release(&me);
        for (size_t i = 0; err == 0 && i < tags.n; i++)
                if (is_reuse_tag(tags.items[i].name))
                        err = sweep_tag(&sw, &tags.items[i]);
        if (err == 0) {
                pthread_mutex_lock(&p->lock);
                record_kept(p, mkey, &sw);
                reconciler_table_put(&p->reuse_swept, mkey)->b = (int64_t)sw.waiting;
                for (size_t i = 0; i < p->reuse_swept.n; i++)
                        waiting += (double)p->reuse_swept.items[i].b;
                pthread_mutex_unlock(&p->lock);
                if (p->reuse_waiting)
                        metric_gauge_set(p->reuse_waiting, waiting);
        }
        maas_named_list_release(&tags);
        for (size_t i = 0; i < sw.n_kept; i++)
                free(sw.kept[i]);
        free(sw.kept);
}

void maasmachine_reuse_sweep(struct reconciler_worker *w)
{
        if (sweep_due(w->p, maas_key(w), clock_now_ms(w->p->clock)))
                sweep_current(w);
}

void maasmachine_reuse_sweep_ident(struct reconciler_worker *w, const char *ns, const char *secret)
{
        struct maas_ident_failure f = { 0 };
        struct maas_ident *id = NULL;
        char *key = xasprintf("%s/%s", ns, secret);
        int err = 0;

        if (!w->p->idents || !sweep_due(w->p, key, clock_now_ms(w->p->clock)))
                goto out;
        err = maas_ident_acquire(w->p->idents, w->kube, ns, secret, &id, &f);
        if (err == 0)
                err = reconciler_worker_use_ident(w, id); /* takes the reference */
        if (err == 0)
                sweep_current(w);
        else /* the clusters naming it say why (MAASAvailable); the next refresh tries again */
                log_debug(LOGGER, "no sweep of the identity's MAAS", "identity=%s error=%s", key,
                          f.message ? f.message : cm_strerror(err));
        reconciler_worker_use_default(w);
        maas_ident_failure_release(&f);
out:
        free(key);
}
