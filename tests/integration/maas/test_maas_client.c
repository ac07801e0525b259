/*
 * Integration: the MAAS client (server/maas_client.c over the libcurl transport) against a
 * real maas-sim process on 127.0.0.1. Each test starts its own maas-sim (fresh state, port
 * 0, URL from its first stdout line) and stops it at teardown. Fault injection goes through
 * the sim's /_sim/ admin endpoint; the client's sleeps between retries are recorded instead
 * of slept, so retry tests are fast and can assert the delays.
 *
 * Needs $CAPMAAS_BUILD_DIR/maas-sim (build the maas-sim target) and $CAPMAAS_SOURCE_DIR.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "base64.h"
#include "clock.h"
#include "err.h"
#include "maas_client.h"
#include "maassim.h"
#include "testutil.h"
#include "token_bucket.h"
#include "xalloc.h"

#define ADMIN_KEY "ck:tk:secret1"
#define USER2_KEY "ck2:tk2:secret2"

/* Every test's maas-sim: the sample inventory, two users, quick deploys and releases. */
#define SIM_ARGS(...)                                                                          \
        (const char *const[])                                                                  \
        {                                                                                      \
                "--api-key", USER2_KEY, "--deploy-seconds", "0.2", "--release-seconds", "0.1", \
                        __VA_ARGS__                                                            \
        }

struct fx {
        struct maassim sim;
        struct maas_config cfg;
        struct http_transport *t;
        struct maas_client *mc;
        uint64_t slept[32];
        size_t n_slept;
        struct clock_fake clk; /* the budget tests' clock, moved by budget_sleep */
};

/* --- admin endpoint ------------------------------------------------------------------------- */

static cJSON *admin(struct fx *f, const char *method, const char *path, const char *body)
{
        return maassim_call(&f->sim, method, path, body);
}

static void faults(struct fx *f, const char *json)
{
        cJSON_Delete(admin(f, "POST", "faults", json));
}

/* Number of logged API requests with this op (and status when > 0). */
static int count_requests(struct fx *f, const char *op, long status)
{
        cJSON *doc = admin(f, "GET", "requests", NULL);
        const cJSON *e;
        int n = 0;

        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(doc, "requests")) {
                const cJSON *o = cJSON_GetObjectItemCaseSensitive(e, "op");
                const cJSON *s = cJSON_GetObjectItemCaseSensitive(e, "status");

                if (cJSON_IsString(o) && strcmp(o->valuestring, op) == 0 &&
                    (status <= 0 || (cJSON_IsNumber(s) && s->valueint == status)))
                        n++;
        }
        cJSON_Delete(doc);
        return n;
}

/* The sim's view of one machine (for fields the API does not show, like user_data). */
static char *sim_field(struct fx *f, const char *system_id, const char *key)
{
        cJSON *m = maassim_machine(&f->sim, system_id);
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(m, key);
        char *v = cJSON_IsString(x) ? xstrdup(x->valuestring) : NULL;

        cJSON_Delete(m);
        return v;
}

/* --- client fixture ------------------------------------------------------------------------------
 */

static void record_sleep(void *ud, uint64_t ms)
{
        struct fx *f = ud;

        if (f->n_slept < sizeof(f->slept) / sizeof(f->slept[0]))
                f->slept[f->n_slept++] = ms;
}

static struct maas_client *client_for(struct fx *f,
                                      const char *url,
                                      const char *key,
                                      const struct http_transport_opts *to,
                                      struct http_transport **ret_t,
                                      struct maas_config *cfg)
{
        struct maas_client *mc = NULL;
        char *err = NULL;

        assert_int_equal(maas_config_parse(url, key, cfg, &err), 0);
        assert_int_equal(http_transport_curl_new(to, ret_t), 0);
        assert_int_equal(maas_client_new(&(struct maas_client_opts){ .cfg = cfg,
                                                                     .transport = *ret_t,
                                                                     .max_retry_after_ms = 2000,
                                                                     .sleep_ms = record_sleep,
                                                                     .sleep_ud = f },
                                         &mc),
                         0);
        return mc;
}

