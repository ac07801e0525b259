/*
 * maas_decode: MAAS JSON -> the typed results of maas_client.h, and their release
 * functions. Every item is type-checked; a missing optional key gets its documented
 * default; a missing identity key (system_id, name, id) makes the whole decode fail with
 * CM_EPARSE, so callers never see half-filled objects. Pure functions; thread-safe.
 */
#include "maas_decode.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "json.h"
#include "json_scan.h"
#include "maas_client.h"
#include "xalloc.h"

static char *jdup(const cJSON *o, const char *k, const char *dflt)
{
        const char *s = json_find_str(o, k, NULL);

        return s ? xstrdup(s) : dflt ? xstrdup(dflt) : NULL;
}

static double jnum(const cJSON *o, const char *k, double dflt)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

        return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* An integral member within [lo, hi] (truncated toward zero), else dflt: missing, not a
 * number, or out of range (MAAS sending 8e192 must not reach a double-to-integer
 * conversion, which is undefined behaviour out of range). hi at most JSON_SAFE_INT_MAX. */
static int64_t jint(const cJSON *o, const char *k, int64_t dflt, int64_t lo, int64_t hi)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

        if (!cJSON_IsNumber(v) || !(v->valuedouble >= (double)lo && v->valuedouble <= (double)hi))
                return dflt;
        return (int64_t)v->valuedouble;
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
                const char *s = sub_key ? json_find_str(e, sub_key, NULL)
                                        : (cJSON_IsString(e) ? e->valuestring : NULL);

                if (s)
                        ret->v[n++] = xstrdup(s);
        }
        ret->n = n;
}

int maas_node_from_json(const cJSON *o, struct maas_node *ret)
{
        const cJSON *od = cJSON_GetObjectItemCaseSensitive(o, "owner_data");
        struct maas_node m;

        if (!cJSON_IsObject(o) || !json_find_str(o, "system_id", NULL))
                return CM_EPARSE;
        m = (struct maas_node){
                .system_id = jdup(o, "system_id", NULL),
                .hostname = jdup(o, "hostname", ""),
                .fqdn = jdup(o, "fqdn", ""),
                .zone = jnested_name(o, "zone"),
                .pool = jnested_name(o, "pool"),
                .status = (int)jint(o, "status", -1, 0, INT_MAX),
                .status_name = jdup(o, "status_name", ""),
                .power_state = jdup(o, "power_state", "unknown"),
                .power_type = jdup(o, "power_type", ""),
                .osystem = jdup(o, "osystem", ""),
                .distro_series = jdup(o, "distro_series", ""),
                .architecture = jdup(o, "architecture", ""),
                .owner = jdup(o, "owner", NULL),
                .cpu_count = (int)jint(o, "cpu_count", 0, 0, INT_MAX),
                .memory_mib = jint(o, "memory", 0, 0, JSON_SAFE_INT_MAX),
                .storage_mb = jnum(o, "storage", 0),
                .swap_size = jint(o, "swap_size", -1, 0, JSON_SAFE_INT_MAX),
                .ephemeral_deploy =
                        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "ephemeral_deploy")),
                .owner_data = cJSON_IsObject(od) ? cJSON_Duplicate(od, true) : cJSON_CreateObject(),
                .boot_interface_id =
                        (int)jint(cJSON_GetObjectItemCaseSensitive(o, "boot_interface"), "id", -1,
                                  0, INT_MAX),
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
        free(m->architecture);
        free(m->owner);
        maas_strv_release(&m->tags);
        maas_strv_release(&m->ip_addresses);
        cJSON_Delete(m->owner_data);
        *m = (struct maas_node){ 0 };
}

/*
 * Arrays of MAAS objects decode through one loop: each element type has a decoder and a
 * release with void * signatures, and a list is {items, n}. A failing element releases
 * the elements decoded so far, so a list is either whole or not written at all.
 */
typedef int elem_decode_fn(const cJSON *o, void *ret);
typedef void elem_release_fn(void *elem);

static void array_release(void *items, size_t n, size_t size, elem_release_fn *release)
{
        for (size_t i = 0; i < n; i++)
                release((char *)items + i * size);
        free(items);
}

