#pragma once
/*
 * informer_store: the informer's cache (kube/informer_store.c), private to the informer.
 * A chained hash table of entries keyed by namespace/name, plus the cluster index over the
 * same entries; every change appends the events it causes to an evlist, which the
 * informer dispatches after dropping the lock. The lock is the store's own rwlock: the
 * functions below say which they expect the caller to hold.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "informer.h"
#include "kube_client.h"

struct entry {
        struct entry *next;   /* namespace/name chain */
        struct entry *cnext;  /* cluster chain, only while the object has the label */
        struct entry **cprev; /* the link pointing at this entry in that chain (O(1) unlink) */
        uint64_t hash;
        uint64_t epoch;      /* relist mark */
        const char *ns;      /* into data */
        const char *name;    /* into data */
        const char *rv;      /* into data */
        const char *cluster; /* into data; NULL without the label */
        size_t text_len;
        size_t size; /* of the allocation */
        char data[]; /* the JSON text, NUL, then ns, name, rv and cluster, each NUL-ended */
};

struct store {
        pthread_rwlock_t lock;
        struct entry **table;  /* owned chains of owned entries */
        struct entry **ctable; /* cluster index: the same entries, borrowed */
        size_t n_table;        /* a power of two */
        size_t n;
        size_t bytes; /* sum of the entries' sizes */
        uint64_t epoch;
};

enum ev_type {
        EV_ADD,
        EV_UPDATE,
        EV_DELETE,
};

struct ev {
        enum ev_type type;
        struct kube_object *old; /* owned reference; updates only */
        struct kube_object *cur; /* owned reference */
};

struct evlist {
        struct ev *v; /* owned */
        size_t n;
        size_t cap;
};

/* What informer_list, informer_each_key and resync gather under the read lock. */
struct collect {
        const char *ns;           /* NULL = any */
        const char *cluster;      /* NULL = any */
        bool keys;                /* gather keys, else snapshots */
        char **key;               /* owned array of owned keys */
        struct kube_object **obj; /* owned array of owned references */
        size_t n;
        size_t cap;
};

void informer_store_init(struct store *s);
/* Frees every entry and the lock. */
void informer_store_release(struct store *s);
/* Lock held (read or write). The link pointing at ns/name's entry, or at the NULL ending its
 * chain. */
struct entry **informer_store_find(struct store *s, const char *ns, const char *name);
/* One allocation: o's JSON text and its index fields (no lock needed). */
struct entry *informer_entry_new(const struct kube_object *o, uint64_t epoch);
/* A new snapshot parsed from the entry's text (NULL only if memory ran out). */
struct kube_object *informer_entry_object(const struct entry *e);
/* Appends an event (the references move to the list). */
void informer_evlist_push(struct evlist *l,
                          enum ev_type type,
                          struct kube_object *old,
                          struct kube_object *cur);
/* Write lock held. Inserts or replaces o's entry with e (informer_entry_new(o), made before
 * taking the lock); o's reference moves to the event. */
void informer_store_put(struct store *s, struct kube_object *o, struct entry *e, struct evlist *l);
/* Write lock held. o's reference is consumed. */
void informer_store_del(struct store *s, struct kube_object *o, struct evlist *l);
/* Write lock held. Stores listed objects (references consumed) and marks them with the
 * current epoch: part of a relist, which informer_store_sweep finishes. */
void informer_store_mark(struct store *s, struct kube_object **objs, size_t n, struct evlist *l);
/* Write lock held. Ends a relist: whatever the list did not mark is reported deleted. */
void informer_store_sweep(struct store *s, struct evlist *l);
/* Takes the read lock; walks the cluster index when a cluster is given. */
void informer_store_collect(struct store *s, struct collect *c);

/* The name part of a collected key ("ns" NUL "name" NUL). */
static inline const char *informer_key_name(const char *key)
{
        return key + strlen(key) + 1;
}
