/*
 * maas-sim DNS resources (maas-api.md §6.7, §7.8): list (by fqdn, or name + domain), create
 * from fqdn or name + domain with a space-separated ip_addresses field, PUT that replaces the
 * address set, DELETE answering 204; the records a reservation's hostname makes and the
 * release removes (ipaddresses.c). sim.lock is held by the dispatcher.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "sim.h"
#include "xalloc.h"

#define MSG_NO_DNS    "No DNSResource matches the given query."
#define MSG_NO_DOMAIN "No Domain matches the given query."

static cJSON *ip_json(const char *ip, const char *user)
{
        cJSON *o = cJSON_CreateObject();
        cJSON *owner = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "ip", ip);
        cJSON_AddNumberToObject(o, "alloc_type", 4);
        cJSON_AddStringToObject(o, "alloc_type_name", "User reserved");
        cJSON_AddStringToObject(o, "created", "2026-01-01T00:00:00");
        cJSON_AddNullToObject(o, "subnet");
        cJSON_AddStringToObject(owner, "username", user ? user : "admin");
        cJSON_AddItemToObject(o, "owner", owner);
        cJSON_AddArrayToObject(o, "interface_set");
        return o;
}

static cJSON *dns_json(const struct sim *s, const struct sim_dns *d)
{
        cJSON *o = cJSON_CreateObject();
        cJSON *ips = cJSON_CreateArray();
        char *fqdn = xasprintf("%s.%s", d->name, s->domains[d->domain].name);
        char *uri = xasprintf(SIM_API_PREFIX "dnsresources/%d/", d->id);

        for (size_t i = 0; i < d->ips.n; i++)
                cJSON_AddItemToArray(ips, ip_json(d->ips.v[i], NULL));
        cJSON_AddNumberToObject(o, "id", d->id);
        cJSON_AddStringToObject(o, "fqdn", fqdn);
        if (d->ttl >= 0)
                cJSON_AddNumberToObject(o, "address_ttl", d->ttl);
        else
                cJSON_AddNullToObject(o, "address_ttl");
        cJSON_AddItemToObject(o, "ip_addresses", ips);
        cJSON_AddArrayToObject(o, "resource_records");
        cJSON_AddStringToObject(o, "resource_uri", uri);
        free(fqdn);
        free(uri);
        return o;
}

static struct sim_dns *find_dns(struct sim *s, const char *id)
{
        for (size_t i = 0; i < s->n_dns; i++) {
                char buf[16];

                snprintf(buf, sizeof(buf), "%d", s->dns[i].id);
                if (strcmp(buf, id) == 0)
                        return &s->dns[i];
        }
        return NULL;
}

/* Splits fqdn (or name + domain) into a label and a domain index. */
static int dns_name(const struct sim *s,
                    const struct sim_params *p,
                    char **ret_name,
                    ssize_t *ret_domain)
{
        const char *fqdn = sim_params_get(p, "fqdn");
        const char *name = sim_params_get(p, "name");
        const char *domain = sim_params_get(p, "domain");
        const char *dot;

        if (fqdn && *fqdn) {
                dot = strchr(fqdn, '.');
                if (!dot || dot == fqdn || !dot[1])
                        return CM_EINVAL;
                *ret_domain = sim_find_domain(s, dot + 1);
                *ret_name = xstrndup(fqdn, (size_t)(dot - fqdn));
                return *ret_domain < 0 ? CM_ENOTFOUND : 0;
        }
        if (!name || !*name)
                return CM_EINVAL;
        *ret_domain = domain ? sim_find_domain(s, domain) : 0;
        *ret_name = xstrdup(name);
        return *ret_domain < 0 ? CM_ENOTFOUND : 0;
}

/* GET dnsresources/: by fqdn, by name + domain, or by name alone in every domain (MAAS's
 * get_dnsresource_queryset). */
