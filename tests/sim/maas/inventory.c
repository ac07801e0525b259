/*
 * maas-sim inventory: loads the YAML (or JSON: YAML is a superset) inventory into the state.
 * The YAML document is first converted into a cJSON tree, so the file loader and the admin
 * endpoint (POST /_sim/machines, /_sim/pools) share the same builders. Also holds the lookup
 * helpers and the time-driven state transitions. Callers hold sim.lock except during start-up.
 *
 * Format (all lists optional; see inventory-sample.yaml):
 *   zones: [{name, description}]        pools: [{name, description}]
 *   domains: [{name, ttl, authoritative}] tags: [{name, comment}]
 *   boot_resources: [{name, type: Synced|Uploaded, architecture, subarches, title, base_image}]
 *   machines: [{system_id (required), hostname, description, architecture, cpu_count,
 *               cpu_speed, memory (MiB), storage (MB), swap_size, zone, pool, domain,
 *               tags: [..], power_type, power_state, status (name or code; default Ready),
 *               owner, interfaces: [{name, mac, ip, cidr}]}]
 *   subnets: [{cidr (IPv4, required), name, gateway_ip, dns_servers: [..], vid,
 *             dynamic_range: {start, end}}]
 *   vm_hosts: [{name, zone, pool, tags, cores, memory, over-commit ratios, storage_pools}]
 *             (MAAS's VM hosts; pods.c describes the keys)
 * An interface's cidr names its subnet (created without a gateway when not listed) and its
 * first link, AUTO; its ip is the address that link claims on deploy when free.
 * Zone "default", pool "default" (id 0) and domain "maas" (id 0) always exist; tags named by
 * machines are created on the fly. POST /_sim/machines and /_sim/pools take the same objects
 * as JSON.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <yaml.h>

#include "err.h"
#include "sim.h"
#include "xalloc.h"

static const char *const status_names[ST_COUNT] = {
        "New",
        "Commissioning",
        "Failed commissioning",
        "Missing",
        "Ready",
        "Reserved",
        "Deployed",
        "Retired",
        "Broken",
        "Deploying",
        "Allocated",
        "Failed deployment",
        "Releasing",
        "Releasing failed",
        "Disk erasing",
        "Failed disk erasing",
        "Rescue mode",
        "Entering rescue mode",
        "Failed to enter rescue mode",
        "Exiting rescue mode",
        "Failed to exit rescue mode",
        "Testing",
        "Failed testing",
};

const char *sim_status_name(enum sim_status st)
{
        return (unsigned)st < ST_COUNT ? status_names[st] : "Unknown";
}

double sim_now(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

bool sim_strv_has(const struct sim_strv *v, const char *s)
{
        for (size_t i = 0; i < v->n; i++)
                if (strcmp(v->v[i], s) == 0)
                        return true;
        return false;
}

void sim_strv_add(struct sim_strv *v, const char *s)
{
        v->v = xrealloc(v->v, (v->n + 1) * sizeof(*v->v));
        v->v[v->n++] = xstrdup(s);
}

bool sim_strv_remove(struct sim_strv *v, const char *s)
{
        bool found = false;

        for (size_t i = v->n; i-- > 0;) {
                if (strcmp(v->v[i], s) != 0)
                        continue;
                free(v->v[i]);
                v->v[i] = v->v[--v->n];
                found = true;
        }
        return found;
}

void sim_strv_release(struct sim_strv *v)
{
        for (size_t i = 0; i < v->n; i++)
                free(v->v[i]);
        free(v->v);
        *v = (struct sim_strv){ 0 };
}

/* --- YAML -> cJSON --------------------------------------------------------------------- */

static cJSON *yaml_scalar(const yaml_node_t *n)
{
        const char *s = (const char *)n->data.scalar.value;
        char *end = NULL;
        double d;

        if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
                return cJSON_CreateString(s);
        if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0)
                return cJSON_CreateBool(s[0] == 't');
        if (strcmp(s, "null") == 0 || strcmp(s, "~") == 0 || s[0] == '\0')
                return cJSON_CreateNull();
        d = strtod(s, &end);
        if (end != s && *end == '\0' && isfinite(d))
                return cJSON_CreateNumber(d);
        return cJSON_CreateString(s);
}

