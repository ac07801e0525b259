#pragma once
/*
 * provider_internal: the pieces of provider.c a unit test needs besides provider.h: the
 * Cluster API version discovery and the four informers (MaasMachine, MaasCluster, CAPI Machine and
 * Cluster) created but not started, so a test fills their caches with informer_feed_list /
 * informer_feed_event (kube/informer_priv.h) and reconciles on its own thread with a worker from
 * reconciler_worker_new (worker.h). provider_free frees them as usual.
 */

#include "compiler.h"

struct http_transport;
struct provider;

/* One discovery of the Cluster API version p reads (capi_api_discover), through a client
 * on t (NULL = libcurl; a test's fake transport otherwise). provider_start calls it, with
 * retries; a test calls it once before provider_new_informers. */
MUST_CHECK int provider_discover(struct provider *p, struct http_transport *t);
/* Creates p's informers (not started) for the discovered version (CM_EINVAL before
 * discovery). provider_start calls it too; call it at most once. */
MUST_CHECK int provider_new_informers(struct provider *p);
/* Creates p's MaasRemediation informer (not started); provider_start does it only when the
 * kind is served and listable. */
MUST_CHECK int provider_new_remediation_informer(struct provider *p);
