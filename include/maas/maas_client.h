#pragma once
/*
 * maas_client: typed calls to the MAAS 2.0 region API (maas-api.md), shared by the
 * webhooks' inventory refresh and the reconcilers.
 *
 * Threads and ownership: a struct maas_client belongs to ONE thread (each worker creates
 * its own) and borrows that thread's http_transport, which must outlive it. Configuration
 * (struct maas_config) is parsed once at start-up and copied into each client. Every
 * result struct is filled only on success and belongs to the caller (its *_release
 * function); an error detail (struct maas_error, which must start zeroed or released) is
 * reset by every call, filled on failure when non-NULL (attempts is set on success too),
 * and released with maas_error_release().
 *
 * Errors: 0, or a negative code: CM_ENOTFOUND (404), MAAS_ENOMATCH (allocate: no machine
 * matches, 409), CM_ECONFLICT (other 409: wrong state), CM_EUNAUTHORIZED (401),
 * CM_EFORBIDDEN (403), CM_EINVAL (400, with MAAS's field map in maas_error.fields when it
 * sent one), CM_EUNSUPPORTED (410), CM_ESERVER (429 or 5xx after retries), CM_ETRANSPORT /
 * CM_ETIMEDOUT / CM_ETOOBIG (no usable response), CM_EPARSE (2xx with malformed JSON).
 *
 * Retries: transport errors, 429 and 5xx are retried with exponential backoff and jitter
 * on idempotent calls only (GET, PUT, DELETE and the POST ops that are safe to repeat:
 * release, power_on, power_off, set_owner_data). A 429 or 503 carrying Retry-After is
 * retried on every call, since it is sent only when the request was not acted on, after
 * waiting Retry-After seconds capped at max_retry_after_ms. Allocate, deploy and DNS create
 * are never repeated after a 5xx or a lost response: the caller looks for its stamp
 * (agent_name) instead.
 *
 * Budget: with a token bucket (opts.budget, shared by every client of the process), each
 * request, retries included, first takes a token, waiting (through sleep_ms) when the
 * bucket is empty; a Retry-After answer holds the whole bucket for that long, so no client
 * of the process calls MAAS before it has passed.
 *
 * The client never logs; it never puts the API key in an error message (any part of it that
 * MAAS echoes, as its 401 text does the token key, is blanked with '*').
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "backoff.h"
#include "compiler.h"
#include "http_transport.h"
#include "maas_auth.h"

/* Allocate found no machine matching the constraints (HTTP 409). Outside enum cm_err's
 * range; maas_strerror() describes it. */
enum maas_err {
        MAAS_ENOMATCH = -100,
};

enum maas_error_class {
        MAAS_ERR_NONE,
        MAAS_ERR_NOT_FOUND,    /* 404 */
        MAAS_ERR_NO_MATCH,     /* allocate 409 */
        MAAS_ERR_CONFLICT,     /* other 409: node state violation */
        MAAS_ERR_UNAUTHORIZED, /* 401 */
        MAAS_ERR_FORBIDDEN,    /* 403 */
        MAAS_ERR_VALIDATION,   /* 400 */
        MAAS_ERR_TRANSIENT,    /* 429, 5xx, transport error, timeout */
        MAAS_ERR_PROTOCOL,     /* unexpected status or malformed body */
};

struct maas_error {
        long http_status; /* 0 when no response arrived */
        enum maas_error_class cls;
        char *message;     /* MAAS's text (capped), or the transport's reason */
        cJSON *fields;     /* 400 field map {"zone": ["No such zone: 'x'."]}, or NULL */
        unsigned attempts; /* requests sent for this call */
};

void maas_error_release(struct maas_error *e);
const char *maas_error_class_name(enum maas_error_class cls);
/* cm_strerror() plus MAAS_ENOMATCH. */
const char *maas_strerror(int err);

struct maas_config {
        char *base_url; /* ".../MAAS/api/2.0/" */
        struct maas_credentials creds;
};

/* Builds the config from MAAS_ENDPOINT and MAAS_API_KEY values; CM_EINVAL and a message
 * (without secrets) for a malformed one. */
MUST_CHECK int maas_config_parse(const char *endpoint,
                                 const char *api_key,
                                 struct maas_config *ret,
                                 char **ret_err);
