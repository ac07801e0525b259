/*
 * schema_util: helpers over the schema types that webhooks and reconcilers share: string
 * lists and maps, conditions with CAPI's Set semantics (upstream-capmaas.md 1.6), metadata
 * lookups, the reference's image split and the MAAS providerID format.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "rfc3339.h"
#include "schema.h"
#include "schema_priv.h"
#include "xalloc.h"

/* ---- string lists ---- */

void schema_strv_add(struct schema_strv *v, const char *s)
{
        v->items = xrealloc(v->items, (v->n + 1) * sizeof(char *));
        v->items[v->n++] = xstrdup(s);
        v->present = true;
}

long schema_strv_find(const struct schema_strv *v, const char *s)
{
        for (size_t i = 0; i < v->n; i++) {
                if (!strcmp(v->items[i], s))
                        return (long)i;
        }
        return -1;
}

bool schema_strv_remove(struct schema_strv *v, const char *s)
{
        size_t out = 0;
        bool removed = false;

        for (size_t i = 0; i < v->n; i++) {
                if (!strcmp(v->items[i], s)) {
                        free(v->items[i]);
                        removed = true;
                } else {
                        v->items[out++] = v->items[i];
                }
        }
        v->n = out;
        return removed;
}

/* ---- string maps ---- */

static struct schema_strmap_entry *strmap_find(const struct schema_strmap *m, const char *key)
{
        for (size_t i = 0; i < m->n; i++) {
                if (!strcmp(m->items[i].key, key))
                        return &m->items[i];
        }
        return NULL;
}

const char *schema_strmap_get(const struct schema_strmap *m, const char *key)
{
        const struct schema_strmap_entry *e = strmap_find(m, key);

        return e ? e->value : NULL;
}

void schema_strmap_set(struct schema_strmap *m, const char *key, const char *value)
{
        struct schema_strmap_entry *e = strmap_find(m, key);

        m->present = true;
        if (e) {
                free(e->value);
                e->value = xstrdup(value);
                return;
        }
        m->items = xrealloc(m->items, (m->n + 1) * sizeof(*m->items));
        m->items[m->n].key = xstrdup(key);
        m->items[m->n].value = xstrdup(value);
        m->n++;
}

bool schema_strmap_remove(struct schema_strmap *m, const char *key)
{
        size_t out = 0;
        bool removed = false;

        for (size_t i = 0; i < m->n; i++) {
                if (!strcmp(m->items[i].key, key)) {
                        free(m->items[i].key);
                        free(m->items[i].value);
                        removed = true;
                } else {
                        m->items[out++] = m->items[i];
                }
        }
        m->n = out;
        return removed;
}

/* ---- conditions ---- */

static struct schema_condition *conditions_find(const struct schema_conditions *l, const char *type)
{
        for (size_t i = 0; i < l->n; i++) {
                if (l->items[i].type && !strcmp(l->items[i].type, type))
                        return &l->items[i];
        }
        return NULL;
}

const struct schema_condition *schema_conditions_find(const struct schema_conditions *l,
                                                      const char *type)
{
        return conditions_find(l, type);
}

bool schema_conditions_is_true(const struct schema_conditions *l, const char *type)
{
        const struct schema_condition *c = schema_conditions_find(l, type);

        return c && c->status && !strcmp(c->status, SCHEMA_CONDITION_TRUE);
}

/* CAPI order: Available, Ready first; Deleting, Paused last; the rest alphabetical. */
static int condition_rank(const char *type)
{
        static const struct {
                const char *type;
                int rank;
        } ranks[] = { { "Available", 0 }, { "Ready", 1 }, { "Deleting", 3 }, { "Paused", 4 } };

        for (size_t i = 0; type && i < sizeof(ranks) / sizeof(ranks[0]); i++) {
                if (!strcmp(type, ranks[i].type))
                        return ranks[i].rank;
        }
        return 2;
}

static int condition_cmp(const struct schema_condition *a, const struct schema_condition *b)
{
        int ra = condition_rank(a->type);
        int rb = condition_rank(b->type);

        if (ra != rb)
                return ra - rb;
        return strcmp(a->type ? a->type : "", b->type ? b->type : "");
}

/* Insertion sort: stable, and the list is short and almost always sorted. */
static void conditions_sort(struct schema_conditions *l)
{
        struct schema_condition tmp;
        size_t j;

        for (size_t i = 1; i < l->n; i++) {
                tmp = l->items[i];
                for (j = i; j > 0 && condition_cmp(&l->items[j - 1], &tmp) > 0; j--)
                        l->items[j] = l->items[j - 1];
                l->items[j] = tmp;
        }
}

/* Sets *dst to a copy of v unless equal; true if it changed. */
static bool set_str(char **dst, const char *v)
{
        if (*dst && !strcmp(*dst, v))
                return false;
        free(*dst);
        *dst = xstrdup(v);
        return true;
}

static struct schema_condition *conditions_add(struct schema_conditions *l, const char *type)
{
        struct schema_condition *c;

