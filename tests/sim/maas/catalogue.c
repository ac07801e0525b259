/*
 * catalogue: maas-sim handlers for everything but machines: version (anonymous), users (whoami),
 * zones, resource pools (and the emulator-only pools/ alias, routed in http.c), tags (with
 * op=machines), domains, boot resources and DNS resources (maas-api.md §6.2–6.9, §7.1–7.2,
 * §7.8). sim.lock is held by the dispatcher.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "err.h"
#include "sim.h"
#include "xalloc.h"

/* --- version, users ------------------------------------------------------------------------ */

static void version_read(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        static const char *const caps[] = {
                "networks-management",       "static-ipaddresses",
                "ipv6-deployment-ubuntu",    "devices-management",
                "storage-deployment-ubuntu", "network-deployment-ubuntu",
                "bridging-interface-ubuntu", "bridging-automatic-ubuntu",
                "authenticate-api"
        };
        cJSON *doc = cJSON_CreateObject();
        cJSON *arr = cJSON_AddArrayToObject(doc, "capabilities");

        (void)s;
        (void)rq;
        for (size_t i = 0; i < ARRAY_SIZE(caps); i++)
                cJSON_AddItemToArray(arr, cJSON_CreateString(caps[i]));
        cJSON_AddStringToObject(doc, "version", "3.5.4");
        cJSON_AddStringToObject(doc, "subversion", "");
        sim_reply_json(rp, doc);
}

static void users_whoami(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        cJSON *doc = cJSON_CreateObject();
        char *uri = xasprintf(SIM_API_PREFIX "users/%s/", rq->user);
        char *email = xasprintf("%s@maas-sim.invalid", rq->user);

        (void)s;
        cJSON_AddStringToObject(doc, "username", rq->user);
        cJSON_AddStringToObject(doc, "email", email);
        cJSON_AddBoolToObject(doc, "is_local", true);
        cJSON_AddBoolToObject(doc, "is_superuser", strcmp(rq->user, "admin") == 0);
        cJSON_AddStringToObject(doc, "resource_uri", uri);
        free(email);
        free(uri);
        sim_reply_json(rp, doc);
}

/* --- zones, pools, domains, tags ------------------------------------------------------------- */

typedef cJSON *item_json_fn(const struct sim *s, size_t i);

static void reply_list(struct sim *s, size_t n, item_json_fn *fn, struct sim_resp *rp)
{
        cJSON *arr = cJSON_CreateArray();

        for (size_t i = 0; i < n; i++)
                cJSON_AddItemToArray(arr, fn(s, i));
        sim_reply_json(rp, arr);
}

static void reply_item(
        struct sim *s, ssize_t i, item_json_fn *fn, const char *what, struct sim_resp *rp)
{
        if (i < 0)
                sim_reply_text(rp, 404, "No %s matches the given query.", what);
        else
                sim_reply_json(rp, fn(s, (size_t)i));
}

static void zones_list(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        (void)rq;
        reply_list(s, s->n_zones, sim_zone_json, rp);
}

static void zone_read(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        reply_item(s, sim_find_zone(s, rq->arg), sim_zone_json, "Zone", rp);
}

static void pools_list(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        (void)rq;
        reply_list(s, s->n_pools, sim_pool_json, rp);
}

static void pool_read(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        reply_item(s, sim_find_pool(s, rq->arg), sim_pool_json, "ResourcePool", rp);
}

static void domains_list(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        (void)rq;
        reply_list(s, s->n_domains, sim_domain_json, rp);
}

static void domain_read(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        reply_item(s, sim_find_domain(s, rq->arg), sim_domain_json, "Domain", rp);
}

static void tags_list(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        (void)rq;
        reply_list(s, s->n_tags, sim_tag_json, rp);
}

static void tag_read(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        reply_item(s, sim_find_tag(s, rq->arg), sim_tag_json, "Tag", rp);
}