void maas_config_release(struct maas_config *c);

struct token_bucket;

struct maas_client_opts {
        const struct maas_config *cfg;    /* copied */
        struct http_transport *transport; /* borrowed; same thread */
        unsigned max_attempts;            /* total tries per call; 0 = 4 */
        struct backoff_policy backoff;    /* 0s = 200 ms .. 5 s */
        uint64_t max_retry_after_ms;      /* cap on a Retry-After wait; 0 = 10 000 */
        uint32_t timeout_ms;              /* per request; 0 = the transport's default */
        struct token_bucket *budget;      /* borrowed, shared; NULL = unlimited */
        /* Sleeps between attempts; NULL = nanosleep. Tests record the delays here. */
        void (*sleep_ms)(void *ud, uint64_t ms);
        void *sleep_ud;
        /* Told the outcome of every request (0 or the call's error, after retries), on the
         * client's thread; NULL = nobody. The per-cluster credentials (reconcile/
         * maas_identity.h) learn this way that MAAS refused a key or cannot be reached. */
        void (*observe)(void *ud, int err);
        void *observe_ud;
};

struct maas_client;

MUST_CHECK int maas_client_new(const struct maas_client_opts *o, struct maas_client **ret);
struct maas_client *maas_client_free(struct maas_client *mc);

/* --- results ---------------------------------------------------------------------------- */

struct maas_strv {
        char **v;
        size_t n;
};

/* A MAAS machine. Named "node" (MAAS's own term) because struct maas_machine is the
 * MaasMachine custom resource (schema.h). */
struct maas_node {
        char *system_id, *hostname, *fqdn;
        char *zone, *pool; /* names */
        int status;        /* maas-api.md §5 code */
        char *status_name; /* "Ready", "Deployed", … */
        char *power_state, *power_type;
        char *osystem, *distro_series;
        char *architecture; /* "amd64/generic"; "" when MAAS gave none */
        char *owner;        /* NULL when unowned */
        int cpu_count;
        int64_t memory_mib;
        double storage_mb;
        int64_t swap_size; /* bytes; -1 when null */
        bool ephemeral_deploy;
        struct maas_strv tags;
        struct maas_strv ip_addresses;
        cJSON *owner_data;     /* object string -> string; owned */
        int boot_interface_id; /* -1 when MAAS names none */
};

struct maas_node_list {
        struct maas_node *items;
        size_t n;
};

struct maas_named { /* zone, resource pool, tag or domain */
        int id;     /* -1 for tags (which have none) */
        char *name;
        char *description; /* tags: comment */
};

struct maas_named_list {
        struct maas_named *items;
        size_t n;
};

struct maas_boot_resource {
        int id;
        char *type; /* "Synced" | "Uploaded" */
        char *name; /* "ubuntu/jammy", "u-2204-0-k-1264-0" */
        char *architecture;
        char *subarches;  /* "generic,hwe-22.04,ga-22.04" (the kernels); "" when absent */
        char *base_image; /* an uploaded image's OS ("ubuntu/jammy"); NULL when absent */
};

struct maas_boot_resource_list {
        struct maas_boot_resource *items;
        size_t n;
};

struct maas_dns_resource {
        int id;
        char *fqdn;
        int address_ttl; /* -1 when null */
        struct maas_strv ips;
};

struct maas_dns_list {
        struct maas_dns_resource *items;
        size_t n;
};

struct maas_version {
        char *version;
        char *subversion;
        struct maas_strv capabilities;
};

struct maas_user {
        char *username;
        bool is_superuser;
};

struct maas_subnet {
        int id;
        char *name, *cidr;
        char *gateway_ip; /* NULL when the subnet has none */
        struct maas_strv dns_servers;
        int vid; /* its VLAN's; -1 when MAAS did not say */
};

struct maas_subnet_list {
        struct maas_subnet *items;
        size_t n;
};

enum maas_link_mode {
        MAAS_LINK_AUTO,
        MAAS_LINK_DHCP,
        MAAS_LINK_STATIC,
        MAAS_LINK_UP,
        MAAS_LINK_OTHER
};

/* A link of an interface to a subnet (MAAS's StaticIPAddress). */
struct maas_link {
        int id;
        enum maas_link_mode mode;
        char *ip;          /* NULL until MAAS assigned one (AUTO before deploy, DHCP, LINK_UP) */
        int subnet_id;     /* -1 when the link has no subnet */
        char *subnet_cidr; /* NULL likewise */
};

