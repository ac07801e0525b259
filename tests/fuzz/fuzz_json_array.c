/*
 * libFuzzer driver for json_array_each (the element-by-element reader of MAAS's machine
 * lists) and maas_node_list_from_text, differential against cJSON's parse of the whole
 * input:
 *  - json_array_each never reads outside the input and never crashes, whatever it is given;
 *  - when the whole input parses (json_parse) as an array, json_array_each succeeds and
 *    hands over exactly its elements, in order, each of which parses to the same JSON;
 *  - maas_node_list_from_text and maas_node_list_from_json agree on whether a valid array
 *    decodes and on how many machines it holds.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "json.h"
#include "maas_client.h"
#include "maas_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
        const cJSON *next; /* the whole parse's element the next callback must match */
        size_t n;
        int bad; /* an element that does not parse, or differs */
};

static int check_elem(void *arg, const char *elem, size_t len)
{
        struct seen *s = arg;
        cJSON *tree = NULL;

        s->n++;
        if (json_parse(elem, len, &tree) < 0) {
                s->bad = 1;
                return 0;
        }
        if (s->next) {
                /* printed, not cJSON_Compare: that looks object keys up by name, which goes
                 * wrong with duplicate keys (legal in JSON) */
                char *a = cJSON_PrintUnformatted(tree), *b = cJSON_PrintUnformatted(s->next);

                if (!a || !b || strcmp(a, b) != 0)
                        abort(); /* an element other than the whole parse's */
                cJSON_free(a);
                cJSON_free(b);
                s->next = s->next->next;
        }
        cJSON_Delete(tree);
        return 0;
}

static void check_nodes(const char *text, size_t len, const cJSON *whole)
{
        struct maas_node_list a = { 0 }, b = { 0 };
        int ra = maas_node_list_from_text(text, len, &a);
        int rb = maas_node_list_from_json(whole, &b);

        if ((ra == 0) != (rb == 0) || (ra == 0 && a.n != b.n))
                abort();
        maas_node_list_release(&a);
        maas_node_list_release(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *text = malloc(size ? size : 1); /* exact size: ASan catches any read past it */
        cJSON *whole = NULL;
        struct seen s = { 0 };
        int r;

        if (!text)
                return 0;
        if (size)
                memcpy(text, data, size);
        if (json_parse(text, size, &whole) == 0 && cJSON_IsArray(whole)) {
                s.next = whole->child;
                r = json_array_each(text, size, check_elem, &s);
                if (r != 0 || s.bad || s.next || s.n != (size_t)cJSON_GetArraySize(whole))
                        abort(); /* a valid array must be walked exactly */
                check_nodes(text, size, whole);
        } else {
                (void)json_array_each(text, size, check_elem, &s);
        }
        cJSON_Delete(whole);
        free(text);
        return 0;
}
