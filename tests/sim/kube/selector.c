/* kube-sim selectors: label selectors (=, ==, !=, in, notin, exists, !exists) and field
 * selectors (metadata.name, metadata.namespace and a few per-kind fields). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "ks.h"
#include "xalloc.h"

enum sel_op {
        SEL_EQ,
        SEL_NE,
        SEL_IN,
        SEL_NOTIN,
        SEL_EXISTS,
        SEL_NOT_EXISTS,
};

struct sel_req {
        char *key;
        enum sel_op op;
        char **vals;
        size_t n_vals;
};

struct ksel {
        struct sel_req *reqs;
        size_t n;
        bool fields;
};

struct ksel *ksel_free(struct ksel *s)
{
        size_t i, j;

        if (!s)
                return NULL;
        for (i = 0; i < s->n; i++) {
                free(s->reqs[i].key);
                for (j = 0; j < s->reqs[i].n_vals; j++)
                        free(s->reqs[i].vals[j]);
                free(s->reqs[i].vals);
        }
        free(s->reqs);
        free(s);
        return NULL;
}

static struct sel_req *add_req(struct ksel *s, const char *key, size_t klen, enum sel_op op)
{
        struct sel_req *r;

        s->reqs = xrealloc(s->reqs, (s->n + 1) * sizeof(*s->reqs));
        r = &s->reqs[s->n++];
        memset(r, 0, sizeof(*r));
        r->key = xstrndup(key, klen);
        r->op = op;
        return r;
}

static void add_val(struct sel_req *r, const char *v, size_t n)
{
        while (n && isspace((unsigned char)*v)) {
                v++;
                n--;
        }
        while (n && isspace((unsigned char)v[n - 1]))
                n--;
        r->vals = xrealloc(r->vals, (r->n_vals + 1) * sizeof(*r->vals));
        r->vals[r->n_vals++] = xstrndup(v, n);
}

static const char *skip_ws(const char *p)
{
        while (*p && isspace((unsigned char)*p))
                p++;
        return p;
}

/* Parses "(a,b)" at p; returns the position after ')' or NULL. */
static const char *parse_set(struct sel_req *r, const char *p)
{
        const char *end;

        p = skip_ws(p);
        if (*p != '(')
                return NULL;
        end = strchr(p, ')');
        if (!end)
                return NULL;
        p++;
        while (p <= end) {
                const char *q = p;

                while (q < end && *q != ',')
                        q++;
                add_val(r, p, (size_t)(q - p));
                p = q + 1;
        }
        return end + 1;
}

static size_t key_len(const char *p)
{
        size_t n = 0;

        while (p[n] && (isalnum((unsigned char)p[n]) || strchr("-_./", p[n])))
                n++;
        return n;
}

static const char *parse_one(struct ksel *s, const char *p)
{
        bool neg = false;
        size_t kl;
        const char *k;
        struct sel_req *r;

        p = skip_ws(p);
        if (*p == '!') {
                neg = true;
                p = skip_ws(p + 1);
        }
        k = p;
        kl = key_len(p);
        if (kl == 0)
                return NULL;
        p = skip_ws(p + kl);
        if (neg || !*p || *p == ',') {
                add_req(s, k, kl, neg ? SEL_NOT_EXISTS : SEL_EXISTS);
                return p;
        }
        if (!strncmp(p, "!=", 2) || !strncmp(p, "==", 2) || *p == '=') {
                size_t vl;

                r = add_req(s, k, kl, *p == '!' ? SEL_NE : SEL_EQ);
                p += (*p == '=' && p[1] != '=') ? 1 : 2;
                p = skip_ws(p);
                vl = strcspn(p, ",");
                add_val(r, p, vl);
                return p + vl;
        }
        if (!strncmp(p, "in", 2) && (isspace((unsigned char)p[2]) || p[2] == '('))
                return parse_set(add_req(s, k, kl, SEL_IN), p + 2);
        if (!strncmp(p, "notin", 5) && (isspace((unsigned char)p[5]) || p[5] == '('))
                return parse_set(add_req(s, k, kl, SEL_NOTIN), p + 5);
        return NULL;
}