static int setup(void **state)
{
        struct fx *f = xcalloc(1, sizeof(*f));

        if (maassim_start(&f->sim, ADMIN_KEY, SIM_ARGS(NULL)) < 0) {
                free(f);
                return -1;
        }
        f->mc = client_for(f, f->sim.proc.url, ADMIN_KEY,
                           &(struct http_transport_opts){ .timeout_ms = 5000 }, &f->t, &f->cfg);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;
        int st;

        maas_client_free(f->mc);
        http_transport_free(f->t);
        maas_config_release(&f->cfg);
        st = maassim_stop(&f->sim);
        free(f);
        /* maas-sim must exit cleanly (0) on SIGTERM: no leaks under ASan either */
        return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* Polls the machine (bounded) until its status_name is want. */
static void wait_status(struct fx *f, const char *sid, const char *want, struct maas_node *ret)
{
        struct timespec pause = { .tv_nsec = 20 * 1000000L };

        for (int i = 0; i < 250; i++) {
                struct maas_node m = { 0 };

                assert_int_equal(maas_get_machine(f->mc, sid, &m, NULL), 0);
                if (strcmp(m.status_name, want) == 0) {
                        *ret = m;
                        return;
                }
                maas_node_release(&m);
                nanosleep(&pause, NULL);
        }
        fail_msg("machine %s never reached %s", sid, want);
}

static bool strv_has(const struct maas_strv *v, const char *s)
{
        for (size_t i = 0; i < v->n; i++)
                if (strcmp(v->v[i], s) == 0)
                        return true;
        return false;
}

/* --- lifecycle -------------------------------------------------------------------------------- */

static void allocate_cp(struct fx *f, struct maas_node *m)
{
        static const char *const tags[] = { "ssd", "control-plane" };

        assert_int_equal(maas_allocate(f->mc,
                                       &(struct maas_allocate_opts){ .cpu_count = 2,
                                                                     .mem_mib = 4096,
                                                                     .pool = "capi",
                                                                     .tags = tags,
                                                                     .n_tags = 2,
                                                                     .agent_name = "uid-1",
                                                                     .comment = "test" },
                                       m, NULL),
                         0);
        assert_string_equal(m->status_name, "Allocated");
        assert_string_equal(m->owner, "admin");
        assert_true(strv_has(&m->tags, "ssd") && strv_has(&m->tags, "control-plane"));
        assert_string_equal(m->pool, "capi");
}

static void deploy_and_check(struct fx *f, const char *sid)
{
        static const char ud[] = "#cloud-config\nruncmd: [true]\n";
        struct maas_node m = { 0 };
        char *stored, *want;

        assert_int_equal(
                maas_deploy(f->mc, sid,
                            &(struct maas_deploy_opts){ .image = "custom/u-2204-0-k-1264-0",
                                                        .user_data = ud,
                                                        .ephemeral_deploy = false },
                            &m, NULL),
                0);
        assert_string_equal(m.status_name, "Deploying");
        assert_string_equal(m.osystem, "custom");
        assert_string_equal(m.distro_series, "u-2204-0-k-1264-0");
        maas_node_release(&m);
        stored = sim_field(f, sid, "user_data");
        want = base64_encode(ud, strlen(ud));
        assert_string_equal(stored, want); /* sent base64, stored verbatim */
        free(stored);
        free(want);
        wait_status(f, sid, "Deployed", &m);
        assert_string_equal(m.power_state, "on");
        assert_true(m.ip_addresses.n > 0);
        maas_node_release(&m);
}

static void power_cycle(struct fx *f, const char *sid)
{
        struct maas_node m = { 0 };
        char *ps = NULL;

        assert_int_equal(maas_power_off(f->mc, sid, &m, NULL), 0);
        assert_string_equal(m.power_state, "off");
        maas_node_release(&m);
        assert_int_equal(maas_query_power_state(f->mc, sid, &ps, NULL), 0);
        assert_string_equal(ps, "off");
        free(ps);
        assert_int_equal(maas_power_on(f->mc, sid, "maas provider power on", &m, NULL), 0);
        assert_string_equal(m.power_state, "on");
        maas_node_release(&m);
}

static void test_maas_client__allocate_deploy_power_release_lifecycle(void **state)
{
        struct fx *f = *state;
        struct maas_node m = { 0 };
        struct maas_version v = { 0 };
        struct maas_user u = { 0 };
        static const char *const k[] = { "cluster", "machine" }, *const val[] = { "c1", "m1" };
        char *sid;

        assert_int_equal(maas_get_version(f->mc, &v, NULL), 0);
        assert_true(v.capabilities.n > 0);
        maas_version_release(&v);
        assert_int_equal(maas_whoami(f->mc, &u, NULL), 0);
        assert_string_equal(u.username, "admin");
        maas_user_release(&u);
        allocate_cp(f, &m);
        sid = xstrdup(m.system_id);
        maas_node_release(&m);
        assert_int_equal(maas_update_machine(f->mc, sid,
                                             &(struct maas_update_opts){ .swap_size = 0 }, &m,
                                             NULL),
                         0);
        assert_int_equal(m.swap_size, 0);
        maas_node_release(&m);
        assert_int_equal(maas_set_owner_data(f->mc, sid, k, val, 2, &m, NULL), 0);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(m.owner_data, "cluster")->valuestring,
                            "c1");
        maas_node_release(&m);
        deploy_and_check(f, sid);
        power_cycle(f, sid);
        assert_int_equal(
                maas_release(f->mc, sid, &(struct maas_release_opts){ .comment = "bye" }, &m, NULL),
                0);
        assert_string_equal(m.status_name, "Releasing");
        maas_node_release(&m);
        wait_status(f, sid, "Ready", &m);
        assert_null(m.owner);
        assert_string_equal(m.osystem, "");
        assert_int_equal(m.ip_addresses.n, 0);
        maas_node_release(&m);
        free(sid);
}

