#pragma once
/*
 * kube_priv: internals shared by the kube_client files (kube_client.c, kube_watch.c) and
 * their unit tests: the Status → error mapping and the watch stream framer and event
 * decoder. Not part of the public interface. Everything here is confined to the calling
 * thread (no shared state).
 */

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "compiler.h"
#include "kube_client.h"

/* The enum cm_err for an HTTP status (or a watch ERROR Status's code) and its reason:
 * 409 AlreadyExists → CM_EEXIST, other 409 → CM_ECONFLICT, 404 → CM_ENOTFOUND, … */
int kube_err_from_status(long code, const char *reason);

/* Fills e (when non-NULL) from a Status object: reason, message, details.causes (copied).
 * status may be NULL or not a Status; then message becomes fallback (may be NULL). */
void kube_error_set(struct kube_error *e, long code, const cJSON *status, const char *fallback);

/* Watch stream framing: bytes in, one callback per complete '\n'-terminated line (a
 * trailing '\r' is dropped, empty lines are skipped). Each byte is scanned once: a line
 * that spans chunks is accumulated in `line` (capped at max_line); a line that lies
 * inside one chunk is handed over without copying. */
struct kube_framer {
        struct buf line; /* the unterminated tail seen so far */
        size_t max_line;
};

typedef int (*kube_line_fn)(void *arg, const char *line, size_t len);

void kube_framer_init(struct kube_framer *f, size_t max_line);
void kube_framer_release(struct kube_framer *f);
/* Feeds n bytes. Returns 0, CM_ETOOBIG when a line passes max_line, or the first non-zero
 * value fn returned (framing stops there). */
MUST_CHECK int kube_framer_feed(
        struct kube_framer *f, const char *p, size_t n, kube_line_fn fn, void *arg);
/* Bytes of an unfinished line held (tests). */
size_t kube_framer_pending(const struct kube_framer *f);

/* Decodes watch event lines and forwards them to a kube_watch_fn. */
struct kube_watch_decoder {
        kube_watch_fn fn;
        void *arg;
        struct kube_error *e; /* may be NULL */
        int result;           /* 0, or the error that ended the stream */
        bool callback_stopped;
        char *last_rv; /* owned: resourceVersion of the last event delivered */
};

/* A kube_line_fn: parses one event line. Returns 0 to go on; 1 when the stream must end
 * (the callback asked to stop, or an error: then d->result is set, e.g. CM_EGONE for an
 * ERROR event with code 410, CM_EPARSE for malformed JSON or an unknown type). */
int kube_watch_decode_line(void *d, const char *line, size_t len);

/* Cap on URLs and queries we build from our own inputs (never network data). */
#define STR_MAX ((size_t)1 << 24)

/* For appends to a STR_MAX buffer built from local inputs: aborts on CM_ETOOBIG, which
 * only a programming error (a 16 MiB URL) can cause, like xmalloc's OOM. */
void kube_must(int r);

/* --- request plumbing shared by kube_client.c and kube_watch.c ------------------------ */

struct transport_stream;

/* "<server>/api/v1[/namespaces/<ns>]/<plural>[/<name>[/<sub>]][?<query>]"; query is an
 * already encoded "k=v&k=v" string or NULL/"". Caller frees. */
char *kube_url(const struct kube_client *c,
               const struct kube_resource *r,
               const char *ns,
               const char *name,
               const char *sub,
               const char *query);
/* "<server><path>" for a path that is no resource URL (e.g. "/apis/<group>"). Caller frees. */
char *kube_server_url(const struct kube_client *c, const char *path);
/* Appends "key=<value URL-encoded>" to a query buffer, with '&' when not first. */
void kube_query_add(struct buf *q, const char *key, const char *value);
/* A streaming GET (rate-limited, authenticated, no retries): 2xx bodies go to s; a
 * non-2xx answer is mapped to an error with e filled. 0 when a 2xx stream ended. */
MUST_CHECK int kube_stream_get(struct kube_client *c,
                               const char *url,
                               const struct transport_stream *s,
                               uint32_t timeout_ms,
                               struct kube_error *e);
