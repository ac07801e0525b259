/*
 * libFuzzer driver for the configuration file (--config: YAML through libyaml, every key a
 * flag name, values through the same converters as flags and environment variables). The
 * input is written to a memory file and loaded with no flags and an empty environment.
 * It must load or fail naming the problem, never crash or leak; a loaded configuration is
 * loaded again from the same file and must give the same answer.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int load(const char *path)
{
        char name[] = "capmaas", arg[80];
        char *argv[] = { name, arg, NULL };
        char *envp[] = { NULL };
        struct config *c = NULL;
        char *err = NULL;
        int r;

        (void)snprintf(arg, sizeof(arg), "--config=%s", path);
        r = config_load(2, argv, envp, &c, &err);
        if (r < 0 && !err)
                abort(); /* a failure must say why */
        free(err);
        config_free(c);
        return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char path[64];
        int fd = memfd_create("capmaas.yaml", MFD_CLOEXEC);

        if (fd < 0)
                return 0;
        if (size == 0 || write(fd, data, size) == (ssize_t)size) {
                (void)snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
                if ((load(path) == 0) != (load(path) == 0))
                        abort(); /* the same file, another answer */
        }
        close(fd);
        return 0;
}
