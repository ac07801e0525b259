#pragma once
/*
 * certstore: the serving certificate and key of a TLS listener, read from two PEM files
 * (controller-runtime's tls.crt / tls.key) and reloaded without a restart when either file
 * changes (cert-manager rotations, Secret volume updates through the ..data symlink).
 *
 * A watcher thread polls the files once per interval (stat: inode, size, mtime). A changed
 * pair is loaded and checked (certificate chain parses, the key matches the leaf) before it
 * replaces the current one; a bad pair is counted and the old one stays in service. Old
 * generations are retired, not freed, until no handshake can still be using them, so TLS
 * sessions in flight are never harmed.
 *
 * Thread-safety: certstore_current() is called from TLS handshakes on any server thread;
 * everything else from the owner thread. Counters are atomic.
 */

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>

#include "compiler.h"

struct certstore;

struct certstore_opts {
        const char *cert_path; /* copied */
        const char *key_path;  /* copied */
        uint64_t poll_ms;      /* watcher interval; 0 = 1000 */
        uint64_t retire_ms;    /* how long a replaced pair stays alive; 0 = 120000 */
};

struct certstore_stats {
        uint64_t reads;       /* successful loads (certwatcher_read_certificate_total) */
        uint64_t read_errors; /* failed loads */
        time_t not_after;     /* leaf expiry of the current pair, 0 when none */
        bool loaded;          /* a valid pair is in service */
};

/* Loads the pair once. Fails (CM_EIO, CM_EPARSE, CM_EINVAL for a key that does not match)
 * when the files are missing or bad; *reterr gets a malloc'd message. */
MUST_CHECK int certstore_new(const struct certstore_opts *opts,
                             struct certstore **ret,
                             char **reterr);
/* Starts the watcher thread. */
MUST_CHECK int certstore_start(struct certstore *cs);
/* Checks the files now and reloads them if they changed; returns true when a new pair went
 * into service. The watcher calls this; tests may too. */
bool certstore_reload_if_changed(struct certstore *cs);
/* The pair to present in a handshake. The pointers stay valid for at least retire_ms after
 * the pair is replaced. */
void certstore_current(struct certstore *cs,
                       gnutls_pcert_st **ret_pcerts,
                       unsigned *ret_n,
                       gnutls_privkey_t *ret_key);
void certstore_stats(struct certstore *cs, struct certstore_stats *ret);
/* Stops the watcher and frees every generation. Accepts NULL; returns NULL. */
struct certstore *certstore_free(struct certstore *cs);