static void test_maas_client__lists_inventory_and_filters(void **state)
{
        struct fx *f = *state;
        struct maas_named_list l = { 0 };
        struct maas_boot_resource_list b = { 0 };
        struct maas_node_list ms = { 0 };
        static const char *const tags[] = { "ssd" };
        bool custom = false;

        assert_int_equal(maas_list_zones(f->mc, &l, NULL), 0);
        assert_int_equal(l.n, 4); /* default + az1..az3 */
        maas_named_list_release(&l);
        assert_int_equal(maas_list_pools(f->mc, &l, NULL), 0);
        assert_int_equal(l.n, 2);
        maas_named_list_release(&l);
        assert_int_equal(maas_list_tags(f->mc, &l, NULL), 0);
        assert_true(l.n >= 4);
        maas_named_list_release(&l);
        assert_int_equal(maas_list_domains(f->mc, &l, NULL), 0);
        assert_string_equal(l.items[0].name, "maas");
        maas_named_list_release(&l);
        assert_int_equal(maas_list_boot_resources(f->mc, &b, NULL), 0);
        for (size_t i = 0; i < b.n; i++)
                custom = custom || (strcmp(b.items[i].name, "u-2204-0-k-1264-0") == 0 &&
                                    strcmp(b.items[i].type, "Uploaded") == 0);
        assert_true(custom);
        maas_boot_resource_list_release(&b);
        assert_int_equal(maas_list_machines(f->mc,
                                            &(struct maas_node_filter){
                                                    .zone = "az2", .tags = tags, .n_tags = 1 },
                                            &ms, NULL),
                         0);
        assert_true(ms.n > 0 && ms.n < 24);
        for (size_t i = 0; i < ms.n; i++)
                assert_true(strcmp(ms.items[i].zone, "az2") == 0 &&
                            strv_has(&ms.items[i].tags, "ssd"));
        maas_node_list_release(&ms);
}

static void test_maas_client__list_by_repeated_ids(void **state)
{
        struct fx *f = *state;
        struct maas_node_list all = { 0 }, some = { 0 };
        const char *ids[2];

        assert_int_equal(maas_list_machines(f->mc, NULL, &all, NULL), 0);
        assert_int_equal(all.n, 24);
        ids[0] = all.items[3].system_id;
        ids[1] = all.items[7].system_id;
        assert_int_equal(maas_list_machines(f->mc,
                                            &(struct maas_node_filter){ .ids = ids, .n_ids = 2 },
                                            &some, NULL),
                         0);
        assert_int_equal(some.n, 2);
        maas_node_list_release(&some);
        maas_node_list_release(&all);
}

static void test_maas_client__allocate_sends_every_tag(void **state)
{
        struct fx *f = *state;
        static const char *const tags[] = { "ssd", "gpu" }; /* no machine has both */
        struct maas_error err = { 0 };

        /* the reference sent only the last tag, and "gpu" alone matches 6 machines */
        assert_int_equal(maas_allocate(f->mc,
                                       &(struct maas_allocate_opts){ .tags = tags, .n_tags = 2 },
                                       NULL, &err),
                         MAAS_ENOMATCH);
        assert_non_null(strstr(err.message, "('tags', ['ssd', 'gpu'])"));
        maas_error_release(&err);
}

/* --- error classes -------------------------------------------------------------------------- */

static void test_maas_client__404_is_not_found_with_maas_message(void **state)
{
        struct fx *f = *state;
        struct maas_error err = { 0 };
        struct maas_node m = { 0 };

        assert_int_equal(maas_get_machine(f->mc, "nope00", &m, &err), CM_ENOTFOUND);
        assert_int_equal(err.http_status, 404);
        assert_int_equal(err.cls, MAAS_ERR_NOT_FOUND);
        assert_string_equal(err.message, "No Machine matches the given query.");
        assert_null(m.system_id);
        assert_int_equal(maas_delete_dns_resource(f->mc, 999, &err), CM_ENOTFOUND);
        assert_string_equal(err.message, "No DNSResource matches the given query.");
        maas_error_release(&err);
        assert_int_equal(maas_get_machine(f->mc, "../zones", &m, &err), CM_EINVAL);
        maas_error_release(&err);
}

