/* kube-sim registry: the built-in resources and those registered from CRDs. */
#include <stdlib.h>
#include <string.h>

#include "ks.h"
#include "xalloc.h"

struct builtin {
        const char *group, *version, *plural, *singular, *kind;
        bool namespaced, status_sub;
        const char *short_names; /* JSON array */
        const char *categories;  /* JSON array */
        const char *columns;     /* JSON array of printer columns */
};

#define COL(n, t, p) "{\"name\":\"" n "\",\"type\":\"" t "\",\"jsonPath\":\"" p "\"}"

static const struct builtin builtins[] = {
        { "", "v1", "namespaces", "namespace", "Namespace", false, true, "[\"ns\"]", NULL,
          "[" COL("Status", "string", ".status.phase") "]" },
        { "", "v1", "secrets", "secret", "Secret", true, false, NULL, NULL,
          "[" COL("Type", "string", ".type") "," COL("Data", "count", ".data") "]" },
        { "", "v1", "configmaps", "configmap", "ConfigMap", true, false, "[\"cm\"]", NULL,
          "[" COL("Data", "count", ".data") "]" },
        { "", "v1", "events", "event", "Event", true, false, "[\"ev\"]", NULL,
          "[" COL("Type", "string", ".type") "," COL("Reason", "string", ".reason") "," COL(
                  "Object", "string", ".involvedObject.name") "," COL("Message",
                                                                      "string",
                                                                      ".message") "]" },
        { "", "v1", "nodes", "node", "Node", false, true, "[\"no\"]", NULL, NULL },
        { "", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", true, false, "[\"sa\"]",
          NULL, NULL },
        { "", "v1", "services", "service", "Service", true, true, "[\"svc\"]", "[\"all\"]",
          "[" COL("Type", "string", ".spec.type") "," COL(
                  "Cluster-IP", "string", ".spec.clusterIP") "]" },
        { "coordination.k8s.io", "v1", "leases", "lease", "Lease", true, false, NULL, NULL,
          "[" COL("Holder", "string", ".spec.holderIdentity") "]" },
        { "events.k8s.io", "v1", "events", "event", "Event", true, false, "[\"ev\"]", NULL, NULL },
        { "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
          "mutatingwebhookconfiguration", "MutatingWebhookConfiguration", false, false, NULL,
          "[\"api-extensions\"]", "[" COL("Webhooks", "count", ".webhooks") "]" },
        { "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
          "validatingwebhookconfiguration", "ValidatingWebhookConfiguration", false, false, NULL,
          "[\"api-extensions\"]", "[" COL("Webhooks", "count", ".webhooks") "]" },
        { "rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", false,
          false, NULL, NULL, NULL },
        { "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding",
          "ClusterRoleBinding", false, false, NULL, NULL,
          "[" COL("Role", "string", ".roleRef.name") "]" },
        { "rbac.authorization.k8s.io", "v1", "roles", "role", "Role", true, false, NULL, NULL,
          NULL },
        { "rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", true,
          false, NULL, NULL, "[" COL("Role", "string", ".roleRef.name") "]" },
        /* Reviews: never stored, answered by authn.c (listed here for discovery) */
        { "authentication.k8s.io", "v1", "tokenreviews", "tokenreview", "TokenReview", false, false,
          NULL, NULL, NULL },
        { "authorization.k8s.io", "v1", "subjectaccessreviews", "subjectaccessreview",
          "SubjectAccessReview", false, false, NULL, NULL, NULL },
        { "authorization.k8s.io", "v1", "selfsubjectaccessreviews", "selfsubjectaccessreview",
          "SelfSubjectAccessReview", false, false, NULL, NULL, NULL },
        { "apiextensions.k8s.io", "v1", "customresourcedefinitions", "customresourcedefinition",
          "CustomResourceDefinition", false, true, "[\"crd\",\"crds\"]", "[\"api-extensions\"]",
          "[" COL("Created At", "string", ".metadata.creationTimestamp") "]" },
};

static cJSON *parse_or_array(const char *s)
{
        cJSON *j = s ? cJSON_Parse(s) : NULL;

        return j ? j : cJSON_CreateArray();
}

static struct kres *res_new(const char *group, const char *version, const char *plural)
{
        struct kres *r = xcalloc(1, sizeof(*r));
        struct kres **tail = &ks.res;

        r->group = xstrdup(group);
        r->version = xstrdup(version);
        r->plural = xstrdup(plural);
        r->coll = store_coll(group, plural);
        while (*tail)
                tail = &(*tail)->next;
        *tail = r;
        return r;
}

/*
 * Handlers read a kres's strings and trees without the lock (they never change for built-ins
 * and rarely for CRDs), so values replaced by a CRD update are retired here, not freed, until
 * exit: a reader holding the old pointer stays safe. Growth is bounded by CRD changes.
 */
static cJSON *graveyard;
static char **retired_strs;
static size_t n_retired;

static void retire_tree(cJSON *x)
{
        if (!x)
                return;
        if (!graveyard)
                graveyard = cJSON_CreateArray();
        cJSON_AddItemToArray(graveyard, x);
}

static void retire_str(char *s)
{
        if (!s)
                return;
        retired_strs = xrealloc(retired_strs, (n_retired + 1) * sizeof(*retired_strs));
        retired_strs[n_retired++] = s;
}

/* Replaces *slot with a copy of v unless equal (the old value is retired). */
static void set_str(char **slot, const char *v)
{
        if (*slot && !strcmp(*slot, v))
                return;
        retire_str(*slot);
        *slot = xstrdup(v);
}

/* Replaces *slot with v (owned) unless equal (the old value is retired). */
static void set_tree(cJSON **slot, cJSON *v)
{
        if (*slot && v && cJSON_Compare(*slot, v, true)) {
                cJSON_Delete(v);
                return;
        }
        retire_tree(*slot);
        *slot = v;
}

static void res_set_names(struct kres *r,
                          const char *singular,
                          const char *kind,
                          const char *list_kind)
{
        char *lk = list_kind ? xstrdup(list_kind) : xasprintf("%sList", kind);

        set_str(&r->singular, singular);
        set_str(&r->kind, kind);
        set_str(&r->list_kind, lk);
        free(lk);
}

void registry_init(void)
{
        size_t i;

        for (i = 0; i < ARRAY_SIZE(builtins); i++) {
                const struct builtin *b = &builtins[i];
                struct kres *r = res_new(b->group, b->version, b->plural);

                res_set_names(r, b->singular, b->kind, NULL);
                r->namespaced = b->namespaced;
                r->status_sub = b->status_sub;
                r->served = true;
                r->storage = true;
                r->short_names = parse_or_array(b->short_names);
                r->categories = parse_or_array(b->categories);
                r->columns = b->columns ? cJSON_Parse(b->columns) : NULL;
        }
}

static void res_free(struct kres *r)
{
        free(r->group);
        free(r->version);
        free(r->plural);
        free(r->singular);
        free(r->kind);
        free(r->list_kind);
        cJSON_Delete(r->short_names);
        cJSON_Delete(r->categories);
        cJSON_Delete(r->columns);
        cJSON_Delete(r->schema);
        free(r);
}

void registry_free(void)
{
        size_t i;

        for (i = 0; i < n_retired; i++)
                free(retired_strs[i]);
        free(retired_strs);
        retired_strs = NULL;
        n_retired = 0;
        cJSON_Delete(graveyard);
        graveyard = NULL;
        while (ks.res) {
                struct kres *n = ks.res->next;

                res_free(ks.res);
                ks.res = n;
        }
}

struct kres *registry_find(const char *group, const char *version, const char *plural)
{
        struct kres *r;

        for (r = ks.res; r; r = r->next)
                if (r->served && !strcmp(r->group, group) && !strcmp(r->version, version) &&
                    !strcmp(r->plural, plural))
                        return r;
        return NULL;
}

bool ks_group_served(const char *group)
{
        struct kres *r;

        for (r = ks.res; r; r = r->next)
                if (r->served && !strcmp(r->group, group))
                        return true;
        return false;
}

static struct kres *find_any(const char *group, const char *version, const char *plural)
{
        struct kres *r;

        for (r = ks.res; r; r = r->next)
                if (!strcmp(r->group, group) && !strcmp(r->version, version) &&
                    !strcmp(r->plural, plural))
                        return r;
        return NULL;
}

static cJSON *dup_or_array(const cJSON *x)
{
        return cJSON_IsArray(x) ? cJSON_Duplicate(x, true) : cJSON_CreateArray();
}

static void apply_version(const cJSON *spec, const cJSON *names, const cJSON *v)
{
        const char *group = ks_obj_str(spec, "group", NULL);
        const char *plural = ks_obj_str(names, "plural", NULL);
        const char *kind = ks_obj_str(names, "kind", NULL);
        const char *singular = ks_obj_str(names, "singular", NULL);
        const char *vname = ks_obj_str(v, "name", NULL);
        const char *scope = ks_obj_str(spec, "scope", NULL);
        char *lower = NULL;
        struct kres *r;
        size_t i;

        if (!group || !plural || !kind || !vname)
                return;
        r = find_any(group, vname, plural);
        if (!r)
                r = res_new(group, vname, plural);
        if (!singular) {
                lower = xstrdup(kind);
                for (i = 0; lower[i]; i++)
                        lower[i] = (char)(lower[i] >= 'A' && lower[i] <= 'Z' ? lower[i] + 32
                                                                             : lower[i]);
        }
        res_set_names(r, singular ? singular : lower, kind, ks_obj_str(names, "listKind", NULL));
        free(lower);
        r->crd = true;
        r->namespaced = !scope || strcmp(scope, "Cluster") != 0;
        r->served = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "served"));
        r->storage = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "storage"));
        r->status_sub = ks_obj_get(v, "subresources", "status") != NULL;
        set_tree(&r->short_names, dup_or_array(ks_obj_get(names, "shortNames", NULL)));
        set_tree(&r->categories, dup_or_array(ks_obj_get(names, "categories", NULL)));
        set_tree(&r->columns, dup_or_array(ks_obj_get(v, "additionalPrinterColumns", NULL)));
        set_tree(&r->schema, cJSON_Duplicate(ks_obj_get(v, "schema", "openAPIV3Schema"), true));
}

