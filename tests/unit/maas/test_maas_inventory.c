/*
 * The MAAS inventory cache behind the admission checks: snapshot queries (MAAS's image
 * naming rules, the fit counts), and the cache's states driven by a fake transport and a
 * fake clock with no background thread (loaded, unreachable, unauthorized, stale after ten
 * intervals), the miss refresh limit and the metrics.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "buf.h"
#include "clock.h"
#include "compiler.h"
#include "err.h"
#include "maas_inventory.h"
#include "metrics.h"
#include "xalloc.h"

/* --- a hand-built snapshot ------------------------------------------------------------------- */

/* The list structs hold char *; the builder only reads them. */
#define S(lit) ((char *)(uintptr_t)(lit))

static struct maas_named N(const char *name) {
        return (struct maas_named){ .id = 1, .name = (char *)(uintptr_t)name };

}

static struct maas_node
node(const char *id,
     int status,
     int cpu,
     int64_t mem,
     const char *zone,
     const char *pool,
     char **tags,
     size_t n_tags)

{
        return (struct maas_node){ .system_id = (char *)(uintptr_t)id,
                                   .status = status,
                                   .cpu_count = cpu,
                                   .memory_mib = mem,
                                   .zone = (char *)(uintptr_t)zone,
                                   .pool = (char *)(uintptr_t)pool,
                                   .tags = { .v = tags, .n = n_tags } };
}

static struct maas_inventory_snapshot *sample(void)
{
        static char *gpu[] = { S("gpu") };
        static char *gpu_cp[] = { S("gpu"), S("cp") };
        struct maas_named zones[] = { N("az2"), N("az1") };
        struct maas_named pools[] = { N("default"), N("capi") };
        struct maas_named tags[] = { N("gpu"), N("cp") };
        struct maas_named domains[] = { N("maas") };
        struct maas_boot_resource images[] = {
                { .name = S("ubuntu/jammy"), .type = S("Synced") },
                { .name = S("u-2204-k8s"), .type = S("Uploaded") },
                { .name = S("custom/legacy"), .type = S("Uploaded") },
        };
        struct maas_node machines[] = {
                node("a", 4, 16, 32768, "az1", "capi", gpu_cp, 2),
                node("b", 6, 32, 65536, "az1", "capi", gpu, 1), /* Deployed */
                node("c", 8, 32, 65536, "az2", "capi", gpu, 1), /* Broken */
                node("d", 4, 4, 8192, "az2", "default", NULL, 0),
                node("e", 4, 8, 8192, "nowhere", "capi", NULL, 0), /* zone MAAS did not list */
        };

        return maas_inventory_snapshot_build(
                &(struct maas_inventory_lists){ .zones = { zones, 2 },
                                                .pools = { pools, 2 },
                                                .tags = { tags, 2 },
                                                .domains = { domains, 1 },
                                                .images = { images, 3 },
                                                .machines = { machines, ARRAY_SIZE(machines) } },
                1000);
}

static void test_maas_inventory__image_names_follow_maas_rules(void **state)
{
        struct maas_inventory_snapshot *s = sample();

        (void)state;
        assert_true(maas_inv_has_image(s, "ubuntu/jammy"));
        assert_true(maas_inv_has_image(s, "u-2204-k8s"));
        assert_true(maas_inv_has_image(s, "custom/u-2204-k8s"));
        assert_true(maas_inv_has_image(s, "custom/legacy"));
        assert_true(maas_inv_has_image(s, "legacy"));
        assert_false(maas_inv_has_image(s, "ubuntu/noble"));
        assert_false(maas_inv_has_image(s, "jammy")); /* a bare name is a custom image */
        assert_false(maas_inv_has_image(s, "rhel/u-2204-k8s"));
        assert_false(maas_inv_has_image(s, ""));
        maas_inventory_snapshot_release(s);
}

static void test_maas_inventory__names_are_found_by_exact_match(void **state)
{
        struct maas_inventory_snapshot *s = sample();

        (void)state;
        assert_true(maas_inv_find(s, MAAS_INV_ZONE, "az1") >= 0);
        assert_true(maas_inv_find(s, MAAS_INV_POOL, "capi") >= 0);
        assert_true(maas_inv_find(s, MAAS_INV_DOMAIN, "maas") >= 0);
        assert_int_equal(maas_inv_find(s, MAAS_INV_ZONE, "AZ1"), -1);
        assert_int_equal(maas_inv_find(s, MAAS_INV_TAG, "gp"), -1);
        assert_int_equal(maas_inv_find(s, MAAS_INV_POOL, NULL), -1);
        /* sorted, for bsearch and for the lists in messages */
        assert_string_equal(s->names[MAAS_INV_ZONE].v[0], "az1");
        maas_inventory_snapshot_release(s);
}

