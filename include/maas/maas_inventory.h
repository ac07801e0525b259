#pragma once
/*
 * maas_inventory: a cache of what MAAS has (zones, resource pools, tags, DNS domains, boot
 * resources and a compact summary of every machine), shared by the admission webhooks so
 * they can tell at `kubectl apply` whether a template could ever be satisfied (beyond.md B1).
 *
 * Refresh: a background thread lists the seven collections (seven GET calls, never one per
 * machine: zones, pools, tags, domains, boot resources, subnets, machines zone by zone) every
 * interval, and sooner after a failure. A reader that misses a name may ask
 * for one synchronous refresh (maas_inventory_refresh_on_miss): it waits at most
 * miss_wait_ms (2 s), concurrent askers share one refresh, and such refreshes happen at most
 * once per miss_min_gap_ms (10 s).
 *
 * Snapshots: each refresh builds a new immutable, reference-counted snapshot and publishes
 * it; readers acquire the current one (a counter increment under a short lock) and read it
 * without any lock until they release it. Nothing in a snapshot changes after publication.
 *
 * Threads: every function may be called from any thread, except maas_inventory_free (one
 * thread, after every reader is done). The MAAS client and its transport belong to the
 * refresh thread (or, with opts.no_thread, to whichever thread calls maas_inventory_refresh).
 *
 * VM hosts: once maas_inventory_want_pods was called (admission saw spec.lxd.enabled), every
 * refresh also lists MAAS's VM hosts (GET pods/; docs/lxd.md); a failure of that list alone
 * leaves the rest of the snapshot good and says so in its pods_state.
 *
 * Metrics (when opts.metrics is set): capmaas_maas_inventory_age_seconds (gauge, -1 until the
 * first successful refresh), capmaas_maas_inventory_refreshes_total,
 * capmaas_maas_inventory_refresh_errors_total{reason} and
 * capmaas_admission_maas_checks_skipped_total{reason}.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "compiler.h"
#include "http_transport.h"
#include "maas_client.h"
#include "maas_pods.h"

struct metrics;
struct maas_inventory;
struct token_bucket;

/* Named collections of a snapshot. */
enum maas_inv_kind {
        MAAS_INV_ZONE,
        MAAS_INV_POOL,
        MAAS_INV_TAG,
        MAAS_INV_DOMAIN,
        MAAS_INV_IMAGE, /* boot resource names as MAAS lists them */
        MAAS_INV_KIND_COUNT,
};

/* One machine, compactly: zone, pool and tags are indices into the snapshot's sorted name
 * arrays (-1 / dropped when MAAS named something it did not list). */
struct maas_inv_machine {
        char *system_id;
        int status; /* maas-api.md §5 code; 4 = Ready */
        int cpu_count;
        int64_t memory_mib;
        char *architecture; /* as MAAS names it, "amd64/generic"; "" when unknown */
        double storage_mb;  /* MAAS's storage: all its disks, MB (10^6 bytes) */
        int32_t zone, pool;
        uint64_t tag_mask; /* bit i set = carries tag i, for the first 64 tags */
        uint32_t *tags;
        size_t n_tags;
};

struct maas_inv_names {
        char **v; /* sorted (strcmp) */
        size_t n;
};

/* A MAAS subnet, as GET subnets/ listed it. */
struct maas_inv_subnet {
        char *cidr; /* as MAAS wrote it */
        char *name;
        char *gateway_ip; /* NULL when none */
};

/* A user-reserved address (GET ipaddresses/: capmaas's user's, mine; with all=true, every
 * user's when capmaas's user is an administrator): canonical text. */
struct maas_inv_reserved {
        char *ip;
        char *owner; /* may be NULL */
        bool mine;   /* reserved by capmaas's MAAS user */
};

/* An IP range of a subnet (GET ipranges/). */
struct maas_inv_range {
        char *type; /* "dynamic" | "reserved" */
        char *start_ip, *end_ip;
};

/* An address some machine holds (its ip_addresses: MAAS lists a STATIC link's address there
 * from the link on, an AUTO one from deploy): canonical text, sorted by it; the machine as
 * an index into machines. */
struct maas_inv_ip {
        char *ip;
        size_t machine;
};

/* A boot resource as GET boot-resources/ listed it: what admission checks an architecture and
 * a kernel against (docs/deploy-options.md). */
struct maas_inv_boot {
        char *name;         /* "ubuntu/jammy", "u-2204-0-k-1264-0" */
        char *architecture; /* "amd64/ga-22.04" */
        char *subarches;    /* "generic,hwe-22.04,ga-22.04"; "" */
        char *base_image;   /* an uploaded image's OS, or NULL */
};

/* What a snapshot knows of MAAS's VM hosts. */
enum maas_inv_pods {
        MAAS_INV_PODS_UNKNOWN, /* not listed (nobody asked yet) */
        MAAS_INV_PODS_OK,
        MAAS_INV_PODS_NONE,   /* MAAS has no VM host API (3.8 and later: 410; or 404) */
        MAAS_INV_PODS_FAILED, /* the list failed this refresh */
};