/* Returns the decoded elements (NULL when arr is not an array or an element is bad). */
static void *array_from_json(const cJSON *arr,
                             size_t size,
                             elem_decode_fn *decode,
                             elem_release_fn *release,
                             size_t *ret_n)
{
        char *items;
        size_t n = 0;
        const cJSON *e;

        if (!cJSON_IsArray(arr))
                return NULL;
        items = xcalloc((size_t)cJSON_GetArraySize(arr) + 1, size);
        cJSON_ArrayForEach (e, arr) {
                if (decode(e, items + n * size) < 0) {
                        array_release(items, n, size, release);
                        return NULL;
                }
                n++;
        }
        *ret_n = n;
        return items;
}

static int node_decode(const cJSON *o, void *ret)
{
        return maas_node_from_json(o, ret);
}

static void node_release(void *elem)
{
        maas_node_release(elem);
}

int maas_node_list_from_json(const cJSON *arr, struct maas_node_list *ret)
{
        size_t n = 0;
        void *items = array_from_json(arr, sizeof(*ret->items), node_decode, node_release, &n);

        if (!items)
                return CM_EPARSE;
        *ret = (struct maas_node_list){ .items = items, .n = n };
        return 0;
}

/* The members of a machine that maas_node_from_json reads (a key it reads and this list
 * lacks fails unit.maas_decode's text-equals-tree test); a list's machine JSON is mostly
 * what it does not (interfaces with their links, subnets and VLANs, block devices). */
static const char *const node_keys[] = {
        "architecture", "system_id",   "hostname",
        "fqdn",         "zone",        "pool",
        "status",       "status_name", "power_state",
        "power_type",   "osystem",     "distro_series",
        "owner",        "cpu_count",   "memory",
        "storage",      "swap_size",   "ephemeral_deploy",
        "owner_data",   "tag_names",   "ip_addresses",
};

/* What the scan of one machine found: the read members, as a small tree. */
struct node_pick {
        const char *text;
        cJSON *obj; /* owned: the members node_keys names, plus boot_interface {id} */
        int err;
};

static void pick_add(struct node_pick *pk,
                     cJSON *to,
                     const char *key,
                     const struct json_scan_member *m)
{
        cJSON *v = NULL;

        if (pk->err == 0 &&
            (pk->err = json_parse(pk->text + m->value_off, m->value_end - m->value_off, &v)) == 0)
                cJSON_AddItemToObject(to, key, v);
}

/* json_scan_member_fn: keeps the members maas_node_from_json reads, and boot_interface's id
 * (the member of a member: handed over before boot_interface itself). */
static void pick_member(void *ud, const struct json_scan_member *m)
{
        struct node_pick *pk = ud;

        if (m->depth == 2) {
                if (m->parent_key_off != SIZE_MAX &&
                    json_scan_key_is(pk->text, m->parent_key_off, "boot_interface") &&
                    json_scan_key_is(pk->text, m->key_off, "id") &&
                    !cJSON_GetObjectItemCaseSensitive(pk->obj, "boot_interface"))
                        pick_add(pk, cJSON_AddObjectToObject(pk->obj, "boot_interface"), "id", m);
                return;
        }
        for (size_t i = 0; i < ARRAY_SIZE(node_keys); i++)
                if (json_scan_key_is(pk->text, m->key_off, node_keys[i])) {
                        pick_add(pk, pk->obj, node_keys[i], m);
                        return;
                }
}

/*
 * json_elem_fn: one machine of a list. The strict scan checks the whole element and hands
 * over the spans of its top members; only the members a node keeps are parsed, so a list
 * of 10 000 machines never builds the trees of their interfaces and disks. An element the
 * scan refuses and cJSON reads is decoded from cJSON's tree, as every element was before
 * (tests/fuzz/fuzz_json_array.c holds the two readings equal).
 */
