/*
 * kube_discovery: the served versions of an API group (kube_discovery.h).
 */
#include "kube_discovery.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "http_transport.h"
#include "json.h"
#include "kube_priv.h"
#include "xalloc.h"

#define DISCOVERY_MAX_BODY ((size_t)1 << 20)
#define DISCOVERY_TIMEOUT  10000u

static int collect(void *arg, const char *data, size_t n)
{
        return buf_append(arg, data, n);
}

static int decode(const cJSON *doc, struct kube_group_versions *g)
{
        const cJSON *v;
        const char *pref = json_find_str(doc, "preferredVersion", "version", NULL);

        cJSON_ArrayForEach (v, json_find(doc, "versions", NULL)) {
                const char *name = json_find_str(v, "version", NULL);

                if (name && *name && g->n < KUBE_GROUP_VERSIONS_MAX)
                        g->versions[g->n++] = xstrdup(name);
        }
        if (g->n == 0)
                return CM_EPARSE;
        g->preferred = pref && *pref ? xstrdup(pref) : NULL;
        return 0;
}

int kube_discover_group(struct kube_client *c,
                        const char *group,
                        struct kube_group_versions *ret,
                        struct kube_error *e)
{
        struct buf body;
        char path[256];
        char *url;
        cJSON *doc = NULL;
        int err;

        *ret = (struct kube_group_versions){ 0 };
        if (!group || !*group ||
            (size_t)snprintf(path, sizeof(path), "/apis/%s", group) >= sizeof(path))
                return CM_EINVAL;
        kube_error_release(e);
        url = kube_server_url(c, path);
        buf_init(&body, DISCOVERY_MAX_BODY);
        err = kube_stream_get(c, url,
                              &(struct transport_stream){ .on_chunk = collect, .arg = &body },
                              DISCOVERY_TIMEOUT, e);
        free(url);
        if (err == 0)
                err = json_parse(body.data ? body.data : "", body.len, &doc);
        if (err == 0)
                err = decode(doc, ret);
        if (err)
                kube_group_versions_release(ret);
        cJSON_Delete(doc);
        buf_release(&body);
        return err;
}

bool kube_group_serves(const struct kube_group_versions *g, const char *version)
{
        for (size_t i = 0; g && version && i < g->n; i++)
                if (strcmp(g->versions[i], version) == 0)
                        return true;
        return false;
}

const char *kube_group_pick(const struct kube_group_versions *g, const char *const *want, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (kube_group_serves(g, want[i]))
                        return want[i];
        return NULL;
}

void kube_group_versions_release(struct kube_group_versions *g)
{
        if (!g)
                return;
        for (size_t i = 0; i < g->n; i++)
                free(g->versions[i]);
        free(g->preferred);
        *g = (struct kube_group_versions){ 0 };
}
