#pragma once
/*
 * maassim: one maas-sim process for an integration test: started on port 0 with the sample
 * inventory (tests/sim/maas/inventory-sample.yaml) and the given API key, its admin API
 * (/_sim/state, /_sim/faults, /_sim/requests, /_sim/machines, ...) called over plain HTTP,
 * stopped at the end.
 *
 * Ownership: the test owns the struct maassim; maassim_start fills it and the process
 * belongs to it until maassim_stop. JSON replies are the caller's (cJSON_Delete).
 *
 * Failures: maassim_start returns -1 (with a message on stderr) so it works from a setup;
 * maassim_call fails the running cmocka test unless the reply is 200.
 * Single-threaded: call from the test's thread only.
 */

#include <cjson/cJSON.h>

#include "simproc.h"

struct maassim {
        struct simproc proc; /* proc.url: "http://127.0.0.1:N/MAAS" (the MAAS endpoint) */
        char root[256];      /* "http://127.0.0.1:N" (the admin API is root + "/_sim/") */
};

/* maas-sim --port 0 --inventory <sample> --api-key key extra_args... (NULL-terminated, NULL =
 * none; more --api-key, --deploy-seconds S, --release-seconds S, ...). 0 or -1. */
int maassim_start(struct maassim *m, const char *key, const char *const *extra_args);
/* SIGTERM, then SIGKILL after 5 s. Returns the wait status (0 = a clean exit), -1 if it had
 * to be killed or was not running. Safe to call twice. */
int maassim_stop(struct maassim *m);

/* method on root + "/_sim/" + path with body as JSON (NULL = none). Fails the test unless the
 * reply is 200; returns its JSON body, NULL when it has none (writes answer "ok"). */
cJSON *maassim_call(struct maassim *m, const char *method, const char *path, const char *body);
/* POST /_sim/faults with this JSON object. */
void maassim_faults(struct maassim *m, const char *json);
/* The machine with this system_id in GET /_sim/state (a copy, NULL when absent). */
cJSON *maassim_machine(struct maassim *m, const char *system_id);
