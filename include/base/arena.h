#pragma once
/*
 * arena: a per-thread bump allocator for the short-lived cJSON trees of one request (the
 * AdmissionReview a webhook decodes, validates and answers). cJSON's allocator hooks are
 * process-wide, so xalloc_install_cjson_hooks() installs arena_cjson_malloc/free: on a thread
 * inside an arena scope an allocation that fits comes from that thread's block (one pointer
 * bump, free is a counter decrement); everywhere else, and for what does not fit, they are
 * plain malloc/free.
 *
 * The rule: every cJSON allocation made in a scope is freed in the same scope on the same
 * thread (nothing built in a request outlives it). arena_scope_end() checks this; when
 * something escaped, that thread's block is never reused (it stays allocated until the escaped
 * allocations are freed on that thread), the thread falls back to malloc for good and
 * arena_escapes() counts it.
 *
 * Threads: every function may be called from any thread; each thread has its own block
 * (allocated on its first scope, freed when the thread exits). Under AddressSanitizer every
 * allocation is guarded and a freed one poisoned, so overruns and use after free are still
 * reported.
 */

#include <stddef.h>

/* Bytes of one thread's block: room for the trees of a review of a few KiB. */
#define ARENA_BLOCK_SIZE (48u * 1024u)

/* Starts a scope on the calling thread; scopes do not nest (an inner begin is ignored
 * and its end too). */
void arena_scope_begin(void);
/* Ends the scope and rewinds the block when everything allocated in it was freed. */
void arena_scope_end(void);
/* Scopes that ended with allocations still live, process-wide (0 unless there is a bug). */
unsigned long arena_escapes(void);
/* Allocations served from a block, process-wide (for tests and benchmarks). */
unsigned long arena_hits(void);

/* cJSON hooks: never return NULL (malloc failure aborts like xmalloc). */
void *arena_cjson_malloc(size_t n);
void arena_cjson_free(void *p);
