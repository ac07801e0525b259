#pragma once
/*
 * maas-sim internals: the emulator's state (inventory + machine state machine), its request
 * representation and the handler tables. One global mutex (struct sim.lock) guards the whole
 * state; every handler takes it for a short, non-blocking critical section and never calls out
 * while holding it. Everything here is private to the maas-sim binary.
 *
 * Files: main.c (flags, daemon, signals), http.c (libmicrohttpd glue, bodies, OAuth, routing),
 * params.c (query/form/multipart/JSON parameter parsing), inventory.c (YAML/JSON inventory ->
 * state), machines.c (machine handlers and JSON), catalogue.c (zones, pools, tags, domains, boot
 * resources, DNS, users, version), network.c (subnets, interface links, addresses),
 * ipaddresses.c (user reservations, dynamic ranges), admin.c (/_sim/ endpoints, faults,
 * request log).
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "compiler.h"

#define SIM_API_PREFIX "/MAAS/api/2.0/"
#define SIM_BODY_MAX   (1024 * 1024)
#define SIM_LOG_SLOTS  4096
#define SIM_MAX_KEYS   8

enum sim_status {
        ST_NEW = 0,
        ST_COMMISSIONING = 1,
        ST_READY = 4,
        ST_RESERVED = 5,
        ST_DEPLOYED = 6,
        ST_BROKEN = 8,
        ST_DEPLOYING = 9,
        ST_ALLOCATED = 10,
        ST_FAILED_DEPLOYMENT = 11,
        ST_RELEASING = 12,
        ST_FAILED_RELEASING = 13,
        ST_DISK_ERASING = 14,
        ST_FAILED_DISK_ERASING = 15,
        ST_COUNT = 23,
};

struct sim_strv {
        char **v; /* owned strings */
        size_t n;
};

/* Ordered multi-map of decoded request parameters (repeated keys kept in order). */
struct sim_params {
        char **keys;
        char **vals;
        size_t n;
        size_t cap;
};

struct sim_zone {
        int id;
        char *name;
        char *description;
};

struct sim_pool {
        int id;
        char *name;
        char *description;
};

struct sim_tag {
        char *name;
        char *comment;
        char *definition;
        char *kernel_opts;
};

struct sim_domain {
        int id;
        char *name;
        int ttl; /* -1 = null */
        bool authoritative;
};

struct sim_boot {
        int id;
        char *type; /* "Synced" | "Uploaded" */
        char *name;
        char *architecture;
        char *subarches;
        char *title;
        char *base_image; /* NULL for synced */
};

/* A link of an interface to a subnet, as MAAS's StaticIPAddress rows: ids unique across the
 * region (sim.next_link_id). */
enum sim_link_mode { LINK_AUTO, LINK_DHCP, LINK_STATIC, LINK_UP };

struct sim_link {
        int id;
        enum sim_link_mode mode;
        ssize_t subnet; /* index into sim.subnets; -1 = none (a bare LINK_UP) */
        char *ip;       /* STATIC: always; AUTO: claimed from deploy until release; else NULL */
};

struct sim_iface {
        int id;
        char *name;
        char *mac;
        char *ip; /* the address MAAS picks for the AUTO link on deploy (when free); may be NULL */
        char *cidr; /* the subnet of the initial AUTO link; may be NULL */
        int vid;    /* the VLAN: its subnet's; -1 = none yet (any subnet may be linked) */
        struct sim_link *links;
        size_t n_links;
};

struct sim_subnet {
        int id;
        char *name;
        char *cidr;       /* IPv4 only */
        char *gateway_ip; /* NULL = none */
        struct sim_strv dns_servers;
        int vid;
        uint32_t net; /* host order */
        unsigned prefix;
        /* its dynamic (DHCP) range, inventory key dynamic_range {start, end} (ipaddresses.c):
         * MAAS never assigns or reserves an address inside it */
        bool has_dynamic;
        uint32_t dynamic_lo, dynamic_hi;
};