static int node_from_elem(void *arg, const char *elem, size_t len)
{
        struct maas_node_stream *ns = arg;
        struct maas_node_list *l = &ns->nodes;
        struct node_pick pk = { .text = elem, .obj = cJSON_CreateObject() };
        struct json_scan_result res;
        int r = json_scan_members(
                elem, len, NULL,
                &(struct json_scan_members){ .depth = 2, .fn = pick_member, .ud = &pk }, &res);

        if (r < 0 || pk.err < 0) {
                /* stricter than cJSON (a duplicate key, \u0000, a lone surrogate): decoded as
                 * cJSON reads the whole element, so a list means what it meant before */
                cJSON_Delete(pk.obj);
                pk.obj = NULL;
                r = json_parse(elem, len, &pk.obj);
        }
        if (r < 0) {
                (void)snprintf(ns->message, sizeof(ns->message),
                               "machine %zu of the list is not valid JSON", l->n);
                goto out;
        }
        if (l->n == ns->cap) {
                ns->cap = ns->cap ? ns->cap * 2 : 16;
                l->items = xrealloc(l->items, ns->cap * sizeof(*l->items));
        }
        r = maas_node_from_json(pk.obj, &l->items[l->n]);
        if (r < 0) {
                (void)snprintf(ns->message, sizeof(ns->message),
                               "machine %zu of the list is not a machine (no system_id)", l->n);
                goto out;
        }
        l->n++;
out:
        cJSON_Delete(pk.obj);
        return r;
}

void maas_node_stream_init(struct maas_node_stream *ns)
{
        *ns = (struct maas_node_stream){ 0 };
        json_split_init(&ns->split, &(struct json_split_opts){ .fn = node_from_elem,
                                                               .arg = ns,
                                                               .max_elem = MAAS_MACHINE_JSON_MAX,
                                                               .max_elems = MAAS_MACHINES_MAX,
                                                               .what = "machine" });
}

void maas_node_stream_reset(struct maas_node_stream *ns)
{
        json_split_reset(&ns->split);
        maas_node_list_release(&ns->nodes);
        ns->cap = 0;
        ns->message[0] = '\0';
}

void maas_node_stream_release(struct maas_node_stream *ns)
{
        json_split_release(&ns->split);
        maas_node_list_release(&ns->nodes);
        ns->cap = 0;
}

/* A machine that does not decode is an EPARSE whatever the decoder said. */
static int stream_result(struct maas_node_stream *ns, int r)
{
        if (r > 0)
                r = CM_EPARSE;
        if (r < 0 && !ns->message[0])
                (void)snprintf(ns->message, sizeof(ns->message), "%s", ns->split.message);
        return r;
}

int maas_node_stream_feed(struct maas_node_stream *ns, const char *data, size_t n)
{
        return stream_result(ns, json_split_feed(&ns->split, data, n));
}

int maas_node_stream_finish(struct maas_node_stream *ns, struct maas_node_list *ret)
{
        int r = stream_result(ns, json_split_finish(&ns->split));

        if (r < 0)
                return r;
        *ret = ns->nodes;
        ns->nodes = (struct maas_node_list){ 0 };
        ns->cap = 0;
        return 0;
}

int maas_node_list_from_text(const char *text, size_t len, struct maas_node_list *ret)
{
        struct maas_node_stream ns;
        int r;

        maas_node_stream_init(&ns);
        r = maas_node_stream_feed(&ns, text, len);
        if (r == 0)
                r = maas_node_stream_finish(&ns, ret);
        maas_node_stream_release(&ns);
        return r;
}

void maas_node_list_append(struct maas_node_list *dst, struct maas_node_list *src)
{
        if (src->n > 0) {
                dst->items = xrealloc(dst->items, (dst->n + src->n) * sizeof(*dst->items));
                memcpy(dst->items + dst->n, src->items, src->n * sizeof(*src->items));
                dst->n += src->n;
        }
        free(src->items);
        *src = (struct maas_node_list){ 0 };
}

void maas_node_list_release(struct maas_node_list *l)
{
        array_release(l->items, l->n, sizeof(*l->items), node_release);
        *l = (struct maas_node_list){ 0 };
}

static int named_decode(const cJSON *e, void *ret)
{
        if (!json_find_str(e, "name", NULL))
                return CM_EPARSE;
        *(struct maas_named *)ret = (struct maas_named){
                .id = (int)jint(e, "id", -1, 0, INT_MAX),
                .name = jdup(e, "name", NULL),
                .description = jdup(
                        e, json_find_str(e, "description", NULL) ? "description" : "comment", ""),
        };
        return 0;
}

