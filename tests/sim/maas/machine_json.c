/*
 * maas-sim machine JSON: renders a machine with every key of maas-api.md §6.1 (the keys
 * gomaasapi's strict schema requires, with their types), plus interfaces with links and
 * subnets (network.c), and one physical block device. Called with sim.lock held. It does not apply
 * the lazy transitions itself: readers call sim_machine_tick() first, while deploy renders its
 * answer before the tick so the response shows Deploying even with --deploy-seconds 0.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "xalloc.h"

static void add_str_or_null(cJSON *o, const char *k, const char *v)
{
        if (v)
                cJSON_AddStringToObject(o, k, v);
        else
                cJSON_AddNullToObject(o, k);
}

static cJSON *str_array(const struct sim_strv *v)
{
        cJSON *a = cJSON_CreateArray();

        for (size_t i = 0; i < v->n; i++)
                cJSON_AddItemToArray(a, cJSON_CreateString(v->v[i]));
        return a;
}

/* Adds "resource_uri": SIM_API_PREFIX followed by the formatted path to o; returns o. */
static cJSON *add_uri(cJSON *o, const char *fmt, ...) PRINTF_LIKE(2, 3);

static cJSON *add_uri(cJSON *o, const char *fmt, ...)
{
        va_list ap;
        char *path, *uri;

        va_start(ap, fmt);
        path = xvasprintf(fmt, ap);
        va_end(ap);
        uri = xasprintf(SIM_API_PREFIX "%s", path);
        cJSON_AddStringToObject(o, "resource_uri", uri);
        free(uri);
        free(path);
        return o;
}

/* A zone's or a pool's fields (without its resource_uri). */
static cJSON *described_json(int id, const char *name, const char *description)
{
        cJSON *o = cJSON_CreateObject();

        cJSON_AddNumberToObject(o, "id", id);
        cJSON_AddStringToObject(o, "name", name);
        cJSON_AddStringToObject(o, "description", description);
        return o;
}

cJSON *sim_zone_json(const struct sim *s, size_t i)
{
        const struct sim_zone *z = &s->zones[i];

        return add_uri(described_json(z->id, z->name, z->description), "zones/%s/", z->name);
}

cJSON *sim_pool_json(const struct sim *s, size_t i)
{
        const struct sim_pool *p = &s->pools[i];

        return add_uri(described_json(p->id, p->name, p->description), "resourcepool/%d/", p->id);
}

cJSON *sim_domain_json(const struct sim *s, size_t i)
{
        const struct sim_domain *d = &s->domains[i];
        cJSON *o = cJSON_CreateObject();
        size_t count = 0;

        for (size_t j = 0; j < s->n_dns; j++)
                count += s->dns[j].domain == i;
        cJSON_AddNumberToObject(o, "id", d->id);
        cJSON_AddStringToObject(o, "name", d->name);
        if (d->ttl >= 0)
                cJSON_AddNumberToObject(o, "ttl", d->ttl);
        else
                cJSON_AddNullToObject(o, "ttl");
        cJSON_AddBoolToObject(o, "authoritative", d->authoritative);
        cJSON_AddNumberToObject(o, "resource_record_count", (double)count);
        cJSON_AddBoolToObject(o, "is_default", i == 0);
        return add_uri(o, "domains/%d/", d->id);
}

cJSON *sim_tag_json(const struct sim *s, size_t i)
{
        const struct sim_tag *t = &s->tags[i];
        cJSON *o = cJSON_CreateObject();

        cJSON_AddStringToObject(o, "name", t->name);
        cJSON_AddStringToObject(o, "definition", t->definition);
        cJSON_AddStringToObject(o, "comment", t->comment);
        cJSON_AddStringToObject(o, "kernel_opts", t->kernel_opts);
        return add_uri(o, "tags/%s/", t->name);
}

