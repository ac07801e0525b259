/*
 * config_lists: the two list-valued options. --feature-gates takes Cluster API's gates as
 * component-base parses them ("Key=bool" pairs, comma separated, spaces around items
 * ignored; an unknown key or a non-boolean value is an error naming it); capmaas only
 * records them. --tls-cipher-suites takes the Go/IANA suite names Kubernetes components
 * accept and becomes GnuTLS priority items: GnuTLS enables suites by their parts, so the
 * listener allows the key exchanges, ciphers and MACs of the listed suites (any suite made
 * of those parts) — for TLS 1.2, and the listed AEAD ciphers for TLS 1.3.
 */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "config_priv.h"
#include "err.h"
#include "parse.h"
#include "xalloc.h"

#define LIST_ITEM_MAX 128 /* longer than any gate or suite name */

static const char *const gate_names[FEATURE_GATE_COUNT] = {
        [FEATURE_MACHINE_POOL] = "MachinePool",
        [FEATURE_CLUSTER_RESOURCE_SET] = "ClusterResourceSet",
        [FEATURE_CLUSTER_TOPOLOGY] = "ClusterTopology",
        [FEATURE_RUNTIME_SDK] = "RuntimeSDK",
        [FEATURE_KUBEADM_BOOTSTRAP_FORMAT_IGNITION] = "KubeadmBootstrapFormatIgnition",
        [FEATURE_MACHINE_SET_PREFLIGHT_CHECKS] = "MachineSetPreflightChecks",
        [FEATURE_MACHINE_WAIT_FOR_VOLUME_DETACH_CONSIDER_VOLUME_ATTACHMENTS] =
                "MachineWaitForVolumeDetachConsiderVolumeAttachments",
        [FEATURE_PRIORITY_QUEUE] = "PriorityQueue",
        [FEATURE_RECONCILER_RATE_LIMITING] = "ReconcilerRateLimiting",
        [FEATURE_IN_PLACE_UPDATES] = "InPlaceUpdates",
        [FEATURE_MACHINE_TAINT_PROPAGATION] = "MachineTaintPropagation",
        [FEATURE_ALL_ALPHA] = "AllAlpha",
        [FEATURE_ALL_BETA] = "AllBeta",
};

/* One Go/IANA cipher suite as GnuTLS parts; kx NULL for a TLS 1.3 suite, mac NULL for a
 * suite GnuTLS cannot offer (RC4). */
struct cipher_suite {
        const char *name;
        const char *kx;
        const char *cipher;
        const char *mac;
};

