#pragma once
/*
 * config: the process configuration, built once in main and shared read-only by every
 * thread afterwards (no locking needed; nothing may modify it after config_load()).
 *
 * Sources, highest precedence first:
 *   1. command-line flags   --webhook-port=9443 or --webhook-port 9443; booleans as --flag,
 *                           --flag=true|false; -v N / -v=N; -h/--help; --version
 *   2. environment          CAPMAAS_<FLAG_IN_UPPER_SNAKE> (CAPMAAS_WEBHOOK_PORT) for every
 *                           option, plus the reference provider's MAAS_ENDPOINT, MAAS_API_KEY
 *                           and MAAS_CA_CERT
 *   3. a YAML file          --config FILE (or CAPMAAS_CONFIG): a mapping whose keys are the
 *                           flag names without the dashes (webhook-port: 9443)
 *   4. built-in defaults    listed by --help
 * Unknown flags, environment-free unknown YAML keys and bad values are errors whose message
 * names the flag, variable or file:line:column.
 *
 * All strings are owned by the struct and freed by config_free().
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "compiler.h"
#include "http_server.h" /* enum tls_version */
#include "log.h"

/* Cluster API's feature gates (sigs.k8s.io/cluster-api/feature) and component-base's
 * AllAlpha/AllBeta: accepted so that manifests written for CAPI providers start; capmaas
 * records and logs them, and none changes its behaviour. */
enum feature_gate {
        FEATURE_MACHINE_POOL,
        FEATURE_CLUSTER_RESOURCE_SET,
        FEATURE_CLUSTER_TOPOLOGY,
        FEATURE_RUNTIME_SDK,
        FEATURE_KUBEADM_BOOTSTRAP_FORMAT_IGNITION,
        FEATURE_MACHINE_SET_PREFLIGHT_CHECKS,
        FEATURE_MACHINE_WAIT_FOR_VOLUME_DETACH_CONSIDER_VOLUME_ATTACHMENTS,
        FEATURE_PRIORITY_QUEUE,
        FEATURE_RECONCILER_RATE_LIMITING,
        FEATURE_IN_PLACE_UPDATES,
        FEATURE_MACHINE_TAINT_PROPAGATION,
        FEATURE_ALL_ALPHA,
        FEATURE_ALL_BETA,
        FEATURE_GATE_COUNT,
};

/* The gates given (bit 1u << gate in set) and their values (same bit in enabled). */
struct feature_gates {
        uint32_t set;
        uint32_t enabled;
};

#define TLS_CIPHER_SUITES_MAX 32

/* --tls-cipher-suites: indexes into the cipher-suite table of config_lists.c, in the
 * order given; n == 0 = GnuTLS's defaults. */
struct tls_cipher_suites {
        unsigned n;
        uint8_t ids[TLS_CIPHER_SUITES_MAX];
};

enum release_erase {
        RELEASE_ERASE_NONE,  /* "none" (default) */
        RELEASE_ERASE_QUICK, /* "quick" */
        RELEASE_ERASE_FULL,  /* "full" */
};

struct config {
        bool help;         /* -h/--help given: print config_print_help() and exit 0 */
        bool version;      /* --version given */
        char *config_file; /* --config; NULL when none */

        /* Kubernetes connection and scope */
        char *kubeconfig;        /* --kubeconfig, $KUBECONFIG; NULL = in-cluster */
        bool webhooks_only;      /* --webhooks-only: no Kubernetes connection at all */
        char *namespace;         /* --namespace; "" = all namespaces */
        char *watch_filter;      /* --watch-filter; "" = no filter */
        double kube_api_qps;     /* --kube-api-qps, 20 */
        unsigned kube_api_burst; /* --kube-api-burst, 30 */
        uint64_t sync_period_ms; /* --sync-period, 120m */

        /* Leader election */
        bool leader_elect;        /* --leader-elect, false */
        char *leader_election_id; /* --leader-election-id, controller-leader-election-capmaas */
        char *leader_election_namespace;         /* --leader-election-namespace, $POD_NAMESPACE or
                                                    capmaas-system */
        uint64_t leader_elect_lease_duration_ms; /* --leader-elect-lease-duration, 15s */
        uint64_t leader_elect_renew_deadline_ms; /* --leader-elect-renew-deadline, 10s */
        uint64_t leader_elect_retry_period_ms;   /* --leader-elect-retry-period, 2s */

        /* Controllers */
        unsigned machine_concurrency;     /* --machine-concurrency, 2 */
        unsigned cluster_concurrency;     /* --maascluster-concurrency, 2 */
        uint64_t deploy_timeout_ms;       /* --deploy-timeout, 30m */
        uint64_t machine_refresh_ms;      /* --machine-refresh-interval, 60s */
        enum release_erase release_erase; /* --release-erase, none */
        uint64_t reuse_hold_ms;           /* --host-reuse-hold, 30m */