static void test_maas_inventory__fit_counts_candidates_free_and_in_use(void **state)
{
        struct maas_inventory_snapshot *s = sample();
        const char *gpu[] = { "gpu" };
        const char *unknown[] = { "nvme" };
        struct maas_inv_fit f;

        (void)state;
        maas_inv_fit(s,
                     &(struct maas_inv_query){ .pool = "capi",
                                               .tags = gpu,
                                               .n_tags = 1,
                                               .min_cpu = 16,
                                               .min_memory_mib = 16384 },
                     &f);
        assert_int_equal(f.candidates, 3);
        assert_int_equal(f.max_cpu, 32);
        assert_int_equal(f.fit, 3);
        assert_int_equal(f.fit_free, 1);
        assert_int_equal(f.fit_in_use, 1);
        maas_inv_fit(s, &(struct maas_inv_query){ .pool = "capi", .zone = "az1", .min_cpu = 32 },
                     &f);
        assert_int_equal(f.candidates, 2);
        assert_int_equal(f.fit, 1);
        assert_int_equal(f.fit_free, 0);
        assert_int_equal(f.fit_in_use, 1);
        maas_inv_fit(s, &(struct maas_inv_query){ .min_cpu = 8, .min_memory_mib = 16384 }, &f);
        assert_int_equal(f.candidates, 5);
        assert_int_equal(f.max_memory_with_cpu, 65536);
        assert_int_equal(f.fit, 3);
        maas_inv_fit(s, &(struct maas_inv_query){ .tags = unknown, .n_tags = 1 }, &f);
        assert_int_equal(f.candidates, 0);
        maas_inv_fit(s, &(struct maas_inv_query){ .pool = "gone" }, &f);
        assert_int_equal(f.candidates, 0);
        maas_inventory_snapshot_release(s);
}

/* Autoscaling from zero: the worst a fitting machine can be (fewest cores, least memory,
 * each from any of them) and the architecture they share. */
static void test_maas_inventory__fit_reports_the_smallest_and_the_shared_architecture(void **state)
{
        static char *gpu[] = { S("gpu") };
        struct maas_named zones[] = { N("az1"), N("az2"), N("empty") };
        struct maas_named pools[] = { N("default") };
        struct maas_named tags[] = { N("gpu") };
        struct maas_node machines[] = {
                node("a", 4, 16, 8192, "az1", "default", gpu, 1),
                node("b", 4, 8, 65536, "az1", "default", gpu, 1),
                node("c", 4, 2, 2048, "az2", "default", NULL, 0), /* under minCPU and memory */
                node("d", 6, 32, 16384, "az2", "default", gpu, 1),
        };
        const char *want_gpu[] = { "gpu" };
        struct maas_inventory_snapshot *s;
        struct maas_inv_fit f;
        const char **z = NULL;

        (void)state;
        machines[0].architecture = S("amd64/generic");
        machines[1].architecture = S("amd64/generic");
        machines[2].architecture = S("arm64/generic");
        machines[3].architecture = S("amd64/hwe-22.04");
        s = maas_inventory_snapshot_build(
                &(struct maas_inventory_lists){ .zones = { zones, 3 },
                                                .pools = { pools, 1 },
                                                .tags = { tags, 1 },
                                                .machines = { machines, ARRAY_SIZE(machines) } },
                1000);
        maas_inv_fit(s, &(struct maas_inv_query){ .min_cpu = 4, .min_memory_mib = 4096 }, &f);
        assert_int_equal(f.fit, 3);
        assert_int_equal(f.min_fit_cpu, 8);           /* b */
        assert_int_equal(f.min_fit_memory_mib, 8192); /* a */
        assert_null(f.fit_architecture);              /* amd64/generic and amd64/hwe-22.04 */
        maas_inv_fit(s, &(struct maas_inv_query){ .zone = "az1", .tags = want_gpu, .n_tags = 1 },
                     &f);
        assert_int_equal(f.fit, 2);
        assert_int_equal(f.min_fit_cpu, 8);
        assert_int_equal(f.min_fit_memory_mib, 8192);
        assert_string_equal(f.fit_architecture, "amd64/generic");
        maas_inv_fit(s, &(struct maas_inv_query){ .min_cpu = 64 }, &f);
        assert_int_equal(f.fit, 0);
        assert_int_equal(f.min_fit_cpu, 0);
        assert_null(f.fit_architecture);
        /* zones holding machines, in name order; "empty" holds none */
        assert_int_equal(maas_inv_zones_with_machines(s, &z), 2);
        assert_string_equal(z[0], "az1");
        assert_string_equal(z[1], "az2");
        free(z);
        maas_inventory_snapshot_release(s);
}

