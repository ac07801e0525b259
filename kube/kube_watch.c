/*
 * kube_watch: a streaming watch. The transport hands body chunks over as they arrive; a
 * kube_framer splits them into lines, scanning each byte once (a line inside one chunk is
 * not even copied), and each complete line is parsed once into an event for the caller's
 * callback. ERROR events end the stream with their Status code mapped (410 → CM_EGONE).
 * Runs entirely on the calling thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "http_transport.h"
#include "kube_client.h"
#include "kube_priv.h"
#include "xalloc.h"

#define DEFAULT_MAX_EVENT    (16u * 1024u * 1024u)
#define DEFAULT_WATCH_SECS   300u
#define WATCH_TIMEOUT_MARGIN 30u

/* --- framing -------------------------------------------------------------------------- */

void kube_framer_init(struct kube_framer *f, size_t max_line)
{
        buf_init(&f->line, max_line);
        f->max_line = max_line;
}

void kube_framer_release(struct kube_framer *f)
{
        buf_release(&f->line);
}

size_t kube_framer_pending(const struct kube_framer *f)
{
        return f->line.len;
}

static int emit_line(const char *p, size_t n, kube_line_fn fn, void *arg)
{
        if (n > 0 && p[n - 1] == '\r')
                n--;
        return n > 0 ? fn(arg, p, n) : 0;
}

int kube_framer_feed(struct kube_framer *f, const char *p, size_t n, kube_line_fn fn, void *arg)
{
        const char *nl;
        size_t seg;
        int r;

        while (n > 0) {
                nl = memchr(p, '\n', n);
                seg = nl ? (size_t)(nl - p) : n;
                if (f->line.len + seg > f->max_line)
                        return CM_ETOOBIG;
                if (!nl)
                        return buf_append(&f->line, p, seg);
                if (f->line.len == 0) {
                        r = emit_line(p, seg, fn, arg); /* whole line in this chunk */
                } else {
                        if (buf_append(&f->line, p, seg) < 0)
                                return CM_ETOOBIG;
                        r = emit_line(f->line.data, f->line.len, fn, arg);
                        buf_reset(&f->line);
                }
                if (r != 0)
                        return r;
                p += seg + 1;
                n -= seg + 1;
        }
        return 0;
}

/* --- event decoding ------------------------------------------------------------------- */

static const struct {
        const char *name;
        enum kube_watch_event type;
} event_types[] = {
        { "ADDED", KUBE_WATCH_ADDED },
        { "MODIFIED", KUBE_WATCH_MODIFIED },
        { "DELETED", KUBE_WATCH_DELETED },
        { "BOOKMARK", KUBE_WATCH_BOOKMARK },
};

static int decode_fail(struct kube_watch_decoder *d, int err, const char *msg)
{
        kube_error_set(d->e, 0, NULL, msg);
        d->result = err;
        return 1;
}

/* An ERROR event: its object is a Status whose code decides the error. */
static int decode_error(struct kube_watch_decoder *d, const cJSON *status)
{
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(status, "code");
        const cJSON *reason = cJSON_GetObjectItemCaseSensitive(status, "reason");
        long c = cJSON_IsNumber(code) && code->valuedouble >= 100 && code->valuedouble < 600
                         ? (long)code->valuedouble
                         : 500;

        kube_error_set(d->e, c, status, "watch ERROR event");
        d->result = kube_err_from_status(c, cJSON_IsString(reason) ? reason->valuestring : NULL);
        if (d->result == 0)
                d->result = CM_ESERVER;
        return 1;
}

static void remember_rv(struct kube_watch_decoder *d, const cJSON *obj)
{
        const char *rv = kube_meta_str(obj, "resourceVersion");

        if (!rv)
                return;
        free(d->last_rv);
        d->last_rv = xstrdup(rv);
}

/* Hands the object to the callback (which takes ownership). */
static int deliver(struct kube_watch_decoder *d, enum kube_watch_event type, cJSON *obj)
{
        remember_rv(d, obj);
        if (d->fn(d->arg, type, obj) != 0) {
                d->callback_stopped = true;
                return 1;
        }
        return 0;
}

