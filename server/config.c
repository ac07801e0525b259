/*
 * config: one KEY TABLE describes every option (name, type, field offset, default as
 * text, bounds or validator, environment aliases, help). One generic setter converts text
 * into a field, so a default, a YAML scalar, an environment variable and a flag value all
 * go through exactly the same checks, and --help is generated from the same rows.
 *
 * Precedence is implemented by applying the sources from weakest to strongest onto one
 * struct: defaults, then the YAML file, then the environment, then the flags (argv is
 * scanned first, for syntax and to find --config). Cross-field rules run last.
 * Single-threaded: called once from main before any thread starts.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "buf.h"
#include "err.h"
#include "parse.h"
#include "xalloc.h"

#define CONFIG_FILE_MAX  ((size_t)1 << 20) /* a config file is a few hundred bytes */
#define API_KEY_FILE_MAX ((size_t)4096)    /* ck:tk:ts is well under 100 bytes */
#define ENV_PREFIX       "CAPMAAS_"
#define ENV_NAME_MAX     64
#define READ_CHUNK       16384
#define HELP_WIDTH       80

#define SECS(s)  ((uint64_t)(s)*1000) /* durations are kept in milliseconds */
#define MINS(m)  SECS((uint64_t)(m)*60)
#define HOURS(h) MINS((uint64_t)(h)*60)
#define KI(n)    ((uint64_t)(n) << 10)
#define MI(n)    ((uint64_t)(n) << 20)
#define OFF(f)   offsetof(struct config, f)

enum cfg_type {
        CFG_STRING,
        CFG_BOOL,
        CFG_INT,
        CFG_UINT,
        CFG_U16,
        CFG_DURATION, /* uint64_t milliseconds */
        CFG_SECONDS,  /* unsigned whole seconds, written as a duration */
        CFG_SIZE,     /* size_t bytes */
        CFG_DOUBLE,
        CFG_ENUM,        /* converted by the row's set_enum */
        CFG_SECRET_FILE, /* the value is a path; the field receives the file's content */
        CFG_TYPE_COUNT,
};

enum cfg_source {
        SRC_FLAG = 1,
        SRC_ENV = 2,
        SRC_FILE = 4,
};

enum cfg_group {
        GROUP_GENERAL,
        GROUP_KUBE,
        GROUP_LEADER,
        GROUP_CONTROLLERS,
        GROUP_WEBHOOK,
        GROUP_LISTENERS,
        GROUP_LOGGING,
        GROUP_MAAS,
        GROUP_COUNT,
};

struct cfg_key {
        const char *name;             /* flag name without dashes; also the YAML key */
        const char *short_name;       /* one-letter alias ("h"), or NULL */
        size_t offset;                /* of the field in struct config */
        const char *def;              /* default as text; NULL = NULL/zero and not shown */
        uint64_t min, max;            /* integers; durations and seconds in ms; sizes in bytes */
        double dmin, dmax;            /* CFG_DOUBLE */
        bool (*check)(const char *s); /* CFG_STRING; NULL = anything */
        int (*set_enum)(const char *s, void *field); /* CFG_ENUM */
        const char *expect;      /* CFG_STRING with a check, CFG_ENUM: what is accepted */
        const char *metavar;     /* placeholder in --help; NULL = by type */
        const char *alias_env;   /* another variable, weaker than CAPMAAS_<NAME> */
        const char *default_env; /* a variable that replaces the built-in default */
        const char *deny_hint;   /* added to the message when a source is refused */
        const char *help;
        enum cfg_type type;
        enum cfg_group group;
        unsigned deny; /* SRC_* bits where the key is refused */
        bool secret;   /* never echoed in messages or help */
};

/* One argv flag after scanning: value borrowed from argv (or "true"). */
struct flag_arg {
        const struct cfg_key *key;
        const char *value;
        const char *arg; /* the flag as written */
        int name_len;    /* length of arg before any '=' */
};

typedef int cfg_set_fn(void *field, const struct cfg_key *k, const char *s, char **ret_why);
typedef char *cfg_expect_fn(const struct cfg_key *k);

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