static void test_maas_inventory__repeated_fit_answers_per_snapshot(void **state)
{
        struct maas_inventory_snapshot *a = sample();
        struct maas_inventory_snapshot *b;
        struct maas_named pool = N("capi");
        struct maas_node one = node("z", 4, 64, 262144, "az1", "capi", NULL, 0);
        struct maas_inv_query q = { .pool = "capi", .min_cpu = 16 };
        struct maas_inv_fit f;

        (void)state;
        maas_inv_fit(a, &q, &f);
        assert_int_equal(f.fit, 3);
        maas_inv_fit(a, &q, &f); /* remembered: the same answer */
        assert_int_equal(f.fit, 3);
        assert_int_equal(f.max_cpu, 32);
        b = maas_inventory_snapshot_build(
                &(struct maas_inventory_lists){ .pools = { &pool, 1 }, .machines = { &one, 1 } },
                2000);
        assert_true(b->gen != a->gen);
        maas_inv_fit(b, &q, &f); /* another snapshot: its own answer */
        assert_int_equal(f.fit, 1);
        assert_int_equal(f.max_cpu, 64);
        q.min_cpu = 33; /* another query on the first snapshot */
        maas_inv_fit(a, &q, &f);
        assert_int_equal(f.fit, 0);
        maas_inventory_snapshot_release(b);
        maas_inventory_snapshot_release(a);
}

static void test_maas_inventory__snapshot_outlives_its_publisher_while_referenced(void **state)
{
        struct maas_inventory_snapshot *s = sample();

        (void)state;
        atomic_fetch_add(&s->refs, 1);
        maas_inventory_snapshot_release(s);
        assert_true(maas_inv_find(s, MAAS_INV_POOL, "capi") >= 0); /* still valid (ASan) */
        maas_inventory_snapshot_release(s);
}

/* --- a fake MAAS behind a fake transport ----------------------------------------------------- */

struct fake {
        struct http_transport t;
        long status; /* 0 = answer normally; >0 = this status for everything */
        bool down;   /* transport error */
        bool with_pool2;
        bool zone_too_big; /* a machine list of the whole zone is over the response cap */
        bool huge_machine; /* the machine list's second machine is 1.5 MiB of JSON */
        bool no_subnets;   /* subnets/ answers 404, as a MAAS stand-in without it */
        unsigned calls;
};

