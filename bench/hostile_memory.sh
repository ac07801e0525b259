#!/usr/bin/env bash
# Memory per request under hostile AdmissionReviews (issue #22): capmaas --webhooks-only
# (Release build) gets rounds of 8 concurrent 3 MiB requests (the "extra": [0,0,...] array
# bomb, a review with one 3 MiB annotation, a review as dense as the decode budget admits),
# and the server's VmRSS and VmHWM (peak RSS) are read from /proc after each round.
#
#   bench/hostile_memory.sh [CONCURRENCY] [MIB]   (default 8 requests of 3 MiB)
#
# The target: peak RSS <= idle + 48 MiB. The last line is
#   memory: idle_kib=<..> peak_kib=<..> peak_over_idle_mib=<..> after_kib=<..> statuses=<..>
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup
port=$(free_port)
server_cpu=() # the requests arrive at once: let the server use every CPU
start_capmaas "$port"
/usr/bin/python3 bench/hostile_memory.py "$port" "$work/certs/ca.crt" "$capmaas_pid" "${1:-8}" "${2:-3}"
