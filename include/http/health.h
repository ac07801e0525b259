#pragma once
/*
 * health: liveness (/healthz) and readiness (/readyz) endpoints in controller-runtime's
 * format. All checks pass: 200 "ok" (or the [+] list and "<endpoint> check passed" with
 * ?verbose). Any check fails: 500 with one "[+]<name> ok" / "[-]<name> failed: reason
 * withheld" line per check and "<endpoint> check failed". ?exclude=<name> skips a check;
 * /healthz/<name> and /readyz/<name> run one check. The failure reason is logged, never
 * served.
 *
 * Checks are added by main before the router is frozen; they run on the health server's
 * thread and must be thread-safe and fast (no network).
 */

#include <stdbool.h>

#include "compiler.h"

struct health;
struct router;

/* Returns true when healthy; otherwise may set *ret_reason (malloc'd) for the log. */
typedef bool health_check_fn(void *ud, char **ret_reason);

enum health_endpoint {
        HEALTH_LIVE = 1 << 0,  /* /healthz */
        HEALTH_READY = 1 << 1, /* /readyz */
};

MUST_CHECK int health_new(struct health **ret);
struct health *health_free(struct health *h);
/* Adds a named check to the endpoints in the mask (HEALTH_LIVE | HEALTH_READY). The name is
 * copied; ud is borrowed and must outlive the health server. */
MUST_CHECK int health_add_check(
        struct health *h, unsigned endpoints, const char *name, health_check_fn *fn, void *ud);
/* Routes /healthz, /readyz and their per-check paths to h. */
MUST_CHECK int health_register_routes(struct health *h, struct router *r);
/* Always healthy: the conventional "ping" check. */
bool health_check_ping(void *ud, char **ret_reason);