        l->items = xrealloc(l->items, (l->n + 1) * sizeof(*l->items));
        c = &l->items[l->n++];
        *c = (struct schema_condition){ .type = xstrdup(type) };
        return c;
}

bool schema_conditions_set(struct schema_conditions *l,
                           const struct schema_condition_in *in,
                           int64_t generation,
                           time_t now)
{
        struct schema_condition *c = conditions_find(l, in->type);
        bool changed = !l->present;
        char ts[RFC3339_LEN];

        assert(in->type && in->status);
        rfc3339_format(now, ts);
        l->present = true;
        if (!c) {
                c = conditions_add(l, in->type);
                changed = true;
        }
        if (set_str(&c->status, in->status) || !c->last_transition_time) {
                (void)set_str(&c->last_transition_time, ts);
                changed = true;
        }
        changed |= set_str(&c->reason, in->reason ? in->reason : "");
        changed |= set_str(&c->message, in->message ? in->message : "");
        if (!c->has_observed_generation || c->observed_generation != generation) {
                c->observed_generation = generation;
                c->has_observed_generation = true;
                changed = true;
        }
        conditions_sort(l);
        return changed;
}

bool schema_conditions_remove(struct schema_conditions *l, const char *type)
{
        const struct schema_condition *c = schema_conditions_find(l, type);
        size_t i;

        if (!c)
                return false;
        i = (size_t)(c - l->items);
        schema_type_release(&schema_conditions_elem_type, &l->items[i]);
        memmove(&l->items[i], &l->items[i + 1], (l->n - i - 1) * sizeof(*l->items));
        l->n--;
        return true;
}

void schema_conditions_release(struct schema_conditions *l)
{
        for (size_t i = 0; i < l->n; i++)
                schema_type_release(&schema_conditions_elem_type, &l->items[i]);
        free(l->items);
        *l = (struct schema_conditions){ 0 };
}

/* ---- metadata ---- */

bool schema_meta_has_finalizer(const struct schema_meta *m, const char *finalizer)
{
        return schema_strv_find(&m->finalizers, finalizer) >= 0;
}

const struct schema_owner_ref *schema_meta_controller(const struct schema_meta *m)
{
        for (size_t i = 0; i < m->owner_refs.n; i++) {
                const struct schema_owner_ref *o = &m->owner_refs.items[i];

                if (o->has_controller && o->controller)
                        return o;
        }
        return NULL;
}

/* True when apiVersion ("group/version", or "version" for the core group) is in group. */
static bool api_version_in_group(const char *api_version, const char *group)
{
        const char *slash = strchr(api_version, '/');
        size_t n = slash ? (size_t)(slash - api_version) : 0;

        return strlen(group) == n && !strncmp(api_version, group, n);
}

const struct schema_owner_ref *schema_meta_owner(const struct schema_meta *m,
                                                 const char *group,
                                                 const char *kind)
{
        for (size_t i = 0; i < m->owner_refs.n; i++) {
                const struct schema_owner_ref *o = &m->owner_refs.items[i];

                if (o->kind && !strcmp(o->kind, kind) && o->api_version &&
                    api_version_in_group(o->api_version, group))
                        return o;
        }
        return NULL;
}

void schema_meta_release(struct schema_meta *m)
{
        schema_type_release(&schema_meta_type, m);
        memset(m, 0, sizeof(*m));
}

/* ---- image and providerID ---- */

void schema_image_split(const char *image, char **ret_osystem, char **ret_series)
{
        const char *slash = strchr(image, '/');

        if (!slash) {
                *ret_osystem = xstrdup("custom");
                *ret_series = xstrdup(image);
                return;
        }
        *ret_osystem = xstrndup(image, (size_t)(slash - image));
        *ret_series = xstrdup(slash + 1);
}

#define PROVIDER_ID_PREFIX "maas:///"

char *schema_provider_id_format(const char *zone, const char *system_id)
{
        return xasprintf(PROVIDER_ID_PREFIX "%s/%s", zone, system_id);
}

int schema_provider_id_parse(const char *provider_id, char **ret_zone, char **ret_system_id)
{
        size_t plen = strlen(PROVIDER_ID_PREFIX);
        const char *rest;
        const char *slash;

        if (!provider_id || strncmp(provider_id, PROVIDER_ID_PREFIX, plen) != 0)
                return CM_EINVAL;
        rest = provider_id + plen;
        slash = strchr(rest, '/');
        if (!slash || slash[1] == '\0' || strchr(slash + 1, '/'))
                return CM_EINVAL;
        if (ret_zone)
                *ret_zone = xstrndup(rest, (size_t)(slash - rest));
        if (ret_system_id)
                *ret_system_id = xstrdup(slash + 1);
        return CM_OK;
}

const char *schema_provider_id_system_id(const char *s)
{
        const char *colon = strchr(s, ':');
        size_t len = strlen(s);

        if (!colon || colon == s || strncmp(colon, "://", 3) != 0)
                return NULL;
        if (colon[3] == '\0' || s[len - 1] == '/' || strchr(colon, '\n'))
                return NULL;
        return strrchr(s, '/') + 1;
}
