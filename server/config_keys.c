/*
 * config_keys: the KEY TABLE, one row per option (name, type, field offset, default as
 * text, bounds or validator, environment aliases, help), and the validators and enum
 * setters its rows name. Read-only data; any thread may read it.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "config_priv.h"
#include "err.h"
#include "parse.h"
#include "xalloc.h"

static bool check_nonempty(const char *s);
static bool check_namespace(const char *s);
static bool check_dns_label(const char *s);
static bool check_dns_subdomain(const char *s);
static bool check_label_value(const char *s);
static bool check_host(const char *s);
static bool check_addr(const char *s);
static bool check_url(const char *s);
static int set_tls_version(const char *s, void *field);
static int set_release_erase(const char *s, void *field);
static int set_log_format(const char *s, void *field);

const struct cfg_key config_keys[] = {
        /* General */
        { .name = "help",
          .short_name = "h",
          .type = CFG_BOOL,
          .offset = OFF(help),
          .deny = SRC_ENV | SRC_FILE,
          .group = GROUP_GENERAL,
          .help = "Print this help and exit." },
        { .name = "version",
          .type = CFG_BOOL,
          .offset = OFF(version),
          .deny = SRC_ENV | SRC_FILE,
          .group = GROUP_GENERAL,
          .help = "Print the version and exit." },
        { .name = "config",
          .type = CFG_STRING,
          .offset = OFF(config_file),
          .check = check_nonempty,
          .expect = "expected a file name",
          .metavar = "FILE",
          .deny = SRC_FILE,
          .group = GROUP_GENERAL,
          .help = "YAML file of \"option-name: value\" pairs (size limit 1 MiB)." },
        { .name = "feature-gates",
          .type = CFG_CUSTOM,
          .offset = OFF(feature_gates),
          .set_custom = config_set_feature_gates,
          .metavar = "KEY=BOOL,...",
          .group = GROUP_GENERAL,
          .help = "Cluster API feature gates, as CAPI providers take them: MachinePool, "
                  "ClusterResourceSet, ClusterTopology, RuntimeSDK, "
                  "KubeadmBootstrapFormatIgnition, MachineSetPreflightChecks, "
                  "MachineWaitForVolumeDetachConsiderVolumeAttachments, PriorityQueue, "
                  "ReconcilerRateLimiting, InPlaceUpdates, MachineTaintPropagation, AllAlpha, "
                  "AllBeta. Recorded and logged; none changes what capmaas does. An unknown "
                  "gate is an error." },

        /* Kubernetes */
        { .name = "kubeconfig",
          .type = CFG_STRING,
          .offset = OFF(kubeconfig),
          .check = check_nonempty,
          .expect = "expected a file name",
          .metavar = "FILE",
          .alias_env = "KUBECONFIG",
          .group = GROUP_KUBE,
          .help = "Kubeconfig of the management cluster; unset = in-cluster configuration." },
        { .name = "webhooks-only",
          .type = CFG_BOOL,
          .offset = OFF(webhooks_only),
          .def = "false",
          .group = GROUP_KUBE,
          .help = "Serve only the admission webhooks; no Kubernetes connection, no controllers." },
        { .name = "namespace",
          .type = CFG_STRING,
          .offset = OFF(namespace),
          .def = "",
          .check = check_namespace,
          .metavar = "NAME",
          .expect = "expected a namespace name (lowercase letters, digits and '-', at most 63 "
                    "characters), or empty for all namespaces",
          .group = GROUP_KUBE,
          .help = "Watch only this namespace; empty = all namespaces." },
        { .name = "watch-filter",
          .type = CFG_STRING,
          .offset = OFF(watch_filter),
          .def = "",
          .check = check_label_value,
          .metavar = "VALUE",
          .expect = "expected a label value (letters, digits, '-', '_' and '.', at most 63 "
                    "characters), or empty",
          .group = GROUP_KUBE,
          .help = "Reconcile only objects labelled cluster.x-k8s.io/watch-filter=VALUE." },
        { .name = "kube-api-qps",
          .type = CFG_DOUBLE,
          .offset = OFF(kube_api_qps),
          .def = "20",
          .dmin = 0.1,
          .dmax = 100000,
          .group = GROUP_KUBE,
          .help = "Sustained requests per second to the Kubernetes API." },
        { .name = "kube-api-burst",
          .type = CFG_UINT,
          .offset = OFF(kube_api_burst),
          .def = "30",
          .min = 1,
          .max = 100000,
          .group = GROUP_KUBE,
          .help = "Burst of requests allowed above kube-api-qps." },
        { .name = "sync-period",
          .type = CFG_DURATION,
          .offset = OFF(sync_period_ms),
          .def = "120m",
          .min = SECS(1),
          .max = HOURS(168),
          .group = GROUP_KUBE,
          .help = "How often every watched object is reconciled again even without changes." },

        /* Leader election */
        { .name = "leader-elect",
          .type = CFG_BOOL,
          .offset = OFF(leader_elect),
          .def = "false",
          .group = GROUP_LEADER,
          .help = "Use a Lease so that only one replica runs the controllers." },
        { .name = "leader-election-id",
          .type = CFG_STRING,
          .offset = OFF(leader_election_id),
          .def = "controller-leader-election-capmaas",
          .check = check_dns_subdomain,
          .metavar = "NAME",
          .expect = "expected a Kubernetes object name (lowercase letters, digits, '-' and "
                    "'.', at most 253 characters)",
          .group = GROUP_LEADER,
          .help = "Name of the leader-election Lease." },
        { .name = "leader-election-namespace",
          .type = CFG_STRING,
          .offset = OFF(leader_election_namespace),
          .def = "capmaas-system",
          .default_env = "POD_NAMESPACE",
          .check = check_dns_label,
          .metavar = "NAME",
          .expect = "expected a namespace name (lowercase letters, digits and '-', at most 63 "
                    "characters)",
          .group = GROUP_LEADER,
          .help = "Namespace of the leader-election Lease." },
        { .name = "leader-elect-lease-duration",
          .type = CFG_DURATION,
          .offset = OFF(leader_elect_lease_duration_ms),
          .def = "15s",
          .min = SECS(1),
          .max = HOURS(1),
          .group = GROUP_LEADER,
          .help = "How long non-leaders wait before they try to take over the Lease." },
        { .name = "leader-elect-renew-deadline",
          .type = CFG_DURATION,
          .offset = OFF(leader_elect_renew_deadline_ms),
          .def = "10s",
          .min = 1,
          .max = HOURS(1),
          .group = GROUP_LEADER,
          .help = "How long the leader keeps retrying to renew before it gives up leadership; "
                  "must be shorter than the lease duration." },
        { .name = "leader-elect-retry-period",
          .type = CFG_DURATION,
          .offset = OFF(leader_elect_retry_period_ms),
          .def = "2s",
          .min = 1,
          .max = HOURS(1),
          .group = GROUP_LEADER,
          .help = "Wait between attempts to acquire or renew; 1.2 times it must be shorter "
                  "than the renew deadline." },

        /* Controllers */
        { .name = "machine-concurrency",
          .type = CFG_UINT,
          .offset = OFF(machine_concurrency),
          .def = "2",
          .min = 1,
          .max = 256,
          .group = GROUP_CONTROLLERS,
          .help = "Number of MaasMachine objects reconciled in parallel." },
        { .name = "maascluster-concurrency",
          .type = CFG_UINT,
          .offset = OFF(cluster_concurrency),
          .def = "2",
          .min = 1,
          .max = 256,
          .group = GROUP_CONTROLLERS,
          .help = "Number of MaasCluster objects reconciled in parallel." },
        { .name = "deploy-timeout",
          .type = CFG_DURATION,
          .offset = OFF(deploy_timeout_ms),
          .def = "30m",
          .min = SECS(1),
          .max = HOURS(168),
          .group = GROUP_CONTROLLERS,
          .help = "How long a machine may stay in Deploying before it is released and "
                  "replaced by another." },
        { .name = "machine-refresh-interval",
          .type = CFG_DURATION,
          .offset = OFF(machine_refresh_ms),
          .def = "60s",
          .min = SECS(1),
          .max = HOURS(24),
          .group = GROUP_CONTROLLERS,
          .help = "How often Deployed machines are re-checked against MAAS (one list call "
                  "for all of them)." },
        { .name = "release-erase",
          .type = CFG_ENUM,
          .offset = OFF(release_erase),
          .def = "none",
          .set_enum = set_release_erase,
          .metavar = "none|quick|full",
          .expect = "expected none, quick or full",
          .group = GROUP_CONTROLLERS,
          .help = "Disk erasure MAAS performs when a machine is released." },
        { .name = "host-reuse-hold",
          .type = CFG_DURATION,
          .offset = OFF(reuse_hold_ms),
          .def = "30m",
          .min = SECS(1),
          .max = HOURS(168),
          .group = GROUP_CONTROLLERS,
          .help = "How long a host released by a MaasMachine with nodeReuse stays kept for "
                  "its MachineDeployment or control plane before others may have it "
                  "(docs/host-reuse.md)." },

        /* Webhook server */
        { .name = "webhook-host",
          .type = CFG_STRING,
          .offset = OFF(webhook_host),
          .def = "",
          .check = check_host,
          .metavar = "HOST",
          .expect = "expected a host name or IP address, or empty for all addresses",
          .group = GROUP_WEBHOOK,
          .help = "Address the HTTPS webhook server binds; empty = all addresses." },
        { .name = "webhook-port",
          .type = CFG_U16,
          .offset = OFF(webhook_port),
          .def = "9443",
          .min = 0,
          .max = 65535,
          .group = GROUP_WEBHOOK,
          .help = "Port of the HTTPS webhook server; 0 picks a free port (tests)." },
        { .name = "webhook-cert-dir",
          .type = CFG_STRING,
          .offset = OFF(webhook_cert_dir),
          .def = "/tmp/k8s-webhook-server/serving-certs",
          .check = check_nonempty,
          .expect = "expected a directory name",
          .metavar = "DIR",
          .group = GROUP_WEBHOOK,
          .help = "Directory holding the serving certificate and key (reloaded on change)." },
        { .name = "webhook-cert-name",
          .type = CFG_STRING,
          .offset = OFF(webhook_cert_name),
          .def = "tls.crt",
          .check = check_nonempty,
          .expect = "expected a file name",
          .metavar = "FILE",
          .group = GROUP_WEBHOOK,
          .help = "Certificate file name inside webhook-cert-dir." },
        { .name = "webhook-key-name",
          .type = CFG_STRING,
          .offset = OFF(webhook_key_name),
          .def = "tls.key",
          .check = check_nonempty,
          .expect = "expected a file name",
          .metavar = "FILE",
          .group = GROUP_WEBHOOK,
          .help = "Private key file name inside webhook-cert-dir." },
        { .name = "tls-min-version",
          .type = CFG_ENUM,
          .offset = OFF(tls_min_version),
          .def = "VersionTLS12",
          .set_enum = set_tls_version,
          .metavar = "VersionTLS12|VersionTLS13",
          .expect = "expected VersionTLS12 or VersionTLS13",
          .group = GROUP_WEBHOOK,
          .help = "Lowest TLS version the webhook server and the secure diagnostics server "
                  "accept." },
        { .name = "tls-cipher-suites",
          .type = CFG_CUSTOM,
          .offset = OFF(tls_cipher_suites),
          .set_custom = config_set_tls_cipher_suites,
          .metavar = "SUITE,...",
          .group = GROUP_WEBHOOK,
          .help = "Comma-separated Go/IANA cipher suite names (such as "
                  "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256) for the webhook server and the "
                  "secure diagnostics server; empty = GnuTLS's defaults. GnuTLS enables suites "
                  "by their parts: the key exchanges, ciphers and MACs of the listed suites "
                  "are allowed (for TLS 1.3, their AEAD ciphers). RC4 suites are refused." },
        { .name = "webhook-threads",
          .type = CFG_UINT,
          .offset = OFF(webhook_threads),
          .def = "0",
          .min = 0,
          .max = 256,
          .group = GROUP_WEBHOOK,
          .help = "Size of the webhook server's thread pool; 0 picks one thread per CPU "
                  "capmaas may use (its affinity mask, capped by its cgroup's CPU limit), "
                  "at most 4." },
        { .name = "webhook-max-connections",
          .type = CFG_UINT,
          .offset = OFF(webhook_max_connections),
          .def = "1024",
          .min = 1,
          .max = 100000,
          .group = GROUP_WEBHOOK,
          .help = "Most concurrent webhook connections; past it, the oldest connection that "
                  "has been sending its request for a second (else the oldest idle one) is "
                  "closed to make room, or the newcomer is refused." },
        { .name = "webhook-connection-memory-limit",
          .type = CFG_SIZE,
          .offset = OFF(webhook_connection_memory_limit),
          .def = "8Ki",
          .min = KI(4),
          .max = MI(64),
          .group = GROUP_WEBHOOK,
          .help = "Memory for one connection's request line, headers and buffers; the "
                  "default holds about 7 KB of request headers (a larger request is "
                  "answered 431)." },
        { .name = "webhook-max-body-bytes",
          .type = CFG_SIZE,
          .offset = OFF(webhook_max_body_bytes),
          .def = "4Mi",
          .min = KI(1),
          .max = MI(64),
          .group = GROUP_WEBHOOK,
          .help = "Largest AdmissionReview request body accepted; larger ones get 413 (the API "
                  "server sends at most about 3 MiB: object and oldObject, each under etcd's "
                  "1.5 MiB)." },
        { .name = "webhook-read-timeout",
          .type = CFG_SECONDS,
          .offset = OFF(webhook_read_timeout_s),
          .def = "10s",
          .min = SECS(1),
          .max = HOURS(1),
          .group = GROUP_WEBHOOK,
          .help = "Deadline for reading one request, headers and body, counted from the "
                  "accept (Go's ReadTimeout, not reset by traffic); also how long a keep-alive "
                  "connection may stay idle (whole seconds)." },
        { .name = "webhook-read-header-timeout",
          .type = CFG_DURATION,
          .offset = OFF(webhook_read_header_timeout_ms),
          .def = "5s",
          .min = 100,
          .max = HOURS(1),
          .group = GROUP_WEBHOOK,
          .help = "Deadline from the accept to the end of the request headers, TLS handshake "
                  "included (Go's ReadHeaderTimeout); at most webhook-read-timeout." },
        { .name = "webhook-max-connections-per-address",
          .type = CFG_UINT,
          .offset = OFF(webhook_max_connections_per_address),
          .def = "64",
          .min = 1,
          .max = 100000,
          .group = GROUP_WEBHOOK,
          .help = "Most concurrent webhook connections from one client address; past it, "
                  "that address's oldest idle connection is closed to make room, or the "
                  "newcomer is refused before its TLS handshake." },
        { .name = "graceful-shutdown-timeout",
          .type = CFG_DURATION,
          .offset = OFF(graceful_shutdown_timeout_ms),
          .def = "30s",
          .min = 0,
          .max = HOURS(1),
          .group = GROUP_WEBHOOK,
          .help = "How long shutdown waits for in-flight requests and reconciles." },

        /* Diagnostics */
        { .name = "diagnostics-address",
          .type = CFG_STRING,
          .offset = OFF(diagnostics_address),
          .check = check_addr,
          .metavar = "HOST:PORT",
          .expect = "expected HOST:PORT (such as :8443, 127.0.0.1:8443 or [::1]:8443), or 0 to "
                    "disable",
          .group = GROUP_DIAGNOSTICS,
          .help = "Address of the diagnostics server: /metrics over HTTPS (the webhook "
                  "certificate), for bearer tokens that TokenReview authenticates and "
                  "SubjectAccessReview allows to get the non-resource URL /metrics; 0 disables "
                  "it. Default :8443, or 0 when --metrics-bind-addr is given and this is not "
                  "(the reference provider's manifests, whose kube-rbac-proxy holds :8443)." },
        { .name = "insecure-diagnostics",
          .type = CFG_BOOL,
          .offset = OFF(insecure_diagnostics),
          .def = "false",
          .group = GROUP_DIAGNOSTICS,
          .help = "Serve the diagnostics address over plain HTTP without authentication "
                  "(local use only)." },

        /* Listeners */
        { .name = "metrics-bind-addr",
          .type = CFG_STRING,
          .offset = OFF(metrics_bind_addr),
          .def = "0",
          .check = check_addr,
          .metavar = "HOST:PORT",
          .expect = "expected HOST:PORT (such as :8080, 127.0.0.1:8080 or [::1]:8080), or 0 to "
                    "disable",
          .group = GROUP_LISTENERS,
          .help = "Deprecated (use --diagnostics-address): a plain-HTTP /metrics without "
                  "authentication, as the reference provider serves it; 0 = none. Bind it to "
                  "127.0.0.1 behind a proxy that authenticates." },
        { .name = "health-addr",
          .type = CFG_STRING,
          .offset = OFF(health_addr),
          .def = ":9440",
          .check = check_addr,
          .metavar = "HOST:PORT",
          .expect = "expected HOST:PORT (such as :9440, 127.0.0.1:9440 or [::1]:9440), or 0 to "
                    "disable",
          .group = GROUP_LISTENERS,
          .help = "Plain-HTTP address of /healthz and /readyz; 0 disables it." },

        /* Logging */
        { .name = "v",
          .type = CFG_INT,
          .offset = OFF(verbosity),
          .def = "0",
          .min = 0,
          .max = 10,
          .metavar = "LEVEL",
          .group = GROUP_LOGGING,
          .help = "Log verbosity: 0 = info, 1-3 = debug, 4 and above = trace." },
        { .name = "logging-format",
          .type = CFG_ENUM,
          .offset = OFF(logging_format),
          .def = "json",
          .set_enum = set_log_format,
          .metavar = "json|text",
          .expect = "expected json or text",
          .group = GROUP_LOGGING,
          .help = "Log record format: one JSON object per line, or text for people." },

        /* MAAS */
        { .name = "maas-endpoint",
          .type = CFG_STRING,
          .offset = OFF(maas_endpoint),
          .check = check_url,
          .expect = "expected an http:// or https:// URL",
          .metavar = "URL",
          .alias_env = "MAAS_ENDPOINT",
          .group = GROUP_MAAS,
          .help = "MAAS region API URL, including /MAAS (http://10.0.0.2:5240/MAAS)." },
        { .name = "maas-api-key",
          .type = CFG_STRING,
          .offset = OFF(maas_api_key),
          .alias_env = "MAAS_API_KEY",
          .deny = SRC_FLAG | SRC_FILE,
          .secret = true,
          .deny_hint = "use --maas-api-key-file or $MAAS_API_KEY",
          .group = GROUP_MAAS,
          .help = "MAAS API key, consumer_key:token_key:token_secret. Not a flag, so that it "
                  "never shows in the process list." },
        { .name = "maas-api-key-file",
          .type = CFG_SECRET_FILE,
          .offset = OFF(maas_api_key),
          .group = GROUP_MAAS,
          .help = "File holding the MAAS API key (trailing newline ignored, at most 4 KiB); "
                  "read at start-up." },
        { .name = "maas-ca-file",
          .type = CFG_STRING,
          .offset = OFF(maas_ca_file),
          .check = check_nonempty,
          .expect = "expected a file name",
          .metavar = "FILE",
          .alias_env = "MAAS_CA_CERT",
          .group = GROUP_MAAS,
          .help = "PEM bundle that verifies an https MAAS endpoint; unset = system CAs." },
        { .name = "maas-insecure-skip-verify",
          .type = CFG_BOOL,
          .offset = OFF(maas_insecure_skip_verify),
          .def = "false",
          .group = GROUP_MAAS,
          .help = "Do not verify the MAAS server certificate (testing only)." },
        { .name = "maas-timeout",
          .type = CFG_DURATION,
          .offset = OFF(maas_timeout_ms),
          .def = "30s",
          .min = SECS(1),
          .max = HOURS(1),
          .group = GROUP_MAAS,
          .help = "Total time allowed for one MAAS API call." },
        { .name = "maas-api-qps",
          .type = CFG_DOUBLE,
          .offset = OFF(maas_api_qps),
          .def = "50",
          .dmin = 0,
          .dmax = 100000,
          .group = GROUP_MAAS,
          .help = "Sustained requests per second to MAAS from the whole process (controllers "
                  "and admission inventory together); 0 = unlimited." },
        { .name = "maas-api-burst",
          .type = CFG_UINT,
          .offset = OFF(maas_api_burst),
          .def = "100",
          .min = 1,
          .max = 100000,
          .group = GROUP_MAAS,
          .help = "Burst of MAAS requests allowed above maas-api-qps." },
        { .name = "maas-inventory-interval",
          .type = CFG_DURATION,
          .offset = OFF(maas_inventory_interval_ms),
          .def = "60s",
          .min = SECS(1),
          .max = HOURS(24),
          .group = GROUP_MAAS,
          .help = "How often the MAAS inventory cache (zones, pools, machines) is refreshed." },
        { .name = "maas-identity-cache-max",
          .type = CFG_UINT,
          .offset = OFF(maas_identity_cache_max),
          .def = "8",
          .min = 1,
          .max = 1024,
          .group = GROUP_MAAS,
          .help = "Inventory caches kept for the per-cluster MAAS identities (spec.identityRef "
                  "Secrets), for admission, templates' capacity and discovered failure domains; "
                  "beyond it the least recently used is dropped and rebuilt when needed again. "
                  "Set it to the number of identities in use." },
        { .name = "admission-maas-checks",
          .type = CFG_BOOL,
          .offset = OFF(admission_maas_checks),
          .def = "true",
          .group = GROUP_MAAS,
          .help = "Let the webhooks check zones, pools and tags against the inventory cache." },
};

