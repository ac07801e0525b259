#pragma once
/*
 * maas_pods: MAAS's VM hosts ("pods", MAAS 2.5 to 3.7; MAAS 3.8 answers 410 Gone) as a client
 * sees them, the choice of the host a virtual machine is composed on, and the calls: the
 * list (GET pods/), compose (POST pods/<id>/?op=compose) and the deletion of a composed
 * machine (DELETE machines/<system_id>/, which MAAS turns into a decompose on the host: a
 * released VM would stay on the host, holding its cores, memory and disk).
 *
 * Threads and ownership: the calls belong to the client's thread (maas_client.h); the
 * decoder and the chooser are pure functions any thread may call. Every list and result
 * belongs to the caller and is freed with its *_release function.
 *
 * Capacity (MAAS's rules, src/maasserver/models/bmc.py check_over_commit_ratios): a host
 * fits cores when used + wanted <= total * cpu_over_commit_ratio, memory likewise with
 * memory_over_commit_ratio; a disk fits a storage pool when used + wanted <= total (no
 * over-commit on storage).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "compiler.h"
#include "maas_client.h"

struct maas_storage_pool {
        char *name;
        int64_t total, used; /* bytes */
        bool is_default;
};

struct maas_pod {
        int id;
        char *name;
        char *type;           /* "lxd", "virsh" */
        char *zone, *pool;    /* names */
        int zone_id, pool_id; /* -1 when MAAS sent none */
        char *host_system_id; /* the machine the host runs on; NULL when MAAS knows none */
        struct maas_strv tags;
        struct maas_strv architectures; /* "amd64/generic", ... */
        int64_t cores_total, cores_used;
        int64_t memory_total, memory_used; /* MiB */
        double cpu_ratio, memory_ratio;    /* over-commit; 1.0 when MAAS sent none */
        struct maas_storage_pool *storage_pools;
        size_t n_storage_pools;
};

struct maas_pod_list {
        struct maas_pod *items;
        size_t n;
};

void maas_pod_release(struct maas_pod *p);
void maas_pod_list_release(struct maas_pod_list *l);
/* A deep copy of src into *dst (the inventory's snapshot keeps its own). */
void maas_pod_list_copy(const struct maas_pod_list *src, struct maas_pod_list *dst);

/* Decodes GET pods/'s array. CM_EPARSE when it is not an array of hosts with id and name. */
MUST_CHECK int maas_pod_list_from_json(const cJSON *arr, struct maas_pod_list *ret);

/* --- the choice of a host ----------------------------------------------------------------- */

struct maas_vm_request {
        int64_t cores;           /* >= 1 */
        int64_t memory_mib;      /* >= 1 */
        int64_t disk_gb;         /* >= 1; GB of 10^9 bytes, as MAAS's storage constraint */
        const char *zone;        /* NULL = any */
        const char *pool;        /* NULL = any */
        const char *const *tags; /* the host must carry every one */
        size_t n_tags;
        const char *const *not_tags; /* ... and none of these */
        size_t n_not_tags;
        const char *arch;           /* NULL = any; else one of the host's ("amd64" or "amd64/x") */
        const char *host_system_id; /* NULL = any; else the host running on this machine */
        const char *storage_pool;   /* NULL = the host's default pool */
        /* how many of the cluster's VMs each host already holds: counts[i] for hosts[i]
         * (NULL = none anywhere) */
        const size_t *counts;
};

/* What a host lacks for the request (bits). */
enum maas_pod_lack {
        MAAS_POD_LACKS_CORES = 1,
        MAAS_POD_LACKS_MEMORY = 2,
        MAAS_POD_LACKS_STORAGE = 4,
};

struct maas_pod_choice {
        ssize_t chosen;       /* index into the list; -1 when no host fits */
        const char *pool;     /* the chosen host's storage pool for the disk (borrowed) */
        const char *arch;     /* the chosen host's architecture matching rq->arch (borrowed) */
        size_t candidates;    /* hosts in the zone and pool carrying every tag */
        ssize_t closest;      /* when none fits: the candidate lacking the least; -1 if none */
        unsigned lacks;       /* the closest's MAAS_POD_LACKS_* */
        int64_t free_cores;   /* the closest's free cores (over-commit applied) */
        int64_t free_memory;  /* MiB, likewise */
        int64_t free_disk_gb; /* the closest's free GB in the storage pool it would use */
};

/* The host for the request: among the hosts in the zone and pool carrying every tag, those
 * (none excluded, the architecture and the host machine asked for, when asked for) with the
 * cores, memory and storage free; of those the one holding the fewest of the
 * cluster's VMs, then the most free cores and memory relative to the request, then the
 * lowest id (the same inputs always give the same host). Nothing fits: chosen -1 and the
 * closest candidate (fewest missing resources, then the smallest shortfall) with what it
 * lacks. Pure. */
void maas_pod_choose(const struct maas_pod_list *hosts,
                     const struct maas_vm_request *rq,
                     struct maas_pod_choice *ret);

/* "cores (2 free, 4 wanted), memory (1024 MiB free, 4096 wanted)" for a choice with a
 * closest host. New string. */
char *maas_pod_lacks_text(const struct maas_pod_choice *ch, const struct maas_vm_request *rq);

/* --- calls ---------------------------------------------------------------------------------- */

/* GET pods/. CM_EUNSUPPORTED (410) on a MAAS without VM hosts (3.8 and later). */
MUST_CHECK int maas_list_pods(struct maas_client *mc,
                              struct maas_pod_list *ret,
                              struct maas_error *err);

struct maas_compose_opts {
        int64_t cores;
        int64_t memory_mib;
        int64_t disk_gb;
        const char *storage_pool; /* NULL = the host's default */
        const char *architecture; /* one of the host's ("amd64/generic"); NULL = its first */
        const char *hostname;     /* required: how the VM is found again */
        int zone_id, pool_id;     /* < 0 = the host's */
};

/* POST pods/<id>/?op=compose with cores, memory, storage "root:<GB>(<pool>)", hostname,
 * architecture and zone/pool ids. Never repeated after a 5xx or a lost answer: the caller finds the
 * VM by its hostname. *ret_system_id: the new machine's (new string). MAAS's refusals keep its
 * text: no capacity is a 503 ("Unable to compose KVM instance in 'x'. CPU overcommit ratio is
 * ..."), a taken hostname a 400 on "hostname". */
MUST_CHECK int maas_compose(struct maas_client *mc,
                            int pod_id,
                            const struct maas_compose_opts *o,
                            char **ret_system_id,
                            struct maas_error *err);

/* DELETE machines/<system_id>/ (a VM: decomposed on its host). 404 is CM_ENOTFOUND. */
MUST_CHECK int maas_delete_machine(struct maas_client *mc,
                                   const char *system_id,
                                   struct maas_error *err);
