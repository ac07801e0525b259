/* kube-sim store: sorted object arrays per collection, the global RV and the event ring. */
#include <stdlib.h>
#include <string.h>

#include "ks.h"
#include "xalloc.h"

void store_init(size_t hist_cap)
{
        ks.hist_cap = hist_cap ? hist_cap : 1;
        ks.hist = xcalloc(ks.hist_cap, sizeof(*ks.hist));
}

void store_free(void)
{
        size_t i;

        for (i = 0; i < ks.hist_len; i++) {
                cJSON_Delete(ks.hist[(ks.hist_start + i) % ks.hist_cap].obj);
                free(ks.hist[(ks.hist_start + i) % ks.hist_cap].line);
        }
        free(ks.hist);
        while (ks.colls) {
                struct kcoll *n = ks.colls->next;

                for (i = 0; i < ks.colls->n; i++) {
                        cJSON_Delete(ks.colls->objs[i]);
                        free(ks.colls->keys[i].ns);
                        free(ks.colls->keys[i].name);
                }
                free(ks.colls->objs);
                free(ks.colls->keys);
                pthread_cond_destroy(&ks.colls->cond);
                free(ks.colls->group);
                free(ks.colls->plural);
                free(ks.colls);
                ks.colls = n;
        }
}

struct kcoll *store_coll(const char *group, const char *plural)
{
        struct kcoll *c;

        for (c = ks.colls; c; c = c->next)
                if (!strcmp(c->group, group) && !strcmp(c->plural, plural))
                        return c;
        c = xcalloc(1, sizeof(*c));
        pthread_cond_init(&c->cond, NULL);
        c->group = xstrdup(group);
        c->plural = xstrdup(plural);
        c->next = ks.colls;
        ks.colls = c;
        return c;
}

static int key_cmp(const struct kkey *k, const char *ns, const char *name)
{
        int d = strcmp(k->ns, ns ? ns : "");

        return d ? d : strcmp(k->name, name ? name : "");
}

/* Index of the first object not less than (ns, name). */
static size_t lower_bound(const struct kcoll *c, const char *ns, const char *name)
{
        size_t lo = 0, hi = c->n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (key_cmp(&c->keys[mid], ns, name) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

cJSON *store_get(struct kcoll *c, const char *ns, const char *name)
{
        size_t i = lower_bound(c, ns, name);

        if (i < c->n && key_cmp(&c->keys[i], ns, name) == 0)
                return c->objs[i];
        return NULL;
}

void store_put(struct kcoll *c, cJSON *obj)
{
        const char *ns = ks_obj_str(obj, "metadata", "namespace");
        const char *name = ks_obj_str(obj, "metadata", "name");
        size_t i = lower_bound(c, ns, name);

        if (i < c->n && key_cmp(&c->keys[i], ns, name) == 0) {
                cJSON_Delete(c->objs[i]);
                c->objs[i] = obj;
                return;
        }
        if (c->n == c->cap) {
                c->cap = c->cap ? c->cap * 2 : 16;
                c->objs = xrealloc(c->objs, c->cap * sizeof(*c->objs));
                c->keys = xrealloc(c->keys, c->cap * sizeof(*c->keys));
        }
        memmove(&c->objs[i + 1], &c->objs[i], (c->n - i) * sizeof(*c->objs));
        memmove(&c->keys[i + 1], &c->keys[i], (c->n - i) * sizeof(*c->keys));
        c->objs[i] = obj;
        c->keys[i] = (struct kkey){ xstrdup(ns ? ns : ""), xstrdup(name ? name : "") };
        c->n++;
}

void store_remove(struct kcoll *c, const cJSON *obj)
{
        const char *ns = ks_obj_str(obj, "metadata", "namespace");
        const char *name = ks_obj_str(obj, "metadata", "name");
        size_t i = lower_bound(c, ns, name);

        if (i >= c->n || key_cmp(&c->keys[i], ns, name) != 0)
                return;
        cJSON_Delete(c->objs[i]);
        free(c->keys[i].ns);
        free(c->keys[i].name);
        memmove(&c->objs[i], &c->objs[i + 1], (c->n - i - 1) * sizeof(*c->objs));
        memmove(&c->keys[i], &c->keys[i + 1], (c->n - i - 1) * sizeof(*c->keys));
        c->n--;
}

uint64_t store_next_rv(void)
{
        return ++ks.rv;
}

void store_event(enum kev_type type, struct kcoll *c, const cJSON *obj, uint64_t rv)
{
        struct kevent *e;

        if (ks.hist_len == ks.hist_cap) {
                e = &ks.hist[ks.hist_start];
                ks.compacted_rv = e->rv;
                cJSON_Delete(e->obj);
                free(e->line);
                ks.hist_start = (ks.hist_start + 1) % ks.hist_cap;
                ks.hist_len--;
        }
        e = &ks.hist[(ks.hist_start + ks.hist_len) % ks.hist_cap];
        e->rv = rv;
        e->type = type;
        e->coll = c;
        e->obj = cJSON_Duplicate(obj, true);
        e->line = NULL;
        e->line_len = 0;
        ks.hist_len++;
        pthread_cond_broadcast(&c->cond);
}

void store_wake_all(void)
{
        for (struct kcoll *c = ks.colls; c; c = c->next)
                pthread_cond_broadcast(&c->cond);
        pthread_cond_broadcast(&ks.cond);
}

bool store_ns_empty(const char *ns)
{
        struct kcoll *c;
        size_t i;

        for (c = ks.colls; c; c = c->next)
                for (i = 0; i < c->n; i++) {
                        const char *ons = ks_obj_str(c->objs[i], "metadata", "namespace");

                        if (ons && !strcmp(ons, ns))
                                return false;
                }
        return true;
}
