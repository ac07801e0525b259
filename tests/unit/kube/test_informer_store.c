/*
 * Unit tests for the informer cache and kube_object snapshots, fed with synthetic watch events and
 * list results through the informer's internal seam (reconcile/informer_priv.h): no API
 * server, no thread of the informer's own. Covers add/update/delete, relist diffing (as
 * after a 410), the cluster-name index, resync on a fake clock without API calls, snapshot
 * lifetimes across cache updates, and readers racing the writer (ctest: concurrency).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../kube/informer_priv.h"
#include "clock.h"
#include "err.h"
#include "informer.h"
#include "kube_client.h"

#define CLUSTER_LABEL "cluster.x-k8s.io/cluster-name"

struct rec {
        char log[16384]; /* "A ns/name@rv " / "U ns/name@old>new " / "D ns/name@rv " */
        size_t len;
        unsigned adds, updates, deletes, same; /* same: updates with old == new */
        struct informer *inf;                  /* for the handler that reads the cache */
        bool read_back_ok;
};

struct tctx {
        struct clock_fake clk;
        struct informer *inf;
        struct rec rec;
};

static void rec_printf(struct rec *r, const char *fmt, ...) PRINTF_LIKE(2, 3);

static void rec_printf(struct rec *r, const char *fmt, ...)
{
        va_list ap;
        int n;

        if (r->len + 256 > sizeof(r->log))
                return; /* bulk tests only count; the log keeps its start */
        va_start(ap, fmt);
        n = vsnprintf(r->log + r->len, sizeof(r->log) - r->len, fmt, ap);
        va_end(ap);
        assert_true(n > 0 && (size_t)n < sizeof(r->log) - r->len);
        r->len += (size_t)n;
}

static void h_add(void *arg, const struct kube_object *o)
{
        struct rec *r = arg;

        r->adds++;
        rec_printf(r, "A %s/%s@%s ", kube_object_namespace(o), kube_object_name(o),
                   kube_object_resource_version(o));
}

static void h_update(void *arg, const struct kube_object *old, const struct kube_object *cur)
{
        struct rec *r = arg;

        r->updates++;
        if (old == cur)
                r->same++;
        rec_printf(r, "U %s/%s@%s>%s ", kube_object_namespace(cur), kube_object_name(cur),
                   kube_object_resource_version(old), kube_object_resource_version(cur));
}

static void h_delete(void *arg, const struct kube_object *last)
{
        struct rec *r = arg;

        r->deletes++;
        rec_printf(r, "D %s/%s@%s ", kube_object_namespace(last), kube_object_name(last),
                   kube_object_resource_version(last));
}

static void rec_reset(struct rec *r)
{
        r->len = 0;
        r->log[0] = '\0';
        r->adds = r->updates = r->deletes = r->same = 0;
}

static cJSON *mkobj(const char *ns, const char *name, const char *rv, const char *cluster)
{
        cJSON *o = cJSON_CreateObject();
        cJSON *md = cJSON_AddObjectToObject(o, "metadata");

        cJSON_AddStringToObject(o, "kind", "ConfigMap");
        cJSON_AddStringToObject(md, "name", name);
        if (ns)
                cJSON_AddStringToObject(md, "namespace", ns);
        cJSON_AddStringToObject(md, "uid", "u-1");
        cJSON_AddStringToObject(md, "resourceVersion", rv);
        if (cluster)
                cJSON_AddStringToObject(cJSON_AddObjectToObject(md, "labels"), CLUSTER_LABEL,
                                        cluster);
        return o;
}

/* A List with the given objects (consumed) and resourceVersion. */
static cJSON *mklist(const char *rv, cJSON *const *items, size_t n)
{
        cJSON *l = cJSON_CreateObject();
        cJSON *arr = cJSON_AddArrayToObject(l, "items");

        cJSON_AddStringToObject(cJSON_AddObjectToObject(l, "metadata"), "resourceVersion", rv);
        for (size_t i = 0; i < n; i++)
                cJSON_AddItemToArray(arr, items[i]);
        return l;
}

static void feed(struct informer *inf,
                 enum kube_watch_event t,
                 const char *ns,
                 const char *name,
                 const char *rv,
                 const char *cluster)
{
        assert_int_equal(informer_feed_event(inf, t, mkobj(ns, name, rv, cluster)), 0);
}

