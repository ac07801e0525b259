#pragma once
/*
 * webhook_kinds: per-kind defaulting and validation, dispatched by kind name. Private to
 * the webhooks library. Both functions fill resp (allowed, denial, warnings, patch) and
 * never block.
 */

struct admission_request;
struct admission_response;

void webhook_default(const char *kind,
                     const struct admission_request *req,
                     struct admission_response *resp);
void webhook_validate(const char *kind,
                      const struct admission_request *req,
                      struct admission_response *resp);
