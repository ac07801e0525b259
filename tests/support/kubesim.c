/*
 * kubesim: a kube-sim process and its admin API for integration tests (see kubesim.h).
 */
#include "kubesim.h"

#include <glob.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "compiler.h"
#include "json.h"
#include "testutil.h"
#include "xalloc.h"

#define MAX_EXTRA_ARGS 16
#define CRD_FILE_MAX   (1 << 20)

static int kubesim_reap(struct kubesim *s);

/* Fresh dir, kube-sim --port 0 --dir DIR extra_args...; 0, or -1 with the dir removed. */
static int kubesim_spawn(struct kubesim *s, const char *const *extra_args)
{
        const char *args[5 + MAX_EXTRA_ARGS] = { "--port", "0", "--dir", s->dir };
        size_t n = 4;

        memset(s, 0, sizeof(*s));
        test_mkdtemp(s->dir, sizeof(s->dir));
        (void)snprintf(s->kubeconfig, sizeof(s->kubeconfig), "%s/kubeconfig", s->dir);
        for (; extra_args && *extra_args && n < 4 + MAX_EXTRA_ARGS; extra_args++)
                args[n++] = *extra_args;
        args[n] = NULL;
        if (simproc_start(&s->proc, "kube-sim", args) < 0) {
                fprintf(stderr, "kubesim: kube-sim did not start (dir %s)\n", s->dir);
                (void)kubesim_reap(s);
                return -1;
        }
        return 0;
}

/* SIGTERM (SIGKILL after 5 s), removes the dir; the wait status or -1. */
static int kubesim_reap(struct kubesim *s)
{
        int status = simproc_stop(&s->proc);

        if (s->dir[0] != '\0')
                (void)test_sh("rm -rf '%s'", s->dir);
        s->dir[0] = '\0';
        return status;
}

int kubesim_start(struct kubesim *s, const char *const *extra_args)
{
        char *err = NULL;

        if (kubesim_spawn(s, extra_args) < 0)
                return -1;
        if (kube_config_from_kubeconfig(s->kubeconfig, NULL, &s->cfg, &err) < 0) {
                fprintf(stderr, "kubesim: %s: %s\n", s->kubeconfig, err ? err : "?");
                free(err);
                (void)kubesim_reap(s);
                return -1;
        }
        free(err);
        return 0;
}

int kubesim_stop(struct kubesim *s)
{
        kube_config_release(&s->cfg);
        return kubesim_reap(s);
}

cJSON *kubesim_call(struct kubesim *s, const char *method, const char *path, const char *body)
{
        struct test_http_result res = { 0 };
        char url[512], ca[300];
        cJSON *j = NULL;

        (void)snprintf(url, sizeof(url), "%s%s", s->proc.url, path);
        (void)snprintf(ca, sizeof(ca), "%s/ca.crt", s->dir);
        assert_int_equal(
                test_http_do(&(struct test_http){ .method = method,
                                                  .url = url,
                                                  .body = body,
                                                  .content_type = body ? "application/json" : NULL,
                                                  .ca_file = ca,
                                                  .bearer = s->cfg.token },
                             &res),
                0);
        assert_int_equal(res.status, 200);
        assert_non_null(res.body);
        assert_int_equal(json_parse(res.body, strlen(res.body), &j), 0);
        test_http_result_release(&res);
        return j;
}

void kubesim_faults(struct kubesim *s, const char *json)
{
        cJSON_Delete(kubesim_call(s, "POST", "/_sim/faults", json));
}

void kubesim_clear_requests(struct kubesim *s)
{
        cJSON_Delete(kubesim_call(s, "DELETE", "/_sim/requests", NULL));
}

static const char *entry_str(const cJSON *e, const char *key)
{
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(e, key);

        return cJSON_IsString(x) ? x->valuestring : "";
}

