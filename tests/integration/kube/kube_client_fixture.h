#pragma once
/*
 * kube_client_fixture: the kube-sim one group of kube client tests shares (short event
 * history so tests can expire resourceVersions, bookmarks every 0.2 s, the CRDs installed,
 * namespace "churn"), a client per test whose retries record their sleeps instead of
 * sleeping, and the objects the tests write. Linked into every test of this folder; used by
 * test_kube_client.c and test_kube_watch.c.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "kube_client.h"
#include "kubesim.h"

#define KC_HISTORY 60 /* kube-sim --history */

extern struct kubesim kc_sim;

struct kc_fx {
        struct kube_client *c;
        struct kube_error e;
        uint64_t slept[16];
        size_t n_slept;
};

/* cmocka group and per-test fixtures (*state is a struct kc_fx *). */
int kc_group_setup(void **state);
int kc_group_teardown(void **state);
int kc_setup(void **state);
int kc_teardown(void **state);

/* A client of kc_sim's cfg (or cfg) with max_body max (0 = default) recording into f. */
struct kube_client *kc_new_client(struct kc_fx *f, const struct kube_config *cfg, size_t max);
/* Counts logged requests with this method whose path ends with `suffix` and, when
 * `query_key` is non-NULL, that carry (want_key) or lack (!want_key) that query key. */
int kc_count(const char *method, const char *suffix, const char *query_key, bool want_key);
/* A ConfigMap (name NULL: none) labelled app=t with data k=value. */
cJSON *kc_cm(const char *name, const char *value);
/* Creates kc_cm(name, v) in ns; its resourceVersion (malloc'd). */
char *kc_create_cm(struct kube_client *c, const char *ns, const char *name, const char *v);
/* n writes in namespace "churn": enough of them push older events out of the history. */
void kc_churn(struct kube_client *c, int n);
/* n 'v' characters (malloc'd). */
char *kc_big_value(size_t n);
