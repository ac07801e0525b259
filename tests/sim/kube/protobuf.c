/*
 * kube-sim protobuf decoding for the few built-in kinds that kubectl's typed clients POST as
 * application/vnd.kubernetes.protobuf (kubectl create secret/configmap/namespace/
 * serviceaccount/clusterrole/clusterrolebinding/role/rolebinding/token, kubectl auth can-i).
 * Only the fields those commands send are described; unknown fields are
 * skipped. Input is the "k8s\0" envelope around runtime.Unknown.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "ks.h"
#include "xalloc.h"

enum pf_kind {
        PF_STRING,
        PF_BYTES, /* base64 in JSON */
        PF_INT,
        PF_BOOL,
        PF_MSG,
        PF_MAP_STR,   /* map<string,string> */
        PF_MAP_BYTES, /* map<string,bytes> */
        PF_REP_STRING,
        PF_REP_MSG,
};

struct pmsg;

struct pfield {
        unsigned num;
        const char *name;
        enum pf_kind kind;
        const struct pmsg *sub;
};

struct pmsg {
        const struct pfield *f;
        size_t n;
};

#define PMSG(arr)                    \
        {                            \
                arr, ARRAY_SIZE(arr) \
        }

static const struct pfield owner_ref_f[] = {
        { 1, "kind", PF_STRING, NULL },     { 3, "name", PF_STRING, NULL },
        { 4, "uid", PF_STRING, NULL },      { 5, "apiVersion", PF_STRING, NULL },
        { 6, "controller", PF_BOOL, NULL }, { 7, "blockOwnerDeletion", PF_BOOL, NULL },
};
static const struct pmsg owner_ref = PMSG(owner_ref_f);

static const struct pfield meta_f[] = {
        { 1, "name", PF_STRING, NULL },
        { 2, "generateName", PF_STRING, NULL },
        { 3, "namespace", PF_STRING, NULL },
        { 11, "labels", PF_MAP_STR, NULL },
        { 12, "annotations", PF_MAP_STR, NULL },
        { 13, "ownerReferences", PF_REP_MSG, &owner_ref },
        { 14, "finalizers", PF_REP_STRING, NULL },
};
static const struct pmsg meta = PMSG(meta_f);

static const struct pfield local_ref_f[] = { { 1, "name", PF_STRING, NULL } };
static const struct pmsg local_ref = PMSG(local_ref_f);

static const struct pfield obj_ref_f[] = {
        { 1, "kind", PF_STRING, NULL },       { 2, "namespace", PF_STRING, NULL },
        { 3, "name", PF_STRING, NULL },       { 4, "uid", PF_STRING, NULL },
        { 5, "apiVersion", PF_STRING, NULL }, { 7, "fieldPath", PF_STRING, NULL },
};
static const struct pmsg obj_ref = PMSG(obj_ref_f);

static const struct pfield configmap_f[] = {
        { 1, "metadata", PF_MSG, &meta },
        { 2, "data", PF_MAP_STR, NULL },
        { 3, "binaryData", PF_MAP_BYTES, NULL },
        { 4, "immutable", PF_BOOL, NULL },
};
static const struct pfield secret_f[] = {
        { 1, "metadata", PF_MSG, &meta },  { 2, "data", PF_MAP_BYTES, NULL },
        { 3, "type", PF_STRING, NULL },    { 4, "stringData", PF_MAP_STR, NULL },
        { 5, "immutable", PF_BOOL, NULL },
};
static const struct pfield ns_spec_f[] = { { 1, "finalizers", PF_REP_STRING, NULL } };
static const struct pmsg ns_spec = PMSG(ns_spec_f);
static const struct pfield namespace_f[] = {
        { 1, "metadata", PF_MSG, &meta },
        { 2, "spec", PF_MSG, &ns_spec },
};
static const struct pfield sa_f[] = {
        { 1, "metadata", PF_MSG, &meta },
        { 2, "secrets", PF_REP_MSG, &obj_ref },
        { 3, "imagePullSecrets", PF_REP_MSG, &local_ref },
        { 4, "automountServiceAccountToken", PF_BOOL, NULL },
};

