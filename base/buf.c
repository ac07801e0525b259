/*
 * buf: capped growable buffer. Growth doubles the allocation but never allocates past
 * max + 1 bytes, and every size computation checks for overflow.
 */
#include "buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "xalloc.h"

void buf_init(struct buf *b, size_t max)
{
        *b = (struct buf){ .max = max };
}

void buf_release(struct buf *b)
{
        free(b->data);
        buf_init(b, b->max);
}

void buf_reset(struct buf *b)
{
        b->len = 0;
        if (b->data)
                b->data[0] = '\0';
}

int buf_reserve(struct buf *b, size_t extra)
{
        size_t need;
        size_t cap;

        if (__builtin_add_overflow(b->len, extra, &need) || need > b->max)
                return CM_ETOOBIG;
        if (need + 1 <= b->cap)
                return CM_OK;
        cap = b->cap ? b->cap : 64;
        while (cap < need + 1)
                cap = cap > SIZE_MAX / 2 ? need + 1 : cap * 2;
        if (cap > b->max + 1)
                cap = b->max + 1;
        b->data = xrealloc(b->data, cap);
        b->cap = cap;
        return CM_OK;
}

int buf_append(struct buf *b, const void *p, size_t n)
{
        int r = buf_reserve(b, n);

        if (r < 0)
                return r;
        if (n)
                memcpy(b->data + b->len, p, n);
        b->len += n;
        b->data[b->len] = '\0';
        return CM_OK;
}

int buf_append_str(struct buf *b, const char *s)
{
        return buf_append(b, s, strlen(s));
}

int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
        va_list copy;
        int n;
        int r;

        va_copy(copy, ap);
        n = vsnprintf(NULL, 0, fmt, copy);
        va_end(copy);
        if (n < 0)
                return CM_EINVAL;
        r = buf_reserve(b, (size_t)n);
        if (r < 0)
                return r;
        (void)vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
        b->len += (size_t)n;
        return CM_OK;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = buf_vprintf(b, fmt, ap);
        va_end(ap);
        return r;
}

void buf_consume(struct buf *b, size_t n)
{
        if (n >= b->len) {
                buf_reset(b);
                return;
        }
        memmove(b->data, b->data + n, b->len - n);
        b->len -= n;
        b->data[b->len] = '\0';
}

char *buf_take(struct buf *b, size_t *ret_len)
{
        char *p = b->data ? b->data : xstrdup("");

        if (ret_len)
                *ret_len = b->len;
        buf_init(b, b->max);
        return p;
}