static const struct cfg_key keys[] = {
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
          .help = "Lowest TLS version the webhook server accepts." },
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
          .help = "Most concurrent webhook connections." },
        { .name = "webhook-connection-memory-limit",
          .type = CFG_SIZE,
          .offset = OFF(webhook_connection_memory_limit),
          .def = "16Ki",
          .min = KI(4),
          .max = MI(64),
          .group = GROUP_WEBHOOK,
          .help = "Memory for one connection's headers and buffers." },
        { .name = "webhook-max-body-bytes",
          .type = CFG_SIZE,
          .offset = OFF(webhook_max_body_bytes),
          .def = "8Mi",
          .min = KI(1),
          .max = MI(64),
          .group = GROUP_WEBHOOK,
          .help = "Largest AdmissionReview request body accepted; larger ones get 413." },
        { .name = "webhook-read-timeout",
          .type = CFG_SECONDS,
          .offset = OFF(webhook_read_timeout_s),
          .def = "10s",
          .min = SECS(1),
          .max = HOURS(1),
          .group = GROUP_WEBHOOK,
          .help = "Idle time after which a webhook connection is closed (whole seconds)." },
        { .name = "graceful-shutdown-timeout",
          .type = CFG_DURATION,
          .offset = OFF(graceful_shutdown_timeout_ms),
          .def = "30s",
          .min = 0,
          .max = HOURS(1),
          .group = GROUP_WEBHOOK,
          .help = "How long shutdown waits for in-flight requests and reconciles." },

        /* Listeners */
        { .name = "metrics-bind-addr",
          .type = CFG_STRING,
          .offset = OFF(metrics_bind_addr),
          .def = ":8080",
          .check = check_addr,
          .metavar = "HOST:PORT",
          .expect = "expected HOST:PORT (such as :8080, 127.0.0.1:8080 or [::1]:8080), or 0 to "
                    "disable",
          .group = GROUP_LISTENERS,
          .help = "Plain-HTTP address of the /metrics endpoint; 0 disables it." },
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
        { .name = "maas-inventory-interval",
          .type = CFG_DURATION,
          .offset = OFF(maas_inventory_interval_ms),
          .def = "60s",
          .min = SECS(1),
          .max = HOURS(24),
          .group = GROUP_MAAS,
          .help = "How often the MAAS inventory cache (zones, pools, machines) is refreshed." },
        { .name = "admission-maas-checks",
          .type = CFG_BOOL,
          .offset = OFF(admission_maas_checks),
          .def = "true",
          .group = GROUP_MAAS,
          .help = "Let the webhooks check zones, pools and tags against the inventory cache." },
};

static const char *const group_titles[GROUP_COUNT] = {
        [GROUP_GENERAL] = "General",
        [GROUP_KUBE] = "Kubernetes",
        [GROUP_LEADER] = "Leader election",
        [GROUP_CONTROLLERS] = "Controllers",
        [GROUP_WEBHOOK] = "Webhook server (HTTPS)",
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

static bool check_url(const char *s)
{
        size_t scheme = strncmp(s, "https://", 8) == 0 ? 8 : strncmp(s, "http://", 7) == 0 ? 7 : 0;

        return scheme > 0 && s[scheme] != '\0' && s[scheme] != '/' && only_chars(s, is_graph, "");
}

/* ---- enum setters ---- */

static int name_index(const char *const *names, size_t n, const char *s)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(names[i], s) == 0)
                        return (int)i;
        return CM_EINVAL;
}

static int set_tls_version(const char *s, void *field)
{
        int i = name_index(tls_names, ARRAY_SIZE(tls_names), s);

        if (i < 0)
                return CM_EINVAL;
        *(enum tls_version *)field = (enum tls_version)i;
        return 0;
}

static int set_release_erase(const char *s, void *field)
{
        int i = name_index(erase_names, ARRAY_SIZE(erase_names), s);

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

/* ---- files ---- */

/* Reads fd to its end into b; CM_EIO or CM_ETOOBIG (past b's maximum) with a message. */
static int read_all(int fd, struct buf *b, size_t max, const char *path, char **reterr)
{
        char chunk[READ_CHUNK];
        ssize_t n;
        int r = 0;

        while ((n = read(fd, chunk, sizeof(chunk))) != 0) {
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        *reterr = xasprintf("%s: %s", path, strerrordesc_np(errno));
                        r = CM_EIO;
                        break;
                }
                if (buf_append(b, chunk, (size_t)n) < 0) {
                        *reterr = xasprintf("%s: file is larger than %zu bytes", path, max);
                        r = CM_ETOOBIG;
                        break;
                }
        }
        explicit_bzero(chunk, sizeof(chunk)); /* may have held a key */
        return r;
}