int ksel_parse_labels(const char *str, struct ksel **ret, char **ret_err)
{
        struct ksel *s = xcalloc(1, sizeof(*s));
        const char *p = str ? str : "";

        p = skip_ws(p);
        while (*p) {
                p = parse_one(s, p);
                if (!p) {
                        *ret_err = xasprintf("unable to parse requirement: found '%s', "
                                             "expected: in, notin, =, ==, !=, gt, lt",
                                             str);
                        ksel_free(s);
                        return CM_EINVAL;
                }
                p = skip_ws(p);
                if (*p == ',')
                        p++;
                else if (*p) {
                        *ret_err = xasprintf("invalid label selector: %s", str);
                        ksel_free(s);
                        return CM_EINVAL;
                }
        }
        *ret = s;
        return 0;
}

static bool field_allowed(const struct kres *res, const char *f)
{
        static const char *const events[] = { "involvedObject.kind",
                                              "involvedObject.namespace",
                                              "involvedObject.name",
                                              "involvedObject.uid",
                                              "involvedObject.apiVersion",
                                              "involvedObject.resourceVersion",
                                              "involvedObject.fieldPath",
                                              "reason",
                                              "reportingComponent",
                                              "source",
                                              "type" };
        size_t i;

        if (!strcmp(f, "metadata.name") || !strcmp(f, "metadata.namespace"))
                return true;
        if (res->crd)
                return false;
        if (!strcmp(res->plural, "secrets"))
                return !strcmp(f, "type");
        if (!strcmp(res->plural, "namespaces"))
                return !strcmp(f, "status.phase");
        if (!strcmp(res->plural, "events"))
                for (i = 0; i < ARRAY_SIZE(events); i++)
                        if (!strcmp(f, events[i]))
                                return true;
        return false;
}

int ksel_parse_fields(const char *str, const struct kres *res, struct ksel **ret, char **ret_err)
{
        struct ksel *s = xcalloc(1, sizeof(*s));
        const char *p = str ? str : "";

        s->fields = true;
        while (*p) {
                size_t n = strcspn(p, ",");
                char *part = xstrndup(p, n);
                char *op = strstr(part, "!=");
                enum sel_op o = SEL_NE;
                size_t vo = 2;

                if (!op) {
                        op = strchr(part, '=');
                        o = SEL_EQ;
                        vo = (op && op[1] == '=') ? 2 : 1;
                }
                if (!op) {
                        *ret_err = xasprintf("invalid selector: '%s'; can't understand '%s'", str,
                                             part);
                        free(part);
                        ksel_free(s);
                        return CM_EINVAL;
                }
                *op = 0;
                if (!field_allowed(res, part)) {
                        *ret_err = xasprintf("field label not supported: %s", part);
                        free(part);
                        ksel_free(s);
                        return CM_EINVAL;
                }
                add_val(add_req(s, part, strlen(part), o), op + vo, strlen(op + vo));
                free(part);
                p += n;
                if (*p == ',')
                        p++;
        }
        *ret = s;
        return 0;
}

static const char *field_value(const cJSON *obj, const char *path, char *tmp, size_t tmplen)
{
        char *copy = xstrdup(path);
        char *seg = copy, *dot;
        const cJSON *cur = obj;
        const char *out = NULL;

        while (seg && cur) {
                dot = strchr(seg, '.');
                if (dot)
                        *dot = 0;
                cur = cJSON_IsObject(cur) ? cJSON_GetObjectItemCaseSensitive(cur, seg) : NULL;
                seg = dot ? dot + 1 : NULL;
        }
        if (cJSON_IsString(cur))
                out = cur->valuestring;
        else if (cJSON_IsBool(cur))
                out = cJSON_IsTrue(cur) ? "true" : "false";
        else if (cur && cJSON_IsObject(cur) && !strcmp(path, "source")) {
                const char *c = ks_obj_str(cur, "component", NULL);

                if (c && strlen(c) < tmplen) {
                        memcpy(tmp, c, strlen(c) + 1);
                        out = tmp;
                }
        }
        free(copy);
        return out ? out : "";
}

