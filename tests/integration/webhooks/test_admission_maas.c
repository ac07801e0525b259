/*
 * Admission that knows MAAS (beyond.md B1, issue 9), over real HTTPS AdmissionReviews to the
 * capmaas binary, whose inventory cache reads a real maas-sim loaded with the sample
 * inventory: every denial and warning with its exact message, MAAS's image naming rules, the
 * bounded refresh on a cache miss (a pool added at run time is accepted on the next apply, a
 * machine added to a pool makes a template fit at once, concurrent requests share one
 * refresh), and never blocking on MAAS (maas-sim stopped,
 * wrong credentials, checks turned off).
 *
 * Needs $CAPMAAS_BUILD_DIR/maas-sim and capmaas; objects are written with ' for ".
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <curl/curl.h>

#include "compiler.h"
#include "maassim.h"
#include "testutil.h"
#include "xalloc.h"

#define ADMIN_KEY "ck:tk:secret1"
#define EP_PREFIX "/validate-infrastructure-cluster-x-k8s-io-v1beta1-"

#define MMT(spec)                                                                               \
        "{'apiVersion':'infrastructure.cluster.x-k8s.io/v1beta1','kind':'MaasMachineTemplate'," \
        "'metadata':{'name':'t1','namespace':'default'},'spec':{'template':{'spec':{" spec "}}}}"
#define MM(spec)                                                                        \
        "{'apiVersion':'infrastructure.cluster.x-k8s.io/v1beta1','kind':'MaasMachine'," \
        "'metadata':{'name':'m1','namespace':'default'},'spec':{" spec "}}"
#define MC(spec)                                                                        \
        "{'apiVersion':'infrastructure.cluster.x-k8s.io/v1beta1','kind':'MaasCluster'," \
        "'metadata':{'name':'c1','namespace':'default'},'spec':{" spec "}}"

#define JAMMY   "'image':'ubuntu/jammy','minCPU':2,'minMemory':4096"
#define BAD_MMT "MaasMachineTemplate.infrastructure.cluster.x-k8s.io \"t1\" is invalid: "
#define BAD_MM  "MaasMachine.infrastructure.cluster.x-k8s.io \"m1\" is invalid: "
#define BAD_MC  "MaasCluster.infrastructure.cluster.x-k8s.io \"c1\" is invalid: "
#define TTS     "spec.template.spec."
#define POOLS   "(known: capi, default)"
#define ZONES   "(known: az1, az2, az3, default)"
#define TAGS    "(known: big, control-plane, gpu, odd, ssd, virtual)"
#define IMAGES  "(known: u-2204-0-k-1264-0, ubuntu/focal, ubuntu/jammy)"
#define SKIPPED "MAAS checks skipped: "
#define SUBNETS "(known: 10.20.0.0/24, 10.30.0.0/24, 10.10.0.0/16)"

/* Added before capmaas starts: a big machine that is in use, two "odd" machines, one
 * with many CPUs and little memory, one the other way round, and a deployed machine holding
 * 10.30.0.50. */
#define EXTRA_MACHINES                                                                        \
        "[{'system_id':'busy01','cpu_count':64,'memory':262144,'zone':'az2','pool':'capi',"   \
        "'tags':['big'],'status':'Deployed','owner':'admin'},"                                \
        "{'system_id':'odd001','cpu_count':32,'memory':4096,'zone':'az1','tags':['odd']},"    \
        "{'system_id':'odd002','cpu_count':2,'memory':131072,'zone':'az1','tags':['odd']},"   \
        "{'system_id':'ipheld','cpu_count':2,'memory':2048,'zone':'az3','status':'Deployed'," \
        "'owner':'admin','interfaces':[{'name':'eth0','mac':'52:54:00:99:00:01',"             \
        "'ip':'10.30.0.50','cidr':'10.30.0.0/24'}]}]"

struct env {
        struct maassim sim;
        struct capmaas_proc cm;
        char ca[300];
        bool cm_running;
        CURL *curl; /* keep-alive connection of the test's own thread */
};

