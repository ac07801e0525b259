/*
 * The admission webhooks over real HTTPS requests to the capmaas binary: the reference's
 * cases W1-W9, every validation and defaulting rule, the CAPI exemptions, ratcheting,
 * v1 and v1beta1 reviews, the NewInvalid denial shape and every malformed-input case.
 * Tables are written with ' for " (converted before sending) to stay readable.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <curl/curl.h>

#include "base64.h"
#include "json.h"
#include "testutil.h"
#include "xalloc.h"

#define PREFIX "-infrastructure-cluster-x-k8s-io-v1beta1-"

#define OBJ(kind, name, meta, spec)                                             \
        "{'apiVersion':'infrastructure.cluster.x-k8s.io/v1beta1','kind':'" kind \
        "','metadata':{'name':'" name "','namespace':'default'" meta "},'spec':" spec "}"
#define MM(spec)          OBJ("MaasMachine", "m1", "", "{" spec "}")
#define MM_ANN(ann, spec) OBJ("MaasMachine", "m1", ",'annotations':{" ann "}", "{" spec "}")
#define MMT(spec)         OBJ("MaasMachineTemplate", "t1", "", "{'template':{'spec':{" spec "}}}")
#define MMT_ANN(ann, spec)                                           \
        OBJ("MaasMachineTemplate", "t1", ",'annotations':{" ann "}", \
            "{'template':{'spec':{" spec "}}}")
#define MC(spec)  OBJ("MaasCluster", "c1", "", "{" spec "}")
#define MCT(spec) OBJ("MaasClusterTemplate", "ct1", "", "{'template':{'spec':{" spec "}}}")

/* The reference's W4-W9 machine spec. */
#define W4      "'image':'ubuntu1804-k8s-1.19','minCPU':10,'minMemory':100"
#define GOOD    "'image':'ubuntu/jammy','minCPU':2,'minMemory':4096"
#define DRY_RUN "'topology.cluster.x-k8s.io/dry-run':''"
#define MOVE    "'clusterctl.cluster.x-k8s.io/delete-for-move':''"

#define INVALID_MM  "MaasMachine.infrastructure.cluster.x-k8s.io \"m1\" is invalid: "
#define INVALID_MMT "MaasMachineTemplate.infrastructure.cluster.x-k8s.io \"t1\" is invalid: "
#define INVALID_MC  "MaasCluster.infrastructure.cluster.x-k8s.io \"c1\" is invalid: "
#define INVALID_MCT "MaasClusterTemplate.infrastructure.cluster.x-k8s.io \"ct1\" is invalid: "
#define OSYSTEMS \
        "(known: caringo, centos, custom, esxi, ol, rhel, suse, ubuntu, ubuntu-core, windows)"
