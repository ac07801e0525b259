#pragma once
/*
 * xalloc: allocation that never returns NULL. On failure the process aborts (the kubelet
 * restarts it); every size that comes from the network is capped before it gets here, so
 * an attacker cannot turn this into a denial of service. Thread-safe.
 */

#include <stdarg.h>
#include <stddef.h>

#include "compiler.h"

void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* Formats into a new string the caller frees. */
char *xasprintf(const char *fmt, ...) PRINTF_LIKE(1, 2);
char *xvasprintf(const char *fmt, va_list ap) PRINTF_LIKE(1, 0);

/* Installs cJSON's allocators: arena_cjson_malloc/free (arena.h: the calling thread's arena
 * inside an arena scope, xmalloc/free elsewhere; defined in base/arena.c). Call once from main
 * before any thread. */
void xalloc_install_cjson_hooks(void);