static void named_release(void *elem)
{
        struct maas_named *n = elem;

        free(n->name);
        free(n->description);
}

int maas_named_list_from_json(const cJSON *arr, struct maas_named_list *ret)
{
        size_t n = 0;
        void *items = array_from_json(arr, sizeof(*ret->items), named_decode, named_release, &n);

        if (!items)
                return CM_EPARSE;
        *ret = (struct maas_named_list){ .items = items, .n = n };
        return 0;
}

void maas_named_list_release(struct maas_named_list *l)
{
        array_release(l->items, l->n, sizeof(*l->items), named_release);
        *l = (struct maas_named_list){ 0 };
}

static int boot_resource_decode(const cJSON *e, void *ret)
{
        if (!json_find_str(e, "name", NULL))
                return CM_EPARSE;
        *(struct maas_boot_resource *)ret = (struct maas_boot_resource){
                .id = (int)jint(e, "id", -1, 0, INT_MAX),
                .type = jdup(e, "type", ""),
                .name = jdup(e, "name", NULL),
                .architecture = jdup(e, "architecture", ""),
                .subarches = jdup(e, "subarches", ""),
                .base_image = jdup(e, "base_image", NULL),
        };
        return 0;
}

static void boot_resource_release(void *elem)
{
        struct maas_boot_resource *b = elem;

        free(b->type);
        free(b->name);
        free(b->architecture);
        free(b->subarches);
        free(b->base_image);
}

int maas_boot_resource_list_from_json(const cJSON *arr, struct maas_boot_resource_list *ret)
{
        size_t n = 0;
        void *items = array_from_json(arr, sizeof(*ret->items), boot_resource_decode,
                                      boot_resource_release, &n);

        if (!items)
                return CM_EPARSE;
        *ret = (struct maas_boot_resource_list){ .items = items, .n = n };
        return 0;
}

void maas_boot_resource_list_release(struct maas_boot_resource_list *l)
{
        array_release(l->items, l->n, sizeof(*l->items), boot_resource_release);
        *l = (struct maas_boot_resource_list){ 0 };
}