#define DNS1123                                                                               \
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, " \
        "'-' or '.', and must start and end with an alphanumeric character (e.g. "            \
        "'example.com', regex used for validation is "                                        \
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
#define MAAS_NAME "must be a MAAS name: letters, digits, '-' and '_' only"
#define TAGS8     "'a','b','c','d','e','f','g','h'"
#define TAGS64    TAGS8 "," TAGS8 "," TAGS8 "," TAGS8 "," TAGS8 "," TAGS8 "," TAGS8 "," TAGS8
#define TAGS65    TAGS64 ",'i'"

struct wcase {
        const char *name;
        const char *ep; /* "maasmachine", ... */
        bool mutate;
        const char *op;
        const char *obj;   /* ' for "; NULL = none */
        const char *old;   /* ' for "; NULL = none */
        const char *extra; /* more request members, ' for " */
        bool allowed;
        int code;            /* of a denial */
        const char *message; /* of a denial, exact */
        const char *warning; /* the only warning, or NULL for none */
        const char *patch;   /* the decoded patch (' for "), or NULL for none */
};

struct fixture {
        struct capmaas_proc proc;
        char ca[300];
        CURL *curl;
};

static struct fixture fx;

static int setup(void **state)
{
        (void)state;
        if (capmaas_start(&fx.proc, NULL, NULL, NULL) < 0)
                return -1;
        (void)snprintf(fx.ca, sizeof(fx.ca), "%s/ca.crt", fx.proc.cert_dir);
        fx.curl = curl_easy_init();
        return fx.curl ? 0 : -1;
}

static int teardown(void **state)
{
        (void)state;
        curl_easy_cleanup(fx.curl);
        assert_int_equal(capmaas_stop(&fx.proc, 10000), 0);
        return 0;
}

static char *squote(const char *s)
{
        char *out = xstrdup(s);

        for (char *p = out; *p; p++)
                if (*p == '\'')
                        *p = '"';
        return out;
}

static long post(const char *path, const char *body, char **ret_body)
{
        char *u = xasprintf("https://127.0.0.1:%u%s?timeout=10s", fx.proc.webhook_port, path);
        struct test_http req = { .url = u,
                                 .content_type = "application/json",
                                 .body = body,
                                 .ca_file = fx.ca,
                                 .curl = fx.curl };
        struct test_http_result res;
        long status;

        (void)test_http_do(&req, &res);
        status = res.status;
        *ret_body = xstrdup(res.body ? res.body : "");
        test_http_result_release(&res);
        free(u);
        return status;
}

static const char *kind_of(const char *ep)
{
        static const char *const map[][2] = {
                { "maascluster", "MaasCluster" },
                { "maasmachine", "MaasMachine" },
                { "maasmachinetemplate", "MaasMachineTemplate" },
                { "maasclustertemplate", "MaasClusterTemplate" },
        };

        for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
                if (strcmp(map[i][0], ep) == 0)
                        return map[i][1];
        return ep;
}

static char *review(const struct wcase *c, const char *version)
{
        char *text = xasprintf(
                "{'apiVersion':'admission.k8s.io/%s','kind':'AdmissionReview','request':{"
                "'uid':'uid-%s','operation':'%s','kind':{'group':'infrastructure.cluster.x-k8s.io',"
                "'version':'v1beta1','kind':'%s'},'name':'','namespace':'default',"
                "'userInfo':{'username':'tester'},'object':%s,'oldObject':%s%s%s}}",
                version, version, c->op, kind_of(c->ep), c->obj ? c->obj : "null",
                c->old ? c->old : "null", c->extra ? "," : "", c->extra ? c->extra : "");
        char *out = squote(text);

        free(text);
        return out;
}

#define EXPECT(cond, c, ...)                                     \
        do {                                                     \
                if (!(cond)) {                                   \
                        print_error("case \"%s\": ", (c)->name); \
                        fail_msg(__VA_ARGS__);                   \
                }                                                \
        } while (0)

static void check_denial(const struct wcase *c, const cJSON *resp)
{
        const cJSON *status = cJSON_GetObjectItemCaseSensitive(resp, "status");
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(status, "code");
        const char *msg = json_find_str(status, "message", NULL);

        EXPECT(msg && strcmp(msg, c->message) == 0, c, "message\n  got  %s\n  want %s",
               msg ? msg : "(none)", c->message);
        EXPECT(cJSON_IsNumber(code) && code->valueint == c->code, c, "code %d, want %d",
               cJSON_IsNumber(code) ? code->valueint : -1, c->code);
        EXPECT(strcmp(json_find_str(status, "reason", NULL),
                      c->code == 422 ? "Invalid" : "Forbidden") == 0,
               c, "reason %s", json_find_str(status, "reason", NULL));
}

static void check_warnings(const struct wcase *c, const cJSON *resp)
{
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(resp, "warnings");

        if (!c->warning) {
                EXPECT(!w, c, "unexpected warnings");
                return;
        }
        EXPECT(cJSON_GetArraySize(w) == 1, c, "want exactly one warning");
        EXPECT(strcmp(cJSON_GetArrayItem(w, 0)->valuestring, c->warning) == 0, c,
               "warning\n  got  %s\n  want %s", cJSON_GetArrayItem(w, 0)->valuestring, c->warning);
}

static void check_patch(const struct wcase *c, const cJSON *resp)
{
        const char *type = json_find_str(resp, "patchType", NULL);
        const char *b64 = json_find_str(resp, "patch", NULL);
        unsigned char *raw = NULL;
        size_t n = 0;
        char *want;
        cJSON *got;
        cJSON *exp;

        if (!c->patch) {
                EXPECT(!type && !b64, c, "unexpected patch");
                return;
        }
        EXPECT(type && strcmp(type, "JSONPatch") == 0 && b64, c, "want a JSONPatch");
        EXPECT(base64_decode(b64, strlen(b64), &raw, &n) == 0, c, "patch is not base64");
        want = squote(c->patch);
        got = cJSON_ParseWithLength((const char *)raw, n);
        exp = cJSON_Parse(want);
        EXPECT(got && exp && cJSON_Compare(got, exp, true), c, "patch\n  got  %s\n  want %s",
               (const char *)raw, want);
        cJSON_Delete(got);
        cJSON_Delete(exp);
        free(want);
        free(raw);
}

static void run_case_version(const struct wcase *c, const char *version)
{
        char *path = xasprintf("/%s" PREFIX "%s", c->mutate ? "mutate" : "validate", c->ep);
        char *body = review(c, version);
        char *reply = NULL;
        char *api = xasprintf("admission.k8s.io/%s", version);
        char *uid = xasprintf("uid-%s", version);
        long status = post(path, body, &reply);
        cJSON *root = cJSON_Parse(reply);
        const cJSON *resp = cJSON_GetObjectItemCaseSensitive(root, "response");
        const cJSON *allowed = cJSON_GetObjectItemCaseSensitive(resp, "allowed");

        EXPECT(status == 200, c, "HTTP %ld: %s", status, reply);
        EXPECT(strcmp(json_find_str(root, "apiVersion", NULL), api) == 0, c, "apiVersion %s",
               json_find_str(root, "apiVersion", NULL));
        EXPECT(strcmp(json_find_str(root, "kind", NULL), "AdmissionReview") == 0, c, "kind");
        EXPECT(strcmp(json_find_str(resp, "uid", NULL), uid) == 0, c, "uid not echoed");
        EXPECT(cJSON_IsBool(allowed) && cJSON_IsTrue(allowed) == c->allowed, c, "allowed is %s: %s",
               cJSON_IsTrue(allowed) ? "true" : "false", reply);
        if (!c->allowed)
                check_denial(c, resp);
        else
                EXPECT(!cJSON_GetObjectItemCaseSensitive(resp, "status"), c, "status on allow");
        check_warnings(c, resp);
        check_patch(c, resp);
        cJSON_Delete(root);
        free(uid);
        free(api);
        free(reply);
        free(body);
        free(path);
}

/* Every case goes out as an admission.k8s.io/v1 and as a v1beta1 review. */
static void run_cases(const struct wcase *cases, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                run_case_version(&cases[i], "v1");
                run_case_version(&cases[i], "v1beta1");
        }
}

/* A table of cases: the state of the cmocka test that runs it. */
struct wtable {
        const struct wcase *cases;
        size_t n;
};

static void test_webhooks__table(void **state)
{
        const struct wtable *t = *state;

        run_cases(t->cases, t->n);
}

/* A CREATE on endpoint ep (validating): allowed, or denied 422 with msg. */
#define CREATE(name, ep, obj, ok, msg)                                               \
        {                                                                            \
                name, ep, false, "CREATE", obj, NULL, NULL, ok, 422, msg, NULL, NULL \
        }
