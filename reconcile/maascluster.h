#pragma once
/*
 * maascluster: the MaasCluster reconciler's entry point (internal; provider.c registers it
 * with the cluster controller, unit tests call it with a worker from worker.h).
 */

#include "compiler.h"
#include "controller.h"

/* One pass over MaasCluster ns/name; wctx is a struct reconciler_worker. 0 or a negative
 * error; res says when to come back. */
MUST_CHECK int maascluster_reconcile(void *wctx,
                                     const char *ns,
                                     const char *name,
                                     struct reconcile_result *res);