static cJSON *yaml_to_json(yaml_document_t *doc, const yaml_node_t *n, int depth)
{
        cJSON *o;

        if (!n || depth > 32)
                return NULL;
        if (n->type == YAML_SCALAR_NODE)
                return yaml_scalar(n);
        if (n->type == YAML_SEQUENCE_NODE) {
                o = cJSON_CreateArray();
                for (yaml_node_item_t *it = n->data.sequence.items.start;
                     it < n->data.sequence.items.top; it++)
                        cJSON_AddItemToArray(
                                o, yaml_to_json(doc, yaml_document_get_node(doc, *it), depth + 1));
                return o;
        }
        o = cJSON_CreateObject();
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
             p++) {
                yaml_node_t *k = yaml_document_get_node(doc, p->key);
                cJSON *v = yaml_to_json(doc, yaml_document_get_node(doc, p->value), depth + 1);

                if (!k || k->type != YAML_SCALAR_NODE || !v) {
                        cJSON_Delete(v);
                        continue;
                }
                cJSON_AddItemToObject(o, (const char *)k->data.scalar.value, v);
        }
        return o;
}

static int load_yaml(const char *file, cJSON **ret, char **ret_err)
{
        FILE *f = fopen(file, "rb");
        yaml_parser_t parser;
        yaml_document_t doc;
        cJSON *root = NULL;

        if (!f) {
                *ret_err = xasprintf("cannot open %s", file);
                return CM_EIO;
        }
        yaml_parser_initialize(&parser);
        yaml_parser_set_input_file(&parser, f);
        if (!yaml_parser_load(&parser, &doc)) {
                *ret_err = xasprintf("%s:%zu:%zu: %s", file, parser.problem_mark.line + 1,
                                     parser.problem_mark.column + 1,
                                     parser.problem ? parser.problem : "parse error");
                yaml_parser_delete(&parser);
                fclose(f);
                return CM_EPARSE;
        }
        root = yaml_to_json(&doc, yaml_document_get_root_node(&doc), 0);
        yaml_document_delete(&doc);
        yaml_parser_delete(&parser);
        fclose(f);
        if (!cJSON_IsObject(root)) {
                cJSON_Delete(root);
                *ret_err = xasprintf("%s: the inventory must be a mapping", file);
                return CM_EPARSE;
        }
        *ret = root;
        return 0;
}

/* --- typed getters on the inventory tree ------------------------------------------------- */

static const char *jstr(const cJSON *o, const char *k, const char *dflt)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

        return cJSON_IsString(v) ? v->valuestring : dflt;
}

static char *jdup(const cJSON *o, const char *k, const char *dflt)
{
        const char *s = jstr(o, k, dflt);

        return s ? xstrdup(s) : NULL;
}

static double jnum(const cJSON *o, const char *k, double dflt)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

        if (cJSON_IsNumber(v))
                return v->valuedouble;
        if (cJSON_IsString(v))
                return strtod(v->valuestring, NULL);
        return dflt;
}

/* A scalar that YAML may have typed as a number (hostnames like 1234) as a string. */
static char *jscalar(const cJSON *o, const char *k)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

        if (cJSON_IsString(v))
                return xstrdup(v->valuestring);
        if (cJSON_IsNumber(v))
                return xasprintf("%.17g", v->valuedouble);
        return NULL;
}

/* --- lookups ---------------------------------------------------------------------------- */

ssize_t sim_find_zone(const struct sim *s, const char *name)
{
        for (size_t i = 0; i < s->n_zones; i++)
                if (strcmp(s->zones[i].name, name) == 0)
                        return (ssize_t)i;
        return -1;
}

