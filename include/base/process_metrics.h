#pragma once
/*
 * process_metrics: the standard process_* series of Prometheus's Go client, sampled from
 * /proc/self at every render by a registry collector: process_resident_memory_bytes,
 * process_virtual_memory_bytes, process_open_fds, process_max_fds,
 * process_cpu_seconds_total (user + system) and process_start_time_seconds (boot time from
 * /proc/stat btime plus the starttime field of /proc/self/stat, computed once; the
 * registration time when /proc is unreadable). A failed read keeps the previous values.
 * The collector's state is owned and freed by the registry.
 */

#include "compiler.h"

struct metrics;

/* Registers the families and the collector. Call once per registry (a second call adds a
 * second, harmless collector). Thread-safe; CM_ECONFLICT/CM_ETOOBIG from the registry. */
MUST_CHECK int process_metrics_register(struct metrics *m);