struct maas_inventory_snapshot {
        _Atomic unsigned refs;
        uint64_t taken_ms; /* clock now_ms() when the refresh finished */
        uint64_t gen;      /* unique per snapshot in the process (memo key) */
        struct maas_inv_names names[MAAS_INV_KIND_COUNT];
        size_t *zone_machines; /* per names[MAAS_INV_ZONE] entry: machines in that zone */
        struct maas_inv_machine *machines;
        size_t n_machines;
        /* false when MAAS answered subnets/ with 404 (nothing is known about subnets) */
        bool has_subnets;
        struct maas_inv_subnet *subnets; /* MAAS's order */
        size_t n_subnets;
        struct maas_inv_ip *ips;
        size_t n_ips;
        struct maas_inv_boot *boots; /* MAAS's order */
        size_t n_boots;
        enum maas_inv_pods pods_state;
        struct maas_pod_list pods; /* MAAS_INV_PODS_OK: the VM hosts as listed */
        /* user reservations and IP ranges (docs/endpoints.md); empty when MAAS did not list
         * them (404, or 403 for every user's reservations) */
        struct maas_inv_reserved *reserved;
        size_t n_reserved;
        struct maas_inv_range *ranges;
        size_t n_ranges;
};

/* Why the MAAS checks cannot run now (the label of ..._checks_skipped_total). */
enum maas_inv_state {
        MAAS_INV_OK,
        MAAS_INV_NOT_LOADED,   /* no successful refresh yet */
        MAAS_INV_UNREACHABLE,  /* the last refresh failed: transport error, timeout or 5xx */
        MAAS_INV_UNAUTHORIZED, /* the last refresh got 401 or 403 */
        MAAS_INV_FAILED,       /* the last refresh failed otherwise (malformed answer) */
        MAAS_INV_STALE,        /* the snapshot is older than ten intervals */
        MAAS_INV_STATE_COUNT,
};

/* "ok", "not_loaded", "unreachable", "unauthorized", "failed", "stale". */
const char *maas_inv_state_name(enum maas_inv_state s);

struct maas_inventory_opts {
        const struct maas_config *cfg;   /* copied */
        struct http_transport_opts http; /* copied (ca_file duplicated) */
        uint64_t interval_ms;            /* 0 = 60 s */
        uint64_t miss_wait_ms;           /* 0 = 2 s */
        uint64_t miss_min_gap_ms;        /* 0 = 10 s */
        uint64_t retry_ms;               /* after a failure; 0 = min(interval, 5 s) */
        uint32_t call_timeout_ms;        /* per MAAS call; 0 = 10 s */
        struct token_bucket *budget;     /* shared MAAS request budget, borrowed; NULL = none */
        /* borrowed, may be NULL; it gets a collector that reads the inventory, so render it
         * no more after maas_inventory_free */
        struct metrics *metrics;
        const struct clock_ops *clock; /* NULL = system clock */
        bool no_thread; /* tests: no background thread; refreshes run in maas_inventory_refresh */
        /* tests: a transport to use instead of a libcurl one (borrowed; with no_thread only,
         * since a transport belongs to one thread) */
        struct http_transport *transport;
};

/* Creates the inventory and starts its refresh thread (the first refresh starts at once).
 * CM_EINVAL for missing credentials; a transport that cannot be made (an unreadable CA file)
 * shows as a failed refresh. */
MUST_CHECK int maas_inventory_new(const struct maas_inventory_opts *o, struct maas_inventory **ret);
/* Stops the thread (an in-flight MAAS call finishes first, bounded by call_timeout_ms) and
 * frees everything; snapshots still acquired stay valid until released. NULL-safe. */
struct maas_inventory *maas_inventory_free(struct maas_inventory *inv);

/* Runs one refresh on the calling thread (tests with no_thread). Returns its result. */
MUST_CHECK int maas_inventory_refresh(struct maas_inventory *inv);

/* The current snapshot (NULL before the first success) with a reference the caller drops
 * with maas_inventory_snapshot_release, and the state of the checks: MAAS_INV_OK when the
 * snapshot may be used for verdicts. *ret_detail (optional, malloc'd) explains a non-OK
 * state for people ("connection refused", "inventory is 700 s old"). */
struct maas_inventory_snapshot *maas_inventory_acquire(struct maas_inventory *inv,
                                                       enum maas_inv_state *ret_state,
                                                       char **ret_detail);
void maas_inventory_snapshot_release(struct maas_inventory_snapshot *s);

enum maas_inv_miss {
        MAAS_INV_MISS_REFRESHED, /* a refresh that started after the call succeeded */
        MAAS_INV_MISS_LIMITED,   /* the last miss refresh is too recent: none was made */
        MAAS_INV_MISS_FAILED,    /* the refresh failed (see maas_inventory_acquire) */
        MAAS_INV_MISS_TIMEOUT,   /* no refresh finished within miss_wait_ms */
};