static const char *body_for(const struct fake *f, const char *url)
{
        if (strstr(url, "/zones/"))
                return "[{\"id\":1,\"name\":\"az1\",\"description\":\"\"}]";
        if (strstr(url, "/resourcepools/"))
                return f->with_pool2 ? "[{\"id\":0,\"name\":\"default\",\"description\":\"\"},"
                                       "{\"id\":2,\"name\":\"pool2\",\"description\":\"\"}]"
                                     : "[{\"id\":0,\"name\":\"default\",\"description\":\"\"}]";
        if (strstr(url, "/tags/"))
                return "[{\"name\":\"gpu\",\"comment\":\"\"}]";
        if (strstr(url, "/domains/"))
                return "[{\"id\":0,\"name\":\"maas\"}]";
        if (strstr(url, "/boot-resources/"))
                return "[{\"id\":1,\"type\":\"Synced\",\"name\":\"ubuntu/jammy\","
                       "\"architecture\":\"amd64/ga-22.04\"}]";
        if (strstr(url, "/subnets/"))
                return "[{\"id\":1,\"name\":\"prov\",\"cidr\":\"10.20.0.0/24\","
                       "\"gateway_ip\":\"10.20.0.1\",\"dns_servers\":[],\"vlan\":{\"vid\":0}},"
                       "{\"id\":2,\"name\":\"v6\",\"cidr\":\"fd00:20::/64\","
                       "\"gateway_ip\":null}]";
        /* capmaas's user's reservation; every user's (all=true): refused, a non-admin */
        if (strstr(url, "/ipaddresses/") && strstr(url, "all=true"))
                return NULL;
        if (strstr(url, "/ipaddresses/"))
                return "[{\"ip\":\"10.20.0.41\",\"alloc_type\":4,\"owner\":{\"username\":"
                       "\"capmaas\"},\"subnet\":{\"cidr\":\"10.20.0.0/24\"}}]";
        if (strstr(url, "/ipranges/"))
                return "[{\"id\":1,\"type\":\"dynamic\",\"start_ip\":\"10.20.0.230\","
                       "\"end_ip\":\"10.20.0.239\",\"subnet\":{\"cidr\":\"10.20.0.0/24\"}}]";
        if (strstr(url, "/machines/") && strstr(url, "pool=pool2"))
                return "[{\"system_id\":\"def456\",\"status\":4,\"cpu_count\":64,"
                       "\"memory\":262144,\"zone\":{\"name\":\"az1\"},\"pool\":{\"name\":"
                       "\"pool2\"},\"tag_names\":[]}]";
        if (strstr(url, "/machines/"))
                return "[{\"system_id\":\"abc123\",\"status\":4,\"cpu_count\":4,\"memory\":8192,"
                       "\"zone\":{\"name\":\"az1\"},\"pool\":{\"name\":\"default\"},"
                       "\"tag_names\":[\"gpu\"],\"ip_addresses\":[\"10.20.0.10\","
                       "\"fd00:20:0::0:21\"]}]";
        return "{}";
}

static int fake_send(struct http_transport *t,
                     const struct transport_request *req,
                     struct transport_response *resp)
{
        struct fake *f = (struct fake *)t;

        f->calls++;
        if (f->down) {
                (void)snprintf(t->error, sizeof(t->error), "Connection refused");
                return CM_ETRANSPORT;
        }
        if (strstr(req->url, "/machines/") && f->zone_too_big) {
                (void)snprintf(t->error, sizeof(t->error), "response body over the size cap");
                return CM_ETOOBIG;
        }
        if (strstr(req->url, "/machines/") && f->huge_machine) {
                size_t big = 1536 * 1024;
                char *name = xmalloc(big + 1);

                memset(name, 'x', big);
                name[big] = '\0';
                resp->status = 200;
                resp->body = xasprintf("[{\"system_id\":\"abc123\"},{\"system_id\":\"big1\","
                                       "\"hostname\":\"%s\"}]",
                                       name);
                resp->body_len = strlen(resp->body);
                resp->content_type = xstrdup("application/json");
                resp->retry_after_s = -1;
                free(name);
                return 0;
        }
        if (!f->status && !body_for(f, req->url)) {
                resp->status = 403;
                resp->body = xstrdup("Listing all IP addresses requires admin privileges.");
                resp->body_len = strlen(resp->body);
                resp->content_type = xstrdup("text/plain");
                resp->retry_after_s = -1;
                return 0;
        }
        if (f->no_subnets && strstr(req->url, "/subnets/")) {
                resp->status = 404;
                resp->body = xstrdup("Not Found");
                resp->body_len = strlen(resp->body);
                resp->content_type = xstrdup("text/plain");
                resp->retry_after_s = -1;
                return 0;
        }
        resp->status = f->status ? f->status : 200;
        resp->body = xstrdup(f->status ? "Authorization Error: 'Invalid signature.'"
                                       : body_for(f, req->url));
        resp->body_len = strlen(resp->body);
        resp->content_type = xstrdup(f->status ? "text/plain" : "application/json");
        resp->retry_after_s = -1;
        return 0;
}

static void fake_destroy(struct http_transport *t)
{
        (void)t;
}

struct fx {
        struct fake fake;
        struct clock_fake clock;
        struct metrics *metrics;
        struct maas_config cfg;
        struct maas_inventory *inv;
};

static int fx_setup(void **state)
{
        struct fx *f = xcalloc(1, sizeof(*f));
        char *err = NULL;

        f->fake.t = (struct http_transport){ .send = fake_send, .destroy = fake_destroy };
        clock_fake_init(&f->clock, 1000000, 1700000000);
        assert_int_equal(metrics_new(&f->metrics), 0);
        assert_int_equal(
                maas_config_parse("http://maas.invalid:5240/MAAS", "ck:tk:ts", &f->cfg, &err), 0);
        assert_int_equal(
                maas_inventory_new(&(struct maas_inventory_opts){ .cfg = &f->cfg,
                                                                  .interval_ms = 60000,
                                                                  .metrics = f->metrics,
                                                                  .clock = &f->clock.ops,
                                                                  .no_thread = true,
                                                                  .transport = &f->fake.t },
                                   &f->inv),
                0);
        *state = f;
        return 0;
}

