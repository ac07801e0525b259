#pragma once
/*
 * config_fixture: helpers for the config tests (tests/unit/server/config_fixture.c). Files
 * go into config_test_dir, which config_test_group_setup makes and
 * config_test_group_teardown empties and removes; use them as a cmocka group's setup and
 * teardown. Single-threaded, like config_load.
 */

#include <stddef.h>

#include "config.h"

#define ARGS(...)           ((const char *const[]){ __VA_ARGS__, NULL })
#define NONE                ((const char *const[]){ NULL })
#define CONFIG_TEST_DIR_MAX 64

extern char config_test_dir[CONFIG_TEST_DIR_MAX];

int config_test_group_setup(void **state);
int config_test_group_teardown(void **state);
/* Writes content to config_test_dir/name; returns the path (caller frees). */
char *config_test_write_file(const char *name, const char *content);
/* A file of size '#' characters (a YAML comment); returns the path (caller frees). */
char *config_test_write_filler(const char *name, size_t size);
/* A heap copy of a NULL-terminated list, optionally with first prepended. */
char **config_test_dupv(const char *first, const char *const *v, int *ret_n);
void config_test_freev(char **v);
/* config_load with argv = "capmaas" + args and envp = env. */
int config_test_load(const char *const *args,
                     const char *const *env,
                     struct config **ret,
                     char **reterr);
/* Loads and fails the test on an error. */
struct config *config_test_load_ok(const char *const *args, const char *const *env);
/* Expects config_load to fail with rc and exactly the message msg. */
void config_test_expect_error(const char *const *args,
                              const char *const *env,
                              int rc,
                              const char *msg);
/* Loads a YAML text from a file and expects an error "<path><suffix>". */
void config_test_expect_file_error(const char *name, const char *yaml, int rc, const char *suffix);

/* Every option with a value other than its default, for flags, environment and file. */
struct config_test_opt {
        const char *name;
        const char *value; /* NULL = the API key file path, filled in at run time */
};
extern const struct config_test_opt config_test_opts[];
extern const size_t config_test_opts_n;
/* CAPMAAS_ + flag in upper snake case (caller frees). */
char *config_test_env_name(const char *flag);
