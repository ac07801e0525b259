/*
 * json_scan: the strict pre-scan (see json_scan.h). One loop over the text with an explicit
 * stack of open containers; strings go 16 bytes at a time (SSE2; 8 without) while they
 * hold nothing but printable ASCII, and a string that is all plain takes an inlined short
 * way. Paths are rebuilt only when there is an error, from the offsets of the open
 * members' keys kept in the stack, so the valid case pays nothing for them.
 *
 * Duplicate keys: every key of the open objects is an entry of one table, the innermost
 * object's keys the newest. An object's first BLOOM_MEMBERS keys without escapes are only
 * recorded (offset and length) with a bit each in the object's 64-bit filter, from their
 * length and end bytes; a key compares bytes with the earlier ones only when its bit is
 * already set, which in objects this small is seldom. Past that, or at a key with an escape
 * (whose decoded bytes the filter does not see), the object's entries are hashed (seeded)
 * and chained per bucket, newest first: a lookup walks its chain only while the entries
 * belong to that object, and closing the object pops its entries off the top, undoing their
 * chain links in reverse (an unhashed object's are just dropped).
 *
 * Trees (json_scan_tree): accepted text is walked once more without any check, building the
 * nodes cJSON would (its parse_number's strtod and saturated valueint included), through
 * cJSON's allocator; a string is copied as it is unless it holds an escape.
 */
#include "json_scan.h"

#include <limits.h>
#include <locale.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "err.h"
#include "xalloc.h"

#define NONE            UINT32_MAX
#define HEADS_INLINE    256u /* buckets while the keys fit JSON_SCAN_KEYS_INLINE */
#define PATH_KEY_MAX    128u /* bytes of a key shown in a path */
#define ITEM_BYTES      80u  /* a cJSON item (64 bytes) in a glibc chunk */
#define STRING_OVERHEAD 24u  /* a string's NUL, chunk header and rounding, at most */

struct key_ent {
        uint32_t hash;
        uint32_t off; /* of the key's opening quote */
        uint32_t next;
};

struct keys {
        struct key_ent *ents; /* inline or heap */
        uint32_t *heads;
        uint32_t n, cap, mask;
        struct key_ent ents_inline[JSON_SCAN_KEYS_INLINE];
        uint32_t heads_inline[HEADS_INLINE];
};

struct frame {
        bool object;
        uint32_t index;     /* arrays: the element being read */
        uint32_t key_off;   /* objects: the current member's key; NONE before the first */
        uint32_t value_off; /* objects: where the current member's value starts */
        uint32_t keys_base;
        uint32_t key_len; /* objects: the current member's key, raw bytes */
        bool key_escaped;
        bool hashed;    /* objects: the keys are in the hash chains (see "duplicate keys") */
        uint64_t bloom; /* objects, until hashed: a bit per key (bloom_bit) */
};

struct scan {
        const unsigned char *s;
        size_t len, pos;
        const struct json_scan_limits *lim;
        const struct json_scan_members *members; /* may be NULL */
        unsigned max_depth;
        struct json_scan_result *res;
        struct json_scan_stats stats; /* copied to res at the end */
        struct frame stack[JSON_SCAN_DEPTH_MAX];
        unsigned depth;
        struct keys keys;
};

/* ---- errors ---- */

static int hex4(const unsigned char *p, unsigned *ret);

/* The byte the escape \c stands for; 0 when \c is not one (\u is handled apart). */
static unsigned char unescape(unsigned char c)
{
        switch (c) {
        case '"':
        case '\\':
        case '/':
                return c;
        case 'b':
                return '\b';
        case 'f':
                return '\f';
        case 'n':
                return '\n';
        case 'r':
                return '\r';
        case 't':
                return '\t';
        default:
                return 0;
        }
}

/* Decodes the next character of a string that was already checked; 0 at its closing
 * quote. *pos moves past it. */
