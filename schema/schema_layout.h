#pragma once
/*
 * schema_layout: reading and writing a described member at its offset, and the generic
 * list layout (items, n, present), for the codec's three directions (decode, encode,
 * release). Inline: they call nothing.
 */

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "schema_priv.h"

static inline void *schema_at(void *base, size_t off)
{
        return (char *)base + off;
}

static inline const void *schema_cat(const void *base, size_t off)
{
        return (const char *)base + off;
}

/* List items pointers are read and written with memcpy: the element type differs. */
static inline void *schema_list_items(const void *list)
{
        void *p;

        memcpy(&p, list, sizeof(p));
        return p;
}

static inline void schema_list_set_items(void *list, void *items)
{
        memcpy(list, &items, sizeof(items));
}

static inline size_t *schema_list_n(void *list)
{
        return schema_at(list, offsetof(struct schema_list_layout, n));
}

static inline bool *schema_list_present(void *list)
{
        return schema_at(list, offsetof(struct schema_list_layout, present));
}