static int fx_teardown(void **state)
{
        struct fx *f = *state;

        maas_inventory_free(f->inv);
        metrics_free(f->metrics);
        maas_config_release(&f->cfg);
        free(f);
        return 0;
}

static enum maas_inv_state state_of(struct fx *f, char **ret_detail)
{
        enum maas_inv_state st;
        struct maas_inventory_snapshot *s = maas_inventory_acquire(f->inv, &st, ret_detail);

        maas_inventory_snapshot_release(s);
        return st;
}

/* The rendered value of one series, or -2 when absent. */
static double metric(struct fx *f, const char *series)
{
        struct buf out;
        const char *p;
        char *needle;
        double v = -2;

        buf_init(&out, 1 << 20);
        assert_int_equal(metrics_render(f->metrics, &out), 0);
        assert_int_equal(buf_append(&out, "", 1), 0);
        needle = xasprintf("\n%s ", series);
        p = strstr(out.data, needle);
        if (p)
                v = strtod(p + strlen(needle), NULL);
        free(needle);
        buf_release(&out);
        return v;
}

struct heard {
        unsigned calls;
        size_t machines;
};

static void listener(void *ud, const struct maas_inventory_snapshot *snap)
{
        struct heard *h = ud;

        h->calls++;
        h->machines = snap->n_machines;
}

/* The listener hears each successful refresh (with its snapshot), never a failed one, and
 * nothing once removed. */
static void test_maas_inventory__listener_hears_each_successful_refresh(void **state)
{
        struct fx *f = *state;
        struct heard h = { 0 };

        maas_inventory_set_listener(f->inv, listener, &h);
        assert_int_equal(maas_inventory_refresh(f->inv), 0);
        assert_int_equal(h.calls, 1);
        assert_int_equal(h.machines, 1);
        f->fake.down = true;
        assert_int_equal(maas_inventory_refresh(f->inv), CM_ETRANSPORT);
        assert_int_equal(h.calls, 1);
        f->fake.down = false;
        maas_inventory_set_listener(f->inv, NULL, NULL);
        assert_int_equal(maas_inventory_refresh(f->inv), 0);
        assert_int_equal(h.calls, 1);
}

static void test_maas_inventory__states_follow_the_last_refresh(void **state)
{
        struct fx *f = *state;
        char *detail = NULL;

        assert_int_equal(state_of(f, NULL), MAAS_INV_NOT_LOADED);
        assert_true(metric(f, "capmaas_maas_inventory_age_seconds") == -1);
        assert_int_equal(maas_inventory_refresh(f->inv), 0);
        /* ten list calls, none per machine */
        assert_int_equal(f->fake.calls, 10);
        assert_int_equal(state_of(f, NULL), MAAS_INV_OK);
        f->fake.down = true;
        assert_int_equal(maas_inventory_refresh(f->inv), CM_ETRANSPORT);
        assert_int_equal(state_of(f, &detail), MAAS_INV_UNREACHABLE);
        assert_non_null(strstr(detail, "listing zones: "));
        free(detail);
        f->fake.down = false;
        f->fake.status = 401;
        assert_int_equal(maas_inventory_refresh(f->inv), CM_EUNAUTHORIZED);
        assert_int_equal(state_of(f, NULL), MAAS_INV_UNAUTHORIZED);
        f->fake.status = 0;
        assert_int_equal(maas_inventory_refresh(f->inv), 0);
        assert_int_equal(state_of(f, NULL), MAAS_INV_OK);
        assert_true(metric(f, "capmaas_maas_inventory_refreshes_total") == 4);
        assert_true(
                metric(f, "capmaas_maas_inventory_refresh_errors_total{reason=\"unreachable\"}") ==
                1);
        assert_true(
                metric(f, "capmaas_maas_inventory_refresh_errors_total{reason=\"unauthorized\"}") ==
                1);
}

/* A zone's machines are one list whatever its size (decoded machine by machine, no split
 * by pool): one request per zone even with two pools. A machine over the per-machine cap
 * fails the refresh as "failed" (MAAS answered), naming the zone and the limit; so does a
 * list over the response cap of a transport that cannot stream. */
