#pragma once
/*
 * simproc: start a simulator (maas-sim, kube-sim, capi-sim) as a child process for a test
 * and wait for its "listening on <url>" line; stop it at the end. Every simulator prints
 * that line first on stdout (design.md §5).
 */

#include <stdbool.h>
#include <sys/types.h>

struct simproc {
        pid_t pid;
        char url[256]; /* from the listening line: "https://127.0.0.1:N[/MAAS]" */
};

/* Runs CAPMAAS_BUILD_DIR/<binary> with the NULL-terminated args and waits up to 10 s for
 * its listening line. 0 or -1. */
int simproc_start(struct simproc *s, const char *binary, const char *const *args);
/* SIGTERM, then SIGKILL after 5 s. Returns the wait status, -1 if not running. */
int simproc_stop(struct simproc *s);
/* SIGKILL at once (a crash). */
void simproc_kill(struct simproc *s);
