/*
 * capi-sim owner index: Machines grouped by their controlling KubeadmControlPlane or
 * MachineDeployment, kept by the machines informer's handler and by the owner reconciles
 * (locally created / deleted Machines, so a reconcile that runs before the informer caught
 * up neither creates nor deletes twice). Lets an owner reconcile count its Machines without
 * parsing any: O(members) per reconcile, never O(all machines).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi.h"
#include "xalloc.h"

#define BUCKETS 1024u

struct group {
        struct group *next;
        char *key; /* "<kind>|<ns>|<owner>" */
        struct capi_member *m;
        size_t n, cap;
};

struct capi_index {
        pthread_mutex_t lock;
        struct group *b[BUCKETS];
        uint64_t seq;
};

static const char *const owner_kinds[CAPI_OWNER_KINDS] = {
        [CAPI_OWNER_KCP] = "KubeadmControlPlane",
        [CAPI_OWNER_MD] = "MachineDeployment",
};

struct capi_index *capi_index_new(void)
{
        struct capi_index *x = xcalloc(1, sizeof(*x));

        pthread_mutex_init(&x->lock, NULL);
        return x;
}

struct capi_index *capi_index_free(struct capi_index *x)
{
        if (!x)
                return NULL;
        for (size_t i = 0; i < BUCKETS; i++) {
                struct group *g = x->b[i], *next;

                for (; g; g = next) {
                        next = g->next;
                        free(g->key);
                        free(g->m);
                        free(g);
                }
        }
        pthread_mutex_destroy(&x->lock);
        free(x);
        return NULL;
}

static unsigned hash(const char *s)
{
        unsigned h = 2166136261u;

        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 16777619u;
        return h % BUCKETS;
}

/* The group of kind/ns/owner; created when `create`. Under the lock. */
static struct group *group_of(struct capi_index *x,
                              enum capi_owner_kind k,
                              const char *ns,
                              const char *owner,
                              bool create)
{
        char *key = xasprintf("%d|%s|%s", (int)k, ns ? ns : "", owner);
        unsigned h = hash(key);
        struct group *g;

        for (g = x->b[h]; g; g = g->next)
                if (strcmp(g->key, key) == 0)
                        break;
        if (!g && create) {
                g = xcalloc(1, sizeof(*g));
                g->key = key;
                key = NULL;
                g->next = x->b[h];
                x->b[h] = g;
        }
        free(key);
        return g;
}

static struct capi_member *member_of(struct capi_index *x,
                                     struct group *g,
                                     const char *name,
                                     bool create)
{
        for (size_t i = 0; i < g->n; i++)
                if (strcmp(g->m[i].name, name) == 0)
                        return &g->m[i];
        if (!create)
                return NULL;
        if (g->n == g->cap) {
                g->cap = g->cap ? g->cap * 2 : 8;
                g->m = xrealloc(g->m, g->cap * sizeof(*g->m));
        }
        memset(&g->m[g->n], 0, sizeof(g->m[0]));
        snprintf(g->m[g->n].name, sizeof(g->m[0].name), "%s", name);
        g->m[g->n].seq = ++x->seq;
        return &g->m[g->n++];
}

/* The owner kind of a Machine, or CAPI_OWNER_KINDS when neither owns it. A MachineSet's
 * Machine belongs to the MachineDeployment its deployment-name label names. */
static enum capi_owner_kind owner_kind(const cJSON *m, const char **ret_owner)
{
        const char *md = json_find_str(m, "metadata", "labels", CAPI_LABEL_DEPLOYMENT, NULL);

        if (md && capi_owner_name(m, "MachineSet")) {
                *ret_owner = md;
                return CAPI_OWNER_MD;
        }
        for (int k = 0; k < CAPI_OWNER_KINDS; k++) {
                const char *o = capi_owner_name(m, owner_kinds[k]);

                if (o) {
                        *ret_owner = o;
                        return (enum capi_owner_kind)k;
                }
        }
        return CAPI_OWNER_KINDS;
}

/* A MachineHealthCheck marked it: condition OwnerRemediated False. */
static bool owner_remediated_false(const cJSON *m)
{
        const cJSON *c;

        cJSON_ArrayForEach (c, json_find(m, "status", "conditions", NULL)) {
                const char *t = json_find_str(c, "type", NULL);
                const char *st = json_find_str(c, "status", NULL);

                if (t && st && strcmp(t, "OwnerRemediated") == 0)
                        return strcmp(st, "False") == 0;
        }
        return false;
}

