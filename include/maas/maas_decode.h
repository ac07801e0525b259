#pragma once
/*
 * maas_decode: JSON decoders behind maas_client.h's typed results (split out so the
 * client's transport logic and the MAAS object shapes stay in separate files). Each
 * *_from_json fills *ret only on success (CM_EPARSE otherwise); the caller owns the result.
 * Pure functions; thread-safe.
 */

#include <cjson/cJSON.h>

#include "compiler.h"
#include "maas_client.h"

void maas_strv_release(struct maas_strv *v);
/* Strings of arr; with sub_key, the string member sub_key of each object element. */
void maas_strv_from_json(const cJSON *arr, const char *sub_key, struct maas_strv *ret);
MUST_CHECK int maas_node_list_from_json(const cJSON *arr, struct maas_node_list *ret);
/* The same from the text of a JSON array (len bytes), one element parsed at a time: the
 * memory a list of thousands of machines needs is its decoded nodes and one element's
 * tree, not a tree of the whole answer (about five times its text). */
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
