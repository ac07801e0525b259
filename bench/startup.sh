#!/usr/bin/env bash
# Start to serving (design.md §6: "start to ready ≤ 100 ms, excluding the informers' first
# list"): the time from starting the process to its first answered admission review (the
# CREATE review of bench/webhook.sh, HTTPS, a new connection every millisecond until one
# is answered 200), for capmaas --webhooks-only and, in the same run, the Go net/http
# webhook of bench/go-webhook; then for capmaas with its controllers against an empty
# kube-sim (so the first list is empty) and maas-sim with the sample inventory (a review
# that arrives before the first MAAS inventory load waits for it, so this includes that
# load). Median over the rounds.
#
#   bench/startup.sh [ROUNDS]   (default 15)
#
# Ends with one line:
#   startup: capmaas_ms=<median> go_ms=<median> capmaas_controllers_ms=<median>
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
rounds=${1:-15}
bench_setup golang-go
(cd bench/go-webhook && GO111MODULE=off GOCACHE="$work/gocache" go build -o "$work/go-webhook" .)
cmake --build "$bdir" -j"$(nproc)" --target kube-sim maas-sim >/dev/null
review=tests/fixtures/admission/maasmachinetemplate_create.json
path=/validate-infrastructure-cluster-x-k8s-io-v1beta1-maasmachinetemplate
PY=/usr/bin/python3

median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

run() { # NAME PORT COMMAND...
  local name=$1 port=$2
  shift 2
  $PY bench/startup.py "$port" "$path" "$review" "$work/certs/ca.crt" "$rounds" -- "$@" \
    >"$work/$name.ms"
  printf '%-22s median %6.1f ms   (rounds: %s)\n' "$name" "$(median <"$work/$name.ms")" \
    "$(tr '\n' ' ' <"$work/$name.ms")"
}

port=$(free_port)
run capmaas "$port" "$bdir/capmaas" --webhooks-only --webhook-host 127.0.0.1 \
  --webhook-port "$port" --webhook-cert-dir "$work/certs" --health-addr 0 --diagnostics-address 0
run go "$port" "$work/go-webhook" -addr "127.0.0.1:$port" -cert "$work/certs/tls.crt" \
  -key "$work/certs/tls.key"

"$bdir/kube-sim" --port 0 --dir "$work/kube" >"$work/kube.out" 2>"$work/kube.log" &
pids+=("$!")
for _ in $(seq 100); do grep -qs '^listening on' "$work/kube.out" && break; sleep 0.05; done
kubectl --kubeconfig "$work/kube/kubeconfig" apply -f config/crd/bases/ >/dev/null
kubectl --kubeconfig "$work/kube/kubeconfig" apply -f tests/sim/capi/crds.yaml >/dev/null
"$bdir/maas-sim" --port 0 --inventory tests/sim/maas/inventory-sample.yaml \
  --api-key ck:tk:bench >"$work/maas.out" 2>"$work/maas.log" &
pids+=("$!")
for _ in $(seq 100); do grep -qs '^listening on' "$work/maas.out" && break; sleep 0.05; done
MAAS_ENDPOINT=$(sed -n 's/^listening on //p' "$work/maas.out") MAAS_API_KEY=ck:tk:bench \
  run capmaas-controllers "$port" "$bdir/capmaas" --kubeconfig "$work/kube/kubeconfig" \
  --webhook-host 127.0.0.1 --webhook-port "$port" --webhook-cert-dir "$work/certs" \
  --health-addr 0 --diagnostics-address 0
printf 'startup: capmaas_ms=%s go_ms=%s capmaas_controllers_ms=%s\n' \
  "$(median <"$work/capmaas.ms")" "$(median <"$work/go.ms")" \
  "$(median <"$work/capmaas-controllers.ms")"
