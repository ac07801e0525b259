#!/usr/bin/env bash
# Two capmaas processes contend for one Lease on kube-sim (issue 6): exactly one leads and
# runs the controllers while both serve webhooks and metrics; after the leader is killed
# with SIGKILL the other takes over within the lease duration; a leader stopped with SIGTERM
# releases the Lease so the holder is cleared at once.
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
ks_need curl

SRC=${CAPMAAS_SOURCE_DIR:?CAPMAAS_SOURCE_DIR is not set}
CERTS=${CAPMAAS_TEST_CERTS:?CAPMAAS_TEST_CERTS is not set}
BUILD=${CAPMAAS_BUILD_DIR:?CAPMAAS_BUILD_DIR is not set}
KEY=ck:tk:secret1
LEASE_S=4
LEASE=/apis/coordination.k8s.io/v1/namespaces/default/leases/controller-leader-election-capmaas
PIDS=()

stop_all() {
  local p
  for p in "${PIDS[@]}"; do
    [ -n "$p" ] && kill -0 "$p" 2>/dev/null && kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
  done
  ks_cleanup
}
trap stop_all EXIT

ks_start

ks_maas_start "$KEY"

# The provider's informers need the CRDs: kube-sim takes YAML bodies.
install_crds() {
  local f
  for f in "$SRC"/config/crd/bases/*.yaml; do
    ks_curl POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions \
      -H 'Content-Type: application/yaml' --data-binary "@$f" -o /dev/null -w '%{http_code}\n'
  done
  awk -v dir="$KS_WORK" '/^---/{n++; next} {print > (dir "/capi-crd-" n ".yaml")}' \
    "$SRC/tests/sim/capi/crds.yaml"
  for f in "$KS_WORK"/capi-crd-*.yaml; do
    grep -q '^kind: CustomResourceDefinition' "$f" || continue
    ks_curl POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions \
      -H 'Content-Type: application/yaml' --data-binary "@$f" -o /dev/null -w '%{http_code}\n'
  done
}
CODES=$(install_crds | sort -u | tr '\n' ' ')
check "CRDs are installed" 0 '^201 $' -- echo "$CODES"

start_capmaas() { # start_capmaas NAME
  MAAS_ENDPOINT=$MAAS_URL MAAS_API_KEY=$KEY "${CAPMAAS_BIN:?CAPMAAS_BIN is not set}" \
    --kubeconfig "$KS_DIR/kubeconfig" --leader-elect --leader-election-namespace default \
    --leader-elect-lease-duration "${LEASE_S}s" --leader-elect-renew-deadline 3s \
    --leader-elect-retry-period 500ms --webhook-port 0 --webhook-host 127.0.0.1 \
    --health-addr 127.0.0.1:0 --metrics-bind-addr 127.0.0.1:0 --webhook-cert-dir "$CERTS" \
    --admission-maas-checks=false 2>"$KS_WORK/$1.log" &
  PIDS+=($!)
}

leads() { grep -c 'became the leader' "$KS_WORK/$1.log" 2>/dev/null; }
metrics_port() { sed -n 's/.*"metrics_port":"\([0-9]*\)".*/\1/p' "$KS_WORK/$1.log" | head -1; }
master_status() {
  curl -s "http://127.0.0.1:$(metrics_port "$1")/metrics" |
    sed -n 's/^leader_election_master_status{[^}]*} //p'
}
one_leader() { [ $(($(leads a) + $(leads b))) -eq 1 ]; }

start_capmaas a
start_capmaas b
check "exactly one of two replicas leads" 0 '' -- wait_until 20 one_leader
sleep 1.5 # three retry periods: a second leader would have shown by now
check "still exactly one leader after three retry periods" 0 '' -- one_leader
if [ "$(leads a)" -eq 1 ]; then LEADER=a L=0 OTHER=b; else LEADER=b L=1 OTHER=a; fi
check "the Lease names the leader" 0 "holderIdentity" -- ks_curl GET "$LEASE"
check "leader_election_master_status is 1 on the leader" 0 '^1$' -- master_status "$LEADER"
check "leader_election_master_status is 0 on the other" 0 '^0$' -- master_status "$OTHER"
check "the leader started the controllers" 0 '' -- grep -q 'controllers started' "$KS_WORK/$LEADER.log"
check "the other replica serves webhooks too" 0 '' -- grep -q '"webhook_port"' "$KS_WORK/$OTHER.log"

kill -KILL "${PIDS[$L]}"
wait "${PIDS[$L]}" 2>/dev/null
PIDS[L]=
T0=$(date +%s%N)
check "the other replica takes over after the leader is killed" 0 '' -- \
  wait_until $((LEASE_S + 6)) bash -c "grep -q 'became the leader' '$KS_WORK/$OTHER.log'"
MS=$((($(date +%s%N) - T0) / 1000000))
echo "# takeover after ${MS} ms (lease ${LEASE_S} s)"
# client-go semantics: the candidate may take the Lease once it has seen no renewal for the
# lease duration on its own clock; it looks every retry period (jittered up to 1.2x), and the
# last renewal it saw can be up to one retry period before the kill. So the bound is the
# lease duration plus a few retry periods, not the lease duration alone.
check "takeover within the lease duration plus four retry periods" 0 '' -- \
  test "$MS" -le $((LEASE_S * 1000 + 2000))

O=$((1 - L))
kill -TERM "${PIDS[$O]}"
wait "${PIDS[$O]}"
RC=$?
PIDS[O]=
check "the new leader exits 0 on SIGTERM" 0 '' -- test "$RC" -eq 0
check "it released the Lease on the way out" 0 '"leaseDurationSeconds": ?1[,}]' -- ks_curl GET "$LEASE"
check "no sanitizer reports" 1 '' -- grep -Eq 'runtime error|AddressSanitizer|ThreadSanitizer' \
  "$KS_WORK/a.log" "$KS_WORK/b.log"

ks_stop_pid "$MAAS_PID"
MAAS_PID=
ks_finish