static const struct pfield rule_f[] = {
        { 1, "verbs", PF_REP_STRING, NULL },           { 2, "apiGroups", PF_REP_STRING, NULL },
        { 3, "resources", PF_REP_STRING, NULL },       { 4, "resourceNames", PF_REP_STRING, NULL },
        { 5, "nonResourceURLs", PF_REP_STRING, NULL },
};
static const struct pmsg rule = PMSG(rule_f);
static const struct pfield role_f[] = {
        { 1, "metadata", PF_MSG, &meta },
        { 2, "rules", PF_REP_MSG, &rule },
};
static const struct pfield subject_f[] = {
        { 1, "kind", PF_STRING, NULL },
        { 2, "apiGroup", PF_STRING, NULL },
        { 3, "name", PF_STRING, NULL },
        { 4, "namespace", PF_STRING, NULL },
};
static const struct pmsg subject = PMSG(subject_f);
static const struct pfield role_ref_f[] = {
        { 1, "apiGroup", PF_STRING, NULL },
        { 2, "kind", PF_STRING, NULL },
        { 3, "name", PF_STRING, NULL },
};
static const struct pmsg role_ref = PMSG(role_ref_f);
static const struct pfield binding_f[] = {
        { 1, "metadata", PF_MSG, &meta },
        { 2, "subjects", PF_REP_MSG, &subject },
        { 3, "roleRef", PF_MSG, &role_ref },
};
static const struct pfield token_spec_f[] = {
        { 1, "audiences", PF_REP_STRING, NULL },
        { 4, "expirationSeconds", PF_INT, NULL },
};
static const struct pmsg token_spec = PMSG(token_spec_f);
static const struct pfield token_request_f[] = {
        { 1, "metadata", PF_MSG, &meta },
        { 2, "spec", PF_MSG, &token_spec },
};
static const struct pfield res_attrs_f[] = {
        { 1, "namespace", PF_STRING, NULL }, { 2, "verb", PF_STRING, NULL },
        { 3, "group", PF_STRING, NULL },     { 4, "version", PF_STRING, NULL },
        { 5, "resource", PF_STRING, NULL },  { 6, "subresource", PF_STRING, NULL },
        { 7, "name", PF_STRING, NULL },
};
static const struct pmsg res_attrs = PMSG(res_attrs_f);
static const struct pfield nonres_attrs_f[] = {
        { 1, "path", PF_STRING, NULL },
        { 2, "verb", PF_STRING, NULL },
};
static const struct pmsg nonres_attrs = PMSG(nonres_attrs_f);
static const struct pfield ssar_spec_f[] = {
        { 1, "resourceAttributes", PF_MSG, &res_attrs },
        { 2, "nonResourceAttributes", PF_MSG, &nonres_attrs },
};
static const struct pmsg ssar_spec = PMSG(ssar_spec_f);
static const struct pfield ssar_f[] = {
        { 1, "metadata", PF_MSG, &meta },
        { 2, "spec", PF_MSG, &ssar_spec },
};

static const struct {
        const char *kind;
        struct pmsg msg;
} kinds[] = {
        { "ConfigMap", PMSG(configmap_f) },        { "Secret", PMSG(secret_f) },
        { "Namespace", PMSG(namespace_f) },        { "ServiceAccount", PMSG(sa_f) },
        { "ClusterRole", PMSG(role_f) },           { "Role", PMSG(role_f) },
        { "ClusterRoleBinding", PMSG(binding_f) }, { "RoleBinding", PMSG(binding_f) },
        { "TokenRequest", PMSG(token_request_f) }, { "SelfSubjectAccessReview", PMSG(ssar_f) },
};

struct pbuf {
        const unsigned char *p, *end;
};

static bool varint(struct pbuf *b, uint64_t *ret)
{
        uint64_t v = 0;
        unsigned shift = 0;

        while (b->p < b->end && shift < 64) {
                unsigned char c = *b->p++;

                v |= (uint64_t)(c & 0x7f) << shift;
                if (!(c & 0x80)) {
                        *ret = v;
                        return true;
                }
                shift += 7;
        }
        return false;
}

/* Reads one field header and, for length-delimited fields, the payload. */
static bool next_field(
        struct pbuf *b, unsigned *num, unsigned *wt, uint64_t *iv, struct pbuf *payload)
{
        uint64_t key, len;

        if (!varint(b, &key))
                return false;
        *num = (unsigned)(key >> 3);
        *wt = (unsigned)(key & 7);
        switch (*wt) {
        case 0:
                return varint(b, iv);
        case 1:
        case 5:
                if ((size_t)(b->end - b->p) < (*wt == 1 ? 8u : 4u))
                        return false;
                b->p += *wt == 1 ? 8 : 4;
                return true;
        case 2:
                if (!varint(b, &len) || len > (uint64_t)(b->end - b->p))
                        return false;
                payload->p = b->p;
                payload->end = b->p + len;
                b->p += len;
                return true;
        default:
                return false;
        }
}

static char *pstr(const struct pbuf *b)
{
        return xstrndup((const char *)b->p, (size_t)(b->end - b->p));
}

static cJSON *decode_msg(struct pbuf b, const struct pmsg *m, int depth);

static bool map_entry(struct pbuf b, char **key, struct pbuf *val)
{
        unsigned num, wt;
        uint64_t iv;
        struct pbuf pl = { 0 };

        *key = NULL;
        val->p = val->end = b.p;
        while (b.p < b.end) {
                if (!next_field(&b, &num, &wt, &iv, &pl))
                        return false;
                if (num == 1 && wt == 2) {
                        free(*key);
                        *key = pstr(&pl);
                } else if (num == 2 && wt == 2) {
                        *val = pl;
                }
        }
        return *key != NULL;
}

