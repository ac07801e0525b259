/*
 * libFuzzer driver for the admission path: admission_request_decode() on the raw input;
 * for every review that decodes, the defaulting and validation of all four kinds on its
 * object (whatever request.kind says) and admission_response_encode(). Invariants checked:
 * a denial carries a code and a message, an allowed validation carries no patch, and every
 * encoded response is JSON.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../../webhooks/webhook_kinds.h"
#include "admission.h"
#include "xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const kinds[] = { "MaasCluster", "MaasMachine", "MaasMachineTemplate",
                                     "MaasClusterTemplate" };

static void encode_and_check(const struct admission_request *req,
                             const struct admission_response *resp)
{
        char *json = NULL;
        cJSON *back;

        if (!resp->allowed && (!resp->message || !resp->message[0]))
                abort();
        if (admission_response_encode(req, resp, &json) != 0)
                abort();
        back = cJSON_Parse(json);
        if (!back)
                abort();
        cJSON_Delete(back);
        free(json);
}

static void run(const struct admission_request *req, const char *kind, int mutating)
{
        struct admission_response resp = { .allowed = true };

        if (mutating)
                webhook_default(kind, req, &resp);
        else
                webhook_validate(kind, req, &resp);
        if (!mutating && resp.patch)
                abort();
        encode_and_check(req, &resp);
        admission_response_release(&resp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static int hooks;
        struct admission_request req = { .op = ADMISSION_OP_INVALID };
        char *err = NULL;

        if (!hooks) {
                xalloc_install_cjson_hooks();
                hooks = 1;
        }
        if (admission_request_decode((const char *)data, size, &req, &err) != 0) {
                if (!err || !err[0])
                        abort();
                free(err);
                return 0;
        }
        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
                run(&req, kinds[i], 0);
                run(&req, kinds[i], 1);
        }
        admission_request_release(&req);
        return 0;
}
