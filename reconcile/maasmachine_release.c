/*
 * maasmachine_release: giving a MAAS machine back, its disks erased as the MaasMachine's
 * spec.release.erase says (none, quick: quick_erase, secure: secure_erase), else as
 * --release-erase says (none, quick or full). A machine MAAS no longer knows (404) counts as
 * released.
 */
#include <string.h>

#include "err.h"
#include "log.h"
#include "maasmachine_context.h"
#include "maasmachine_steps.h"

int maasmachine_release(struct maasmachine_ctx *c, const char *system_id)
{
        const char *policy = c->mm.spec.release ? c->mm.spec.release->erase : NULL;
        struct maas_release_opts o = {
                .erase = c->p->settings.release_erase,
                .quick_erase = c->p->settings.release_quick_erase,
                .comment = "released by capmaas",
        };
        struct maas_error me = { 0 };
        int err;

        if (policy) {
                o.erase = strcmp(policy, "none") != 0;
                o.quick_erase = strcmp(policy, "quick") == 0;
                o.secure_erase = strcmp(policy, "secure") == 0;
        }

        err = maas_release(c->w->maas, system_id, &o, NULL, &me);
        reconciler_maas_count(c->p, "release", err, &me);
        if (err == CM_ENOTFOUND)
                err = 0;
        if (err)
                log_warn(MAASMACHINE_LOGGER, "release failed", "system_id=%s error=%s", system_id,
                         me.message ? me.message : maas_strerror(err));
        maas_error_release(&me);
        return err;
}
