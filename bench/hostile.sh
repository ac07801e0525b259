#!/usr/bin/env bash
# Slow clients (issue #22): how many normal requests still succeed while a crowd of
# slow-header connections tries to hold every slot of the webhook and health listeners.
#
#   bench/hostile.sh [REQUESTS]   (default 40 normal requests per scenario, one a second)
#
# capmaas --webhooks-only with its defaults (Release build, pinned to CPU 0 like the other
# benches). The slow clients run on CPU 1 (a Python process busy with 1 100 threads), the
# normal requests on CPU 0 beside capmaas: on CPU 1 they would measure the attacker's
# scheduling, not the server's. A slow client finishes TLS, sends the request line and
# then one header byte every 2 s, never ending the headers, and reconnects at once when it is
# closed (bench/hostile.py). A normal request is a fresh connection with a 1 s budget for
# connect, TLS and the answer; it succeeds on a 2xx. Scenarios:
#   webhook          1100 slow clients from 127.0.0.2, the review POSTed from 127.0.0.1
#   webhook-one-addr 1100 slow clients and the normal requests all from 127.0.0.1
#   healthz          200 slow clients from 127.0.0.2, GET /healthz from 127.0.0.1
#   healthz-one-addr 200 slow clients and the probes all from 127.0.0.1
# One line per scenario: "<scenario>: ok=<n> of=<n> pct=<%> slow_opened=<n>", then
#   hostile: webhook_pct=<…> webhook_one_addr_pct=<…> healthz_pct=<…> healthz_one_addr_pct=<…>
# CAPMAAS_HOSTILE_BIN=<path> runs another capmaas binary (an older build, for a before/after).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
requests=${1:-40}
bench_setup
ulimit -n 16384
bin=${CAPMAAS_HOSTILE_BIN:-$bdir/capmaas}
review=$PWD/tests/fixtures/admission/maasmachinetemplate_create.json
path=/validate-infrastructure-cluster-x-k8s-io-v1beta1-maasmachinetemplate

diag=()  # builds before the diagnostics listener have no such flag
if "$bin" --help 2>&1 | grep -q -- --diagnostics-address; then diag=(--diagnostics-address 0); fi
wport=$(free_port)
hport=$(free_port)
"${server_cpu[@]}" "$bin" --webhooks-only --webhook-host 127.0.0.1 --webhook-port "$wport" \
  --webhook-cert-dir "$work/certs" --health-addr "127.0.0.1:$hport" --metrics-bind-addr 0 \
  "${diag[@]}" ${CAPMAAS_BENCH_ARGS:-} 2>"$work/capmaas.log" &
pids+=("$!")
for _ in $(seq 100); do grep -qs '"serving"' "$work/capmaas.log" && break; sleep 0.05; done

scenario() { # NAME ARGS…
  local name=$1 out
  shift
  local cpus=()
  if [ "${#client_cpu[@]}" -gt 0 ]; then cpus=(--slow-cpu 1 --normal-cpu 0); fi
  out=$(/usr/bin/python3 bench/hostile.py --requests "$requests" "${cpus[@]}" "$@")
  echo "$name: $out"
  pct[$name]=$(sed -n 's/.*pct=\([0-9.]*\).*/\1/p' <<<"$out")
}
declare -A pct
tls=(--port "$wport" --tls "$work/certs/ca.crt" --path "$path" --body "$review")
health=(--port "$hport" --path /healthz)
scenario webhook "${tls[@]}" --slow 1100 --slow-from 127.0.0.2
scenario webhook-one-addr "${tls[@]}" --slow 1100 --slow-from 127.0.0.1
scenario healthz "${health[@]}" --slow 200 --slow-from 127.0.0.2
scenario healthz-one-addr "${health[@]}" --slow 200 --slow-from 127.0.0.1
kill -0 "${pids[0]}" # still running
echo "hostile: webhook_pct=${pct[webhook]} webhook_one_addr_pct=${pct[webhook-one-addr]}" \
  "healthz_pct=${pct[healthz]} healthz_one_addr_pct=${pct[healthz-one-addr]}"