static void test_maas_client__409_no_match_on_allocate(void **state)
{
        struct fx *f = *state;
        struct maas_error err = { 0 };

        assert_int_equal(
                maas_allocate(f->mc, &(struct maas_allocate_opts){ .cpu_count = 999 }, NULL, &err),
                MAAS_ENOMATCH);
        assert_int_equal(err.http_status, 409);
        assert_int_equal(err.cls, MAAS_ERR_NO_MATCH);
        assert_true(strncmp(err.message, "No available machine matches constraints", 40) == 0);
        assert_int_equal(err.attempts, 1);
        assert_string_equal(maas_strerror(MAAS_ENOMATCH), "no machine matches the constraints");
        maas_error_release(&err);
}

static void test_maas_client__409_state_conflict(void **state)
{
        struct fx *f = *state;
        struct maas_error err = { 0 };
        struct maas_node_list all = { 0 };

        assert_int_equal(maas_list_machines(f->mc, NULL, &all, NULL), 0);
        assert_int_equal(maas_power_on(f->mc, all.items[0].system_id, NULL, NULL, &err),
                         CM_ECONFLICT);
        assert_int_equal(err.cls, MAAS_ERR_CONFLICT);
        assert_string_equal(err.message, "Can't start node: it hasn't been allocated.");
        maas_error_release(&err);
        maas_node_list_release(&all);
}

static void test_maas_client__400_validation_carries_field_map(void **state)
{
        struct fx *f = *state;
        struct maas_error err = { 0 };
        const cJSON *zone;

        assert_int_equal(
                maas_allocate(f->mc, &(struct maas_allocate_opts){ .zone = "nope" }, NULL, &err),
                CM_EINVAL);
        assert_int_equal(err.cls, MAAS_ERR_VALIDATION);
        zone = cJSON_GetObjectItemCaseSensitive(err.fields, "zone");
        assert_true(cJSON_IsArray(zone));
        assert_string_equal(cJSON_GetArrayItem(zone, 0)->valuestring, "No such zone: 'nope'.");
        assert_string_equal(err.message, "zone: No such zone: 'nope'.");
        maas_error_release(&err);
}

static void test_maas_client__401_for_a_wrong_key(void **state)
{
        struct fx *f = *state;
        struct maas_config cfg = { 0 };
        struct http_transport *t = NULL;
        struct maas_client *mc = client_for(f, f->sim.proc.url, "ck:tk:wrong",
                                            &(struct http_transport_opts){ 0 }, &t, &cfg);
        struct maas_error err = { 0 };
        struct maas_version v = { 0 };
        struct maas_user u = { 0 };

        assert_int_equal(maas_get_version(mc, &v, NULL), 0); /* version/ is anonymous */
        maas_version_release(&v);
        assert_int_equal(maas_whoami(mc, &u, &err), CM_EUNAUTHORIZED);
        assert_int_equal(err.cls, MAAS_ERR_UNAUTHORIZED);
        assert_null(strstr(err.message, "wrong"));
        assert_int_equal(err.attempts, 1);
        maas_error_release(&err);
        maas_client_free(mc);
        http_transport_free(t);
        maas_config_release(&cfg);
}

static void test_maas_client__403_for_another_users_machine(void **state)
{
        struct fx *f = *state;
        struct maas_config cfg = { 0 };
        struct http_transport *t = NULL;
        struct maas_client *mc = client_for(f, f->sim.proc.url, USER2_KEY,
                                            &(struct http_transport_opts){ 0 }, &t, &cfg);
        struct maas_error err = { 0 };
        struct maas_node m = { 0 };

        allocate_cp(f, &m);
        assert_int_equal(maas_release(mc, m.system_id, NULL, NULL, &err), CM_EFORBIDDEN);
        assert_int_equal(err.cls, MAAS_ERR_FORBIDDEN);
        maas_error_release(&err);
        maas_node_release(&m);
        maas_client_free(mc);
        http_transport_free(t);
        maas_config_release(&cfg);
}

/* --- retries --------------------------------------------------------------------------------- */

static void test_maas_client__503_retry_after_is_honoured(void **state)
{
        struct fx *f = *state;
        struct maas_error err = { 0 };
        struct maas_named_list l = { 0 };

        faults(f, "{\"unavailable\": {\"count\": 2, \"retry_after\": 1, \"op\": \"zones.read\"}}");
        assert_int_equal(maas_list_zones(f->mc, &l, &err), 0);
        assert_int_equal(err.attempts, 3);
        assert_int_equal(f->n_slept, 2);
        assert_int_equal(f->slept[0], 1000);
        assert_int_equal(f->slept[1], 1000);
        maas_named_list_release(&l);
        maas_error_release(&err);
}