struct maas_interface {
        int id;
        char *name;
        char *mac_address; /* "" when MAAS sent none */
        struct maas_link *links;
        size_t n_links;
};

struct maas_interface_list {
        struct maas_interface *items;
        size_t n;
};

void maas_node_release(struct maas_node *m);
void maas_node_list_release(struct maas_node_list *l);
/* Moves every node of src to the end of dst; src is left empty. */
void maas_node_list_append(struct maas_node_list *dst, struct maas_node_list *src);
void maas_named_list_release(struct maas_named_list *l);
void maas_boot_resource_list_release(struct maas_boot_resource_list *l);
void maas_dns_resource_release(struct maas_dns_resource *d);
void maas_dns_list_release(struct maas_dns_list *l);
void maas_version_release(struct maas_version *v);
void maas_user_release(struct maas_user *u);
void maas_subnet_release(struct maas_subnet *sn);
void maas_subnet_list_release(struct maas_subnet_list *l);
void maas_interface_release(struct maas_interface *f);
void maas_interface_list_release(struct maas_interface_list *l);

/* Decodes one machine object (exported for the inventory cache and tests). */
MUST_CHECK int maas_node_from_json(const cJSON *o, struct maas_node *ret);

/* Splits a MaasMachine image like the reference provider: "os/series" -> (os, series) at
 * the first '/'; no '/' -> ("custom", image); "" -> ("custom", ""). New strings. */
void maas_split_image(const char *image, char **ret_osystem, char **ret_series);

/* --- calls --------------------------------------------------------------------------------- */

MUST_CHECK int maas_get_version(struct maas_client *mc,
                                struct maas_version *ret,
                                struct maas_error *err);
MUST_CHECK int maas_whoami(struct maas_client *mc, struct maas_user *ret, struct maas_error *err);
MUST_CHECK int maas_list_zones(struct maas_client *mc,
                               struct maas_named_list *ret,
                               struct maas_error *err);
MUST_CHECK int maas_list_pools(struct maas_client *mc,
                               struct maas_named_list *ret,
                               struct maas_error *err);
MUST_CHECK int maas_list_tags(struct maas_client *mc,
                              struct maas_named_list *ret,
                              struct maas_error *err);
MUST_CHECK int maas_list_domains(struct maas_client *mc,
                                 struct maas_named_list *ret,
                                 struct maas_error *err);
MUST_CHECK int maas_list_boot_resources(struct maas_client *mc,
                                        struct maas_boot_resource_list *ret,
                                        struct maas_error *err);

/* Server-side filters for GET machines/; every field optional (NULL / 0 = no filter).
 * ids match any of; tags must all be present. */
struct maas_node_filter {
        const char *const *ids;
        size_t n_ids;
        const char *hostname;
        const char *zone;
        const char *pool;
        const char *agent_name;
        const char *const *agent_names; /* more, each its own agent_name= (MAAS ORs them) */
        size_t n_agent_names;
        const char *const *tags;
        size_t n_tags;
};

/* GET machines/ with the filter. The list is decoded machine by machine as the body arrives
 * (the transport's stream(); a transport without it buffers the body up to its cap), so a
 * list of any length costs its decoded nodes plus one machine's JSON: one machine over
 * MAAS_MACHINE_JSON_MAX (1 MiB) or more than MAAS_MACHINES_MAX machines is CM_ETOOBIG, a
 * body that is not an array of machines CM_EPARSE, each with err->message naming the
 * machine's index and the limit ("MAAS's machine list: machine 12 of the array ..."). A
 * retried attempt starts the decoding over; an error body is buffered (capped) as usual. */
MUST_CHECK int maas_list_machines(struct maas_client *mc,
                                  const struct maas_node_filter *f,
                                  struct maas_node_list *ret,
                                  struct maas_error *err);
MUST_CHECK int maas_get_machine(struct maas_client *mc,
                                const char *system_id,
                                struct maas_node *ret,
                                struct maas_error *err);