static size_t decode_char(const unsigned char *s, size_t *pos, unsigned char out[4])
{
        unsigned cp = 0, lo = 0;
        size_t n;

        if (s[*pos] == '"')
                return 0;
        if (s[*pos] != '\\') {
                n = s[*pos] < 0x80 ? 1 : s[*pos] < 0xE0 ? 2 : s[*pos] < 0xF0 ? 3 : 4;
                memcpy(out, s + *pos, n);
                *pos += n;
                return n;
        }
        if (s[*pos + 1] != 'u') {
                out[0] = unescape(s[*pos + 1]);
                *pos += 2;
                return 1;
        }
        (void)hex4(s + *pos + 2, &cp);
        *pos += 6;
        if (cp >= 0xD800 && cp < 0xDC00) {
                (void)hex4(s + *pos + 2, &lo);
                *pos += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (cp < 0x80) {
                out[0] = (unsigned char)cp;
                return 1;
        }
        if (cp < 0x800) {
                out[0] = (unsigned char)(0xC0 | cp >> 6);
                out[1] = (unsigned char)(0x80 | (cp & 0x3F));
                return 2;
        }
        if (cp < 0x10000) {
                out[0] = (unsigned char)(0xE0 | cp >> 12);
                out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
                out[2] = (unsigned char)(0x80 | (cp & 0x3F));
                return 3;
        }
        out[0] = (unsigned char)(0xF0 | cp >> 18);
        out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        out[3] = (unsigned char)(0x80 | (cp & 0x3F));
        return 4;
}

/* The key at off, decoded, cut at a character boundary, control characters as '?'. */
static void key_text(const unsigned char *s, uint32_t off, char *out, size_t cap)
{
        size_t pos = off + 1, n = 0, k;
        unsigned char c[4];

        while ((k = decode_char(s, &pos, c)) != 0 && n + k < cap) {
                for (size_t i = 0; i < k; i++)
                        out[n++] = (char)(c[0] < 0x20 || c[0] == 0x7F ? '?' : c[i]);
        }
        out[n] = '\0';
}

/* The path of the value being read: members by key, elements by index. */
static void build_path(const struct scan *sc, struct json_path *p)
{
        char key[PATH_KEY_MAX];

        json_path_init(p, NULL);
        for (unsigned i = 0; i < sc->depth; i++) {
                const struct frame *f = &sc->stack[i];

                if (!f->object) {
                        (void)json_path_push_index(p, f->index);
                } else if (f->key_off != NONE) {
                        key_text(sc->s, f->key_off, key, sizeof(key));
                        (void)json_path_push_key(p, key);
                }
        }
}

static size_t utf8_seq(const unsigned char *p, size_t avail);

/* Replaces what is not valid UTF-8 (a sequence cut by truncation) with '?'. */
static void utf8_sanitize(char *msg)
{
        unsigned char *p = (unsigned char *)msg;
        size_t len = strlen(msg), n;

        for (size_t i = 0; i < len; i += n) {
                n = p[i] < 0x80 ? 1 : utf8_seq(p + i, len - i);
                if (!n) {
                        p[i] = '?';
                        n = 1;
                }
        }
}

static int fail(struct scan *sc, enum json_scan_fault fault, const char *fmt, ...)
        PRINTF_LIKE(3, 4);

/* Records "<path>: <what> (offset N)" (or "<what> at offset N" at the top). */
static int fail(struct scan *sc, enum json_scan_fault fault, const char *fmt, ...)
{
        struct json_path p;
        char what[160];
        va_list ap;

        va_start(ap, fmt);
        (void)vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        build_path(sc, &p);
        sc->res->offset = sc->pos;
        sc->res->fault = fault;
        if (p.len)
                (void)snprintf(sc->res->message, sizeof(sc->res->message), "%s: %s (offset %zu)",
                               json_path_str(&p), what, sc->pos);
        else
                (void)snprintf(sc->res->message, sizeof(sc->res->message), "%s at offset %zu", what,
                               sc->pos);
        utf8_sanitize(sc->res->message);
        return CM_EPARSE;
}

/* Records "<what> at <path>; the limit is N" (no path at the top). */
static int fail_limit(struct scan *sc, const char *what, unsigned limit)
{
        struct json_path p;

        build_path(sc, &p);
        sc->res->offset = sc->pos;
        sc->res->fault = JSON_SCAN_LIMIT;
        if (p.len)
                (void)snprintf(sc->res->message, sizeof(sc->res->message),
                               "%s at %s; the limit is %u", what, json_path_str(&p), limit);
        else
                (void)snprintf(sc->res->message, sizeof(sc->res->message), "%s; the limit is %u",
                               what, limit);
        utf8_sanitize(sc->res->message);
        return CM_ETOOBIG;
}

/* ---- strings ---- */

#define ONES  0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* Printable ASCII other than '"' and '\\': what a string holds as it is. */
static const unsigned char plain_byte[256] = {
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
        1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

/* True when the 8 bytes at p are printable ASCII other than '"' and '\\'. */
static bool plain8(const unsigned char *p)
{
        uint64_t w, lt20, q, b;

        memcpy(&w, p, sizeof(w));
        lt20 = (w - ONES * 0x20) & ~w;
        q = w ^ (ONES * '"');
        b = w ^ (ONES * '\\');
        q = (q - ONES) & ~q;
        b = (b - ONES) & ~b;
        return ((w | lt20 | q | b) & HIGHS) == 0;
}

/* Where the run of plain bytes starting at pos ends (at len at most): 16 bytes at a time
 * with SSE2 (a signed compare below 0x20 also catches every byte from 0x80), else 8. */
static size_t plain_run(const unsigned char *s, size_t pos, size_t len)
{
#ifdef __SSE2__
        const __m128i space = _mm_set1_epi8(0x20), quote = _mm_set1_epi8('"');
        const __m128i backslash = _mm_set1_epi8('\\');

        while (len - pos >= 16) {
                __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + pos));
                __m128i special = _mm_or_si128(
                        _mm_cmplt_epi8(v, space),
                        _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)));
                unsigned mask = (unsigned)_mm_movemask_epi8(special);

                if (mask)
                        return pos + (size_t)__builtin_ctz(mask);
                pos += 16;
        }
#endif
        while (len - pos >= 8 && plain8(s + pos))
                pos += 8;
        while (pos < len && plain_byte[s[pos]])
                pos++;
        return pos;
}

static int hex4(const unsigned char *p, unsigned *ret)
{
        unsigned v = 0;

        for (int i = 0; i < 4; i++) {
                unsigned c = p[i], d;

                if (c >= '0' && c <= '9')
                        d = c - '0';
                else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
                        d = (c | 0x20) - 'a' + 10;
                else
                        return -1;
                v = v << 4 | d;
        }
        *ret = v;
        return 0;
}

/*
 * Key hashes: 8 bytes at a time over the decoded key, so a key without escapes is hashed
 * straight from the text and one with escapes, decoded, gets the same hash. Seeded once per
 * process (from where the loader put this library and the clock), so colliding keys cannot
 * be prepared in advance.
 */
#define HASH_MUL 0x9E3779B97F4A7C15ULL

struct hasher {
        uint64_t h;
        uint64_t w; /* bytes not yet mixed, little end first */
        unsigned n;
};

static uint64_t hash_seed;
static pthread_once_t hash_seed_once = PTHREAD_ONCE_INIT;