static int setup_resync(void **state, uint64_t resync_ms)
{
        struct tctx *t = calloc(1, sizeof(*t));

        assert_non_null(t);
        clock_fake_init(&t->clk, 1000, 1700000000);
        assert_int_equal(informer_new(&(struct informer_opts){ .resource = &KUBE_RES_CONFIGMAPS,
                                                               .resync_ms = resync_ms,
                                                               .clock = &t->clk.ops },
                                      &t->inf),
                         0);
        assert_int_equal(
                informer_add_handler(t->inf, &(struct informer_handler){ .on_add = h_add,
                                                                         .on_update = h_update,
                                                                         .on_delete = h_delete,
                                                                         .arg = &t->rec }),
                0);
        t->rec.inf = t->inf;
        *state = t;
        return 0;
}

static int setup(void **state)
{
        return setup_resync(state, 0);
}

static int teardown(void **state)
{
        struct tctx *t = *state;

        t->inf = informer_free(t->inf);
        free(t);
        return 0;
}

static void expect_rv(struct informer *inf, const char *ns, const char *name, const char *rv)
{
        struct kube_object *o = informer_get(inf, ns, name);

        if (!rv) {
                assert_null(o);
                return;
        }
        assert_non_null(o);
        assert_string_equal(kube_object_resource_version(o), rv);
        kube_object_unref(o);
}

/* ---- kube_object ---- */

static void test_kobj__accessors_point_into_the_object(void **state)
{
        struct kube_object *o = NULL;

        (void)state;
        assert_int_equal(kube_object_new(mkobj("ns1", "a", "7", "c1"), &o), 0);
        assert_string_equal(kube_object_namespace(o), "ns1");
        assert_string_equal(kube_object_name(o), "a");
        assert_string_equal(kube_object_uid(o), "u-1");
        assert_string_equal(kube_object_resource_version(o), "7");
        assert_string_equal(kube_object_cluster_name(o), "c1");
        assert_ptr_equal(
                kube_object_name(o),
                cJSON_GetObjectItemCaseSensitive(
                        cJSON_GetObjectItemCaseSensitive(kube_object_json(o), "metadata"), "name")
                        ->valuestring);
        assert_ptr_equal(kube_object_ref(o), o);
        kube_object_unref(o);
        kube_object_unref(o);
        kube_object_unref(NULL);
}

static void test_kobj__cluster_scoped_and_unlabelled_defaults(void **state)
{
        struct kube_object *o = NULL;

        (void)state;
        assert_int_equal(kube_object_new(mkobj(NULL, "node-1", "3", NULL), &o), 0);
        assert_string_equal(kube_object_namespace(o), "");
        assert_null(kube_object_cluster_name(o));
        kube_object_unref(o);
}

static void test_kobj__missing_name_is_rejected_and_consumed(void **state)
{
        struct kube_object *o = NULL;
        cJSON *no_md = cJSON_CreateObject();
        cJSON *no_name = cJSON_Parse("{\"metadata\":{\"namespace\":\"x\"}}");
        cJSON *num_name = cJSON_Parse("{\"metadata\":{\"name\":5}}");

        (void)state;
        assert_int_equal(kube_object_new(no_md, &o), CM_EINVAL);
        assert_int_equal(kube_object_new(no_name, &o), CM_EINVAL);
        assert_int_equal(kube_object_new(num_name, &o), CM_EINVAL);
        assert_null(o); /* ret untouched; the objects were freed (ASan checks the leak) */
}

static void test_kobj__list_free_unrefs_each(void **state)
{
        struct kube_object **v = calloc(3, sizeof(*v));

        (void)state;
        for (int i = 0; i < 3; i++)
                assert_int_equal(kube_object_new(mkobj("n",
                                                       i == 0   ? "a"
                                                       : i == 1 ? "b"
                                                                : "c",
                                                       "1", NULL),
                                                 &v[i]),
                                 0);
        kube_object_list_free(v, 3);
        kube_object_list_free(NULL, 0);
}

/* ---- watch events ---- */

static void test_informer__add_update_delete_reach_cache_and_handlers(void **state)
{
        struct tctx *t = *state;

        feed(t->inf, KUBE_WATCH_ADDED, "ns1", "a", "1", NULL);
        feed(t->inf, KUBE_WATCH_ADDED, "ns1", "b", "2", NULL);
        feed(t->inf, KUBE_WATCH_MODIFIED, "ns1", "a", "3", NULL);
        expect_rv(t->inf, "ns1", "a", "3");
        expect_rv(t->inf, "ns1", "b", "2");
        assert_int_equal(informer_len(t->inf), 2);
        feed(t->inf, KUBE_WATCH_DELETED, "ns1", "a", "4", NULL);
        expect_rv(t->inf, "ns1", "a", NULL);
        assert_int_equal(informer_len(t->inf), 1);
        assert_string_equal(t->rec.log, "A ns1/a@1 A ns1/b@2 U ns1/a@1>3 D ns1/a@4 ");
        assert_string_equal(informer_last_rv(t->inf), "4");
        assert_int_equal(informer_api_calls(t->inf), 0);
}