/* A name was missing: asks for a refresh and waits for one that started after this call,
 * at most miss_wait_ms. Concurrent callers share it; when the last miss refresh is less
 * than miss_min_gap_ms old, returns MAAS_INV_MISS_LIMITED at once. */
enum maas_inv_miss maas_inventory_refresh_on_miss(struct maas_inventory *inv);
/* From now on every refresh lists the VM hosts too (idempotent; any thread). */
void maas_inventory_want_pods(struct maas_inventory *inv);

/* Counts a skipped check in capmaas_admission_maas_checks_skipped_total{reason}. */
void maas_inventory_note_skipped(struct maas_inventory *inv, enum maas_inv_state reason);

/* Called on the refresh thread after a successful refresh published snap (borrowed: take
 * a reference with maas_inventory_acquire to keep one). It should only hand work to other
 * threads (queue keys); it must not call maas_inventory_set_listener or refresh. */
typedef void maas_inventory_listener_fn(void *ud, const struct maas_inventory_snapshot *snap);
/* Sets the one listener (fn NULL removes it). When this returns, no call of the previous
 * listener is running or will start. Any thread except a listener's own call. */
void maas_inventory_set_listener(struct maas_inventory *inv,
                                 maas_inventory_listener_fn *fn,
                                 void *ud);

/* Always true: a readiness check that never fails but names itself in /readyz?verbose;
 * state changes are logged. Matches health_check_fn. */
bool maas_inventory_health(void *ud, char **ret_reason);

/* --- snapshot queries (pure; any thread holding a reference) ---------------------------- */

/* Index of name in the sorted kind array, or -1. */
long maas_inv_find(const struct maas_inventory_snapshot *s, enum maas_inv_kind k, const char *name);
/* True when the MaasMachine image exists among the boot resources, with MAAS's naming
 * rules: "custom/x" and a bare "x" match an uploaded "x" (or "custom/x"); "os/series"
 * matches a resource named "os/series". */
bool maas_inv_has_image(const struct maas_inventory_snapshot *s, const char *image);

struct maas_inv_query {
        const char *pool; /* NULL = any */
        const char *zone; /* NULL = any */
        const char *const *tags;
        size_t n_tags;
        int64_t min_cpu;
        int64_t min_memory_mib;
};

struct maas_inv_fit {
        size_t candidates;           /* machines in that pool and zone with all the tags */
        int max_cpu;                 /* best cpu_count among the candidates */
        int64_t max_memory_mib;      /* best memory among the candidates */
        int64_t max_memory_with_cpu; /* best memory among candidates with >= min_cpu */
        size_t fit;                  /* candidates with >= min_cpu and >= min_memory */
        size_t fit_free;             /* ... that are Ready now */
        size_t fit_in_use;           /* ... that are allocated, deploying, deployed or releasing */
        /* The worst a fitting machine can be, for autoscaling from zero (0 when fit is 0): the
         * fewest cores and the least memory among the fitting machines, and their
         * architecture when they all share one (else NULL; a pointer into the snapshot). */
        int min_fit_cpu;
        int64_t min_fit_memory_mib;
        const char *fit_architecture;
};

/* Scans the machines for q (names MAAS does not know simply match nothing). Each thread
 * remembers its last few answers per snapshot, so a template applied again costs no scan. */
void maas_inv_fit(const struct maas_inventory_snapshot *s,
                  const struct maas_inv_query *q,
                  struct maas_inv_fit *ret);

/* The zones that hold at least one machine, in name order: *ret (malloc'd array of
 * pointers into the snapshot's names; NULL when none) and the count. */
size_t maas_inv_zones_with_machines(const struct maas_inventory_snapshot *s, const char ***ret);

/* The subnet of that CIDR (equal network and prefix however either is spelt), or -1. */
long maas_inv_find_subnet(const struct maas_inventory_snapshot *s, const char *cidr);
/* The machine holding address ip (any spelling), or NULL. */
const struct maas_inv_machine *maas_inv_ip_holder(const struct maas_inventory_snapshot *s,
                                                  const char *ip);

/* The reservation of address ip (any spelling), or NULL. */
const struct maas_inv_reserved *maas_inv_reservation(const struct maas_inventory_snapshot *s,
                                                     const char *ip);

/* What MAAS listed: the collections a snapshot is built from. */
struct maas_inventory_lists {
        struct maas_named_list zones, pools, tags, domains;
        struct maas_boot_resource_list images;
        struct maas_subnet_list subnets;
        bool no_subnets; /* subnets/ answered 404 */
        /* GET ipaddresses/ (mine) and ?all=true (everyone's; empty when refused) */
        struct maas_ip_address_list reserved_mine, reserved_all;
        struct maas_ip_range_list ranges;
        struct maas_node_list machines;
        enum maas_inv_pods pods_state;
        struct maas_pod_list pods;
};

/* Builds a snapshot from listed collections (the refresh does this; tests too). The lists
 * are only read. taken_ms is stored as given. */
struct maas_inventory_snapshot *maas_inventory_snapshot_build(const struct maas_inventory_lists *l,
                                                              uint64_t taken_ms);
