#pragma once
/*
 * tls_alloc: GnuTLS's allocator with a per-thread cache of record buffers.
 *
 * GnuTLS allocates a buffer of about 16.5 KiB for every TLS record it reads, decrypts or
 * writes (its mbuffers) and frees it a moment later: six a webhook request. glibc serves
 * blocks that large from its bins, under an arena lock, and merges them back on free (about
 * 600 instructions a pair, against nginx's reused buffers). tls_alloc_install points
 * GnuTLS's gnutls_malloc and gnutls_free at functions that keep up to TLS_ALLOC_CACHED such
 * blocks per thread and hand them out again; every other size goes to malloc and free.
 *
 * Every block is an ordinary malloc block (a cached one is only held back from free), so a
 * block allocated before the install, or freed with free() by a caller that bypasses
 * gnutls_free, stays correct. A thread's cached blocks are freed when it exits.
 *
 * Thread safety: tls_alloc_install once, in main, before any other thread starts; the hooks
 * themselves are safe from any thread (each uses only its own cache).
 */

#include <stddef.h>

#define TLS_ALLOC_CACHED 4 /* record buffers kept per thread */

/* Installs the hooks (idempotent). */
void tls_alloc_install(void);

/* The hooks, exposed for tests. */
void *tls_alloc_malloc(size_t n);
void tls_alloc_free(void *p);

/* Record buffers this thread holds in its cache now (for tests). */
size_t tls_alloc_cached(void);
