/*
 * kube_client_fixture: see kube_client_fixture.h.
 */
#include "kube_client_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "compiler.h"
#include "testutil.h"
#include "xalloc.h"

struct kubesim kc_sim;

/* --- kube-sim admin ------------------------------------------------------------------- */

int kc_count(const char *method, const char *suffix, const char *query_key, bool want_key)
{
        return kubesim_count_requests(&kc_sim, &(struct kubesim_match){ .method = method,
                                                                        .path_suffix = suffix,
                                                                        .query_key = query_key,
                                                                        .without_key = !want_key });
}

/* --- objects ---------------------------------------------------------------------------- */

cJSON *kc_cm(const char *name, const char *value)
{
        cJSON *o = cJSON_CreateObject(), *md = cJSON_AddObjectToObject(o, "metadata");

        cJSON_AddStringToObject(o, "apiVersion", "v1");
        cJSON_AddStringToObject(o, "kind", "ConfigMap");
        if (name)
                cJSON_AddStringToObject(md, "name", name);
        cJSON_AddStringToObject(cJSON_AddObjectToObject(md, "labels"), "app", "t");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "data"), "k", value);
        return o;
}

char *kc_create_cm(struct kube_client *c, const char *ns, const char *name, const char *v)
{
        cJSON *o = kc_cm(name, v), *got = NULL;
        char *rv;

        assert_int_equal(kube_create(c, &KUBE_RES_CONFIGMAPS, ns, o, &got, NULL), 0);
        rv = xstrdup(kube_meta_str(got, "resourceVersion"));
        cJSON_Delete(o);
        cJSON_Delete(got);
        return rv;
}

void kc_churn(struct kube_client *c, int n)
{
        cJSON *o = kc_cm(NULL, "x");

        cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "generateName",
                                "c-");
        for (int i = 0; i < n; i++)
                assert_int_equal(kube_create(c, &KUBE_RES_CONFIGMAPS, "churn", o, NULL, NULL), 0);
        cJSON_Delete(o);
}

char *kc_big_value(size_t n)
{
        char *v = xmalloc(n + 1);

        memset(v, 'v', n);
        v[n] = '\0';
        return v;
}

/* --- fixtures --------------------------------------------------------------------------- */

static void record_sleep(void *arg, uint64_t ms)
{
        struct kc_fx *f = arg;

        if (f->n_slept < ARRAY_SIZE(f->slept))
                f->slept[f->n_slept] = ms;
        f->n_slept++;
}

struct kube_client *kc_new_client(struct kc_fx *f, const struct kube_config *cfg, size_t max)
{
        struct kube_client *c = NULL;

        assert_int_equal(kube_client_new(&(struct kube_client_opts){ .config = cfg,
                                                                     .max_body = max,
                                                                     .sleep_ms = record_sleep,
                                                                     .sleep_arg = f },
                                         &c),
                         0);
        return c;
}

int kc_group_setup(void **state)
{
        struct kc_fx f = { 0 };

        (void)state;
        curl_global_init(CURL_GLOBAL_DEFAULT);
        if (kubesim_start(&kc_sim, (const char *const[]){ "--history", "60",
                                                          /* KC_HISTORY */ "--bookmark-interval",
                                                          "0.2", NULL }) < 0)
                return -1;
        f.c = kc_new_client(&f, &kc_sim.cfg, 0);
        kubesim_create_namespace(f.c, "churn");
        kubesim_install_crds(f.c);
        kube_client_free(f.c);
        return 0;
}

int kc_group_teardown(void **state)
{
        (void)state;
        (void)kubesim_stop(&kc_sim);
        curl_global_cleanup();
        return 0;
}

int kc_setup(void **state)
{
        struct kc_fx *f = xcalloc(1, sizeof(*f));

        f->c = kc_new_client(f, &kc_sim.cfg, 0);
        kubesim_faults(&kc_sim, "{\"delayMs\":0,\"errorRate\":0,\"expireNextWatch\":false}");
        kubesim_clear_requests(&kc_sim);
        *state = f;
        return 0;
}

int kc_teardown(void **state)
{
        struct kc_fx *f = *state;

        kubesim_faults(&kc_sim, "{\"errorRate\":0}");
        kube_client_free(f->c);
        kube_error_release(&f->e);
        free(f);
        return 0;
}
