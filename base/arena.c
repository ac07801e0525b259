/*
 * arena: per-thread bump blocks for cJSON inside a request scope (see arena.h). Each
 * thread's state is a _Thread_local struct (no lookup on the fast path); a pthread key only
 * exists so that the block is freed when its thread exits.
 */
#include "arena.h"

#include <pthread.h>
#include <sanitizer/asan_interface.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "log.h"
#include "xalloc.h"

#define ARENA_ALIGN 16u
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(ARENA_ASAN)
/* Poisoned bytes in front of each allocation; the first word holds its size. */
#define ARENA_GUARD 16u
#else
#define ARENA_GUARD 0u
#endif

struct arena {
        unsigned char *block; /* ARENA_BLOCK_SIZE bytes; NULL until the first scope */
        size_t used;
        size_t live;    /* allocations from the block not yet freed */
        size_t hits;    /* allocations from the block in this scope */
        unsigned depth; /* scope nesting */
        bool abandoned; /* something escaped a scope: the block is never reused */
};

static _Thread_local struct arena tls_arena;
static pthread_key_t arena_key;
static pthread_once_t arena_once = PTHREAD_ONCE_INIT;
static atomic_ulong escapes;
static atomic_ulong hits;

static void arena_thread_exit(void *block)
{
        free(block);
}

static void arena_key_create(void)
{
        if (pthread_key_create(&arena_key, arena_thread_exit) != 0)
                abort();
}

static bool in_block(const struct arena *a, const void *p)
{
        uintptr_t u = (uintptr_t)p;
        uintptr_t b = (uintptr_t)a->block;

        return a->block && u >= b && u < b + ARENA_BLOCK_SIZE;
}

void arena_scope_begin(void)
{
        struct arena *a = &tls_arena;

        if (a->depth++ || a->block || a->abandoned)
                return;
        (void)pthread_once(&arena_once, arena_key_create);
        a->block = xmalloc(ARENA_BLOCK_SIZE);
        ASAN_POISON_MEMORY_REGION(a->block, ARENA_BLOCK_SIZE);
        (void)pthread_setspecific(arena_key, a->block);
}

void arena_scope_end(void)
{
        struct arena *a = &tls_arena;

        if (!a->depth || --a->depth)
                return;
        atomic_fetch_add_explicit(&hits, a->hits, memory_order_relaxed);
        a->hits = 0;
        if (a->abandoned)
                return;
        if (a->live) {
                /* The block stays allocated for the escaped pointers (and is freed with
                 * the last of them); the thread uses malloc from now on. */
                a->abandoned = true;
                (void)pthread_setspecific(arena_key, NULL);
                atomic_fetch_add_explicit(&escapes, 1, memory_order_relaxed);
                log_error("arena", "cJSON allocations outlived their request scope", "live=%zu",
                          a->live);
                return;
        }
        ASAN_POISON_MEMORY_REGION(a->block, a->used);
        a->used = 0;
}

unsigned long arena_escapes(void)
{
        return atomic_load_explicit(&escapes, memory_order_relaxed);
}

unsigned long arena_hits(void)
{
        return atomic_load_explicit(&hits, memory_order_relaxed);
}

/* Under ASan the guard in front of an allocation records its size (to poison it when it is
 * freed); without ASan there is no guard. */
static void guard_put(unsigned char *p, size_t n)
{
        if (!ARENA_GUARD)
                return;
        ASAN_UNPOISON_MEMORY_REGION(p - ARENA_GUARD, sizeof(size_t));
        memcpy(p - ARENA_GUARD, &n, sizeof(n));
        ASAN_POISON_MEMORY_REGION(p - ARENA_GUARD, sizeof(size_t));
}

static size_t guard_get(const unsigned char *p)
{
        size_t n = 0;

        if (!ARENA_GUARD)
                return 0;
        ASAN_UNPOISON_MEMORY_REGION(p - ARENA_GUARD, sizeof(size_t));
        memcpy(&n, p - ARENA_GUARD, sizeof(n));
        ASAN_POISON_MEMORY_REGION(p - ARENA_GUARD, sizeof(size_t));
        return n;
}

void *arena_cjson_malloc(size_t n)
{
        struct arena *a = &tls_arena;
        size_t need = ARENA_GUARD + ((n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1));
        unsigned char *p;

        if (!a->depth || a->abandoned || !n || n > ARENA_BLOCK_SIZE ||
            need > ARENA_BLOCK_SIZE - a->used)
                return xmalloc(n);
        p = a->block + a->used + ARENA_GUARD;
        a->used += need;
        a->live++;
        a->hits++;
        guard_put(p, n);
        ASAN_UNPOISON_MEMORY_REGION(p, n);
        return p;
}

void arena_cjson_free(void *p)
{
        struct arena *a = &tls_arena;

        if (!in_block(a, p)) {
                free(p);
                return;
        }
        ASAN_POISON_MEMORY_REGION(p, guard_get(p));
        if (--a->live == 0 && a->abandoned) {
                /* the last escaped allocation is gone: the block can go too */
                free(a->block);
                a->block = NULL;
        }
}

/* Declared in xalloc.h (the allocation API main calls); defined here, beside the hooks, so
 * xalloc.c does not depend on the arena. */
void xalloc_install_cjson_hooks(void)
{
        cJSON_Hooks hooks = { .malloc_fn = arena_cjson_malloc, .free_fn = arena_cjson_free };

        cJSON_InitHooks(&hooks);
}
