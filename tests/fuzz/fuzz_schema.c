/*
 * libFuzzer driver for the schema codec: parse the input with json_parse(), run every
 * kind's decoder with an error list, and for each object that decodes, encode it, decode
 * the result and encode again: the two encodings must be equal (encode is idempotent and
 * keeps every field it was given). Also exercises the image split and providerID parser.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "json.h"
#include "schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_KIND(T, prefix)                                         \
        static void fuzz_##prefix(const cJSON *root)                 \
        {                                                            \
                struct json_errors e;                                \
                T v;                                                 \
                T again;                                             \
                cJSON *out = NULL;                                   \
                char *text;                                          \
                json_errors_init(&e);                                \
                if (prefix##_decode(root, &v, &e) == 0) {            \
                        if (prefix##_encode(&v, &out) != 0)          \
                                abort();                             \
                        if (prefix##_decode(out, &again, NULL) != 0) \
                                abort();                             \
                        prefix##_release(&again);                    \
                        cJSON_Delete(out);                           \
                        prefix##_release(&v);                        \
                }                                                    \
                text = json_errors_join(&e, "; ");                   \
                free(text);                                          \
                json_errors_release(&e);                             \
        }

FUZZ_KIND(struct maas_machine, maas_machine)
FUZZ_KIND(struct maas_cluster, maas_cluster)
FUZZ_KIND(struct maas_machine_template, maas_machine_template)
FUZZ_KIND(struct maas_cluster_template, maas_cluster_template)

static void fuzz_strings(const cJSON *root)
{
        const cJSON *img = cJSON_GetObjectItemCaseSensitive(root, "image");
        char *a = NULL;
        char *b = NULL;

        if (!cJSON_IsString(img))
                return;
        schema_image_split(img->valuestring, &a, &b);
        free(a);
        free(b);
        if (schema_provider_id_parse(img->valuestring, &a, &b) == 0) {
                free(a);
                free(b);
        }
        (void)schema_provider_id_system_id(img->valuestring);
        free(json_pointer_escape(img->valuestring));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        cJSON *root = NULL;

        if (json_parse((const char *)data, size, &root) != 0)
                return 0;
        fuzz_maas_machine(root);
        fuzz_maas_cluster(root);
        fuzz_maas_machine_template(root);
        fuzz_maas_cluster_template(root);
        fuzz_strings(root);
        cJSON_Delete(root);
        return 0;
}
