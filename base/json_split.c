/*
 * json_split: a byte-at-a-time state machine over a top-level array (json_split.h). Inside
 * an element the bytes are copied in runs (one buf_append per run within a chunk), so the
 * cap is checked before anything past it is stored.
 */
#include "json_split.h"

#include <stdio.h>
#include <string.h>

#include "err.h"

enum {
        S_BEFORE, /* before the '[' */
        S_FIRST,  /* after the '[': an element or ']' */
        S_NEXT,   /* after a ',': an element */
        S_ELEM,   /* inside an element */
        S_AFTER,  /* after the ']': whitespace only */
};

static bool is_space(char c)
{
        return (unsigned char)c <= ' ';
}

static const char *what(const struct json_split *s)
{
        return s->o.what ? s->o.what : "element";
}

void json_split_init(struct json_split *s, const struct json_split_opts *o)
{
        *s = (struct json_split){ .o = *o };
        if (!s->o.max_elem)
                s->o.max_elem = JSON_SPLIT_ELEM_MAX;
        buf_init(&s->elem, s->o.max_elem);
}

void json_split_reset(struct json_split *s)
{
        buf_reset(&s->elem);
        s->n_elems = 0;
        s->offset = 0;
        s->err = 0;
        s->message[0] = '\0';
        s->state = S_BEFORE;
        s->in_str = false;
        s->esc = false;
        s->ws = false;
        s->depth = 0;
}

void json_split_release(struct json_split *s)
{
        buf_release(&s->elem);
}

bool json_split_done(const struct json_split *s)
{
        return s->state == S_AFTER && !s->err;
}

static int fail(struct json_split *s, int err, const char *why, size_t at)
{
        s->err = err;
        (void)snprintf(s->message, sizeof(s->message), "%s (offset %zu)", why, at);
        return err;
}

static int too_big(struct json_split *s, size_t at)
{
        s->err = CM_ETOOBIG;
        (void)snprintf(s->message, sizeof(s->message),
                       "%s %zu of the array (offset %zu) is over %zu bytes of JSON, the limit",
                       what(s), s->n_elems, at, s->o.max_elem);
        return CM_ETOOBIG;
}

/* Adds p[0, n) to the element; at is the offset of p[n] (for the message). */
static int take(struct json_split *s, const char *p, size_t n, size_t at)
{
        if (n && buf_append(&s->elem, p, n) < 0)
                return too_big(s, at);
        return 0;
}

/* The element in the buffer is complete (without the whitespace after it): hands it over. */
static int hand_over(struct json_split *s, size_t at)
{
        int r;

        if (s->o.max_elems && s->n_elems >= s->o.max_elems) {
                s->err = CM_ETOOBIG;
                (void)snprintf(s->message, sizeof(s->message),
                               "more than %zu %ss in the array (offset %zu), the limit",
                               s->o.max_elems, what(s), at);
                return CM_ETOOBIG;
        }
        r = s->o.fn(s->o.arg, s->elem.data, s->elem.len);
        buf_reset(&s->elem);
        s->n_elems++;
        if (r)
                s->err = r;
        return r;
}

/* Outside an element: one byte. */
static int between(struct json_split *s, char c, size_t at)
{
        if (s->state == S_AFTER) /* JSON's own whitespace only, as json_parse */
                return c == ' ' || c == '\t' || c == '\n' || c == '\r'
                               ? 0
                               : fail(s, CM_EPARSE, "bytes after the array", at);
        if (is_space(c))
                return 0;
        switch (s->state) {
        case S_BEFORE:
                if (c != '[')
                        return fail(s, CM_EPARSE, "the body is not a JSON array", at);
                s->state = S_FIRST;
                return 0;
        default:
                break;
        }
        if (c == ']' && s->state == S_FIRST) {
                s->state = S_AFTER;
                return 0;
        }
        if (c == ',' || c == ']')
                return fail(s, CM_EPARSE, "an empty element in the array", at);
        if (c == '}')
                return fail(s, CM_EPARSE, "a '}' where an element starts", at);
        s->state = S_ELEM;
        s->depth = 0;
        s->in_str = false;
        s->esc = false;
        s->ws = false;
        return 1; /* this byte starts an element */
}