static void test_maas_client__retry_after_wait_is_capped(void **state)
{
        struct fx *f = *state;
        struct maas_named_list l = { 0 };

        faults(f, "{\"unavailable\": {\"count\": 1, \"retry_after\": 3600}}");
        assert_int_equal(maas_list_zones(f->mc, &l, NULL), 0);
        assert_int_equal(f->n_slept, 1);
        assert_int_equal(f->slept[0], 2000); /* max_retry_after_ms of the fixture */
        maas_named_list_release(&l);
}

static void test_maas_client__503_retry_after_retries_even_allocate(void **state)
{
        struct fx *f = *state;
        struct maas_node m = { 0 };

        /* MAAS sends Retry-After only when it did nothing, so a POST may be repeated */
        faults(f, "{\"unavailable\": {\"count\": 1, \"retry_after\": 1, "
                  "\"op\": \"machines.allocate\"}}");
        assert_int_equal(maas_allocate(f->mc, &(struct maas_allocate_opts){ 0 }, &m, NULL), 0);
        assert_int_equal(count_requests(f, "allocate", 0), 2);
        maas_node_release(&m);
}

static void test_maas_client__429_retry_after_is_honoured_even_on_allocate(void **state)
{
        struct fx *f = *state;
        struct maas_node m = { 0 };
        struct maas_error err = { 0 };

        /* A proxy's or MAAS's "slow down": the request was not acted on */
        faults(f, "{\"unavailable\": {\"count\": 1, \"retry_after\": 2, \"status\": 429, "
                  "\"op\": \"machines.allocate\"}}");
        assert_int_equal(maas_allocate(f->mc, &(struct maas_allocate_opts){ 0 }, &m, &err), 0);
        assert_int_equal(err.attempts, 2);
        assert_int_equal(f->n_slept, 1);
        assert_int_equal(f->slept[0], 2000);
        assert_int_equal(count_requests(f, "allocate", 429), 1);
        assert_int_equal(count_requests(f, "allocate", 200), 1);
        maas_node_release(&m);
        maas_error_release(&err);
}

static void test_maas_client__429_without_retry_after_is_transient(void **state)
{
        struct fx *f = *state;
        struct maas_named_list l = { 0 };
        struct maas_error err = { 0 };

        faults(f, "{\"fail_next\": {\"count\": 9, \"status\": 429, \"op\": \"zones.read\"}}");
        assert_int_equal(maas_list_zones(f->mc, &l, &err), CM_ESERVER);
        assert_int_equal(err.cls, MAAS_ERR_TRANSIENT);
        assert_int_equal(err.http_status, 429);
        assert_int_equal(err.attempts, 4); /* retried with backoff like a 5xx on a GET */
        maas_error_release(&err);
}

/* --- the process-wide budget ----------------------------------------------------------------- */

/* The budget tests' sleep: records the wait and moves the bucket's fake clock past it, as a
 * real sleep would. */
static void budget_sleep(void *ud, uint64_t ms)
{
        struct fx *f = ud;

        record_sleep(f, ms);
        clock_fake_advance(&f->clk, ms);
}

/* Two clients of their own (a gives up after a_attempts tries) sharing one bucket of
 * `burst` tokens at `qps` on the fixture's fake clock, which budget_sleep moves. */
struct budget_pair {
        struct token_bucket *tb;
        struct http_transport *t[2];
        struct maas_config cfg[2];
        struct maas_client *a, *b;
};

static void budget_pair_init(
        struct fx *f, struct budget_pair *bp, double qps, unsigned burst, unsigned a_attempts)
{
        char *err = NULL;

        *bp = (struct budget_pair){ 0 };
        clock_fake_init(&f->clk, 1000, 1700000000);
        assert_int_equal(token_bucket_new(qps, burst, &f->clk.ops, &bp->tb), 0);
        for (int i = 0; i < 2; i++) {
                assert_int_equal(maas_config_parse(f->sim.proc.url, ADMIN_KEY, &bp->cfg[i], &err),
                                 0);
                assert_int_equal(
                        http_transport_curl_new(&(struct http_transport_opts){ 0 }, &bp->t[i]), 0);
                assert_int_equal(
                        maas_client_new(
                                &(struct maas_client_opts){ .cfg = &bp->cfg[i],
                                                            .transport = bp->t[i],
                                                            .max_attempts = i ? 0 : a_attempts,
                                                            .budget = bp->tb,
                                                            .sleep_ms = budget_sleep,
                                                            .sleep_ud = f },
                                i ? &bp->b : &bp->a),
                        0);
        }
}