static void hash_seed_init(void)
{
        struct timespec t;

        (void)clock_gettime(CLOCK_MONOTONIC, &t);
        hash_seed =
                ((uint64_t)(uintptr_t)&hash_seed ^ (uint64_t)t.tv_nsec ^ (uint64_t)t.tv_sec << 32) *
                        HASH_MUL |
                1;
}

static void hash_mix(struct hasher *hs, uint64_t w)
{
        hs->h = (hs->h ^ w) * HASH_MUL;
        hs->h ^= hs->h >> 29;
}

/* 8 bytes as a little-endian word (the order hash_feed gathers a partial word in). */
static uint64_t load64le(const unsigned char *p)
{
        uint64_t w;

        memcpy(&w, p, sizeof(w));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        w = __builtin_bswap64(w);
#endif
        return w;
}

static void hash_feed(struct hasher *hs, const unsigned char *p, size_t len)
{
        for (; len && hs->n; p++, len--) {
                hs->w |= (uint64_t)*p << (8 * hs->n);
                if (++hs->n == 8) {
                        hash_mix(hs, hs->w);
                        hs->w = 0;
                        hs->n = 0;
                }
        }
        for (; len >= 8; p += 8, len -= 8)
                hash_mix(hs, load64le(p));
        for (; len; p++, len--)
                hs->w |= (uint64_t)*p << (8 * hs->n++);
}

static uint32_t hash_end(struct hasher *hs)
{
        hash_mix(hs, hs->w ^ (uint64_t)hs->n << 56);
        hs->h *= HASH_MUL;
        return (uint32_t)(hs->h >> 32);
}

/* The hash of the decoded key whose opening quote is at off and closing quote at end, in
 * text of avail bytes. */
static uint32_t key_hash(const unsigned char *s, size_t avail, size_t off, size_t end, bool escaped)
{
        struct hasher hs = { .h = hash_seed };
        unsigned char c[4];
        size_t pos = off + 1, k;

        if (!escaped) {
                const unsigned char *p = s + off + 1;
                size_t n = end - off - 1;

                for (; n >= 8; p += 8, n -= 8)
                        hash_mix(&hs, load64le(p));
                /* the tail in one load: a key is followed by at least '"', ':', a value and
                 * '}', 8 bytes from its last word are readable when len says so */
                if (n && avail >= (size_t)(p - s) + 8) {
                        hs.w = load64le(p) & ((1ULL << (8 * n)) - 1);
                        hs.n = (unsigned)n;
                } else {
                        hash_feed(&hs, p, n);
                }
                return hash_end(&hs);
        }
        while ((k = decode_char(s, &pos, c)) != 0)
                hash_feed(&hs, c, k);
        return hash_end(&hs);
}

/* One \u escape (pos at the backslash); *ret_bytes = its UTF-8 length. */
static int scan_unicode(struct scan *sc, const char *in, size_t *ret_bytes)
{
        const unsigned char *s = sc->s;
        unsigned cp, lo;
        unsigned char enc[4];
        size_t pos, n;

        if (sc->len - sc->pos < 6 || hex4(s + sc->pos + 2, &cp) < 0)
                return fail(sc, JSON_SCAN_SYNTAX, "%s: \\u needs four hex digits", in);
        if (cp == 0)
                return fail(sc, JSON_SCAN_NUL, "%s holds \\u0000", in);
        if (cp >= 0xDC00 && cp < 0xE000)
                return fail(sc, JSON_SCAN_UTF8, "%s holds a lone UTF-16 surrogate \\u%04x", in, cp);
        if (cp >= 0xD800 && cp < 0xDC00) {
                if (sc->len - sc->pos < 12 || s[sc->pos + 6] != '\\' || s[sc->pos + 7] != 'u' ||
                    hex4(s + sc->pos + 8, &lo) < 0 || lo < 0xDC00 || lo >= 0xE000)
                        return fail(sc, JSON_SCAN_UTF8, "%s holds a lone UTF-16 surrogate \\u%04x",
                                    in, cp);
        }
        pos = sc->pos;
        n = decode_char(s, &pos, enc);
        sc->pos = pos;
        *ret_bytes = n;
        return CM_OK;
}

/* One escape (pos at the backslash). */
static int scan_escape(struct scan *sc, const char *in, size_t *ret_bytes)
{
        if (sc->pos + 1 >= sc->len)
                return fail(sc, JSON_SCAN_SYNTAX, "%s does not end", in);
        if (sc->s[sc->pos + 1] == 'u')
                return scan_unicode(sc, in, ret_bytes);
        if (!unescape(sc->s[sc->pos + 1]))
                return fail(sc, JSON_SCAN_SYNTAX, "%s: invalid escape", in);
        sc->pos += 2;
        *ret_bytes = 1;
        return CM_OK;
}

/* Length of the valid UTF-8 sequence at p (lead byte >= 0x80), or 0 (Unicode 15, table
 * 3-7: no overlong forms, no surrogates, nothing past U+10FFFF). */
static size_t utf8_seq(const unsigned char *p, size_t avail)
{
        unsigned c = p[0];
        unsigned lo = 0x80, hi = 0xBF;
        size_t n;

        if (c >= 0xC2 && c <= 0xDF)
                n = 2;
        else if (c >= 0xE0 && c <= 0xEF)
                n = 3;
        else if (c >= 0xF0 && c <= 0xF4)
                n = 4;
        else
                return 0;
        if (c == 0xE0)
                lo = 0xA0;
        else if (c == 0xED)
                hi = 0x9F;
        else if (c == 0xF0)
                lo = 0x90;
        else if (c == 0xF4)
                hi = 0x8F;
        if (avail < n || p[1] < lo || p[1] > hi)
                return 0;
        for (size_t i = 2; i < n; i++)
                if (p[i] < 0x80 || p[i] > 0xBF)
                        return 0;
        return n;
}