        /* Webhook server (HTTPS) */
        char *webhook_host;      /* --webhook-host, "" = all addresses */
        uint16_t webhook_port;   /* --webhook-port, 9443 */
        char *webhook_cert_dir;  /* --webhook-cert-dir, /tmp/k8s-webhook-server/serving-certs */
        char *webhook_cert_name; /* --webhook-cert-name, tls.crt */
        char *webhook_key_name;  /* --webhook-key-name, tls.key */
        enum tls_version tls_min_version;           /* --tls-min-version, VersionTLS12 */
        struct tls_cipher_suites tls_cipher_suites; /* --tls-cipher-suites, "" = defaults */
        unsigned webhook_threads;                   /* --webhook-threads, 0 = one per usable CPU */
        unsigned webhook_max_connections;           /* --webhook-max-connections, 1024 */
        size_t webhook_connection_memory_limit;     /* --webhook-connection-memory-limit, 8Ki */
        size_t webhook_max_body_bytes;              /* --webhook-max-body-bytes, 4Mi */
        unsigned webhook_read_timeout_s; /* --webhook-read-timeout, 10s (whole seconds, >= 1) */
        uint64_t webhook_read_header_timeout_ms;      /* --webhook-read-header-timeout, 5s */
        unsigned webhook_max_connections_per_address; /* --webhook-max-connections-per-address, 64
                                                       */
        uint64_t graceful_shutdown_timeout_ms;        /* --graceful-shutdown-timeout, 30s */

        /* Diagnostics: /metrics over HTTPS behind TokenReview and SubjectAccessReview, or
         * plain HTTP without authentication with --insecure-diagnostics; "0" disables */
        char *diagnostics_address; /* --diagnostics-address, :8443 ("0" when only
                                      --metrics-bind-addr is given) */
        bool insecure_diagnostics; /* --insecure-diagnostics, false */

        /* Plain-HTTP listeners; "0" disables */
        char *metrics_bind_addr; /* --metrics-bind-addr, 0 (deprecated: plain /metrics) */
        char *health_addr;       /* --health-addr, :9440 */

        /* Cluster API */
        struct feature_gates feature_gates; /* --feature-gates */

        /* Logging */
        int verbosity;                  /* -v, 0 */
        enum log_format logging_format; /* --logging-format, json */

        /* MAAS */
        char *maas_endpoint; /* $MAAS_ENDPOINT / --maas-endpoint, NULL when unset */
        char *maas_api_key;  /* $MAAS_API_KEY or the file --maas-api-key-file; never a flag value */
        char *maas_ca_file;  /* $MAAS_CA_CERT / --maas-ca-file */
        bool maas_insecure_skip_verify;      /* --maas-insecure-skip-verify, false */
        uint64_t maas_timeout_ms;            /* --maas-timeout, 30s (total per call) */
        double maas_api_qps;                 /* --maas-api-qps, 50; 0 = unlimited */
        unsigned maas_api_burst;             /* --maas-api-burst, 100 */
        uint64_t maas_inventory_interval_ms; /* --maas-inventory-interval, 60s */
        unsigned maas_identity_cache_max;    /* --maas-identity-cache-max, 8 */
        bool admission_maas_checks;          /* --admission-maas-checks, true */
};

/* Parses flags, environment (envp, NULL-terminated "K=V" strings) and the optional YAML
 * file into a new config. On failure returns CM_EINVAL (or CM_EPARSE/CM_ETOOBIG/CM_EIO for
 * the file) and sets *reterr to a malloc'd message naming the flag, variable or
 * file:line:column; the caller frees it. */
MUST_CHECK int config_load(
        int argc, char *const argv[], char *const envp[], struct config **ret, char **reterr);
/* Frees a config; accepts NULL; returns NULL. */
struct config *config_free(struct config *c);
/* Writes the usage text: every option with its environment variable and default. */
void config_print_help(FILE *out);
/* The name of a feature gate ("MachinePool"). */
const char *config_feature_gate_name(enum feature_gate g);
/* The gates given, as "MachinePool=true,ClusterTopology=false" in table order ("" for
 * none); the caller frees. */
char *config_feature_gates_format(const struct feature_gates *g);
/* The GnuTLS priority items that restrict the TLS 1.2 key exchanges, ciphers and MACs to
 * those of the listed suites (":-KX-ALL:…:+AES-128-GCM:…"), to append to a priority
 * string; NULL when no suite is listed. The caller frees. */
char *config_tls_cipher_priorities(const struct tls_cipher_suites *s);
