/* kube-sim helpers: query parameters, time, ids, Status objects, YAML → JSON. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <yaml.h>

#include "err.h"
#include "ks.h"
#include "rfc3339.h"
#include "xalloc.h"

const char *kq(const struct kreq *r, const char *name)
{
        return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

bool kq_bool(const struct kreq *r, const char *name)
{
        const char *v = kq(r, name);

        return v && (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "True"));
}

static char *fmt_time(bool micro)
{
        char b[RFC3339_MICRO_LEN];
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        if (micro)
                rfc3339_format_micro(&ts, b);
        else
                rfc3339_format(ts.tv_sec, b);
        return xstrdup(b);
}

char *ks_now_rfc3339(void)
{
        return fmt_time(false);
}

char *ks_now_micro(void)
{
        return fmt_time(true);
}

uint64_t ks_random(void)
{
        uint64_t v = 0;

        if (gnutls_rnd(GNUTLS_RND_NONCE, &v, sizeof(v)) < 0)
                abort();
        return v;
}

char *ks_uuid(void)
{
        unsigned char u[16];

        if (gnutls_rnd(GNUTLS_RND_NONCE, u, sizeof(u)) < 0)
                abort();
        u[6] = (unsigned char)((u[6] & 0x0f) | 0x40);
        u[8] = (unsigned char)((u[8] & 0x3f) | 0x80);
        return xasprintf("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                         u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
                         u[12], u[13], u[14], u[15]);
}

void kresp_json(struct kresp *resp, unsigned status, cJSON *body)
{
        free(resp->body);
        resp->status = status;
        resp->content_type = NULL;
        resp->body = cJSON_PrintUnformatted(body);
        cJSON_Delete(body);
}

void ks_add_vfmt(cJSON *o, const char *key, const char *fmt, va_list ap)
{
        char *s = xvasprintf(fmt, ap);

        cJSON_AddStringToObject(o, key, s);
        free(s);
}

void kresp_status(
        struct kresp *resp, unsigned code, const char *reason, cJSON *details, const char *fmt, ...)
{
        cJSON *st = cJSON_CreateObject();
        va_list ap;

        cJSON_AddStringToObject(st, "kind", "Status");
        cJSON_AddStringToObject(st, "apiVersion", "v1");
        cJSON_AddObjectToObject(st, "metadata");
        cJSON_AddStringToObject(st, "status", code < 300 ? "Success" : "Failure");
        va_start(ap, fmt);
        ks_add_vfmt(st, "message", fmt, ap);
        va_end(ap);
        cJSON_AddStringToObject(st, "reason", reason);
        if (details)
                cJSON_AddItemToObject(st, "details", details);
        cJSON_AddNumberToObject(st, "code", code);
        kresp_json(resp, code, st);
}

cJSON *ks_details(const struct kres *res, const char *name, bool kind_is_kind)
{
        cJSON *d = cJSON_CreateObject();

        if (name)
                cJSON_AddStringToObject(d, "name", name);
        if (res && res->group[0])
                cJSON_AddStringToObject(d, "group", res->group);
        if (res)
                cJSON_AddStringToObject(d, "kind", kind_is_kind ? res->kind : res->plural);
        return d;
}

void kresp_warn(struct kresp *resp, const char *text)
{
        if (resp->n_warnings < KS_MAX_WARN)
                resp->warnings[resp->n_warnings++] = xstrdup(text);
}

cJSON *ks_obj_get(const cJSON *obj, const char *a, const char *b)
{
        cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, a);

        if (b && cJSON_IsObject(x))
                x = cJSON_GetObjectItemCaseSensitive(x, b);
        else if (b)
                x = NULL;
        return x;
}

const char *ks_obj_str(const cJSON *obj, const char *a, const char *b)
{
        cJSON *x = ks_obj_get(obj, a, b);

        return cJSON_IsString(x) ? x->valuestring : NULL;
}

cJSON *ks_obj_ensure(cJSON *obj, const char *key)
{
        cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, key);

        if (cJSON_IsObject(x))
                return x;
        if (x)
                cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
        return cJSON_AddObjectToObject(obj, key);
}

void ks_obj_set(cJSON *obj, const char *key, cJSON *val)
{
        if (cJSON_GetObjectItemCaseSensitive(obj, key))
                cJSON_ReplaceItemInObjectCaseSensitive(obj, key, val);
        else
                cJSON_AddItemToObject(obj, key, val);
}

void ks_obj_set_str(cJSON *obj, const char *key, const char *val)
{
        ks_obj_set(obj, key, cJSON_CreateString(val));
}

char *ks_resname(const struct kres *res)
{
        if (!res->group[0])
                return xstrdup(res->plural);
        return xasprintf("%s.%s", res->plural, res->group);
}

char *ks_api_version(const struct kres *res)
{
        if (!res->group[0])
                return xstrdup(res->version);
        return xasprintf("%s/%s", res->group, res->version);
}

cJSON *ks_parse_body(const char *body, size_t len)
{
        if (!body || len == 0)
                return NULL;
        return cJSON_ParseWithLengthOpts(body, len, NULL, 0);
}

/* ---- YAML ---- */

static cJSON *yaml_scalar(const yaml_node_t *n)
{
        const char *v = (const char *)n->data.scalar.value;
        char *end;
        double d;

        if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
                return cJSON_CreateString(v);
        if (!strcmp(v, "null") || !strcmp(v, "~") || !v[0])
                return cJSON_CreateNull();
        if (!strcmp(v, "true") || !strcmp(v, "True"))
                return cJSON_CreateTrue();
        if (!strcmp(v, "false") || !strcmp(v, "False"))
                return cJSON_CreateFalse();
        d = strtod(v, &end);
        if (end != v && !*end && strspn(v, "0123456789.-+eE") == strlen(v))
                return cJSON_CreateNumber(d);
        return cJSON_CreateString(v);
}

static cJSON *yaml_node(yaml_document_t *doc, yaml_node_t *n, int depth)
{
        cJSON *out;
        yaml_node_item_t *it;
        yaml_node_pair_t *p;

        if (!n || depth > 64)
                return cJSON_CreateNull();
        if (n->type == YAML_SCALAR_NODE)
                return yaml_scalar(n);
        if (n->type == YAML_SEQUENCE_NODE) {
                out = cJSON_CreateArray();
                for (it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++)
                        cJSON_AddItemToArray(
                                out, yaml_node(doc, yaml_document_get_node(doc, *it), depth + 1));
                return out;
        }
        out = cJSON_CreateObject();
        for (p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
                yaml_node_t *k = yaml_document_get_node(doc, p->key);

                if (!k || k->type != YAML_SCALAR_NODE)
                        continue;
                cJSON_AddItemToObject(
                        out, (const char *)k->data.scalar.value,
                        yaml_node(doc, yaml_document_get_node(doc, p->value), depth + 1));
        }
        return out;
}

cJSON *ks_yaml_to_json(const char *body, size_t len)
{
        yaml_parser_t parser;
        yaml_document_t doc;
        cJSON *out = NULL;

        out = ks_parse_body(body, len);
        if (out)
                return out;
        if (!yaml_parser_initialize(&parser))
                return NULL;
        yaml_parser_set_input_string(&parser, (const unsigned char *)body, len);
        if (yaml_parser_load(&parser, &doc)) {
                yaml_node_t *root = yaml_document_get_root_node(&doc);

                if (root && root->type == YAML_MAPPING_NODE)
                        out = yaml_node(&doc, root, 0);
                yaml_document_delete(&doc);
        }
        yaml_parser_delete(&parser);
        return out;
}