static cJSON *ensure(cJSON *obj, const char *name, bool array)
{
        cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, name);

        if (!x)
                x = array ? cJSON_AddArrayToObject(obj, name) : cJSON_AddObjectToObject(obj, name);
        return x;
}

static void put_field(cJSON *obj, const struct pfield *f, uint64_t iv, struct pbuf pl, int depth)
{
        char *s = NULL, *key = NULL;
        struct pbuf val;

        switch (f->kind) {
        case PF_STRING:
                s = pstr(&pl);
                ks_obj_set_str(obj, f->name, s);
                break;
        case PF_BYTES:
                s = base64_encode(pl.p, (size_t)(pl.end - pl.p));
                ks_obj_set_str(obj, f->name, s);
                break;
        case PF_INT:
                ks_obj_set(obj, f->name, cJSON_CreateNumber((double)iv));
                break;
        case PF_BOOL:
                ks_obj_set(obj, f->name, cJSON_CreateBool(iv != 0));
                break;
        case PF_MSG:
                ks_obj_set(obj, f->name, decode_msg(pl, f->sub, depth + 1));
                break;
        case PF_REP_MSG:
                cJSON_AddItemToArray(ensure(obj, f->name, true), decode_msg(pl, f->sub, depth + 1));
                break;
        case PF_REP_STRING:
                s = pstr(&pl);
                cJSON_AddItemToArray(ensure(obj, f->name, true), cJSON_CreateString(s));
                break;
        case PF_MAP_STR:
        case PF_MAP_BYTES:
                if (!map_entry(pl, &key, &val))
                        break;
                s = f->kind == PF_MAP_STR ? pstr(&val)
                                          : base64_encode(val.p, (size_t)(val.end - val.p));
                ks_obj_set_str(ensure(obj, f->name, false), key, s);
                break;
        }
        free(s);
        free(key);
}

static const struct pfield *find_field(const struct pmsg *m, unsigned num)
{
        size_t i;

        for (i = 0; i < m->n; i++)
                if (m->f[i].num == num)
                        return &m->f[i];
        return NULL;
}

static cJSON *decode_msg(struct pbuf b, const struct pmsg *m, int depth)
{
        cJSON *obj = cJSON_CreateObject();
        unsigned num, wt;
        uint64_t iv = 0;
        struct pbuf pl = { 0 };

        while (depth < 16 && b.p < b.end) {
                const struct pfield *f;

                if (!next_field(&b, &num, &wt, &iv, &pl))
                        break;
                f = find_field(m, num);
                if (!f || (wt == 2) != (f->kind != PF_INT && f->kind != PF_BOOL))
                        continue;
                put_field(obj, f, iv, pl, depth);
        }
        return obj;
}

/* Unknown{typeMeta=1{apiVersion=1,kind=2}, raw=2}. */
static bool envelope(struct pbuf b, char **api_version, char **kind, struct pbuf *raw)
{
        unsigned num, wt, n2, w2;
        uint64_t iv;
        struct pbuf pl = { 0 }, p2 = { 0 };

        while (b.p < b.end) {
                if (!next_field(&b, &num, &wt, &iv, &pl))
                        return false;
                if (num == 2 && wt == 2)
                        *raw = pl;
                if (num != 1 || wt != 2)
                        continue;
                while (pl.p < pl.end) {
                        if (!next_field(&pl, &n2, &w2, &iv, &p2))
                                return false;
                        if (w2 == 2 && n2 == 1 && !*api_version)
                                *api_version = pstr(&p2);
                        else if (w2 == 2 && n2 == 2 && !*kind)
                                *kind = pstr(&p2);
                }
        }
        return *kind != NULL && raw->p != NULL;
}

cJSON *ks_proto_to_json(const char *body, size_t len)
{
        struct pbuf b = { (const unsigned char *)body, (const unsigned char *)body + len };
        struct pbuf raw = { 0 };
        char *av = NULL, *kind = NULL;
        cJSON *out = NULL;
        size_t i;

        if (len < 4 || memcmp(body, "k8s\0", 4) != 0)
                return NULL;
        b.p += 4;
        if (envelope(b, &av, &kind, &raw))
                for (i = 0; i < ARRAY_SIZE(kinds); i++)
                        if (!strcmp(kinds[i].kind, kind)) {
                                out = decode_msg(raw, &kinds[i].msg, 0);
                                cJSON_AddStringToObject(out, "apiVersion", av ? av : "v1");
                                cJSON_AddStringToObject(out, "kind", kind);
                                break;
                        }
        free(av);
        free(kind);
        return out;
}