#define MM_CREATE(name, spec, ok, msg) CREATE(name, "maasmachine", MM(spec), ok, msg)
#define MC_CREATE(name, spec, ok, msg) CREATE(name, "maascluster", MC(spec), ok, msg)

/* ---- the reference's acceptance cases (upstream-capmaas.md 6.1) ---- */

static const struct wcase reference_cases[] = {
        { "W1 create with dns name", "maascluster", false, "CREATE", MC("'dnsDomain':'maas.sc'"),
          NULL, NULL, true, 0, NULL, NULL, NULL },
        MC_CREATE("W2 create without dns name",
                  "'dnsDomain':''",
                  false,
                  INVALID_MC "spec.dnsDomain: Required value"),
        { "W3 dns domain change", "maascluster", false, "UPDATE", MC("'dnsDomain':'maas.maas'"),
          MC("'dnsDomain':'maas.sc'"), NULL, false, 403, "changing cluster DNS Domain not allowed",
          NULL, NULL },
        { "W4 machine min memory change", "maasmachine", false, "UPDATE",
          MM("'image':'ubuntu1804-k8s-1.19','minCPU':10,'minMemory':101"), MM(W4), NULL, false, 403,
          "maas machine min memory change is not allowed, old=100 MB, new=101 MB", NULL, NULL },
        { "W5 machine min cpu change", "maasmachine", false, "UPDATE",
          MM("'image':'ubuntu1804-k8s-1.19','minCPU':11,'minMemory':100"), MM(W4), NULL, false, 403,
          "maas machine min cpu count change is not allowed, old=10, new=11", NULL, NULL },
        { "W6 machine image change", "maasmachine", false, "UPDATE",
          MM("'image':'ubuntu1804-k8s-1.20','minCPU':10,'minMemory':100"), MM(W4), NULL, false, 403,
          "maas machine image change is not allowed, old=ubuntu1804-k8s-1.19, "
          "new=ubuntu1804-k8s-1.20",
          NULL, NULL },
        { "W7 template min memory change", "maasmachinetemplate", false, "UPDATE",
          MMT("'image':'ubuntu1804-k8s-1.19','minCPU':10,'minMemory':101"), MMT(W4), NULL, false,
          403, "maas machine template min memory change is not allowed, old=100 MB, new=101 MB",
          NULL, NULL },
        { "W8 template cpu and memory change: cpu first", "maasmachinetemplate", false, "UPDATE",
          MMT("'image':'ubuntu1804-k8s-1.19','minCPU':11,'minMemory':101"), MMT(W4), NULL, false,
          403, "maas machine template min cpu count change is not allowed, old=10, new=11", NULL,
          NULL },
        { "W9 template image change", "maasmachinetemplate", false, "UPDATE",
          MMT("'image':'ubuntu1804-k8s-1.20','minCPU':10,'minMemory':100"), MMT(W4), NULL, false,
          403,
          "maas machine template image change is not allowed, old=ubuntu1804-k8s-1.19, "
          "new=ubuntu1804-k8s-1.20",
          NULL, NULL },
        { "image checked before cpu and memory", "maasmachine", false, "UPDATE",
          MM("'image':'ubuntu/noble','minCPU':11,'minMemory':101"), MM(W4), NULL, false, 403,
          "maas machine image change is not allowed, old=ubuntu1804-k8s-1.19, new=ubuntu/noble",
          NULL, NULL },
        { "machine: mutable fields may change", "maasmachine", false, "UPDATE",
          MM(W4 ",'tags':['gpu'],'resourcePool':'pool-b','failureDomain':'zone-b',"
                "'providerID':'maas:///zone-b/abc123'"),
          MM(W4 ",'tags':['ssd'],'resourcePool':'pool-a','failureDomain':'zone-a'"), NULL, true, 0,
          NULL, NULL, NULL },
        /* capmaas: the deploy options are applied once, in MAAS (docs/deploy-options.md) */
        { "machine: deployInMemory is immutable", "maasmachine", false, "UPDATE",
          MM(W4 ",'deployInMemory':true"), MM(W4 ",'deployInMemory':false"), NULL, false, 422,
          INVALID_MM "spec.deployInMemory: Invalid value: field is immutable: MAAS applied it "
                     "when the machine was allocated or deployed",
          NULL, NULL },
        { "machine: no-op update", "maasmachine", false, "UPDATE", MM(W4), MM(W4), NULL, true, 0,
          NULL, NULL, NULL },
        { "cluster: failureDomains and lxdConfig may change", "maascluster", false, "UPDATE",
          MC("'dnsDomain':'maas.sc','failureDomains':['az1','az2'],'lxdConfig':{'enabled':false}"),
          MC("'dnsDomain':'maas.sc','failureDomains':['az1']"), NULL, true, 0, NULL, NULL, NULL },
        MM_CREATE("machine create without required fields",
                  "'tags':[]",
                  false,
                  INVALID_MM "[spec.image: Required value, spec.minCPU: Required value, "
                             "spec.minMemory: Required value]"),
        MM_CREATE("negative minCPU",
                  "'image':'ubuntu/jammy','minCPU':-1,'minMemory':100",
                  false,
                  INVALID_MM "spec.minCPU: Invalid value: -1: must be greater than or equal to 0"),
        { "delete is allowed", "maasmachine", false, "DELETE", NULL, MM(W4), NULL, true, 0, NULL,
          NULL, NULL },
        { "mutating endpoints allow", "maasmachine", true, "CREATE", MM(W4), NULL, NULL, true, 0,
          NULL, NULL, NULL },
};

/* ---- MaasMachine value rules ---- */