static bool path_matches(const char *p, const struct kubesim_match *m)
{
        size_t pl = strlen(p), sl = m->path_suffix ? strlen(m->path_suffix) : 0;

        if (m->path_has && !strstr(p, m->path_has))
                return false;
        return !m->path_suffix || (pl >= sl && strcmp(p + pl - sl, m->path_suffix) == 0);
}

static bool entry_matches(const cJSON *e, const struct kubesim_match *m)
{
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(e, "status");
        const cJSON *q = cJSON_GetObjectItemCaseSensitive(e, "query");

        if (m->method && strcmp(entry_str(e, "method"), m->method) != 0)
                return false;
        if (!path_matches(entry_str(e, "path"), m))
                return false;
        if (m->status && (!cJSON_IsNumber(st) || (int)st->valuedouble != m->status))
                return false;
        if (m->query_key &&
            (cJSON_GetObjectItemCaseSensitive(q, m->query_key) != NULL) == m->without_key)
                return false;
        return true;
}

int kubesim_count_requests(struct kubesim *s, const struct kubesim_match *m)
{
        cJSON *log = kubesim_call(s, "GET", "/_sim/requests", NULL);
        const cJSON *it;
        int n = 0;

        cJSON_ArrayForEach (it, cJSON_GetObjectItemCaseSensitive(log, "items"))
                n += entry_matches(it, m);
        cJSON_Delete(log);
        return n;
}

/* --- objects ----------------------------------------------------------------------------- */

void kubesim_create_namespace(struct kube_client *kc, const char *name)
{
        cJSON *ns = cJSON_CreateObject();

        cJSON_AddStringToObject(ns, "apiVersion", "v1");
        cJSON_AddStringToObject(ns, "kind", "Namespace");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(ns, "metadata"), "name", name);
        assert_int_equal(kube_create(kc, &KUBE_RES_NAMESPACES, NULL, ns, NULL, NULL), 0);
        cJSON_Delete(ns);
}

/* --- CRDs -------------------------------------------------------------------------------- */

static void apply_crd(struct kube_client *kc, const char *name, const char *doc)
{
        struct kube_error e = { 0 };
        int err = kube_patch(kc,
                             &(struct kube_patch_opts){ .resource = &KUBE_RES_CRDS,
                                                        .ns = NULL,
                                                        .name = name,
                                                        .subresource = NULL,
                                                        .type = KUBE_PATCH_APPLY,
                                                        .body = doc },
                             NULL, &e);

        if (err)
                fail_msg("apply CRD %s: %s", name, e.message ? e.message : "?");
        kube_error_release(&e);
}

/* Applies every document of a YAML file that has a metadata.name (kube-sim reads YAML). */
static void install_file(struct kube_client *kc, const char *path)
{
        char *text = xmalloc(CRD_FILE_MAX), *doc, *next;
        FILE *f = fopen(path, "rb");
        size_t len;

        assert_non_null(f);
        len = fread(text, 1, CRD_FILE_MAX - 1, f);
        text[len] = '\0';
        fclose(f);
        for (doc = text; doc; doc = next) {
                char name[256];
                const char *m;

                next = strstr(doc, "\n---");
                if (next) {
                        *next = '\0';
                        next += 4;
                }
                m = strstr(doc, "\nmetadata:\n  name: ");
                if (m && sscanf(m, "\nmetadata:\n  name: %255s", name) == 1)
                        apply_crd(kc, name, doc);
        }
        free(text);
}

void kubesim_install_crds(struct kube_client *kc)
{
        const char *src = test_env("CAPMAAS_SOURCE_DIR");
        char pat[512];
        glob_t g;

        (void)snprintf(pat, sizeof(pat), "%s/config/crd/bases/*.yaml", src);
        assert_int_equal(glob(pat, 0, NULL, &g), 0);
        for (size_t i = 0; i < g.gl_pathc; i++)
                install_file(kc, g.gl_pathv[i]);
        globfree(&g);
        (void)snprintf(pat, sizeof(pat), "%s/tests/sim/capi/crds.yaml", src);
        install_file(kc, pat);
}
