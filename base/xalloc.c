/*
 * xalloc: abort-on-failure allocation (c-style.md 6.6). Removing the impossible-to-test
 * ENOMEM branches keeps the code honest; the real defence is capping untrusted sizes.
 */
#include "xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static NORETURN void oom(void)
{
        static const char msg[] = "capmaas: out of memory\n";

        (void)!fwrite(msg, 1, sizeof(msg) - 1, stderr);
        abort();
}

void *xmalloc(size_t n)
{
        void *p = malloc(n ? n : 1);

        if (!p)
                oom();
        return p;
}

void *xcalloc(size_t count, size_t size)
{
        void *p = calloc(count ? count : 1, size ? size : 1);

        if (!p)
                oom();
        return p;
}

void *xrealloc(void *p, size_t n)
{
        void *q = realloc(p, n ? n : 1);

        if (!q)
                oom();
        return q;
}

char *xstrdup(const char *s)
{
        char *p = strdup(s);

        if (!p)
                oom();
        return p;
}

char *xstrndup(const char *s, size_t n)
{
        char *p = strndup(s, n);

        if (!p)
                oom();
        return p;
}

char *xvasprintf(const char *fmt, va_list ap)
{
        char *p = NULL;

        if (vasprintf(&p, fmt, ap) < 0)
                oom();
        return p;
}

char *xasprintf(const char *fmt, ...)
{
        va_list ap;
        char *p;

        va_start(ap, fmt);
        p = xvasprintf(fmt, ap);
        va_end(ap);
        return p;
}