struct verdict {
        long status;
        bool allowed;
        char *message;     /* denial message, or NULL */
        char *warnings[8]; /* NULL-terminated */
        size_t n_warnings;
};

/* --- maas-sim -------------------------------------------------------------------------------- */

static void sim_start(struct maassim *m)
{
        assert_int_equal(maassim_start(m, ADMIN_KEY, NULL), 0);
}

static char *squote(const char *s);

static void sim_post(struct env *e, const char *what, const char *json_sq)
{
        char *json = squote(json_sq);

        cJSON_Delete(maassim_call(&e->sim, "POST", what, json));
        free(json);
}

/* --- capmaas --------------------------------------------------------------------------------- */

static void cm_start(struct env *e, const char *key, const char *const *extra)
{
        setenv("MAAS_ENDPOINT", e->sim.proc.url, 1);
        setenv("MAAS_API_KEY", key, 1);
        assert_int_equal(capmaas_start(&e->cm, NULL, extra, NULL), 0);
        unsetenv("MAAS_ENDPOINT");
        unsetenv("MAAS_API_KEY");
        e->cm_running = true;
        if (!e->curl)
                e->curl = curl_easy_init();
        (void)snprintf(e->ca, sizeof(e->ca), "%s/ca.crt", e->cm.cert_dir);
}

static double metric(struct env *e, const char *series);

/* Waits (up to 10 s) for the first inventory load, so no test request causes it. */
static void wait_loaded(struct env *e)
{
        for (int i = 0; i < 1000; i++) {
                if (metric(e, "capmaas_maas_inventory_age_seconds") >= 0)
                        return;
                usleep(10000);
        }
        fail_msg("the MAAS inventory was not loaded within 10 s");
}

static struct env *env_new(const char *machines_json, const char *const *extra, bool load)
{
        struct env *e = xcalloc(1, sizeof(*e));

        sim_start(&e->sim);
        if (machines_json)
                sim_post(e, "machines", machines_json);
        cm_start(e, ADMIN_KEY, extra);
        if (load)
                wait_loaded(e);
        return e;
}

static void env_free(struct env *e)
{
        if (e->curl)
                curl_easy_cleanup(e->curl);
        if (e->cm_running)
                assert_int_equal(capmaas_stop(&e->cm, 10000), 0);
        (void)maassim_stop(&e->sim);
        free(e);
}

/* Value of one metric series line ("name{labels}") from /metrics; -1 when absent. */
static double metric(struct env *e, const char *series)
{
        long st;
        char *body = test_http_get(e->cm.metrics_port, "/metrics", &st);
        size_t n = strlen(series);
        double v = -1;

        assert_int_equal(st, 200);
        for (char *line = body; line && *line;
             line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                if (strncmp(line, series, n) == 0 && line[n] == ' ') {
                        v = strtod(line + n + 1, NULL);
                        break;
                }
        }
        free(body);
        return v;
}

/* --- reviews
 * ---------------------------------------------------------------------------------------- */

static char *squote(const char *s)
{
        char *out = xstrdup(s);

        for (char *p = out; *p; p++)
                if (*p == '\'')
                        *p = '"';
        return out;
}

static const char *kind_of(const char *obj)
{
        if (strstr(obj, "'kind':'MaasMachineTemplate'"))
                return "MaasMachineTemplate";
        if (strstr(obj, "'kind':'MaasMachine'"))
                return "MaasMachine";
        return "MaasCluster";
}

static char *review_json(const char *obj, const char *old)
{
        char *o = squote(obj);
        char *p = old ? squote(old) : NULL;
        char *body = xasprintf("{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":"
                               "\"AdmissionReview\",\"request\":{\"uid\":\"u-1\",\"kind\":{"
                               "\"group\":\"infrastructure.cluster.x-k8s.io\",\"version\":"
                               "\"v1beta1\",\"kind\":\"%s\"},\"operation\":\"%s\",\"namespace\":"
                               "\"default\",\"object\":%s%s%s}}",
                               kind_of(obj), old ? "UPDATE" : "CREATE", o,
                               old ? ",\"oldObject\":" : "", old ? p : "");

        free(o);
        free(p);
        return body;
}