struct maas_allocate_opts {
        double cpu_count; /* minimum; 0 = none */
        double mem_mib;   /* minimum; 0 = none */
        const char *zone, *pool, *system_id, *agent_name, *comment;
        const char *const *tags; /* each sent as its own tags= (MAAS requires all) */
        size_t n_tags;
        const char *const *not_tags;
        size_t n_not_tags;
        bool dry_run;
        const char *not_pod_type; /* sends not_pod=true&not_pod_type=X when set */
        const char *arch;         /* "amd64" or "amd64/generic"; NULL = any */
        const char *storage;      /* MAAS's storage constraint ("label:size(tags),..."; GB) */
};

/* POST machines/?op=allocate. MAAS_ENOMATCH when nothing matches. ret may be NULL. */
MUST_CHECK int maas_allocate(struct maas_client *mc,
                             const struct maas_allocate_opts *o,
                             struct maas_node *ret,
                             struct maas_error *err);

struct maas_update_opts {
        int64_t swap_size;    /* bytes; < 0 = leave as is */
        const char *hostname; /* NULL = leave as is */
};

MUST_CHECK int maas_update_machine(struct maas_client *mc,
                                   const char *system_id,
                                   const struct maas_update_opts *o,
                                   struct maas_node *ret,
                                   struct maas_error *err);

struct maas_deploy_opts {
        const char *image;     /* split with maas_split_image into osystem + distro_series */
        const char *user_data; /* raw cloud-init; sent base64-encoded; NULL = none */
        size_t user_data_len;  /* 0 = strlen(user_data) */
        bool ephemeral_deploy;
        const char *hwe_kernel; /* NULL = MAAS default */
};

MUST_CHECK int maas_deploy(struct maas_client *mc,
                           const char *system_id,
                           const struct maas_deploy_opts *o,
                           struct maas_node *ret,
                           struct maas_error *err);

/* POST machines/<sid>/?op=set_storage_layout: layout (flat, lvm, bcache, blank, ...) and its
 * options, each NULL = MAAS's default (sizes as MAAS reads them: "24G", "50%"). MAAS takes it
 * only from an administrator (403) and only on a Ready machine (409 "Cannot change the
 * storage layout on a machine that is not Ready."); 400 names a bad option. It replaces the
 * whole storage configuration, so repeating it is harmless (retried as idempotent). */
struct maas_storage_layout {
        const char *layout;
        const char *boot_size, *root_size;
        const char *vg_name, *lv_name, *lv_size; /* lvm */
        const char *cache_mode, *cache_size;     /* bcache */
        bool cache_no_part;                      /* bcache; sent only when true */
};

MUST_CHECK int maas_set_storage_layout(struct maas_client *mc,
                                       const char *system_id,
                                       const struct maas_storage_layout *o,
                                       struct maas_node *ret,
                                       struct maas_error *err);

struct maas_release_opts {
        bool erase, quick_erase, secure_erase, force; /* the last two erase kinds need erase */
        const char *comment;
};

/* o may be NULL (no options). */
MUST_CHECK int maas_release(struct maas_client *mc,
                            const char *system_id,
                            const struct maas_release_opts *o,
                            struct maas_node *ret,
                            struct maas_error *err);
MUST_CHECK int maas_power_on(struct maas_client *mc,
                             const char *system_id,
                             const char *comment,
                             struct maas_node *ret,
                             struct maas_error *err);
MUST_CHECK int maas_power_off(struct maas_client *mc,
                              const char *system_id,
                              struct maas_node *ret,
                              struct maas_error *err);
/* GET ?op=query_power_state: "on", "off", "unknown" or "error" (new string). */
MUST_CHECK int maas_query_power_state(struct maas_client *mc,
                                      const char *system_id,
                                      char **ret_state,
                                      struct maas_error *err);
/* Sets owner data: keys[i] = values[i]; an empty value deletes the key. */
MUST_CHECK int maas_set_owner_data(struct maas_client *mc,
                                   const char *system_id,
                                   const char *const *keys,
                                   const char *const *values,
                                   size_t n,
                                   struct maas_node *ret,
                                   struct maas_error *err);

/* Tags (admin calls in MAAS). maas_create_tag: POST tags/ {name, comment}; CM_EEXIST when
 * MAAS answers that a tag of that name exists. maas_tag_update_nodes: POST
 * tags/<name>/?op=update_nodes with add= / remove= per system id (MAAS skips unknown ids);
 * CM_ENOTFOUND when the tag does not exist. Both are safe to repeat. */
