/*
 * kinds: the common admission flow of the Maas kinds.
 *
 * Only metadata and spec are judged: the API server ignores status on the main resource
 * (it keeps the stored status; status writes go to /status, which no webhook intercepts),
 * so a status in any shape, such as the reference provider's v0.7 map of failure domains,
 * never denies.
 *
 * Validation (CREATE and UPDATE; other operations are allowed):
 *  0. an UPDATE whose spec is the stored object's spec is allowed as it is: it only changes
 *     metadata or status (adding or removing a finalizer, an annotation, a label), and the
 *     rules are about the spec. An object written under older rules, or by the reference
 *     provider, can always have its finalizer removed, so its deletion is never stuck;
 *  1. objects carrying clusterctl's delete-for-move annotation are allowed as they are;
 *  2. decoder type errors deny with 422 Invalid, every error with its field path;
 *  3. on UPDATE, the reference's immutability rules deny first, with its exact message
 *     (403 Forbidden, as controller-runtime answers a plain error); then a template's whole
 *     spec.template.spec is immutable (kubernetes.md 3.4). Both are skipped for a template
 *     update that is a CAPI topology dry-run (annotation + request dryRun);
 *  4. the value rules deny with 422 Invalid listing every error; on UPDATE an error the
 *     stored object already had is not reported again (ratcheting, so an object created
 *     under older rules can still get its finalizers and status written);
 *  5. when they pass and an inventory is given, the MAAS checks (validate_maas.c) run, with
 *     the same 422 denial, ratcheting, and warnings when they cannot run.
 * Defaulting answers a JSON Patch only when something changes, and never on an UPDATE that
 * leaves the spec as stored (so a metadata-only update cannot rewrite the spec of an object
 * admitted under older rules; for a template it would then be denied as immutable).
 */
#include <stdlib.h>
#include <string.h>

#include "admission.h"
#include "field_errors.h"
#include "json.h"
#include "validate.h"
#include "webhook_kinds.h"
#include "xalloc.h"

#define ANNOTATION_DELETE_FOR_MOVE  "clusterctl.cluster.x-k8s.io/delete-for-move"
#define ANNOTATION_TOPOLOGY_DRY_RUN "topology.cluster.x-k8s.io/dry-run"

static const struct kind_ops kinds[] = {
        { SCHEMA_KIND_CLUSTER, "cluster", false, &spec_ops_cluster, cluster_update },
        { SCHEMA_KIND_CLUSTER_TEMPLATE, NULL, true, &spec_ops_cluster, NULL },
        { SCHEMA_KIND_MACHINE, "machine", false, &spec_ops_machine, machine_update },
        { SCHEMA_KIND_MACHINE_TEMPLATE, "machine template", true, &spec_ops_machine_template,
          NULL },
        { SCHEMA_KIND_REMEDIATION, NULL, false, &spec_ops_remediation, NULL },
        { SCHEMA_KIND_REMEDIATION_TEMPLATE, NULL, true, &spec_ops_remediation, NULL },
};

const struct kind_ops *kind_ops_find(const char *kind)
{
        for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
                if (strcmp(kinds[i].kind, kind) == 0)
                        return &kinds[i];
        return NULL;
}

/* Field path of the spec. */
static const char *kind_spec_field(const struct kind_ops *ops)
{
        return ops->is_template ? "spec.template.spec" : "spec";
}

/* JSON Pointer of the spec. */
static const char *spec_pointer(const struct kind_ops *ops)
{
        return ops->is_template ? "/spec/template/spec" : "/spec";
}

static bool has_annotation(const cJSON *obj, const char *key)
{
        const cJSON *meta = json_item(obj, "metadata");
        const cJSON *ann = json_item(meta, "annotations");

        return cJSON_IsObject(ann) && json_item(ann, key) != NULL;
}

/* The spec object of obj (spec, or spec.template.spec for templates), or NULL. */
static const cJSON *spec_of(const struct kind_ops *ops, const cJSON *obj)
{
        const cJSON *spec = json_item(obj, "spec");

        if (ops->is_template)
                spec = json_item(json_item(spec, "template"), "spec");
        return cJSON_IsObject(spec) ? spec : NULL;
}

static const char *object_name(const struct admission_request *req)
{
        const cJSON *meta = json_item(req->object, "metadata");
        const cJSON *name = json_item(meta, "name");

        return cJSON_IsString(name) ? name->valuestring : req->name;
}

static bool is_write(const struct admission_request *req)
{
        return req->object && (req->op == ADMISSION_OP_CREATE || req->op == ADMISSION_OP_UPDATE);
}

/* An UPDATE that leaves the whole spec as stored (both absent counts as the same). */
static bool spec_unchanged(const struct admission_request *req)
{
        const cJSON *a;
        const cJSON *b;

        if (req->op != ADMISSION_OP_UPDATE || !req->old_object)
                return false;
        a = json_item(req->old_object, "spec");
        b = json_item(req->object, "spec");
        if (!a && !b)
                return true;
        return a && b && cJSON_Compare(a, b, true);
}

void webhook_default(const char *kind,
                     const struct admission_request *req,
                     struct admission_response *resp)
{
        const struct kind_ops *ops = kind_ops_find(kind);
        const cJSON *spec;
        cJSON *patch;

