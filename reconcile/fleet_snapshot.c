/*
 * fleet_snapshot: two lists of the MAAS machines we hold, each refreshed by whichever worker
 * finds it due: the Deployed ones once per --machine-refresh-interval (beyond.md B6), and
 * those in flight (Allocated, Deploying) on the schedule of inflight_every_ms, so a rollout
 * reads MAAS 100 machines a call per interval instead of one GET per machine and poll
 * (issue 18). See fleet_snapshot.h.
 */
#include "fleet_snapshot.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "compiler.h"
#include "err.h"
#include "maas_identity.h"
#include "metrics.h"
#include "reconciler.h"
#include "worker.h"
#include "xalloc.h"

static void strv_copy(const struct maas_strv *src, struct maas_strv *dst)
{
        dst->n = src->n;
        dst->v = src->n ? xcalloc(src->n, sizeof(char *)) : NULL;
        for (size_t i = 0; i < src->n; i++)
                dst->v[i] = xstrdup(src->v[i]);
}

static char *dup_or_null(const char *s)
{
        return s ? xstrdup(s) : NULL;
}

static void node_copy(const struct maas_node *src, struct maas_node *dst)
{
        *dst = *src;
        dst->system_id = dup_or_null(src->system_id);
        dst->hostname = dup_or_null(src->hostname);
        dst->fqdn = dup_or_null(src->fqdn);
        dst->zone = dup_or_null(src->zone);
        dst->pool = dup_or_null(src->pool);
        dst->status_name = dup_or_null(src->status_name);
        dst->power_state = dup_or_null(src->power_state);
        dst->power_type = dup_or_null(src->power_type);
        dst->osystem = dup_or_null(src->osystem);
        dst->distro_series = dup_or_null(src->distro_series);
        dst->architecture = dup_or_null(src->architecture);
        dst->owner = dup_or_null(src->owner);
        dst->owner_data = src->owner_data ? cJSON_Duplicate(src->owner_data, true) : NULL;
        strv_copy(&src->tags, &dst->tags);
        strv_copy(&src->ip_addresses, &dst->ip_addresses);
}

/* ids a list call: ~100 machines' JSON, far under the client's 8 MiB response cap; the
 * URL stays under 5 KB even with UIDs (agent_name=, 48 bytes each), below the 8 KB request
 * line web servers accept by default */
#define FLEET_CHUNK       100
#define FLEET_MIN_WAIT_MS 100

/*
 * The in-flight list's interval, from the age of the youngest deploy in flight: 2 s while
 * it is under 16 s old (a deploy MAAS fails at once is replaced within seconds), then an
 * eighth of its age, at most 5 s (a deploy that completes is seen within 5 s). One list
 * per interval serves every machine in flight, so the schedule costs calls per interval,
 * never per machine; the 2 s floor keeps it from ever looping.
 */
#define INFLIGHT_MIN_MS 2000u
#define INFLIGHT_MAX_MS 5000u

static uint64_t inflight_every_ms(int64_t youngest_age_s)
{
        uint64_t ms = youngest_age_s > 0 ? (uint64_t)youngest_age_s * 125u : 0;

        if (ms < INFLIGHT_MIN_MS)
                return INFLIGHT_MIN_MS;
        return ms > INFLIGHT_MAX_MS ? INFLIGHT_MAX_MS : ms;
}

enum fleet_kind { FLEET_DEPLOYED, FLEET_INFLIGHT, FLEET_UNPLACED, FLEET_DELETING };

/* A deleting machine's list is due a second after the last: a release is decided on an
 * answer MAAS gave after the deletion was seen and at most about a second before. */
#define DELETING_EVERY_MS 1000u

/* The unplaced list asks only for UIDs it never asked (p->unplaced_none remembers the
 * rest): when none is new it makes no call, so it can be due often and a new MaasMachine
 * waits at most half a second before its allocate. */
#define UNPLACED_EVERY_MS 500u

struct fleet_ids {
        enum fleet_kind kind;
        const char *ident; /* the MAAS listed: its identity's key, NULL = the process-wide one */
        int64_t youngest;  /* the latest deploy-started among them (epoch seconds) */
        char **ids;
        size_t n, cap;
        char **covered; /* in-flight: the ids the Deployed list holds (sorted); unplaced:
                         * the UIDs known to have nothing stamped */
        size_t n_covered;
};