/* Reads a whole regular file of at most max bytes into a new NUL-terminated string. */
static int read_file_capped(
        const char *path, size_t max, char **ret, size_t *ret_len, char **reterr)
{
        struct buf b;
        struct stat st;
        int fd, r;

        buf_init(&b, max);
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0 || fstat(fd, &st) < 0) {
                *reterr = xasprintf("%s: %s", path, strerrordesc_np(errno));
                r = CM_EIO;
                goto out;
        }
        if (!S_ISREG(st.st_mode)) {
                *reterr = xasprintf("%s: not a regular file", path);
                r = CM_EIO;
                goto out;
        }
        r = read_all(fd, &b, max, path, reterr);
        if (r == 0)
                *ret = buf_take(&b, ret_len);
out:
        if (fd >= 0)
                close(fd);
        if (r < 0 && b.data)
                explicit_bzero(b.data, b.len); /* may be a partial key */
        buf_release(&b);
        return r;
}

static void secret_free(char *s)
{
        if (s)
                explicit_bzero(s, strlen(s));
        free(s);
}

/* ---- typed setters: text -> field; CM_EINVAL without *ret_why means "invalid value" ---- */

static int set_string(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        char **p = field;

        (void)ret_why;
        if (k->check && !k->check(s))
                return CM_EINVAL;
        if (k->secret)
                secret_free(*p);
        else
                free(*p);
        *p = xstrdup(s);
        return 0;
}

static int set_bool(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        (void)k;
        (void)ret_why;
        return parse_bool(s, field);
}

static int set_int(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        uint64_t v;

        (void)ret_why;
        if (parse_u64(s, k->min, k->max, &v) < 0)
                return CM_EINVAL;
        *(int *)field = (int)v;
        return 0;
}

static int set_uint(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        uint64_t v;

        (void)ret_why;
        if (parse_u64(s, k->min, k->max, &v) < 0)
                return CM_EINVAL;
        *(unsigned *)field = (unsigned)v;
        return 0;
}

static int set_u16(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        uint64_t v;

        (void)ret_why;
        if (parse_u64(s, k->min, k->max, &v) < 0)
                return CM_EINVAL;
        *(uint16_t *)field = (uint16_t)v;
        return 0;
}

static int set_duration(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        uint64_t v;

        (void)ret_why;
        if (parse_duration_ms(s, &v) < 0 || v < k->min || v > k->max)
                return CM_EINVAL;
        *(uint64_t *)field = v;
        return 0;
}

static int set_seconds(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        uint64_t v;

        (void)ret_why;
        if (parse_duration_ms(s, &v) < 0 || v < k->min || v > k->max || v % 1000 != 0)
                return CM_EINVAL;
        *(unsigned *)field = (unsigned)(v / 1000);
        return 0;
}

static int set_size(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        uint64_t v;

        (void)ret_why;
        if (parse_size(s, &v) < 0 || v < k->min || v > k->max)
                return CM_EINVAL;
        *(size_t *)field = (size_t)v;
        return 0;
}

static int set_double(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        (void)ret_why;
        return parse_double(s, k->dmin, k->dmax, field);
}

static int set_enum(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        (void)ret_why;
        return k->set_enum(s, field);
}

static int set_secret_file(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        char **p = field;
        char *data = NULL;
        size_t len = 0;
        int r;

        (void)k;
        r = read_file_capped(s, API_KEY_FILE_MAX, &data, &len, ret_why);
        if (r < 0)
                return r;
        while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r'))
                data[--len] = '\0';
        if (len == 0 || memchr(data, '\0', len)) {
                *ret_why = xasprintf("%s: expected one line holding the MAAS API key", s);
                secret_free(data);
                return CM_EINVAL;
        }
        secret_free(*p);
        *p = data;
        return 0;
}

/* ---- "expected ..." texts ---- */

/* Formats milliseconds as a Go duration ("1h30m", "500ms", "0s"). */
static void fmt_duration(uint64_t ms, char *out, size_t size)
{
        static const struct {
                uint64_t ms;
                const char *unit;
        } parts[] = { { HOURS(1), "h" }, { MINS(1), "m" }, { SECS(1), "s" }, { 1, "ms" } };

        size_t n = 0;

        out[0] = '\0';
        for (size_t i = 0; i < ARRAY_SIZE(parts) && n < size; i++) {
                if (ms / parts[i].ms == 0)
                        continue;
                n += (size_t)snprintf(out + n, size - n, "%" PRIu64 "%s", ms / parts[i].ms,
                                      parts[i].unit);
                ms %= parts[i].ms;
        }
        if (out[0] == '\0')
                snprintf(out, size, "0s");
}

