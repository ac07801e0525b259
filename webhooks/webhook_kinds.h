#pragma once
/*
 * webhook_kinds: per-kind defaulting and validation, dispatched by kind name. Private to
 * the webhooks library. The functions fill resp (allowed, denial, warnings, patch); only
 * webhook_validate_maas may wait, and for at most the inventory's bounded miss refresh.
 */

struct admission_request;
struct admission_response;
struct maas_inventory;

void webhook_default(const char *kind,
                     const struct admission_request *req,
                     struct admission_response *resp);
void webhook_validate(const char *kind,
                      const struct admission_request *req,
                      struct admission_response *resp);
/* webhook_validate plus the checks against MAAS when inv is not NULL (borrowed). May wait
 * up to the inventory's miss wait (2 s) for one refresh when a name is not in the cache. */
void webhook_validate_maas(const char *kind,
                           const struct admission_request *req,
                           struct maas_inventory *inv,
                           struct admission_response *resp);
