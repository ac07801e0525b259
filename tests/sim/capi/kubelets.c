/*
 * capi-sim kubelets: with --maas-sim URL, the Nodes' Ready follows what maas-sim says the
 * machines' kubelets report (GET URL/_sim/kubelets, every POLL_MS; tests/sim/maas/kubelet.c),
 * so a test can hang a machine's kubelet and see a power cycle bring its Node back. One
 * poller thread; a machine whose readiness changed gets its Machine enqueued, and the
 * Machine controller posts the Node's Ready (machine.c). Without the flag every kubelet is
 * taken as up. See capi.h.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "buf.h"
#include "capi.h"
#include "err.h"
#include "json.h"
#include "log.h"
#include "xalloc.h"

#define LOGGER        "capi-sim"
#define POLL_MS       250
#define ANSWER_MAX    (4u << 20)
#define GET_TIMEOUT_S 2

struct capi_kubelets {
        struct capi *s;
        char *url; /* .../_sim/kubelets */
        pthread_t thread;
        atomic_bool stop;
        pthread_mutex_t lock;
        cJSON *snap; /* the last answer; guarded by lock */
};

static size_t collect(char *p, size_t size, size_t n, void *ud)
{
        return buf_append(ud, p, size * n) == 0 ? size * n : 0;
}

/* The kubelets' document, or NULL when maas-sim did not answer it. */
static cJSON *fetch(const char *url)
{
        CURL *h = curl_easy_init();
        struct buf b;
        long code = 0;
        cJSON *doc = NULL;

        if (!h)
                return NULL;
        buf_init(&b, ANSWER_MAX);
        (void)curl_easy_setopt(h, CURLOPT_URL, url);
        (void)curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)GET_TIMEOUT_S);
        (void)curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        (void)curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
        (void)curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        if (curl_easy_perform(h) == CURLE_OK &&
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK && code == 200)
                doc = cJSON_ParseWithLength(b.data, b.len);
        curl_easy_cleanup(h);
        buf_release(&b);
        if (!cJSON_IsObject(doc)) {
                cJSON_Delete(doc);
                doc = NULL;
        }
        return doc;
}

static bool ready_in(const cJSON *doc, const char *sid)
{
        return cJSON_IsTrue(json_find(doc, sid, "ready", NULL));
}

struct changed {
        struct capi *s;
        const cJSON *old, *cur;
};

/* informer_each over the MaasMachines: one whose machine's readiness changed → its Machine. */
static void enqueue_changed(void *arg, struct kube_object *obj)
{
        const struct changed *c = arg;
        const cJSON *mm = kube_object_json(obj);
        const char *sid = json_find_str(mm, "spec", "systemID", NULL);
        const char *m = capi_owner_name(mm, "Machine");

        if (sid && m && ready_in(c->old, sid) != ready_in(c->cur, sid))
                controller_enqueue(c->s->machine_ctl, kube_object_namespace(obj), m);
}

static void *poll_loop(void *arg)
{
        struct capi_kubelets *k = arg;
        const struct timespec nap = { 0, POLL_MS * 1000000L };

        while (!atomic_load(&k->stop)) {
                cJSON *doc = fetch(k->url);
                cJSON *old;

                if (doc) {
                        pthread_mutex_lock(&k->lock);
                        old = k->snap;
                        k->snap = doc;
                        pthread_mutex_unlock(&k->lock);
                        if (!old || !cJSON_Compare(old, doc, true))
                                (void)informer_each(k->s->maasmachines, NULL, NULL, enqueue_changed,
                                                    &(struct changed){ k->s, old, doc });
                        cJSON_Delete(old);
                }
                (void)nanosleep(&nap, NULL);
        }
        return NULL;
}

int capi_kubelets_start(struct capi *s, const char *maas_sim_url)
{
        struct capi_kubelets *k;
        size_t n = strlen(maas_sim_url);

        k = xcalloc(1, sizeof(*k));
        k->s = s;
        k->url = xasprintf("%.*s/_sim/kubelets", (int)(n && maas_sim_url[n - 1] == '/' ? n - 1 : n),
                           maas_sim_url);
        pthread_mutex_init(&k->lock, NULL);
        if (pthread_create(&k->thread, NULL, poll_loop, k) != 0) {
                pthread_mutex_destroy(&k->lock);
                free(k->url);
                free(k);
                return CM_ENOMEM;
        }
        s->kubelets = k;
        log_info(LOGGER, "Nodes follow maas-sim's kubelets", "url=%s", k->url);
        return 0;
}

void capi_kubelets_stop(struct capi *s)
{
        struct capi_kubelets *k = s->kubelets;

        if (!k)
                return;
        atomic_store(&k->stop, true);
        (void)pthread_join(k->thread, NULL);
        cJSON_Delete(k->snap);
        pthread_mutex_destroy(&k->lock);
        free(k->url);
        free(k);
        s->kubelets = NULL;
}

bool capi_kubelet_up(struct capi *s, const char *system_id)
{
        struct capi_kubelets *k = s->kubelets;
        const cJSON *e;
        bool up = true;

        if (!k || !system_id)
                return true;
        pthread_mutex_lock(&k->lock);
        e = k->snap ? cJSON_GetObjectItemCaseSensitive(k->snap, system_id) : NULL;
        if (e) /* machines maas-sim does not list (not Deployed) are left to the MaasMachine */
                up = cJSON_IsTrue(json_find(e, "ready", NULL));
        pthread_mutex_unlock(&k->lock);
        return up;
}