static void test_informer__duplicate_add_is_update_unknown_delete_is_silent(void **state)
{
        struct tctx *t = *state;

        feed(t->inf, KUBE_WATCH_ADDED, "ns1", "a", "1", NULL);
        feed(t->inf, KUBE_WATCH_ADDED, "ns1", "a", "2", NULL);      /* replayed ADDED */
        feed(t->inf, KUBE_WATCH_MODIFIED, "ns1", "z", "3", NULL);   /* never seen: an add */
        feed(t->inf, KUBE_WATCH_DELETED, "ns1", "gone", "4", NULL); /* never cached */
        assert_string_equal(t->rec.log, "A ns1/a@1 U ns1/a@1>2 A ns1/z@3 ");
        assert_int_equal(informer_len(t->inf), 2);
}

static void test_informer__same_name_in_two_namespaces_are_distinct(void **state)
{
        struct tctx *t = *state;

        feed(t->inf, KUBE_WATCH_ADDED, "ns1", "a", "1", NULL);
        feed(t->inf, KUBE_WATCH_ADDED, "ns2", "a", "2", NULL);
        feed(t->inf, KUBE_WATCH_ADDED, NULL, "a", "3", NULL);
        expect_rv(t->inf, "ns1", "a", "1");
        expect_rv(t->inf, "ns2", "a", "2");
        expect_rv(t->inf, "", "a", "3");
        expect_rv(t->inf, NULL, "a", "3");
        assert_int_equal(informer_len(t->inf), 3);
}

static void test_informer__event_without_name_is_rejected(void **state)
{
        struct tctx *t = *state;

        assert_int_equal(
                informer_feed_event(t->inf, KUBE_WATCH_ADDED, cJSON_Parse("{\"metadata\":{}}")),
                CM_EINVAL);
        assert_int_equal(t->rec.adds, 0);
        assert_int_equal(informer_len(t->inf), 0);
}

static void test_informer__bookmark_moves_rv_without_events(void **state)
{
        struct tctx *t = *state;
        cJSON *bm =
                cJSON_Parse("{\"kind\":\"ConfigMap\",\"metadata\":{\"resourceVersion\":\"77\"}}");

        feed(t->inf, KUBE_WATCH_ADDED, "ns1", "a", "5", NULL);
        assert_string_equal(informer_last_rv(t->inf), "5");
        assert_int_equal(informer_feed_event(t->inf, KUBE_WATCH_BOOKMARK, bm), 0);
        assert_string_equal(informer_last_rv(t->inf), "77");
        assert_int_equal(t->rec.adds + t->rec.updates + t->rec.deletes, 1);
        assert_int_equal(informer_len(t->inf), 1);
}

static void test_informer__managed_fields_are_not_cached(void **state)
{
        struct tctx *t = *state;
        cJSON *o = mkobj("ns1", "a", "1", NULL);
        struct kube_object *k;

        cJSON_AddArrayToObject(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "managedFields");
        assert_int_equal(informer_feed_event(t->inf, KUBE_WATCH_ADDED, o), 0);
        k = informer_get(t->inf, "ns1", "a");
        assert_non_null(k);
        assert_null(cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(kube_object_json(k), "metadata"),
                "managedFields"));
        assert_non_null(cJSON_GetObjectItemCaseSensitive(kube_object_json(k), "kind"));
        kube_object_unref(k);
}

/* ---- relist (start-up and after 410 Gone) ---- */

static void test_informer__first_list_adds_everything_and_syncs(void **state)
{
        struct tctx *t = *state;
        cJSON *items[] = { mkobj("ns1", "a", "1", NULL), mkobj("ns1", "b", "2", NULL) };

        assert_false(informer_has_synced(t->inf));
        assert_int_equal(informer_wait_synced(t->inf, 1), CM_ETIMEDOUT);
        assert_int_equal(informer_feed_list(t->inf, mklist("10", items, 2)), 0);
        assert_true(informer_has_synced(t->inf));
        assert_int_equal(informer_wait_synced(t->inf, 0), 0);
        assert_string_equal(t->rec.log, "A ns1/a@1 A ns1/b@2 ");
        assert_string_equal(informer_last_rv(t->inf), "10");
}

