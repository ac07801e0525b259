#pragma once

/*
 * err: the project's error codes. Every fallible function returns int: 0 on success or one
 * of the negative codes below. Detail that a caller may need (HTTP status, a server's
 * message, a field path) travels in a caller-supplied struct, never in a global.
 */

enum cm_err {
        CM_OK = 0,
        CM_ENOMEM = -1,     /* unreachable with the abort-on-OOM allocators */
        CM_EINVAL = -2,     /* bad argument or configuration value */
        CM_EPARSE = -3,     /* malformed JSON, YAML or text */
        CM_ETOOBIG = -4,    /* input over its size cap */
        CM_ENOTFOUND = -5,  /* object or file does not exist */
        CM_ECONFLICT = -6,  /* optimistic concurrency / state conflict */
        CM_EEXIST = -7,     /* already exists */
        CM_EGONE = -8,      /* resourceVersion too old (HTTP 410) */
        CM_ETRANSPORT = -9, /* connect, TLS or timeout failure */
        CM_ETIMEDOUT = -10, /* a deadline passed */
        CM_EUNAUTHORIZED = -11,
        CM_EFORBIDDEN = -12,
        CM_EIO = -13,       /* file or socket I/O error; errno-based detail in the message */
        CM_ESHUTDOWN = -14, /* the component is stopping */
        CM_ESERVER = -15,   /* the peer answered 5xx */
        CM_EUNSUPPORTED = -16,
        CM_ERR_MIN = -16,
};

/* Short, static, thread-safe description of an error code ("invalid argument"). */
const char *cm_strerror(int err);