static cJSON *disk_json(const struct sim_machine *m)
{
        cJSON *o = cJSON_CreateObject();
        double size = m->storage * 1e6;
        int id = (int)m->order + 1;
        char *serial = xasprintf("QM%05d", id);

        cJSON_AddNumberToObject(o, "id", id);
        cJSON_AddStringToObject(o, "name", "sda");
        cJSON_AddStringToObject(o, "path", "/dev/disk/by-dname/sda");
        cJSON_AddStringToObject(o, "model", "QEMU HARDDISK");
        cJSON_AddStringToObject(o, "serial", serial);
        cJSON_AddNullToObject(o, "id_path");
        cJSON_AddNullToObject(o, "uuid");
        cJSON_AddNumberToObject(o, "size", size);
        cJSON_AddNumberToObject(o, "block_size", 512);
        cJSON_AddNumberToObject(o, "used_size", 0);
        cJSON_AddNumberToObject(o, "available_size", size);
        cJSON_AddStringToObject(o, "used_for", "Unused");
        cJSON_AddArrayToObject(o, "tags");
        cJSON_AddStringToObject(o, "type", "physical");
        cJSON_AddNullToObject(o, "filesystem");
        cJSON_AddArrayToObject(o, "partitions");
        cJSON_AddNullToObject(o, "partition_table_type");
        cJSON_AddNullToObject(o, "storage_pool");
        cJSON_AddStringToObject(o, "system_id", m->system_id);
        free(serial);
        return add_uri(o, "nodes/%s/blockdevices/%d/", m->system_id, id);
}

static cJSON *hardware_info(const struct sim_machine *m)
{
        static const char *const unknown[] = { "system_family",
                                               "system_version",
                                               "system_sku",
                                               "system_serial",
                                               "mainboard_vendor",
                                               "mainboard_product",
                                               "mainboard_firmware_version",
                                               "mainboard_firmware_date" };
        cJSON *o = cJSON_CreateObject();
        char *cpu = xasprintf("Simulated CPU %d cores", m->cpu_count);

        cJSON_AddStringToObject(o, "system_vendor", "maas-sim");
        cJSON_AddStringToObject(o, "system_product", "Virtual Machine");
        cJSON_AddStringToObject(o, "cpu_model", cpu);
        for (size_t i = 0; i < ARRAY_SIZE(unknown); i++)
                cJSON_AddStringToObject(o, unknown[i], "Unknown");
        free(cpu);
        return o;
}

/* "storage" as cJSON prints it, printed once: a fraction of a megabyte takes printf's
 * slowest path (and a read back) in every machine of every list. */
static cJSON *storage_number(struct sim_machine *m)
{
        if (!m->storage_text) {
                cJSON *n = cJSON_CreateNumber(m->storage);

                m->storage_text = cJSON_PrintUnformatted(n);
                cJSON_Delete(n);
        }
        return cJSON_CreateRaw(m->storage_text);
}

static void add_identity(struct sim *s, cJSON *o, struct sim_machine *m)
{
        char *fqdn = xasprintf("%s.%s", m->hostname, s->domains[m->domain].name);
        char *uri = xasprintf(SIM_API_PREFIX "machines/%s/", m->system_id);

        cJSON_AddStringToObject(o, "system_id", m->system_id);
        cJSON_AddStringToObject(o, "hostname", m->hostname);
        cJSON_AddStringToObject(o, "fqdn", fqdn);
        cJSON_AddItemToObject(o, "domain", sim_domain_json(s, m->domain));
        cJSON_AddStringToObject(o, "description", m->description);
        cJSON_AddStringToObject(o, "architecture", m->architecture);
        cJSON_AddNumberToObject(o, "cpu_count", m->cpu_count);
        cJSON_AddNumberToObject(o, "cpu_speed", m->cpu_speed);
        cJSON_AddNumberToObject(o, "memory", (double)m->memory);
        cJSON_AddItemToObject(o, "storage", storage_number(m));
        if (m->swap_size >= 0)
                cJSON_AddNumberToObject(o, "swap_size", (double)m->swap_size);
        else
                cJSON_AddNullToObject(o, "swap_size");
        cJSON_AddStringToObject(o, "resource_uri", uri);
        cJSON_AddNumberToObject(o, "node_type", 0);
        cJSON_AddStringToObject(o, "node_type_name", "Machine");
        cJSON_AddNullToObject(o, "parent");
        free(fqdn);
        free(uri);
}