static void upsert(void *arg, const struct kube_object *obj)
{
        struct capi_index *x = arg;
        const cJSON *m = kube_object_json(obj);
        const char *owner = NULL, *created;
        const char *fd = json_find_str(m, "spec", "failureDomain", NULL);
        const char *th = json_find_str(m, "metadata", "labels", CAPI_LABEL_HASH, NULL);
        const char *tmpl = json_find_str(m, "metadata", "annotations", CAPI_ANN_TEMPLATE, NULL);
        const char *ver = json_find_str(m, "spec", "version", NULL);
        enum capi_owner_kind k = owner_kind(m, &owner);
        struct capi_member *mem;

        if (k == CAPI_OWNER_KINDS)
                return;
        created = json_find_str(m, "metadata", "creationTimestamp", NULL);
        pthread_mutex_lock(&x->lock);
        mem = member_of(x, group_of(x, k, kube_object_namespace(obj), owner, true),
                        kube_object_name(obj), true);
        snprintf(mem->created, sizeof(mem->created), "%s", created ? created : "");
        mem->ready = capi_status_true(m, "infrastructureReady", "infrastructureProvisioned");
        mem->deleting = mem->deleting || capi_deleting(m);
        mem->remediate = owner_remediated_false(m);
        snprintf(mem->failure_domain, sizeof(mem->failure_domain), "%s", fd ? fd : "");
        snprintf(mem->hash, sizeof(mem->hash), "%s", th ? th : "");
        snprintf(mem->tmpl, sizeof(mem->tmpl), "%s", tmpl ? tmpl : "");
        snprintf(mem->version, sizeof(mem->version), "%s", ver ? ver : "");
        pthread_mutex_unlock(&x->lock);
}

static void on_update(void *arg, const struct kube_object *old, const struct kube_object *cur)
{
        (void)old;
        upsert(arg, cur);
}

static void on_delete(void *arg, const struct kube_object *last)
{
        struct capi_index *x = arg;
        const char *owner = NULL;
        enum capi_owner_kind k = owner_kind(kube_object_json(last), &owner);
        struct group *g;
        struct capi_member *mem;

        if (k == CAPI_OWNER_KINDS)
                return;
        pthread_mutex_lock(&x->lock);
        g = group_of(x, k, kube_object_namespace(last), owner, false);
        mem = g ? member_of(x, g, kube_object_name(last), false) : NULL;
        if (mem)
                *mem = g->m[--g->n];
        pthread_mutex_unlock(&x->lock);
}

struct informer_handler capi_index_handler(struct capi_index *x)
{
        return (struct informer_handler){
                .on_add = upsert, .on_update = on_update, .on_delete = on_delete, .arg = x
        };
}

void capi_index_put_local(struct capi_index *x,
                          enum capi_owner_kind k,
                          const char *ns,
                          const char *owner,
                          const struct capi_member *m)
{
        struct capi_member *mem;

        pthread_mutex_lock(&x->lock);
        mem = member_of(x, group_of(x, k, ns, owner, true), m->name, true);
        memcpy(mem->failure_domain, m->failure_domain, sizeof(mem->failure_domain));
        memcpy(mem->hash, m->hash, sizeof(mem->hash));
        memcpy(mem->tmpl, m->tmpl, sizeof(mem->tmpl));
        memcpy(mem->version, m->version, sizeof(mem->version));
        pthread_mutex_unlock(&x->lock);
}

void capi_index_mark_deleting(struct capi_index *x,
                              enum capi_owner_kind k,
                              const char *ns,
                              const char *owner,
                              const char *machine)
{
        struct group *g;
        struct capi_member *mem;

        pthread_mutex_lock(&x->lock);
        g = group_of(x, k, ns, owner, false);
        mem = g ? member_of(x, g, machine, false) : NULL;
        if (mem)
                mem->deleting = true;
        pthread_mutex_unlock(&x->lock);
}

/* Oldest first: by creationTimestamp ("" = created locally, newest), then insertion. */
static int cmp_member(const void *pa, const void *pb)
{
        const struct capi_member *a = pa, *b = pb;
        int c;

        if (!a->created[0] != !b->created[0])
                return a->created[0] ? -1 : 1;
        c = strcmp(a->created, b->created);
        if (c)
                return c;
        return a->seq < b->seq ? -1 : a->seq > b->seq;
}

size_t capi_index_members(struct capi_index *x,
                          enum capi_owner_kind k,
                          const char *ns,
                          const char *owner,
                          struct capi_member **ret)
{
        struct group *g;
        size_t n = 0;

        *ret = NULL;
        pthread_mutex_lock(&x->lock);
        g = group_of(x, k, ns, owner, false);
        if (g && g->n) {
                n = g->n;
                *ret = xmalloc(n * sizeof(**ret));
                memcpy(*ret, g->m, n * sizeof(**ret));
        }
        pthread_mutex_unlock(&x->lock);
        if (n)
                qsort(*ret, n, sizeof(**ret), cmp_member);
        return n;
}
