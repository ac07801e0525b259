/*
 * maas-sim parameters: MAAS reads GET parameters from the query string and POST/PUT
 * parameters from urlencoded, multipart/form-data or (rarely) JSON bodies. All three end up
 * in one ordered multi-map so repeated keys (tags=a&tags=b) keep their order; handlers that
 * read one value take the last, as Django's QueryDict.get does. Pure functions; no locks.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "err.h"
#include "sim.h"
#include "xalloc.h"

void sim_params_add(struct sim_params *p, const char *k, size_t kl, const char *v, size_t vl)
{
        if (p->n == p->cap) {
                p->cap = p->cap ? p->cap * 2 : 8;
                p->keys = xrealloc(p->keys, p->cap * sizeof(*p->keys));
                p->vals = xrealloc(p->vals, p->cap * sizeof(*p->vals));
        }
        p->keys[p->n] = xstrndup(k, kl);
        p->vals[p->n] = xstrndup(v ? v : "", v ? vl : 0);
        p->n++;
}

void sim_params_release(struct sim_params *p)
{
        for (size_t i = 0; i < p->n; i++) {
                free(p->keys[i]);
                free(p->vals[i]);
        }
        free(p->keys);
        free(p->vals);
        *p = (struct sim_params){ 0 };
}

const char *sim_params_get(const struct sim_params *p, const char *k)
{
        for (size_t i = p->n; i > 0; i--)
                if (strcmp(p->keys[i - 1], k) == 0)
                        return p->vals[i - 1];
        return NULL;
}

static int hexval(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        c = (char)tolower((unsigned char)c);
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        return -1;
}

size_t sim_url_decode(char *s, size_t len)
{
        size_t o = 0;

        for (size_t i = 0; i < len; i++) {
                if (s[i] == '+') {
                        s[o++] = ' ';
                } else if (s[i] == '%' && i + 2 < len && hexval(s[i + 1]) >= 0 &&
                           hexval(s[i + 2]) >= 0) {
                        s[o++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
                        i += 2;
                } else {
                        s[o++] = s[i];
                }
        }
        s[o] = '\0';
        return o;
}

void sim_params_parse_urlencoded(struct sim_params *p, const char *s, size_t len)
{
        const char *end = s + len;

        while (s < end) {
                const char *amp = memchr(s, '&', (size_t)(end - s));
                const char *stop = amp ? amp : end;
                const char *eq = memchr(s, '=', (size_t)(stop - s));
                char *k, *v;
                size_t kl, vl;

                if (stop > s) {
                        k = xstrndup(s, (size_t)((eq ? eq : stop) - s));
                        v = eq ? xstrndup(eq + 1, (size_t)(stop - eq - 1)) : xstrdup("");
                        kl = sim_url_decode(k, strlen(k));
                        vl = sim_url_decode(v, strlen(v));
                        sim_params_add(p, k, kl, v, vl);
                        free(k);
                        free(v);
                }
                s = stop + 1;
        }
}

/* Finds "name=" in a header parameter list and copies its (optionally quoted) value. */
static char *header_param(const char *h, size_t hl, const char *name)
{
        size_t nl = strlen(name);

        for (size_t i = 0; i + nl < hl; i++) {
                const char *q;
                size_t vl = 0;

                if (strncasecmp(h + i, name, nl) != 0 || h[i + nl] != '=')
                        continue;
                if (i > 0 && h[i - 1] != ' ' && h[i - 1] != ';' && h[i - 1] != '\t')
                        continue;
                q = h + i + nl + 1;
                if (*q == '"') {
                        q++;
                        while (q + vl < h + hl && q[vl] != '"')
                                vl++;
                } else {
                        while (q + vl < h + hl && q[vl] != ';' && q[vl] != ' ' && q[vl] != '\r')
                                vl++;
                }
                return xstrndup(q, vl);
        }
        return NULL;
}

