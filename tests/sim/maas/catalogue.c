/*
 * catalogue: maas-sim handlers for everything but machines: version (anonymous), users (whoami),
 * zones, resource pools (and the emulator-only pools/ alias, routed in http.c), tags (with
 * op=machines; an admin creates, updates (PUT: comment, definition) and deletes them and,
 * with op=update_nodes, puts them on machines and takes them off), domains, boot resources and DNS
 * resources (maas-api.md §6.2–6.9, §7.1–7.2, §7.8). sim.lock is held by the dispatcher.
 */
#include <arpa/inet.h>
#include <ctype.h>
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

/* MAAS's tag names: letters, digits, '-' and '_' (its name validator). */
static bool tag_name_ok(const char *name)
{
        if (!name || !*name || strlen(name) > 256)
                return false;
        for (const char *p = name; *p; p++)
                if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_')
                        return false;
        return true;
}

static bool admin_only(const struct sim_req *rq, struct sim_resp *rp)
{
        if (rq->user && strcmp(rq->user, "admin") == 0)
                return true;
        sim_reply_text(rp, 403, "You do not have permission to perform this action.");
        return false;
}

/* POST tags/ (admin): name, comment, definition, kernel_opts. A definition is kept, not
 * evaluated (maas-sim has no hardware XML). */
static void tag_create(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        const char *name = sim_params_get(&rq->form, "name");
        const char *comment = sim_params_get(&rq->form, "comment");
        ssize_t i;

        if (!admin_only(rq, rp))
                return;
        if (!name || !*name) {
                sim_reply_field_error(rp, "name", "This field is required.");
                return;
        }
        if (!tag_name_ok(name)) {
                sim_reply_field_error(rp, "name", "Invalid character in tag name.");
                return;
        }
        if (sim_find_tag(s, name) >= 0) {
                sim_reply_field_error(rp, "name", "Tag with this Name already exists.");
                return;
        }
        sim_add_tag(s, name, comment ? comment : "");
        i = sim_find_tag(s, name);
        sim_reply_json(rp, sim_tag_json(s, (size_t)i));
}

/* The tag the request's path names, or -1 after answering 404 as MAAS does. */
static ssize_t tag_of(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        ssize_t i = sim_find_tag(s, rq->arg);

        if (i < 0)
                sim_reply_text(rp, 404, "No Tag matches the given query.");
        return i;
}

/* POST tags/<name>/?op=update_nodes (admin): add=<sid> / remove=<sid>, repeated; unknown
 * system ids are skipped, as MAAS's filter skips them. */
static void tag_update_nodes(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        unsigned added = 0, removed = 0;
        cJSON *doc;

        if (!admin_only(rq, rp))
                return;
        if (tag_of(s, rq, rp) < 0)
                return;
        for (size_t i = 0; i < rq->form.n; i++) {
                bool add = strcmp(rq->form.keys[i], "add") == 0;
                struct sim_machine *m;

                if (!add && strcmp(rq->form.keys[i], "remove") != 0)
                        continue;
                m = sim_find_machine(s, rq->form.vals[i]);
                if (!m)
                        continue;
                if (add && !sim_strv_has(&m->tags, rq->arg)) {
                        sim_strv_add(&m->tags, rq->arg);
                        added++;
                } else if (!add && sim_strv_remove(&m->tags, rq->arg)) {
                        removed++;
                }
        }
        doc = cJSON_CreateObject();
        cJSON_AddNumberToObject(doc, "added", added);
        cJSON_AddNumberToObject(doc, "removed", removed);
        sim_reply_json(rp, doc);
}

/* PUT tags/<name>/ (admin): comment and definition replaced when sent (a partial update, as
 * MAAS's TagForm over the instance); a rename (name) is refused: capmaas never renames and
 * maas-sim does not model it. → 200 the tag. */
static void tag_update(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        const char *comment = sim_params_get(&rq->form, "comment");
        const char *definition = sim_params_get(&rq->form, "definition");
        const char *name = sim_params_get(&rq->form, "name");
        ssize_t i;

        if (!admin_only(rq, rp))
                return;
        i = tag_of(s, rq, rp);
        if (i < 0)
                return;
        if (name && strcmp(name, rq->arg) != 0) {
                sim_reply_field_error(rp, "name", "maas-sim does not model renaming a tag.");
                return;
        }
        if (comment) {
                free(s->tags[i].comment);
                s->tags[i].comment = xstrdup(comment);
        }
        if (definition) {
                free(s->tags[i].definition);
                s->tags[i].definition = xstrdup(definition);
        }
        sim_reply_json(rp, sim_tag_json(s, (size_t)i));
}

/* DELETE tags/<name>/ (admin): the tag goes, and with it from every machine. → 204. */
static void tag_delete(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        ssize_t i;

        if (!admin_only(rq, rp))
                return;
        i = tag_of(s, rq, rp);
        if (i < 0)
                return;
        for (size_t m = 0; m < s->n_machines; m++)
                (void)sim_strv_remove(&s->machines[m].tags, rq->arg);
        free(s->tags[i].name);
        free(s->tags[i].comment);
        free(s->tags[i].definition);
        free(s->tags[i].kernel_opts);
        memmove(&s->tags[i], &s->tags[i + 1], (s->n_tags - (size_t)i - 1) * sizeof(*s->tags));
        s->n_tags--;
        rp->status = 204;
}

static void tag_machines(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        cJSON *arr;

        if (tag_of(s, rq, rp) < 0)
                return;
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
const struct sim_op sim_ops_tags[] = { { "GET", NULL, tags_list },
                                       { "POST", NULL, tag_create },
                                       { NULL, NULL, NULL } };
const struct sim_op sim_ops_tag[] = { { "GET", NULL, tag_read },
                                      { "PUT", NULL, tag_update },
                                      { "DELETE", NULL, tag_delete },
                                      { "GET", "machines", tag_machines },
                                      { "POST", "update_nodes", tag_update_nodes },
                                      { NULL, NULL, NULL } };
const struct sim_op sim_ops_domains[] = { { "GET", NULL, domains_list }, { NULL, NULL, NULL } };
const struct sim_op sim_ops_domain[] = { { "GET", NULL, domain_read }, { NULL, NULL, NULL } };
const struct sim_op sim_ops_boots[] = { { "GET", NULL, boots_list }, { NULL, NULL, NULL } };
const struct sim_op sim_ops_boot[] = { { "GET", NULL, boot_read }, { NULL, NULL, NULL } };
