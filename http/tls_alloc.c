/*
 * tls_alloc: see tls_alloc.h. A record buffer is any request between BLOCK_MIN and
 * BLOCK_SIZE bytes (GnuTLS 3.7 asks 16 741 to 16 895 for TLS 1.3 and 1.2 records); each is
 * allocated BLOCK_SIZE, so a cached block serves any of them. A freed block goes back to the
 * cache when malloc_usable_size says it holds BLOCK_SIZE bytes and at most BLOCK_SLACK more
 * (glibc's rounding: any such block, ours or not, serves a record as well) and the cache has
 * room.
 */
#include "tls_alloc.h"

#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include <gnutls/gnutls.h>

#define BLOCK_MIN   16384u
#define BLOCK_SIZE  17408u /* 17 KiB */
#define BLOCK_SLACK 64u    /* what malloc_usable_size may add to BLOCK_SIZE */

struct cache {
        void *blocks[TLS_ALLOC_CACHED];
        size_t n;
        bool registered; /* exit_key holds it: drained at thread exit */
};

static _Thread_local struct cache cache;
static pthread_key_t exit_key; /* its value: the thread's cache once it holds a block */
static pthread_once_t install_once = PTHREAD_ONCE_INIT;

/* At thread exit: the blocks go back to malloc. */
static void cache_drain(void *p)
{
        struct cache *c = p;

        while (c->n)
                free(c->blocks[--c->n]);
}

static bool is_block(void *p)
{
        size_t n = malloc_usable_size(p);

        return n >= BLOCK_SIZE && n <= BLOCK_SIZE + BLOCK_SLACK;
}

void *tls_alloc_malloc(size_t n)
{
        if (n < BLOCK_MIN || n > BLOCK_SIZE)
                return malloc(n);
        if (cache.n)
                return cache.blocks[--cache.n];
        return malloc(BLOCK_SIZE);
}

void tls_alloc_free(void *p)
{
        if (!p)
                return;
        if (cache.n < TLS_ALLOC_CACHED && is_block(p)) {
                if (!cache.registered)
                        cache.registered = pthread_setspecific(exit_key, &cache) == 0;
                cache.blocks[cache.n++] = p;
                return;
        }
        free(p);
}

size_t tls_alloc_cached(void)
{
        return cache.n;
}

static void install(void)
{
        (void)pthread_key_create(&exit_key, cache_drain);
        gnutls_malloc = tls_alloc_malloc;
        (gnutls_free) = tls_alloc_free; /* gnutls.h makes gnutls_free(p) a macro */
}

void tls_alloc_install(void)
{
        (void)pthread_once(&install_once, install);
}