static const struct wcase machine_cases[] = {
        MM_CREATE("osystem/release", GOOD, true, NULL),
        MM_CREATE("bare release is custom",
                  "'image':'u-2204-0-k-1329-0','minCPU':1,'minMemory':1",
                  true,
                  NULL),
        MM_CREATE("rhel derivative", "'image':'rhel/rocky-9','minCPU':1,'minMemory':1", true, NULL),
        MM_CREATE("custom image with dots",
                  "'image':'custom/my.img_1','minCPU':1,'minMemory':1",
                  true,
                  NULL),
        MM_CREATE("limits are inclusive",
                  "'image':'centos/8','minCPU':1024,'minMemory':16777216,"
                  "'minDiskSize':0",
                  true,
                  NULL),
        MM_CREATE("empty image",
                  "'image':'','minCPU':1,'minMemory':1",
                  false,
                  INVALID_MM "spec.image: Required value"),
        MM_CREATE("unknown osystem",
                  "'image':'foo/bar','minCPU':1,'minMemory':1",
                  false,
                  INVALID_MM "spec.image: Invalid value: \"foo/bar\": unknown operating system "
                             "\"foo\" " OSYSTEMS),
        MM_CREATE("osystem is case-sensitive",
                  "'image':'Ubuntu/jammy','minCPU':1,'minMemory':1",
                  false,
                  INVALID_MM "spec.image: Invalid value: \"Ubuntu/jammy\": unknown operating "
                             "system \"Ubuntu\" " OSYSTEMS),
        MM_CREATE("leading slash",
                  "'image':'/jammy','minCPU':1,'minMemory':1",
                  false,
                  INVALID_MM "spec.image: Invalid value: \"/jammy\": must not start with '/'"),
        MM_CREATE("trailing slash",
                  "'image':'ubuntu/','minCPU':1,'minMemory':1",
                  false,
                  INVALID_MM "spec.image: Invalid value: \"ubuntu/\": must not end with '/'"),
        MM_CREATE("second slash",
                  "'image':'ubuntu/jammy/x','minCPU':1,'minMemory':1",
                  false,
                  INVALID_MM "spec.image: Invalid value: \"ubuntu/jammy/x\": must contain at most "
                             "one '/' (<osystem>/<release> or a bare <release>)"),
        MM_CREATE("empty part",
                  "'image':'ubuntu//jammy','minCPU':1,'minMemory':1",
                  false,
                  INVALID_MM "spec.image: Invalid value: \"ubuntu//jammy\": must contain at most "
                             "one '/' (<osystem>/<release> or a bare <release>)"),
        MM_CREATE("bad characters",
                  "'image':'ubuntu/jam my','minCPU':1,'minMemory':1",
                  false,
                  INVALID_MM "spec.image: Invalid value: \"ubuntu/jam my\": must contain only "
                             "letters, digits, '.', '-', '_' and one '/'"),
        MM_CREATE("control characters are quoted",
                  "'image':'a\\tb','minCPU':1,'minMemory':1",
                  false,
                  INVALID_MM "spec.image: Invalid value: \"a\\tb\": must contain only letters, "
                             "digits, '.', '-', '_' and one '/'"),
        MM_CREATE("minCPU above 1024",
                  "'image':'ubuntu/jammy','minCPU':1025,'minMemory':1",
                  false,
                  INVALID_MM
                  "spec.minCPU: Invalid value: 1025: must be less than or equal to 1024"),
        MM_CREATE("minMemory above 16 TiB",
                  "'image':'ubuntu/jammy','minCPU':1,'minMemory':16777217",
                  false,
                  INVALID_MM "spec.minMemory: Invalid value: 16777217: must be less than or equal "
                             "to 16777216"),
        MM_CREATE("negative minMemory",
                  "'image':'ubuntu/jammy','minCPU':1,'minMemory':-5",
                  false,
                  INVALID_MM "spec.minMemory: Invalid value: -5: must be greater than or equal to "
                             "0"),
        MM_CREATE("negative minDiskSize",
                  GOOD ",'minDiskSize':-1",
                  false,
                  INVALID_MM "spec.minDiskSize: Invalid value: -1: must be greater than or equal "
                             "to 0"),
        MM_CREATE("empty resourcePool",
                  GOOD ",'resourcePool':''",
                  false,
                  INVALID_MM "spec.resourcePool: Invalid value: \"\": must not be empty"),
        MM_CREATE("resourcePool syntax",
                  GOOD ",'resourcePool':'my pool'",
                  false,
                  INVALID_MM "spec.resourcePool: Invalid value: \"my pool\": " MAAS_NAME),
        MM_CREATE("failureDomain syntax",
                  GOOD ",'failureDomain':'zone.1'",
                  false,
                  INVALID_MM "spec.failureDomain: Invalid value: \"zone.1\": " MAAS_NAME),
        MM_CREATE("valid names",
                  GOOD ",'resourcePool':'pool_1','failureDomain':'zone-1',"
                       "'tags':['gpu','ssd-2']",
                  true,
                  NULL),
        MM_CREATE("tag syntax and empty tags",
                  GOOD ",'tags':['ok','','a b']",
                  false,
                  INVALID_MM "[spec.tags[1]: Invalid value: \"\": must not be empty, "
                             "spec.tags[2]: Invalid value: \"a b\": " MAAS_NAME "]"),
        MM_CREATE("duplicate tags",
                  GOOD ",'tags':['gpu','ssd','gpu']",
                  false,
                  INVALID_MM "spec.tags[2]: Duplicate value: \"gpu\""),
        MM_CREATE("providerID format",
                  GOOD ",'providerID':'maas://zone/abc'",
                  false,
                  INVALID_MM "spec.providerID: Invalid value: \"maas://zone/abc\": must be "
                             "maas:///<zone>/<system_id> (zone and system_id of letters, "
                             "digits, '-' and '_')"),
        MM_CREATE(
                "providerID with a zone", GOOD ",'providerID':'maas:///zone-a/abc123'", true, NULL),
        MM_CREATE("providerID without a zone", GOOD ",'providerID':'maas:////abc123'", true, NULL),
        MM_CREATE("too many tags",
                  GOOD ",'tags':[" TAGS65 "]",
                  false,
                  INVALID_MM "spec.tags: Too many: 65: must have at most 64 items"),
        MM_CREATE("lxd disk size",
                  GOOD ",'lxd':{'enabled':true,'vmConfig':{'diskSize':0}}",
                  false,
                  INVALID_MM "spec.lxd.vmConfig.diskSize: Invalid value: 0: must be greater than "
                             "or equal to 1"),
        MM_CREATE("every error at once",
                  "'image':'foo/bar','minCPU':-1,'tags':['x','x']",
                  false,
                  INVALID_MM "[spec.image: Invalid value: \"foo/bar\": unknown operating system "
                             "\"foo\" " OSYSTEMS ", spec.minCPU: Invalid value: -1: must be "
                             "greater than or equal to 0, spec.minMemory: Required value, "
                             "spec.tags[1]: Duplicate value: \"x\"]"),
        MM_CREATE("wrong JSON types",
                  "'image':7,'minCPU':'2','minMemory':1.5,'tags':'gpu'",
                  false,
                  INVALID_MM "[spec.minCPU: Invalid value: expected integer, got string, "
                             "spec.minMemory: Invalid value: expected integer, got number, "
                             "spec.tags: Invalid value: expected array, got string, "
                             "spec.image: Invalid value: expected string, got integer]"),
        { "any machine will do: a warning", "maasmachine", false, "CREATE",
          MM("'image':'ubuntu/jammy','minCPU':0,'minMemory':0"), NULL, NULL, true, 0, NULL,
          "spec.minCPU and spec.minMemory are both 0: any machine will do", NULL },
        { "warnings come with denials", "maasmachine", false, "CREATE",
          MM("'image':'','minCPU':0,'minMemory':0"), NULL, NULL, false, 422,
          INVALID_MM "spec.image: Required value",
          "spec.minCPU and spec.minMemory are both 0: any machine will do", NULL },
};