static void add_status(cJSON *o, const struct sim_machine *m)
{
        cJSON_AddNumberToObject(o, "status", m->status);
        cJSON_AddStringToObject(o, "status_name", sim_status_name(m->status));
        add_str_or_null(o, "status_message", m->status_message);
        cJSON_AddStringToObject(o, "status_action", "");
        cJSON_AddStringToObject(o, "error_description", "");
        cJSON_AddStringToObject(o, "osystem", m->osystem);
        cJSON_AddStringToObject(o, "distro_series", m->distro_series);
        add_str_or_null(o, "hwe_kernel", m->hwe_kernel);
        cJSON_AddNullToObject(o, "min_hwe_kernel");
        cJSON_AddBoolToObject(o, "ephemeral_deploy", m->ephemeral);
        cJSON_AddBoolToObject(o, "netboot", m->status != ST_DEPLOYED);
        cJSON_AddStringToObject(o, "power_type", m->power_type);
        cJSON_AddStringToObject(o, "power_state", m->power_state);
        add_str_or_null(o, "owner", m->owner);
        cJSON_AddItemToObject(o, "owner_data", cJSON_Duplicate(m->owner_data, true));
        cJSON_AddBoolToObject(o, "locked", false);
}

/* A part printed once and kept in *cache (freed with the machine): a 10 000-machine list
 * would otherwise build and print the same block device 30 000 times. */
static cJSON *static_part(char **cache,
                          cJSON *(*build)(const struct sim_machine *),
                          const struct sim_machine *m)
{
        if (!*cache) {
                cJSON *o = build(m);

                *cache = cJSON_PrintUnformatted(o);
                cJSON_Delete(o);
        }
        return cJSON_CreateRaw(*cache);
}

static void add_hardware(struct sim *s, cJSON *o, struct sim_machine *m)
{
        cJSON *ifs = cJSON_CreateArray();
        static const char *const empty[] = {
                "virtualblockdevice_set", "volume_groups", "raids", "cache_sets", "bcaches",
                "special_filesystems"
        };

        cJSON_AddItemToObject(o, "tag_names", str_array(&m->tags));
        cJSON_AddItemToObject(o, "ip_addresses", sim_machine_ips_json(m));
        cJSON_AddNullToObject(o, "address_ttl");
        cJSON_AddItemToObject(o, "zone", sim_zone_json(s, m->zone));
        cJSON_AddItemToObject(o, "pool", sim_pool_json(s, m->pool));
        cJSON_AddItemToObject(o, "hardware_info", static_part(&m->hw_text, hardware_info, m));
        for (size_t i = 0; i < m->n_ifaces; i++)
                cJSON_AddItemToArray(ifs, sim_iface_json(s, m, &m->ifaces[i]));
        if (m->n_ifaces) /* the first of interface_set, copied rather than rendered twice */
                cJSON_AddItemToObject(o, "boot_interface", cJSON_Duplicate(ifs->child, true));
        else
                cJSON_AddNullToObject(o, "boot_interface");
        cJSON_AddItemToObject(o, "interface_set", ifs);
        cJSON_AddItemToObject(o, "boot_disk", static_part(&m->disk_text, disk_json, m));
        cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "blockdevice_set"),
                             static_part(&m->disk_text, disk_json, m));
        cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "physicalblockdevice_set"),
                             static_part(&m->disk_text, disk_json, m));
        for (size_t i = 0; i < ARRAY_SIZE(empty); i++)
                cJSON_AddArrayToObject(o, empty[i]);
        cJSON_AddItemToObject(o, "default_gateways", sim_default_gateways_json(s, m));
}

cJSON *sim_machine_json(struct sim *s, struct sim_machine *m)
{
        cJSON *o = cJSON_CreateObject();

        add_identity(s, o, m);
        add_status(o, m);
        add_hardware(s, o, m);
        return o;
}