        resp->allowed = true;
        if (!ops || !is_write(req) || spec_unchanged(req))
                return;
        spec = spec_of(ops, req->object);
        if (!spec)
                return;
        patch = cJSON_CreateArray();
        ops->spec->defaults(spec, spec_pointer(ops), patch);
        if (cJSON_GetArraySize(patch) > 0) {
                cJSON_Delete(resp->patch);
                resp->patch = patch;
        } else {
                cJSON_Delete(patch);
        }
}

static void deny_plain(struct admission_response *resp, char *message)
{
        resp->allowed = false;
        resp->code = 403;
        free(resp->reason);
        resp->reason = xstrdup("Forbidden");
        free(resp->message);
        resp->message = message;
}

static void type_errors(const struct json_errors *jerr, struct field_errors *fe)
{
        for (size_t i = 0; i < jerr->n; i++)
                field_errors_add(fe, FIELD_ERR_TYPE_INVALID, jerr->items[i].path, NULL, "%s",
                                 jerr->items[i].message);
        if (fe->n == 0)
                field_errors_add(fe, FIELD_ERR_TYPE_INVALID, "object", NULL,
                                 "cannot be decoded as a %s", "Maas object");
}

static bool topology_dry_run(const struct kind_ops *ops, const struct admission_request *req)
{
        return ops->is_template && req->dry_run &&
               has_annotation(req->object, ANNOTATION_TOPOLOGY_DRY_RUN);
}

static void template_immutable(const struct kind_ops *ops,
                               const struct admission_request *req,
                               struct field_errors *fe)
{
        const cJSON *a = spec_of(ops, req->old_object);
        const cJSON *b = spec_of(ops, req->object);

        if ((a || b) && !(a && b && cJSON_Compare(a, b, true)))
                field_errors_add(fe, FIELD_ERR_FORBIDDEN, kind_spec_field(ops), NULL,
                                 "field is immutable; create a new %s instead", ops->kind);
}

/* Steps 3 and 4 on the decoded objects (old_obj is NULL on CREATE or when unreadable). */
static void validate_decoded(const struct kind_ops *ops,
                             const struct schema_kind_desc *codec,
                             const struct admission_request *req,
                             const union webhook_obj *cur_obj,
                             const union webhook_obj *old_obj,
                             struct maas_inventory *inv,
                             struct admission_response *resp)
{
        const void *cur = schema_spec(codec, cur_obj);
        const void *old = old_obj ? schema_spec(codec, old_obj) : NULL;
        const struct spec_ops *so = ops->spec;
        const char *path = kind_spec_field(ops);
        struct field_errors fe;
        struct field_errors fe_old;
        char *msg;

        field_errors_init(&fe);
        field_errors_init(&fe_old);
        if (old && !topology_dry_run(ops, req)) {
                msg = ops->what ? so->immutable(old, cur, ops->what) : NULL;
                if (msg) {
                        deny_plain(resp, msg);
                        goto out;
                }
                if (ops->is_template)
                        template_immutable(ops, req, &fe);
                if (ops->update)
                        ops->update(req->old_object, old_obj, cur_obj, &fe);
        }
        so->check(cur, path, &fe, resp);
        if (old) {
                so->check(old, path, &fe_old, NULL);
                field_errors_subtract(&fe, &fe_old);
        }
        if (fe.n == 0 && inv && so->maas_check)
                maas_checks_run(so, &(struct spec_pair){ path, cur, old }, inv, &fe, resp);
        if (fe.n > 0)
                field_errors_deny(&fe, SCHEMA_GROUP, ops->kind, object_name(req), resp);
out:
        field_errors_release(&fe_old);
        field_errors_release(&fe);
}

static void validate_object(const struct kind_ops *ops,
                            const struct admission_request *req,
                            struct maas_inventory *inv,
                            struct admission_response *resp)
{
        const struct schema_kind_desc *codec = schema_codec_find(ops->kind);
        const cJSON *obj = req->object;
        const cJSON *old_obj = cJSON_IsObject(req->old_object) ? req->old_object : NULL;
        union webhook_obj cur;
        union webhook_obj old;
        struct json_errors jerr;
        struct field_errors fe;
        bool have_old;

        json_errors_init(&jerr);
        if (schema_decode_spec_view(codec, obj, &cur, &jerr) < 0) {
                field_errors_init(&fe);
                type_errors(&jerr, &fe);
                field_errors_deny(&fe, SCHEMA_GROUP, ops->kind, object_name(req), resp);
                field_errors_release(&fe);
                goto out;
        }
        have_old = req->op == ADMISSION_OP_UPDATE && old_obj &&
                   schema_decode_spec_view(codec, old_obj, &old, NULL) == 0;
        validate_decoded(ops, codec, req, &cur, have_old ? &old : NULL, inv, resp);
        if (have_old)
                schema_release(codec, &old);
        schema_release(codec, &cur);
out:
        json_errors_release(&jerr);
}

void webhook_validate_maas(const char *kind,
                           const struct admission_request *req,
                           struct maas_inventory *inv,
                           struct admission_response *resp)
{
        const struct kind_ops *ops = kind_ops_find(kind);

        resp->allowed = true;
        if (!ops || !is_write(req) || spec_unchanged(req) ||
            has_annotation(req->object, ANNOTATION_DELETE_FOR_MOVE))
                return;
        validate_object(ops, req, inv, resp);
}

void webhook_validate(const char *kind,
                      const struct admission_request *req,
                      struct admission_response *resp)
{
        webhook_validate_maas(kind, req, NULL, resp);
}
