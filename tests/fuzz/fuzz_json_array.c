/*
 * libFuzzer driver for json_array_each and json_split (the element-by-element readers of
 * MAAS's machine lists, whole and streamed) and maas_node_list_from_text, differential
 * against cJSON's parse of the whole input:
 *  - json_array_each never reads outside the input and never crashes, whatever it is given;
 *  - when the whole input parses (json_parse) as an array, json_array_each succeeds and
 *    hands over exactly its elements, in order, each of which parses to the same JSON;
 *  - json_split, fed the input in chunks of sizes drawn from the input (each chunk its own
 *    exact-size allocation) and fed it one byte at a time, gives the same outcome both ways
 *    and json_array_each's: the same success or CM_EPARSE, the same number of elements,
 *    each the same text (or, where whitespace between two values was folded, both not
 *    JSON); with a 64-byte element cap it hands over a prefix of those and fails with
 *    CM_ETOOBIG only when an element is over 64 bytes;
 *  - maas_node_list_from_text and maas_node_list_from_json agree on whether a valid array
 *    decodes and on how many machines it holds, and maas_node_stream fed in chunks agrees
 *    with maas_node_list_from_text.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "err.h"
#include "json.h"
#include "json_split.h"
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

/* The elements one reader handed over (copies). */
struct got {
        char **v;
        size_t *len;
        size_t n;
};

static int keep(void *arg, const char *elem, size_t len)
{
        struct got *g = arg;

        g->v = realloc(g->v, (g->n + 1) * sizeof(*g->v));
        g->len = realloc(g->len, (g->n + 1) * sizeof(*g->len));
        if (!g->v || !g->len)
                abort();
        g->v[g->n] = malloc(len ? len : 1);
        if (!g->v[g->n])
                abort();
        memcpy(g->v[g->n], elem, len);
        g->len[g->n++] = len;
        return 0;
}

static void got_release(struct got *g)
{
        for (size_t i = 0; i < g->n; i++)
                free(g->v[i]);
        free(g->v);
        free(g->len);
        *g = (struct got){ 0 };
}

/* Chunk sizes 1..16 from an xorshift seeded by the input. */
static uint32_t next_size(uint32_t *x)
{
        *x ^= *x << 13;
        *x ^= *x >> 17;
        *x ^= *x << 5;
        return 1 + *x % 16;
}

static uint32_t seed_of(const char *text, size_t len)
{
        uint32_t h = 2166136261u;

        for (size_t i = 0; i < len; i++)
                h = (h ^ (uint8_t)text[i]) * 16777619u;
        return h ? h : 1;
}

/* json_split over text in chunks (each copied to its own exact allocation); step 0 = sizes
 * drawn from the input. */
static int split(const char *text, size_t len, size_t step, size_t max_elem, struct got *g)
{
        struct json_split sp;
        uint32_t x = seed_of(text, len);
        int r = 0;

        json_split_init(&sp,
                        &(struct json_split_opts){ .fn = keep, .arg = g, .max_elem = max_elem });
        for (size_t at = 0; at < len && r == 0;) {
                size_t n = step ? step : next_size(&x);
                char *chunk;

                if (n > len - at)
                        n = len - at;
                chunk = malloc(n);
                if (!chunk)
                        abort();
                memcpy(chunk, text + at, n);
                r = json_split_feed(&sp, chunk, n);
                free(chunk);
                at += n;
        }
        if (r == 0)
                r = json_split_finish(&sp);
        if (r != 0 && r != CM_EPARSE && r != CM_ETOOBIG)
                abort();
        if (r != 0 && !sp.message[0])
                abort(); /* every failure says why */
        json_split_release(&sp);
        return r;
}

static bool parses(const char *t, size_t n)
{
        cJSON *tree = NULL;

        if (json_parse(t, n, &tree) < 0)
                return false;
        cJSON_Delete(tree);
        return true;
}

static bool same_got(const struct got *a, const struct got *b, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (a->len[i] != b->len[i] || memcmp(a->v[i], b->v[i], a->len[i]) != 0)
                        return false;
        return true;
}

static void check_split(const char *text, size_t len)
{
        struct got each = { 0 }, chunks = { 0 }, bytes = { 0 }, capped = { 0 };
        int re = json_array_each(text, len, keep, &each);
        int rc = split(text, len, 0, 0, &chunks);
        int rb = split(text, len, 1, 0, &bytes);
        int rk = split(text, len, 0, 64, &capped);
        bool over = false;

        if (rc != rb || chunks.n != bytes.n || !same_got(&chunks, &bytes, chunks.n))
                abort(); /* where the chunks end must not matter */
        if (rc != re || chunks.n != each.n)
                abort(); /* json_split and json_array_each disagree */
        for (size_t i = 0; i < each.n; i++) {
                bool same = each.len[i] == chunks.len[i] &&
                            memcmp(each.v[i], chunks.v[i], each.len[i]) == 0;

                if (!same && (parses(each.v[i], each.len[i]) || parses(chunks.v[i], chunks.len[i])))
                        abort(); /* only whitespace in what is not JSON may differ */
                over = over || chunks.len[i] > 64;
        }
        if (capped.n > chunks.n || !same_got(&capped, &chunks, capped.n))
                abort(); /* the capped run hands over a prefix */
        if (rk == CM_ETOOBIG ? !over && rc == 0 : (rk != rc || capped.n != chunks.n || over))
                abort(); /* the cap refuses exactly the elements over it */
        got_release(&each);
        got_release(&chunks);
        got_release(&bytes);
        got_release(&capped);
}

/* maas_node_stream fed in chunks of 7 agrees with maas_node_list_from_text. */
static void check_node_stream(const char *text, size_t len)
{
        struct maas_node_list a = { 0 }, b = { 0 };
        struct maas_node_stream ns;
        int ra = maas_node_list_from_text(text, len, &a), rb = 0;

        maas_node_stream_init(&ns);
        for (size_t at = 0; at < len && rb == 0; at += 7)
                rb = maas_node_stream_feed(&ns, text + at, len - at < 7 ? len - at : 7);
        if (rb == 0)
                rb = maas_node_stream_finish(&ns, &b);
        if (ra != rb || a.n != b.n || (rb != 0 && !ns.message[0]))
                abort();
        maas_node_stream_release(&ns);
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
        check_split(text, size);
        check_node_stream(text, size);
        cJSON_Delete(whole);
        free(text);
        return 0;
}
