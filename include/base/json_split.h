#pragma once
/*
 * json_split: the streaming form of json_array_each (json.h). Bytes of a top-level JSON
 * array are fed in chunks as they arrive (chunk boundaries anywhere: inside a string, an
 * escape or a number); each element is handed to fn as soon as its last byte is in, then
 * its text is dropped. Memory is one element (at most max_elem bytes), not the body.
 *
 * The grammar is json_array_each's, so the two agree on every input (the fuzz driver
 * tests/fuzz/fuzz_json_array.c checks it): whitespace is any byte up to ' '; an element
 * ends at a ',' or ']' outside strings and nested brackets (bracket kinds are not matched
 * here: a mismatch is left to the element's own parse); an element is handed over without
 * the whitespace around it; only JSON's whitespace (space, tab, CR, LF) may follow the
 * closing ']'. One difference: whitespace outside any nesting inside an element ("1  2",
 * which no parser accepts) is handed over as one ' ' (it is not stored, so it cannot grow
 * the element).
 *
 * Errors are sticky (every later call returns the first one) and described in message:
 *  - CM_EPARSE: not an array, an empty element ("[1,]"), a '}' closing the array, bytes
 *    after the array, or (json_split_finish) a body that ended before the array did;
 *  - CM_ETOOBIG: an element over max_elem bytes, or more than max_elems elements;
 *  - fn's own nonzero return, passed back as is (message "").
 *
 * Ownership: the splitter owns its element buffer (json_split_release). Not thread-safe:
 * one owner, which may call from any thread.
 */

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "compiler.h"
#include "json.h"

/* Default cap on one element's text. */
#define JSON_SPLIT_ELEM_MAX (1024 * 1024)

struct json_split_opts {
        json_elem_fn *fn; /* receives each element (borrowed text, valid during the call) */
        void *arg;
        size_t max_elem;  /* bytes of one element (as handed over); 0 = 1 MiB */
        size_t max_elems; /* elements at most; 0 = no limit */
        const char *what; /* names an element in messages ("machine"); NULL = "element" */
};

struct json_split {
        struct json_split_opts o;
        struct buf elem;   /* the element being read (private) */
        size_t n_elems;    /* elements handed over so far */
        size_t offset;     /* bytes fed so far */
        int err;           /* the sticky error, 0 while all is well */
        char message[160]; /* why err, naming the offset or the limit; "" otherwise */
        /* scanner state (private) */
        unsigned char state;
        bool in_str;
        bool esc;
        bool ws; /* whitespace outside nesting since the last stored byte */
        size_t depth;
};

/* Prepares s; o is copied. */
void json_split_init(struct json_split *s, const struct json_split_opts *o);
/* Starts over with nothing read (a retried request); keeps the options and the memory. */
void json_split_reset(struct json_split *s);
/* Frees the element buffer; s may be re-initialised after. */
void json_split_release(struct json_split *s);
/* Feeds n more bytes of the body (data may be NULL when n is 0). 0 while the array is
 * well formed so far; otherwise the sticky error. */
MUST_CHECK int json_split_feed(struct json_split *s, const char *data, size_t n);
/* The body ended: 0 when it held one complete array, else CM_EPARSE (truncated) or the
 * sticky error. */
MUST_CHECK int json_split_finish(struct json_split *s);
/* True once the closing ']' has been read. */
bool json_split_done(const struct json_split *s);