static void verdict_parse(const char *body, struct verdict *v)
{
        cJSON *doc = cJSON_Parse(body);
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(doc, "response");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(r, "status");
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(st, "message");
        const cJSON *w;

        assert_non_null(r);
        v->allowed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "allowed"));
        v->message = cJSON_IsString(msg) ? xstrdup(msg->valuestring) : NULL;
        cJSON_ArrayForEach (w, cJSON_GetObjectItemCaseSensitive(r, "warnings")) {
                if (cJSON_IsString(w) && v->n_warnings < 7)
                        v->warnings[v->n_warnings++] = xstrdup(w->valuestring);
        }
        cJSON_Delete(doc);
}

static void verdict_release(struct verdict *v)
{
        free(v->message);
        for (size_t i = 0; i < v->n_warnings; i++)
                free(v->warnings[i]);
        *v = (struct verdict){ 0 };
}

/* POSTs one review over curl's connection (a thread's own handle), or a new one. */
static void review_on(
        struct env *e, CURL *curl, const char *obj, const char *old, struct verdict *ret)
{
        const char *kind = kind_of(obj);
        char *url = xasprintf("https://127.0.0.1:%u" EP_PREFIX "%s", e->cm.webhook_port,
                              strcmp(kind, "MaasMachineTemplate") == 0 ? "maasmachinetemplate"
                              : strcmp(kind, "MaasMachine") == 0       ? "maasmachine"
                                                                       : "maascluster");
        char *body = review_json(obj, old);
        struct test_http_result res;

        *ret = (struct verdict){ 0 };
        (void)test_http_do(&(struct test_http){ .url = url,
                                                .content_type = "application/json",
                                                .body = body,
                                                .ca_file = e->ca,
                                                .curl = curl },
                           &res);
        ret->status = res.status;
        if (res.status == 200)
                verdict_parse(res.body, ret);
        test_http_result_release(&res);
        free(body);
        free(url);
}

static void review(struct env *e, const char *obj, const char *old, struct verdict *ret)
{
        review_on(e, e->curl, obj, old, ret);
}

struct mcase {
        const char *name;
        const char *obj;
        const char *old;
        const char *message; /* exact denial message; NULL = allowed */
        const char *warning; /* the only warning; NULL = none */
};

static void run_cases(struct env *e, const struct mcase *cases, size_t n)
{
        struct verdict v;

        for (size_t i = 0; i < n; i++) {
                const struct mcase *c = &cases[i];

                print_message("case: %s\n", c->name);
                review(e, c->obj, c->old, &v);
                assert_int_equal(v.status, 200);
                if (c->message) {
                        if (v.allowed)
                                print_message("unexpectedly allowed\n");
                        assert_false(v.allowed);
                        assert_string_equal(v.message, c->message);
                } else {
                        if (!v.allowed)
                                print_message("unexpected denial: %s\n", v.message);
                        assert_true(v.allowed);
                }
                if (c->warning) {
                        assert_int_equal(v.n_warnings, 1);
                        assert_string_equal(v.warnings[0], c->warning);
                } else {
                        if (v.n_warnings)
                                print_message("unexpected warning: %s\n", v.warnings[0]);
                        assert_int_equal(v.n_warnings, 0);
                }
                verdict_release(&v);
        }
}

/* --- the shared environment of the table tests
 * ------------------------------------------------------ */

static struct env *shared;

static int group_setup(void **state)
{
        (void)state;
        shared = env_new(EXTRA_MACHINES, NULL, true);
        return 0;
}

static int group_teardown(void **state)
{
        (void)state;
        env_free(shared);
        return 0;
}