static void test_maas_inventory__a_zone_is_one_list_and_oversize_names_it(void **state)
{
        struct fx *f = *state;
        char *detail = NULL;

        f->fake.with_pool2 = true;
        assert_int_equal(maas_inventory_refresh(f->inv), 0);
        assert_int_equal(f->fake.calls, 10); /* nine lists, then the one zone's machines */

        f->fake.huge_machine = true;
        assert_int_equal(maas_inventory_refresh(f->inv), CM_ETOOBIG);
        assert_int_equal(f->fake.calls, 10 + 10); /* neither retried nor split */
        assert_int_equal(state_of(f, &detail), MAAS_INV_FAILED);
        assert_non_null(strstr(detail, "listing machines: zone az1: MAAS's machine list: "
                                       "machine 1 of the array"));
        assert_non_null(strstr(detail, "over 1048576 bytes of JSON, the limit"));
        free(detail);

        f->fake.huge_machine = false;
        f->fake.zone_too_big = true;
        assert_int_equal(maas_inventory_refresh(f->inv), CM_ETOOBIG);
        assert_int_equal(f->fake.calls, 10 + 10 + 10);
        assert_int_equal(state_of(f, &detail), MAAS_INV_FAILED);
        assert_non_null(
                strstr(detail, "listing machines: zone az1: response body over the size cap"));
        free(detail);
        assert_true(metric(f, "capmaas_maas_inventory_refresh_errors_total{reason=\"failed\"}") ==
                    2);
}

/* Subnets are found by network however the CIDR is spelt; the addresses machines hold are
 * found in any spelling; a MAAS without subnets/ is
 * a snapshot that knows no subnets, not a failed refresh. */
static void test_maas_inventory__subnets_and_held_addresses(void **state)
{
        struct fx *f = *state;
        struct maas_inventory_snapshot *s;
        enum maas_inv_state st;
        const struct maas_inv_machine *m;

        assert_int_equal(maas_inventory_refresh(f->inv), 0);
        s = maas_inventory_acquire(f->inv, &st, NULL);
        assert_int_equal(st, MAAS_INV_OK);
        assert_true(s->has_subnets);
        assert_int_equal(s->n_subnets, 2);
        assert_int_equal(maas_inv_find_subnet(s, "10.20.0.0/24"), 0);
        assert_int_equal(maas_inv_find_subnet(s, "fd00:0020:0::/64"), 1);
        assert_int_equal(maas_inv_find_subnet(s, "10.20.0.0/25"), -1);
        assert_int_equal(maas_inv_find_subnet(s, "10.30.0.0/24"), -1);
        assert_int_equal(maas_inv_find_subnet(s, "nonsense"), -1);
        m = maas_inv_ip_holder(s, "10.20.0.10");
        assert_non_null(m);
        assert_string_equal(m->system_id, "abc123");
        m = maas_inv_ip_holder(s, "fd00:20::21");
        assert_non_null(m);
        assert_string_equal(m->system_id, "abc123");
        assert_null(maas_inv_ip_holder(s, "10.20.0.11"));
        /* user reservations (every user's refused: capmaas's own only) and IP ranges */
        assert_string_equal(s->subnets[0].gateway_ip, "10.20.0.1");
        assert_null(s->subnets[1].gateway_ip);
        assert_int_equal(s->n_reserved, 1);
        assert_non_null(maas_inv_reservation(s, "10.20.0.41"));
        assert_true(maas_inv_reservation(s, "10.20.0.41")->mine);
        assert_string_equal(maas_inv_reservation(s, "10.20.0.41")->owner, "capmaas");
        assert_null(maas_inv_reservation(s, "10.20.0.40"));
        assert_int_equal(s->n_ranges, 1);
        assert_string_equal(s->ranges[0].type, "dynamic");
        assert_string_equal(s->ranges[0].start_ip, "10.20.0.230");
        maas_inventory_snapshot_release(s);

        f->fake.no_subnets = true;
        assert_int_equal(maas_inventory_refresh(f->inv), 0);
        s = maas_inventory_acquire(f->inv, &st, NULL);
        assert_int_equal(st, MAAS_INV_OK);
        assert_false(s->has_subnets);
        assert_int_equal(s->n_subnets, 0);
        assert_int_equal(maas_inv_find_subnet(s, "10.20.0.0/24"), -1);
        maas_inventory_snapshot_release(s);
}