static bool in_vals(const struct sel_req *r, const char *v)
{
        size_t i;

        for (i = 0; i < r->n_vals; i++)
                if (!strcmp(r->vals[i], v))
                        return true;
        return false;
}

static bool req_match(const struct sel_req *r, const char *v)
{
        switch (r->op) {
        case SEL_EQ:
        case SEL_IN:
                return v && in_vals(r, v);
        case SEL_NE:
        case SEL_NOTIN:
                return !v || !in_vals(r, v);
        case SEL_EXISTS:
                return v != NULL;
        case SEL_NOT_EXISTS:
                return v == NULL;
        }
        return false;
}

static bool sel_match(const struct ksel *s, const cJSON *obj)
{
        const cJSON *labels = ks_obj_get(obj, "metadata", "labels");
        char tmp[256];
        size_t i;

        if (!s)
                return true;
        for (i = 0; i < s->n; i++) {
                const char *v;

                if (s->fields)
                        v = field_value(obj, s->reqs[i].key, tmp, sizeof(tmp));
                else
                        v = ks_obj_str(labels, s->reqs[i].key, NULL);
                if (!req_match(&s->reqs[i], v))
                        return false;
        }
        return true;
}

bool ksel_match(const struct ksel *labels, const struct ksel *fields, const cJSON *obj)
{
        return sel_match(labels, obj) && sel_match(fields, obj);
}

static const struct {
        const char *name;
        enum sel_op op;
} expr_ops[] = {
        { "In", SEL_IN },
        { "NotIn", SEL_NOTIN },
        { "Exists", SEL_EXISTS },
        { "DoesNotExist", SEL_NOT_EXISTS },
};

static void add_expr(struct ksel *s, const cJSON *e)
{
        const char *key = ks_obj_str(e, "key", NULL);
        const char *op = ks_obj_str(e, "operator", NULL);
        const cJSON *v;
        struct sel_req *r;
        size_t i;

        if (!key || !op)
                return;
        for (i = 0; i < ARRAY_SIZE(expr_ops); i++)
                if (!strcmp(op, expr_ops[i].name))
                        break;
        if (i == ARRAY_SIZE(expr_ops))
                return;
        r = add_req(s, key, strlen(key), expr_ops[i].op);
        cJSON_ArrayForEach (v, cJSON_GetObjectItemCaseSensitive(e, "values")) {
                if (cJSON_IsString(v))
                        add_val(r, v->valuestring, strlen(v->valuestring));
        }
}

bool ksel_match_labels_obj(const cJSON *selector, const cJSON *labels)
{
        struct ksel s = { 0 };
        const cJSON *x;
        cJSON *fake;
        bool ok;

        if (!cJSON_IsObject(selector))
                return true;
        cJSON_ArrayForEach (x, cJSON_GetObjectItemCaseSensitive(selector, "matchLabels")) {
                if (cJSON_IsString(x))
                        add_val(add_req(&s, x->string, strlen(x->string), SEL_EQ), x->valuestring,
                                strlen(x->valuestring));
        }
        cJSON_ArrayForEach (x, cJSON_GetObjectItemCaseSensitive(selector, "matchExpressions")) {
                add_expr(&s, x);
        }
        fake = cJSON_CreateObject();
        cJSON_AddItemToObject(cJSON_AddObjectToObject(fake, "metadata"), "labels",
                              labels ? cJSON_Duplicate(labels, true) : cJSON_CreateObject());
        ok = sel_match(&s, fake);
        cJSON_Delete(fake);
        {
                struct ksel *heap = xmalloc(sizeof(*heap));

                *heap = s;
                ksel_free(heap);
        }
        return ok;
}