/* The rest of a string from pos, its first byte that is not plain (bytes: the plain ones
 * before it): escapes, UTF-8, errors. */
static __attribute__((noinline)) int scan_string_slow(struct scan *sc,
                                                      size_t pos,
                                                      size_t bytes,
                                                      bool *ret_escaped)
{
        const unsigned char *s = sc->s;
        const char *in = ret_escaped ? "key" : "string";
        size_t len = sc->len, n = 0, start;
        bool escaped = false;
        unsigned char c;
        int r;

        /* pos is kept in a local: a store to sc->pos could alias the text (a char load), so
         * the loops would write it back on every byte */
        for (;;) {
                sc->pos = pos;
                if (pos >= len)
                        return fail(sc, JSON_SCAN_SYNTAX, "%s does not end", in);
                c = s[pos];
                if (c == '"')
                        break;
                if (c == '\\' && len - pos > 2 && s[pos + 1] != 'u' && unescape(s[pos + 1])) {
                        pos += 2; /* \" \\ \n ...: one byte, nothing more to check */
                        n = 1;
                        escaped = true;
                } else if (c == '\\') {
                        r = scan_escape(sc, in, &n);
                        if (r < 0)
                                return r;
                        escaped = true;
                        pos = sc->pos;
                } else if (c < 0x20) {
                        return fail(sc, JSON_SCAN_CONTROL, "%s holds control character 0x%02x", in,
                                    c);
                } else {
                        n = utf8_seq(s + pos, len - pos);
                        if (!n)
                                return fail(sc, JSON_SCAN_UTF8,
                                            "%s holds invalid UTF-8 (byte 0x%02x)", in, c);
                        pos += n;
                }
                bytes += n;
                start = pos;
                pos = plain_run(s, pos, len);
                bytes += pos - start;
        }
        sc->pos = pos + 1;
        sc->stats.strings++;
        sc->stats.string_bytes += bytes;
        if (ret_escaped)
                *ret_escaped = escaped;
        return CM_OK;
}

/* The string whose opening quote is at pos; pos ends past the closing quote. *ret_escaped
 * (may be NULL; a key's) says whether it held an escape. Plain strings (most of them)
 * take the short way. */
static inline int scan_string(struct scan *sc, bool *ret_escaped)
{
        size_t pos = plain_run(sc->s, sc->pos + 1, sc->len);

        if (pos < sc->len && sc->s[pos] == '"') {
                sc->stats.strings++;
                sc->stats.string_bytes += pos - sc->pos - 1;
                sc->pos = pos + 1;
                if (ret_escaped)
                        *ret_escaped = false;
                return CM_OK;
        }
        return scan_string_slow(sc, pos, pos - sc->pos - 1, ret_escaped);
}

/* ---- duplicate keys ---- */

static bool keys_equal(const unsigned char *s, uint32_t a, uint32_t b)
{
        size_t pa = a + 1, pb = b + 1, na, nb;
        unsigned char ca[4], cb[4];

        do {
                na = decode_char(s, &pa, ca);
                nb = decode_char(s, &pb, cb);
                if (na != nb || memcmp(ca, cb, na) != 0)
                        return false;
        } while (na);
        return true;
}

static void keys_init(struct keys *k)
{
        k->ents = k->ents_inline;
        k->heads = k->heads_inline;
        k->n = 0;
        k->cap = JSON_SCAN_KEYS_INLINE;
        k->mask = HEADS_INLINE - 1;
        memset(k->heads, 0xFF, sizeof(k->heads_inline));
}

static void keys_release(struct keys *k)
{
        if (k->ents != k->ents_inline) {
                free(k->ents);
                free(k->heads);
        }
}

/* Doubles the table and rebuilds the chains of the hashed objects' entries (in index
 * order, so newest stays first). The open objects' entries are consecutive runs, in the
 * order of the stack: a frame's run ends where the next frame's begins. */
static void keys_grow(struct scan *sc)
{
        struct keys *k = &sc->keys;
        uint32_t cap = k->cap * 2, nheads = cap / 2;
        struct key_ent *ents = xmalloc(cap * sizeof(*ents));
        uint32_t *heads = xmalloc(nheads * sizeof(*heads));

        memcpy(ents, k->ents, k->n * sizeof(*ents));
        memset(heads, 0xFF, nheads * sizeof(*heads));
        for (unsigned d = 0; d < sc->depth; d++) {
                const struct frame *f = &sc->stack[d];
                uint32_t end = d + 1 < sc->depth ? sc->stack[d + 1].keys_base : k->n;

                if (!f->object || !f->hashed)
                        continue;
                for (uint32_t i = f->keys_base; i < end; i++) {
                        ents[i].next = heads[ents[i].hash & (nheads - 1)];
                        heads[ents[i].hash & (nheads - 1)] = i;
                }
        }
        keys_release(k);
        k->ents = ents;
        k->heads = heads;
        k->cap = cap;
        k->mask = nheads - 1;
}

#define BLOOM_MEMBERS 16 /* keys an object checks by filter before it hashes them */

static int keys_reserve(struct scan *sc)
{
        struct keys *k = &sc->keys;

        if (k->n < k->cap)
                return CM_OK;
        if (k->cap >= JSON_SCAN_KEYS_MAX)
                return fail_limit(sc, "more than 65536 object members open at once",
                                  JSON_SCAN_KEYS_MAX);
        keys_grow(sc);
        return CM_OK;
}

/* Adds the key at off (hash h) to the innermost object, a hashed one; CM_EEXIST when it has
 * it. */