/* ---- MaasMachineTemplate ---- */

static const struct wcase template_cases[] = {
        CREATE("template value rules use the template path",
               "maasmachinetemplate",
               MMT("'image':'ubuntu/jammy','minCPU':-1,'minMemory':4096,'tags':['a','a']"),
               false,
               INVALID_MMT "[spec.template.spec.minCPU: Invalid value: -1: must be greater than or "
                           "equal to 0, spec.template.spec.tags[1]: Duplicate value: \"a\"]"),
        { "template warning", "maasmachinetemplate", false, "CREATE",
          MMT("'image':'ubuntu/jammy','minCPU':0,'minMemory':0"), NULL, NULL, true, 0, NULL,
          "spec.template.spec.minCPU and spec.template.spec.minMemory are both 0: any machine "
          "will do",
          NULL },
        { "template spec is immutable", "maasmachinetemplate", false, "UPDATE",
          MMT(GOOD ",'tags':['gpu']"), MMT(GOOD), NULL, false, 422,
          INVALID_MMT "spec.template.spec: Forbidden: field is immutable; create a new "
                      "MaasMachineTemplate instead",
          NULL, NULL },
        { "template metadata may change", "maasmachinetemplate", false, "UPDATE",
          MMT_ANN("'note':'x'", GOOD), MMT(GOOD), NULL, true, 0, NULL, NULL, NULL },
        { "topology dry-run may change the spec", "maasmachinetemplate", false, "UPDATE",
          MMT_ANN(DRY_RUN, "'image':'ubuntu/noble','minCPU':4,'minMemory':8192"), MMT(GOOD),
          "'dryRun':true", true, 0, NULL, NULL, NULL },
        { "topology dry-run still checks values", "maasmachinetemplate", false, "UPDATE",
          MMT_ANN(DRY_RUN, "'image':'ubuntu/noble','minCPU':4000,'minMemory':8192"), MMT(GOOD),
          "'dryRun':true", false, 422,
          INVALID_MMT "spec.template.spec.minCPU: Invalid value: 4000: must be less than or "
                      "equal to 1024",
          NULL, NULL },
        { "dry-run annotation without dryRun", "maasmachinetemplate", false, "UPDATE",
          MMT_ANN(DRY_RUN, "'image':'ubuntu/jammy','minCPU':4,'minMemory':4096"), MMT(GOOD), NULL,
          false, 403, "maas machine template min cpu count change is not allowed, old=2, new=4",
          NULL, NULL },
        { "dryRun without the annotation", "maasmachinetemplate", false, "UPDATE",
          MMT("'image':'ubuntu/jammy','minCPU':4,'minMemory':4096"), MMT(GOOD), "'dryRun':true",
          false, 403, "maas machine template min cpu count change is not allowed, old=2, new=4",
          NULL, NULL },
        { "cluster template spec is immutable", "maasclustertemplate", false, "UPDATE",
          MCT("'dnsDomain':'b.maas'"), MCT("'dnsDomain':'a.maas'"), NULL, false, 422,
          INVALID_MCT "spec.template.spec: Forbidden: field is immutable; create a new "
                      "MaasClusterTemplate instead",
          NULL, NULL },
        CREATE("cluster template values",
               "maasclustertemplate",
               MCT("'dnsDomain':'maas','failureDomains':['az1','az1']"),
               false,
               INVALID_MCT "spec.template.spec.failureDomains[1]: Duplicate value: \"az1\""),
        { "cluster template dry-run", "maasclustertemplate", false, "UPDATE",
          OBJ("MaasClusterTemplate",
              "ct1",
              ",'annotations':{" DRY_RUN "}",
              "{'template':{'spec':{'dnsDomain':'b.maas'}}}"),
          MCT("'dnsDomain':'a.maas'"), "'dryRun':true", true, 0, NULL, NULL, NULL },
};