static int cmp_str(const void *a, const void *b);

/* What the lists need of one MaasMachine (p->fleet_index), from its latest event. */
struct fleet_rec {
        char *cluster;    /* "ns/<cluster-name label>": whose MAAS it lives in; NULL = none */
        char *uid;        /* NULL when it has none */
        char *sid;        /* spec.systemID or NULL */
        char *state;      /* status.machineState or NULL */
        int64_t started;  /* the deploy-started annotation's value */
        bool has_started; /* the annotation is there */
        bool has_provider_id, ready, deleting, failed;
};

static struct fleet_rec *rec_of(const struct kube_object *obj)
{
        const cJSON *o = kube_object_json(obj);
        const char *t = json_find_str(o, "metadata", "annotations",
                                      RECONCILER_ANNOTATION_DEPLOY_STARTED, NULL);
        const char *fr = json_find_str(o, "status", "failureReason", NULL);
        const char *cl =
                json_find_str(o, "metadata", "labels", "cluster.x-k8s.io/cluster-name", NULL);
        struct fleet_rec *r = xcalloc(1, sizeof(*r));

        r->cluster = cl ? xasprintf("%s/%s", kube_object_namespace(obj), cl) : NULL;
        r->uid = dup_or_null(kube_object_uid(obj));
        r->sid = dup_or_null(json_find_str(o, "spec", "systemID", NULL));
        r->state = dup_or_null(json_find_str(o, "status", "machineState", NULL));
        r->has_started = t != NULL;
        r->started = t ? strtoll(t, NULL, 10) : 0;
        r->has_provider_id = json_find_str(o, "spec", "providerID", NULL) != NULL;
        r->ready = cJSON_IsTrue(json_find(o, "status", "ready", NULL));
        r->deleting = json_find(o, "metadata", "deletionTimestamp", NULL) != NULL;
        r->failed = fr && *fr;
        return r;
}

static void rec_free(struct fleet_rec *r)
{
        if (!r)
                return;
        free(r->cluster);
        free(r->uid);
        free(r->sid);
        free(r->state);
        free(r);
}

static char *index_key(const struct kube_object *obj)
{
        return xasprintf("%s/%s", kube_object_namespace(obj), kube_object_name(obj));
}

/* capmaas_maasmachines{phase}: the index of p->mm_phase */
enum mm_phase {
        MM_PENDING,
        MM_ALLOCATED,
        MM_DEPLOYING,
        MM_READY,
        MM_FAILED,
        MM_DELETING,
        MM_PHASE_COUNT,
};

_Static_assert(MM_PHASE_COUNT == RECONCILER_MM_PHASES, "one series a phase");

static const char *const phase_names[MM_PHASE_COUNT] = {
        [MM_PENDING] = "pending", [MM_ALLOCATED] = "allocated", [MM_DEPLOYING] = "deploying",
        [MM_READY] = "ready",     [MM_FAILED] = "failed",       [MM_DELETING] = "deleting",
};

/* Deleting and failed win over everything; then Ready; a machine in MAAS's hands but not
 * Ready yet is deploying once MAAS deploys it (or has, before the Node and power checks). */
static enum mm_phase rec_phase(const struct fleet_rec *r)
{
        if (r->deleting)
                return MM_DELETING;
        if (r->failed)
                return MM_FAILED;
        if (r->ready)
                return MM_READY;
        if (!r->sid)
                return MM_PENDING;
        if (r->state && (strcmp(r->state, "Deploying") == 0 || strcmp(r->state, "Deployed") == 0))
                return MM_DEPLOYING;
        return MM_ALLOCATED;
}

/* Moves a MaasMachine's count from old's phase to cur's (either may be NULL). Called with
 * fleet_index_lock, so the gauges add up to the index's size. */
static void phase_move(struct provider *p, const struct fleet_rec *old, const struct fleet_rec *cur)
{
        if (!p->mm_phase[MM_PENDING]) /* no metrics */
                return;
        if (old)
                metric_gauge_dec(p->mm_phase[rec_phase(old)]);
        if (cur)
                metric_gauge_inc(p->mm_phase[rec_phase(cur)]);
}