static void test_maas_inventory__stale_after_ten_intervals(void **state)
{
        struct fx *f = *state;
        char *detail = NULL;

        assert_int_equal(maas_inventory_refresh(f->inv), 0);
        clock_fake_advance(&f->clock, 10 * 60000);
        assert_int_equal(state_of(f, NULL), MAAS_INV_OK);
        assert_true(metric(f, "capmaas_maas_inventory_age_seconds") == 600);
        clock_fake_advance(&f->clock, 1);
        assert_int_equal(state_of(f, &detail), MAAS_INV_STALE);
        assert_string_equal(detail, "the inventory is 600 s old");
        free(detail);
}

static void test_maas_inventory__miss_refresh_at_most_once_per_ten_seconds(void **state)
{
        struct fx *f = *state;
        enum maas_inv_state st;
        struct maas_inventory_snapshot *s;

        assert_int_equal(maas_inventory_refresh(f->inv), 0);
        f->fake.with_pool2 = true;
        assert_int_equal(maas_inventory_refresh_on_miss(f->inv), MAAS_INV_MISS_REFRESHED);
        s = maas_inventory_acquire(f->inv, &st, NULL);
        assert_true(maas_inv_find(s, MAAS_INV_POOL, "pool2") >= 0);
        maas_inventory_snapshot_release(s);
        clock_fake_advance(&f->clock, 9999);
        assert_int_equal(maas_inventory_refresh_on_miss(f->inv), MAAS_INV_MISS_LIMITED);
        assert_int_equal(f->fake.calls, 20);
        clock_fake_advance(&f->clock, 1);
        f->fake.down = true;
        assert_int_equal(maas_inventory_refresh_on_miss(f->inv), MAAS_INV_MISS_FAILED);
}

static void test_maas_inventory__skipped_checks_are_counted_by_reason(void **state)
{
        struct fx *f = *state;

        maas_inventory_note_skipped(f->inv, MAAS_INV_STALE);
        maas_inventory_note_skipped(f->inv, MAAS_INV_STALE);
        assert_true(metric(f, "capmaas_admission_maas_checks_skipped_total{reason=\"stale\"}") ==
                    2);
        assert_true(
                metric(f, "capmaas_admission_maas_checks_skipped_total{reason=\"unreachable\"}") ==
                0);
}

static void test_maas_inventory__new_rejects_missing_credentials(void **state)
{
        struct maas_inventory *inv = NULL;
        struct maas_config empty = { 0 };

        (void)state;
        assert_int_equal(maas_inventory_new(NULL, &inv), CM_EINVAL);
        assert_int_equal(maas_inventory_new(&(struct maas_inventory_opts){ .cfg = &empty }, &inv),
                         CM_EINVAL);
        assert_null(inv);
        assert_null(maas_inventory_free(NULL));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_maas_inventory__image_names_follow_maas_rules),
                cmocka_unit_test(test_maas_inventory__names_are_found_by_exact_match),
                cmocka_unit_test(test_maas_inventory__fit_counts_candidates_free_and_in_use),
                cmocka_unit_test(
                        test_maas_inventory__fit_reports_the_smallest_and_the_shared_architecture),
                cmocka_unit_test(test_maas_inventory__repeated_fit_answers_per_snapshot),
                cmocka_unit_test(
                        test_maas_inventory__snapshot_outlives_its_publisher_while_referenced),
                cmocka_unit_test_setup_teardown(test_maas_inventory__states_follow_the_last_refresh,
                                                fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(
                        test_maas_inventory__listener_hears_each_successful_refresh, fx_setup,
                        fx_teardown),
                cmocka_unit_test_setup_teardown(
                        test_maas_inventory__a_zone_is_one_list_and_oversize_names_it, fx_setup,
                        fx_teardown),
                cmocka_unit_test_setup_teardown(test_maas_inventory__subnets_and_held_addresses,
                                                fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_maas_inventory__stale_after_ten_intervals,
                                                fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(
                        test_maas_inventory__miss_refresh_at_most_once_per_ten_seconds, fx_setup,
                        fx_teardown),
                cmocka_unit_test_setup_teardown(
                        test_maas_inventory__skipped_checks_are_counted_by_reason, fx_setup,
                        fx_teardown),
                cmocka_unit_test(test_maas_inventory__new_rejects_missing_credentials),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
