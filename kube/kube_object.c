/*
 * kube_object: immutable, reference-counted snapshots of Kubernetes objects (informer.h).
 *
 * A kube_object is one allocation holding the atomic reference count, the owned cJSON tree and
 * pointers into that tree for the fields every cache lookup needs (namespace, name, uid,
 * resourceVersion, cluster-name label). No string is copied: the pointers stay valid as
 * long as the tree, which nobody modifies after kube_object_new(). The last kube_object_unref()
 * frees both. References may be taken and dropped on any thread (acq_rel on the final drop, so
 * every write another thread made before its unref is visible to the freeing thread).
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "err.h"
#include "informer.h"
#include "json.h"
#include "xalloc.h"

#define CLUSTER_NAME_LABEL "cluster.x-k8s.io/cluster-name"

struct kube_object {
        _Atomic size_t refs;
        cJSON *json;         /* owned, never modified */
        const char *ns;      /* borrowed from json; "" when cluster-scoped */
        const char *name;    /* borrowed from json */
        const char *uid;     /* borrowed from json; "" when absent */
        const char *rv;      /* borrowed from json; "" when absent */
        const char *cluster; /* borrowed from json; NULL when the label is absent */
};

/* obj[key] when it is a string, else NULL (borrowed). */
static const char *or_empty(const char *s)
{
        return s ? s : "";
}

int kube_object_new(cJSON *obj, struct kube_object **ret)
{
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
        const cJSON *labels = cJSON_GetObjectItemCaseSensitive(md, "labels");
        const char *name = json_find_str(md, "name", NULL);
        struct kube_object *o;

        if (!cJSON_IsObject(md) || !name || !*name) {
                cJSON_Delete(obj);
                return CM_EINVAL;
        }
        o = xmalloc(sizeof(*o));
        atomic_init(&o->refs, 1);
        o->json = obj;
        o->name = name;
        o->ns = or_empty(json_find_str(md, "namespace", NULL));
        o->uid = or_empty(json_find_str(md, "uid", NULL));
        o->rv = or_empty(json_find_str(md, "resourceVersion", NULL));
        o->cluster =
                cJSON_IsObject(labels) ? json_find_str(labels, CLUSTER_NAME_LABEL, NULL) : NULL;
        *ret = o;
        return 0;
}

const cJSON *kube_object_json(const struct kube_object *o)
{
        return o->json;
}

const char *kube_object_namespace(const struct kube_object *o)
{
        return o->ns;
}

const char *kube_object_name(const struct kube_object *o)
{
        return o->name;
}

const char *kube_object_uid(const struct kube_object *o)
{
        return o->uid;
}

const char *kube_object_resource_version(const struct kube_object *o)
{
        return o->rv;
}

const char *kube_object_cluster_name(const struct kube_object *o)
{
        return o->cluster;
}

struct kube_object *kube_object_ref(struct kube_object *o)
{
        atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
        return o;
}

void kube_object_unref(struct kube_object *o)
{
        if (!o)
                return;
        if (atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) != 1)
                return;
        cJSON_Delete(o->json);
        free(o);
}

void kube_object_list_free(struct kube_object **objs, size_t n)
{
        if (!objs)
                return;
        for (size_t i = 0; i < n; i++)
                kube_object_unref(objs[i]);
        free(objs);
}