/* A user-reserved address (POST ipaddresses/?op=reserve, ipaddresses.c). */
struct sim_reservation {
        int id;
        char *ip;
        char *owner;
        char *hostname; /* as given (MAAS would also make a DNS record of it); may be NULL */
        ssize_t subnet; /* index into sim.subnets */
};

/* What the workload Node of a Deployed machine reports, as its kubelet would (kubelet.c):
 * up, hung (NotReady until the machine is power cycled), or dead (NotReady for good). */
enum sim_kubelet {
        SIM_KUBELET_UP,
        SIM_KUBELET_HUNG,
        SIM_KUBELET_DEAD,
};

struct sim_machine {
        size_t order; /* internal id: list order */
        /* the parts of its JSON that never change, printed once (machine_json.c): the
         * block device (three times in a machine) and hardware_info */
        char *disk_text, *hw_text, *storage_text;
        char *system_id;
        char *hostname;
        char *description;
        char *architecture;
        int cpu_count;
        int cpu_speed;
        int64_t memory;    /* MiB */
        double storage;    /* MB */
        int64_t swap_size; /* bytes; -1 = null */
        enum sim_status status;
        char *status_message;
        char *osystem;
        char *distro_series;
        char *hwe_kernel;
        char *storage_layout; /* "storage_layout=lvm root_size=24G", NULL = MAAS's default */
        char *user_data;
        char *agent_name;
        char *comment;
        char *owner;       /* NULL when not allocated */
        cJSON *owner_data; /* object string -> string */
        bool ephemeral;
        char *power_type;
        char *power_state; /* "on" | "off" | "unknown" | "error" */
        struct sim_strv tags;
        size_t zone, pool, domain; /* indices into the state arrays */
        struct sim_iface *ifaces;
        size_t n_ifaces;
        int gateway_link_v4; /* the link whose subnet's gateway is the default (0 = MAAS picks) */
        double deadline;     /* monotonic seconds when Deploying/Releasing ends */
        enum sim_kubelet kubelet;
        double booted_at;   /* monotonic seconds the OS is up after the last power-on */
        int pod_id;         /* the VM host a composed VM runs on; 0 = not a VM */
        size_t pod_storage; /* its disk's storage pool (index into the host's) */
        int64_t pod_disk;   /* its disk, bytes */
        /* the data on its disks: written by the first deploy after an erase (or ever),
         * cleared by a release that erases, kept by one that does not (tests see it in
         * /_sim/state); NULL when the disks hold none */
        char *disk_marker;
        unsigned deploys, erasures;
        const char *erase_mode; /* "full", "quick" or "secure" while Disk erasing */
};

/* A VM host (MAAS "pod", pods.c): capacity, over-commit ratios and storage pools; what its
 * VMs use is summed from the machines whose pod_id is its id. */
struct sim_storage_pool {
        char *name;
        char *type;
        int64_t total; /* bytes */
        bool is_default;
};

struct sim_pod {
        int id;
        char *name;
        char *type; /* "lxd" */
        size_t zone, pool;
        struct sim_strv tags;
        int cores;
        int64_t memory; /* MiB */
        double cpu_ratio, memory_ratio;
        struct sim_storage_pool *storage;
        size_t n_storage;
        char *host; /* the system_id of the machine it runs on, or NULL */
};

struct sim_dns {
        int id;
        char *name;
        size_t domain;
        int ttl; /* -1 = null */
        struct sim_strv ips;
};

struct sim_key {
        char *consumer;
        char *token;
        char *secret;
        const char *user;
};

struct sim_log_entry {
        char method[8];
        char path[160];
        char op[40];
        char user[32];       /* the authenticated user, "" when none */
        char agent_name[64]; /* the request's agent_name parameter (allocate), "" when none */
        char params[512];    /* the form as "k=v&k=v", user_data left out; cut at the size */
        char ids[128];       /* its id= parameters (a filtered list), whole ones comma-joined */
        unsigned status;
};

struct sim_rate {
        char *op;
        double rate;
};