static const struct mcase denials[] = {
        { "the issue's example: 64 CPUs in a pool whose best has 16",
          MMT("'image':'ubuntu/jammy','minCPU':64,'minMemory':4096,'resourcePool':'capi',"
              "'tags':['gpu']"),
          NULL,
          BAD_MMT TTS "minCPU: Invalid value: 64: no machine in pool \"capi\" with tag \"gpu\" "
                      "has more than 16 CPUs",
          NULL },
        { "minCPU over the best in one pool",
          MMT("'image':'ubuntu/jammy','minCPU':64,'minMemory':4096,'resourcePool':'default'"), NULL,
          BAD_MMT TTS "minCPU: Invalid value: 64: no machine in pool \"default\" has more than "
                      "32 CPUs",
          NULL },
        { "minMemory over the best in a pool and zone",
          MMT("'image':'ubuntu/jammy','minCPU':2,'minMemory':65536,'resourcePool':'capi',"
              "'failureDomain':'az1'"),
          NULL,
          BAD_MMT TTS "minMemory: Invalid value: 65536: no machine in pool \"capi\" and zone "
                      "\"az1\" has more than 32768 MiB of memory",
          NULL },
        { "no single machine has both the CPUs and the memory",
          MMT("'image':'ubuntu/jammy','minCPU':32,'minMemory':131072,'tags':['odd']"), NULL,
          BAD_MMT TTS "minMemory: Invalid value: 131072: no machine in MAAS with tag \"odd\" "
                      "that has at least 32 CPUs has more than 4096 MiB of memory",
          NULL },
        { "both impossible: two field errors",
          MMT("'image':'ubuntu/jammy','minCPU':128,'minMemory':1048576,'failureDomain':'az3'"),
          NULL,
          BAD_MMT "[" TTS "minCPU: Invalid value: 128: no machine in zone \"az3\" has more than "
                  "16 CPUs, " TTS "minMemory: Invalid value: 1048576: no machine in zone \"az3\" "
                  "has more than 32768 MiB of memory]",
          NULL },
        { "unknown pool, zone, tag and image, every one named",
          MMT("'image':'custom/u-2404','minCPU':2,'minMemory':4096,'resourcePool':'cp-pool',"
              "'failureDomain':'az9','tags':['gpu','control-plane','nvme']"),
          NULL,
          BAD_MMT "[" TTS "resourcePool: Invalid value: \"cp-pool\": no such resource pool in "
                  "MAAS " POOLS ", " TTS "failureDomain: Invalid value: \"az9\": no such zone in "
                  "MAAS " ZONES ", " TTS
                  "tags[2]: Invalid value: \"nvme\": no such tag in MAAS " TAGS ", " TTS
                  "image: Invalid value: \"custom/u-2404\": no such boot resource in "
                  "MAAS " IMAGES "]",
          NULL },
        { "a synced release that is not synced",
          MMT("'image':'ubuntu/noble','minCPU':2,'minMemory':4096"), NULL,
          BAD_MMT TTS
          "image: Invalid value: \"ubuntu/noble\": no such boot resource in MAAS " IMAGES,
          NULL },
        { "no machine carries all the tags",
          MMT(JAMMY ",'resourcePool':'capi','tags':['gpu','ssd']"), NULL,
          BAD_MMT TTS "tags: Invalid value: []string{\"gpu\", \"ssd\"}: no machine in pool "
                      "\"capi\" has all of these tags",
          NULL },
        { "a zone with no machines", MMT(JAMMY ",'failureDomain':'default'"), NULL,
          BAD_MMT TTS "failureDomain: Invalid value: \"default\": no machine is in this zone",
          NULL },
        { "a zone with no machines of that pool",
          MMT(JAMMY ",'resourcePool':'default','failureDomain':'default'"), NULL,
          BAD_MMT TTS "failureDomain: Invalid value: \"default\": no machine in pool \"default\" "
                      "is in this zone",
          NULL },
        { "MaasMachine: unknown pool at spec.resourcePool", MM(JAMMY ",'resourcePool':'gpu-pool'"),
          NULL,
          BAD_MM
          "spec.resourcePool: Invalid value: \"gpu-pool\": no such resource pool in MAAS " POOLS,
          NULL },
        { "MaasMachine: too many CPUs", MM("'image':'ubuntu/jammy','minCPU':512,'minMemory':4096"),
          NULL, BAD_MM "spec.minCPU: Invalid value: 512: no machine in MAAS has more than 64 CPUs",
          NULL },
        { "MaasMachine update that changes the pool to an unknown one",
          MM(JAMMY ",'resourcePool':'nope'"), MM(JAMMY ",'resourcePool':'capi'"),
          BAD_MM "spec.resourcePool: Invalid value: \"nope\": no such resource pool in MAAS " POOLS,
          NULL },
        { "MaasMachine: staticIP on a subnet MAAS does not have, the subnets listed",
          MM(JAMMY ",'staticIP':{'ip':'10.40.0.5','cidr':'10.40.0.0/24'}"), NULL,
          BAD_MM "spec.staticIP.cidr: Invalid value: \"10.40.0.0/24\": no such subnet in "
                 "MAAS " SUBNETS,
          NULL },
        /* the deploy and allocation options (docs/deploy-options.md) */
        { "an excluded tag MAAS does not have", MMT(JAMMY ",'excludeTags':['gpu','nvme']"), NULL,
          BAD_MMT TTS "excludeTags[1]: Invalid value: \"nvme\": no such tag in MAAS", NULL },
        { "an architecture no boot resource has", MMT(JAMMY ",'architecture':'arm64'"), NULL,
          BAD_MMT TTS "architecture: Invalid value: \"arm64\": no boot resource in MAAS for this "
                      "architecture (known: amd64)",
          NULL },
        { "a kernel the release lacks", MMT(JAMMY ",'hweKernel':'hwe-24.04'"), NULL,
          BAD_MMT TTS "hweKernel: Invalid value: \"hwe-24.04\": no such kernel for ubuntu/jammy in "
                      "MAAS's boot resources (known: hwe-p, hwe-q, hwe-r, hwe-s, hwe-t, hwe-u, "
                      "hwe-v, hwe-w, ga-16.04, ga-18.04, ...)",
          NULL },
        { "a custom image: the kernels of its base image",
          MMT("'image':'u-2204-0-k-1264-0','minCPU':2,'minMemory':4096,'hweKernel':'ga-24.04'"),
          NULL,
          BAD_MMT TTS "hweKernel: Invalid value: \"ga-24.04\": no such kernel for ubuntu/jammy in "
                      "MAAS's boot resources (known: hwe-p, hwe-q, hwe-r, hwe-s, hwe-t, hwe-u, "
                      "hwe-v, hwe-w, ga-16.04, ga-18.04, ...)",
          NULL },
        { "a disk larger than any machine has", MMT(JAMMY ",'minDiskSize':600"), NULL,
          BAD_MMT TTS "minDiskSize: Invalid value: 600: no machine in MAAS has a disk that large "
                      "(the most storage is 512 GB)",
          NULL },
        { "MaasCluster: unknown DNS domain and zone",
          MC("'dnsDomain':'example.com','failureDomains':['az1','az7']"), NULL,
          BAD_MC "[spec.dnsDomain: Invalid value: \"example.com\": no such DNS domain in MAAS "
                 "(known: maas), spec.failureDomains[1]: Invalid value: \"az7\": no such zone in "
                 "MAAS " ZONES "]",
          NULL },
};