static int keys_add(struct scan *sc, uint32_t off, uint32_t h)
{
        struct keys *k = &sc->keys;
        uint32_t base = sc->stack[sc->depth - 1].keys_base;
        int r;

        for (uint32_t i = k->heads[h & k->mask]; i != NONE && i >= base; i = k->ents[i].next)
                if (k->ents[i].hash == h && keys_equal(sc->s, k->ents[i].off, off))
                        return CM_EEXIST;
        r = keys_reserve(sc);
        if (r < 0)
                return r;
        k->ents[k->n] = (struct key_ent){ .hash = h, .off = off, .next = k->heads[h & k->mask] };
        k->heads[h & k->mask] = k->n++;
        return CM_OK;
}

/* The filter bit of a key without escapes: its length and first and last bytes. */
static uint64_t bloom_bit(const unsigned char *key, uint32_t len)
{
        uint64_t x = len ? (uint64_t)len << 16 | (uint64_t)key[0] << 8 | key[len - 1] : 0;

        return 1ULL << ((x * HASH_MUL) >> 58);
}

/* Adds the key at off (len raw bytes, no escape) to the innermost object, an unhashed one;
 * CM_EEXIST when it has it. An unhashed entry keeps the key's length in place of a hash. */
static int keys_add_filtered(struct scan *sc, struct frame *f, uint32_t off, uint32_t len)
{
        struct keys *k = &sc->keys;
        const unsigned char *key = sc->s + off + 1;
        uint64_t bit = bloom_bit(key, len);
        int r;

        if (f->bloom & bit) {
                for (uint32_t i = f->keys_base; i < k->n; i++)
                        if (k->ents[i].hash == len &&
                            memcmp(sc->s + k->ents[i].off + 1, key, len) == 0)
                                return CM_EEXIST;
        }
        r = keys_reserve(sc);
        if (r < 0)
                return r;
        f->bloom |= bit;
        k->ents[k->n++] = (struct key_ent){ .hash = len, .off = off, .next = NONE };
        return CM_OK;
}

/* The innermost object's entries, recorded unhashed, hashed and chained from now on. */
static void keys_hash_object(struct scan *sc, struct frame *f)
{
        struct keys *k = &sc->keys;

        for (uint32_t i = f->keys_base; i < k->n; i++) {
                uint32_t off = k->ents[i].off;
                uint32_t h = key_hash(sc->s, sc->len, off, off + 1 + k->ents[i].hash, false);

                k->ents[i].hash = h;
                k->ents[i].next = k->heads[h & k->mask];
                k->heads[h & k->mask] = i;
        }
        f->hashed = true;
}

/* The key at off (its closing quote at end) into the innermost object f. */
static int keys_put(struct scan *sc, struct frame *f, uint32_t off, size_t end, bool escaped)
{
        uint32_t len = (uint32_t)(end - off - 1);

        if (!f->hashed && !escaped && sc->keys.n - f->keys_base < BLOOM_MEMBERS)
                return keys_add_filtered(sc, f, off, len);
        if (!f->hashed)
                keys_hash_object(sc, f);
        return keys_add(sc, off, key_hash(sc->s, sc->len, off, end, escaped));
}

static void keys_pop(struct keys *k, uint32_t base, bool hashed)
{
        if (!hashed) {
                k->n = base;
                return;
        }
        while (k->n > base) {
                const struct key_ent *e = &k->ents[--k->n];

                k->heads[e->hash & k->mask] = e->next;
        }
}

/* ---- values ---- */

static bool is_ws(unsigned char c)
{
        return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* Inlined with a one-compare way out: minified text has no whitespace at all. */
static inline __attribute__((always_inline)) void skip_ws(struct scan *sc)
{
        if (sc->pos < sc->len && sc->s[sc->pos] > ' ')
                return;
        while (sc->pos < sc->len && is_ws(sc->s[sc->pos]))
                sc->pos++;
}

static bool is_digit(unsigned char c)
{
        return c >= '0' && c <= '9';
}

static size_t digits(struct scan *sc)
{
        size_t start = sc->pos;

        while (sc->pos < sc->len && is_digit(sc->s[sc->pos]))
                sc->pos++;
        return sc->pos - start;
}

static int scan_number(struct scan *sc)
{
        size_t start = sc->pos;

        if (sc->s[sc->pos] == '-')
                sc->pos++;
        if (sc->pos < sc->len && sc->s[sc->pos] == '0')
                sc->pos++;
        else if (!digits(sc))
                return fail(sc, JSON_SCAN_SYNTAX, "number without digits");
        if (sc->pos < sc->len && sc->s[sc->pos] == '.') {
                sc->pos++;
                if (!digits(sc))
                        return fail(sc, JSON_SCAN_SYNTAX, "number without digits after '.'");
        }
        if (sc->pos < sc->len && (sc->s[sc->pos] | 0x20) == 'e') {
                sc->pos++;
                if (sc->pos < sc->len && (sc->s[sc->pos] == '+' || sc->s[sc->pos] == '-'))
                        sc->pos++;
                if (!digits(sc))
                        return fail(sc, JSON_SCAN_SYNTAX, "number without digits in the exponent");
        }
        if (sc->pos < sc->len && is_digit(sc->s[sc->pos]))
                return fail(sc, JSON_SCAN_SYNTAX, "number with a leading zero");
        if (sc->pos - start > JSON_SCAN_NUMBER_MAX) {
                size_t n = sc->pos - start;

                sc->pos = start;
                return fail(sc, JSON_SCAN_NUMBER, "number of %zu characters; the limit is %d", n,
                            JSON_SCAN_NUMBER_MAX);
        }
        return CM_OK;
}

static int scan_literal(struct scan *sc)
{
        static const char *const words[] = { "true", "false", "null" };

        for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
                size_t n = strlen(words[i]);

                if (sc->len - sc->pos >= n && memcmp(sc->s + sc->pos, words[i], n) == 0) {
                        sc->pos += n;
                        return CM_OK;
                }
        }
        return fail(sc, JSON_SCAN_SYNTAX, "expected a JSON value");
}