struct sim_faults {
        struct sim_rate *rates; /* random errors per op key ("*" = all) */
        size_t n_rates;
        unsigned error_status; /* status of injected errors (500) */
        unsigned latency_ms;
        unsigned unavailable;        /* next N matching requests get 503 (or 429) + Retry-After */
        unsigned unavailable_status; /* 503 or 429 */
        unsigned retry_after;
        char *unavailable_op; /* NULL = any */
        unsigned fail_next;   /* next N matching requests get fail_status */
        unsigned fail_after;  /* ... once this many more matching ones have passed */
        unsigned fail_status;
        char *fail_op; /* NULL = any */
        struct sim_strv fail_deploy;
        struct sim_strv bmc_unknown;
        unsigned compose_delay_ms; /* a compose answers this late (the VM exists at once) */
};

struct sim {
        pthread_mutex_t lock;
        struct sim_zone *zones;
        size_t n_zones;
        struct sim_pool *pools;
        size_t n_pools;
        struct sim_tag *tags;
        size_t n_tags;
        struct sim_domain *domains;
        size_t n_domains;
        struct sim_boot *boots;
        size_t n_boots;
        struct sim_machine *machines;
        size_t n_machines;
        /* machines' indices sorted by system_id, for sim_find_machine; rebuilt on first use
         * after a machine was added or removed (by_id_stale) */
        size_t *by_id;
        bool by_id_stale;
        /* machines' indices by allocation cost (cpu_count + memory/1024, then index), for
         * allocate's first fit; rebuilt on first use after an add or remove */
        size_t *by_cost;
        bool by_cost_stale;
        struct sim_dns *dns;
        size_t n_dns;
        struct sim_pod *pods;
        size_t n_pods;
        unsigned next_vm;          /* composed VMs' system ids */
        double commission_seconds; /* a composed VM commissions this long */
        struct sim_subnet *subnets;
        size_t n_subnets;
        int next_link_id;
        struct sim_reservation *reservations;
        size_t n_reservations;
        int next_reservation_id;
        bool static_linked; /* a STATIC link was ever made: AUTO claims must check for conflicts */
        int next_dns_id;
        struct sim_key keys[SIM_MAX_KEYS];
        size_t n_keys;
        double deploy_seconds;
        double release_seconds;
        double boot_seconds; /* power-on to the kubelet posting Ready */
        struct sim_faults faults;
        struct sim_log_entry *log; /* ring of SIM_LOG_SLOTS */
        uint64_t log_count;        /* total entries written */
        uint64_t reads, writes;    /* API requests by kind (GET vs the rest), never capped */
        int64_t rate_second;       /* the CLOCK_MONOTONIC second rate_count counts */
        uint64_t rate_count;       /* requests in rate_second */
        uint64_t peak_rps;         /* the largest rate_count of any whole second */
        uint64_t rng;
        const char *scheme; /* "http" | "https" */
};

/* A request as the handlers see it. */
struct sim_req {
        const char *method;
        const char *path; /* full path, e.g. /MAAS/api/2.0/machines/abc/ */
        const char *arg;  /* the '*' path segment (system_id, id, name) or NULL */
        const char *arg2; /* the second '*' segment (nodes/<sid>/interfaces/<id>/) or NULL */
        const char *op;   /* NULL when absent or empty */
        const char *user; /* authenticated user or NULL */
        struct sim_params query;
        struct sim_params form;
};

struct sim_resp {
        unsigned status;
        char *body;        /* owned */
        const char *ctype; /* static */
        unsigned retry_after;
        unsigned delay_ms; /* the answer goes out this much later (outside the lock) */
};

typedef void sim_handler_fn(struct sim *s, const struct sim_req *rq, struct sim_resp *rp);

/* One (method, op) pair a route answers. op NULL = the plain CRUD method. */
struct sim_op {
        const char *method;
        const char *op;
        sim_handler_fn *fn;
};