static bool id_matches(int id, const char *s)
{
        char buf[16];

        snprintf(buf, sizeof(buf), "%d", id);
        return strcmp(buf, s) == 0;
}

ssize_t sim_find_pool(const struct sim *s, const char *id_or_name)
{
        for (size_t i = 0; i < s->n_pools; i++)
                if (strcmp(s->pools[i].name, id_or_name) == 0 ||
                    id_matches(s->pools[i].id, id_or_name))
                        return (ssize_t)i;
        return -1;
}

ssize_t sim_find_tag(const struct sim *s, const char *name)
{
        for (size_t i = 0; i < s->n_tags; i++)
                if (strcmp(s->tags[i].name, name) == 0)
                        return (ssize_t)i;
        return -1;
}

ssize_t sim_find_domain(const struct sim *s, const char *id_or_name)
{
        for (size_t i = 0; i < s->n_domains; i++)
                if (strcmp(s->domains[i].name, id_or_name) == 0 ||
                    id_matches(s->domains[i].id, id_or_name))
                        return (ssize_t)i;
        return -1;
}

static int by_id_cmp(const void *a, const void *b, void *machines)
{
        const struct sim_machine *m = machines;

        return strcmp(m[*(const size_t *)a].system_id, m[*(const size_t *)b].system_id);
}

static void by_id_rebuild(struct sim *s)
{
        s->by_id = xrealloc(s->by_id, (s->n_machines ? s->n_machines : 1) * sizeof(*s->by_id));
        for (size_t i = 0; i < s->n_machines; i++)
                s->by_id[i] = i;
        qsort_r(s->by_id, s->n_machines, sizeof(*s->by_id), by_id_cmp, s->machines);
        s->by_id_stale = false;
}

/* Adds machine i (just appended) to a fresh index at its place: loading an inventory of
 * 12 000 machines checks each id against the index, which must not be rebuilt per machine. */