MUST_CHECK int maas_create_tag(struct maas_client *mc,
                               const char *name,
                               const char *comment,
                               struct maas_error *err);
MUST_CHECK int maas_tag_update_nodes(struct maas_client *mc,
                                     const char *name,
                                     const char *const *add,
                                     size_t n_add,
                                     const char *const *remove,
                                     size_t n_remove,
                                     struct maas_error *err);
/* PUT tags/<name>/ comment=...: the tag's comment replaced (its definition kept). DELETE
 * tags/<name>/: 204, the tag gone from every machine. Admin calls; CM_ENOTFOUND when the tag
 * does not exist. Both are safe to repeat. */
MUST_CHECK int maas_update_tag_comment(struct maas_client *mc,
                                       const char *name,
                                       const char *comment,
                                       struct maas_error *err);
MUST_CHECK int maas_delete_tag(struct maas_client *mc, const char *name, struct maas_error *err);

/* DNS resources. fqdn may be NULL to list all. */
MUST_CHECK int maas_list_dns_resources(struct maas_client *mc,
                                       const char *fqdn,
                                       struct maas_dns_list *ret,
                                       struct maas_error *err);
/* GET dnsresources/?name=<label>: the resources of that name in every domain (as MAAS's
 * name filter without a domain). */
MUST_CHECK int maas_list_dns_resources_named(struct maas_client *mc,
                                             const char *name,
                                             struct maas_dns_list *ret,
                                             struct maas_error *err);
/* ttl < 0 = MAAS default. ips may be empty. */
MUST_CHECK int maas_create_dns_resource(struct maas_client *mc,
                                        const char *fqdn,
                                        int ttl,
                                        const char *const *ips,
                                        size_t n_ips,
                                        struct maas_dns_resource *ret,
                                        struct maas_error *err);
/* Replaces the address set (PUT ip_addresses). */
MUST_CHECK int maas_update_dns_resource_ips(struct maas_client *mc,
                                            int id,
                                            const char *const *ips,
                                            size_t n_ips,
                                            struct maas_dns_resource *ret,
                                            struct maas_error *err);
MUST_CHECK int maas_delete_dns_resource(struct maas_client *mc, int id, struct maas_error *err);

/* --- IP addresses: user reservations and IP ranges (docs/endpoints.md) ---------------------- */

#define MAAS_ALLOC_USER_RESERVED 4 /* StaticIPAddress alloc_type "User reserved" */

/* One StaticIPAddress as GET/POST ipaddresses/ answer it. */
struct maas_ip_address {
        char *ip;
        int alloc_type;    /* -1 when MAAS did not say */
        char *owner;       /* its owner's username (a string or {"username": ...}); may be NULL */
        char *subnet_cidr; /* its subnet's CIDR; may be NULL */
};

struct maas_ip_address_list {
        struct maas_ip_address *items;
        size_t n;
};

/* One IP range (GET ipranges/): type "dynamic" (DHCP) or "reserved". */
struct maas_ip_range {
        char *type;
        char *start_ip, *end_ip;
        char *subnet_cidr; /* may be NULL */
};

struct maas_ip_range_list {
        struct maas_ip_range *items;
        size_t n;
};

void maas_ip_address_release(struct maas_ip_address *a);
void maas_ip_address_list_release(struct maas_ip_address_list *l);
void maas_ip_range_list_release(struct maas_ip_range_list *l);
MUST_CHECK int maas_ip_address_from_json(const cJSON *o, struct maas_ip_address *ret);
MUST_CHECK int maas_ip_address_list_from_json(const cJSON *arr, struct maas_ip_address_list *ret);
MUST_CHECK int maas_ip_range_list_from_json(const cJSON *arr, struct maas_ip_range_list *ret);

/* POST ipaddresses/?op=reserve (MAAS 2.x/3.x keywords): ip (the address; MAAS finds its
 * subnet) or subnet (a CIDR or specifier: MAAS picks a free address), hostname and mac
 * optional (NULL = not sent). Never repeated (a second reserve after a lost answer would
 * hold a second address). MAAS's refusals keep its text: outside every subnet 400 "No known
 * subnet for IP address: X.", an unknown subnet 400 "Unable to identify subnet: S.", an
 * address in use (a machine's, or reserved) 404 "The IP address X is already in use.", in a
 * dynamic range 403, the subnet full 503. */