static void budget_pair_release(struct budget_pair *bp)
{
        maas_client_free(bp->a);
        maas_client_free(bp->b);
        for (int i = 0; i < 2; i++) {
                http_transport_free(bp->t[i]);
                maas_config_release(&bp->cfg[i]);
        }
        token_bucket_free(bp->tb);
}

static void test_maas_client__budget_spaces_requests_of_every_client(void **state)
{
        struct fx *f = *state;
        struct budget_pair bp;
        struct maas_named_list l = { 0 };

        budget_pair_init(f, &bp, 10, 2, 0);
        /* two clients, six calls, one bucket of 2 at 10/s: the burst goes at once, then one
         * call every 100 ms whichever client makes it */
        for (int i = 0; i < 6; i++) {
                assert_int_equal(maas_list_zones(i % 2 ? bp.b : bp.a, &l, NULL), 0);
                maas_named_list_release(&l);
        }
        assert_int_equal(f->n_slept, 4);
        for (size_t i = 0; i < f->n_slept; i++)
                assert_int_equal(f->slept[i], 100);
        assert_int_equal(count_requests(f, "", 200), 6); /* zones lists carry no op */
        budget_pair_release(&bp);
}

static void test_maas_client__retry_after_holds_every_client(void **state)
{
        struct fx *f = *state;
        struct budget_pair bp;
        struct token_bucket_stats st;
        struct maas_named_list l = { 0 };

        budget_pair_init(f, &bp, 100, 10, 1); /* a gives up at once */
        faults(f, "{\"unavailable\": {\"count\": 1, \"retry_after\": 3, \"op\": \"zones.read\"}}");
        assert_int_equal(maas_list_zones(bp.a, &l, NULL), CM_ESERVER);
        assert_int_equal(f->n_slept, 0);
        /* b never saw the 503, yet waits it out before its first request */
        assert_int_equal(maas_list_zones(bp.b, &l, NULL), 0);
        maas_named_list_release(&l);
        assert_int_equal(f->n_slept, 1);
        assert_int_equal(f->slept[0], 3000);
        token_bucket_stats(bp.tb, &st);
        assert_int_equal(st.reservations, 2);
        assert_int_equal(st.delayed, 1);
        assert_int_equal(st.wait_ms, 3000);
        assert_int_equal(st.holds, 1);
        budget_pair_release(&bp);
}

static void test_maas_client__500_on_get_is_retried_with_backoff(void **state)
{
        struct fx *f = *state;
        struct maas_error err = { 0 };
        struct maas_node_list l = { 0 };

        faults(f, "{\"fail_next\": {\"count\": 2, \"status\": 500, \"op\": \"machines.read\"}}");
        assert_int_equal(maas_list_machines(f->mc, NULL, &l, &err), 0);
        assert_int_equal(err.attempts, 3);
        assert_int_equal(f->n_slept, 2);
        /* full-jitter exponential: [100, 200] then [200, 400] ms with the 200 ms base */
        assert_true(f->slept[0] >= 100 && f->slept[0] <= 200);
        assert_true(f->slept[1] >= 200 && f->slept[1] <= 400);
        maas_node_list_release(&l);
        maas_error_release(&err);
}

static void test_maas_client__500_on_allocate_is_not_retried(void **state)
{
        struct fx *f = *state;
        struct maas_error err = { 0 };
        struct maas_node_list l = { 0 };

        faults(f, "{\"fail_next\": {\"count\": 1, \"status\": 500, "
                  "\"op\": \"machines.allocate\"}}");
        assert_int_equal(maas_allocate(f->mc, &(struct maas_allocate_opts){ 0 }, NULL, &err),
                         CM_ESERVER);
        assert_int_equal(err.http_status, 500);
        assert_int_equal(err.cls, MAAS_ERR_TRANSIENT);
        assert_int_equal(err.attempts, 1);
        assert_int_equal(f->n_slept, 0);
        assert_int_equal(count_requests(f, "allocate", 0), 1);
        maas_error_release(&err);
        assert_int_equal(maas_list_machines(f->mc, &(struct maas_node_filter){ .agent_name = "x" },
                                            &l, NULL),
                         0);
        maas_node_list_release(&l);
}

static void test_maas_client__gives_up_after_max_attempts(void **state)
{
        struct fx *f = *state;
        struct maas_error err = { 0 };
        struct maas_named_list l = { 0 };

        faults(f, "{\"fail_next\": {\"count\": 100, \"status\": 502, \"op\": \"zones.read\"}}");
        assert_int_equal(maas_list_zones(f->mc, &l, &err), CM_ESERVER);
        assert_int_equal(err.attempts, 4);
        assert_int_equal(err.http_status, 502);
        assert_int_equal(count_requests(f, "", 502), 4);
        maas_error_release(&err);
}

