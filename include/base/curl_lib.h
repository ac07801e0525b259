#pragma once
/*
 * curl_lib: libcurl loaded on first use. A capmaas that never makes a client request
 * (--webhooks-only without the MAAS checks) never maps libcurl and its dependency tree
 * (libssh2 -> OpenSSL's libcrypto, Kerberos, LDAP, SASL, RTMP: about 4.7 MiB resident), so
 * it starts at about 5.7 MiB instead of 10.5 MiB.
 *
 * curl_lib_load() dlopens the library, resolves the functions of struct curl_lib and calls
 * curl_global_init() exactly once per process; it is thread-safe (pthread_once) and every
 * later call returns the same table at once. The prototypes come from <curl/curl.h>
 * (typeof), so they cannot drift from the headers the build uses.
 *
 * Ownership: the table is static and lives until curl_lib_cleanup() at exit.
 * Threads: curl_lib_load from any thread; curl_lib_cleanup from main after every thread
 * that used libcurl has stopped.
 */

#include <curl/curl.h>

#include "compiler.h"

struct curl_lib {
        __typeof__(curl_global_init) *global_init;
        __typeof__(curl_global_cleanup) *global_cleanup;
        __typeof__(curl_easy_init) *easy_init;
        __typeof__(curl_easy_setopt) *easy_setopt;
        __typeof__(curl_easy_perform) *easy_perform;
        __typeof__(curl_easy_getinfo) *easy_getinfo;
        __typeof__(curl_easy_reset) *easy_reset;
        __typeof__(curl_easy_cleanup) *easy_cleanup;
        __typeof__(curl_easy_strerror) *easy_strerror;
        __typeof__(curl_slist_append) *slist_append;
        __typeof__(curl_slist_free_all) *slist_free_all;
        __typeof__(curl_multi_init) *multi_init;
        __typeof__(curl_multi_add_handle) *multi_add_handle;
        __typeof__(curl_multi_remove_handle) *multi_remove_handle;
        __typeof__(curl_multi_perform) *multi_perform;
        __typeof__(curl_multi_poll) *multi_poll;
        __typeof__(curl_multi_info_read) *multi_info_read;
        __typeof__(curl_multi_cleanup) *multi_cleanup;
};

/* Loads libcurl (once) and returns its table; NULL when it cannot be loaded or initialised,
 * with the reason in *ret_reason (static text, or the dlerror() of the first attempt). */
const struct curl_lib *curl_lib_load(const char **ret_reason);
/* curl_global_cleanup() when libcurl was loaded; nothing otherwise. */
void curl_lib_cleanup(void);
