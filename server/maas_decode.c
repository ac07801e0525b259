/*
 * maas_decode: MAAS JSON -> the typed results of maas_client.h, and their release
 * functions. Every item is type-checked; a missing optional key gets its documented
 * default; a missing identity key (system_id, name, id) makes the whole decode fail with
 * CM_EPARSE, so callers never see half-filled objects. Pure functions; thread-safe.
 */
#include "maas_decode.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "maas_client.h"
#include "xalloc.h"

static const char *jstr(const cJSON *o, const char *k)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static char *jdup(const cJSON *o, const char *k, const char *dflt)
{
        const char *s = jstr(o, k);

        return s ? xstrdup(s) : dflt ? xstrdup(dflt) : NULL;
}

static double jnum(const cJSON *o, const char *k, double dflt)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

        return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* Name of a nested {"name": …} object (zone, pool), or NULL. */
static char *jnested_name(const cJSON *o, const char *k)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

        return cJSON_IsObject(v) ? jdup(v, "name", NULL) : NULL;
}

void maas_strv_release(struct maas_strv *v)
{
        for (size_t i = 0; i < v->n; i++)
                free(v->v[i]);
        free(v->v);
        *v = (struct maas_strv){ 0 };
}

/* Strings of an array; with sub_key, the string member sub_key of each object element. */
void maas_strv_from_json(const cJSON *arr, const char *sub_key, struct maas_strv *ret)
{
        const cJSON *e;
        size_t n = 0;

        *ret = (struct maas_strv){ 0 };
        if (!cJSON_IsArray(arr))
                return;
        ret->v = xcalloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof(char *));
        cJSON_ArrayForEach (e, arr) {
                const char *s =
                        sub_key ? jstr(e, sub_key) : (cJSON_IsString(e) ? e->valuestring : NULL);

                if (s)
                        ret->v[n++] = xstrdup(s);
        }
        ret->n = n;
}

int maas_node_from_json(const cJSON *o, struct maas_node *ret)
{
        const cJSON *od = cJSON_GetObjectItemCaseSensitive(o, "owner_data");
        const cJSON *swap = cJSON_GetObjectItemCaseSensitive(o, "swap_size");
        struct maas_node m;

        if (!cJSON_IsObject(o) || !jstr(o, "system_id"))
                return CM_EPARSE;
        m = (struct maas_node){
                .system_id = jdup(o, "system_id", NULL),
                .hostname = jdup(o, "hostname", ""),
                .fqdn = jdup(o, "fqdn", ""),
                .zone = jnested_name(o, "zone"),
                .pool = jnested_name(o, "pool"),
                .status = (int)jnum(o, "status", -1),
                .status_name = jdup(o, "status_name", ""),
                .power_state = jdup(o, "power_state", "unknown"),
                .power_type = jdup(o, "power_type", ""),
                .osystem = jdup(o, "osystem", ""),
                .distro_series = jdup(o, "distro_series", ""),
                .owner = jdup(o, "owner", NULL),
                .cpu_count = (int)jnum(o, "cpu_count", 0),
                .memory_mib = (int64_t)jnum(o, "memory", 0),
                .storage_mb = jnum(o, "storage", 0),
                .swap_size = cJSON_IsNumber(swap) ? (int64_t)swap->valuedouble : -1,
                .ephemeral_deploy =
                        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "ephemeral_deploy")),
                .owner_data = cJSON_IsObject(od) ? cJSON_Duplicate(od, true) : cJSON_CreateObject(),
        };
        maas_strv_from_json(cJSON_GetObjectItemCaseSensitive(o, "tag_names"), NULL, &m.tags);
        maas_strv_from_json(cJSON_GetObjectItemCaseSensitive(o, "ip_addresses"), NULL,
                            &m.ip_addresses);
        *ret = m;
        return 0;
}

void maas_node_release(struct maas_node *m)
{
        free(m->system_id);
        free(m->hostname);
        free(m->fqdn);
        free(m->zone);
        free(m->pool);
        free(m->status_name);
        free(m->power_state);
        free(m->power_type);
        free(m->osystem);
        free(m->distro_series);
        free(m->owner);
        maas_strv_release(&m->tags);
        maas_strv_release(&m->ip_addresses);
        cJSON_Delete(m->owner_data);
        *m = (struct maas_node){ 0 };
}

int maas_node_list_from_json(const cJSON *arr, struct maas_node_list *ret)
{
        struct maas_node_list l = { 0 };
        const cJSON *e;

        if (!cJSON_IsArray(arr))
                return CM_EPARSE;
        l.items = xcalloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof(*l.items));
        cJSON_ArrayForEach (e, arr) {
                if (maas_node_from_json(e, &l.items[l.n]) < 0) {
                        maas_node_list_release(&l);
                        return CM_EPARSE;
                }
                l.n++;
        }
        *ret = l;
        return 0;
}

void maas_node_list_release(struct maas_node_list *l)
{
        for (size_t i = 0; i < l->n; i++)
                maas_node_release(&l->items[i]);
        free(l->items);
        *l = (struct maas_node_list){ 0 };
}