int fleet_snapshot_phase_metrics(struct provider *p)
{
        static const char *const phase[] = { "phase", NULL };
        struct metric_family *f;
        int err;

        err = metrics_gauge(p->metrics, "capmaas_maasmachines",
                            "MaasMachines by phase: pending (no MAAS machine yet), allocated, "
                            "deploying, ready, failed (host lost), deleting.",
                            phase, &f);
        for (size_t i = 0; i < MM_PHASE_COUNT && err == 0; i++)
                err = metric_series_get(f, (const char *const[]){ phase_names[i], NULL },
                                        &p->mm_phase[i]);
        return err;
}

/* informer handler (the informer's thread): the record follows the object */
static void index_put(void *arg, const struct kube_object *obj)
{
        struct provider *p = arg;
        struct fleet_rec *r = rec_of(obj);
        char *key = index_key(obj);
        struct reconciler_entry *e;

        pthread_mutex_lock(&p->fleet_index_lock);
        e = reconciler_table_put(&p->fleet_index, key);
        phase_move(p, e->ptr, r);
        rec_free(e->ptr);
        e->ptr = r;
        pthread_mutex_unlock(&p->fleet_index_lock);
        free(key);
}

static void index_update(void *arg, const struct kube_object *old, const struct kube_object *cur)
{
        (void)old;
        index_put(arg, cur);
}

static void index_delete(void *arg, const struct kube_object *last)
{
        struct provider *p = arg;
        char *key = index_key(last);
        struct reconciler_entry *e;

        pthread_mutex_lock(&p->fleet_index_lock);
        e = reconciler_table_get(&p->fleet_index, key);
        if (e) {
                phase_move(p, e->ptr, NULL);
                rec_free(e->ptr);
                reconciler_table_del(&p->fleet_index, key);
        }
        pthread_mutex_unlock(&p->fleet_index_lock);
        free(key);
}

int fleet_snapshot_index_watch(struct provider *p)
{
        return informer_add_handler(p->maasmachines,
                                    &(struct informer_handler){ .on_add = index_put,
                                                                .on_update = index_update,
                                                                .on_delete = index_delete,
                                                                .arg = p });
}

void fleet_snapshot_index_release(struct provider *p)
{
        for (size_t i = 0; i < p->fleet_index.n; i++) {
                phase_move(p, p->fleet_index.items[i].ptr, NULL); /* a later provider recounts */
                rec_free(p->fleet_index.items[i].ptr);
        }
        reconciler_table_release(&p->fleet_index);
}

static bool covered(const struct fleet_ids *f, const char *id)
{
        return f->n_covered && bsearch(&id, f->covered, f->n_covered, sizeof(char *), cmp_str);
}

/* Deployed (status ready) and not in the Deployed list (neither listed by it nor taken from
 * an in-flight list since): the in-flight list reads it until one of them holds it, so its
 * passes meanwhile need no GET. */
static bool newly_deployed(const struct fleet_ids *f, const struct fleet_rec *r)
{
        return r->sid && r->state && strcmp(r->state, "Deployed") == 0 && r->ready &&
               !r->deleting && !covered(f, r->sid);
}

/* In flight: allocated by capmaas (a system id and deploy-started), not ready, deleting
 * or failed, and Allocated or Deploying (or no machineState yet: the pass that allocated
 * and deployed left status to the next). */
static bool in_flight(const char *sid,
                      const char *state,
                      bool has_started,
                      bool ready,
                      bool deleting,
                      bool failed)
{
        if (!sid || deleting || ready || failed || !has_started)
                return false;
        return !state || !*state || strcmp(state, "Allocated") == 0 ||
               strcmp(state, "Deploying") == 0;
}

static bool rec_in_flight(const struct fleet_rec *r)
{
        return in_flight(r->sid, r->state, r->has_started, r->ready, r->deleting, r->failed);
}

bool fleet_snapshot_in_flight(const cJSON *mm)
{
        const char *fr = json_find_str(mm, "status", "failureReason", NULL);

        return in_flight(json_find_str(mm, "spec", "systemID", NULL),
                         json_find_str(mm, "status", "machineState", NULL),
                         json_find_str(mm, "metadata", "annotations",
                                       RECONCILER_ANNOTATION_DEPLOY_STARTED, NULL) != NULL,
                         cJSON_IsTrue(json_find(mm, "status", "ready", NULL)),
                         json_find(mm, "metadata", "deletionTimestamp", NULL) != NULL, fr && *fr);
}