static void test_maas_client__transport_error_is_transient(void **state)
{
        struct fx *f = *state;
        struct maas_config cfg = { 0 };
        struct http_transport *t = NULL;
        struct maas_client *mc;
        struct maas_error err = { 0 };
        struct maas_named_list l = { 0 };
        char url[256];

        snprintf(url, sizeof(url), "%s", f->sim.proc.url);
        assert_int_equal(maassim_stop(&f->sim) >= 0, 1);
        assert_int_equal(maassim_start(&f->sim, ADMIN_KEY, SIM_ARGS(NULL)),
                         0); /* the old port is now closed */
        mc = client_for(f, url, ADMIN_KEY, &(struct http_transport_opts){ 0 }, &t, &cfg);
        assert_int_equal(maas_list_zones(mc, &l, &err), CM_ETRANSPORT);
        assert_int_equal(err.cls, MAAS_ERR_TRANSIENT);
        assert_int_equal(err.http_status, 0);
        assert_int_equal(err.attempts, 4);
        assert_non_null(err.message);
        maas_error_release(&err);
        maas_client_free(mc);
        http_transport_free(t);
        maas_config_release(&cfg);
}

static void test_maas_client__total_timeout_applies(void **state)
{
        struct fx *f = *state;
        struct maas_config cfg = { 0 };
        struct http_transport *t = NULL;
        struct maas_client *mc =
                client_for(f, f->sim.proc.url, ADMIN_KEY,
                           &(struct http_transport_opts){ .timeout_ms = 100 }, &t, &cfg);
        struct maas_error err = { 0 };

        faults(f, "{\"latency_ms\": 400}");
        assert_int_equal(
                maas_allocate(mc, &(struct maas_allocate_opts){ .dry_run = true }, NULL, &err),
                CM_ETIMEDOUT);
        assert_int_equal(err.cls, MAAS_ERR_TRANSIENT);
        maas_error_release(&err);
        faults(f, "{\"latency_ms\": 0}");
        maas_client_free(mc);
        http_transport_free(t);
        maas_config_release(&cfg);
}

/* --- simulated machine faults --------------------------------------------------------------- */

static void test_maas_client__failed_deployment_and_unknown_bmc(void **state)
{
        struct fx *f = *state;
        struct maas_node m = { 0 };
        char *sid, *ps = NULL, *doc;

        assert_int_equal(maas_allocate(f->mc, &(struct maas_allocate_opts){ 0 }, &m, NULL), 0);
        sid = xstrdup(m.system_id);
        maas_node_release(&m);
        doc = xasprintf("{\"fail_deploy\": [\"%s\"], \"bmc_unknown\": [\"%s\"]}", sid, sid);
        faults(f, doc);
        assert_int_equal(maas_deploy(f->mc, sid,
                                     &(struct maas_deploy_opts){ .image = "ubuntu/jammy" }, NULL,
                                     NULL),
                         0);
        wait_status(f, sid, "Failed deployment", &m);
        maas_node_release(&m);
        assert_int_equal(maas_query_power_state(f->mc, sid, &ps, NULL), 0);
        assert_string_equal(ps, "unknown");
        free(ps);
        free(doc);
        free(sid);
}

/* --- DNS ---------------------------------------------------------------------------------------
 */

static void test_maas_client__dns_resource_create_list_update_delete(void **state)
{
        struct fx *f = *state;
        struct maas_dns_resource d = { 0 }, u = { 0 };
        struct maas_dns_list l = { 0 };
        static const char *const ips[] = { "10.0.0.5", "10.0.0.6" };
        struct maas_error err = { 0 };

        assert_int_equal(maas_create_dns_resource(f->mc, "c1-abc123.maas", 10, NULL, 0, &d, NULL),
                         0);
        assert_string_equal(d.fqdn, "c1-abc123.maas");
        assert_int_equal(d.address_ttl, 10);
        assert_int_equal(d.ips.n, 0);
        assert_int_equal(maas_list_dns_resources(f->mc, "c1-abc123.maas", &l, NULL), 0);
        assert_int_equal(l.n, 1);
        assert_int_equal(l.items[0].id, d.id);
        maas_dns_list_release(&l);
        assert_int_equal(maas_update_dns_resource_ips(f->mc, d.id, ips, 2, &u, NULL), 0);
        assert_int_equal(u.ips.n, 2);
        assert_string_equal(u.ips.v[1], "10.0.0.6");
        maas_dns_resource_release(&u);
        assert_int_equal(maas_create_dns_resource(f->mc, "c1-abc123.maas", 10, NULL, 0, NULL, &err),
                         CM_EINVAL);
        assert_non_null(cJSON_GetObjectItemCaseSensitive(err.fields, "__all__"));
        assert_int_equal(maas_delete_dns_resource(f->mc, d.id, &err), 0);
        assert_int_equal(maas_list_dns_resources(f->mc, "c1-abc123.maas", &l, NULL), 0);
        assert_int_equal(l.n, 0);
        maas_dns_list_release(&l);
        maas_dns_resource_release(&d);
        maas_error_release(&err);
}