/* --- params.c --- */
void sim_params_add(struct sim_params *p, const char *k, size_t kl, const char *v, size_t vl);
void sim_params_release(struct sim_params *p);
/* Last value of key k, or NULL. */
const char *sim_params_get(const struct sim_params *p, const char *k);
/* Parses a urlencoded string into p (appending). */
void sim_params_parse_urlencoded(struct sim_params *p, const char *s, size_t len);
/* Parses a body by content type; CM_EPARSE on a malformed multipart or JSON body. */
int sim_params_parse_body(struct sim_params *p, const char *ctype, const char *body, size_t len);
/* Decodes %XX and '+' in place; returns the new length. */
size_t sim_url_decode(char *s, size_t len);
struct buf;
/* Appends to a message buffer; text past the buffer's cap is dropped (messages only). */
void sim_bprintf(struct buf *b, const char *fmt, ...) PRINTF_LIKE(2, 3);
/* formencode StringBool: CM_EINVAL if not a boolean word. */
int sim_parse_bool(const char *s, bool *ret);

/* --- state helpers (inventory.c) --- */
MUST_CHECK int sim_load_inventory(struct sim *s, const char *file, char **ret_err);
/* Adds one machine / pool described by a JSON object (as in the inventory file). */
MUST_CHECK int sim_add_machine_json(struct sim *s, const cJSON *o, char **ret_err);
MUST_CHECK int sim_add_pool_json(struct sim *s, const cJSON *o, char **ret_err);
void sim_release(struct sim *s);
double sim_now(void);
const char *sim_status_name(enum sim_status st);
/* Applies time-driven transitions (Deploying -> Deployed, Releasing -> Ready). Lock held. */
void sim_machine_tick(struct sim *s, struct sim_machine *m);
/* Releasing -> Ready: clears owner, OS fields, owner_data, agent_name; powers off. */
void sim_machine_finish_release(struct sim_machine *m);
/* Replaces *dst with a copy of src (NULL allowed). */
void sim_set(char **dst, const char *src);
struct sim_machine *sim_find_machine(struct sim *s, const char *system_id);
/* Deletes machine m from the inventory (pointers into s->machines are invalid after). */
void sim_remove_machine(struct sim *s, struct sim_machine *m);
ssize_t sim_find_zone(const struct sim *s, const char *name);
ssize_t sim_find_pool(const struct sim *s, const char *id_or_name);
ssize_t sim_find_tag(const struct sim *s, const char *name);
ssize_t sim_find_domain(const struct sim *s, const char *id_or_name);
bool sim_strv_has(const struct sim_strv *v, const char *s);
void sim_strv_add(struct sim_strv *v, const char *s);
/* Removes s (every copy); true when it was there. */
bool sim_strv_remove(struct sim_strv *v, const char *s);
/* Adds a tag unless one of that name exists (the inventory's, POST tags/). */
void sim_add_tag(struct sim *s, const char *name, const char *comment);
void sim_strv_release(struct sim_strv *v);

/* --- kubelet.c (lock held) --- */
/* A power-on of an off machine boots it: Ready boot_seconds later, a hang cleared. */
void sim_kubelet_powered_on(struct sim *s, struct sim_machine *m);
/* GET /_sim/kubelets: {"<system_id>": {"ready": bool, "kubelet": "up|hung|dead"}} for the
 * Deployed machines. */
cJSON *sim_kubelets_json(const struct sim *s);
/* POST /_sim/kubelets {"<system_id>": "up" | "hung" | "dead"}. */
MUST_CHECK int sim_kubelets_apply(struct sim *s, const cJSON *doc, char **ret_err);

/* --- responses (http.c) --- */
/* 200 with the elements appended to array ("[" and "," between them, each element's JSON);
 * closes it ("]"; "[]" when empty) and takes its bytes. */
