/*
 * config_sources: the sources other than the file — the built-in defaults (and the
 * variables that replace them), the environment, and the command line, which is scanned
 * first for syntax and to find --config.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "config_priv.h"
#include "err.h"
#include "parse.h"
#include "xalloc.h"

/* ---- environment ---- */

const char *config_env_find(char *const envp[], const char *name)
{
        size_t len = strlen(name);

        for (size_t i = 0; envp && envp[i]; i++)
                if (strncmp(envp[i], name, len) == 0 && envp[i][len] == '=')
                        return envp[i] + len + 1;
        return NULL;
}

/* CAPMAAS_ + the flag name in upper snake case. */
void config_env_name(const struct cfg_key *k, char out[static ENV_NAME_MAX])
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
        const char *v = config_env_find(envp, var);
        char *where;
        int r;

        if (!v || *v == '\0')
                return 0;
        where = xasprintf("$%s", var);
        r = config_key_set(c, k, v, where, reterr);
        free(where);
        return r;
}

int config_env_apply(struct config *c, char *const envp[], char **reterr)
{
        char name[ENV_NAME_MAX];
        int r;

        for (size_t i = 0; i < config_keys_n; i++) {
                if (config_keys[i].deny & SRC_ENV)
                        continue;
                config_env_name(&config_keys[i], name);
                r = config_keys[i].alias_env ? env_set_from(c, &config_keys[i], envp,
                                                            config_keys[i].alias_env, reterr)
                                             : 0;
                if (r == 0)
                        r = env_set_from(c, &config_keys[i], envp, name, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

int config_defaults_apply(struct config *c, char *const envp[], char **reterr)
{
        int r;

        for (size_t i = 0; i < config_keys_n; i++) {
                r = config_keys[i].def ? config_key_set(c, &config_keys[i], config_keys[i].def,
                                                        config_keys[i].name, reterr)
                                       : 0;
                if (r == 0 && config_keys[i].default_env)
                        r = env_set_from(c, &config_keys[i], envp, config_keys[i].default_env,
                                         reterr);
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
        k = config_key_find(name, (size_t)(arg + len - name));
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

int config_flags_scan(
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

int config_flags_apply(struct config *c, const struct flag_arg *flags, size_t n, char **reterr)
{
        char *where;
        int r;

        for (size_t i = 0; i < n; i++) {
                where = xstrndup(flags[i].arg, (size_t)flags[i].name_len);
                r = config_key_set(c, flags[i].key, flags[i].value, where, reterr);
                free(where);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* -h/--help or --version: the caller prints and exits, so other sources are not read
 * (a broken config file must not prevent --help). */
bool config_flags_want_exit(const struct flag_arg *flags, size_t n)
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

const char *config_file_path(const struct flag_arg *flags, size_t n, char *const envp[])
{
        const char *path = NULL;

        for (size_t i = 0; i < n; i++)
                if (flags[i].key->offset == OFF(config_file))
                        path = flags[i].value;
        if (!path)
                path = config_env_find(envp, ENV_PREFIX "CONFIG");
        return path && *path ? path : NULL;
}