static void test_informer__relist_diffs_against_cache(void **state)
{
        struct tctx *t = *state;
        cJSON *first[] = { mkobj("ns1", "a", "1", NULL), mkobj("ns1", "b", "1", NULL),
                           mkobj("ns1", "c", "1", NULL) };
        cJSON *second[] = { mkobj("ns1", "a", "1", NULL), mkobj("ns1", "b", "2", NULL),
                            mkobj("ns1", "d", "3", NULL) };
        struct kube_object *a_before, *a_after;

        assert_int_equal(informer_feed_list(t->inf, mklist("1", first, 3)), 0);
        a_before = informer_get(t->inf, "ns1", "a");
        rec_reset(&t->rec);
        assert_int_equal(informer_feed_list(t->inf, mklist("3", second, 3)), 0);
        /* b changed: update; d is new: add; c vanished: delete; a unchanged: silent */
        assert_string_equal(t->rec.log, "U ns1/b@1>2 A ns1/d@3 D ns1/c@1 ");
        assert_int_equal(informer_len(t->inf), 3);
        expect_rv(t->inf, "ns1", "c", NULL);
        expect_rv(t->inf, "ns1", "d", "3");
        a_after = informer_get(t->inf, "ns1", "a");
        assert_string_equal(kube_object_resource_version(a_before),
                            kube_object_resource_version(a_after));
        assert_ptr_not_equal(a_before, a_after); /* every get is a snapshot of its own */
        kube_object_unref(a_before);
        kube_object_unref(a_after);
}

static void test_informer__empty_relist_deletes_everything(void **state)
{
        struct tctx *t = *state;

        for (int i = 0; i < 100; i++) {
                char name[16];

                snprintf(name, sizeof(name), "o%d", i);
                feed(t->inf, KUBE_WATCH_ADDED, "ns1", name, "1", i % 2 ? "c1" : NULL);
        }
        rec_reset(&t->rec);
        assert_int_equal(informer_feed_list(t->inf, mklist("9", NULL, 0)), 0);
        assert_int_equal(t->rec.deletes, 100);
        assert_int_equal(informer_len(t->inf), 0);
        assert_int_equal(informer_feed_list(t->inf, cJSON_CreateArray()), CM_EINVAL);
}

/* ---- indexes ---- */

static void names_of(struct kube_object **v, size_t n, char *out, size_t cap)
{
        size_t len = 0;

        out[0] = '\0';
        for (size_t i = 0; i < n; i++) {
                int w = snprintf(out + len, cap - len, "%s/%s ", kube_object_namespace(v[i]),
                                 kube_object_name(v[i]));

                assert_true(w > 0 && (size_t)w < cap - len);
                len += (size_t)w;
        }
}

static void expect_list(struct informer *inf, const char *ns, const char *cluster, const char *want)
{
        struct kube_object **v = NULL;
        size_t n = 99;
        char got[1024];

        assert_int_equal(informer_list(inf, ns, cluster, &v, &n), 0);
        if (n == 0)
                assert_null(v);
        names_of(v, n, got, sizeof(got));
        assert_string_equal(got, want);
        kube_object_list_free(v, n);
}

static void test_informer__cluster_index_follows_labels(void **state)
{
        struct tctx *t = *state;

        feed(t->inf, KUBE_WATCH_ADDED, "ns2", "m2", "1", "c1");
        feed(t->inf, KUBE_WATCH_ADDED, "ns1", "m1", "2", "c1");
        feed(t->inf, KUBE_WATCH_ADDED, "ns1", "m0", "3", "c1");
        feed(t->inf, KUBE_WATCH_ADDED, "ns1", "x", "4", "c2");
        feed(t->inf, KUBE_WATCH_ADDED, "ns1", "plain", "5", NULL);
        expect_list(t->inf, NULL, "c1", "ns1/m0 ns1/m1 ns2/m2 ");
        expect_list(t->inf, "ns1", "c1", "ns1/m0 ns1/m1 ");
        expect_list(t->inf, NULL, "c2", "ns1/x ");
        expect_list(t->inf, NULL, "nope", "");
        /* relabel: m1 moves from c1 to c2; x loses its label */
        feed(t->inf, KUBE_WATCH_MODIFIED, "ns1", "m1", "6", "c2");
        feed(t->inf, KUBE_WATCH_MODIFIED, "ns1", "x", "7", NULL);
        expect_list(t->inf, NULL, "c1", "ns1/m0 ns2/m2 ");
        expect_list(t->inf, NULL, "c2", "ns1/m1 ");
        feed(t->inf, KUBE_WATCH_DELETED, "ns2", "m2", "8", "c1");
        expect_list(t->inf, NULL, "c1", "ns1/m0 ");
        expect_list(t->inf, NULL, NULL, "ns1/m0 ns1/m1 ns1/plain ns1/x ");
        expect_list(t->inf, "ns9", NULL, "");
}

