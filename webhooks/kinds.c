/*
 * kinds: dispatch of defaulting and validation by kind. The rules themselves arrive with
 * issue #3; until then every well-formed review is allowed unchanged.
 */
#include "admission.h"
#include "webhook_kinds.h"

void webhook_default(const char *kind,
                     const struct admission_request *req,
                     struct admission_response *resp)
{
        (void)kind;
        (void)req;
        resp->allowed = true;
}

void webhook_validate(const char *kind,
                      const struct admission_request *req,
                      struct admission_response *resp)
{
        (void)kind;
        (void)req;
        resp->allowed = true;
}
