/*
 * config: one KEY TABLE describes every option (config_keys.c); one generic setter
 * converts text into a field (config_values.c), so every source goes through exactly the
 * same checks, and --help is generated from the same rows (config_help.c).
 *
 * Precedence is implemented by applying the sources from weakest to strongest onto one
 * struct: defaults, then the YAML file (config_file.c), then the environment, then the
 * flags (config_sources.c; argv is scanned first, for syntax and to find --config).
 * Cross-field rules run last. Single-threaded: called once from main before any thread
 * starts.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "config_priv.h"
#include "err.h"
#include "xalloc.h"

/* ---- cross-field rules ---- */

static int check_leader_election(const struct config *c, char **reterr)
{
        char a[48], b[48];

        /* client-go leaderelection.NewLeaderElector: leaseDuration > renewDeadline >
         * JitterFactor (1.2) * retryPeriod. */
        if (c->leader_elect_renew_deadline_ms >= c->leader_elect_lease_duration_ms) {
                config_fmt_duration(c->leader_elect_renew_deadline_ms, a, sizeof(a));
                config_fmt_duration(c->leader_elect_lease_duration_ms, b, sizeof(b));
                *reterr = xasprintf("leader-elect-renew-deadline (%s) must be shorter than "
                                    "leader-elect-lease-duration (%s)",
                                    a, b);
                return CM_EINVAL;
        }
        if (c->leader_elect_renew_deadline_ms * 10 <= c->leader_elect_retry_period_ms * 12) {
                config_fmt_duration(c->leader_elect_renew_deadline_ms, a, sizeof(a));
                config_fmt_duration(c->leader_elect_retry_period_ms, b, sizeof(b));
                *reterr = xasprintf("leader-elect-renew-deadline (%s) must be longer than 1.2 "
                                    "times leader-elect-retry-period (%s)",
                                    a, b);
                return CM_EINVAL;
        }
        return 0;
}

/* MAAS config_keys are consumer_key:token_key:token_secret; the value itself is never shown. */
static int check_api_key(const struct config *c, char **reterr)
{
        const char *s = c->maas_api_key, *p1, *p2;

        if (!s)
                return 0;
        p1 = strchr(s, ':');
        p2 = p1 ? strchr(p1 + 1, ':') : NULL;
        if (!p1 || !p2 || p1 == s || p2 == p1 + 1 || p2[1] == '\0' || strchr(p2 + 1, ':') ||
            !config_only_graph(s)) {
                *reterr = xstrdup("MAAS API key: expected consumer_key:token_key:token_secret");
                return CM_EINVAL;
        }
        return 0;
}

static int (*const cross_checks[])(const struct config *c, char **reterr) = {
        check_leader_election,
        check_api_key,
};

/* --diagnostics-address defaults to :8443, except beside an explicit --metrics-bind-addr
 * alone: the reference provider's Deployment passes that and runs kube-rbac-proxy on :8443
 * in the same pod, so binding :8443 too would break it. */
static void default_diagnostics(struct config *c)
{
        if (c->diagnostics_address)
                return;
        c->diagnostics_address = xstrdup(strcmp(c->metrics_bind_addr, "0") != 0 ? "0" : ":8443");
}

static int validate(struct config *c, char **reterr)
{
        int r;

        default_diagnostics(c);
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

        r = config_flags_scan(argc, argv, flags, &n, reterr);
        if (r < 0)
                return r;
        if (config_flags_want_exit(flags, n)) {
                r = config_defaults_apply(c, NULL, reterr);
                return r < 0 ? r : config_flags_apply(c, flags, n, reterr);
        }
        r = config_defaults_apply(c, envp, reterr);
        path = config_file_path(flags, n, envp);
        if (r == 0 && path)
                r = config_file_apply(c, path, reterr);
        if (r == 0)
                r = config_env_apply(c, envp, reterr);
        if (r == 0)
                r = config_flags_apply(c, flags, n, reterr);
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
        for (size_t i = 0; i < config_keys_n; i++) {
                if (config_keys[i].type != CFG_STRING && config_keys[i].type != CFG_SECRET_FILE)
                        continue;
                p = (char **)(void *)((char *)c + config_keys[i].offset);
                config_secret_free(*p); /* two rows share maas_api_key: NULL after the first */
                *p = NULL;
        }
        free(c);
        return NULL;
}
