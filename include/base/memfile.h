#pragma once
/*
 * memfile: a file that exists only in memory (memfd_create), for libraries that take a
 * path and nothing else: libcurl's GnuTLS backend reads the CA bundle, client certificate
 * and client key only from files. The path /proc/self/fd/N reads back the data for as long
 * as the memfile is open; nothing is written to a disk, so a key decoded from a kubeconfig
 * never lands in /tmp, and a crash leaves nothing behind.
 *
 * Ownership: the caller owns the struct and closes it once nothing will open the path
 * again. The path is valid in every thread of this process, never in another process.
 */

#include <stddef.h>

#include "compiler.h"

struct memfile {
        int fd;        /* -1 when closed */
        char path[32]; /* "/proc/self/fd/N" */
};

/* Creates a memfile holding the n bytes of data (name shows in /proc/PID/fd). 0, or CM_EIO
 * (m is then closed). */
MUST_CHECK int memfile_open(struct memfile *m, const char *name, const void *data, size_t n);
/* Closes the file (its path stops working). Safe on a closed memfile. */
void memfile_close(struct memfile *m);