static void test_admission_maas__denials_name_the_field_and_the_best_maas_has(void **state)
{
        (void)state;
        run_cases(shared, denials, ARRAY_SIZE(denials));
}

static const struct mcase allowed[] = {
        { "custom/x matches the uploaded x",
          MMT("'image':'custom/u-2204-0-k-1264-0','minCPU':2,'minMemory':4096"), NULL, NULL, NULL },
        { "a bare x matches the uploaded x",
          MMT("'image':'u-2204-0-k-1264-0','minCPU':2,'minMemory':4096"), NULL, NULL, NULL },
        { "ubuntu/jammy matches the synced release", MMT(JAMMY), NULL, NULL, NULL },
        { "exactly the best of a pool, zone and tags",
          MMT("'image':'ubuntu/jammy','minCPU':16,'minMemory':32768,'resourcePool':'capi',"
              "'failureDomain':'az1','tags':['gpu','control-plane']"),
          NULL, NULL, NULL },
        { "MaasMachine with a pool, zone and tag that exist",
          MM(JAMMY ",'resourcePool':'default','failureDomain':'az2','tags':['virtual']"), NULL,
          NULL, NULL },
        { "a pinned systemID skips the capacity check",
          MM("'image':'ubuntu/jammy','minCPU':900,'minMemory':4096,'systemID':'hkd3ps'"), NULL,
          NULL, NULL },
        { "ratcheting: an update that does not touch the MAAS fields is not checked",
          MM(JAMMY ",'resourcePool':'deleted-pool','providerID':'maas:///az1/hkd3ps'"),
          MM(JAMMY ",'resourcePool':'deleted-pool'"), NULL, NULL },
        { "MaasMachine: staticIP on a MAAS subnet, the address free",
          MM(JAMMY ",'staticIP':{'ip':'10.30.0.51','cidr':'10.30.0.0/24','gateway':'10.30.0.1'}"),
          NULL, NULL, NULL },
        { "MaasMachine: staticIP whose address another machine holds: a warning",
          MM(JAMMY ",'staticIP':{'ip':'10.30.0.50','cidr':'10.30.0.0/24'}"), NULL, NULL,
          "spec.staticIP.ip: 10.30.0.50 is already in use by MAAS machine ipheld; the machine "
          "will not deploy with it until that machine releases it" },
        { "MaasMachine: staticIP held by its own machine: no warning",
          MM(JAMMY ",'systemID':'ipheld','staticIP':{'ip':'10.30.0.50','cidr':'10.30.0.0/24'}"),
          NULL, NULL, NULL },
        { "deploy options MAAS can satisfy",
          MMT(JAMMY ",'hweKernel':'ga-22.04','architecture':'amd64/generic','excludeTags':['gpu'],"
                    "'minDiskSize':500,'storageLayout':{'type':'lvm','rootSize':'40G'}"),
          NULL, NULL, NULL },
        { "a custom image deploys with its base image's kernels",
          MMT("'image':'u-2204-0-k-1264-0','minCPU':2,'minMemory':4096,'hweKernel':'ga-22.04'"),
          NULL, NULL, NULL },
        { "MaasCluster with the MAAS domain and zones",
          MC("'dnsDomain':'maas','failureDomains':['az1','az2','az3']"), NULL, NULL, NULL },
        { "machines fit but all are in use: a warning",
          MMT("'image':'ubuntu/jammy','minCPU':64,'minMemory':131072,'tags':['big']"), NULL, NULL,
          "spec.template.spec: 1 machine in MAAS with tag \"big\" fits, but none is free now (1 in "
          "use)" },
};