static void by_id_insert(struct sim *s, size_t i)
{
        size_t lo = 0, hi = i;

        if (s->by_id_stale || !s->by_id) {
                s->by_id_stale = true; /* rebuilt on the next lookup */
                return;
        }
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (strcmp(s->machines[s->by_id[mid]].system_id, s->machines[i].system_id) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        s->by_id = xrealloc(s->by_id, (i + 1) * sizeof(*s->by_id));
        memmove(&s->by_id[lo + 1], &s->by_id[lo], (i - lo) * sizeof(*s->by_id));
        s->by_id[lo] = i;
}

/* O(log n): fleets of 10 000 machines look machines up by id on every request. */
struct sim_machine *sim_find_machine(struct sim *s, const char *system_id)
{
        size_t lo = 0, hi;

        if (s->by_id_stale || !s->by_id)
                by_id_rebuild(s);
        hi = s->n_machines;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int d = strcmp(s->machines[s->by_id[mid]].system_id, system_id);

                if (d == 0)
                        return &s->machines[s->by_id[mid]];
                if (d < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return NULL;
}

/* --- builders ---------------------------------------------------------------------------- */

static void add_zone(struct sim *s, const char *name, const char *desc)
{
        if (sim_find_zone(s, name) >= 0)
                return;
        s->zones = xrealloc(s->zones, (s->n_zones + 1) * sizeof(*s->zones));
        s->zones[s->n_zones] = (struct sim_zone){ .id = (int)s->n_zones + 1,
                                                  .name = xstrdup(name),
                                                  .description = xstrdup(desc) };
        s->n_zones++;
}

static void add_pool(struct sim *s, const char *name, const char *desc)
{
        s->pools = xrealloc(s->pools, (s->n_pools + 1) * sizeof(*s->pools));
        s->pools[s->n_pools] = (struct sim_pool){ .id = (int)s->n_pools,
                                                  .name = xstrdup(name),
                                                  .description = xstrdup(desc) };
        s->n_pools++;
}

int sim_add_pool_json(struct sim *s, const cJSON *o, char **ret_err)
{
        const char *name = jstr(o, "name", NULL);

        if (!name || !*name) {
                *ret_err = xstrdup("pool: name is required");
                return CM_EINVAL;
        }
        if (sim_find_pool(s, name) >= 0) {
                *ret_err = xasprintf("pool %s already exists", name);
                return CM_EEXIST;
        }
        add_pool(s, name, jstr(o, "description", ""));
        return 0;
}

static void add_domain(struct sim *s, const char *name, int ttl, bool authoritative)
{
        if (sim_find_domain(s, name) >= 0)
                return;
        s->domains = xrealloc(s->domains, (s->n_domains + 1) * sizeof(*s->domains));
        s->domains[s->n_domains] = (struct sim_domain){ .id = (int)s->n_domains,
                                                        .name = xstrdup(name),
                                                        .ttl = ttl,
                                                        .authoritative = authoritative };
        s->n_domains++;
}

void sim_add_tag(struct sim *s, const char *name, const char *comment)
{
        if (sim_find_tag(s, name) >= 0)
                return;
        s->tags = xrealloc(s->tags, (s->n_tags + 1) * sizeof(*s->tags));
        s->tags[s->n_tags] = (struct sim_tag){ .name = xstrdup(name),
                                               .comment = xstrdup(comment),
                                               .definition = xstrdup(""),
                                               .kernel_opts = xstrdup("") };
        s->n_tags++;
}

static void add_boot(struct sim *s, const cJSON *o)
{
        const char *name = jstr(o, "name", "");
        const char *type = jstr(o, "type", strchr(name, '/') ? "Synced" : "Uploaded");
        bool up = strcmp(type, "Uploaded") == 0;
        const char *rel = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;

        s->boots = xrealloc(s->boots, (s->n_boots + 1) * sizeof(*s->boots));
        s->boots[s->n_boots] = (struct sim_boot){
                .id = (int)s->n_boots + 1,
                .type = xstrdup(type),
                .name = xstrdup(name),
                .architecture = jdup(o, "architecture", up ? "amd64/generic" : "amd64/ga-22.04"),
                .subarches = jdup(o, "subarches", up ? "generic" : "generic,ga-22.04"),
                .title = jdup(o, "title", rel),
                .base_image = up ? jdup(o, "base_image", "ubuntu/jammy") : NULL,
        };
        s->n_boots++;
}

static int parse_status(const cJSON *o, enum sim_status *ret)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "status");

        if (!v) {
                *ret = ST_READY;
                return 0;
        }
        if (cJSON_IsNumber(v) && v->valueint >= 0 && v->valueint < ST_COUNT) {
                *ret = (enum sim_status)v->valueint;
                return 0;
        }
        for (int i = 0; cJSON_IsString(v) && i < ST_COUNT; i++)
                if (strcasecmp(status_names[i], v->valuestring) == 0) {
                        *ret = (enum sim_status)i;
                        return 0;
                }
        return CM_EINVAL;
}

static void machine_ifaces(struct sim *s, struct sim_machine *m, const cJSON *o, size_t idx)
{
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "interfaces");
        size_t n = (size_t)cJSON_GetArraySize(arr);

        if (!cJSON_IsArray(arr) || n == 0) {
                m->ifaces = xcalloc(1, sizeof(*m->ifaces));
                m->ifaces[0] = (struct sim_iface){
                        .id = (int)(idx * 10 + 1),
                        .name = xstrdup("eth0"),
                        .mac = xasprintf("52:54:00:%02zx:%02zx:%02zx", (idx >> 16) & 0xff,
                                         (idx >> 8) & 0xff, idx & 0xff),
                        .ip = xasprintf("10.%zu.%zu.%zu", 10 + (idx >> 16), (idx >> 8) & 0xff,
                                        (idx & 0xff) + 0),
                        .cidr = xasprintf("10.%zu.0.0/16", 10 + (idx >> 16)),
                };
                m->n_ifaces = 1;
                sim_iface_init_links(s, &m->ifaces[0]);
                return;
        }
        m->ifaces = xcalloc(n, sizeof(*m->ifaces));
        for (const cJSON *e = arr->child; e; e = e->next, m->n_ifaces++)
                m->ifaces[m->n_ifaces] = (struct sim_iface){
                        .id = (int)(idx * 10 + m->n_ifaces + 1),
                        .name = jdup(e, "name", "eth0"),
                        .mac = jdup(e, "mac", "52:54:00:00:00:00"),
                        .ip = jdup(e, "ip", NULL),
                        .cidr = jdup(e, "cidr", NULL),
                };
        for (size_t i = 0; i < m->n_ifaces; i++)
                sim_iface_init_links(s, &m->ifaces[i]);
}

