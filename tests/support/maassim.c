/*
 * maassim: a maas-sim process and its admin API for integration tests (see maassim.h).
 */
#include "maassim.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "json.h"
#include "testutil.h"

#define MAX_EXTRA_ARGS 24

int maassim_start(struct maassim *m, const char *key, const char *const *extra_args)
{
        char inv[512];
        const char *args[7 + MAX_EXTRA_ARGS] = {
                "--port", "0", "--inventory", inv, "--api-key", key
        };
        const char *end;
        size_t n = 6;

        memset(m, 0, sizeof(*m));
        (void)snprintf(inv, sizeof(inv), "%s/tests/sim/maas/inventory-sample.yaml",
                       test_env("CAPMAAS_SOURCE_DIR"));
        for (; extra_args && *extra_args && n < 6 + MAX_EXTRA_ARGS; extra_args++)
                args[n++] = *extra_args;
        args[n] = NULL;
        if (simproc_start(&m->proc, "maas-sim", args) < 0) {
                fprintf(stderr, "maassim: maas-sim did not start\n");
                return -1;
        }
        end = strstr(m->proc.url, "/MAAS");
        (void)snprintf(m->root, sizeof(m->root), "%.*s",
                       (int)(end ? (size_t)(end - m->proc.url) : strlen(m->proc.url)), m->proc.url);
        return 0;
}

int maassim_stop(struct maassim *m)
{
        return simproc_stop(&m->proc);
}

cJSON *maassim_call(struct maassim *m, const char *method, const char *path, const char *body)
{
        struct test_http_result res = { 0 };
        char url[512];
        cJSON *j = NULL;

        (void)snprintf(url, sizeof(url), "%s/_sim/%s", m->root, path);
        assert_int_equal(test_http_do(&(struct test_http){ .method = method,
                                                           .url = url,
                                                           .body = body,
                                                           .content_type = body ? "application/json"
                                                                                : NULL },
                                      &res),
                         0);
        assert_int_equal(res.status, 200);
        if (!res.body || json_parse(res.body, strlen(res.body), &j) != 0)
                j = NULL; /* "ok" */
        test_http_result_release(&res);
        return j;
}

void maassim_faults(struct maassim *m, const char *json)
{
        cJSON_Delete(maassim_call(m, "POST", "faults", json));
}

cJSON *maassim_machine(struct maassim *m, const char *system_id)
{
        cJSON *st = maassim_call(m, "GET", "state", NULL);
        const cJSON *it;
        cJSON *out = NULL;

        cJSON_ArrayForEach (it, json_at(st, "machines")) {
                const char *sid = json_at_str(it, "system_id");

                if (sid && strcmp(sid, system_id) == 0) {
                        out = cJSON_Duplicate(it, true);
                        break;
                }
        }
        cJSON_Delete(st);
        return out;
}
