#pragma once
/*
 * buf: a growable byte buffer with a hard maximum (after curl's dynbuf). Every byte that
 * arrives from the network goes through one, so a peer can never make us buffer more than
 * the cap. The contents are always NUL-terminated (the NUL is not counted in len).
 * Not thread-safe: a buf has one owner.
 */

#include <stdarg.h>
#include <stddef.h>

#include "compiler.h"

struct buf {
        char *data; /* owned; NULL until the first append */
        size_t len; /* bytes used, excluding the terminating NUL */
        size_t cap; /* bytes allocated (private) */
        size_t max; /* hard limit on len (private) */
};

/* Prepares an empty buffer that will hold at most max bytes. */
void buf_init(struct buf *b, size_t max);
/* Frees the contents and leaves the buffer empty and reusable. */
void buf_release(struct buf *b);
/* Empties the buffer but keeps its memory. */
void buf_reset(struct buf *b);
/* Appends n bytes; CM_ETOOBIG (and nothing appended) if len + n would pass max. */
MUST_CHECK int buf_append(struct buf *b, const void *p, size_t n);
MUST_CHECK int buf_append_str(struct buf *b, const char *s);
MUST_CHECK int buf_printf(struct buf *b, const char *fmt, ...) PRINTF_LIKE(2, 3);
MUST_CHECK int buf_vprintf(struct buf *b, const char *fmt, va_list ap) PRINTF_LIKE(2, 0);
/* Makes room for n more bytes in one allocation (when the final size is known in advance,
 * e.g. from Content-Length); CM_ETOOBIG past max. */
MUST_CHECK int buf_reserve(struct buf *b, size_t n);
/* Drops the first n bytes (n <= len). */
void buf_consume(struct buf *b, size_t n);
/* Hands the contents (never NULL, NUL-terminated) to the caller, who frees them with
 * free(); the buffer is left empty. ret_len may be NULL. */
char *buf_take(struct buf *b, size_t *ret_len);
