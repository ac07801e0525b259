#pragma once
/*
 * cpus: how many CPUs this process can really use, to size event-loop thread pools. More
 * event-loop threads than CPUs buy nothing and cost tail latency: two busy loops sharing one
 * CPU take turns a scheduler tick at a time, and every connection of the loop that is not
 * running waits that long (docs/performance.md, "p99 and the thread count").
 *
 * The answer is the scheduler affinity mask (taskset, cpusets) capped by the CPU quota of
 * the process's cgroup and of every cgroup above it: cgroup v2 `cpu.max`, or v1
 * `cpu.cfs_quota_us` / `cpu.cfs_period_us`, which is what a container runtime writes for a
 * Pod's CPU limit. A quota of 1.5 CPUs counts as 2.
 *
 * Pure functions and file reads; no shared state; any thread may call.
 */

#include "compiler.h"

/* Parses the text of a cgroup v2 cpu.max file ("max 100000" or "<quota> <period>",
 * trailing newline allowed). *ret is ceil(quota / period), or 0 for no limit. Returns 0 or
 * CM_EINVAL (and leaves *ret untouched). */
MUST_CHECK int cpus_parse_cpu_max(const char *text, unsigned *ret);

/* The tightest CPU quota of the cgroup that proc_cgroup names (the text of
 * /proc/self/cgroup) and of its ancestors, read from the cgroup file systems mounted under
 * root (normally "/sys/fs/cgroup": the unified hierarchy there, or v1's "cpu,cpuacct" or
 * "cpu" directory). Returns ceil(quota / period), or 0 when there is no limit or nothing
 * can be read. */
unsigned cpus_cgroup_limit(const char *root, const char *proc_cgroup);

/* CPUs in the calling thread's affinity mask; 1 when it cannot be read. */
unsigned cpus_affinity(void);

/* min(cpus_affinity(), the cgroup limit of this process), at least 1. */
unsigned cpus_usable(void);
