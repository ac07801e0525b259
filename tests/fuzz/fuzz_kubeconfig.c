/*
 * libFuzzer driver for the kubeconfig reader (YAML through libyaml into a tree, then the
 * context, cluster and user lookups, base64 -data fields): the input is written to a
 * memory file and loaded as a kubeconfig, with the current context and with a named one.
 * It must load or fail with a message, never crash or leak; a loaded configuration must
 * name a server.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kube_client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void load(const char *path, const char *context)
{
        struct kube_config cfg = { 0 };
        char *err = NULL;

        if (kube_config_from_kubeconfig(path, context, &cfg, &err) == 0) {
                if (!cfg.server || !cfg.server[0])
                        abort(); /* loaded without a server to talk to */
                kube_config_release(&cfg);
        } else if (!err) {
                abort(); /* a failure must say why */
        }
        free(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char path[64];
        int fd = memfd_create("kubeconfig", MFD_CLOEXEC);

        if (fd < 0)
                return 0;
        if (size == 0 || write(fd, data, size) == (ssize_t)size) {
                (void)snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
                load(path, NULL);
                load(path, "other");
        }
        close(fd);
        return 0;
}
