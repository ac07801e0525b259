#pragma once
/*
 * kubesim: one kube-sim process for an integration test: started on port 0 in a fresh
 * temporary directory, its kubeconfig loaded, its admin API (/_sim/requests, /_sim/faults,
 * tests/sim/kube/simctl.c) called with its bearer token and CA, stopped and cleaned up.
 *
 * Ownership: the test owns the struct kubesim (usually inside its fixture); kubesim_start
 * fills it, and everything in it (the process, dir and cfg) belongs to it until
 * kubesim_stop, which kills the process, releases cfg and removes dir. cfg may be lent to
 * kube clients, informers, ... that the test frees before kubesim_stop. JSON replies are
 * the caller's (cJSON_Delete).
 *
 * Failures: kubesim_start returns -1 (with a message on stderr) so it works from a group
 * setup; every other function fails the running cmocka test instead of returning errors.
 * Single-threaded: call from the test's thread only.
 */

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "kube_client.h"
#include "simproc.h"

struct kubesim {
        struct simproc proc;  /* proc.url: "https://127.0.0.1:N" */
        char dir[256];        /* --dir: kubeconfig, ca.crt, ... ("" once removed) */
        char kubeconfig[280]; /* dir/kubeconfig */
        struct kube_config cfg;
};

/* Which entries of the request log to count; a NULL or zero member matches anything. */
struct kubesim_match {
        const char *method;      /* exact */
        const char *path_has;    /* the path contains it */
        const char *path_suffix; /* the path ends with it */
        int status;              /* the response status */
        const char *query_key;   /* the query has this key ... */
        bool without_key;        /* ... or, when set, lacks it */
};

/* Starts kube-sim with the NULL-terminated extra_args (NULL = none) and loads the
 * kubeconfig it writes into s->cfg. 0, or -1 (message on stderr; nothing is left running). */
int kubesim_start(struct kubesim *s, const char *const *extra_args);
/* Stops the process, releases cfg and removes the dir. Returns the wait status (0 = a clean
 * exit on SIGTERM), -1 if it had to be killed or was not running. Safe to call twice. */
int kubesim_stop(struct kubesim *s);

/* An admin call: method on s's URL + path ("/_sim/..."), with body as JSON (NULL = none).
 * Fails the test unless the reply is 200 with a JSON body; returns it (never NULL). */
cJSON *kubesim_call(struct kubesim *s, const char *method, const char *path, const char *body);
/* POST /_sim/faults with this JSON object; fails the test unless it is accepted. */
void kubesim_faults(struct kubesim *s, const char *json);
/* DELETE /_sim/requests: empties the request log and its counts. */
void kubesim_clear_requests(struct kubesim *s);
/* How many entries of the request log (GET /_sim/requests) match m. */
int kubesim_count_requests(struct kubesim *s, const struct kubesim_match *m);

/* Creates the Namespace `name` through kc (a client of a kube-sim); fails the test on an
 * error. */
void kubesim_create_namespace(struct kube_client *kc, const char *name);
/* Installs every CRD of the YAML files in config/crd/bases and of tests/sim/capi/crds.yaml
 * (under CAPMAAS_SOURCE_DIR) with a server-side apply through kc (a client of a kube-sim). Fails
 * the test on an error. Does not wait for the CRDs to be established. */
void kubesim_install_crds(struct kube_client *kc);