/* ---- MaasCluster ---- */

static const struct wcase cluster_cases[] = {
        MC_CREATE("missing dnsDomain",
                  "'failureDomains':[]",
                  false,
                  INVALID_MC "spec.dnsDomain: Required value"),
        MC_CREATE("dnsDomain syntax",
                  "'dnsDomain':'Maas.SC'",
                  false,
                  INVALID_MC "spec.dnsDomain: Invalid value: \"Maas.SC\": " DNS1123),
        MC_CREATE("dnsDomain trailing dot",
                  "'dnsDomain':'maas.'",
                  false,
                  INVALID_MC "spec.dnsDomain: Invalid value: \"maas.\": " DNS1123),
        MC_CREATE("endpoint with a DNS host",
                  "'dnsDomain':'maas','controlPlaneEndpoint':"
                  "{'host':'api.maas','port':6443}",
                  true,
                  NULL),
        MC_CREATE("endpoint with IPs",
                  "'dnsDomain':'maas','controlPlaneEndpoint':"
                  "{'host':'fd00::1','port':443}",
                  true,
                  NULL),
        MC_CREATE("unset endpoint as the reference writes it",
                  "'dnsDomain':'maas','controlPlaneEndpoint':{'host':'','port':0}",
                  true,
                  NULL),
        MC_CREATE("endpoint host syntax",
                  "'dnsDomain':'maas','controlPlaneEndpoint':{'host':'bad host','port':6443}",
                  false,
                  INVALID_MC "spec.controlPlaneEndpoint.host: Invalid value: \"bad host\": must "
                             "be an IP address or a lowercase RFC 1123 DNS name"),
        MC_CREATE("endpoint port range",
                  "'dnsDomain':'maas','controlPlaneEndpoint':{'host':'10.0.0.1','port':70000}",
                  false,
                  INVALID_MC "spec.controlPlaneEndpoint.port: Invalid value: 70000: must be "
                             "between 1 and 65535, inclusive"),
        MC_CREATE("endpoint port without host",
                  "'dnsDomain':'maas','controlPlaneEndpoint':{'host':'','port':6443}",
                  false,
                  INVALID_MC "spec.controlPlaneEndpoint.host: Required value"),
        MC_CREATE("failureDomains unique and valid",
                  "'dnsDomain':'maas','failureDomains':['az1','','az1','a z']",
                  false,
                  INVALID_MC "[spec.failureDomains[1]: Invalid value: \"\": must not be empty, "
                             "spec.failureDomains[2]: Duplicate value: \"az1\", "
                             "spec.failureDomains[3]: Invalid value: \"a z\": " MAAS_NAME "]"),
        MC_CREATE("lxdConfig nicType enum",
                  "'dnsDomain':'maas','lxdConfig':{'nicType':'bridged'}",
                  false,
                  INVALID_MC "spec.lxdConfig.nicType: Unsupported value: \"bridged\": supported "
                             "values: \"bridge\", \"macvlan\""),
        MC_CREATE("port of the wrong type",
                  "'dnsDomain':'maas','controlPlaneEndpoint':{'host':'a','port':'6443'}",
                  false,
                  INVALID_MC "spec.controlPlaneEndpoint.port: Invalid value: expected integer, "
                             "got string"),
};

/* ---- exemptions and ratcheting ---- */

static const struct wcase exemption_cases[] = {
        { "delete-for-move allows an immutable change", "maasmachine", false, "UPDATE",
          MM_ANN(MOVE, "'image':'ubuntu1804-k8s-1.20','minCPU':10,'minMemory':100"), MM(W4), NULL,
          true, 0, NULL, NULL, NULL },
        { "delete-for-move allows any object", "maascluster", false, "CREATE",
          OBJ("MaasCluster", "c1", ",'annotations':{" MOVE "}", "{'dnsDomain':''}"), NULL, NULL,
          true, 0, NULL, NULL, NULL },
        { "errors the stored object had are not reported", "maasmachine", false, "UPDATE",
          MM("'image':'foo/bar','minCPU':10,'minMemory':100,'tags':['b']"),
          MM("'image':'foo/bar','minCPU':10,'minMemory':100,'tags':['a']"), NULL, true, 0, NULL,
          NULL, NULL },
        { "new errors on update are reported", "maasmachine", false, "UPDATE",
          MM(W4 ",'tags':['a b']"), MM(W4 ",'tags':['a']"), NULL, false, 422,
          INVALID_MM "spec.tags[0]: Invalid value: \"a b\": " MAAS_NAME, NULL, NULL },
        { "an unreadable old object does not block", "maasmachine", false, "UPDATE",
          MM(W4 ",'tags':['a']"), MM("'minCPU':'x'"), NULL, true, 0, NULL, NULL, NULL },
        { "connect is allowed", "maasmachine", false, "CONNECT", MM(W4), NULL, NULL, true, 0, NULL,
          NULL, NULL },
};

/* ---- defaulting ---- */

