/*
 * kube-sim watch streams. Each watcher keeps only a cursor into the shared event ring plus a
 * small output buffer (bounded memory per watcher); a watcher that falls behind the ring gets
 * a 410 ERROR event and its stream ends. The MHD content callback blocks (thread per
 * connection) on its collection's cond with a bounded wait.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <microhttpd.h>

#include "ks.h"
#include "xalloc.h"

#define WATCH_OUT_MAX   (8u * 1024u * 1024u)
#define WATCH_OUT_BATCH (256u * 1024u)

struct kwatch {
        struct kres *res;
        char *ns;
        struct ksel *lsel, *fsel;
        uint64_t cursor;
        bool table, bookmarks, initial_end;
        time_t deadline;
        uint64_t next_bookmark; /* realtime_ms() */
        uint64_t drop_epoch;
        cJSON *initial; /* objects still to send as ADDED */
        struct buf out;
        size_t out_off;
        bool done, finish_after_flush;
};

static const char *const ev_names[] = { "ADDED", "MODIFIED", "DELETED" };

static void emit(struct kwatch *w, const char *type, cJSON *obj)
{
        cJSON *ev = cJSON_CreateObject();
        char *txt;

        cJSON_AddStringToObject(ev, "type", type);
        cJSON_AddItemToObject(ev, "object", obj);
        txt = cJSON_PrintUnformatted(ev);
        if (buf_append_str(&w->out, txt) < 0 || buf_append(&w->out, "\n", 1) < 0)
                w->done = true;
        free(txt);
        cJSON_Delete(ev);
}

static void emit_obj(struct kwatch *w, const char *type, const cJSON *obj)
{
        cJSON *o = cJSON_Duplicate(obj, true);
        char *av = ks_api_version(w->res);

        ks_obj_set_str(o, "apiVersion", av);
        ks_obj_set_str(o, "kind", w->res->kind);
        free(av);
        if (w->table) {
                cJSON *items = cJSON_CreateArray();

                cJSON_AddItemToArray(items, o);
                o = table_build(w->res, items, true);
                cJSON_Delete(items);
        }
        emit(w, type, o);
}

static void emit_expired(struct kwatch *w, uint64_t asked)
{
        cJSON *st = cJSON_CreateObject();
        char *msg = xasprintf("too old resource version: %" PRIu64 " (%" PRIu64 ")", asked,
                              ks.compacted_rv + 1);

        cJSON_AddStringToObject(st, "kind", "Status");
        cJSON_AddStringToObject(st, "apiVersion", "v1");
        cJSON_AddObjectToObject(st, "metadata");
        cJSON_AddStringToObject(st, "status", "Failure");
        cJSON_AddStringToObject(st, "message", msg);
        cJSON_AddStringToObject(st, "reason", "Expired");
        cJSON_AddNumberToObject(st, "code", 410);
        emit(w, "ERROR", st);
        free(msg);
        w->finish_after_flush = true;
}

static uint64_t realtime_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* lock held */
static void emit_bookmark(struct kwatch *w, bool initial_end)
{
        cJSON *o = cJSON_CreateObject();
        cJSON *md = cJSON_AddObjectToObject(o, "metadata");
        char *av = ks_api_version(w->res);
        char rv[32];

        snprintf(rv, sizeof(rv), "%" PRIu64, w->cursor);
        cJSON_AddStringToObject(o, "kind", w->res->kind);
        cJSON_AddStringToObject(o, "apiVersion", av);
        cJSON_AddStringToObject(md, "resourceVersion", rv);
        if (initial_end)
                cJSON_AddStringToObject(cJSON_AddObjectToObject(md, "annotations"),
                                        "k8s.io/initial-events-end", "true");
        free(av);
        emit(w, "BOOKMARK", o);
}

static bool matches(const struct kwatch *w, const cJSON *obj)
{
        const char *ns = ks_obj_str(obj, "metadata", "namespace");

        if (w->ns && (!ns || strcmp(ns, w->ns) != 0))
                return false;
        return ksel_match(w->lsel, w->fsel, obj);
}

static struct kwatch *kwatch_free(struct kwatch *w)
{
        if (!w)
                return NULL;
        free(w->ns);
        ksel_free(w->lsel);
        ksel_free(w->fsel);
        cJSON_Delete(w->initial);
        buf_release(&w->out);
        free(w);
        return NULL;
}

/* lock held: snapshot of the current matching objects for the initial ADDED events. */
static void snapshot(struct kwatch *w)
{
        const struct kcoll *c = w->res->coll;
        size_t i;

        w->initial = cJSON_CreateArray();
        for (i = 0; i < c->n; i++)
                if (matches(w, c->objs[i]))
                        cJSON_AddItemToArray(w->initial, cJSON_Duplicate(c->objs[i], true));
        w->cursor = ks.rv;
}

static bool parse_watch(const struct kreq *r,
                        const struct ktarget *t,
                        struct kwatch *w,
                        struct kresp *resp)
{
        const char *to = kq(r, "timeoutSeconds");
        char *msg = NULL;
        long secs = to ? strtol(to, NULL, 10) : 0;

        if (ksel_parse_labels(kq(r, "labelSelector"), &w->lsel, &msg) < 0 ||
            ksel_parse_fields(kq(r, "fieldSelector"), t->res, &w->fsel, &msg) < 0) {
                kresp_status(resp, 400, "BadRequest", NULL, "%s", msg);
                free(msg);
                return false;
        }
        w->res = t->res;
        w->ns = t->ns ? xstrdup(t->ns) : NULL;
        w->table = ks_wants_table(r->accept);
        w->bookmarks = kq_bool(r, "allowWatchBookmarks");
        w->initial_end = kq_bool(r, "sendInitialEvents");
        w->deadline = time(NULL) + (secs > 0 ? secs : 1800 + (long)(ks_random() % 1800));
        w->next_bookmark = realtime_ms() + ks.bookmark_ms;
        buf_init(&w->out, WATCH_OUT_MAX);
        return true;
}