static void tag_machines(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        cJSON *arr;

        if (sim_find_tag(s, rq->arg) < 0) {
                sim_reply_text(rp, 404, "No Tag matches the given query.");
                return;
        }
        arr = cJSON_CreateArray();
        for (size_t i = 0; i < s->n_machines; i++) {
                sim_machine_tick(s, &s->machines[i]);
                if (sim_strv_has(&s->machines[i].tags, rq->arg))
                        cJSON_AddItemToArray(arr, sim_machine_json(s, &s->machines[i]));
        }
        sim_reply_json(rp, arr);
}

/* --- boot resources ----------------------------------------------------------------------------
 */

static cJSON *boot_json(const struct sim *s, size_t i)
{
        const struct sim_boot *b = &s->boots[i];
        cJSON *o = cJSON_CreateObject();
        char *uri = xasprintf(SIM_API_PREFIX "boot-resources/%d/", b->id);

        cJSON_AddNumberToObject(o, "id", b->id);
        cJSON_AddStringToObject(o, "type", b->type);
        cJSON_AddStringToObject(o, "name", b->name);
        cJSON_AddStringToObject(o, "architecture", b->architecture);
        cJSON_AddStringToObject(o, "subarches", b->subarches);
        cJSON_AddStringToObject(o, "title", b->title);
        if (b->base_image)
                cJSON_AddStringToObject(o, "base_image", b->base_image);
        cJSON_AddNullToObject(o, "last_deployed");
        cJSON_AddStringToObject(o, "resource_uri", uri);
        free(uri);
        return o;
}

static void boots_list(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        const char *type = sim_params_get(&rq->query, "type");
        cJSON *arr;

        if (type && strcmp(type, "all") != 0 && strcmp(type, "synced") != 0 &&
            strcmp(type, "uploaded") != 0) {
                sim_reply_text(rp, 400,
                               "'%s' is not a valid boot resource type. Available types: "
                               "['synced', 'uploaded']",
                               type);
                return;
        }
        arr = cJSON_CreateArray();
        for (size_t i = 0; i < s->n_boots; i++)
                if (!type || strcmp(type, "all") == 0 || strcasecmp(s->boots[i].type, type) == 0)
                        cJSON_AddItemToArray(arr, boot_json(s, i));
        sim_reply_json(rp, arr);
}

static void boot_read(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        ssize_t found = -1;
        cJSON *doc;

        for (size_t i = 0; i < s->n_boots; i++) {
                char id[16];

                snprintf(id, sizeof(id), "%d", s->boots[i].id);
                if (strcmp(id, rq->arg) == 0)
                        found = (ssize_t)i;
        }
        if (found < 0) {
                sim_reply_text(rp, 404, "No BootResource matches the given query.");
                return;
        }
        doc = boot_json(s, (size_t)found);
        cJSON_AddArrayToObject(doc, "sets");
        sim_reply_json(rp, doc);
}

const struct sim_op sim_ops_version[] = { { "GET", NULL, version_read }, { NULL, NULL, NULL } };
const struct sim_op sim_ops_users[] = { { "GET", "whoami", users_whoami }, { NULL, NULL, NULL } };
const struct sim_op sim_ops_zones[] = { { "GET", NULL, zones_list }, { NULL, NULL, NULL } };
const struct sim_op sim_ops_zone[] = { { "GET", NULL, zone_read }, { NULL, NULL, NULL } };
const struct sim_op sim_ops_pools[] = { { "GET", NULL, pools_list }, { NULL, NULL, NULL } };
const struct sim_op sim_ops_pool[] = { { "GET", NULL, pool_read }, { NULL, NULL, NULL } };
const struct sim_op sim_ops_tags[] = { { "GET", NULL, tags_list }, { NULL, NULL, NULL } };
const struct sim_op sim_ops_tag[] = { { "GET", NULL, tag_read },
                                      { "GET", "machines", tag_machines },
                                      { NULL, NULL, NULL } };
const struct sim_op sim_ops_domains[] = { { "GET", NULL, domains_list }, { NULL, NULL, NULL } };
const struct sim_op sim_ops_domain[] = { { "GET", NULL, domain_read }, { NULL, NULL, NULL } };
const struct sim_op sim_ops_boots[] = { { "GET", NULL, boots_list }, { NULL, NULL, NULL } };
const struct sim_op sim_ops_boot[] = { { "GET", NULL, boot_read }, { NULL, NULL, NULL } };