static void fmt_size(uint64_t bytes, char *out, size_t size)
{
        if (bytes != 0 && bytes % MI(1) == 0)
                snprintf(out, size, "%" PRIu64 "Mi", bytes / MI(1));
        else if (bytes != 0 && bytes % KI(1) == 0)
                snprintf(out, size, "%" PRIu64 "Ki", bytes / KI(1));
        else
                snprintf(out, size, "%" PRIu64, bytes);
}

static char *expect_text(const struct cfg_key *k)
{
        return xstrdup(k->expect ? k->expect : "expected a valid value");
}

static char *expect_bool(const struct cfg_key *k)
{
        (void)k;
        return xstrdup("expected true or false");
}

static char *expect_integer(const struct cfg_key *k)
{
        return xasprintf("expected an integer between %" PRIu64 " and %" PRIu64, k->min, k->max);
}

static char *expect_duration(const struct cfg_key *k)
{
        char lo[48], hi[48];

        fmt_duration(k->min, lo, sizeof(lo));
        fmt_duration(k->max, hi, sizeof(hi));
        return xasprintf("expected a duration between %s and %s, such as 90s or 1h30m", lo, hi);
}

static char *expect_seconds(const struct cfg_key *k)
{
        char lo[48], hi[48];

        fmt_duration(k->min, lo, sizeof(lo));
        fmt_duration(k->max, hi, sizeof(hi));
        return xasprintf("expected whole seconds between %s and %s, such as 30s", lo, hi);
}

static char *expect_size(const struct cfg_key *k)
{
        char lo[32], hi[32];

        fmt_size(k->min, lo, sizeof(lo));
        fmt_size(k->max, hi, sizeof(hi));
        return xasprintf("expected a size between %s and %s (bytes, or with a Ki, Mi or Gi "
                         "suffix)",
                         lo, hi);
}

static char *expect_double(const struct cfg_key *k)
{
        return xasprintf("expected a number between %g and %g", k->dmin, k->dmax);
}

static const struct {
        cfg_set_fn *set;
        cfg_expect_fn *expect;
        const char *metavar;
} type_ops[CFG_TYPE_COUNT] = {
        [CFG_STRING] = { set_string, expect_text, "STRING" },
        [CFG_BOOL] = { set_bool, expect_bool, "" },
        [CFG_INT] = { set_int, expect_integer, "INT" },
        [CFG_UINT] = { set_uint, expect_integer, "INT" },
        [CFG_U16] = { set_u16, expect_integer, "PORT" },
        [CFG_DURATION] = { set_duration, expect_duration, "DURATION" },
        [CFG_SECONDS] = { set_seconds, expect_seconds, "DURATION" },
        [CFG_SIZE] = { set_size, expect_size, "SIZE" },
        [CFG_DOUBLE] = { set_double, expect_double, "FLOAT" },
        [CFG_ENUM] = { set_enum, expect_text, "VALUE" },
        [CFG_SECRET_FILE] = { set_secret_file, expect_text, "FILE" },
};

/* ---- the generic setter ---- */

static const struct cfg_key *key_find(const char *name, size_t len)
{
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
                const char *n = keys[i].name, *sn = keys[i].short_name;

                if (strlen(n) == len && memcmp(n, name, len) == 0)
                        return &keys[i];
                if (sn && strlen(sn) == len && memcmp(sn, name, len) == 0)
                        return &keys[i];
        }
        return NULL;
}

/* Sets key k from text s. On failure *reterr = "<where>: invalid value "s": expected …"
 * (the value is left out for secrets) or "<where>: <reason>". */
static int key_set(
        struct config *c, const struct cfg_key *k, const char *s, const char *where, char **reterr)
{
        char *why = NULL, *expect;
        int r;

        r = type_ops[k->type].set((char *)c + k->offset, k, s, &why);
        if (r == 0)
                return 0;
        if (why) {
                *reterr = xasprintf("%s: %s", where, why);
                free(why);
                return r;
        }
        expect = type_ops[k->type].expect(k);
        if (k->secret)
                *reterr = xasprintf("%s: invalid value: %s", where, expect);
        else
                *reterr = xasprintf("%s: invalid value \"%s\": %s", where, s, expect);
        free(expect);
        return r;
}

/* ---- environment ---- */

static const char *env_find(char *const envp[], const char *name)
{
        size_t len = strlen(name);

        for (size_t i = 0; envp && envp[i]; i++)
                if (strncmp(envp[i], name, len) == 0 && envp[i][len] == '=')
                        return envp[i] + len + 1;
        return NULL;
}

