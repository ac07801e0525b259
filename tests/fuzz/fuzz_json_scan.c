/*
 * libFuzzer driver for json_scan, differential against cJSON:
 *  - json_scan never reads outside the input, never crashes, and its message is valid
 *    UTF-8 whatever the input;
 *  - whatever json_scan accepts, cJSON parses (json_parse), with as many values as the scan
 *    counted and no string shorter than the scan decoded (a NUL would cut it);
 *  - json_scan_tree builds from accepted text, for the document and for each member's span
 *    down to depth 3, node for node the tree cJSON builds (cjson_same);
 *  - a document cJSON builds without duplicate keys, NUL or invalid UTF-8, printed back by
 *    cJSON, is accepted by json_scan (the scanner is not stricter than JSON on what it
 *    prints);
 *  - duplicate keys, both ways: an accepted document's tree has no object with two members
 *    of one name, and a document refused for a duplicate that cJSON parses has one.
 * Limits: the scanner's own (depth 128, 65536 open members).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../support/cjson_same.h"
#include "../support/utf8_oracle.h"
#include "json.h"
#include "json_scan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Values in the tree; string bytes (strlen, so a NUL would show as fewer) into *bytes. */
static size_t count(const cJSON *item, size_t *bytes)
{
        size_t n = 1;

        if (item->string)
                *bytes += strlen(item->string);
        if (cJSON_IsString(item))
                *bytes += strlen(item->valuestring);
        for (const cJSON *c = item->child; c; c = c->next)
                n += count(c, bytes);
        return n;
}

static int by_name(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Whether some object in the tree has two members of one name (sorted, then neighbours). */
static bool has_duplicate(const cJSON *item)
{
        size_t n = 0, i = 0;
        const char **names;
        bool dup = false;

        for (const cJSON *c = item->child; c; c = c->next) {
                if (has_duplicate(c))
                        return true;
                n++;
        }
        if (!cJSON_IsObject(item) || n < 2)
                return false;
        names = malloc(n * sizeof(*names));
        if (!names)
                abort();
        for (const cJSON *c = item->child; c; c = c->next)
                names[i++] = c->string;
        qsort(names, n, sizeof(*names), by_name);
        for (i = 1; i < n && !dup; i++)
                dup = strcmp(names[i - 1], names[i]) == 0;
        free(names);
        return dup;
}

/* A member's span gives the tree cJSON parses from its bytes. */
static void check_member(void *ud, const struct json_scan_member *m)
{
        const char *text = ud;
        cJSON *ours = json_scan_tree(text, m->value_off, m->value_end);
        cJSON *ref = NULL;

        if (json_parse(text + m->value_off, m->value_end - m->value_off, &ref) != 0 ||
            !cjson_same(ours, ref))
                abort(); /* a member's tree is not cJSON's */
        cJSON_Delete(ours);
        cJSON_Delete(ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *text = malloc(size ? size : 1); /* exact size: ASan catches any read past it */
        struct json_scan_result res;
        cJSON *tree = NULL;
        cJSON *ours;
        size_t bytes = 0;
        char *printed;
        int r;

        if (!text)
                return 0;
        if (size)
                memcpy(text, data, size);
        r = json_scan(text, size, NULL, &res);
        if (!utf8_oracle_valid((const unsigned char *)res.message))
                abort(); /* a message must never carry invalid bytes */
        if (r == 0) {
                if (json_parse(text, size, &tree) != 0)
                        abort(); /* accepted by the scanner, refused by cJSON */
                if (count(tree, &bytes) != res.stats.values || bytes != res.stats.string_bytes)
                        abort(); /* cJSON built something else than the scan counted */
                if (has_duplicate(tree))
                        abort(); /* a duplicate key the scan let through */
                ours = json_scan_tree(text, 0, size);
                if (!cjson_same(ours, tree))
                        abort(); /* the scan's tree is not cJSON's */
                cJSON_Delete(ours);
                if (json_scan_members(text, size, NULL,
                                      &(struct json_scan_members){
                                              .depth = 3, .fn = check_member, .ud = text },
                                      &res) != 0)
                        abort(); /* accepted once, refused with members */
                printed = cJSON_PrintUnformatted(tree);
                if (printed && json_scan(printed, strlen(printed), NULL, &res) != 0)
                        abort(); /* cJSON's own rendering of an accepted document refused */
                cJSON_free(printed);
                cJSON_Delete(tree);
        } else if (res.fault == JSON_SCAN_DUPLICATE && json_parse(text, size, &tree) == 0) {
                if (!has_duplicate(tree))
                        abort(); /* a duplicate the scan reported that is not there */
                cJSON_Delete(tree);
        }
        free(text);
        return 0;
}
