#pragma once
/*
 * maas_decode: JSON decoders behind maas_client.h's typed results (split out so the
 * client's transport logic and the MAAS object shapes stay in separate files). Each
 * *_from_json fills *ret only on success (CM_EPARSE otherwise); the caller owns the result.
 * Pure functions; thread-safe.
 */

#include <cjson/cJSON.h>

#include "compiler.h"
#include "json_split.h"
#include "maas_client.h"

void maas_strv_release(struct maas_strv *v);
/* Strings of arr; with sub_key, the string member sub_key of each object element. */
void maas_strv_from_json(const cJSON *arr, const char *sub_key, struct maas_strv *ret);
MUST_CHECK int maas_node_list_from_json(const cJSON *arr, struct maas_node_list *ret);

/* The machines of a list, decoded as its text arrives (a streamed body): each element of
 * the top-level array is split out (json_split.h), parsed, decoded into the list and its
 * text and tree freed, so the memory a list of thousands of machines needs is its decoded
 * nodes and one element, not the body (nor a tree of it, about five times the text).
 * Bounds: one machine's JSON at most MAAS_MACHINE_JSON_MAX bytes, MAAS_MACHINES_MAX
 * machines (CM_ETOOBIG past either, naming the limit); CM_EPARSE for a body that is not an
 * array of machines. Errors are sticky until reset; message says why (names the machine's
 * index or the offset, never its content).
 * Ownership: the stream owns what it decoded until finish hands it over. One owner. */
#define MAAS_MACHINE_JSON_MAX (1024 * 1024)
#define MAAS_MACHINES_MAX     1000000

struct maas_node_stream {
        struct json_split split;     /* private */
        struct maas_node_list nodes; /* decoded so far (private) */
        size_t cap;                  /* private */
        char message[200];           /* why the last call failed; "" otherwise */
};

void maas_node_stream_init(struct maas_node_stream *ns);
/* Drops what was decoded so far and starts over (before a retried request). */
void maas_node_stream_reset(struct maas_node_stream *ns);
void maas_node_stream_release(struct maas_node_stream *ns);
/* The next n bytes of the body: 0, CM_EPARSE or CM_ETOOBIG. */
MUST_CHECK int maas_node_stream_feed(struct maas_node_stream *ns, const char *data, size_t n);
/* The body ended: on 0 the machines move to *ret (the caller's); CM_EPARSE when the array
 * was not complete. */
MUST_CHECK int maas_node_stream_finish(struct maas_node_stream *ns, struct maas_node_list *ret);
/* The same over a whole text (len bytes): maas_node_stream over one chunk. */
MUST_CHECK int maas_node_list_from_text(const char *text, size_t len, struct maas_node_list *ret);
MUST_CHECK int maas_named_list_from_json(const cJSON *arr, struct maas_named_list *ret);
MUST_CHECK int maas_boot_resource_list_from_json(const cJSON *arr,
                                                 struct maas_boot_resource_list *ret);
MUST_CHECK int maas_dns_resource_from_json(const cJSON *o, struct maas_dns_resource *ret);
MUST_CHECK int maas_dns_list_from_json(const cJSON *arr, struct maas_dns_list *ret);
MUST_CHECK int maas_version_from_json(const cJSON *o, struct maas_version *ret);
MUST_CHECK int maas_user_from_json(const cJSON *o, struct maas_user *ret);
MUST_CHECK int maas_subnet_list_from_json(const cJSON *arr, struct maas_subnet_list *ret);
MUST_CHECK int maas_interface_from_json(const cJSON *o, struct maas_interface *ret);
MUST_CHECK int maas_interface_list_from_json(const cJSON *arr, struct maas_interface_list *ret);