static const struct wcase default_cases[] = {
        { "duplicate tags removed keeping order", "maasmachine", true, "CREATE",
          MM(GOOD ",'tags':['a','b','a','c','b']"), NULL, NULL, true, 0, NULL, NULL,
          "[{'op':'replace','path':'/spec/tags','value':['a','b','c']}]" },
        { "unique tags: no patch", "maasmachine", true, "CREATE", MM(GOOD ",'tags':['a','b']"),
          NULL, NULL, true, 0, NULL, NULL, NULL },
        { "template tags", "maasmachinetemplate", true, "UPDATE", MMT(GOOD ",'tags':['x','x']"),
          MMT(GOOD), NULL, true, 0, NULL, NULL,
          "[{'op':'replace','path':'/spec/template/spec/tags','value':['x']}]" },
        { "endpoint port defaulted", "maascluster", true, "CREATE",
          MC("'dnsDomain':'maas','controlPlaneEndpoint':{'host':'api.maas'}"), NULL, NULL, true, 0,
          NULL, NULL, "[{'op':'add','path':'/spec/controlPlaneEndpoint/port','value':6443}]" },
        { "endpoint port 0 defaulted", "maascluster", true, "UPDATE",
          MC("'dnsDomain':'maas','controlPlaneEndpoint':{'host':'api.maas','port':0}"),
          MC("'dnsDomain':'maas'"), NULL, true, 0, NULL, NULL,
          "[{'op':'add','path':'/spec/controlPlaneEndpoint/port','value':6443}]" },
        { "endpoint port kept", "maascluster", true, "CREATE",
          MC("'dnsDomain':'maas','controlPlaneEndpoint':{'host':'api.maas','port':443}"), NULL,
          NULL, true, 0, NULL, NULL, NULL },
        { "no host: no port", "maascluster", true, "CREATE",
          MC("'dnsDomain':'maas','controlPlaneEndpoint':{'host':'','port':0}"), NULL, NULL, true, 0,
          NULL, NULL, NULL },
        { "cluster template port", "maasclustertemplate", true, "CREATE",
          MCT("'dnsDomain':'maas','controlPlaneEndpoint':{'host':'10.0.0.1'}"), NULL, NULL, true, 0,
          NULL, NULL,
          "[{'op':'add','path':'/spec/template/spec/controlPlaneEndpoint/port','value':6443}]" },
        { "invalid objects are left to validation", "maasmachine", true, "CREATE",
          MM("'tags':'x','minCPU':'y'"), NULL, NULL, true, 0, NULL, NULL, NULL },
        { "delete: nothing to default", "maasmachine", true, "DELETE", NULL, MM(W4), NULL, true, 0,
          NULL, NULL, NULL },
};

/* ---- the NewInvalid shape ---- */

/* Posts a MaasMachine CREATE with spec and returns the parsed reply (*ret_details set to
 * response.status.details). */
static cJSON *deny_details(const char *spec_json, const cJSON **ret_details)
{
        struct wcase c = {
                .name = "details", .ep = "maasmachine", .op = "CREATE", .obj = spec_json
        };
        char *body = review(&c, "v1");
        char *reply = NULL;
        cJSON *root;
        const cJSON *status;

        assert_int_equal(post("/validate" PREFIX "maasmachine", body, &reply), 200);
        root = cJSON_Parse(reply);
        status = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(root, "response"), "status");
        assert_string_equal(json_find_str(status, "status", NULL), "Failure");
        *ret_details = cJSON_GetObjectItemCaseSensitive(status, "details");
        free(reply);
        free(body);
        return root;
}

static void assert_cause(
        const cJSON *details, int i, const char *reason, const char *field, const char *message)
{
        const cJSON *causes = cJSON_GetObjectItemCaseSensitive(details, "causes");
        const cJSON *cause = cJSON_GetArrayItem(causes, i);

        assert_string_equal(json_find_str(cause, "reason", NULL), reason);
        assert_string_equal(json_find_str(cause, "field", NULL), field);
        assert_string_equal(json_find_str(cause, "message", NULL), message);
}

static void test_webhooks__invalid_denial_has_details_and_causes(void **state)
{
        const cJSON *details;
        cJSON *root = deny_details(MM("'image':'','minCPU':-1,'minMemory':1"), &details);

        (void)state;
        assert_string_equal(json_find_str(details, "kind", NULL), "MaasMachine");
        assert_string_equal(json_find_str(details, "group", NULL),
                            "infrastructure.cluster.x-k8s.io");
        assert_string_equal(json_find_str(details, "name", NULL), "m1");
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(details, "causes")),
                         2);
        assert_cause(details, 0, "FieldValueRequired", "spec.image", "Required value");
        assert_cause(details, 1, "FieldValueInvalid", "spec.minCPU",
                     "Invalid value: -1: must be greater than or equal to 0");
        cJSON_Delete(root);
}

static void test_webhooks__type_errors_are_type_invalid_causes(void **state)
{
        const cJSON *details;
        cJSON *root = deny_details(MM("'image':'','minCPU':-1,'minMemory':1,'tags':'x'"), &details);

        (void)state;
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(details, "causes")),
                         1);
        assert_cause(details, 0, "FieldValueTypeInvalid", "spec.tags",
                     "Invalid value: expected array, got string");
        cJSON_Delete(root);
}

/* A generateName create has no name yet: the message quotes "". */
static void test_webhooks__denial_of_unnamed_object_quotes_empty_name(void **state)
{
        static const struct wcase c = {
                "unnamed",
                "maasmachine",
                false,
                "CREATE",
                "{'apiVersion':'infrastructure.cluster.x-k8s.io/v1beta1','kind':'MaasMachine',"
                "'metadata':{'generateName':'m-'},'spec':{'minCPU':1,'minMemory':1}}",
                NULL,
                NULL,
                false,
                422,
                "MaasMachine.infrastructure.cluster.x-k8s.io \"\" is invalid: spec.image: "
                "Required value",
                NULL,
                NULL
        };

        (void)state;
        run_case_version(&c, "v1");
}

/* ---- malformed reviews: HTTP 400 with a message ---- */

