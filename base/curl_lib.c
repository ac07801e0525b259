/*
 * curl_lib: dlopen of libcurl on first use (see curl_lib.h). The symbols are resolved
 * from a table of names and offsets into struct curl_lib; POSIX guarantees that a function
 * pointer and void * have the same size and representation, which dlsym relies on.
 */
#include "curl_lib.h"

#include <assert.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#ifndef CAPMAAS_CURL_SONAME
#define CAPMAAS_CURL_SONAME "libcurl-gnutls.so.4"
#endif

static_assert(sizeof(void *) == sizeof(void (*)(void)), "dlsym needs void * == fn pointer");

#define SYM(field)                                               \
        {                                                        \
                "curl_" #field, offsetof(struct curl_lib, field) \
        }

static const struct {
        const char *name;
        size_t offset;
} symbols[] = {
        SYM(global_init),      SYM(global_cleanup),      SYM(easy_init),      SYM(easy_setopt),
        SYM(easy_perform),     SYM(easy_getinfo),        SYM(easy_reset),     SYM(easy_cleanup),
        SYM(easy_strerror),    SYM(slist_append),        SYM(slist_free_all), SYM(multi_init),
        SYM(multi_add_handle), SYM(multi_remove_handle), SYM(multi_perform),  SYM(multi_poll),
        SYM(multi_info_read),  SYM(multi_cleanup),
};

/* The GnuTLS build first (the one the project is built against), then the generic name. */
static const char *const sonames[] = { CAPMAAS_CURL_SONAME, "libcurl.so.4" };

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct curl_lib lib;
static bool loaded; /* written once under `once`, read after pthread_once returns */
static const char *failure = "libcurl was not loaded";
static char failure_buf[256];

static void *open_curl(void)
{
        void *h = NULL;

        for (size_t i = 0; i < ARRAY_SIZE(sonames) && !h; i++)
                h = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                (void)snprintf(failure_buf, sizeof(failure_buf), "cannot load libcurl: %s",
                               dlerror());
                failure = failure_buf;
        }
        return h;
}

static bool resolve(void *h)
{
        for (size_t i = 0; i < ARRAY_SIZE(symbols); i++) {
                void *sym = dlsym(h, symbols[i].name);

                if (!sym) {
                        (void)snprintf(failure_buf, sizeof(failure_buf), "libcurl lacks %s",
                                       symbols[i].name);
                        failure = failure_buf;
                        return false;
                }
                memcpy((char *)&lib + symbols[i].offset, &sym, sizeof(sym));
        }
        return true;
}

static void load_once(void)
{
        void *h = open_curl(); /* never closed: the table points into it */

        if (!h || !resolve(h))
                return;
        if (lib.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
                failure = "curl_global_init failed";
                return;
        }
        loaded = true;
}

const struct curl_lib *curl_lib_load(const char **ret_reason)
{
        (void)pthread_once(&once, load_once);
        if (loaded)
                return &lib;
        if (ret_reason)
                *ret_reason = failure;
        return NULL;
}

void curl_lib_cleanup(void)
{
        if (loaded)
                lib.global_cleanup();
}
