/* err: descriptions of the project's error codes. */
#include "err.h"

#include "compiler.h"

static const char *const descriptions[] = {
        [0] = "success",
        [-CM_ENOMEM] = "out of memory",
        [-CM_EINVAL] = "invalid argument",
        [-CM_EPARSE] = "malformed input",
        [-CM_ETOOBIG] = "input too large",
        [-CM_ENOTFOUND] = "not found",
        [-CM_ECONFLICT] = "conflict",
        [-CM_EEXIST] = "already exists",
        [-CM_EGONE] = "gone (resource version expired)",
        [-CM_ETRANSPORT] = "transport error",
        [-CM_ETIMEDOUT] = "timed out",
        [-CM_EUNAUTHORIZED] = "unauthorized",
        [-CM_EFORBIDDEN] = "forbidden",
        [-CM_EIO] = "I/O error",
        [-CM_ESHUTDOWN] = "shutting down",
        [-CM_ESERVER] = "server error",
        [-CM_EUNSUPPORTED] = "unsupported",
};

const char *cm_strerror(int err)
{
        if (err > 0 || err < CM_ERR_MIN || !descriptions[-err])
                return "unknown error";
        return descriptions[-err];
}
