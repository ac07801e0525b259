/*
 * cpus: the affinity mask and the cgroup CPU quota (see include/cpus.h). The cgroup is
 * found from /proc/self/cgroup; its path and each ancestor's are looked up under the mount
 * root, the tightest limit wins. In a container with its own cgroup namespace the path is
 * "/" and the limit sits in the root directory, which the walk reaches last.
 */
#include "cpus.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "parse.h"

#define SMALL_FILE_MAX 8192 /* /proc/self/cgroup with every v1 controller is under 1 KiB */
#define PATH_LEN       4096
#define QUOTA_MAX      ((uint64_t)1 << 40) /* microseconds; far above any real quota */

/* Reads all of a small file into buf as a C string; -1 when it cannot be read whole. */
static int read_small(const char *path, char *buf, size_t cap)
{
        size_t len = 0;
        ssize_t n;
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return -1;
        while (len < cap - 1) {
                n = read(fd, buf + len, cap - 1 - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        close(fd);
        if (n < 0 || len == cap - 1) /* an error, or possibly more than cap - 1 bytes */
                return -1;
        buf[len] = '\0';
        return 0;
}

/* ceil(quota / period) for a quota and a period in microseconds, at least 1. */
static unsigned quota_cpus(uint64_t quota, uint64_t period)
{
        uint64_t c = (quota + period - 1) / period;

        if (c == 0)
                return 1;
        return c > 4096 ? 4096 : (unsigned)c;
}

/* Copies the first line of text (without its newline) into out; CM_EINVAL if too long. */
static int first_line(const char *text, char *out, size_t cap)
{
        size_t n = strcspn(text, "\n");

        if (n >= cap)
                return CM_EINVAL;
        memcpy(out, text, n);
        out[n] = '\0';
        return 0;
}

int cpus_parse_cpu_max(const char *text, unsigned *ret)
{
        char line[64];
        char *sp;
        uint64_t quota, period;

        if (first_line(text, line, sizeof line) < 0)
                return CM_EINVAL;
        sp = strchr(line, ' ');
        if (!sp)
                return CM_EINVAL;
        *sp = '\0';
        if (parse_u64(sp + 1, 1, QUOTA_MAX, &period) < 0)
                return CM_EINVAL;
        if (strcmp(line, "max") == 0) {
                *ret = 0;
                return 0;
        }
        if (parse_u64(line, 1, QUOTA_MAX, &quota) < 0)
                return CM_EINVAL;
        *ret = quota_cpus(quota, period);
        return 0;
}

/* The v1 limit from a directory holding cpu.cfs_quota_us and cpu.cfs_period_us. */
static unsigned v1_limit(const char *dir)
{
        char path[PATH_LEN], qtext[64], ptext[64], q[64], p[64];
        uint64_t quota, period;

        if (snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir) >= (int)sizeof path ||
            read_small(path, qtext, sizeof qtext) < 0)
                return 0;
        if (snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir) >= (int)sizeof path ||
            read_small(path, ptext, sizeof ptext) < 0)
                return 0;
        if (first_line(qtext, q, sizeof q) < 0 || first_line(ptext, p, sizeof p) < 0)
                return 0;
        if (strcmp(q, "-1") == 0)
                return 0;
        if (parse_u64(q, 1, QUOTA_MAX, &quota) < 0 || parse_u64(p, 1, QUOTA_MAX, &period) < 0)
                return 0;
        return quota_cpus(quota, period);
}

static unsigned v2_limit(const char *dir)
{
        char path[PATH_LEN], text[128];
        unsigned cpus;

        if (snprintf(path, sizeof path, "%s/cpu.max", dir) >= (int)sizeof path ||
            read_small(path, text, sizeof text) < 0)
                return 0;
        return cpus_parse_cpu_max(text, &cpus) == 0 ? cpus : 0;
}

/* The tightest of two limits where 0 means none. */
static unsigned tighter(unsigned a, unsigned b)
{
        if (a == 0)
                return b;
        if (b == 0)
                return a;
        return a < b ? a : b;
}

/* Walks from base + cgpath up to base itself, taking the tightest limit. */
static unsigned walk_up(const char *base, const char *cgpath, unsigned (*limit)(const char *))
{
        char dir[PATH_LEN];
        size_t baselen = strlen(base);
        unsigned best = 0;
        char *slash;

        if (snprintf(dir, sizeof dir, "%s%s", base, cgpath) >= (int)sizeof dir)
                return 0;
        for (;;) {
                best = tighter(best, limit(dir));
                slash = strrchr(dir, '/');
                if (!slash || (size_t)(slash - dir) < baselen)
                        break;
                *slash = '\0';
        }
        return best;
}

/* Does a v1 controller list ("cpu,cpuacct") name the cpu controller? */
static int has_cpu_controller(const char *list, size_t len)
{
        const char *p = list, *end = list + len, *comma;

        while (p < end) {
                comma = memchr(p, ',', (size_t)(end - p));
                if (!comma)
                        comma = end;
                if (comma - p == 3 && memcmp(p, "cpu", 3) == 0)
                        return 1;
                p = comma + 1;
        }
        return 0;
}

unsigned cpus_cgroup_limit(const char *root, const char *proc_cgroup)
{
        const char *line = proc_cgroup, *nl, *c1, *c2;
        char base[PATH_LEN], cgpath[PATH_LEN];
        unsigned best = 0;
        size_t plen;

        for (; *line; line = *nl ? nl + 1 : nl) {
                nl = line + strcspn(line, "\n");
                c1 = memchr(line, ':', (size_t)(nl - line));
                c2 = c1 ? memchr(c1 + 1, ':', (size_t)(nl - c1 - 1)) : NULL;
                if (!c2 || c2[1] != '/')
                        continue;
                plen = (size_t)(nl - c2 - 1);
                if (plen >= sizeof cgpath)
                        continue;
                memcpy(cgpath, c2 + 1, plen);
                cgpath[plen] = '\0';
                if (plen == 1) /* "/": the walk starts at the root itself */
                        cgpath[0] = '\0';
                if (c2 == c1 + 1) { /* "0::/path": the unified hierarchy */
                        best = tighter(best, walk_up(root, cgpath, v2_limit));
                        continue;
                }
                if (!has_cpu_controller(c1 + 1, (size_t)(c2 - c1 - 1)))
                        continue;
                if (snprintf(base, sizeof base, "%s/%.*s", root, (int)(c2 - c1 - 1), c1 + 1) <
                    (int)sizeof base)
                        best = tighter(best, walk_up(base, cgpath, v1_limit));
                if (snprintf(base, sizeof base, "%s/cpu", root) < (int)sizeof base)
                        best = tighter(best, walk_up(base, cgpath, v1_limit));
        }
        return best;
}

unsigned cpus_affinity(void)
{
        cpu_set_t set;
        int n;

        if (sched_getaffinity(0, sizeof set, &set) < 0)
                return 1;
        n = CPU_COUNT(&set);
        return n > 0 ? (unsigned)n : 1;
}

unsigned cpus_usable(void)
{
        char text[SMALL_FILE_MAX];
        unsigned n = cpus_affinity(), limit = 0;

        if (read_small("/proc/self/cgroup", text, sizeof text) == 0)
                limit = cpus_cgroup_limit("/sys/fs/cgroup", text);
        if (limit != 0 && limit < n)
                n = limit;
        return n;
}