void sim_reply_raw(struct sim_resp *rp, struct buf *array);
void sim_reply_json(struct sim_resp *rp, cJSON *doc); /* takes doc */
void sim_reply_text(struct sim_resp *rp, unsigned status, const char *fmt, ...) PRINTF_LIKE(3, 4);
/* 400 JSON field map {"field": ["message"]}. */
void sim_reply_field_error(struct sim_resp *rp, const char *field, const char *fmt, ...)
        PRINTF_LIKE(3, 4);
/* 400 Unrecognised signature. */
void sim_reply_bad_op(struct sim_resp *rp, const struct sim_req *rq);
/* Dispatches one fully-read request; fills rp. Thread-safe. */
void sim_handle(struct sim *s, struct sim_req *rq, const char *auth, struct sim_resp *rp);

/* --- JSON builders and handlers --- */
cJSON *sim_zone_json(const struct sim *s, size_t i);
cJSON *sim_pool_json(const struct sim *s, size_t i);
cJSON *sim_domain_json(const struct sim *s, size_t i);
cJSON *sim_tag_json(const struct sim *s, size_t i);
cJSON *sim_machine_json(struct sim *s, struct sim_machine *m);

/* machines_alloc.c */
void sim_machines_allocate(struct sim *s, const struct sim_req *rq, struct sim_resp *rp);
void sim_machine_deploy(struct sim *s, const struct sim_req *rq, struct sim_resp *rp);
/* storage.c */
void sim_machine_set_storage_layout(struct sim *s, const struct sim_req *rq, struct sim_resp *rp);
/* MAAS's storage constraint: false when malformed; the first (root) size in GB, how many
 * constraints, whether any names disk tags. */
bool sim_storage_parse(const char *v, double *ret_root_gb, size_t *ret_n, bool *ret_tags);
bool sim_storage_fits(const struct sim_machine *m, double root_gb, size_t n, bool tags);
/* The deploy's hwe_kernel is available for os/rel on m's architecture; else fills rp (400). */
bool sim_kernel_ok(const struct sim *s,
                   const struct sim_machine *m,
                   const char *os,
                   const char *rel,
                   const char *kernel,
                   struct sim_resp *rp);
/* Collects the values of key, each split on commas and whitespace (machines.c). */
void sim_split_tags(const struct sim_params *p, const char *key, struct sim_strv *out);
bool sim_check_tags(const struct sim *s,
                    const struct sim_strv *tags,
                    const char *field,
                    struct sim_resp *rp);

/* Route tables: each returns the ops for one resource. */
extern const struct sim_op sim_ops_machines[];
extern const struct sim_op sim_ops_machine[];
extern const struct sim_op sim_ops_version[];
extern const struct sim_op sim_ops_users[];
extern const struct sim_op sim_ops_zones[];
extern const struct sim_op sim_ops_zone[];
extern const struct sim_op sim_ops_pools[];
extern const struct sim_op sim_ops_pool[];
extern const struct sim_op sim_ops_tags[];
extern const struct sim_op sim_ops_tag[];
extern const struct sim_op sim_ops_domains[];
extern const struct sim_op sim_ops_domain[];
extern const struct sim_op sim_ops_boots[];
extern const struct sim_op sim_ops_boot[];
/* ipaddresses op=reserve with a hostname ("label" in the default domain, or "label.domain"):
 * ip joins that DNS resource, made when there is none (CM_ENOTFOUND: no such domain). */
int sim_dns_link_reserved(struct sim *s, const char *hostname, const char *ip);
/* A released ip leaves every DNS resource; those it leaves empty are deleted (MAAS's
 * post_delete_clean_up_dns). */
void sim_dns_unlink_released(struct sim *s, const char *ip);
extern const struct sim_op sim_ops_dnsresources[];
extern const struct sim_op sim_ops_dnsresource[];
extern const struct sim_op sim_ops_subnets[];
extern const struct sim_op sim_ops_subnet[];
extern const struct sim_op sim_ops_interfaces[];
extern const struct sim_op sim_ops_interface[];
extern const struct sim_op sim_ops_pods[];
extern const struct sim_op sim_ops_pod[];

