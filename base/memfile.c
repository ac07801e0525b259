/*
 * memfile: memfd-backed files reached through /proc/self/fd (see include/memfile.h).
 */
#include "memfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "err.h"

static int write_all(int fd, const char *p, size_t n)
{
        ssize_t w;

        while (n > 0) {
                w = write(fd, p, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return CM_EIO;
                p += w;
                n -= (size_t)w;
        }
        return 0;
}

int memfile_open(struct memfile *m, const char *name, const void *data, size_t n)
{
        m->fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        m->path[0] = '\0';
        if (m->fd < 0)
                return CM_EIO;
        if (write_all(m->fd, data, n) < 0) {
                memfile_close(m);
                return CM_EIO;
        }
        /* read-only from here on: whoever opens the path cannot change what others read */
        (void)fcntl(m->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
        (void)snprintf(m->path, sizeof(m->path), "/proc/self/fd/%d", m->fd);
        return 0;
}

void memfile_close(struct memfile *m)
{
        if (m->fd >= 0)
                (void)close(m->fd);
        m->fd = -1;
        m->path[0] = '\0';
}