static int event_type(const char *name)
{
        for (size_t i = 0; i < ARRAY_SIZE(event_types); i++)
                if (strcmp(name, event_types[i].name) == 0)
                        return (int)event_types[i].type;
        return -1;
}

int kube_watch_decode_line(void *arg, const char *line, size_t len)
{
        struct kube_watch_decoder *d = arg;
        cJSON *ev = NULL, *obj;
        const cJSON *type;
        int r, t;

        ev = cJSON_ParseWithLengthOpts(line, len, NULL, false);
        type = cJSON_GetObjectItemCaseSensitive(ev, "type");
        obj = cJSON_GetObjectItemCaseSensitive(ev, "object");
        if (!cJSON_IsString(type) || !cJSON_IsObject(obj)) {
                r = decode_fail(d, CM_EPARSE, "malformed watch event");
                goto out;
        }
        if (strcmp(type->valuestring, "ERROR") == 0) {
                r = decode_error(d, obj);
                goto out;
        }
        t = event_type(type->valuestring);
        if (t < 0) {
                r = decode_fail(d, CM_EPARSE, "unknown watch event type");
                goto out;
        }
        obj = cJSON_DetachItemFromObjectCaseSensitive(ev, "object");
        r = deliver(d, (enum kube_watch_event)t, obj);
out:
        cJSON_Delete(ev);
        return r;
}

/* --- the watch ------------------------------------------------------------------------ */

struct watch_ctx {
        struct kube_framer framer;
        struct kube_watch_decoder dec;
        int frame_err; /* CM_ETOOBIG from the framer */
};

static int on_chunk(void *arg, const char *data, size_t n)
{
        struct watch_ctx *w = arg;
        int r = kube_framer_feed(&w->framer, data, n, kube_watch_decode_line, &w->dec);

        if (r < 0) {
                w->frame_err = r;
                return 1;
        }
        return r;
}

static char *watch_query(const struct kube_watch_opts *o, unsigned secs)
{
        struct buf q;
        char num[24];

        buf_init(&q, STR_MAX);
        snprintf(num, sizeof(num), "%u", secs);
        kube_query_add(&q, "watch", "true");
        kube_query_add(&q, "allowWatchBookmarks", "true");
        kube_query_add(&q, "timeoutSeconds", num);
        if (o->resource_version && o->resource_version[0])
                kube_query_add(&q, "resourceVersion", o->resource_version);
        if (o->label_selector && o->label_selector[0])
                kube_query_add(&q, "labelSelector", o->label_selector);
        return buf_take(&q, NULL);
}

/* The outcome of a stream that got a 2xx answer. */
static int watch_result(struct watch_ctx *w, struct kube_error *e)
{
        if (w->frame_err) {
                kube_error_set(e, 200, NULL, "watch event over the size cap");
                return w->frame_err;
        }
        return w->dec.callback_stopped ? 0 : w->dec.result;
}

int kube_watch(struct kube_client *c,
               const struct kube_resource *r,
               const char *ns,
               const struct kube_watch_opts *o,
               kube_watch_fn fn,
               void *arg,
               struct kube_error *e)
{
        static const struct kube_watch_opts none = { 0 };
        struct watch_ctx w = { .dec = { .fn = fn, .arg = arg, .e = e } };
        unsigned secs;
        char *query, *url;
        int err;

        kube_error_release(e);
        o = o ? o : &none;
        secs = o->timeout_seconds ? o->timeout_seconds : DEFAULT_WATCH_SECS;
        kube_framer_init(&w.framer, o->max_event ? o->max_event : DEFAULT_MAX_EVENT);
        query = watch_query(o, secs);
        url = kube_url(c, r, ns, NULL, NULL, query);
        err = kube_stream_get(
                c, url,
                &(struct transport_stream){ .on_chunk = on_chunk, .arg = &w, .stop = o->stop },
                (secs + WATCH_TIMEOUT_MARGIN) * 1000u, e);
        if (err == 0)
                err = watch_result(&w, e);
        kube_framer_release(&w.framer);
        free(w.dec.last_rv);
        free(query);
        free(url);
        return err;
}