static void test_admission_maas__names_that_exist_are_allowed(void **state)
{
        (void)state;
        run_cases(shared, allowed, ARRAY_SIZE(allowed));
}

/* --- each with its own capmaas
 * -------------------------------------------------------------------- */

/* What MAAS gains after the first inventory load (pools/machines to POST to maas-sim, in
 * order) makes obj acceptable on the very next review, with no warning: one synchronous
 * refresh, not the 60 s background one. */
struct added_at_run_time {
        const char *what[2][2]; /* { "pools" or "machines", the object }, NULL when unused */
        const char *obj;
};

static void accepted_after_one_refresh(const struct added_at_run_time *t)
{
        struct env *e = env_new(NULL, NULL, true);
        struct verdict v;

        review(e, MMT(JAMMY), NULL, &v); /* the first load is done */
        assert_true(v.allowed);
        verdict_release(&v);
        assert_true(metric(e, "capmaas_maas_inventory_refreshes_total") == 1);
        for (size_t i = 0; i < ARRAY_SIZE(t->what) && t->what[i][0]; i++)
                sim_post(e, t->what[i][0], t->what[i][1]);
        review(e, t->obj, NULL, &v);
        assert_true(v.allowed);
        assert_int_equal(v.n_warnings, 0);
        verdict_release(&v);
        assert_true(metric(e, "capmaas_maas_inventory_refreshes_total") == 2);
        env_free(e);
}