/* CAPMAAS_ + the flag name in upper snake case. */
static void env_name(const struct cfg_key *k, char out[static ENV_NAME_MAX])
{
        size_t n = strlen(ENV_PREFIX);

        memcpy(out, ENV_PREFIX, n);
        for (const char *p = k->name; *p && n < ENV_NAME_MAX - 1; p++)
                out[n++] = (char)(*p == '-' ? '_' : toupper((unsigned char)*p));
        out[n] = '\0';
}

/* Empty variables count as unset: "X=" in a manifest should not wipe a setting. */
static int env_set_from(struct config *c,
                        const struct cfg_key *k,
                        char *const envp[],
                        const char *var,
                        char **reterr)
{
        const char *v = env_find(envp, var);
        char *where;
        int r;

        if (!v || *v == '\0')
                return 0;
        where = xasprintf("$%s", var);
        r = key_set(c, k, v, where, reterr);
        free(where);
        return r;
}

static int env_apply(struct config *c, char *const envp[], char **reterr)
{
        char name[ENV_NAME_MAX];
        int r;

        for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
                if (keys[i].deny & SRC_ENV)
                        continue;
                env_name(&keys[i], name);
                r = keys[i].alias_env ? env_set_from(c, &keys[i], envp, keys[i].alias_env, reterr)
                                      : 0;
                if (r == 0)
                        r = env_set_from(c, &keys[i], envp, name, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int defaults_apply(struct config *c, char *const envp[], char **reterr)
{
        int r;

        for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
                r = keys[i].def ? key_set(c, &keys[i], keys[i].def, keys[i].name, reterr) : 0;
                if (r == 0 && keys[i].default_env)
                        r = env_set_from(c, &keys[i], envp, keys[i].default_env, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- flags ---- */

static int flag_refused(const struct cfg_key *k, int len, const char *arg, char **reterr)
{
        *reterr = xasprintf("%.*s: not accepted on the command line%s%s", len, arg,
                            k->deny_hint ? "; " : "", k->deny_hint ? k->deny_hint : "");
        return CM_EINVAL;
}

/* Scans argv[*i] (and the next word for "--name value"); advances *i past what it used. */
static int flag_scan_one(int argc, char *const argv[], int *i, struct flag_arg *ret, char **reterr)
{
        const char *arg = argv[*i], *name, *eq;
        const struct cfg_key *k;
        int len;

        name = arg + (arg[1] == '-' ? 2 : 1);
        eq = strchr(name, '=');
        len = (int)(eq ? (size_t)(eq - arg) : strlen(arg));
        k = key_find(name, (size_t)(arg + len - name));
        if (!k) {
                *reterr = xasprintf("unknown flag %.*s", len, arg);
                return CM_EINVAL;
        }
        if (k->deny & SRC_FLAG)
                return flag_refused(k, len, arg, reterr);
        *ret = (struct flag_arg){ .key = k, .arg = arg, .name_len = len };
        if (eq) {
                ret->value = eq + 1;
        } else if (k->type == CFG_BOOL) {
                ret->value = "true"; /* never takes the next word */
        } else if (*i + 1 < argc) {
                ret->value = argv[++*i];
        } else {
                *reterr = xasprintf("%.*s: missing value", len, arg);
                return CM_EINVAL;
        }
        return 0;
}

static int unexpected_argument(const char *arg, char **reterr)
{
        *reterr = xasprintf("unexpected argument \"%s\"", arg);
        return CM_EINVAL;
}

static int flags_scan(
        int argc, char *const argv[], struct flag_arg *flags, size_t *ret_n, char **reterr)
{
        size_t n = 0;
        int r;

        for (int i = 1; i < argc; i++) {
                const char *arg = argv[i];

                /* capmaas takes no operands, so "--" may only end the line. */
                if (strcmp(arg, "--") == 0)
                        return i + 1 < argc ? unexpected_argument(argv[i + 1], reterr) : 0;
                if (arg[0] != '-' || arg[1] == '\0')
                        return unexpected_argument(arg, reterr);
                r = flag_scan_one(argc, argv, &i, &flags[n], reterr);
                if (r < 0)
                        return r;
                *ret_n = ++n;
        }
        return 0;
}

static int flags_apply(struct config *c, const struct flag_arg *flags, size_t n, char **reterr)
{
        char *where;
        int r;

        for (size_t i = 0; i < n; i++) {
                where = xstrndup(flags[i].arg, (size_t)flags[i].name_len);
                r = key_set(c, flags[i].key, flags[i].value, where, reterr);
                free(where);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* -h/--help or --version: the caller prints and exits, so other sources are not read
 * (a broken config file must not prevent --help). */
static bool flags_want_exit(const struct flag_arg *flags, size_t n)
{
        bool v;

        for (size_t i = 0; i < n; i++) {
                size_t off = flags[i].key->offset;

                if ((off == OFF(help) || off == OFF(version)) &&
                    parse_bool(flags[i].value, &v) == 0 && v)
                        return true;
        }
        return false;
}

static const char *config_path(const struct flag_arg *flags, size_t n, char *const envp[])
{
        const char *path = NULL;

        for (size_t i = 0; i < n; i++)
                if (flags[i].key->offset == OFF(config_file))
                        path = flags[i].value;
        if (!path)
                path = env_find(envp, ENV_PREFIX "CONFIG");
        return path && *path ? path : NULL;
}

/* ---- YAML file ---- */

static int node_fail(
        int r, const char *path, const yaml_node_t *node, char **reterr, const char *fmt, ...)
        PRINTF_LIKE(5, 6);

static int node_fail(
        int r, const char *path, const yaml_node_t *node, char **reterr, const char *fmt, ...)
{
        va_list ap;
        char *msg;

        va_start(ap, fmt);
        msg = xvasprintf(fmt, ap);
        va_end(ap);
        *reterr = xasprintf("%s:%zu:%zu: %s", path, node->start_mark.line + 1,
                            node->start_mark.column + 1, msg);
        free(msg);
        return r;
}

/* A plain scalar that YAML reads as null: "", "~", "null". */
static bool node_is_null(const yaml_node_t *node)
{
        static const char *const nulls[] = { "", "~", "null", "Null", "NULL" };

        if (node->type != YAML_SCALAR_NODE || node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
                return false;
        return name_index(nulls, ARRAY_SIZE(nulls), (const char *)node->data.scalar.value) >= 0;
}

static int yaml_apply_pair(struct config *c,
                           const char *path,
                           yaml_document_t *doc,
                           const yaml_node_pair_t *pair,
                           bool seen[],
                           char **reterr)
{
        yaml_node_t *kn = yaml_document_get_node(doc, pair->key);
        yaml_node_t *vn = yaml_document_get_node(doc, pair->value);
        const struct cfg_key *k = NULL;
        char *where;
        int r;

        if (kn->type == YAML_SCALAR_NODE)
                k = key_find((const char *)kn->data.scalar.value, kn->data.scalar.length);
        if (kn->type != YAML_SCALAR_NODE)
                return node_fail(CM_EINVAL, path, kn, reterr, "expected an option name");
        if (!k || ((k->deny & SRC_FILE) && !k->deny_hint))
                return node_fail(CM_EINVAL, path, kn, reterr, "unknown key \"%s\"",
                                 (const char *)kn->data.scalar.value);
        if (k->deny & SRC_FILE)
                return node_fail(CM_EINVAL, path, kn, reterr, "%s: not accepted in a file; %s",
                                 k->name, k->deny_hint);
        if (seen[k - keys])
                return node_fail(CM_EINVAL, path, kn, reterr, "duplicate key \"%s\"", k->name);
        seen[k - keys] = true;
        if (vn->type != YAML_SCALAR_NODE)
                return node_fail(CM_EINVAL, path, vn, reterr, "%s: expected a single value",
                                 k->name);
        if (node_is_null(vn))
                return node_fail(CM_EINVAL, path, vn, reterr, "%s: missing value", k->name);
        where = xasprintf("%s:%zu:%zu: %s", path, vn->start_mark.line + 1,
                          vn->start_mark.column + 1, k->name);
        r = key_set(c, k, (const char *)vn->data.scalar.value, where, reterr);
        free(where);
        return r;
}

static int yaml_apply_root(struct config *c, const char *path, yaml_document_t *doc, char **reterr)
{
        yaml_node_t *root = yaml_document_get_root_node(doc);
        bool seen[ARRAY_SIZE(keys)] = { false };
        int r;

        if (!root || node_is_null(root))
                return 0; /* an empty file sets nothing */
        if (root->type != YAML_MAPPING_NODE)
                return node_fail(CM_EPARSE, path, root, reterr,
                                 "expected a mapping of option names to values");
        for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
             p++) {
                r = yaml_apply_pair(c, path, doc, p, seen, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int yaml_syntax_error(const char *path, const yaml_parser_t *parser, char **reterr)
{
        *reterr = xasprintf("%s:%zu:%zu: invalid YAML: %s%s%s%s", path,
                            parser->problem_mark.line + 1, parser->problem_mark.column + 1,
                            parser->problem ? parser->problem : "syntax error",
                            parser->context ? " (" : "", parser->context ? parser->context : "",
                            parser->context ? ")" : "");
        return CM_EPARSE;
}

/* After the first document only the end of the stream may follow. */
static int yaml_check_single(const char *path, yaml_parser_t *parser, char **reterr)
{
        yaml_document_t doc;
        yaml_node_t *root;
        int r = 0;

        if (!yaml_parser_load(parser, &doc))
                return yaml_syntax_error(path, parser, reterr);
        root = yaml_document_get_root_node(&doc);
        if (root)
                r = node_fail(CM_EPARSE, path, root, reterr, "expected a single YAML document");
        yaml_document_delete(&doc);
        return r;
}

static int file_apply(struct config *c, const char *path, char **reterr)
{
        yaml_parser_t parser;
        yaml_document_t doc;
        bool parser_ready = false;
        char *data = NULL;
        size_t len = 0;
        int r;

        r = read_file_capped(path, CONFIG_FILE_MAX, &data, &len, reterr);
        if (r < 0)
                goto out;
        parser_ready = yaml_parser_initialize(&parser) != 0;
        if (!parser_ready) {
                *reterr = xasprintf("%s: cannot initialise the YAML parser", path);
                r = CM_ENOMEM;
                goto out;
        }
        yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
        if (!yaml_parser_load(&parser, &doc)) {
                r = yaml_syntax_error(path, &parser, reterr);
                goto out;
        }
        r = yaml_apply_root(c, path, &doc, reterr);
        yaml_document_delete(&doc);
        if (r == 0)
                r = yaml_check_single(path, &parser, reterr);
out:
        if (parser_ready)
                yaml_parser_delete(&parser);
        free(data);
        return r;
}

/* ---- cross-field rules ---- */

static int check_leader_election(const struct config *c, char **reterr)
{
        char a[48], b[48];

        /* client-go leaderelection.NewLeaderElector: leaseDuration > renewDeadline >
         * JitterFactor (1.2) * retryPeriod. */
        if (c->leader_elect_renew_deadline_ms >= c->leader_elect_lease_duration_ms) {
                fmt_duration(c->leader_elect_renew_deadline_ms, a, sizeof(a));
                fmt_duration(c->leader_elect_lease_duration_ms, b, sizeof(b));
                *reterr = xasprintf("leader-elect-renew-deadline (%s) must be shorter than "
                                    "leader-elect-lease-duration (%s)",
                                    a, b);
                return CM_EINVAL;
        }
        if (c->leader_elect_renew_deadline_ms * 10 <= c->leader_elect_retry_period_ms * 12) {
                fmt_duration(c->leader_elect_renew_deadline_ms, a, sizeof(a));
                fmt_duration(c->leader_elect_retry_period_ms, b, sizeof(b));
                *reterr = xasprintf("leader-elect-renew-deadline (%s) must be longer than 1.2 "
                                    "times leader-elect-retry-period (%s)",
                                    a, b);
                return CM_EINVAL;
        }
        return 0;
}

/* MAAS keys are consumer_key:token_key:token_secret; the value itself is never shown. */
static int check_api_key(const struct config *c, char **reterr)
{
        const char *s = c->maas_api_key, *p1, *p2;

        if (!s)
                return 0;
        p1 = strchr(s, ':');
        p2 = p1 ? strchr(p1 + 1, ':') : NULL;
        if (!p1 || !p2 || p1 == s || p2 == p1 + 1 || p2[1] == '\0' || strchr(p2 + 1, ':') ||
            !only_chars(s, is_graph, "")) {
                *reterr = xstrdup("MAAS API key: expected consumer_key:token_key:token_secret");
                return CM_EINVAL;
        }
        return 0;
}

static int (*const cross_checks[])(const struct config *c, char **reterr) = {
        check_leader_election,
        check_api_key,
};

static int validate(const struct config *c, char **reterr)
{
        int r;

        for (size_t i = 0; i < ARRAY_SIZE(cross_checks); i++) {
                r = cross_checks[i](c, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- public ---- */

static int load_sources(struct config *c,
                        int argc,
                        char *const argv[],
                        char *const envp[],
                        struct flag_arg *flags,
                        char **reterr)
{
        const char *path;
        size_t n = 0;
        int r;

        r = flags_scan(argc, argv, flags, &n, reterr);
        if (r < 0)
                return r;
        if (flags_want_exit(flags, n)) {
                r = defaults_apply(c, NULL, reterr);
                return r < 0 ? r : flags_apply(c, flags, n, reterr);
        }
        r = defaults_apply(c, envp, reterr);
        path = config_path(flags, n, envp);
        if (r == 0 && path)
                r = file_apply(c, path, reterr);
        if (r == 0)
                r = env_apply(c, envp, reterr);
        if (r == 0)
                r = flags_apply(c, flags, n, reterr);
        if (r == 0)
                r = validate(c, reterr);
        return r;
}

int config_load(
        int argc, char *const argv[], char *const envp[], struct config **ret, char **reterr)
{
        struct flag_arg *flags;
        struct config *c;
        char *err = NULL;
        int r;

        c = xcalloc(1, sizeof(*c));
        flags = xcalloc(argc > 0 ? (size_t)argc : 1, sizeof(*flags));
        r = load_sources(c, argc, argv, envp, flags, &err);
        free(flags);
        if (r < 0) {
                config_free(c);
                *reterr = err;
                return r;
        }
        *ret = c;
        return 0;
}

struct config *config_free(struct config *c)
{
        char **p;

        if (!c)
                return NULL;
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
                if (keys[i].type != CFG_STRING && keys[i].type != CFG_SECRET_FILE)
                        continue;
                p = (char **)(void *)((char *)c + keys[i].offset);
                secret_free(*p); /* two rows share maas_api_key: NULL after the first */
                *p = NULL;
        }
        free(c);
        return NULL;
}

/* ---- help ---- */

static const char help_intro[] =
        "Usage: capmaas [flags]\n"
        "\n"
        "capmaas is the Cluster API infrastructure provider for Canonical MAAS: the\n"
        "admission webhooks and the MaasCluster and MaasMachine controllers.\n"
        "\n"
        "Every option can be given as a flag (--name=value or --name value; booleans as\n"
        "--name or --name=false; one dash works too), as the environment variable shown,\n"
        "or as \"name: value\" in the YAML file given by --config. Flags win over the\n"
        "environment, the environment over the file, the file over the defaults. Empty\n"
        "environment variables are ignored.\n";

/* Writes text indented by 6 spaces and wrapped at HELP_WIDTH columns on spaces. */
static void help_wrapped(FILE *out, const char *text)
{
        const size_t width = HELP_WIDTH - 6;
        size_t cut;

        while (*text) {
                cut = strlen(text);
                if (cut > width) {
                        for (cut = width; cut > 0 && text[cut] != ' '; cut--)
                                ;
                        if (cut == 0)
                                cut = strcspn(text, " ");
                }
                fprintf(out, "      %.*s\n", (int)cut, text);
                text += cut;
                text += strspn(text, " ");
        }
}

static void help_names(FILE *out, const struct cfg_key *k)
{
        const char *metavar = k->metavar ? k->metavar : type_ops[k->type].metavar;

        if (k->deny & SRC_FLAG) {
                fprintf(out, "  (environment only: %s)\n", k->alias_env ? k->alias_env : k->name);
                return;
        }
        fputs("  ", out);
        if (k->short_name)
                fprintf(out, "-%s, ", k->short_name);
        fprintf(out, "%s%s%s%s\n", strlen(k->name) == 1 ? "-" : "--", k->name, *metavar ? " " : "",
                metavar);
}

static void help_default(FILE *out, const struct cfg_key *k)
{
        if (k->secret || !k->def)
                return;
        fputs("      default: ", out);
        if (k->default_env)
                fprintf(out, "$%s, else ", k->default_env);
        if (k->type == CFG_STRING)
                fprintf(out, "\"%s\"\n", k->def);
        else
                fprintf(out, "%s\n", k->def);
}

static void help_env(FILE *out, const struct cfg_key *k)
{
        char name[ENV_NAME_MAX];

        if (k->deny & SRC_ENV)
                return;
        env_name(k, name);
        fprintf(out, "      env: %s%s%s%s\n", name, k->alias_env ? ", " : "",
                k->alias_env ? k->alias_env : "", k->alias_env ? " (the first wins)" : "");
}

void config_print_help(FILE *out)
{
        fputs(help_intro, out);
        for (int g = 0; g < GROUP_COUNT; g++) {
                fprintf(out, "\n%s:\n", group_titles[g]);
                for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
                        if ((int)keys[i].group != g)
                                continue;
                        help_names(out, &keys[i]);
                        help_wrapped(out, keys[i].help);
                        help_default(out, &keys[i]);
                        help_env(out, &keys[i]);
                }
        }
}