struct bad_case {
        const char *name;
        const char *body; /* ' for " */
        const char *reply;
};

#define REQ(members) \
        "{'apiVersion':'admission.k8s.io/v1','kind':'AdmissionReview','request':{" members "}}"
#define KIND_MM "'kind':{'group':'infrastructure.cluster.x-k8s.io','kind':'MaasMachine'}"

static const struct bad_case bad_cases[] = {
        { "not JSON", "this is not json",
          "bad AdmissionReview: body is not valid JSON: expected a JSON value at offset 0\n" },
        { "truncated JSON", "{'apiVersion':",
          "bad AdmissionReview: body is not valid JSON: apiVersion: expected a JSON value, got "
          "the end (offset 14)\n" },
        { "not an object", "[1,2]", "bad AdmissionReview: body is not a JSON object\n" },
        { "not an AdmissionReview", "{'apiVersion':'v1','kind':'Pod'}",
          "bad AdmissionReview: kind: expected \"AdmissionReview\"\n" },
        { "unknown version", "{'apiVersion':'admission.k8s.io/v2','kind':'AdmissionReview'}",
          "bad AdmissionReview: apiVersion: unsupported \"admission.k8s.io/v2\" (expected "
          "admission.k8s.io/v1 or admission.k8s.io/v1beta1)\n" },
        { "no request", "{'apiVersion':'admission.k8s.io/v1','kind':'AdmissionReview'}",
          "bad AdmissionReview: request: missing or not an object\n" },
        { "request not an object",
          "{'apiVersion':'admission.k8s.io/v1','kind':'AdmissionReview','request':[]}",
          "bad AdmissionReview: request: missing or not an object\n" },
        { "no uid", REQ("'operation':'CREATE'," KIND_MM),
          "bad AdmissionReview: request.uid: required field missing\n" },
        { "empty uid", REQ("'uid':'','operation':'CREATE'," KIND_MM),
          "bad AdmissionReview: request.uid: must not be empty\n" },
        { "uid of the wrong type", REQ("'uid':5,'operation':'CREATE'," KIND_MM),
          "bad AdmissionReview: request.uid: expected string, got integer\n" },
        { "unknown operation", REQ("'uid':'u','operation':'PATCH'," KIND_MM),
          "bad AdmissionReview: request.operation: unknown operation \"PATCH\"\n" },
        { "kind not an object", REQ("'uid':'u','operation':'CREATE','kind':'MaasMachine'"),
          "bad AdmissionReview: request.kind: expected object, got string\n" },
        { "dryRun of the wrong type",
          REQ("'uid':'u','operation':'CREATE'," KIND_MM ",'dryRun':'yes','object':{}"),
          "bad AdmissionReview: request.dryRun: expected boolean, got string\n" },
        { "object of the wrong type", REQ("'uid':'u','operation':'CREATE'," KIND_MM ",'object':[]"),
          "bad AdmissionReview: request.object: expected object, got array\n" },
        { "missing object on create", REQ("'uid':'u','operation':'CREATE'," KIND_MM),
          "bad AdmissionReview: request.object: required for this operation\n" },
        { "review for another kind",
          REQ("'uid':'u','operation':'CREATE','kind':{'kind':'MaasCluster'},'object':{}"),
          "bad AdmissionReview: request.kind.kind: this endpoint admits MaasMachine, got "
          "\"MaasCluster\"\n" },
        { "object of another kind",
          REQ("'uid':'u','operation':'CREATE'," KIND_MM ",'object':{'kind':'MaasCluster'}"),
          "bad AdmissionReview: request.object.kind: this endpoint admits MaasMachine, got "
          "\"MaasCluster\"\n" },
};

static void test_webhooks__malformed_reviews_get_400_with_a_message(void **state)
{
        static const char *const paths[] = { "/validate" PREFIX "maasmachine",
                                             "/mutate" PREFIX "maasmachine" };

        (void)state;
        for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
                const struct bad_case *c = &bad_cases[i];
                char *body = squote(c->body);

                for (size_t j = 0; j < 2; j++) {
                        char *reply = NULL;
                        long status = post(paths[j], body, &reply);

                        EXPECT(status == 400, c, "%s: HTTP %ld: %s", paths[j], status, reply);
                        EXPECT(strcmp(reply, c->reply) == 0, c, "reply\n  got  %s\n  want %s",
                               reply, c->reply);
                        free(reply);
                }
                free(body);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
/* A test that runs a table of cases, named as its own function would be. */
#define WTABLE(cases)           (&(struct wtable){ cases, ARRAY_SIZE(cases) })
#define TABLE(test_name, cases) { test_name, test_webhooks__table, NULL, NULL, WTABLE(cases) }
                TABLE("test_webhooks__reference_cases_w1_to_w9", reference_cases),
                TABLE("test_webhooks__machine_rules", machine_cases),
                TABLE("test_webhooks__template_rules", template_cases),
                TABLE("test_webhooks__cluster_rules", cluster_cases),
                TABLE("test_webhooks__capi_exemptions_and_ratcheting", exemption_cases),
                TABLE("test_webhooks__defaulting_patches", default_cases),
#undef TABLE
#undef WTABLE
                cmocka_unit_test(test_webhooks__invalid_denial_has_details_and_causes),
                cmocka_unit_test(test_webhooks__type_errors_are_type_invalid_causes),
                cmocka_unit_test(test_webhooks__denial_of_unnamed_object_quotes_empty_name),
                cmocka_unit_test(test_webhooks__malformed_reviews_get_400_with_a_message),
        };
        int r;

        curl_global_init(CURL_GLOBAL_DEFAULT);
        r = cmocka_run_group_tests_name("webhooks", tests, setup, teardown);
        curl_global_cleanup();
        return r;
}