/* A name missing from the cache: the pool was created a moment ago. */
static void test_admission_maas__pool_added_at_run_time_is_accepted_on_next_apply(void **state)
{
        (void)state;
        accepted_after_one_refresh(&(struct added_at_run_time){
                .what = { { "pools", "{'name':'late-pool'}" },
                          { "machines", "{'system_id':'late01','cpu_count':4,'memory':8192,"
                                        "'pool':'late-pool','zone':'az1'}" } },
                .obj = MMT(JAMMY ",'resourcePool':'late-pool'") });
}

/* A capacity denial is confirmed against a fresh read too: a machine added to a known pool
 * a moment ago makes the template fit. */
static void test_admission_maas__machine_added_at_run_time_makes_a_template_fit(void **state)
{
        (void)state;
        accepted_after_one_refresh(&(struct added_at_run_time){
                .what = { { "machines", "{'system_id':'big01','cpu_count':48,'memory':8192,"
                                        "'pool':'default','zone':'az1'}" } },
                .obj = MMT("'image':'ubuntu/jammy','minCPU':48,'minMemory':4096,"
                           "'resourcePool':'default'") });
}

/* Reviews obj (a create): allowed with exactly one warning, which contains want. */
static void assert_allowed_with_warning(struct env *e, const char *obj, const char *want)
{
        struct verdict v;

        review(e, obj, NULL, &v);
        assert_true(v.allowed);
        assert_int_equal(v.n_warnings, 1);
        print_message("warning: %s\n", v.warnings[0]);
        assert_non_null(strstr(v.warnings[0], want));
        verdict_release(&v);
}

static void test_admission_maas__maas_stopped_allows_with_a_warning(void **state)
{
        struct env *e = env_new(NULL, NULL, true);
        struct verdict v;

        (void)state;
        review(e, MMT(JAMMY), NULL, &v);
        assert_true(v.allowed);
        verdict_release(&v);
        (void)maassim_stop(&e->sim);
        /* An unknown name forces a refresh, which finds MAAS gone. */
        assert_allowed_with_warning(e, MMT(JAMMY ",'resourcePool':'nowhere'"),
                                    SKIPPED "MAAS is unreachable (listing zones: ");
        /* Everything else is now allowed with the same warning, at once. */
        assert_allowed_with_warning(e, MMT("'image':'ubuntu/jammy','minCPU':999,'minMemory':4096"),
                                    SKIPPED "MAAS is unreachable");
        assert_true(
                metric(e, "capmaas_admission_maas_checks_skipped_total{reason=\"unreachable\"}") ==
                2);
        assert_true(
                metric(e, "capmaas_maas_inventory_refresh_errors_total{reason=\"unreachable\"}") >=
                1);
        env_free(e);
}

static void test_admission_maas__rejected_credentials_allow_with_a_warning(void **state)
{
        struct env *e = xcalloc(1, sizeof(*e));

        (void)state;
        sim_start(&e->sim);
        cm_start(e, "ck:tk:wrong-secret", NULL);
        assert_allowed_with_warning(e, MMT(JAMMY ",'resourcePool':'cp-pool'"),
                                    SKIPPED "MAAS rejected the credentials (");
        assert_true(
                metric(e, "capmaas_admission_maas_checks_skipped_total{reason=\"unauthorized\"}") ==
                1);
        env_free(e);
}