/* Inside a string: the length of the run up to and including its closing quote, or n. */
static size_t string_run(struct json_split *s, const char *p, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                if (s->esc)
                        s->esc = false;
                else if (p[i] == '\\')
                        s->esc = true;
                else if (p[i] == '"') {
                        s->in_str = false;
                        return i + 1;
                }
        }
        return n;
}

/* Inside an element, outside strings: the index of the ',' or ']' that ends it (or of a
 * stray '}'), of whitespace outside any nesting, or n, following the nesting on the way;
 * at a string's opening quote, the length up to and including it, with *ret_str set (the
 * caller scans the string). */
static size_t elem_run(struct json_split *s, const char *p, size_t n, bool *ret_str)
{
        for (size_t i = 0; i < n; i++) {
                switch (p[i]) {
                case '"':
                        *ret_str = true;
                        return i + 1;
                case '[':
                case '{':
                        s->depth++;
                        break;
                case ']':
                case '}':
                        if (s->depth == 0)
                                return i;
                        s->depth--;
                        break;
                case ',':
                        if (s->depth == 0)
                                return i;
                        break;
                default:
                        if (s->depth == 0 && is_space(p[i]))
                                return i;
                        break;
                }
        }
        return n;
}

/* Whitespace outside any nesting is not stored: after the element it is not part of it,
 * and inside it (two values, "1 2", or a broken token, "tr ue") the element is not JSON
 * whatever the spaces were, so one ' ' keeps it so. Returns 0 or the cap's error. */
static int pending_space(struct json_split *s, char c, size_t at)
{
        bool ends = c == ',' || c == ']' || c == '}';

        if (!s->ws)
                return 0;
        s->ws = false;
        return ends ? 0 : take(s, " ", 1, at);
}

/* Inside an element: consumes what it can of p[0, n); *used is how much. */
static int in_elem(struct json_split *s, const char *p, size_t n, size_t *used)
{
        size_t i = 0, k;
        bool str;
        int r;

        *used = 0;
        while (i < n) {
                if (s->in_str) {
                        k = string_run(s, p + i, n - i);
                        r = take(s, p + i, k, s->offset + i + k);
                        i += k;
                        *used = i;
                        if (r)
                                return r;
                        continue;
                }
                if (s->depth == 0 && is_space(p[i])) {
                        s->ws = true;
                        *used = ++i;
                        continue;
                }
                r = s->depth == 0 ? pending_space(s, p[i], s->offset + i) : 0;
                if (r)
                        return r;
                str = false;
                k = elem_run(s, p + i, n - i, &str);
                r = take(s, p + i, k, s->offset + i + k);
                i += k;
                *used = i;
                if (r)
                        return r;
                if (str) {
                        s->in_str = true;
                        continue;
                }
                if (i == n || is_space(p[i]))
                        continue;
                /* p[i] ends the element: ',' or ']', or a stray '}' */
                if (p[i] == '}')
                        return fail(s, CM_EPARSE, "a '}' closes the array", s->offset + i);
                s->state = p[i] == ']' ? S_AFTER : S_NEXT;
                *used = i + 1;
                return hand_over(s, s->offset + i);
        }
        return 0;
}

int json_split_feed(struct json_split *s, const char *data, size_t n)
{
        size_t i = 0, used;
        int r;

        if (s->err)
                return s->err;
        while (i < n) {
                if (s->state != S_ELEM) {
                        r = between(s, data[i], s->offset);
                        if (r < 0)
                                return r;
                        if (r == 0) {
                                i++;
                                s->offset++;
                                continue;
                        }
                }
                used = 0;
                r = in_elem(s, data + i, n - i, &used);
                i += used;
                s->offset += used;
                if (r)
                        return r;
                if (s->err)
                        return s->err;
        }
        return 0;
}

int json_split_finish(struct json_split *s)
{
        if (s->err)
                return s->err;
        if (s->state != S_AFTER)
                return fail(s, CM_EPARSE,
                            s->state == S_BEFORE ? "the body is empty, not a JSON array"
                                                 : "the body ended inside the array",
                            s->offset);
        return 0;
}