static void dns_list(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        char *name = NULL;
        ssize_t dom = -1;
        bool filter = sim_params_get(&rq->query, "fqdn") || sim_params_get(&rq->query, "name");
        bool any_domain =
                sim_params_get(&rq->query, "name") && !sim_params_get(&rq->query, "domain");
        cJSON *arr;
        int r = filter ? dns_name(s, &rq->query, &name, &dom) : 0;

        if (r == CM_ENOTFOUND) {
                sim_reply_text(rp, 404, MSG_NO_DOMAIN);
                goto out;
        }
        arr = cJSON_CreateArray();
        for (size_t i = 0; i < s->n_dns && r == 0; i++)
                if (!filter || (strcmp(s->dns[i].name, name) == 0 &&
                                (any_domain || s->dns[i].domain == (size_t)dom)))
                        cJSON_AddItemToArray(arr, dns_json(s, &s->dns[i]));
        sim_reply_json(rp, arr);
out:
        free(name);
}

/* Parses "a b c" into ips; false (and 400) on a bad address. */
static bool parse_ips(const char *v, struct sim_strv *ips, struct sim_resp *rp)
{
        while (v && *v) {
                size_t n = strcspn(v, " \t,");
                unsigned char bin[16];
                char *ip;

                if (n) {
                        ip = xstrndup(v, n);
                        if (inet_pton(AF_INET, ip, bin) != 1 && inet_pton(AF_INET6, ip, bin) != 1) {
                                sim_reply_field_error(rp, "ip_addresses",
                                                      "'%s' is not a valid IP address.", ip);
                                free(ip);
                                return false;
                        }
                        sim_strv_add(ips, ip);
                        free(ip);
                }
                v += n + (v[n] ? 1 : 0);
        }
        return true;
}

static bool parse_ttl(const struct sim_params *p, int *ttl, struct sim_resp *rp)
{
        const char *v = sim_params_get(p, "address_ttl");
        char *end = NULL;
        long x;

        if (!v || !*v)
                return true;
        x = strtol(v, &end, 10);
        if (*end || x < 0 || x > 2147483647L) {
                sim_reply_field_error(rp, "address_ttl",
                                      "Ensure this value is greater than or "
                                      "equal to 0.");
                return false;
        }
        *ttl = (int)x;
        return true;
}

static bool label_taken(const struct sim *s, const char *name, size_t dom, int except_id)
{
        for (size_t i = 0; i < s->n_dns; i++)
                if (s->dns[i].id != except_id && s->dns[i].domain == dom &&
                    strcmp(s->dns[i].name, name) == 0)
                        return true;
        return false;
}

/* Validates the create/update form into d (name, domain, ttl, ips). */
static bool dns_form(struct sim *s,
                     const struct sim_params *p,
                     struct sim_dns *d,
                     bool create,
                     struct sim_resp *rp)
{
        bool named = sim_params_get(p, "fqdn") || sim_params_get(p, "name");
        const char *ips = sim_params_get(p, "ip_addresses");
        ssize_t dom = (ssize_t)d->domain;
        char *name = NULL;
        int r = named || create ? dns_name(s, p, &name, &dom) : 0;

        if (r == CM_ENOTFOUND) {
                sim_reply_text(rp, 404, MSG_NO_DOMAIN);
        } else if (r < 0) {
                sim_reply_field_error(rp, "fqdn", "This field is required.");
        } else if (name && label_taken(s, name, (size_t)dom, d->id)) {
                sim_reply_field_error(rp, "__all__", "Labels must be unique within their zone.");
                r = CM_EEXIST;
        } else if (!parse_ttl(p, &d->ttl, rp)) {
                r = CM_EINVAL;
        } else if (ips) {
                sim_strv_release(&d->ips); /* PUT replaces the address set */
                if (!parse_ips(ips, &d->ips, rp))
                        r = CM_EINVAL;
        }
        if (r == 0 && name) {
                free(d->name);
                d->name = name;
                d->domain = (size_t)dom;
                name = NULL;
        }
        free(name);
        return r == 0;
}