/* Parses one part (headers CRLF CRLF content); files are kept like plain fields. */
static int parse_part(struct sim_params *p, const char *part, size_t len)
{
        const char *sep = memmem(part, len, "\r\n\r\n", 4);
        const char *cd;
        char *name;

        if (!sep)
                return CM_EPARSE;
        cd = memmem(part, (size_t)(sep - part), "ontent-Disposition:", 19);
        if (!cd)
                return CM_EPARSE;
        name = header_param(cd, (size_t)(sep - cd), "name");
        if (!name)
                return CM_EPARSE;
        sim_params_add(p, name, strlen(name), sep + 4, (size_t)(part + len - sep - 4));
        free(name);
        return 0;
}

static int parse_multipart(struct sim_params *p, const char *ctype, const char *body, size_t len)
{
        char *b = header_param(ctype, strlen(ctype), "boundary");
        char *delim;
        const char *cur, *end = body + len, *next;
        size_t dl;
        int r = CM_EPARSE;

        if (!b)
                return CM_EPARSE;
        delim = xasprintf("--%s", b);
        dl = strlen(delim);
        cur = memmem(body, len, delim, dl);
        while (cur) {
                cur += dl;
                if ((size_t)(end - cur) >= 2 && cur[0] == '-' && cur[1] == '-') {
                        r = 0; /* closing delimiter */
                        break;
                }
                if ((size_t)(end - cur) < 2 || cur[0] != '\r' || cur[1] != '\n')
                        break;
                cur += 2;
                next = memmem(cur, (size_t)(end - cur), delim, dl);
                if (!next || next - cur < 2 || parse_part(p, cur, (size_t)(next - cur - 2)) < 0)
                        break;
                cur = next;
        }
        free(delim);
        free(b);
        return r;
}

static void add_json_value(struct sim_params *p, const char *k, const cJSON *v)
{
        char *text;

        if (cJSON_IsString(v)) {
                sim_params_add(p, k, strlen(k), v->valuestring, strlen(v->valuestring));
        } else if (cJSON_IsArray(v)) {
                for (const cJSON *e = v->child; e; e = e->next)
                        add_json_value(p, k, e);
        } else if (cJSON_IsBool(v)) {
                sim_params_add(p, k, strlen(k), cJSON_IsTrue(v) ? "true" : "false",
                               cJSON_IsTrue(v) ? 4 : 5);
        } else if (!cJSON_IsNull(v)) {
                text = cJSON_PrintUnformatted(v);
                sim_params_add(p, k, strlen(k), text, strlen(text));
                cJSON_free(text);
        }
}

static int parse_json(struct sim_params *p, const char *body, size_t len)
{
        const char *end = NULL;
        cJSON *doc = cJSON_ParseWithLengthOpts(body, len, &end, false);

        if (!cJSON_IsObject(doc)) {
                cJSON_Delete(doc);
                return CM_EPARSE;
        }
        for (const cJSON *e = doc->child; e; e = e->next)
                add_json_value(p, e->string, e);
        cJSON_Delete(doc);
        return 0;
}

int sim_params_parse_body(struct sim_params *p, const char *ctype, const char *body, size_t len)
{
        if (len == 0)
                return 0;
        if (!ctype || strncasecmp(ctype, "application/x-www-form-urlencoded", 33) == 0) {
                sim_params_parse_urlencoded(p, body, len);
                return 0;
        }
        if (strncasecmp(ctype, "multipart/form-data", 19) == 0)
                return parse_multipart(p, ctype, body, len);
        if (strncasecmp(ctype, "application/json", 16) == 0)
                return parse_json(p, body, len);
        return 0; /* other bodies carry no parameters */
}

int sim_parse_bool(const char *s, bool *ret)
{
        static const char *const yes[] = { "true", "1", "yes", "on" };
        static const char *const no[] = { "false", "0", "no", "off", "" };

        for (size_t i = 0; i < ARRAY_SIZE(yes); i++)
                if (strcasecmp(s, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
        for (size_t i = 0; i < ARRAY_SIZE(no); i++)
                if (strcasecmp(s, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        return CM_EINVAL;
}

void sim_bprintf(struct buf *b, const char *fmt, ...)
{
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = buf_vprintf(b, fmt, ap);
        va_end(ap);
        if (r < 0)
                return; /* over the cap: the message is cut short, which is harmless */
}
