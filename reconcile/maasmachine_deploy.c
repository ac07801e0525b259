/*
 * maasmachine_deploy: deploying an allocated MAAS machine: the bootstrap cloud-init from the
 * Machine's data secret, swap off, deploy; on a failed call the machine is released and
 * forgotten, so a later pass allocates anew (upstream-capmaas.md §3.5), except for a 409
 * on a machine already deploying for this MaasMachine, which is followed. That later pass
 * waits out a backoff (5 s doubling to 5 min, in the deploy-retry annotation): the reference
 * allocates again at once, and as every pass writes status, which brings the next pass, a
 * deploy MAAS always refuses (a kernel or image it lacks) took and released machines in a
 * tight loop until none was free.
 */
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "err.h"
#include "log.h"
#include "maasmachine_context.h"
#include "maasmachine_steps.h"
#include "xalloc.h"

#define LOGGER MAASMACHINE_LOGGER

static int bootstrap_data(struct maasmachine_ctx *c, char **ret, size_t *ret_len)
{
        const char *secret = capi_machine_data_secret(kube_object_json(c->machine));
        cJSON *obj = NULL;
        const char *b64;
        int err;

        err = kube_get(c->w->kube, &KUBE_RES_SECRETS, c->ns, secret, &obj, NULL);
        if (err)
                goto out;
        b64 = json_find_str(obj, "data", "value", NULL);
        if (!b64) {
                err = CM_EINVAL;
                goto out;
        }
        err = base64_decode(b64, strlen(b64), (unsigned char **)ret, ret_len);
out:
        if (err)
                reconciler_event(c->p, c->cur, "Warning", "FailedGetBootstrapData",
                                 "error retrieving bootstrap data from secret %s: %s", secret,
                                 err == CM_EINVAL ? "secret value key is missing"
                                                  : cm_strerror(err));
        cJSON_Delete(obj);
        return err;
}

#define DEPLOY_BACKOFF(c)                                                         \
        (&(const struct maasmachine_backoff){ RECONCILER_ANNOTATION_DEPLOY_RETRY, \
                                              &(c)->p->deploy_retry, 5 })

bool maasmachine_deploy_backoff(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        return maasmachine_backoff_wait(c, DEPLOY_BACKOFF(c), res);
}

static void rollback(struct maasmachine_ctx *c,
                     const char *sid,
                     const char *what,
                     int err,
                     const struct maas_error *me)
{
        char *id = xstrdup(sid);
        unsigned delay;

        (void)!maasmachine_release(c, id);
        maasmachine_set_ids(c, NULL, NULL);
        maasmachine_drop_node(c);
        delay = maasmachine_backoff_fail(c, DEPLOY_BACKOFF(c));
        reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                        SCHEMA_REASON_MACHINE_DEPLOY_FAILED,
                        "%s on MAAS machine %s failed: %s; released it, next try in %u s", what, id,
                        me && me->message ? me->message : maas_strerror(err), delay);
        reconciler_event(c->p, c->cur, "Warning", "MachineDeployFailed",
                         "%s on MAAS machine %s failed; released it, next try in %u s", what, id,
                         delay);
        reconciler_deploy_failed(c->p, RECONCILER_DEPLOY_REFUSED);
        free(id);
}

/*
 * MAAS answered 409: the machine is no longer Allocated. When it is already Deploying or
 * Deployed for this MaasMachine, an earlier pass's deploy went through and what it wrote
 * afterwards did not land (a conflict on the status write, a crash), or this pass read a
 * list from before it: that deploy is the one to follow. Releasing it, as a refusal would,
 * sends a booting host back to MAAS and allocates another. On true the machine as read is
 * c->node.
 */
static bool deploying_already(struct maasmachine_ctx *c, const char *sid)
{
        struct maas_node n = { 0 };
        struct maas_error me = { 0 };
        bool owned = false;
        int err = maas_get_machine(c->w->maas, sid, &n, &me);

        reconciler_maas_count(c->p, "get_machine", err, &me);
        maas_error_release(&me);
        if (err || !n.status_name ||
            (strcmp(n.status_name, "Deploying") != 0 && strcmp(n.status_name, "Deployed") != 0)) {
                maas_node_release(&n);
                return false;
        }
        maasmachine_take_node(c, &n);
        return maasmachine_owned(c, &owned) == 0 && owned;
}

static int deploy_calls(struct maasmachine_ctx *c, const char *sid, const char *ud, size_t ud_len)
{
        struct maas_deploy_opts o = {
                .image = c->mm.spec.image,
                .user_data = ud,
                .user_data_len = ud_len,
                .ephemeral_deploy = c->mm.spec.has_deploy_in_memory && c->mm.spec.deploy_in_memory,
                .hwe_kernel = c->mm.spec.hwe_kernel,
        };
        struct maas_node n = { 0 };
        struct maas_error me = { 0 };
        int err;

        err = maas_update_machine(c->w->maas, sid, &(struct maas_update_opts){ .swap_size = 0 },
                                  NULL, &me);
        reconciler_maas_count(c->p, "update_machine", err, &me);
        if (err == CM_ECONFLICT && deploying_already(c, sid))
                goto followed;
        if (err) {
                rollback(c, sid, "Disabling swap", err, &me);
                goto out;
        }
        err = maas_deploy(c->w->maas, sid, &o, &n, &me);
        reconciler_maas_count(c->p, "deploy", err, &me);
        if (err == CM_ECONFLICT && deploying_already(c, sid))
                goto followed;
        if (err) {
                rollback(c, sid, "Deploy", err, &me);
                goto out;
        }
        maasmachine_backoff_clear(c, DEPLOY_BACKOFF(c));
        reconciler_event(
                c->p, c->cur, "Normal", "MachineDeploying", "Deploying %s on MAAS machine %s (%s)",
                c->mm.spec.image ? c->mm.spec.image : "", sid, n.hostname ? n.hostname : "");
        maasmachine_take_node(c, &n);
        goto out;
followed:
        log_info(LOGGER, "MAAS machine already deploying for this MaasMachine; following it",
                 "object=%s/%s system_id=%s status=%s", c->ns, c->name, sid, c->node.status_name);
        err = 0;
out:
        maas_node_release(&n);
        maas_error_release(&me);
        return err;
}

int maasmachine_deploy(struct maasmachine_ctx *c)
{
        char *ud = NULL, *sid = xstrdup(c->node.system_id);
        size_t len = 0;
        int err;

        reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                        SCHEMA_REASON_MACHINE_DEPLOY_STARTED, "deploying MAAS machine %s", sid);
        err = bootstrap_data(c, &ud, &len);
        if (err == 0)
                err = deploy_calls(c, sid, ud, len);
        free(ud);
        free(sid);
        return err;
}