static int push(struct scan *sc, bool object)
{
        char what[64];

        if (sc->depth == sc->max_depth) {
                (void)snprintf(what, sizeof(what), "JSON nested more than %u levels deep",
                               sc->max_depth);
                return fail_limit(sc, what, sc->max_depth);
        }
        sc->stack[sc->depth++] =
                (struct frame){ .object = object, .key_off = NONE, .keys_base = sc->keys.n };
        if (sc->depth > sc->stats.depth)
                sc->stats.depth = sc->depth;
        sc->pos++;
        return CM_OK;
}

/* A scalar or the opening of a container (pos at its first byte). */
static int scan_value_start(struct scan *sc)
{
        unsigned char c;

        if (sc->pos >= sc->len)
                return fail(sc, JSON_SCAN_SYNTAX, "expected a JSON value, got the end");
        c = sc->s[sc->pos];
        sc->stats.values++;
        if (c == '{' || c == '[')
                return push(sc, c == '{');
        if (c == '"')
                return scan_string(sc, NULL);
        if (c == '-' || is_digit(c))
                return scan_number(sc);
        if (c == 't' || c == 'f' || c == 'n')
                return scan_literal(sc);
        if (c >= 0x20 && c < 0x7F)
                return fail(sc, JSON_SCAN_SYNTAX, "unexpected '%c'", c);
        return fail(sc, JSON_SCAN_SYNTAX, "unexpected byte 0x%02x", c);
}

/* A member's key and colon (pos at the key's quote). */
static int scan_key(struct scan *sc)
{
        struct frame *f = &sc->stack[sc->depth - 1];
        uint32_t off = (uint32_t)sc->pos;
        bool escaped;
        int r;

        f->key_off = NONE; /* an error in the key names the object */
        if (sc->pos >= sc->len || sc->s[sc->pos] != '"')
                return fail(sc, JSON_SCAN_SYNTAX, "expected a key");
        r = scan_string(sc, &escaped);
        if (r < 0)
                return r;
        sc->stats.members++;
        f->key_off = off;
        f->key_len = (uint32_t)(sc->pos - 2 - off);
        f->key_escaped = escaped;
        r = keys_put(sc, f, off, sc->pos - 1, escaped);
        if (r == CM_EEXIST) {
                sc->pos = off;
                return fail(sc, JSON_SCAN_DUPLICATE, "duplicate key");
        }
        if (r < 0)
                return r;
        skip_ws(sc);
        if (sc->pos >= sc->len || sc->s[sc->pos] != ':')
                return fail(sc, JSON_SCAN_SYNTAX, "expected ':' after the key");
        sc->pos++;
        skip_ws(sc);
        f->value_off = (uint32_t)sc->pos;
        return CM_OK;
}

/* Hands the member of the innermost object whose value just ended to the caller. */
static void report_member(struct scan *sc)
{
        const struct frame *f = &sc->stack[sc->depth - 1];
        const struct frame *parent = sc->depth > 1 ? &sc->stack[sc->depth - 2] : NULL;

        if (!f->object || f->key_off == NONE || sc->depth > sc->members->depth)
                return;
        sc->members->fn(
                sc->members->ud,
                &(struct json_scan_member){
                        .depth = sc->depth,
                        .key_off = f->key_off,
                        .key_len = f->key_len,
                        .key_escaped = f->key_escaped,
                        .parent_key_off = parent && parent->object ? parent->key_off : SIZE_MAX,
                        .parent_key_len = parent && parent->object ? parent->key_len : 0,
                        .parent_key_escaped = parent && parent->object && parent->key_escaped,
                        .value_off = f->value_off,
                        .value_end = sc->pos,
                });
}

/* After a value: a comma, or the end of the innermost container(s). *ret_more: a value
 * (after its key, in an object) comes next. */
static int scan_after_value(struct scan *sc, bool *ret_more)
{
        struct frame *f;
        unsigned char c;

        for (;;) {
                if (sc->members && sc->depth)
                        report_member(sc);
                skip_ws(sc);
                if (!sc->depth) {
                        *ret_more = false;
                        if (sc->pos != sc->len)
                                return fail(sc, JSON_SCAN_SYNTAX,
                                            "trailing bytes after the JSON value");
                        return CM_OK;
                }
                f = &sc->stack[sc->depth - 1];
                if (sc->pos >= sc->len)
                        return fail(sc, JSON_SCAN_SYNTAX, "%s does not end",
                                    f->object ? "object" : "array");
                c = sc->s[sc->pos];
                if (c == ',') {
                        sc->pos++;
                        skip_ws(sc);
                        *ret_more = true;
                        if (f->object)
                                return scan_key(sc);
                        f->index++;
                        return CM_OK;
                }
                if (c != (f->object ? '}' : ']'))
                        return fail(sc, JSON_SCAN_SYNTAX, "expected ',' or '%c'",
                                    f->object ? '}' : ']');
                if (f->object)
                        keys_pop(&sc->keys, f->keys_base, f->hashed);
                sc->depth--;
                sc->pos++;
        }
}

/* Just after an opening bracket: the first member or element, or the close. */
static int scan_open(struct scan *sc, bool *ret_more)
{
        const struct frame *f = &sc->stack[sc->depth - 1];

        skip_ws(sc);
        if (sc->pos < sc->len && sc->s[sc->pos] == (f->object ? '}' : ']'))
                return scan_after_value(sc, ret_more);
        *ret_more = true;
        return f->object ? scan_key(sc) : CM_OK;
}

