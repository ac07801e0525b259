/*
 * simproc: simulator child processes for tests (see simproc.h).
 */
#include "simproc.h"

#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static int read_line(int fd, char *out, size_t n, int timeout_ms)
{
        size_t len = 0;

        while (len + 1 < n) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                char c;

                if (poll(&p, 1, timeout_ms) <= 0 || read(fd, &c, 1) <= 0)
                        return -1;
                if (c == '\n')
                        break;
                out[len++] = c;
        }
        out[len] = '\0';
        return 0;
}

static void exec_child(int out_fd, const char *binary, const char *const *args)
{
        const char *argv[64];
        char path[512];
        size_t n = 0;

        snprintf(path, sizeof(path), "%s/%s", test_env("CAPMAAS_BUILD_DIR"), binary);
        argv[n++] = path;
        for (; args && *args && n < 63; args++)
                argv[n++] = *args;
        argv[n] = NULL;
        dup2(out_fd, 1);
        close(out_fd);
        execv(path, (char *const *)(uintptr_t)argv);
        _exit(127);
}

int simproc_start(struct simproc *s, const char *binary, const char *const *args)
{
        char line[512];
        const char *u;
        int fds[2];

        memset(s, 0, sizeof(*s));
        if (pipe(fds) < 0)
                return -1;
        s->pid = fork();
        if (s->pid == 0) {
                close(fds[0]);
                exec_child(fds[1], binary, args);
        }
        close(fds[1]);
        if (s->pid < 0 || read_line(fds[0], line, sizeof(line), 10000) < 0) {
                close(fds[0]);
                simproc_kill(s);
                return -1;
        }
        close(fds[0]);
        u = strstr(line, "http");
        if (strncmp(line, "listening on ", 13) != 0 || !u) {
                simproc_kill(s);
                return -1;
        }
        snprintf(s->url, sizeof(s->url), "%s", u);
        return 0;
}

int simproc_stop(struct simproc *s)
{
        int status = -1;

        if (s->pid <= 0)
                return -1;
        kill(s->pid, SIGTERM);
        for (int i = 0; i < 500; i++) {
                if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
                        s->pid = 0;
                        return status;
                }
                usleep(10000);
        }
        simproc_kill(s);
        return -1;
}

void simproc_kill(struct simproc *s)
{
        if (s->pid <= 0)
                return;
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
}
