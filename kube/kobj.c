/*
 * kobj: immutable, reference-counted snapshots of Kubernetes objects (informer.h).
 *
 * A kobj is one allocation holding the atomic reference count, the owned cJSON tree and
 * pointers into that tree for the fields every cache lookup needs (namespace, name, uid,
 * resourceVersion, cluster-name label). No string is copied: the pointers stay valid as
 * long as the tree, which nobody modifies after kobj_new(). The last kobj_unref() frees
 * both. References may be taken and dropped on any thread (acq_rel on the final drop, so
 * every write another thread made before its unref is visible to the freeing thread).
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "err.h"
#include "informer.h"
#include "xalloc.h"

#define CLUSTER_NAME_LABEL "cluster.x-k8s.io/cluster-name"

struct kobj {
        _Atomic size_t refs;
        cJSON *json;         /* owned, never modified */
        const char *ns;      /* borrowed from json; "" when cluster-scoped */
        const char *name;    /* borrowed from json */
        const char *uid;     /* borrowed from json; "" when absent */
        const char *rv;      /* borrowed from json; "" when absent */
        const char *cluster; /* borrowed from json; NULL when the label is absent */
};

/* obj[key] when it is a string, else NULL (borrowed). */
static const char *str_item(const cJSON *obj, const char *key)
{
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);

        return cJSON_IsString(it) ? it->valuestring : NULL;
}

static const char *or_empty(const char *s)
{
        return s ? s : "";
}

int kobj_new(cJSON *obj, struct kobj **ret)
{
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
        const cJSON *labels = cJSON_GetObjectItemCaseSensitive(md, "labels");
        const char *name = str_item(md, "name");
        struct kobj *o;

        if (!cJSON_IsObject(md) || !name || !*name) {
                cJSON_Delete(obj);
                return CM_EINVAL;
        }
        o = xmalloc(sizeof(*o));
        atomic_init(&o->refs, 1);
        o->json = obj;
        o->name = name;
        o->ns = or_empty(str_item(md, "namespace"));
        o->uid = or_empty(str_item(md, "uid"));
        o->rv = or_empty(str_item(md, "resourceVersion"));
        o->cluster = cJSON_IsObject(labels) ? str_item(labels, CLUSTER_NAME_LABEL) : NULL;
        *ret = o;
        return 0;
}

const cJSON *kobj_json(const struct kobj *o)
{
        return o->json;
}

const char *kobj_namespace(const struct kobj *o)
{
        return o->ns;
}

const char *kobj_name(const struct kobj *o)
{
        return o->name;
}

const char *kobj_uid(const struct kobj *o)
{
        return o->uid;
}

const char *kobj_resource_version(const struct kobj *o)
{
        return o->rv;
}

const char *kobj_cluster_name(const struct kobj *o)
{
        return o->cluster;
}

struct kobj *kobj_ref(struct kobj *o)
{
        atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
        return o;
}

void kobj_unref(struct kobj *o)
{
        if (!o)
                return;
        if (atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) != 1)
                return;
        cJSON_Delete(o->json);
        free(o);
}

void kobj_list_free(struct kobj **objs, size_t n)
{
        if (!objs)
                return;
        for (size_t i = 0; i < n; i++)
                kobj_unref(objs[i]);
        free(objs);
}