static int scan_document(struct scan *sc)
{
        bool more = true;
        int r;

        skip_ws(sc);
        while (more) {
                unsigned depth = sc->depth;

                r = scan_value_start(sc);
                if (r < 0)
                        return r;
                r = sc->depth > depth ? scan_open(sc, &more) : scan_after_value(sc, &more);
                if (r < 0)
                        return r;
        }
        return CM_OK;
}

static int check_limits(struct scan *sc)
{
        const struct json_scan_stats *st = &sc->stats;
        const struct json_scan_limits *lim = sc->lim;

        if (!lim)
                return CM_OK;
        if (lim->max_values && st->values > lim->max_values) {
                sc->res->fault = JSON_SCAN_LIMIT;
                (void)snprintf(sc->res->message, sizeof(sc->res->message),
                               "%zu JSON values; the limit is %zu", st->values, lim->max_values);
                return CM_ETOOBIG;
        }
        if (lim->max_string_bytes && st->string_bytes > lim->max_string_bytes) {
                sc->res->fault = JSON_SCAN_LIMIT;
                (void)snprintf(sc->res->message, sizeof(sc->res->message),
                               "%zu bytes of JSON strings; the limit is %zu", st->string_bytes,
                               lim->max_string_bytes);
                return CM_ETOOBIG;
        }
        return CM_OK;
}

int json_scan(const char *text,
              size_t len,
              const struct json_scan_limits *lim,
              struct json_scan_result *ret)
{
        return json_scan_members(text, len, lim, NULL, ret);
}

int json_scan_members(const char *text,
                      size_t len,
                      const struct json_scan_limits *lim,
                      const struct json_scan_members *members,
                      struct json_scan_result *ret)
{
        struct scan scan, *sc = &scan;
        int r;

        ret->stats = (struct json_scan_stats){ 0 };
        ret->fault = JSON_SCAN_NONE;
        ret->offset = 0;
        ret->message[0] = '\0';
        if (len >= NONE) {
                ret->fault = JSON_SCAN_LIMIT;
                (void)snprintf(ret->message, sizeof(ret->message),
                               "%zu bytes of JSON; the limit is %u", len, NONE - 1);
                return CM_ETOOBIG;
        }
        sc->s = (const unsigned char *)text;
        sc->len = len;
        sc->pos = 0;
        sc->lim = lim;
        sc->members = members;
        sc->res = ret;
        sc->stats = (struct json_scan_stats){ 0 };
        sc->depth = 0;
        sc->max_depth = lim && lim->max_depth && lim->max_depth < JSON_SCAN_DEPTH_MAX
                                ? lim->max_depth
                                : JSON_SCAN_DEPTH_MAX;
        (void)pthread_once(&hash_seed_once, hash_seed_init);
        keys_init(&sc->keys);
        r = scan_document(sc);
        if (r == 0)
                r = check_limits(sc);
        ret->stats = sc->stats;
        keys_release(&sc->keys);
        return r;
}

bool json_scan_key_is(const char *text, size_t key_off, const char *name)
{
        const unsigned char *s = (const unsigned char *)text;
        size_t pos = key_off + 1, k, i = 0, n = strlen(name);
        unsigned char c[4];

        /* the raw bytes decide unless the key holds an escape before they differ */
        while (i < n && s[pos] == (unsigned char)name[i]) {
                pos++;
                i++;
        }
        if (s[pos] != '\\')
                return i == n && s[pos] == '"';
        while ((k = decode_char(s, &pos, c)) != 0) {
                if (k > n - i || memcmp(c, name + i, k) != 0)
                        return false;
                i += k;
        }
        return i == n;
}

char *json_scan_string_dup(const char *text, size_t off)
{
        const unsigned char *s = (const unsigned char *)text;
        size_t pos = off + 1, end = pos, n = 0, k;
        unsigned char c[4];
        char *out;

        while (s[end] != '"' && s[end] != '\\')
                end++;
        if (s[end] == '"')
                return xstrndup(text + pos, end - pos);
        while ((k = decode_char(s, &pos, c)) != 0)
                n += k;
        out = xmalloc(n + 1);
        pos = off + 1;
        n = 0;
        while ((k = decode_char(s, &pos, c)) != 0) {
                memcpy(out + n, c, k);
                n += k;
        }
        out[n] = '\0';
        return out;
}

size_t json_scan_string_into(const char *text, size_t off, size_t end, char *out)
{
        const unsigned char *s = (const unsigned char *)text;
        size_t n = end - off - 2, pos = off + 1, len = 0, k;
        unsigned char c[4];

        if (!memchr(text + off + 1, '\\', n)) {
                memcpy(out, text + off + 1, n);
                out[n] = '\0';
                return n;
        }
        while ((k = decode_char(s, &pos, c)) != 0) {
                memcpy(out + len, c, k);
                len += k;
        }
        out[len] = '\0';
        return len;
}

char *json_scan_string_value(const char *text, size_t off, size_t end)
{
        size_t n = end - off - 2;
        char *out;

        if (memchr(text + off + 1, '\\', n))
                return json_scan_string_dup(text, off);
        out = xmalloc(n + 1);
        memcpy(out, text + off + 1, n);
        out[n] = '\0';
        return out;
}

size_t json_scan_tree_bytes(const struct json_scan_stats *st)
{
        return st->values * ITEM_BYTES + st->string_bytes + st->strings * STRING_OVERHEAD;
}

/* ---- trees of accepted text ---- */

struct tree {
        const unsigned char *s;
        size_t pos, end;
};

static cJSON *tree_item(int type)
{
        cJSON *item = cJSON_malloc(sizeof(*item));

        if (item) {
                memset(item, 0, sizeof(*item));
                item->type = type;
        }
        return item;
}

