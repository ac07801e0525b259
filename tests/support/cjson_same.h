#pragma once
/*
 * cjson_same: whether two cJSON trees are the same node for node: type, key, string,
 * valueint and valuedouble (bit for bit), children in order, and both linked as cJSON
 * links them (next and prev, the first child's prev the last child). Stricter than
 * cJSON_Compare, which ignores member order, valueint and links. Header-only so the fuzz
 * drivers, which do not link the test support, share it.
 */
#include <stdbool.h>
#include <string.h>

#include <cjson/cJSON.h>

static inline bool cjson_same_str(const char *a, const char *b)
{
        return a == b || (a && b && strcmp(a, b) == 0);
}

/* The children of item are linked as cJSON links them. */
static inline bool cjson_links_ok(const cJSON *item)
{
        const cJSON *c = item->child;

        if (!c)
                return true;
        for (; c->next; c = c->next)
                if (c->next->prev != c)
                        return false;
        return item->child->prev == c;
}

static inline bool cjson_same(const cJSON *a, const cJSON *b)
{
        const cJSON *ca;
        const cJSON *cb;

        if (!a || !b)
                return a == b;
        if (a->type != b->type || a->valueint != b->valueint ||
            memcmp(&a->valuedouble, &b->valuedouble, sizeof(a->valuedouble)) != 0 ||
            !cjson_same_str(a->string, b->string) ||
            !cjson_same_str(a->valuestring, b->valuestring) || !cjson_links_ok(a) ||
            !cjson_links_ok(b))
                return false;
        for (ca = a->child, cb = b->child; ca && cb; ca = ca->next, cb = cb->next)
                if (!cjson_same(ca, cb))
                        return false;
        return !ca && !cb;
}