/* Keeps the id a MaasMachine's record gives the list's kind, if any. */
static void fleet_id_of(struct fleet_ids *f, const struct fleet_rec *r)
{
        const char *id = r->sid;

        if (f->kind == FLEET_UNPLACED) {
                id = r->uid;
                if (!id || r->sid || r->has_provider_id || r->deleting || covered(f, id))
                        return; /* placed, deleting, or already known to have nothing */
        } else if (f->kind == FLEET_DELETING) {
                if (!id || !r->deleting)
                        return;
        } else if (f->kind == FLEET_INFLIGHT) {
                if (rec_in_flight(r)) {
                        if (r->started > f->youngest)
                                f->youngest = r->started;
                } else if (!newly_deployed(f, r)) {
                        return;
                }
        } else if (!id || !r->state || strcmp(r->state, "Deployed") != 0) {
                return;
        }
        if (f->n == f->cap) {
                f->cap = f->cap ? f->cap * 2 : 64;
                f->ids = xrealloc(f->ids, f->cap * sizeof(*f->ids));
        }
        f->ids[f->n++] = xstrdup(id);
}

/* The ids of the list's kind, from the index (no object parsed): only the MaasMachines of
 * the clusters whose MAAS is listed (every one while no cluster names an identity). */
static void collect_ids(struct provider *p, struct fleet_ids *f)
{
        bool all = !maas_ident_any(p->idents);

        pthread_mutex_lock(&p->fleet_index_lock);
        for (size_t i = 0; i < p->fleet_index.n; i++) {
                const struct fleet_rec *r = p->fleet_index.items[i].ptr;

                if (all || maas_ident_cluster_is(p->idents, r->cluster, f->ident))
                        fleet_id_of(f, r);
        }
        pthread_mutex_unlock(&p->fleet_index_lock);
}