struct maas_reserve_ip {
        const char *ip;
        const char *subnet;
        const char *hostname;
        const char *mac;
};

MUST_CHECK int maas_reserve_ip(struct maas_client *mc,
                               const struct maas_reserve_ip *o,
                               struct maas_ip_address *ret,
                               struct maas_error *err);
/* POST ipaddresses/?op=release ip=...: 204. An address that is not the user's reservation
 * is a 400 (CM_EINVAL) "IP address X does not exist, ...". */
MUST_CHECK int maas_release_ip(struct maas_client *mc, const char *ip, struct maas_error *err);
/* GET ipaddresses/ (the caller's user-reserved addresses), ip = one address (NULL = all of
 * them), all = every user's (admins only: 403 otherwise). */
MUST_CHECK int maas_list_ip_addresses(struct maas_client *mc,
                                      const char *ip,
                                      bool all,
                                      struct maas_ip_address_list *ret,
                                      struct maas_error *err);
/* GET ipranges/. */
MUST_CHECK int maas_list_ip_ranges(struct maas_client *mc,
                                   struct maas_ip_range_list *ret,
                                   struct maas_error *err);

/* --- network: subnets and interface links --------------------------------------------------- */

MUST_CHECK int maas_list_subnets(struct maas_client *mc,
                                 struct maas_subnet_list *ret,
                                 struct maas_error *err);
/* GET nodes/<system_id>/interfaces/. */
MUST_CHECK int maas_list_interfaces(struct maas_client *mc,
                                    const char *system_id,
                                    struct maas_interface_list *ret,
                                    struct maas_error *err);

/* A static address on one interface of a machine. MAAS gives a STATIC link its subnet's
 * gateway and DNS servers (it has no per-link ones): gateway and nameservers, when given, must
 * be the subnet's, and are checked before anything is written. */
struct maas_static_ip {
        const char *interface; /* its name; NULL = the boot interface */
        int boot_interface_id; /* the machine's (maas_node.boot_interface_id), when no name */
        const char *ip;        /* the address */
        const char *cidr;      /* the subnet that holds it, found by CIDR in MAAS's subnets */
        const char *gateway;   /* NULL = the subnet's, if it has one */
        const char *const *nameservers; /* each must be one of the subnet's DNS servers */
        size_t n_nameservers;
};

/* Links o->ip on the interface: unlinks its AUTO and DHCP links (what MAAS would address it
 * by otherwise), then link_subnet mode=STATIC on the subnet whose CIDR is o->cidr, with
 * default_gateway when the subnet has a gateway. Several reads and writes: subnets, the
 * interfaces, one unlink per link, the link; link and unlink are never repeated after a 5xx
 * or a lost answer (a second one would act twice). Idempotent as a whole: an interface
 * already holding o->ip STATIC is left as it is. ret (the interface after) may be NULL.
 * Errors as every call; a subnet or an interface MAAS does not have is CM_ENOTFOUND with
 * err->message naming what exists; a gateway or nameserver the subnet does not have is
 * CM_EINVAL naming the subnet's; MAAS's refusals keep its text (an address in use is "IP
 * address is already in use.", which MAAS sends as a 404; outside the subnet a 400 naming
 * ip_address). Only a MAAS administrator may change a machine's interfaces (403 otherwise),
 * and only while the machine is New, Ready, Allocated or Broken (409 otherwise). */
MUST_CHECK int maas_link_static_ip(struct maas_client *mc,
                                   const char *system_id,
                                   const struct maas_static_ip *o,
                                   struct maas_interface *ret,
                                   struct maas_error *err);
/* Undoes maas_link_static_ip: unlinks every STATIC link holding o->ip on the interface, then
 * links AUTO on o->cidr's subnet when the interface has no AUTO link left (MAAS's default:
 * an address assigned on deploy). Nothing to undo is success (no write). ret may be NULL. */
MUST_CHECK int maas_unlink_static_ip(struct maas_client *mc,
                                     const char *system_id,
                                     const struct maas_static_ip *o,
                                     struct maas_interface *ret,
                                     struct maas_error *err);
