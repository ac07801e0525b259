/*
 * validate_reuse: spec.nodeReuse and spec.release of a MaasMachine or MaasMachineTemplate
 * (docs/host-reuse.md). release.erase is none, quick or secure; secure erase together with
 * nodeReuse is refused (the host would come back with nothing to keep). A template that
 * reuses hosts is admitted with a warning: reuse needs the old Machine gone before its
 * replacement is created, which a MachineDeployment or KubeadmControlPlane allowing surge
 * does not do, and the webhook does not see them (maxSurge: 0 is how).
 */
#include <stdlib.h>
#include <string.h>

#include "admission.h"
#include "field_errors.h"
#include "json.h"
#include "validate.h"

static const char *const erase_values[] = { "none", "quick", "secure" };

static bool erase_known(const char *v)
{
        for (size_t i = 0; i < sizeof(erase_values) / sizeof(erase_values[0]); i++)
                if (strcmp(v, erase_values[i]) == 0)
                        return true;
        return false;
}

void validate_machine_reuse(const struct maas_machine_spec *s,
                            const char *path,
                            struct field_errors *fe)
{
        const char *erase = s->release ? s->release->erase : NULL;
        struct json_path p;

        if (!erase)
                return;
        json_path_init(&p, path);
        (void)json_path_push_field(&p, "release");
        (void)json_path_push_field(&p, "erase");
        if (!erase_known(erase)) {
                char *q = field_quote(erase);

                field_errors_add(fe, FIELD_ERR_NOT_SUPPORTED, json_path_str(&p), q,
                                 "supported values: \"none\", \"quick\", \"secure\"");
                free(q);
        } else if (s->node_reuse && strcmp(erase, "secure") == 0) {
                field_invalid_str(fe, json_path_str(&p), erase,
                                  "secure erase leaves nothing on the host to keep: not "
                                  "allowed with nodeReuse (use none or quick)");
        }
}

void validate_template_reuse(const struct maas_machine_spec *s,
                             const char *path,
                             struct admission_response *warn)
{
        if (!warn || !s->node_reuse)
                return;
        admission_response_warn(warn,
                                "%s.nodeReuse: a host comes back only when its old Machine is "
                                "gone before the new one is created; set maxSurge: 0 in the "
                                "rollout strategy of each MachineDeployment and "
                                "KubeadmControlPlane using this template "
                                "(spec.rollout.strategy.rollingUpdate; v1beta1: "
                                "spec.strategy / spec.rolloutStrategy)",
                                path);
}