const size_t config_keys_n = ARRAY_SIZE(config_keys);

const char *const config_group_titles[GROUP_COUNT] = {
        [GROUP_GENERAL] = "General",
        [GROUP_KUBE] = "Kubernetes",
        [GROUP_LEADER] = "Leader election",
        [GROUP_CONTROLLERS] = "Controllers",
        [GROUP_WEBHOOK] = "Webhook server (HTTPS)",
        [GROUP_DIAGNOSTICS] = "Diagnostics (metrics)",
        [GROUP_LISTENERS] = "Listeners (plain HTTP)",
        [GROUP_LOGGING] = "Logging",
        [GROUP_MAAS] = "MAAS",
};

static const char *const tls_names[] = {
        [TLS_VERSION_12] = "VersionTLS12",
        [TLS_VERSION_13] = "VersionTLS13",
};

static const char *const erase_names[] = {
        [RELEASE_ERASE_NONE] = "none",
        [RELEASE_ERASE_QUICK] = "quick",
        [RELEASE_ERASE_FULL] = "full",
};

/* ---- string validators ---- */

static bool is_lower_alnum(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool only_chars(const char *s, bool (*ok)(char c), const char *extra)
{
        for (; *s; s++)
                if (!ok(*s) && !strchr(extra, *s))
                        return false;
        return true;
}

static bool check_nonempty(const char *s)
{
        return *s != '\0';
}

static bool is_name_shape(const char *s, size_t max, bool (*ok)(char c), const char *extra)
{
        size_t len = strlen(s);

        return len > 0 && len <= max && ok(s[0]) && ok(s[len - 1]) && only_chars(s, ok, extra);
}

static bool check_dns_label(const char *s)
{
        return is_name_shape(s, 63, is_lower_alnum, "-");
}

static bool check_namespace(const char *s)
{
        return *s == '\0' || check_dns_label(s);
}

static bool check_dns_subdomain(const char *s)
{
        return is_name_shape(s, 253, is_lower_alnum, "-.");
}

static bool is_alnum_char(char c)
{
        return isalnum((unsigned char)c) != 0;
}

static bool check_label_value(const char *s)
{
        return *s == '\0' || is_name_shape(s, 63, is_alnum_char, "-_.");
}

/* A bare host for binding: reuse the listener-address parser with a dummy port. */
static bool check_host(const char *s)
{
        char *addr, *host = NULL;
        uint16_t port;
        bool ok;

        if (*s == '\0')
                return true;
        addr = strchr(s, ':') ? xasprintf("[%s]:0", s) : xasprintf("%s:0", s);
        ok = parse_host_port(addr, &host, &port) == 0;
        free(host);
        free(addr);
        return ok;
}

static bool check_addr(const char *s)
{
        char *host = NULL;
        uint16_t port;
        bool ok;

        if (strcmp(s, "0") == 0)
                return true;
        ok = parse_host_port(s, &host, &port) == 0;
        free(host);
        return ok;
}

static bool is_graph(char c)
{
        return isgraph((unsigned char)c) != 0;
}

bool config_only_graph(const char *s)
{
        return only_chars(s, is_graph, "");
}

static bool check_url(const char *s)
{
        size_t scheme = strncmp(s, "https://", 8) == 0 ? 8 : strncmp(s, "http://", 7) == 0 ? 7 : 0;

        return scheme > 0 && s[scheme] != '\0' && s[scheme] != '/' && config_only_graph(s);
}

/* ---- enum setters ---- */

int config_name_index(const char *const *names, size_t n, const char *s)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(names[i], s) == 0)
                        return (int)i;
        return CM_EINVAL;
}

static int set_tls_version(const char *s, void *field)
{
        int i = config_name_index(tls_names, ARRAY_SIZE(tls_names), s);

        if (i < 0)
                return CM_EINVAL;
        *(enum tls_version *)field = (enum tls_version)i;
        return 0;
}

static int set_release_erase(const char *s, void *field)
{
        int i = config_name_index(erase_names, ARRAY_SIZE(erase_names), s);

        if (i < 0)
                return CM_EINVAL;
        *(enum release_erase *)field = (enum release_erase)i;
        return 0;
}

static int set_log_format(const char *s, void *field)
{
        enum log_format f;

        if (log_format_parse(s, &f) < 0)
                return CM_EINVAL;
        *(enum log_format *)field = f;
        return 0;
}
