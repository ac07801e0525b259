/*
 * informer_store: the informer's cache. An entry is one allocation holding the object as
 * compact JSON text (without managedFields) and the namespace, name, resourceVersion and
 * cluster label it is indexed by. Both chain sets share one bucket count and grow together
 * (load factor 1). Changes report what they did as events; readers get fresh snapshots
 * parsed from the text.
 */
#include "informer_store.h"

#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

#define INITIAL_BUCKETS 64

/* ---- hashing ---- */

static uint64_t fnv(uint64_t h, const char *s)
{
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                h ^= *p;
                h *= 1099511628211ULL;
        }
        return h;
}

static uint64_t key_hash(const char *ns, const char *name)
{
        return fnv(fnv(14695981039346656037ULL, ns) ^ '/', name);
}

static uint64_t cluster_hash(const char *cluster)
{
        return fnv(14695981039346656037ULL, cluster);
}

/* ---- store (callers hold the lock as noted) ---- */

void informer_store_init(struct store *s)
{
        pthread_rwlockattr_t a;

        /* glibc's default rwlock lets a stream of readers starve the watch thread */
        (void)pthread_rwlockattr_init(&a);
        (void)pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
        (void)pthread_rwlock_init(&s->lock, &a);
        (void)pthread_rwlockattr_destroy(&a);
        s->n_table = INITIAL_BUCKETS;
        s->table = xcalloc(s->n_table, sizeof(*s->table));
        s->ctable = xcalloc(s->n_table, sizeof(*s->ctable));
        s->n = 0;
        s->epoch = 0;
}

void informer_store_release(struct store *s)
{
        for (size_t i = 0; s->table && i < s->n_table; i++) {
                struct entry *e = s->table[i];

                while (e) {
                        struct entry *next = e->next;

                        free(e);
                        e = next;
                }
        }
        free(s->table);
        free(s->ctable);
        (void)pthread_rwlock_destroy(&s->lock);
}

/* The link pointing at ns/name's entry, or at the NULL ending its chain. */
struct entry **informer_store_find(struct store *s, const char *ns, const char *name)
{
        uint64_t h = key_hash(ns, name);
        struct entry **link = &s->table[h & (s->n_table - 1)];

        for (; *link; link = &(*link)->next)
                if ((*link)->hash == h && !strcmp((*link)->name, name) && !strcmp((*link)->ns, ns))
                        break;
        return link;
}

static void cindex_link(struct store *s, struct entry *e)
{
        const char *c = e->cluster;
        size_t i;

        if (!c)
                return;
        i = cluster_hash(c) & (s->n_table - 1);
        e->cnext = s->ctable[i];
        if (e->cnext)
                e->cnext->cprev = &e->cnext;
        e->cprev = &s->ctable[i];
        s->ctable[i] = e;
}

/* Every machine of a cluster shares one chain: a walk to find e would be O(cluster size). */
static void cindex_unlink(struct entry *e)
{
        if (!e->cprev)
                return;
        *e->cprev = e->cnext;
        if (e->cnext)
                e->cnext->cprev = e->cprev;
        e->cnext = NULL;
        e->cprev = NULL;
}

static void store_grow(struct store *s)
{
        struct entry **old = s->table;
        size_t n_old = s->n_table;

        if (s->n < s->n_table)
                return;
        s->n_table *= 2;
        s->table = xcalloc(s->n_table, sizeof(*s->table));
        free(s->ctable);
        s->ctable = xcalloc(s->n_table, sizeof(*s->ctable));
        for (size_t i = 0; i < n_old; i++) {
                struct entry *e = old[i];

                while (e) {
                        struct entry *next = e->next;
                        size_t j = e->hash & (s->n_table - 1);

                        e->next = s->table[j];
                        s->table[j] = e;
                        cindex_link(s, e);
                        e = next;
                }
        }
        free(old);
}

void informer_evlist_push(struct evlist *l,
                          enum ev_type type,
                          struct kube_object *old,
                          struct kube_object *cur)
{
        if (l->n == l->cap) {
                l->cap = l->cap ? l->cap * 2 : 16;
                l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
        }
        l->v[l->n++] = (struct ev){ .type = type, .old = old, .cur = cur };
}

static char *put_str(char *p, const char *str, size_t len)
{
        memcpy(p, str, len);
        p[len] = '\0';
        return p + len + 1;
}

/* One allocation: o's JSON text and its index fields. */
struct entry *informer_entry_new(const struct kube_object *o, uint64_t epoch)
{
        char *text = cJSON_PrintUnformatted(kube_object_json(o));
        const char *ns = kube_object_namespace(o), *name = kube_object_name(o);
        const char *rv = kube_object_resource_version(o), *cl = kube_object_cluster_name(o);
        size_t lt, ln = strlen(ns), lm = strlen(name), lr = strlen(rv);
        size_t lc = cl ? strlen(cl) : 0;
        size_t size;
        struct entry *e;
        char *p;

        if (!text)
                abort(); /* out of memory: the project's allocators abort too (xalloc.h) */
        lt = strlen(text);
        size = sizeof(struct entry) + lt + ln + lm + lr + lc + 5;
        e = xmalloc(size);
        p = e->data;