static const struct cipher_suite suites[] = {
        { "TLS_AES_128_GCM_SHA256", NULL, "AES-128-GCM", "AEAD" },
        { "TLS_AES_256_GCM_SHA384", NULL, "AES-256-GCM", "AEAD" },
        { "TLS_CHACHA20_POLY1305_SHA256", NULL, "CHACHA20-POLY1305", "AEAD" },
        { "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA", "AES-128-GCM", "AEAD" },
        { "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA", "AES-256-GCM", "AEAD" },
        { "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA", "AES-128-GCM", "AEAD" },
        { "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA", "AES-256-GCM", "AEAD" },
        { "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA", "CHACHA20-POLY1305",
          "AEAD" },
        { "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", "ECDHE-ECDSA", "CHACHA20-POLY1305", "AEAD" },
        { "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA", "CHACHA20-POLY1305", "AEAD" },
        { "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "ECDHE-RSA", "CHACHA20-POLY1305", "AEAD" },
        { "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA", "AES-128-CBC", "SHA1" },
        { "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA", "AES-256-CBC", "SHA1" },
        { "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA", "AES-128-CBC", "SHA1" },
        { "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA", "AES-256-CBC", "SHA1" },
        { "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "ECDHE-ECDSA", "AES-128-CBC", "SHA256" },
        { "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "ECDHE-RSA", "AES-128-CBC", "SHA256" },
        { "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", "ECDHE-RSA", "3DES-CBC", "SHA1" },
        { "TLS_RSA_WITH_AES_128_GCM_SHA256", "RSA", "AES-128-GCM", "AEAD" },
        { "TLS_RSA_WITH_AES_256_GCM_SHA384", "RSA", "AES-256-GCM", "AEAD" },
        { "TLS_RSA_WITH_AES_128_CBC_SHA", "RSA", "AES-128-CBC", "SHA1" },
        { "TLS_RSA_WITH_AES_256_CBC_SHA", "RSA", "AES-256-CBC", "SHA1" },
        { "TLS_RSA_WITH_AES_128_CBC_SHA256", "RSA", "AES-128-CBC", "SHA256" },
        { "TLS_RSA_WITH_3DES_EDE_CBC_SHA", "RSA", "3DES-CBC", "SHA1" },
        { "TLS_RSA_WITH_RC4_128_SHA", "RSA", "ARCFOUR-128", NULL },
        { "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", "ECDHE-ECDSA", "ARCFOUR-128", NULL },
        { "TLS_ECDHE_RSA_WITH_RC4_128_SHA", "ECDHE-RSA", "ARCFOUR-128", NULL },
};

_Static_assert(ARRAY_SIZE(suites) <= 256, "suite ids are uint8_t");

/* Splits s on commas into trimmed items and calls fn on each non-empty one. */
static int for_each_item(const char *s,
                         int (*fn)(const char *item, void *field, char **ret_why),
                         void *field,
                         char **ret_why)
{
        char item[LIST_ITEM_MAX];
        size_t len;
        int r;

        for (const char *p = s; *p;) {
                p += strspn(p, " \t");
                len = strcspn(p, ",");
                while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
                        len--;
                if (len >= sizeof(item)) {
                        *ret_why = xasprintf("item \"%.40s…\" is too long", p);
                        return CM_EINVAL;
                }
                memcpy(item, p, len);
                item[len] = '\0';
                if (len > 0) {
                        r = fn(item, field, ret_why);
                        if (r < 0)
                                return r;
                }
                p += strcspn(p, ",");
                if (*p == ',')
                        p++;
        }
        return 0;
}

/* ---- feature gates ---- */

static int set_one_gate(const char *item, void *field, char **ret_why)
{
        struct feature_gates *g = field;
        const char *eq = strchr(item, '=');
        char name[LIST_ITEM_MAX];
        size_t len = eq ? (size_t)(eq - item) : strlen(item);
        bool on;
        int i;

        memcpy(name, item, len);
        name[len] = '\0';
        while (len > 0 && name[len - 1] == ' ')
                name[--len] = '\0';
        for (i = 0; i < FEATURE_GATE_COUNT && strcmp(gate_names[i], name) != 0; i++)
                ;
        if (i == FEATURE_GATE_COUNT) {
                *ret_why = xasprintf("unrecognized feature gate: %s", name);
                return CM_EINVAL;
        }
        if (!eq) {
                *ret_why = xasprintf("missing bool value for %s", name);
                return CM_EINVAL;
        }
        if (parse_bool(eq + 1 + strspn(eq + 1, " "), &on) < 0) {
                *ret_why =
                        xasprintf("invalid value of %s=%s: expected true or false", name, eq + 1);
                return CM_EINVAL;
        }
        g->set |= 1u << i;
        if (on)
                g->enabled |= 1u << i;
        else
                g->enabled &= ~(1u << i);
        return 0;
}

int config_set_feature_gates(const char *s, void *field, char **ret_why)
{
        struct feature_gates next = *(struct feature_gates *)field;
        int r;

        /* All or nothing: a bad item leaves the gates as they were. */
        r = for_each_item(s, set_one_gate, &next, ret_why);
        if (r == 0)
                *(struct feature_gates *)field = next;
        return r;
}

const char *config_feature_gate_name(enum feature_gate g)
{
        return (unsigned)g < FEATURE_GATE_COUNT ? gate_names[g] : "?";
}

char *config_feature_gates_format(const struct feature_gates *g)
{
        struct buf b;

        buf_init(&b, 4096);
        for (unsigned i = 0; i < FEATURE_GATE_COUNT; i++)
                if (g->set & (1u << i))
                        (void)!buf_printf(&b, "%s%s=%s", b.len ? "," : "", gate_names[i],
                                          g->enabled & (1u << i) ? "true" : "false");
        return buf_take(&b, NULL); /* 13 gates fit in 4 KiB */
}

/* ---- cipher suites ---- */

static int add_suite(const char *item, void *field, char **ret_why)
{
        struct tls_cipher_suites *cs = field;

        for (size_t i = 0; i < ARRAY_SIZE(suites); i++) {
                if (strcmp(suites[i].name, item) != 0)
                        continue;
                if (!suites[i].mac) {
                        *ret_why = xasprintf("cipher suite %s is not supported: GnuTLS has "
                                             "no RC4",
                                             item);
                        return CM_EINVAL;
                }
                if (cs->n == TLS_CIPHER_SUITES_MAX) {
                        *ret_why = xasprintf("more than %d cipher suites", TLS_CIPHER_SUITES_MAX);
                        return CM_EINVAL;
                }
                cs->ids[cs->n++] = (uint8_t)i;
                return 0;
        }
        *ret_why = xasprintf("unknown cipher suite %s (expected a Go/IANA name such as "
                             "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)",
                             item);
        return CM_EINVAL;
}

int config_set_tls_cipher_suites(const char *s, void *field, char **ret_why)
{
        struct tls_cipher_suites next = { 0 };
        int r;

        r = for_each_item(s, add_suite, &next, ret_why);
        if (r == 0)
                *(struct tls_cipher_suites *)field = next;
        return r;
}

/* Appends ":+<part>" to b unless an earlier suite added it already. */
static void add_part(struct buf *b, const char *part)
{
        char *item;

        if (!part)
                return;
        item = xasprintf(":+%s", part);
        if (!strstr(b->data, item))
                (void)!buf_append_str(b, item); /* 32 short items fit in 4 KiB */
        free(item);
}

char *config_tls_cipher_priorities(const struct tls_cipher_suites *s)
{
        static const char base[] = ":-KX-ALL:-CIPHER-ALL:-MAC-ALL";
        struct buf b;

        if (s->n == 0)
                return NULL;
        buf_init(&b, 4096);
        (void)!buf_append_str(&b, base);
        for (unsigned i = 0; i < s->n; i++)
                add_part(&b, suites[s->ids[i]].kx);
        for (unsigned i = 0; i < s->n; i++)
                add_part(&b, suites[s->ids[i]].cipher);
        for (unsigned i = 0; i < s->n; i++)
                add_part(&b, suites[s->ids[i]].mac);
        return buf_take(&b, NULL);
}