static int machine_placement(struct sim *s, struct sim_machine *m, const cJSON *o, char **ret_err)
{
        const char *zone = jstr(o, "zone", "default");
        const char *pool = jstr(o, "pool", "default");
        const char *domain = jstr(o, "domain", s->domains[0].name);
        const cJSON *tags = cJSON_GetObjectItemCaseSensitive(o, "tags");
        ssize_t zi = sim_find_zone(s, zone), pi = sim_find_pool(s, pool),
                di = sim_find_domain(s, domain);

        if (zi < 0 || pi < 0 || di < 0) {
                *ret_err = xasprintf("machine %s: unknown zone, pool or domain", m->system_id);
                return CM_EINVAL;
        }
        m->zone = (size_t)zi;
        m->pool = (size_t)pi;
        m->domain = (size_t)di;
        for (const cJSON *t = cJSON_IsArray(tags) ? tags->child : NULL; t; t = t->next) {
                if (!cJSON_IsString(t))
                        continue;
                sim_add_tag(s, t->valuestring, "");
                sim_strv_add(&m->tags, t->valuestring);
        }
        return 0;
}

static void machine_release_fields(struct sim_machine *m)
{
        free(m->disk_marker);
        free(m->disk_text);
        free(m->hw_text);
        free(m->storage_text);
        free(m->system_id);
        free(m->hostname);
        free(m->description);
        free(m->architecture);
        free(m->status_message);
        free(m->osystem);
        free(m->distro_series);
        free(m->hwe_kernel);
        free(m->storage_layout);
        free(m->user_data);
        free(m->agent_name);
        free(m->comment);
        free(m->owner);
        cJSON_Delete(m->owner_data);
        free(m->power_type);
        free(m->power_state);
        sim_strv_release(&m->tags);
        for (size_t i = 0; i < m->n_ifaces; i++) {
                free(m->ifaces[i].name);
                free(m->ifaces[i].mac);
                free(m->ifaces[i].ip);
                free(m->ifaces[i].cidr);
                sim_iface_release_links(&m->ifaces[i]);
        }
        free(m->ifaces);
}

static void machine_basics(struct sim_machine *m, const cJSON *o, char *sid, size_t idx)
{
        char *host = jscalar(o, "hostname");

        m->order = idx;
        m->system_id = sid;
        m->hostname = host ? host : xasprintf("node-%s", sid);
        m->description = jdup(o, "description", "");
        m->architecture = jdup(o, "architecture", "amd64/generic");
        m->cpu_count = (int)jnum(o, "cpu_count", 4);
        m->cpu_speed = (int)jnum(o, "cpu_speed", 2400);
        m->memory = (int64_t)jnum(o, "memory", 8192);
        m->storage = jnum(o, "storage", 256060.514);
        m->swap_size = (int64_t)jnum(o, "swap_size", -1);
        m->osystem = xstrdup("");
        m->distro_series = xstrdup("");
        m->power_type = jdup(o, "power_type", "ipmi");
        m->power_state = jdup(o, "power_state", "off");
        m->owner = jdup(o, "owner", NULL);
        m->owner_data = cJSON_CreateObject();
}