/* The string whose opening quote is at pos, decoded into cJSON's allocator (NULL when it
 * fails); pos ends past the closing quote. */
static char *tree_string(struct tree *t)
{
        const unsigned char *s = t->s;
        size_t start = t->pos + 1, end = start, pos = start, n = 0, k;
        bool escaped = false;
        unsigned char c[4];
        char *out;

        for (;;) { /* to the closing quote: an escape is skipped whole, UTF-8 byte by byte */
                end = plain_run(s, end, t->end);
                if (s[end] == '"')
                        break;
                if (s[end] == '\\') {
                        escaped = true;
                        end++;
                }
                end++;
        }
        t->pos = end + 1;
        out = cJSON_malloc(end - start + 1); /* escapes only shrink */
        if (!out)
                return NULL;
        if (!escaped) {
                memcpy(out, s + start, end - start);
                n = end - start;
        } else {
                while ((k = decode_char(s, &pos, c)) != 0) {
                        memcpy(out + n, c, k);
                        n += k;
                }
        }
        out[n] = '\0';
        return out;
}

/* An integer of at most 15 digits at pos (no fraction, no exponent) as a double: exact, so
 * what strtod gives; false, pos unmoved, for any other number. */
static bool small_integer(struct tree *t, double *ret)
{
        size_t pos = t->pos, digits = 0;
        bool neg = t->s[pos] == '-';
        uint64_t u = 0;

        pos += neg;
        for (; pos < t->end && is_digit(t->s[pos]) && digits <= 15; pos++, digits++)
                u = u * 10 + (uint64_t)(t->s[pos] - '0');
        if (digits > 15 || (pos < t->end && (t->s[pos] == '.' || (t->s[pos] | 0x20) == 'e')))
                return false;
        *ret = neg ? -(double)u : (double)u; /* "-0" is -0.0, as strtod reads it */
        t->pos = pos;
        return true;
}

/* As cJSON's parse_number: strtod over the number with the locale's decimal point, valueint
 * saturated (a small integer, exact either way, without strtod). */
static cJSON *tree_number(struct tree *t)
{
        char buf[JSON_SCAN_NUMBER_MAX + 1];
        size_t n = 0;
        cJSON *item = tree_item(cJSON_Number);
        double v;

        if (!item)
                return NULL;
        if (small_integer(t, &v))
                goto out;
        while (t->pos < t->end && n < JSON_SCAN_NUMBER_MAX) {
                unsigned char ch = t->s[t->pos];

                if (ch == '.')
                        ch = (unsigned char)localeconv()->decimal_point[0];
                else if (!is_digit(ch) && ch != '-' && ch != '+' && (ch | 0x20) != 'e')
                        break;
                buf[n++] = (char)ch;
                t->pos++;
        }
        buf[n] = '\0';
        v = strtod(buf, NULL);
out:
        item->valuedouble = v;
        if (v >= INT_MAX)
                item->valueint = INT_MAX;
        else if (v <= (double)INT_MIN)
                item->valueint = INT_MIN;
        else
                item->valueint = (int)v;
        return item;
}

/* Inlined with a one-compare way out, as skip_ws. */
static inline __attribute__((always_inline)) void tree_ws(struct tree *t)
{
        if (t->pos < t->end && t->s[t->pos] > ' ')
                return;
        while (t->pos < t->end && is_ws(t->s[t->pos]))
                t->pos++;
}

static cJSON *tree_value(struct tree *t);

/* The object or array at pos (its members in order, linked as cJSON links them: the first
 * child's prev is the last). */
static cJSON *tree_container(struct tree *t, bool object)
{
        cJSON *item = tree_item(object ? cJSON_Object : cJSON_Array);
        cJSON *last = NULL, *child;
        char *key = NULL;

        if (!item)
                return NULL;
        t->pos++;
        tree_ws(t);
        if (t->s[t->pos] == (object ? '}' : ']')) {
                t->pos++;
                return item;
        }
        for (;;) {
                if (object) {
                        key = tree_string(t);
                        if (!key)
                                goto fail;
                        tree_ws(t);
                        t->pos++; /* ':' */
                        tree_ws(t);
                }
                child = tree_value(t);
                if (!child)
                        goto fail;
                child->string = key;
                key = NULL;
                if (last) {
                        last->next = child;
                        child->prev = last;
                } else {
                        item->child = child;
                }
                last = child;
                tree_ws(t);
                if (t->s[t->pos++] != ',')
                        break; /* the closing bracket */
                tree_ws(t);
        }
        item->child->prev = last;
        return item;
fail:
        cJSON_free(key);
        cJSON_Delete(item);
        return NULL;
}

static cJSON *tree_value(struct tree *t)
{
        cJSON *item;

        switch (t->s[t->pos]) {
        case '{':
        case '[':
                return tree_container(t, t->s[t->pos] == '{');
        case '"':
                item = tree_item(cJSON_String);
                if (item && !(item->valuestring = tree_string(t))) {
                        cJSON_free(item);
                        item = NULL;
                }
                return item;
        case 't':
                t->pos += 4;
                item = tree_item(cJSON_True);
                if (item)
                        item->valueint = 1;
                return item;
        case 'f':
                t->pos += 5;
                return tree_item(cJSON_False);
        case 'n':
                t->pos += 4;
                return tree_item(cJSON_NULL);
        default:
                return tree_number(t);
        }
}

cJSON *json_scan_tree(const char *text, size_t off, size_t end)
{
        struct tree t = { .s = (const unsigned char *)text, .pos = off, .end = end };

        tree_ws(&t);
        return t.pos < end ? tree_value(&t) : NULL;
}