/* --- TLS ----------------------------------------------------------------------------------------
 */

static void tls_version_call(struct fx *f,
                             const char *url,
                             const struct http_transport_opts *to,
                             int want)
{
        struct maas_config cfg = { 0 };
        struct http_transport *t = NULL;
        struct maas_client *mc = client_for(f, url, ADMIN_KEY, to, &t, &cfg);
        struct maas_version v = { 0 };
        struct maas_error err = { 0 };

        assert_int_equal(maas_get_version(mc, &v, &err), want);
        if (want == CM_ETRANSPORT)
                assert_int_equal(err.attempts, 4); /* idempotent: retried, then given up */
        maas_version_release(&v);
        maas_error_release(&err);
        maas_client_free(mc);
        http_transport_free(t);
        maas_config_release(&cfg);
}

static void test_maas_client__tls_verification_uses_the_given_ca(void **state)
{
        struct fx *f = *state;
        const char *certs = test_env("CAPMAAS_TEST_CERTS");
        char cert[512], key[512], ca[512], other[256], other_ca[300];
        struct maassim tls = { 0 };

        snprintf(cert, sizeof(cert), "%s/tls.crt", certs);
        snprintf(key, sizeof(key), "%s/tls.key", certs);
        snprintf(ca, sizeof(ca), "%s/ca.crt", certs);
        test_mkdtemp(other, sizeof(other));
        assert_int_equal(test_sh("'%s/certs/gen-dev-certs.sh' '%s' >/dev/null",
                                 test_env("CAPMAAS_SOURCE_DIR"), other),
                         0);
        snprintf(other_ca, sizeof(other_ca), "%s/ca.crt", other);
        assert_int_equal(maassim_start(&tls, ADMIN_KEY,
                                       SIM_ARGS("--tls-cert", cert, "--tls-key", key, NULL)),
                         0);
        assert_true(strncmp(tls.proc.url, "https://127.0.0.1:", 18) == 0);
        tls_version_call(f, tls.proc.url, &(struct http_transport_opts){ .ca_file = ca }, 0);
        tls_version_call(f, tls.proc.url, &(struct http_transport_opts){ .ca_file = other_ca },
                         CM_ETRANSPORT);
        tls_version_call(f, tls.proc.url, &(struct http_transport_opts){ 0 }, CM_ETRANSPORT);
        tls_version_call(f, tls.proc.url,
                         &(struct http_transport_opts){ .insecure_skip_verify = true }, 0);
        assert_int_equal(maassim_stop(&tls), 0);
        test_sh("rm -rf '%s'", other);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
                T(test_maas_client__allocate_deploy_power_release_lifecycle),
                T(test_maas_client__lists_inventory_and_filters),
                T(test_maas_client__list_by_repeated_ids),
                T(test_maas_client__allocate_sends_every_tag),
                T(test_maas_client__404_is_not_found_with_maas_message),
                T(test_maas_client__409_no_match_on_allocate),
                T(test_maas_client__409_state_conflict),
                T(test_maas_client__400_validation_carries_field_map),
                T(test_maas_client__401_for_a_wrong_key),
                T(test_maas_client__403_for_another_users_machine),
                T(test_maas_client__503_retry_after_is_honoured),
                T(test_maas_client__retry_after_wait_is_capped),
                T(test_maas_client__503_retry_after_retries_even_allocate),
                T(test_maas_client__429_retry_after_is_honoured_even_on_allocate),
                T(test_maas_client__429_without_retry_after_is_transient),
                T(test_maas_client__budget_spaces_requests_of_every_client),
                T(test_maas_client__retry_after_holds_every_client),
                T(test_maas_client__500_on_get_is_retried_with_backoff),
                T(test_maas_client__500_on_allocate_is_not_retried),
                T(test_maas_client__gives_up_after_max_attempts),
                T(test_maas_client__transport_error_is_transient),
                T(test_maas_client__total_timeout_applies),
                T(test_maas_client__failed_deployment_and_unknown_bmc),
                T(test_maas_client__dns_resource_create_list_update_delete),
                T(test_maas_client__tls_verification_uses_the_given_ca),
#undef T
        };
        int r;

        curl_global_init(CURL_GLOBAL_DEFAULT);
        r = cmocka_run_group_tests_name("maas_client", tests, NULL, NULL);
        curl_global_cleanup();
        return r;
}