int sim_add_machine_json(struct sim *s, const cJSON *o, char **ret_err)
{
        char *sid = jscalar(o, "system_id");
        struct sim_machine m = { 0 };
        enum sim_status st;

        if (!cJSON_IsObject(o) || !sid || !*sid || sim_find_machine(s, sid)) {
                *ret_err = xasprintf("machine: missing or duplicate system_id %s", sid ? sid : "");
                free(sid);
                return CM_EINVAL;
        }
        /* ids stay unique after a machine was removed (sim_remove_machine) */
        machine_basics(&m, o, sid, s->n_machines ? s->machines[s->n_machines - 1].order + 1 : 0);
        if (parse_status(o, &st) < 0 || machine_placement(s, &m, o, ret_err) < 0) {
                if (!*ret_err)
                        *ret_err = xasprintf("machine %s: bad status", sid);
                machine_release_fields(&m);
                return CM_EINVAL;
        }
        m.status = st;
        machine_ifaces(s, &m, o, m.order + 1);
        if (st == ST_DEPLOYING || st == ST_DEPLOYED || st == ST_FAILED_DEPLOYMENT)
                sim_machine_claim_auto(s, &m); /* deployed before the sim started */
        s->machines = xrealloc(s->machines, (s->n_machines + 1) * sizeof(*s->machines));
        s->machines[s->n_machines++] = m;
        by_id_insert(s, s->n_machines - 1);
        s->by_cost_stale = true;
        return 0;
}

void sim_remove_machine(struct sim *s, struct sim_machine *m)
{
        size_t i = (size_t)(m - s->machines);

        machine_release_fields(m);
        memmove(&s->machines[i], &s->machines[i + 1],
                (s->n_machines - i - 1) * sizeof(*s->machines));
        s->n_machines--;
        s->by_id_stale = true;
        s->by_cost_stale = true;
}

static void add_defaults(struct sim *s)
{
        add_zone(s, "default", "");
        add_pool(s, "default", "Default pool");
        add_domain(s, "maas", -1, true);
}

static void load_simple_lists(struct sim *s, const cJSON *root)
{
        const cJSON *e;

        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(root, "zones"))
                add_zone(s, jstr(e, "name", "zone"), jstr(e, "description", ""));
        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(root, "pools"))
                if (sim_find_pool(s, jstr(e, "name", "")) < 0)
                        add_pool(s, jstr(e, "name", "pool"), jstr(e, "description", ""));
        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(root, "domains"))
                add_domain(s, jstr(e, "name", "maas"), (int)jnum(e, "ttl", -1),
                           !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(e, "authoritative")));
        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(root, "tags"))
                sim_add_tag(s, jstr(e, "name", "tag"), jstr(e, "comment", ""));
        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(root, "boot_resources"))
                add_boot(s, e);
}

int sim_load_inventory(struct sim *s, const char *file, char **ret_err)
{
        cJSON *root = NULL;
        const cJSON *e;
        int r;

        add_defaults(s);
        if (!file)
                return 0;
        r = load_yaml(file, &root, ret_err);
        if (r < 0)
                return r;
        load_simple_lists(s, root);
        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(root, "subnets")) {
                r = sim_add_subnet_json(s, e, ret_err);
                if (r < 0)
                        goto out;
        }
        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(root, "machines")) {
                r = sim_add_machine_json(s, e, ret_err);
                if (r < 0)
                        goto out;
        }
        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(root, "vm_hosts")) {
                r = sim_add_pod_json(s, e, ret_err);
                if (r < 0)
                        break;
        }
out:
        cJSON_Delete(root);
        return r;
}

/* --- transitions --------------------------------------------------------------------------- */

