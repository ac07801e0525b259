/*
 * process_metrics: a collector that samples /proc/self the way Prometheus's Go client
 * (procfs) does. Files are read into fixed stack buffers (/proc/self/stat is at most about
 * 1 KiB; /proc/stat is scanned with a fixed line buffer, since its "intr" line can be very
 * long), every number is range-checked, and any failure just skips that sample, leaving the
 * previous value in place. The start time never changes, so it is computed once.
 */
#include "process_metrics.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "metrics.h"
#include "xalloc.h"

enum proc_metric {
        PM_RSS,
        PM_VSIZE,
        PM_OPEN_FDS,
        PM_MAX_FDS,
        PM_CPU,
        PM_START,
        PM_COUNT,
};

/* Field numbers of /proc/self/stat, as proc(5) counts them (pid is 1). */
enum stat_field {
        STAT_UTIME = 14,
        STAT_STIME = 15,
        STAT_STARTTIME = 22,
        STAT_VSIZE = 23,
        STAT_RSS = 24,
        STAT_FIELDS = 25,
};

#define MAX_FD_ENTRIES (1u << 20) /* bound on the /proc/self/fd walk */

static const struct {
        enum metric_type type;
        const char *name;
        const char *help;
} descs[PM_COUNT] = {
        [PM_RSS] = { METRIC_GAUGE, "process_resident_memory_bytes",
                     "Resident memory size in bytes." },
        [PM_VSIZE] = { METRIC_GAUGE, "process_virtual_memory_bytes",
                       "Virtual memory size in bytes." },
        [PM_OPEN_FDS] = { METRIC_GAUGE, "process_open_fds", "Number of open file descriptors." },
        [PM_MAX_FDS] = { METRIC_GAUGE, "process_max_fds",
                         "Maximum number of open file descriptors." },
        [PM_CPU] = { METRIC_COUNTER, "process_cpu_seconds_total",
                     "Total user and system CPU time spent in seconds." },
        [PM_START] = { METRIC_GAUGE, "process_start_time_seconds",
                       "Start time of the process since unix epoch in seconds." },
};

struct process_metrics {
        struct metric_series *series[PM_COUNT]; /* borrowed from the registry */
        double ticks_per_second;
        double page_size;
};

static int parse_u64(const char *s, char **ret_end, uint64_t *ret)
{
        unsigned long long v;
        char *end;

        if (*s < '0' || *s > '9')
                return CM_EPARSE;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno)
                return CM_EPARSE;
        *ret_end = end;
        *ret = v;
        return CM_OK;
}

static int read_small_file(const char *path, char *buf, size_t size)
{
        size_t len = 0;
        ssize_t n;
        int fd;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return CM_EIO;
        while (len < size - 1 && (n = read(fd, buf + len, size - 1 - len)) > 0)
                len += (size_t)n;
        (void)close(fd);
        if (len == size - 1)
                return CM_ETOOBIG;
        buf[len] = '\0';
        return CM_OK;
}

static bool is_wanted_field(size_t field)
{
        return field == STAT_UTIME || field == STAT_STIME || field >= STAT_STARTTIME;
}

/* Parses the fields we use; the command name (field 2) may hold spaces and ')'. */
static int parse_proc_stat(const char *text, uint64_t ret[STAT_FIELDS])
{
        uint64_t v[STAT_FIELDS] = { 0 };
        const char *p = strrchr(text, ')');
        char *end;
        size_t field;

        if (!p)
                return CM_EPARSE;
        p++;
        for (field = 3; field < STAT_FIELDS; field++) {
                p += strspn(p, " ");
                if (!*p)
                        return CM_EPARSE;
                if (!is_wanted_field(field)) {
                        p += strcspn(p, " ");
                        continue;
                }
                if (parse_u64(p, &end, &v[field]) < 0)
                        return CM_EPARSE;
                p = end;
        }
        memcpy(ret, v, sizeof(v));
        return CM_OK;
}