static void test_admission_maas__checks_off_flag_allows_unknown_names(void **state)
{
        static const char *const off[] = { "--admission-maas-checks=false", NULL };
        struct env *e = env_new(NULL, off, false);
        struct verdict v;

        (void)state;
        /* minCPU once: JAMMY's 2 and a second 512 would be a duplicate key (400) */
        review(e,
               MMT("'image':'ubuntu/jammy','minCPU':512,'minMemory':4096,'resourcePool':'cp-pool'"),
               NULL, &v);
        assert_true(v.allowed);
        assert_int_equal(v.n_warnings, 0);
        verdict_release(&v);
        assert_true(metric(e, "capmaas_maas_inventory_refreshes_total") == -1);
        env_free(e);
}

/* --- concurrency
 * ------------------------------------------------------------------------------------ */

#define THREADS    8
#define PER_THREAD 4

struct worker {
        struct env *e;
        int answered, allowed;
};

static void *worker_run(void *ud)
{
        struct worker *w = ud;
        CURL *curl = curl_easy_init();
        struct verdict v;

        for (int i = 0; i < PER_THREAD; i++) {
                review_on(w->e, curl,
                          i % 2 ? MMT(JAMMY ",'resourcePool':'burst-pool'")
                                : MMT(JAMMY ",'tags':['ssd']"),
                          NULL, &v);
                w->answered += v.status == 200;
                w->allowed += v.allowed && v.n_warnings == 0;
                verdict_release(&v);
        }
        curl_easy_cleanup(curl);
        return NULL;
}

static void test_admission_maas__concurrent_requests_during_a_refresh_all_answered(void **state)
{
        struct env *e = env_new(NULL, NULL, true);
        struct worker w[THREADS];
        pthread_t t[THREADS];
        struct verdict v;
        int answered = 0, allowed_n = 0;

        (void)state;
        review(e, MMT(JAMMY), NULL, &v);
        assert_true(v.allowed);
        verdict_release(&v);
        /* The refresh now takes about 6 x 100 ms, during which every request is served. */
        sim_post(e, "faults", "{'latency_ms':100}");
        sim_post(e, "pools", "{'name':'burst-pool'}");
        sim_post(e, "machines",
                 "{'system_id':'burst1','cpu_count':4,'memory':8192,'pool':'burst-pool'}");
        for (int i = 0; i < THREADS; i++) {
                w[i] = (struct worker){ .e = e };
                assert_int_equal(pthread_create(&t[i], NULL, worker_run, &w[i]), 0);
        }
        for (int i = 0; i < THREADS; i++) {
                pthread_join(t[i], NULL);
                answered += w[i].answered;
                allowed_n += w[i].allowed;
        }
        assert_int_equal(answered, THREADS * PER_THREAD);
        assert_int_equal(allowed_n, THREADS * PER_THREAD);
        /* The misses shared one refresh. */
        assert_true(metric(e, "capmaas_maas_inventory_refreshes_total") == 2);
        env_free(e);
}

int main(void)
{
        const struct CMUnitTest table[] = {
                cmocka_unit_test(test_admission_maas__denials_name_the_field_and_the_best_maas_has),
                cmocka_unit_test(test_admission_maas__names_that_exist_are_allowed),
        };
        const struct CMUnitTest own[] = {
                cmocka_unit_test(
                        test_admission_maas__pool_added_at_run_time_is_accepted_on_next_apply),
                cmocka_unit_test(
                        test_admission_maas__machine_added_at_run_time_makes_a_template_fit),
                cmocka_unit_test(test_admission_maas__maas_stopped_allows_with_a_warning),
                cmocka_unit_test(test_admission_maas__rejected_credentials_allow_with_a_warning),
                cmocka_unit_test(test_admission_maas__checks_off_flag_allows_unknown_names),
                cmocka_unit_test(
                        test_admission_maas__concurrent_requests_during_a_refresh_all_answered),
        };
        int failed;

        curl_global_init(CURL_GLOBAL_DEFAULT);
        failed = cmocka_run_group_tests_name("admission_maas.table", table, group_setup,
                                             group_teardown);
        failed += cmocka_run_group_tests_name("admission_maas.own", own, NULL, NULL);
        curl_global_cleanup();
        return failed;
}