struct keys {
        char text[1024];
        size_t len;
        struct informer *inf;
        bool get_ok; /* the callback may use the informer (no lock held) */
};

static void key_cb(void *arg, const char *ns, const char *name)
{
        struct keys *k = arg;
        struct kube_object *o = informer_get(k->inf, ns, name);
        int n = snprintf(k->text + k->len, sizeof(k->text) - k->len, "%s/%s ", ns, name);

        assert_true(n > 0 && (size_t)n < sizeof(k->text) - k->len);
        k->len += (size_t)n;
        k->get_ok = k->get_ok && o;
        kube_object_unref(o);
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorts the space-separated words of s in place (each_key does not sort). */
static void sort_words(char *s)
{
        char *w[64], copy[1024], *t;
        size_t n = 0, len = 0;

        snprintf(copy, sizeof(copy), "%s", s);
        for (t = copy; *t && n < 64;) {
                char *sp = strchr(t, ' ');

                if (sp)
                        *sp = '\0';
                if (*t)
                        w[n++] = t;
                if (!sp)
                        break;
                t = sp + 1;
        }
        qsort(w, n, sizeof(*w), cmp_str);
        s[0] = '\0';
        for (size_t i = 0; i < n; i++)
                len += (size_t)snprintf(s + len, 1024 - len, "%s ", w[i]);
}

static void test_informer__each_key_filters_like_list_without_parsing(void **state)
{
        struct tctx *t = *state;
        struct keys k = { .inf = t->inf, .get_ok = true };

        feed(t->inf, KUBE_WATCH_ADDED, "ns2", "m2", "1", "c1");
        feed(t->inf, KUBE_WATCH_ADDED, "ns1", "m1", "2", "c1");
        feed(t->inf, KUBE_WATCH_ADDED, "ns1", "x", "3", "c2");
        feed(t->inf, KUBE_WATCH_ADDED, NULL, "node", "4", NULL);
        assert_int_equal(informer_each_key(t->inf, NULL, "c1", key_cb, &k), 2);
        sort_words(k.text);
        assert_string_equal(k.text, "ns1/m1 ns2/m2 ");
        k.len = 0;
        k.text[0] = '\0';
        assert_int_equal(informer_each_key(t->inf, "ns1", NULL, key_cb, &k), 2);
        sort_words(k.text);
        assert_string_equal(k.text, "ns1/m1 ns1/x ");
        k.len = 0;
        assert_int_equal(informer_each_key(t->inf, "", NULL, key_cb, &k), 1);
        assert_string_equal(k.text, "/node ");
        assert_int_equal(informer_each_key(t->inf, NULL, "none", key_cb, &k), 0);
        assert_true(k.get_ok);
}

/* What informer_each handed over: "ns/name@rv " per object, and whether each was a
 * snapshot that could be kept. */
struct seen_objs {
        struct informer *inf;
        char text[1024];
        size_t len;
        struct kube_object *kept;
        bool delete_next; /* deletes an object during the pass: it must be skipped */
};

static void obj_cb(void *arg, struct kube_object *obj)
{
        struct seen_objs *s = arg;

        s->len += (size_t)snprintf(s->text + s->len, sizeof(s->text) - s->len, "%s/%s@%s ",
                                   kube_object_namespace(obj), kube_object_name(obj),
                                   kube_object_resource_version(obj));
        if (!s->kept)
                s->kept = kube_object_ref(obj); /* a borrowed snapshot may be kept */
        if (s->delete_next) { /* deletes the other of ns1/m1 and ns1/x, not visited yet */
                s->delete_next = false;
                if (strcmp(kube_object_name(obj), "x") == 0)
                        feed(s->inf, KUBE_WATCH_DELETED, "ns1", "m1", "9", "c1");
                else
                        feed(s->inf, KUBE_WATCH_DELETED, "ns1", "x", "9", "c2");
        }
}

static void test_informer__each_hands_over_one_parsed_snapshot_at_a_time(void **state)
{
        struct tctx *t = *state;
        struct seen_objs s = { .inf = t->inf };

        feed(t->inf, KUBE_WATCH_ADDED, "ns2", "m2", "1", "c1");
        feed(t->inf, KUBE_WATCH_ADDED, "ns1", "m1", "2", "c1");
        feed(t->inf, KUBE_WATCH_ADDED, "ns1", "x", "3", "c2");
        assert_int_equal(informer_each(t->inf, NULL, "c1", obj_cb, &s), 2);
        sort_words(s.text);
        assert_string_equal(s.text, "ns1/m1@2 ns2/m2@1 ");
        assert_non_null(s.kept);
        kube_object_unref(s.kept);
        /* an object deleted while the pass runs is skipped, not handed over stale */
        s = (struct seen_objs){ .inf = t->inf, .delete_next = true };
        assert_int_equal(informer_each(t->inf, "ns1", NULL, obj_cb, &s), 1);
        kube_object_unref(s.kept);
        assert_int_equal(informer_len(t->inf), 2);
}

static void test_informer__thousands_of_objects_survive_table_growth(void **state)
{
        struct tctx *t = *state;

        enum { N = 5000 };
        struct kube_object **v = NULL;
        char name[32], cl[16], rv[16];
        size_t n = 0;

        for (int i = 0; i < N; i++) {
                snprintf(name, sizeof(name), "mm-%05d", i);
                snprintf(cl, sizeof(cl), "c%d", i % 50);
                snprintf(rv, sizeof(rv), "%d", i + 1);
                feed(t->inf, KUBE_WATCH_ADDED, i % 2 ? "ns-a" : "ns-b", name, rv, cl);
        }
        assert_int_equal(informer_len(t->inf), N);
        assert_int_equal(t->rec.adds, N);
        for (int i = 0; i < N; i++) {
                snprintf(name, sizeof(name), "mm-%05d", i);
                snprintf(rv, sizeof(rv), "%d", i + 1);
                expect_rv(t->inf, i % 2 ? "ns-a" : "ns-b", name, rv);
        }
        assert_int_equal(informer_list(t->inf, NULL, "c7", &v, &n), 0);
        assert_int_equal(n, N / 50);
        for (size_t i = 1; i < n; i++)
                assert_true(
                        strcmp(kube_object_namespace(v[i - 1]), kube_object_namespace(v[i])) < 0 ||
                        (!strcmp(kube_object_namespace(v[i - 1]), kube_object_namespace(v[i])) &&
                         strcmp(kube_object_name(v[i - 1]), kube_object_name(v[i])) < 0));
        for (size_t i = 0; i < n; i++)
                assert_string_equal(kube_object_cluster_name(v[i]), "c7");
        kube_object_list_free(v, n);
}

/* ---- memory ---- */

static cJSON *read_fixture(const char *rel)
{
        const char *src = getenv("CAPMAAS_SOURCE_DIR");
        char path[1024];
        static char text[65536];
        size_t n;
        FILE *f;

        assert_non_null(src);
        snprintf(path, sizeof(path), "%s/%s", src, rel);
        f = fopen(path, "r");
        assert_non_null(f);
        n = fread(text, 1, sizeof(text), f);
        fclose(f);
        return cJSON_ParseWithLength(text, n);
}

static void test_informer__maasmachine_costs_under_3_kib_cached(void **state)
{
        struct tctx *t = *state;
        cJSON *tmpl = read_fixture("tests/fixtures/schema/maasmachine.json");
        char name[32];
        size_t bytes;

        assert_non_null(tmpl);
        for (int i = 0; i < 1000; i++) {
                cJSON *o = cJSON_Duplicate(tmpl, true);
                cJSON *md = cJSON_GetObjectItemCaseSensitive(o, "metadata");

                snprintf(name, sizeof(name), "mm-%04d", i);
                cJSON_ReplaceItemInObjectCaseSensitive(md, "name", cJSON_CreateString(name));
                assert_int_equal(informer_feed_event(t->inf, KUBE_WATCH_ADDED, o), 0);
        }
        /* goal: 10 000 MaasMachines in <= 64 MiB for the whole process */
        bytes = informer_cache_bytes(t->inf);
        assert_true(bytes / 1000 < 3 * 1024);
        feed(t->inf, KUBE_WATCH_DELETED, "default", "mm-0000", "9", NULL);
        assert_true(informer_cache_bytes(t->inf) < bytes);
        assert_int_equal(informer_feed_list(t->inf, mklist("10", NULL, 0)), 0);
        assert_int_equal(informer_cache_bytes(t->inf), 0);
        cJSON_Delete(tmpl);
}

/* ---- resync ---- */

static int setup_1s_resync(void **state)
{
        return setup_resync(state, 1000);
}

static void test_informer__resync_replays_cache_on_the_clock(void **state)
{
        struct tctx *t = *state;
        cJSON *items[] = { mkobj("ns1", "a", "1", NULL), mkobj("ns1", "b", "2", NULL) };

        feed(t->inf, KUBE_WATCH_ADDED, "ns1", "early", "0", NULL);
        clock_fake_advance(&t->clk, 5000);
        assert_int_equal(informer_resync_if_due(t->inf), 0); /* not synced yet: nothing */
        assert_int_equal(informer_feed_list(t->inf, mklist("2", items, 2)), 0);
        rec_reset(&t->rec);
        clock_fake_advance(&t->clk, 999);
        assert_int_equal(informer_resync_if_due(t->inf), 0);
        assert_int_equal(t->rec.updates, 0);
        clock_fake_advance(&t->clk, 1);
        assert_int_equal(informer_resync_if_due(t->inf), 2);
        assert_int_equal(t->rec.updates, 2);
        assert_int_equal(t->rec.same, 2); /* old == new: a replay, not a change */
        assert_int_equal(informer_resync_if_due(t->inf), 0); /* next one a period later */
        clock_fake_advance(&t->clk, 1000);
        assert_int_equal(informer_resync_if_due(t->inf), 2);
        assert_int_equal(t->rec.adds + t->rec.deletes, 0);
        assert_int_equal(informer_api_calls(t->inf), 0);
}

static void test_informer__no_resync_when_period_is_zero(void **state)
{
        struct tctx *t = *state;

        assert_int_equal(informer_feed_list(t->inf, mklist("1", NULL, 0)), 0);
        feed(t->inf, KUBE_WATCH_ADDED, "ns1", "a", "2", NULL);
        clock_fake_advance(&t->clk, 86400000);
        assert_int_equal(informer_resync_if_due(t->inf), 0);
}

/* ---- snapshot lifetimes ---- */

static void test_informer__held_snapshot_outlives_update_and_delete(void **state)
{
        struct tctx *t = *state;
        struct kube_object *held;
        struct kube_object **all = NULL;
        size_t n = 0;

        feed(t->inf, KUBE_WATCH_ADDED, "ns1", "a", "1", "c1");
        held = informer_get(t->inf, "ns1", "a");
        assert_int_equal(informer_list(t->inf, NULL, NULL, &all, &n), 0);
        feed(t->inf, KUBE_WATCH_MODIFIED, "ns1", "a", "2", "c2");
        feed(t->inf, KUBE_WATCH_DELETED, "ns1", "a", "3", "c2");
        assert_int_equal(informer_feed_list(t->inf, mklist("4", NULL, 0)), 0);
        t->inf = informer_free(t->inf); /* even the informer is gone */
        assert_string_equal(kube_object_resource_version(held), "1");
        assert_string_equal(kube_object_cluster_name(held), "c1");
        assert_int_equal(n, 1);
        assert_string_equal(kube_object_resource_version(all[0]), "1");
        kube_object_unref(held);
        kube_object_list_free(all, n);
}

static void h_read_back(void *arg, const struct kube_object *o)
{
        struct rec *r = arg;
        struct kube_object *again =
                informer_get(r->inf, kube_object_namespace(o), kube_object_name(o));

        /* handlers run after the write lock is dropped: the cache already shows o */
        r->read_back_ok = again && !strcmp(kube_object_resource_version(again),
                                           kube_object_resource_version(o));
        kube_object_unref(again);
}

static void test_informer__handler_may_read_the_cache(void **state)
{
        struct tctx *t = *state;

        assert_int_equal(
                informer_add_handler(t->inf, &(struct informer_handler){ .on_add = h_read_back,
                                                                         .arg = &t->rec }),
                0);
        feed(t->inf, KUBE_WATCH_ADDED, "ns1", "a", "1", NULL);
        assert_true(t->rec.read_back_ok);
}

static void test_informer__handler_limit_and_start_needs_config(void **state)
{
        struct tctx *t = *state;
        struct informer_handler h = { .on_add = h_add, .arg = &t->rec };
        struct informer *bad = NULL;

        for (int i = 1; i < 8; i++)
                assert_int_equal(informer_add_handler(t->inf, &h), 0);
        assert_int_equal(informer_add_handler(t->inf, &h), CM_ETOOBIG);
        assert_int_equal(informer_start(t->inf), CM_EINVAL); /* no kube_config */
        informer_stop(t->inf);                               /* never started: harmless */
        assert_int_equal(informer_new(&(struct informer_opts){ 0 }, &bad), CM_EINVAL);
        assert_null(bad);
        assert_null(informer_free(NULL));
}

/* ---- readers racing the writer (TSan) ---- */

struct race {
        struct informer *inf;
        atomic_bool done;
        unsigned long reads;
};

static void *reader(void *arg)
{
        struct race *r = arg;
        char name[16];

        for (unsigned i = 0; !atomic_load(&r->done) || i < 100; i++) {
                struct kube_object **v = NULL;
                struct kube_object *o;
                size_t n = 0;

                snprintf(name, sizeof(name), "o%u", i % 64);
                o = informer_get(r->inf, "ns", name);
                if (o) {
                        assert_string_equal(kube_object_name(o), name);
                        kube_object_unref(o);
                }
                assert_int_equal(informer_list(r->inf, NULL, i % 2 ? "c1" : NULL, &v, &n), 0);
                for (size_t j = 0; j < n; j++)
                        assert_non_null(kube_object_resource_version(v[j]));
                kube_object_list_free(v, n);
                (void)informer_len(r->inf);
                r->reads++;
        }
        return NULL;
}

static void test_informer__readers_run_concurrently_with_the_writer(void **state)
{
        struct tctx *t = *state;
        struct race rc[4];
        pthread_t th[4];
        char name[16], rv[16];

        for (int i = 0; i < 4; i++) {
                rc[i] = (struct race){ .inf = t->inf };
                atomic_init(&rc[i].done, false);
                assert_int_equal(pthread_create(&th[i], NULL, reader, &rc[i]), 0);
        }
        for (int i = 0; i < 3000; i++) {
                snprintf(name, sizeof(name), "o%d", i % 64);
                snprintf(rv, sizeof(rv), "%d", i + 1);
                feed(t->inf, i % 7 == 6 ? KUBE_WATCH_DELETED : KUBE_WATCH_MODIFIED, "ns", name, rv,
                     i % 3 ? "c1" : NULL);
                if (i % 1000 == 999)
                        assert_int_equal(informer_feed_list(t->inf, mklist(rv, NULL, 0)), 0);
        }
        for (int i = 0; i < 4; i++) {
                atomic_store(&rc[i].done, true);
                assert_int_equal(pthread_join(th[i], NULL), 0);
                assert_true(rc[i].reads >= 100);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_kobj__accessors_point_into_the_object),
                cmocka_unit_test(test_kobj__cluster_scoped_and_unlabelled_defaults),
                cmocka_unit_test(test_kobj__missing_name_is_rejected_and_consumed),
                cmocka_unit_test(test_kobj__list_free_unrefs_each),
                cmocka_unit_test_setup_teardown(
                        test_informer__add_update_delete_reach_cache_and_handlers, setup, teardown),
                cmocka_unit_test_setup_teardown(
                        test_informer__duplicate_add_is_update_unknown_delete_is_silent, setup,
                        teardown),
                cmocka_unit_test_setup_teardown(
                        test_informer__same_name_in_two_namespaces_are_distinct, setup, teardown),
                cmocka_unit_test_setup_teardown(test_informer__event_without_name_is_rejected,
                                                setup, teardown),
                cmocka_unit_test_setup_teardown(test_informer__bookmark_moves_rv_without_events,
                                                setup, teardown),
                cmocka_unit_test_setup_teardown(test_informer__managed_fields_are_not_cached, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_informer__first_list_adds_everything_and_syncs,
                                                setup, teardown),
                cmocka_unit_test_setup_teardown(test_informer__relist_diffs_against_cache, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_informer__empty_relist_deletes_everything,
                                                setup, teardown),
                cmocka_unit_test_setup_teardown(test_informer__cluster_index_follows_labels, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(
                        test_informer__each_key_filters_like_list_without_parsing, setup, teardown),
                cmocka_unit_test_setup_teardown(
                        test_informer__each_hands_over_one_parsed_snapshot_at_a_time, setup,
                        teardown),
                cmocka_unit_test_setup_teardown(
                        test_informer__thousands_of_objects_survive_table_growth, setup, teardown),
                cmocka_unit_test_setup_teardown(test_informer__maasmachine_costs_under_3_kib_cached,
                                                setup, teardown),
                cmocka_unit_test_setup_teardown(test_informer__resync_replays_cache_on_the_clock,
                                                setup_1s_resync, teardown),
                cmocka_unit_test_setup_teardown(test_informer__no_resync_when_period_is_zero, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(
                        test_informer__held_snapshot_outlives_update_and_delete, setup, teardown),
                cmocka_unit_test_setup_teardown(test_informer__handler_may_read_the_cache, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_informer__handler_limit_and_start_needs_config,
                                                setup, teardown),
                cmocka_unit_test_setup_teardown(
                        test_informer__readers_run_concurrently_with_the_writer, setup, teardown),
        };

        return cmocka_run_group_tests_name("informer_store", tests, NULL, NULL);
}