static int read_proc_stat(uint64_t ret[STAT_FIELDS])
{
        char text[2048];
        int r;

        r = read_small_file("/proc/self/stat", text, sizeof(text));
        if (r < 0)
                return r;
        return parse_proc_stat(text, ret);
}

static int read_boot_time(uint64_t *ret)
{
        char line[256];
        bool at_start = true;
        char *end;
        FILE *f;
        int r = CM_ENOTFOUND;

        f = fopen("/proc/stat", "re");
        if (!f)
                return CM_EIO;
        while (r == CM_ENOTFOUND && fgets(line, sizeof(line), f)) {
                bool starts = at_start;

                at_start = strchr(line, '\n') != NULL;
                if (starts && strncmp(line, "btime ", 6) == 0)
                        r = parse_u64(line + 6, &end, ret);
        }
        (void)fclose(f);
        return r;
}

static int count_open_fds(double *ret)
{
        char self[24];
        struct dirent *e;
        unsigned n = 0;
        DIR *d;

        d = opendir("/proc/self/fd");
        if (!d)
                return CM_EIO;
        /* Not counting the descriptor this walk itself holds. */
        (void)snprintf(self, sizeof(self), "%d", dirfd(d));
        while (n < MAX_FD_ENTRIES && (e = readdir(d)) != NULL)
                if (e->d_name[0] != '.' && strcmp(e->d_name, self) != 0)
                        n++;
        (void)closedir(d);
        *ret = n;
        return CM_OK;
}

static double start_time(const struct process_metrics *pm)
{
        uint64_t v[STAT_FIELDS];
        uint64_t btime;
        struct timespec now;

        if (read_proc_stat(v) == 0 && read_boot_time(&btime) == 0)
                return (double)btime + (double)v[STAT_STARTTIME] / pm->ticks_per_second;
        (void)clock_gettime(CLOCK_REALTIME, &now);
        return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

static void process_collect(struct metrics *m, void *ud)
{
        struct process_metrics *pm = ud;
        uint64_t v[STAT_FIELDS];
        struct rlimit rl;
        double fds;

        (void)m;
        if (read_proc_stat(v) == 0) {
                metric_gauge_set(pm->series[PM_RSS], (double)v[STAT_RSS] * pm->page_size);
                metric_gauge_set(pm->series[PM_VSIZE], (double)v[STAT_VSIZE]);
                metric_counter_set(pm->series[PM_CPU],
                                   (double)(v[STAT_UTIME] + v[STAT_STIME]) / pm->ticks_per_second);
        }
        if (count_open_fds(&fds) == 0)
                metric_gauge_set(pm->series[PM_OPEN_FDS], fds);
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
                metric_gauge_set(pm->series[PM_MAX_FDS], (double)rl.rlim_cur);
}

static int register_families(struct metrics *m, struct process_metrics *pm)
{
        struct metric_family *f = NULL;
        size_t i;
        int r = CM_OK;

        for (i = 0; r == 0 && i < PM_COUNT; i++) {
                struct metric_desc d = { .type = descs[i].type,
                                         .name = descs[i].name,
                                         .help = descs[i].help };

                r = metrics_register(m, &d, &f);
                if (r == 0)
                        pm->series[i] = metric_series(f, NULL);
        }
        return r;
}

int process_metrics_register(struct metrics *m)
{
        struct process_metrics *pm = xcalloc(1, sizeof(*pm));
        long ticks = sysconf(_SC_CLK_TCK);
        long page = sysconf(_SC_PAGESIZE);
        int r;

        pm->ticks_per_second = ticks > 0 ? (double)ticks : 100.0;
        pm->page_size = page > 0 ? (double)page : 4096.0;
        r = register_families(m, pm);
        if (r < 0)
                goto out;
        metric_gauge_set(pm->series[PM_START], start_time(pm));
        r = metrics_add_collector(m, process_collect, pm, free);
        if (r == 0)
                pm = NULL;
out:
        free(pm);
        return r;
}
