#!/usr/bin/env bash
# Memory with a large cache (design.md §6: "with 10 000 MaasMachines cached ≤ 64 MiB"):
# kube-sim holds one paused Cluster and N Deployed-looking Machines and MaasMachines
# (bench/cache.py writes them as capi-sim and capmaas would); capmaas starts its controllers
# against it, lists and watches them all and reconciles every MaasMachine once (each pass
# stops at the paused Cluster, so MAAS is never called). Reported once the queue is empty:
# capmaas's resident set and peak, beside the reference the same run measures: the size of
# the same objects as compact JSON (what any cache of them has to hold at the least).
#
#   bench/cache.sh [N]   (default 10000)
#
# Ends with one line:
#   cache: maasmachines=<N> objects=<2N> json_kib=<k> rss_kib=<r> peak_rss_kib=<p> rss_per_object_b=<b> json_per_object_b=<j>
set -euo pipefail
N=${1:-10000}
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_build_sim capmaas kube-sim maas-sim
WORK=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
wait_line() { # FILE PATTERN
  for _ in $(seq 600); do grep -qs "$2" "$1" && return 0; sleep 0.1; done
  echo "timed out waiting for '$2' in $1" >&2
  cat "$1" >&2
  return 1
}

"$BUILD/kube-sim" --port 0 --dir "$WORK/kube" >"$WORK/kube.out" 2>"$WORK/kube.log" &
pids+=("$!")
wait_line "$WORK/kube.out" '^listening on'
KC=$WORK/kube/kubeconfig
kubectl --kubeconfig "$KC" apply -f config/crd/bases/ >/dev/null
kubectl --kubeconfig "$KC" apply -f tests/sim/capi/crds.yaml >/dev/null
"$BUILD/maas-sim" --port 0 --inventory tests/sim/maas/inventory-sample.yaml \
  --api-key ck:tk:bench >"$WORK/maas.out" 2>"$WORK/maas.log" &
pids+=("$!")
wait_line "$WORK/maas.out" '^listening on'
MAAS=$(sed -n 's/^listening on //p' "$WORK/maas.out")

T0=$(date +%s)
JSON=$($PY bench/cache.py "$KC" "$N" | sed -n 's/^json_bytes=//p')
echo "# wrote $N Machines and $N MaasMachines in $(($(date +%s) - T0)) s" >&2

certs/gen-dev-certs.sh "$WORK/certs" >/dev/null
MPORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# shellcheck disable=SC2086 # word splitting of CACHE_ARGS is the point
MAAS_ENDPOINT=$MAAS MAAS_API_KEY=ck:tk:bench "$BUILD/capmaas" --kubeconfig "$KC" \
  --webhook-port 0 --webhook-host 127.0.0.1 --webhook-cert-dir "$WORK/certs" --health-addr 0 \
  --metrics-bind-addr "127.0.0.1:$MPORT" ${CACHE_ARGS:-} 2>"$WORK/capmaas.log" &
CPID=$!
pids+=("$CPID")
T0=$(date +%s.%N)
wait_line "$WORK/capmaas.log" 'controllers started'
depth() {
  curl -sS "http://127.0.0.1:$MPORT/metrics" |
    awk '/^workqueue_depth\{name="maasmachine"\}/ {print $2}'
}
done_total() {
  curl -sS "http://127.0.0.1:$MPORT/metrics" |
    awk '/^controller_runtime_reconcile_total\{controller="maasmachine"/ {s += $2} END {print s + 0}'
}
for _ in $(seq 600); do
  [ "$(done_total)" -ge "$N" ] && [ "$(depth)" = 0 ] && break
  sleep 0.1
done
echo "# synced and every MaasMachine reconciled once after $($PY -c "import time; print(round(time.time() - $T0, 1))") s" >&2
sleep "${SETTLE:-2}"
RSS=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$CPID/status")
HWM=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$CPID/status")
OBJ=$((2 * N))
echo "cache: maasmachines=$N objects=$OBJ json_kib=$((JSON / 1024)) rss_kib=$RSS peak_rss_kib=$HWM" \
  "rss_per_object_b=$((RSS * 1024 / OBJ)) json_per_object_b=$((JSON / OBJ))"