static int cmp_node_id(const void *a, const void *b)
{
        return strcmp(((const struct maas_node *)a)->system_id,
                      ((const struct maas_node *)b)->system_id);
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static void ids_release(char **ids, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(ids[i]);
        free(ids);
}

/* What one refresh read: the machines, sorted by system_id, and the ids it asked for. */
struct fleet_result {
        struct maas_node_list nodes;
        char **asked;
        size_t n_asked;
        uint64_t every_ms;
};

/* The interval of a list whose schedule does not adapt (the in-flight one's first). */
static uint64_t kind_every_ms(const struct provider *p, enum fleet_kind kind)
{
        switch (kind) {
        case FLEET_DEPLOYED:
                return p->settings.machine_refresh_ms;
        case FLEET_DELETING:
                return DELETING_EVERY_MS;
        case FLEET_UNPLACED:
                return UNPLACED_EVERY_MS;
        case FLEET_INFLIGHT:
                break;
        }
        return INFLIGHT_MIN_MS;
}

/*
 * A page of the unplaced list came back with no machine at all: nothing is stamped for its
 * UIDs, so they are remembered now (p->unplaced_none) rather than when each MaasMachine's
 * pass asks, which during a large rollout's backlog comes after the list asked for them
 * again and again. A page with machines leaves its UIDs to their passes.
 */
static void remember_nothing(struct provider *p, const char *const *uids, size_t n)
{
        pthread_mutex_lock(&p->lock);
        for (size_t i = 0; i < n; i++)
                (void)reconciler_table_put(&p->unplaced_none, uids[i]);
        pthread_mutex_unlock(&p->lock);
}

/* Lists every machine of the list's kind, 100 ids a call. Runs without the fleet lock:
 * lookups go on against the previous list meanwhile. */
static int fleet_fetch(struct reconciler_worker *w, enum fleet_kind kind, struct fleet_result *ret)
{
        struct provider *p = w->p;
        struct maas_node_list all = { 0 };
        struct maas_error me = { 0 };
        struct fleet_ids f = { .kind = kind, .ident = w->ident ? w->ident->key : NULL };
        int err = 0;

        if (kind == FLEET_INFLIGHT) {
                pthread_mutex_lock(&p->fleet_lock);
                f.n_covered =
                        w->fleets->fleet.n_asked; /* listed, or taken from an in-flight list */
                f.covered = f.n_covered ? xcalloc(f.n_covered, sizeof(char *)) : NULL;
                for (size_t i = 0; i < f.n_covered; i++)
                        f.covered[i] = xstrdup(w->fleets->fleet.asked[i]);
                pthread_mutex_unlock(&p->fleet_lock);
        } else if (kind == FLEET_UNPLACED) {
                /* a MaasMachine is asked for once: a rollout of 10 000 is 100 calls in all,
                 * not 100 every 2 s while they wait for machines */
                pthread_mutex_lock(&p->lock);
                f.n_covered = p->unplaced_none.n;
                f.covered = f.n_covered ? xcalloc(f.n_covered, sizeof(char *)) : NULL;
                for (size_t i = 0; i < f.n_covered; i++)
                        f.covered[i] = xstrdup(p->unplaced_none.items[i].key);
                pthread_mutex_unlock(&p->lock);
                if (f.n_covered > 1)
                        qsort(f.covered, f.n_covered, sizeof(char *), cmp_str);
        }
        collect_ids(p, &f);
        ids_release(f.covered, f.n_covered);
        if (f.n > 1) /* sorted: the lookups bsearch them, and the pages are stable */
                qsort(f.ids, f.n, sizeof(*f.ids), cmp_str);
        for (size_t off = 0; off < f.n && err == 0; off += FLEET_CHUNK) {
                struct maas_node_list part = { 0 };
                size_t m = f.n - off < FLEET_CHUNK ? f.n - off : FLEET_CHUNK;
                struct maas_node_filter q = { .ids = (const char *const *)f.ids + off, .n_ids = m };

                if (kind == FLEET_UNPLACED) /* the ids are UIDs: who holds a machine stamped */
                        q = (struct maas_node_filter){ .agent_names =
                                                               (const char *const *)f.ids + off,
                                                       .n_agent_names = m };

                err = maas_list_machines(w->maas, &q, &part, &me);
                reconciler_maas_count(p, "list_machines", err, &me);
                maas_error_release(&me);
                if (err == 0 && kind == FLEET_UNPLACED && part.n == 0)
                        remember_nothing(p, (const char *const *)f.ids + off, m);
                if (err == 0)
                        maas_node_list_append(&all, &part);
        }
        if (err) {
                ids_release(f.ids, f.n);
                maas_node_list_release(&all);
                return err;
        }
        if (all.n > 1)
                qsort(all.items, all.n, sizeof(*all.items), cmp_node_id);
        ret->nodes = all;
        ret->asked = f.ids;
        ret->n_asked = f.n;
        if (kind == FLEET_INFLIGHT)
                ret->every_ms = inflight_every_ms(
                        f.youngest ? (int64_t)clock_wall_s(p->clock) - f.youngest : 0);
        else
                ret->every_ms = kind_every_ms(p, kind);
        return 0;
}

static struct reconciler_fleet *fleet_of(struct reconciler_fleets *fs, enum fleet_kind kind)
{
        switch (kind) {
        case FLEET_INFLIGHT:
                return &fs->inflight;
        case FLEET_UNPLACED:
                return &fs->unplaced;
        case FLEET_DELETING:
                return &fs->deleting;
        case FLEET_DEPLOYED:
                break;
        }
        return &fs->fleet;
}

static uint64_t every_of(const struct provider *p,
                         const struct reconciler_fleet *f,
                         enum fleet_kind kind)
{
        if (f->every_ms)
                return f->every_ms;
        return kind_every_ms(p, kind);
}

/* The list is due (never fetched, or an interval old). Lock held. */
static bool fleet_due(const struct reconciler_worker *w, enum fleet_kind kind, uint64_t now)
{
        const struct reconciler_fleet *f = fleet_of(w->fleets, kind);

        return !f->fetched_ms || now - f->fetched_ms >= every_of(w->p, f, kind);
}

/* Whether this caller should fetch the next list: the list is due and nobody else is
 * fetching it. Lock held. */
static bool fleet_claim(struct reconciler_worker *w, enum fleet_kind kind, uint64_t now)
{
        struct reconciler_fleet *f = fleet_of(w->fleets, kind);

        if (f->refreshing || !fleet_due(w, kind, now))
                return false;
        f->refreshing = true;
        return true;
}

/*
 * The machines an in-flight list found Deployed join the Deployed list (nodes and asked,
 * merged by system_id; a newer entry replaces an older one) until the next Deployed list
 * replaces it: their passes meanwhile read them there, and the in-flight list no longer
 * asks for them (they are covered), so a machine is listed about once after its deploy
 * rather than every in-flight interval until the next Deployed list. fleet_lock held.
 */
static void fleet_take_deployed(struct reconciler_fleet *dst, const struct maas_node_list *src)
{
        struct maas_node *nodes;
        char **asked;
        size_t m = 0, i = 0, j = 0, n = 0, a = 0;

        for (size_t x = 0; x < src->n; x++)
                m += src->items[x].status_name && !strcmp(src->items[x].status_name, "Deployed");
        if (m == 0)
                return;
        nodes = xcalloc(dst->nodes.n + m, sizeof(*nodes));
        asked = xcalloc(dst->n_asked + m, sizeof(*asked));
        while (i < dst->nodes.n || j < src->n) {
                const struct maas_node *s = j < src->n ? &src->items[j] : NULL;
                int d;

                if (s && (!s->status_name || strcmp(s->status_name, "Deployed") != 0)) {
                        j++;
                        continue;
                }
                d = !s ? -1 : i == dst->nodes.n ? 1 : cmp_node_id(&dst->nodes.items[i], s);
                if (d < 0) {
                        nodes[n++] = dst->nodes.items[i++];
                        continue;
                }
                if (d == 0)
                        maas_node_release(&dst->nodes.items[i++]);
                node_copy(s, &nodes[n++]);
                j++;
        }
        /* the ids: the old ones and the taken ones, once each */
        for (i = 0, j = 0; i < dst->n_asked || j < src->n;) {
                const struct maas_node *s = j < src->n ? &src->items[j] : NULL;
                int d;

                if (s && (!s->status_name || strcmp(s->status_name, "Deployed") != 0)) {
                        j++;
                        continue;
                }
                d = !s ? -1 : i == dst->n_asked ? 1 : strcmp(dst->asked[i], s->system_id);
                if (d <= 0)
                        asked[a++] = dst->asked[i++];
                if (d >= 0) {
                        if (d > 0)
                                asked[a++] = xstrdup(s->system_id);
                        j++;
                }
        }
        free(dst->nodes.items);
        free(dst->asked);
        dst->nodes.items = nodes;
        dst->nodes.n = n;
        dst->asked = asked;
        dst->n_asked = a;
}

static void fleet_refresh(struct reconciler_worker *w, enum fleet_kind kind)
{
        struct provider *p = w->p;
        struct reconciler_fleet *f = fleet_of(w->fleets, kind);
        struct fleet_result r = { 0 };
        int err = fleet_fetch(w, kind, &r);

        pthread_mutex_lock(&p->fleet_lock);
        if (err == 0) {
                maas_node_list_release(&f->nodes);
                ids_release(f->asked, f->n_asked);
                f->nodes = r.nodes;
                f->asked = r.asked;
                f->n_asked = r.n_asked;
                f->every_ms = r.every_ms;
                f->valid = true;
                if (kind == FLEET_INFLIGHT)
                        fleet_take_deployed(&w->fleets->fleet, &f->nodes);
        }
        /* after a failure too: the next attempt waits an interval, lookups fall back to a
         * GET per machine meanwhile only if no list was ever fetched */
        f->err = err;
        f->fetched_ms = clock_now_ms(p->clock);
        f->refreshing = false;
        pthread_cond_broadcast(&p->fleet_cond);
        pthread_mutex_unlock(&p->fleet_lock);
}

static uint64_t next_ms(struct reconciler_worker *w, enum fleet_kind kind)
{
        struct provider *p = w->p;
        uint64_t now = clock_now_ms(p->clock), every, at;
        const struct reconciler_fleet *f = fleet_of(w->fleets, kind);

        pthread_mutex_lock(&p->fleet_lock);
        every = every_of(p, f, kind);
        at = f->fetched_ms ? f->fetched_ms + every : 0;
        pthread_mutex_unlock(&p->fleet_lock);
        if (!at || at <= now)
                return every;
        return at - now < FLEET_MIN_WAIT_MS ? FLEET_MIN_WAIT_MS : at - now;
}

uint64_t fleet_snapshot_next_ms(struct reconciler_worker *w)
{
        return next_ms(w, FLEET_DEPLOYED);
}

uint64_t fleet_snapshot_inflight_next_ms(struct reconciler_worker *w)
{
        return next_ms(w, FLEET_INFLIGHT);
}

uint64_t fleet_snapshot_unplaced_next_ms(struct reconciler_worker *w)
{
        return next_ms(w, FLEET_UNPLACED);
}

/* Refreshes the list when due, or waits for a due list another worker is fetching, so
 * every pass of an interval sees that interval's list. Lock not held. */
/* Refreshes the list of kind when due (or waits for the refresh under way). Returns the
 * error of that refresh, 0 when it succeeded or none was due: news of this call, never an
 * older failure (a pass that found the list not due still asks MAAS itself). */
static int fleet_fresh(struct reconciler_worker *w, enum fleet_kind kind)
{
        struct provider *p = w->p;
        uint64_t now = clock_now_ms(p->clock);
        bool fetch, waited = false;
        int err = 0;

        pthread_mutex_lock(&p->fleet_lock);
        fetch = fleet_claim(w, kind, now);
        while (!fetch && fleet_of(w->fleets, kind)->refreshing && fleet_due(w, kind, now)) {
                pthread_cond_wait(&p->fleet_cond, &p->fleet_lock);
                waited = true;
        }
        if (waited)
                err = fleet_of(w->fleets, kind)->err;
        pthread_mutex_unlock(&p->fleet_lock);
        if (fetch) {
                fleet_refresh(w, kind);
                pthread_mutex_lock(&p->fleet_lock);
                err = fleet_of(w->fleets, kind)->err;
                pthread_mutex_unlock(&p->fleet_lock);
        }
        return err;
}

/* Copies system_id's entry of f into *ret. Lock held. */
static bool fleet_find(const struct reconciler_fleet *f,
                       const char *system_id,
                       struct maas_node *ret)
{
        struct maas_node key = { .system_id = (char *)(uintptr_t)system_id };
        const struct maas_node *hit = f->valid && f->nodes.n
                                              ? bsearch(&key, f->nodes.items, f->nodes.n,
                                                        sizeof(*f->nodes.items), cmp_node_id)
                                              : NULL;

        if (hit)
                node_copy(hit, ret);
        return hit != NULL;
}

/* Whether the last list of f asked MAAS for system_id. Lock held. */
static bool fleet_asked(const struct reconciler_fleet *f, const char *system_id)
{
        const char *key = system_id;

        return f->valid && f->n_asked &&
               bsearch(&key, f->asked, f->n_asked, sizeof(*f->asked), cmp_str) != NULL;
}

int fleet_snapshot_lookup(struct reconciler_worker *w, const char *system_id, struct maas_node *ret)
{
        struct provider *p = w->p;
        uint64_t now;
        bool hit;

        (void)fleet_fresh(w, FLEET_DEPLOYED);
        pthread_mutex_lock(&p->fleet_lock);
        hit = fleet_find(&w->fleets->fleet, system_id, ret);
        /* Just Deployed, after the last Deployed list: the in-flight list saw it, and is
         * answer enough while it is no older than the Deployed list may be. */
        now = clock_now_ms(p->clock);
        if (!hit && w->fleets->inflight.fetched_ms &&
            now - w->fleets->inflight.fetched_ms < p->settings.machine_refresh_ms)
                hit = fleet_find(&w->fleets->inflight, system_id, ret);
        pthread_mutex_unlock(&p->fleet_lock);
        return hit ? 0 : CM_ENOTFOUND;
}

/* The entry of a list that is refreshed for the lookup when due: a hit, or CM_ENOTFOUND
 * with *ret_later when the list never asked for system_id (the next one will). */
static int lookup_listed(struct reconciler_worker *w,
                         enum fleet_kind kind,
                         const char *system_id,
                         struct maas_node *ret,
                         bool *ret_later)
{
        struct provider *p = w->p;
        const struct reconciler_fleet *f = fleet_of(w->fleets, kind);
        bool hit, asked;

        *ret_later = false;
        (void)fleet_fresh(w, kind);
        pthread_mutex_lock(&p->fleet_lock);
        hit = fleet_find(f, system_id, ret);
        asked = fleet_asked(f, system_id);
        /* a valid list that never asked for it: listed since, the next list will */
        if (!hit && !asked && f->valid)
                *ret_later = true;
        pthread_mutex_unlock(&p->fleet_lock);
        return hit ? 0 : CM_ENOTFOUND;
}

int fleet_snapshot_lookup_inflight(struct reconciler_worker *w,
                                   const char *system_id,
                                   struct maas_node *ret,
                                   bool *ret_later)
{
        return lookup_listed(w, FLEET_INFLIGHT, system_id, ret, ret_later);
}

int fleet_snapshot_lookup_deleting(struct reconciler_worker *w,
                                   const char *system_id,
                                   struct maas_node *ret,
                                   bool *ret_later)
{
        return lookup_listed(w, FLEET_DELETING, system_id, ret, ret_later);
}

uint64_t fleet_snapshot_deleting_next_ms(struct reconciler_worker *w)
{
        return next_ms(w, FLEET_DELETING);
}

/* A machine the unplaced list found, stamped as another MaasMachine's than ns/name. */
static bool stamped_for_other(const struct maas_node *n, const char *ns, const char *name)
{
        const cJSON *m =
                n->owner_data ? cJSON_GetObjectItemCaseSensitive(n->owner_data, "capmaas-machine")
                              : NULL;
        const cJSON *s =
                n->owner_data ? cJSON_GetObjectItemCaseSensitive(n->owner_data, "capmaas-namespace")
                              : NULL;

        return cJSON_IsString(m) && cJSON_IsString(s) &&
               (strcmp(m->valuestring, name) != 0 || strcmp(s->valuestring, ns) != 0);
}

int fleet_snapshot_none_stamped(struct reconciler_worker *w,
                                const char *uid,
                                const char *ns,
                                const char *name,
                                bool *ret_none,
                                bool *ret_later)
{
        struct provider *p = w->p;
        struct reconciler_fleet *f = &w->fleets->unplaced;
        struct reconciler_entry *tried;
        bool none, known;

        *ret_none = *ret_later = false;
        pthread_mutex_lock(&p->lock);
        tried = reconciler_table_get(&p->allocate_tried, uid);
        known = !tried && reconciler_table_get(&p->unplaced_none, uid);
        pthread_mutex_unlock(&p->lock);
        if (tried) /* this process sent an allocate for it: only its own list can tell */
                return 0;
        if (known) { /* a list said so, and since then only this process could allocate */
                *ret_none = true;
                return 0;
        }
        if (fleet_fresh(w, FLEET_UNPLACED) == CM_EUNAUTHORIZED)
                /* MAAS just refused the key for the list: a GET of this MaasMachine's own
                 * would be refused too (a second 401 in the pass) */
                return CM_EUNAUTHORIZED;
        pthread_mutex_lock(&p->fleet_lock);
        none = f->valid && fleet_asked(f, uid);
        for (size_t i = 0; none && i < f->nodes.n; i++)
                none = stamped_for_other(&f->nodes.items[i], ns, name);
        *ret_none = none;
        *ret_later = f->valid && !fleet_asked(f, uid);
        pthread_mutex_unlock(&p->fleet_lock);
        if (none) {
                pthread_mutex_lock(&p->lock);
                (void)reconciler_table_put(&p->unplaced_none, uid);
                pthread_mutex_unlock(&p->lock);
        }
        return 0;
}

void fleet_snapshot_allocating(struct provider *p, const char *uid)
{
        pthread_mutex_lock(&p->lock);
        (void)reconciler_table_put(&p->allocate_tried, uid);
        pthread_mutex_unlock(&p->lock);
}

void fleet_snapshot_release(struct reconciler_fleet *f)
{
        maas_node_list_release(&f->nodes);
        ids_release(f->asked, f->n_asked);
        *f = (struct reconciler_fleet){ 0 };
}
