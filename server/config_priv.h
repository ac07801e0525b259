#pragma once
/*
 * config_priv: the option table and its machinery, shared by the files of the
 * configuration (server/config*.c). Single-threaded like config_load itself.
 *
 *   config_keys.c     the KEY TABLE, the string validators and the enum setters
 *   config_lists.c    the list-valued options: feature gates and TLS cipher suites
 *   config_values.c   text -> field for every type, the "expected ..." texts, capped file reads
 *   config_sources.c  the defaults, the environment and the command line
 *   config_file.c     the YAML file
 *   config_help.c     --help, generated from the table
 *   config.c          the order of the sources, the cross-field rules, config_free
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"
#include "config.h"

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
        CFG_CUSTOM,      /* converted by the row's set_custom, which may say why it refused */
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
        GROUP_DIAGNOSTICS,
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
        /* CFG_CUSTOM: CM_EINVAL, with *ret_why (malloc'd) naming the bad item or without
         * it for "invalid value … expected <expect>" */
        int (*set_custom)(const char *s, void *field, char **ret_why);
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

/* The KEY TABLE (config_keys.c): one row per option, in --help order. */
extern const struct cfg_key config_keys[];
extern const size_t config_keys_n;
extern const char *const config_group_titles[GROUP_COUNT];

/* Index of s in names[0..n), or CM_EINVAL. */
int config_name_index(const char *const *names, size_t n, const char *s);
/* Every character of s is printable and not a space. */
bool config_only_graph(const char *s);

/* config_values.c */
/* Reads a whole regular file of at most max bytes into a new NUL-terminated string; on
 * failure *reterr (malloc'd) names path. */
MUST_CHECK int config_read_file_capped(
        const char *path, size_t max, char **ret, size_t *ret_len, char **reterr);
/* Wipes and frees a string that may hold a secret; accepts NULL. */
void config_secret_free(char *s);
/* Formats milliseconds as a Go duration ("1h30m", "500ms", "0s"). */
void config_fmt_duration(uint64_t ms, char *out, size_t size);
/* The row named name[0..len) (long or short name), or NULL. */
const struct cfg_key *config_key_find(const char *name, size_t len);
/* Sets key k from text s. On failure *reterr = "<where>: invalid value "s": expected …"
 * (the value is left out for secrets) or "<where>: <reason>". */
MUST_CHECK int config_key_set(
        struct config *c, const struct cfg_key *k, const char *s, const char *where, char **reterr);
/* The --help placeholder of a type ("DURATION"; "" for booleans). */
const char *config_type_metavar(enum cfg_type type);

/* config_sources.c */
/* The value of variable name in envp, or NULL. */
const char *config_env_find(char *const envp[], const char *name);
/* CAPMAAS_ + the flag name in upper snake case. */
void config_env_name(const struct cfg_key *k, char out[static ENV_NAME_MAX]);
/* The built-in defaults, and the variables that replace them (none when envp is NULL). */
MUST_CHECK int config_defaults_apply(struct config *c, char *const envp[], char **reterr);
/* Every CAPMAAS_<NAME> variable and alias; empty ones count as unset. */
MUST_CHECK int config_env_apply(struct config *c, char *const envp[], char **reterr);
/* Checks the syntax of argv into flags[0..*ret_n) (values borrowed from argv). */
MUST_CHECK int config_flags_scan(
        int argc, char *const argv[], struct flag_arg *flags, size_t *ret_n, char **reterr);
/* Sets every scanned flag, in order. */
MUST_CHECK int config_flags_apply(struct config *c,
                                  const struct flag_arg *flags,
                                  size_t n,
                                  char **reterr);
/* -h/--help or --version: the caller prints and exits, so other sources are not read
 * (a broken config file must not prevent --help). */
bool config_flags_want_exit(const struct flag_arg *flags, size_t n);
/* --config, else $CAPMAAS_CONFIG; NULL when neither is set (or empty). */
const char *config_file_path(const struct flag_arg *flags, size_t n, char *const envp[]);

/* config_lists.c */
/* --feature-gates: "Key=bool,…" merged into a struct feature_gates (later keys win). */
int config_set_feature_gates(const char *s, void *field, char **ret_why);
/* --tls-cipher-suites: a comma list of Go/IANA names into a struct tls_cipher_suites. */
int config_set_tls_cipher_suites(const char *s, void *field, char **ret_why);

/* config_file.c: applies the YAML file at path; errors name path:line:column. */
MUST_CHECK int config_file_apply(struct config *c, const char *path, char **reterr);