int maas_named_list_from_json(const cJSON *arr, struct maas_named_list *ret)
{
        struct maas_named_list l = { 0 };
        const cJSON *e;

        if (!cJSON_IsArray(arr))
                return CM_EPARSE;
        l.items = xcalloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof(*l.items));
        cJSON_ArrayForEach (e, arr) {
                if (!jstr(e, "name")) {
                        maas_named_list_release(&l);
                        return CM_EPARSE;
                }
                l.items[l.n++] = (struct maas_named){
                        .id = (int)jnum(e, "id", -1),
                        .name = jdup(e, "name", NULL),
                        .description =
                                jdup(e, jstr(e, "description") ? "description" : "comment", ""),
                };
        }
        *ret = l;
        return 0;
}

void maas_named_list_release(struct maas_named_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
                free(l->items[i].name);
                free(l->items[i].description);
        }
        free(l->items);
        *l = (struct maas_named_list){ 0 };
}

int maas_boot_resource_list_from_json(const cJSON *arr, struct maas_boot_resource_list *ret)
{
        struct maas_boot_resource_list l = { 0 };
        const cJSON *e;

        if (!cJSON_IsArray(arr))
                return CM_EPARSE;
        l.items = xcalloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof(*l.items));
        cJSON_ArrayForEach (e, arr) {
                if (!jstr(e, "name")) {
                        maas_boot_resource_list_release(&l);
                        return CM_EPARSE;
                }
                l.items[l.n++] = (struct maas_boot_resource){
                        .id = (int)jnum(e, "id", -1),
                        .type = jdup(e, "type", ""),
                        .name = jdup(e, "name", NULL),
                        .architecture = jdup(e, "architecture", ""),
                };
        }
        *ret = l;
        return 0;
}

void maas_boot_resource_list_release(struct maas_boot_resource_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
                free(l->items[i].type);
                free(l->items[i].name);
                free(l->items[i].architecture);
        }
        free(l->items);
        *l = (struct maas_boot_resource_list){ 0 };
}

int maas_dns_resource_from_json(const cJSON *o, struct maas_dns_resource *ret)
{
        const cJSON *ttl = cJSON_GetObjectItemCaseSensitive(o, "address_ttl");

        if (!cJSON_IsObject(o) || !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, "id")))
                return CM_EPARSE;
        *ret = (struct maas_dns_resource){
                .id = (int)jnum(o, "id", -1),
                .fqdn = jdup(o, "fqdn", ""),
                .address_ttl = cJSON_IsNumber(ttl) ? (int)ttl->valuedouble : -1,
        };
        /* ip_addresses are objects; clients read only "ip" (maas-api.md §6.7) */
        maas_strv_from_json(cJSON_GetObjectItemCaseSensitive(o, "ip_addresses"), "ip", &ret->ips);
        return 0;
}

void maas_dns_resource_release(struct maas_dns_resource *d)
{
        free(d->fqdn);
        maas_strv_release(&d->ips);
        *d = (struct maas_dns_resource){ 0 };
}

int maas_dns_list_from_json(const cJSON *arr, struct maas_dns_list *ret)
{
        struct maas_dns_list l = { 0 };
        const cJSON *e;

        if (!cJSON_IsArray(arr))
                return CM_EPARSE;
        l.items = xcalloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof(*l.items));
        cJSON_ArrayForEach (e, arr) {
                if (maas_dns_resource_from_json(e, &l.items[l.n]) < 0) {
                        maas_dns_list_release(&l);
                        return CM_EPARSE;
                }
                l.n++;
        }
        *ret = l;
        return 0;
}

void maas_dns_list_release(struct maas_dns_list *l)
{
        for (size_t i = 0; i < l->n; i++)
                maas_dns_resource_release(&l->items[i]);
        free(l->items);
        *l = (struct maas_dns_list){ 0 };
}

int maas_version_from_json(const cJSON *o, struct maas_version *ret)
{
        /* gomaasapi requires all three keys; so do we */
        if (!jstr(o, "version") || !jstr(o, "subversion") ||
            !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(o, "capabilities")))
                return CM_EPARSE;
        *ret = (struct maas_version){ .version = jdup(o, "version", NULL),
                                      .subversion = jdup(o, "subversion", NULL) };
        maas_strv_from_json(cJSON_GetObjectItemCaseSensitive(o, "capabilities"), NULL,
                            &ret->capabilities);
        return 0;
}

void maas_version_release(struct maas_version *v)
{
        free(v->version);
        free(v->subversion);
        maas_strv_release(&v->capabilities);
        *v = (struct maas_version){ 0 };
}

int maas_user_from_json(const cJSON *o, struct maas_user *ret)
{
        if (!jstr(o, "username"))
                return CM_EPARSE;
        *ret = (struct maas_user){
                .username = jdup(o, "username", NULL),
                .is_superuser = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "is_superuser")),
        };
        return 0;
}

void maas_user_release(struct maas_user *u)
{
        free(u->username);
        *u = (struct maas_user){ 0 };
}