/* --- pods.c: VM hosts (lock held) --- */
/* Adds a VM host (inventory key "vm_hosts"; see pods.c). */
MUST_CHECK int sim_add_pod_json(struct sim *s, const cJSON *o, char **ret_err);
void sim_pods_release(struct sim *s);
/* GET /_sim/pods: the hosts as GET pods/ shows them, each with its VMs' system ids. */
cJSON *sim_pods_json(struct sim *s);

extern const struct sim_op sim_ops_ipaddresses[];
extern const struct sim_op sim_ops_ipranges[];

/* --- ipaddresses.c: user reservations and dynamic ranges (lock held) --- */
/* Reads a subnet's inventory key dynamic_range {start, end} into sn; CM_EINVAL with
 * *ret_err when it is malformed or outside the subnet. */
MUST_CHECK int sim_subnet_dynamic_json(struct sim_subnet *sn, const cJSON *o, char **ret_err);
/* Address a (host order) is reserved by some user, or inside a subnet's dynamic range:
 * MAAS hands it to no machine. */
bool sim_ip_reserved(const struct sim *s, uint32_t a);
bool sim_ip_in_dynamic(const struct sim *s, uint32_t a);
void sim_reservations_release(struct sim *s);

/* --- network.c: subnets, interface links, addresses (lock held) --- */
bool sim_parse_v4(const char *s, uint32_t *ret);
char *sim_format_v4(uint32_t a); /* malloc'd */
/* The subnet holding a, or -1. */
ssize_t sim_subnet_of(const struct sim *s, uint32_t a);
/* The machine whose link holds a, or NULL. */
const struct sim_machine *sim_ip_machine(const struct sim *s, uint32_t a);
/* The first address of subnet i that nothing holds (see free_address), or NULL. */
char *sim_free_address(const struct sim *s, size_t i);
/* Adds a subnet {cidr, name, gateway_ip, dns_servers, vid} (inventory key "subnets"). */
MUST_CHECK int sim_add_subnet_json(struct sim *s, const cJSON *o, char **ret_err);
/* The subnet whose CIDR is cidr, creating it (no gateway) when absent; -1 for a bad CIDR. */
ssize_t sim_subnet_for_cidr(struct sim *s, const char *cidr);
/* Gives a new interface its initial AUTO link (when it has a subnet). */
void sim_iface_init_links(struct sim *s, struct sim_iface *f);
void sim_iface_release_links(struct sim_iface *f);
/* Commissioning: MAAS clears the links and sets the initial ones again (AUTO per subnet). */
void sim_machine_reset_links(struct sim *s, struct sim_machine *m);
/* Deploy starts: every AUTO link claims an address (the interface's own when free). */
void sim_machine_claim_auto(struct sim *s, struct sim_machine *m);
/* Release ends: AUTO links give their addresses back; STATIC links stay (as in MAAS). */
void sim_machine_release_auto(struct sim_machine *m);
void sim_subnets_release(struct sim *s);
cJSON *sim_iface_json(const struct sim *s, const struct sim_machine *m, const struct sim_iface *f);
/* The machine's addresses (ip_addresses) and its default_gateways object. */
cJSON *sim_machine_ips_json(const struct sim_machine *m);
cJSON *sim_default_gateways_json(const struct sim *s, const struct sim_machine *m);

/* --- admin.c --- */
/* Handles /_sim/...; lock not held. */
void sim_admin(struct sim *s,
               const char *method,
               const char *path,
               const char *body,
               size_t body_len,
               struct sim_resp *rp);
/* Applies a faults JSON document (also used by flags). */
MUST_CHECK int sim_faults_apply(struct sim *s, const cJSON *doc, char **ret_err);
void sim_faults_release(struct sim_faults *f);
/* Decides an injected failure for op key; returns 0 or the status to answer. Lock held. */
unsigned sim_fault_pick(struct sim *s, const char *opkey, unsigned *ret_retry_after);
void sim_log_request(struct sim *s, const struct sim_req *rq, unsigned status);