void registry_drop_crd(const cJSON *crd)
{
        const cJSON *spec = ks_obj_get(crd, "spec", NULL);
        const char *group = ks_obj_str(spec, "group", NULL);
        const char *plural = ks_obj_str(spec, "names", "plural");
        struct kres *r;

        if (!group || !plural)
                return;
        for (r = ks.res; r; r = r->next)
                if (r->crd && !strcmp(r->group, group) && !strcmp(r->plural, plural))
                        r->served = false;
}

void registry_apply_crd(const cJSON *crd)
{
        const cJSON *spec = ks_obj_get(crd, "spec", NULL);
        const cJSON *names = ks_obj_get(spec, "names", NULL);
        const cJSON *v;

        registry_drop_crd(crd);
        cJSON_ArrayForEach (v, ks_obj_get(spec, "versions", NULL)) {
                apply_version(spec, names, v);
        }
}

static bool crd_invalid(struct kresp *resp, const char *name, const char *field, const char *why)
{
        cJSON *d = cJSON_CreateObject();
        cJSON *causes = cJSON_AddArrayToObject(d, "causes");
        cJSON *c = cJSON_CreateObject();

        cJSON_AddStringToObject(d, "name", name);
        cJSON_AddStringToObject(d, "group", "apiextensions.k8s.io");
        cJSON_AddStringToObject(d, "kind", "CustomResourceDefinition");
        cJSON_AddStringToObject(c, "reason", "FieldValueInvalid");
        cJSON_AddStringToObject(c, "message", why);
        cJSON_AddStringToObject(c, "field", field);
        cJSON_AddItemToArray(causes, c);
        kresp_status(resp, 422, "Invalid", d,
                     "CustomResourceDefinition.apiextensions.k8s.io \"%s\" is invalid: %s: %s",
                     name, field, why);
        return false;
}

bool registry_check_crd(const cJSON *crd, struct kresp *resp)
{
        const cJSON *spec = ks_obj_get(crd, "spec", NULL);
        const char *name = ks_obj_str(crd, "metadata", "name");
        const char *group = ks_obj_str(spec, "group", NULL);
        const char *plural = ks_obj_str(spec, "names", "plural");
        const char *kind = ks_obj_str(spec, "names", "kind");
        const cJSON *v;
        char *want;
        int storage = 0;
        bool ok;

        if (!name)
                name = "";
        if (!group || !plural || !kind)
                return crd_invalid(resp, name, "spec.names", "Required value");
        want = xasprintf("%s.%s", plural, group);
        ok = !strcmp(want, name);
        free(want);
        if (!ok)
                return crd_invalid(resp, name, "metadata.name",
                                   "must be spec.names.plural+\".\"+spec.group");
        cJSON_ArrayForEach (v, ks_obj_get(spec, "versions", NULL)) {
                if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "storage")))
                        storage++;
        }
        if (storage != 1)
                return crd_invalid(resp, name, "spec.versions",
                                   "Invalid value: must have exactly one version marked as "
                                   "storage version");
        return true;
}