int maas_dns_resource_from_json(const cJSON *o, struct maas_dns_resource *ret)
{
        int64_t id = jint(o, "id", -1, 0, INT_MAX);

        if (!cJSON_IsObject(o) || id < 0)
                return CM_EPARSE;
        *ret = (struct maas_dns_resource){
                .id = (int)id,
                .fqdn = jdup(o, "fqdn", ""),
                .address_ttl = (int)jint(o, "address_ttl", -1, 0, INT_MAX),
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

static int dns_decode(const cJSON *o, void *ret)
{
        return maas_dns_resource_from_json(o, ret);
}

static void dns_release(void *elem)
{
        maas_dns_resource_release(elem);
}

int maas_dns_list_from_json(const cJSON *arr, struct maas_dns_list *ret)
{
        size_t n = 0;
        void *items = array_from_json(arr, sizeof(*ret->items), dns_decode, dns_release, &n);

        if (!items)
                return CM_EPARSE;
        *ret = (struct maas_dns_list){ .items = items, .n = n };
        return 0;
}

void maas_dns_list_release(struct maas_dns_list *l)
{
        array_release(l->items, l->n, sizeof(*l->items), dns_release);
        *l = (struct maas_dns_list){ 0 };
}

int maas_version_from_json(const cJSON *o, struct maas_version *ret)
{
        /* gomaasapi requires all three keys; so do we */
        if (!json_find_str(o, "version", NULL) || !json_find_str(o, "subversion", NULL) ||
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
        if (!json_find_str(o, "username", NULL))
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

/* --- subnets and interfaces ------------------------------------------------------------------ */

static int subnet_decode(const cJSON *o, void *ret)
{
        const cJSON *vlan = cJSON_GetObjectItemCaseSensitive(o, "vlan");
        int64_t id = jint(o, "id", -1, 0, INT_MAX);
        struct maas_subnet *sn = ret;

        if (!cJSON_IsObject(o) || id < 0 || !json_find_str(o, "cidr", NULL))
                return CM_EPARSE;
        *sn = (struct maas_subnet){
                .id = (int)id,
                .name = jdup(o, "name", ""),
                .cidr = jdup(o, "cidr", NULL),
                .gateway_ip = jdup(o, "gateway_ip", NULL),
                .vid = (int)jint(vlan, "vid", -1, 0, 4095),
        };
        if (sn->gateway_ip && !*sn->gateway_ip) {
                free(sn->gateway_ip);
                sn->gateway_ip = NULL;
        }
        maas_strv_from_json(cJSON_GetObjectItemCaseSensitive(o, "dns_servers"), NULL,
                            &sn->dns_servers);
        return 0;
}

static void subnet_release(void *elem)
{
        struct maas_subnet *sn = elem;

        free(sn->name);
        free(sn->cidr);
        free(sn->gateway_ip);
        maas_strv_release(&sn->dns_servers);
        *sn = (struct maas_subnet){ 0 };
}

void maas_subnet_release(struct maas_subnet *sn)
{
        subnet_release(sn);
}

int maas_subnet_list_from_json(const cJSON *arr, struct maas_subnet_list *ret)
{
        size_t n = 0;
        void *items = array_from_json(arr, sizeof(*ret->items), subnet_decode, subnet_release, &n);

        if (!items)
                return CM_EPARSE;
        *ret = (struct maas_subnet_list){ .items = items, .n = n };
        return 0;
}

void maas_subnet_list_release(struct maas_subnet_list *l)
{
        array_release(l->items, l->n, sizeof(*l->items), subnet_release);
        *l = (struct maas_subnet_list){ 0 };
}

static enum maas_link_mode link_mode(const char *s)
{
        static const char *const names[] = { "auto", "dhcp", "static", "link_up" };

        for (size_t i = 0; s && i < ARRAY_SIZE(names); i++)
                if (strcmp(s, names[i]) == 0)
                        return (enum maas_link_mode)i;
        return MAAS_LINK_OTHER;
}

static int link_decode(const cJSON *o, void *ret)
{
        const cJSON *sn = cJSON_GetObjectItemCaseSensitive(o, "subnet");
        int64_t id = jint(o, "id", -1, 0, INT_MAX);
        struct maas_link *l = ret;

        if (!cJSON_IsObject(o) || id < 0)
                return CM_EPARSE;
        *l = (struct maas_link){
                .id = (int)id,
                .mode = link_mode(json_find_str(o, "mode", NULL)),
                .ip = jdup(o, "ip_address", NULL),
                .subnet_id = cJSON_IsObject(sn) ? (int)jint(sn, "id", -1, 0, INT_MAX) : -1,
                .subnet_cidr = cJSON_IsObject(sn) ? jdup(sn, "cidr", NULL) : NULL,
        };
        return 0;
}

static void link_release(void *elem)
{
        struct maas_link *l = elem;

        free(l->ip);
        free(l->subnet_cidr);
        *l = (struct maas_link){ 0 };
}

int maas_interface_from_json(const cJSON *o, struct maas_interface *ret)
{
        const cJSON *links = cJSON_GetObjectItemCaseSensitive(o, "links");
        int64_t id = jint(o, "id", -1, 0, INT_MAX);
        struct maas_interface f;
        size_t n = 0;

        if (!cJSON_IsObject(o) || id < 0 || !json_find_str(o, "name", NULL))
                return CM_EPARSE;
        f = (struct maas_interface){ .id = (int)id };
        if (links) {
                f.links = array_from_json(links, sizeof(*f.links), link_decode, link_release, &n);
                if (!f.links)
                        return CM_EPARSE;
                f.n_links = n;
        }
        f.name = jdup(o, "name", NULL);
        f.mac_address = jdup(o, "mac_address", "");
        *ret = f;
        return 0;
}

void maas_interface_release(struct maas_interface *f)
{
        array_release(f->links, f->n_links, sizeof(*f->links), link_release);
        free(f->name);
        free(f->mac_address);
        *f = (struct maas_interface){ 0 };
}

static int iface_decode(const cJSON *o, void *ret)
{
        return maas_interface_from_json(o, ret);
}

static void iface_release(void *elem)
{
        maas_interface_release(elem);
}

int maas_interface_list_from_json(const cJSON *arr, struct maas_interface_list *ret)
{
        size_t n = 0;
        void *items = array_from_json(arr, sizeof(*ret->items), iface_decode, iface_release, &n);

        if (!items)
                return CM_EPARSE;
        *ret = (struct maas_interface_list){ .items = items, .n = n };
        return 0;
}

void maas_interface_list_release(struct maas_interface_list *l)
{
        array_release(l->items, l->n, sizeof(*l->items), iface_release);
        *l = (struct maas_interface_list){ 0 };
}

/* --- IP addresses and IP ranges -----------------------------------------------------------------
 */

/* A username written as a string or as a user object. */
static char *owner_name(const cJSON *o)
{
        const cJSON *ow = cJSON_GetObjectItemCaseSensitive(o, "owner");

        if (cJSON_IsString(ow))
                return xstrdup(ow->valuestring);
        return cJSON_IsObject(ow) ? jdup(ow, "username", NULL) : NULL;
}

int maas_ip_address_from_json(const cJSON *o, struct maas_ip_address *ret)
{
        if (!cJSON_IsObject(o) || !json_find_str(o, "ip", NULL))
                return CM_EPARSE;
        *ret = (struct maas_ip_address){
                .ip = jdup(o, "ip", NULL),
                .alloc_type = (int)jint(o, "alloc_type", -1, 0, INT_MAX),
                .owner = owner_name(o),
                .subnet_cidr = jdup(cJSON_GetObjectItemCaseSensitive(o, "subnet"), "cidr", NULL),
        };
        return 0;
}

void maas_ip_address_release(struct maas_ip_address *a)
{
        free(a->ip);
        free(a->owner);
        free(a->subnet_cidr);
        *a = (struct maas_ip_address){ 0 };
}

static int ip_address_decode(const cJSON *o, void *ret)
{
        return maas_ip_address_from_json(o, ret);
}

static void ip_address_release(void *elem)
{
        maas_ip_address_release(elem);
}

int maas_ip_address_list_from_json(const cJSON *arr, struct maas_ip_address_list *ret)
{
        size_t n = 0;
        void *items = array_from_json(arr, sizeof(*ret->items), ip_address_decode,
                                      ip_address_release, &n);

        if (!items)
                return CM_EPARSE;
        *ret = (struct maas_ip_address_list){ .items = items, .n = n };
        return 0;
}

void maas_ip_address_list_release(struct maas_ip_address_list *l)
{
        array_release(l->items, l->n, sizeof(*l->items), ip_address_release);
        *l = (struct maas_ip_address_list){ 0 };
}

static int ip_range_decode(const cJSON *o, void *ret)
{
        struct maas_ip_range *r = ret;

        if (!cJSON_IsObject(o) || !json_find_str(o, "start_ip", NULL) ||
            !json_find_str(o, "end_ip", NULL))
                return CM_EPARSE;
        *r = (struct maas_ip_range){
                .type = jdup(o, "type", ""),
                .start_ip = jdup(o, "start_ip", NULL),
                .end_ip = jdup(o, "end_ip", NULL),
                .subnet_cidr = jdup(cJSON_GetObjectItemCaseSensitive(o, "subnet"), "cidr", NULL),
        };
        return 0;
}

static void ip_range_release(void *elem)
{
        struct maas_ip_range *r = elem;

        free(r->type);
        free(r->start_ip);
        free(r->end_ip);
        free(r->subnet_cidr);
        *r = (struct maas_ip_range){ 0 };
}

int maas_ip_range_list_from_json(const cJSON *arr, struct maas_ip_range_list *ret)
{
        size_t n = 0;
        void *items =
                array_from_json(arr, sizeof(*ret->items), ip_range_decode, ip_range_release, &n);

        if (!items)
                return CM_EPARSE;
        *ret = (struct maas_ip_range_list){ .items = items, .n = n };
        return 0;
}

void maas_ip_range_list_release(struct maas_ip_range_list *l)
{
        array_release(l->items, l->n, sizeof(*l->items), ip_range_release);
        *l = (struct maas_ip_range_list){ 0 };
}