void sim_machine_finish_release(struct sim_machine *m)
{
        if (m->status == ST_DISK_ERASING) { /* the data goes with the erase; tags stay */
                free(m->disk_marker);
                m->disk_marker = NULL;
                m->erasures++;
                m->erase_mode = NULL;
        }
        m->status = ST_READY;
        m->kubelet = SIM_KUBELET_UP; /* the next deploy installs a fresh OS */
        free(m->owner);
        m->owner = NULL;
        free(m->agent_name);
        m->agent_name = NULL;
        free(m->user_data);
        m->user_data = NULL;
        free(m->hwe_kernel);
        m->hwe_kernel = NULL;
        free(m->osystem);
        m->osystem = xstrdup("");
        free(m->distro_series);
        m->distro_series = xstrdup("");
        cJSON_Delete(m->owner_data);
        m->owner_data = cJSON_CreateObject();
        m->ephemeral = false;
        sim_machine_release_auto(m); /* STATIC links stay, as in MAAS */
        free(m->power_state);
        m->power_state = xstrdup("off");
        free(m->status_message);
        m->status_message = xstrdup("Released");
}

void sim_machine_tick(struct sim *s, struct sim_machine *m)
{
        /* the clock only for a machine with a timed step (allocate ticks every machine) */
        if ((m->status != ST_DEPLOYING && m->status != ST_RELEASING &&
             m->status != ST_DISK_ERASING && (m->status != ST_COMMISSIONING || !m->pod_id)) ||
            m->deadline > sim_now())
                return;
        if (m->status == ST_COMMISSIONING) { /* a composed VM (pods.c) */
                m->status = ST_READY;
                free(m->status_message);
                m->status_message = xstrdup("Ready");
                free(m->power_state);
                m->power_state = xstrdup("off");
        } else if (m->status == ST_DEPLOYING) {
                bool fail = sim_strv_has(&s->faults.fail_deploy, m->system_id);

                m->status = fail ? ST_FAILED_DEPLOYMENT : ST_DEPLOYED;
                m->deploys++;
                if (!fail && !m->disk_marker) /* the workload writes its data */
                        m->disk_marker = xasprintf("%s-data-%u", m->system_id, m->deploys);
                free(m->status_message);
                m->status_message = xstrdup(fail ? "Failed deployment" : "Deployed");
        } else if (m->status == ST_RELEASING || m->status == ST_DISK_ERASING) {
                sim_machine_finish_release(m);
        }
}

void sim_release(struct sim *s)
{
        sim_reservations_release(s);
        for (size_t i = 0; i < s->n_machines; i++)
                machine_release_fields(&s->machines[i]);
        free(s->machines);
        free(s->by_id);
        free(s->by_cost);
        for (size_t i = 0; i < s->n_zones; i++) {
                free(s->zones[i].name);
                free(s->zones[i].description);
        }
        free(s->zones);
        for (size_t i = 0; i < s->n_pools; i++) {
                free(s->pools[i].name);
                free(s->pools[i].description);
        }
        free(s->pools);
        for (size_t i = 0; i < s->n_tags; i++) {
                free(s->tags[i].name);
                free(s->tags[i].comment);
                free(s->tags[i].definition);
                free(s->tags[i].kernel_opts);
        }
        free(s->tags);
        for (size_t i = 0; i < s->n_domains; i++)
                free(s->domains[i].name);
        free(s->domains);
        for (size_t i = 0; i < s->n_boots; i++) {
                struct sim_boot *b = &s->boots[i];

                free(b->type);
                free(b->name);
                free(b->architecture);
                free(b->subarches);
                free(b->title);
                free(b->base_image);
        }
        free(s->boots);
        for (size_t i = 0; i < s->n_dns; i++) {
                free(s->dns[i].name);
                sim_strv_release(&s->dns[i].ips);
        }
        free(s->dns);
        sim_subnets_release(s);
        sim_pods_release(s);
        for (size_t i = 0; i < s->n_keys; i++) {
                free(s->keys[i].consumer);
                free(s->keys[i].token);
                free(s->keys[i].secret);
        }
        sim_faults_release(&s->faults);
        free(s->log);
}

void sim_set(char **dst, const char *src)
{
        char *copy = src ? xstrdup(src) : NULL;

        free(*dst);
        *dst = copy;
}