void watch_start(const struct kreq *r, const struct ktarget *t, struct kresp *resp)
{
        struct kwatch *w = xcalloc(1, sizeof(*w));
        const char *rv = kq(r, "resourceVersion");
        uint64_t n = rv ? strtoull(rv, NULL, 10) : 0;

        if (!parse_watch(r, t, w, resp)) {
                kwatch_free(w);
                return;
        }
        pthread_mutex_lock(&ks.mu);
        w->drop_epoch = ks.faults.drop_epoch;
        if (!rv || !*rv || !strcmp(rv, "0") || w->initial_end) {
                snapshot(w);
        } else if (ks.faults.expire_next_watch || n < ks.compacted_rv) {
                ks.faults.expire_next_watch = false;
                emit_expired(w, n);
        } else {
                w->cursor = n;
        }
        pthread_mutex_unlock(&ks.mu);
        resp->status = 200;
        resp->stream = w;
}

/* lock held: plain watchers of the stored version share one serialization per event. */
static void emit_event(struct kwatch *w, struct kevent *e)
{
        const char *av = ks_obj_str(e->obj, "apiVersion", NULL);
        char *want = ks_api_version(w->res);
        bool same = av && !strcmp(av, want);

        free(want);
        if (w->table || !same) {
                emit_obj(w, ev_names[e->type], e->obj);
                return;
        }
        if (!e->line) {
                struct buf b;
                size_t start = w->out.len;

                emit_obj(w, ev_names[e->type], e->obj);
                buf_init(&b, WATCH_OUT_MAX);
                if (buf_append(&b, w->out.data + start, w->out.len - start) == 0)
                        e->line = buf_take(&b, &e->line_len);
                buf_release(&b);
                return;
        }
        if (buf_append(&w->out, e->line, e->line_len) < 0)
                w->done = true;
}

static const struct kevent *hist_at(size_t i)
{
        return &ks.hist[(ks.hist_start + i) % ks.hist_cap];
}

/* lock held: index of the first event newer than rv (RVs in the ring only increase). */
static size_t hist_after(uint64_t rv)
{
        size_t lo = 0, hi = ks.hist_len;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (hist_at(mid)->rv <= rv)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

/* lock held: appends events after the cursor. */
static void drain_ring(struct kwatch *w)
{
        size_t i;

        if (w->cursor < ks.compacted_rv) {
                emit_expired(w, w->cursor);
                return;
        }
        for (i = hist_after(w->cursor); i < ks.hist_len && w->out.len < WATCH_OUT_BATCH; i++) {
                const struct kevent *e = hist_at(i);

                w->cursor = e->rv;
                if (e->coll == w->res->coll && matches(w, e->obj))
                        emit_event(w, (struct kevent *)(uintptr_t)e);
        }
}

static void send_initial(struct kwatch *w)
{
        cJSON *o;

        pthread_mutex_lock(&ks.mu);
        while (cJSON_GetArraySize(w->initial) > 0 && w->out.len < WATCH_OUT_BATCH) {
                o = cJSON_DetachItemFromArray(w->initial, 0);
                emit_obj(w, "ADDED", o);
                cJSON_Delete(o);
        }
        if (cJSON_GetArraySize(w->initial) == 0) {
                cJSON_Delete(w->initial);
                w->initial = NULL;
                if (w->initial_end)
                        emit_bookmark(w, true);
        }
        pthread_mutex_unlock(&ks.mu);
}

static void wait_events(struct kwatch *w)
{
        struct timespec ts;
        uint64_t wait_ms, now_ms;
        time_t now = time(NULL);

        pthread_mutex_lock(&ks.mu);
        while (!w->done && w->out.len == 0) {
                if (ks.stopping || ks.faults.drop_epoch != w->drop_epoch || now >= w->deadline) {
                        w->done = true;
                        break;
                }
                drain_ring(w);
                if (w->out.len || w->finish_after_flush)
                        break;
                now_ms = realtime_ms();
                if (w->bookmarks && now_ms >= w->next_bookmark) {
                        emit_bookmark(w, false);
                        w->next_bookmark = now_ms + ks.bookmark_ms;
                        break;
                }
                /* wake within 1 s (the deadline) or at the next bookmark */
                wait_ms = 1000;
                if (w->bookmarks && w->next_bookmark - now_ms < wait_ms)
                        wait_ms = w->next_bookmark - now_ms;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_sec += (time_t)(wait_ms / 1000);
                ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
                if (ts.tv_nsec >= 1000000000L) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000L;
                }
                (void)pthread_cond_timedwait(&w->res->coll->cond, &ks.mu, &ts);
                now = time(NULL);
        }
        pthread_mutex_unlock(&ks.mu);
}

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct kwatch *w = cls;
        size_t n;

        (void)pos;
        if (w->out_off >= w->out.len) {
                buf_reset(&w->out);
                w->out_off = 0;
                if (w->finish_after_flush || w->done)
                        return MHD_CONTENT_READER_END_OF_STREAM;
                if (w->initial)
                        send_initial(w);
                else
                        wait_events(w);
                if (w->out.len == 0)
                        return MHD_CONTENT_READER_END_OF_STREAM;
        }
        n = w->out.len - w->out_off;
        if (n > max)
                n = max;
        memcpy(buf, w->out.data + w->out_off, n);
        w->out_off += n;
        return (ssize_t)n;
}

static void reader_free(void *cls)
{
        kwatch_free(cls);
}

void *watch_response(void *stream)
{
        return MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, reader, stream,
                                                 reader_free);
}