static void dns_create(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_dns d = { .id = s->next_dns_id + 1, .ttl = -1 };

        if (!dns_form(s, &rq->form, &d, true, rp)) {
                free(d.name);
                sim_strv_release(&d.ips);
                return;
        }
        s->next_dns_id++;
        s->dns = xrealloc(s->dns, (s->n_dns + 1) * sizeof(*s->dns));
        s->dns[s->n_dns++] = d;
        sim_reply_json(rp, dns_json(s, &s->dns[s->n_dns - 1]));
}

static void dns_read(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_dns *d = find_dns(s, rq->arg);

        if (!d)
                sim_reply_text(rp, 404, MSG_NO_DNS);
        else
                sim_reply_json(rp, dns_json(s, d));
}

static void dns_update(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_dns *d = find_dns(s, rq->arg);
        struct sim_dns copy;

        if (!d) {
                sim_reply_text(rp, 404, MSG_NO_DNS);
                return;
        }
        /* validate on a copy so a rejected PUT changes nothing */
        copy = (struct sim_dns){
                .id = d->id, .name = xstrdup(d->name), .domain = d->domain, .ttl = d->ttl
        };
        for (size_t i = 0; i < d->ips.n; i++)
                sim_strv_add(&copy.ips, d->ips.v[i]);
        if (!dns_form(s, &rq->form, &copy, false, rp)) {
                free(copy.name);
                sim_strv_release(&copy.ips);
                return;
        }
        free(d->name);
        sim_strv_release(&d->ips);
        *d = copy;
        sim_reply_json(rp, dns_json(s, d));
}

static void dns_delete(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_dns *d = find_dns(s, rq->arg);
        size_t i;

        if (!d) {
                sim_reply_text(rp, 404, MSG_NO_DNS);
                return;
        }
        i = (size_t)(d - s->dns);
        free(d->name);
        sim_strv_release(&d->ips);
        memmove(&s->dns[i], &s->dns[i + 1], (s->n_dns - i - 1) * sizeof(*s->dns));
        s->n_dns--;
        rp->status = 204;
}

int sim_dns_link_reserved(struct sim *s, const char *hostname, const char *ip)
{
        const char *dot = strchr(hostname, '.');
        char *name = dot ? xstrndup(hostname, (size_t)(dot - hostname)) : xstrdup(hostname);
        ssize_t dom = dot ? sim_find_domain(s, dot + 1) : 0;
        struct sim_dns *d = NULL;

        if (dom < 0) {
                free(name);
                return CM_ENOTFOUND;
        }
        for (size_t i = 0; i < s->n_dns && !d; i++)
                if (s->dns[i].domain == (size_t)dom && strcmp(s->dns[i].name, name) == 0)
                        d = &s->dns[i];
        if (!d) { /* DNSResource.objects.get_or_create(name=, domain=) */
                s->dns = xrealloc(s->dns, (s->n_dns + 1) * sizeof(*s->dns));
                d = &s->dns[s->n_dns++];
                *d = (struct sim_dns){
                        .id = ++s->next_dns_id, .name = name, .domain = (size_t)dom, .ttl = -1
                };
                name = NULL;
        }
        if (!sim_strv_has(&d->ips, ip))
                sim_strv_add(&d->ips, ip);
        free(name);
        return 0;
}

void sim_dns_unlink_released(struct sim *s, const char *ip)
{
        for (size_t i = s->n_dns; i-- > 0;) {
                struct sim_dns *d = &s->dns[i];

                if (!sim_strv_remove(&d->ips, ip) || d->ips.n)
                        continue;
                free(d->name);
                sim_strv_release(&d->ips);
                memmove(&s->dns[i], &s->dns[i + 1], (s->n_dns - i - 1) * sizeof(*s->dns));
                s->n_dns--;
        }
}

const struct sim_op sim_ops_dnsresources[] = {
        { "GET", NULL, dns_list },
        { "POST", NULL, dns_create },
        { NULL, NULL, NULL },
};

const struct sim_op sim_ops_dnsresource[] = {
        { "GET", NULL, dns_read },
        { "PUT", NULL, dns_update },
        { "DELETE", NULL, dns_delete },
        { NULL, NULL, NULL },
};
