/*
 * libFuzzer driver for the watch stream reader (network input: the API server's body of a
 * ?watch=1 request): kube_framer splits bytes into lines, kube_watch_decode_line turns each
 * into an event. The first input byte picks how the rest is cut into chunks (as TCP would);
 * the stream is read twice, once in one chunk and once cut up, and both reads must give the
 * same events (type and printed object, in order), the same end and the same last
 * resourceVersion. Never a crash, a leak or a read past the input.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../../kube/kube_priv.h"
#include "buf.h"
#include "err.h"
#include "kube_client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_LINE   4096 /* small, so the fuzzer reaches the cap */
#define TRACE_MAX  (1u << 20)
#define STOP_AFTER 50 /* the callback asks to stop at the 50th event */

struct trace {
        struct buf log; /* "<type> <object>\n" per event */
        unsigned n;
};

static int on_event(void *arg, enum kube_watch_event type, cJSON *obj)
{
        struct trace *t = arg;
        char *text = cJSON_PrintUnformatted(obj);

        (void)buf_printf(&t->log, "%d %s\n", (int)type, text ? text : "?");
        cJSON_free(text);
        cJSON_Delete(obj);
        return ++t->n == STOP_AFTER;
}

struct outcome {
        int feed;   /* what the last kube_framer_feed returned */
        int result; /* the decoder's result */
        bool stopped;
        char *rv;
};

static void read_stream(const char *p, size_t n, uint8_t cut, struct trace *t, struct outcome *o)
{
        struct kube_error e = { 0 };
        struct kube_watch_decoder d = { .fn = on_event, .arg = t, .e = &e };
        struct kube_framer f;
        size_t off = 0, step;
        int r = 0;

        kube_framer_init(&f, MAX_LINE);
        while (off < n && r == 0) {
                step = cut ? (size_t)(cut % 13) + 1 : n;
                if (step > n - off)
                        step = n - off;
                r = kube_framer_feed(&f, p + off, step, kube_watch_decode_line, &d);
                off += step;
                cut = (uint8_t)(cut * 31 + 7);
        }
        *o = (struct outcome){
                .feed = r, .result = d.result, .stopped = d.callback_stopped, .rv = d.last_rv
        };
        kube_framer_release(&f);
        kube_error_release(&e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct trace whole = { 0 }, cut = { 0 };
        struct outcome a, b;
        char *text;

        if (size < 1)
                return 0;
        text = malloc(size - 1 ? size - 1 : 1); /* exact size: ASan catches reads past it */
        if (!text)
                return 0;
        memcpy(text, data + 1, size - 1);
        buf_init(&whole.log, TRACE_MAX);
        buf_init(&cut.log, TRACE_MAX);
        read_stream(text, size - 1, 0, &whole, &a);
        read_stream(text, size - 1, data[0] | 1, &cut, &b);
        if (whole.log.len != cut.log.len ||
            (whole.log.len && memcmp(whole.log.data, cut.log.data, whole.log.len) != 0))
                abort(); /* the chunking changed the events */
        if (a.feed != b.feed || a.result != b.result || a.stopped != b.stopped ||
            (a.rv == NULL) != (b.rv == NULL) || (a.rv && strcmp(a.rv, b.rv) != 0))
                abort(); /* ... or how the stream ended */
        free(a.rv);
        free(b.rv);
        buf_release(&whole.log);
        buf_release(&cut.log);
        free(text);
        return 0;
}