        *e = (struct entry){
                .hash = key_hash(ns, name), .epoch = epoch, .text_len = lt, .size = size
        };
        p = put_str(p, text, lt);
        e->ns = p;
        p = put_str(p, ns, ln);
        e->name = p;
        p = put_str(p, name, lm);
        e->rv = p;
        p = put_str(p, rv, lr);
        if (cl) {
                e->cluster = p;
                (void)put_str(p, cl, lc);
        }
        cJSON_free(text);
        return e;
}

/* A new snapshot parsed from the entry's text (NULL only if memory ran out). */
struct kube_object *informer_entry_object(const struct entry *e)
{
        cJSON *tree = cJSON_ParseWithLengthOpts(e->data, e->text_len, NULL, false);
        struct kube_object *o = NULL;

        if (tree && kube_object_new(tree, &o) < 0)
                return NULL; /* cannot happen: the text was printed from a named object */
        return o;
}

/* Write lock held. Inserts or replaces o's entry with e (informer_entry_new(o), made before taking
 * the lock); o's reference moves to the event. */
void informer_store_put(struct store *s, struct kube_object *o, struct entry *e, struct evlist *l)
{
        struct entry **link = informer_store_find(s, kube_object_namespace(o), kube_object_name(o));
        struct entry *old = *link;

        e->epoch = s->epoch;
        s->bytes += e->size;

        if (old) {
                e->next = old->next;
                *link = e;
                cindex_unlink(old);
                cindex_link(s, e);
                informer_evlist_push(l, EV_UPDATE, informer_entry_object(old), o);
                s->bytes -= old->size;
                free(old);
                return;
        }
        *link = e;
        cindex_link(s, e);
        s->n++;
        informer_evlist_push(l, EV_ADD, NULL, o);
        store_grow(s);
}

/* Write lock held. Unlinks the entry at link and reports it deleted, as last (the final
 * state a watch reported; reference consumed) or else as the cached state. */
static void store_unlink(struct store *s,
                         struct entry **link,
                         struct kube_object *last,
                         struct evlist *l)
{
        struct entry *e = *link;

        *link = e->next;
        cindex_unlink(e);
        s->n--;
        s->bytes -= e->size;
        informer_evlist_push(l, EV_DELETE, NULL, last ? last : informer_entry_object(e));
        free(e);
}

/* Write lock held. o's reference is consumed. */
void informer_store_del(struct store *s, struct kube_object *o, struct evlist *l)
{
        struct entry **link = informer_store_find(s, kube_object_namespace(o), kube_object_name(o));

        if (!*link) {
                kube_object_unref(o); /* never cached (or already gone): nothing to report */
                return;
        }
        store_unlink(s, link, o, l);
}

/* Write lock held. Stores listed objects (references consumed) and marks them with the
 * current epoch: part of a relist, which informer_store_sweep finishes. */
void informer_store_mark(struct store *s, struct kube_object **objs, size_t n, struct evlist *l)
{
        for (size_t i = 0; i < n; i++) {
                struct entry *e = *informer_store_find(s, kube_object_namespace(objs[i]),
                                                       kube_object_name(objs[i]));

                if (e && !strcmp(e->rv, kube_object_resource_version(objs[i]))) {
                        e->epoch = s->epoch; /* unchanged: nothing to store or report */
                        kube_object_unref(objs[i]);
                        continue;
                }
                informer_store_put(s, objs[i], informer_entry_new(objs[i], s->epoch), l);
        }
}

/* Write lock held. Ends a relist: whatever the list did not mark is reported deleted. */
void informer_store_sweep(struct store *s, struct evlist *l)
{
        for (size_t i = 0; i < s->n_table; i++) {
                struct entry **link = &s->table[i];

                while (*link) {
                        if ((*link)->epoch != s->epoch)
                                store_unlink(s, link, NULL, l);
                        else
                                link = &(*link)->next;
                }
        }
}

/* "ns" NUL "name" NUL in one allocation. */
static char *key_dup(const struct entry *e)
{
        size_t ln = strlen(e->ns), lm = strlen(e->name);
        char *k = xmalloc(ln + lm + 2);

        (void)put_str(put_str(k, e->ns, ln), e->name, lm);
        return k;
}

static void collect_one(struct collect *c, const struct entry *e)
{
        struct kube_object *o = NULL;

        if (c->ns && strcmp(e->ns, c->ns) != 0)
                return;
        if (c->cluster && (!e->cluster || strcmp(e->cluster, c->cluster) != 0))
                return;
        if (!c->keys) {
                o = informer_entry_object(e);
                if (!o)
                        return;
        }
        if (c->n == c->cap) {
                c->cap = c->cap ? c->cap * 2 : 16;
                if (c->keys)
                        c->key = xrealloc(c->key, c->cap * sizeof(*c->key));
                else
                        c->obj = xrealloc(c->obj, c->cap * sizeof(*c->obj));
        }
        if (c->keys)
                c->key[c->n++] = key_dup(e);
        else
                c->obj[c->n++] = o;
}

/* Takes the read lock; walks the cluster index when a cluster is given. */
void informer_store_collect(struct store *s, struct collect *c)
{
        (void)pthread_rwlock_rdlock(&s->lock);
        if (c->cluster) {
                size_t i = cluster_hash(c->cluster) & (s->n_table - 1);

                for (struct entry *e = s->ctable[i]; e; e = e->cnext)
                        collect_one(c, e);
        } else {
                for (size_t i = 0; i < s->n_table; i++)
                        for (struct entry *e = s->table[i]; e; e = e->next)
                                collect_one(c, e);
        }
        (void)pthread_rwlock_unlock(&s->lock);
}
