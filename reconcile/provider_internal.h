#pragma once
/*
 * provider_internal: the one piece of provider.c a unit test needs besides provider.h: the
 * four informers (MaasMachine, MaasCluster, CAPI Machine and Cluster) created but not
 * started, so a test fills their caches with informer_feed_list / informer_feed_event
 * (kube/informer_priv.h) and reconciles on its own thread with a worker from
 * reconciler_worker_new (worker.h). provider_free frees them as usual.
 */

#include "compiler.h"

struct provider;

/* Creates p's informers (not started). provider_start calls it too; call it at most once. */
MUST_CHECK int provider_new_informers(struct provider *p);
