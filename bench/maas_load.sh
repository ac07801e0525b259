#!/usr/bin/env bash
# MAAS load per machine (issue 18): N MaasMachines (3 control planes + N-3 workers of the
# release's cluster template) from created to Ready on the local simulated stack, with
# maas-sim taking DEPLOY_SECONDS to deploy each machine (a real region's pace), then the
# cluster deleted until every machine is Ready in MAAS again. Every figure is counted from
# maas-sim's own request log. Ends with one line:
#   maas_load: machines=N deploy_s=D seconds=S maas_reads_per_machine=R maas_writes_per_machine=W maas_peak_rps=P
# for the create -> Ready part (seconds, reads, writes and the peak requests MAAS served in
# any one second), after a "# delete:" line with the same counts for the delete part.
# Targets (issue 18, N = 200, D = 120): reads + writes <= 5 per machine to Ready, <= 2 more
# for the delete; each machine Ready within D + 15 s of its bootstrap data (printed as
# bootstrap_to_ready; the whole rollout is about 2 D, since Cluster API bootstraps workers
# only after the first control plane is up).
#
#   bench/maas_load.sh [N] [DEPLOY_SECONDS]     (defaults 200 and 120)
set -uo pipefail
N=${1:-200}
D=${2:-120}
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_build_sim capmaas kube-sim maas-sim capi-sim || exit 1
WORK=$(mktemp -d)
# shellcheck source=scripts/stack.sh
. scripts/stack.sh
trap 'kill "${WATCH:-}" 2>/dev/null; stack_down; rm -rf "$WORK"' EXIT
$PY bench/gen_inventory.py $((N + N / 10 + 3)) >"$WORK/inventory.yaml"
STACK_INVENTORY=$WORK/inventory.yaml
STACK_DEPLOY_SECONDS=$D
STACK_RELEASE_SECONDS=1
# The stack refreshes the admission inventory every 5 s for the tests' sake (8 MAAS reads
# each with three zones); the bench measures capmaas's default, 60 s.
STACK_CAPMAAS_ARGS="--machine-concurrency ${CONCURRENCY:-8} --kube-api-qps 1000 --kube-api-burst 2000 --maas-inventory-interval 60s ${LOAD_ARGS:-}"
stack_up "$WORK/stack" || exit 1
stack_render_cluster "$WORK/cluster.yaml" WORKER_MACHINE_COUNT=$((N - 3)) || exit 1

now() { $PY -c 'import time; print(time.time())'; }
since() { $PY -c "import time; print(round(time.time() - $1, 1))"; }
# counts: prints "reads writes peakRps", the calls by kind on stderr ("# calls: GET
# machines/ 4, GET machine 20, POST machine op=deploy 20, ..." from the log's last 4096
# entries), and resets maas-sim's log
counts() {
  stack_maas GET requests | $PY -c '
import collections, json, re, sys
d = json.load(sys.stdin)
kinds = collections.Counter()
for r in d["requests"]:
    path = re.sub(r"^.*/api/2\.0/", "", r["path"])
    path = re.sub(r"^machines/[^/]+/$", "machine", path)
    kinds[r["method"] + " " + path + (" op=" + r["op"] if r["op"] else "")] += 1
print("# calls:", ", ".join("%s %d" % kv for kv in kinds.most_common()), file=sys.stderr)
print(d["reads"], d["writes"], d["peakRps"])'
  stack_maas POST reset-log >/dev/null
}
per() { $PY -c "print(round($1 / $N, 2))"; }
in_use() {
  stack_maas GET state | $PY -c 'import json,sys; print(sum(1 for m in json.load(sys.stdin)["machines"] if m["status_name"] != "Ready"))'
}
wait_for() { # DESCRIPTION LIMIT_S T0 COMMAND…: polls once a second until COMMAND succeeds
  local what=$1 limit=$2 t0=$3
  shift 3
  until "$@"; do
    if [ "$($PY -c "import time; print(int(time.time() - $t0))")" -gt "$limit" ]; then
      echo "maas_load: $what not reached after $limit s" >&2
      exit 1
    fi
    sleep 1
  done
}
all_free() { [ "$(in_use)" -eq 0 ]; }

counts >/dev/null
KUBECTL=(kubectl --kubeconfig "$STACK_KUBECONFIG" --cache-dir "$STACK_DIR/kcache")
$PY bench/ready_watch.py "$N" $((D * 3 + 900)) "${KUBECTL[@]}" >"$WORK/ready" &
WATCH=$!
sleep 1 # the watches are open before the first object exists
stack_kubectl apply -f "$WORK/cluster.yaml" >/dev/null || exit 1
T0=$(now)
if ! wait "$WATCH"; then
  echo "maas_load: $N Ready not reached" >&2
  exit 1
fi
SECS=$(since "$T0")
read -r P50 PMAX < <(sed -n 's/.*bootstrap_to_ready_p50=\([0-9.]*\) bootstrap_to_ready_max=\([0-9.]*\).*/\1 \2/p' "$WORK/ready")
read -r CR CW CP < <(counts)
stack_kubectl delete cluster demo --wait=false >/dev/null || exit 1
T1=$(now)
wait_for "every machine Ready in MAAS" 900 "$T1" all_free
DSECS=$(since "$T1")
read -r DR DW DP < <(counts)
echo "# delete: seconds=$DSECS maas_reads_per_machine=$(per "$DR") maas_writes_per_machine=$(per "$DW") maas_peak_rps=$DP"
echo "# each machine from its bootstrap data to Ready: p50 ${P50} s, max ${PMAX} s (Cluster API gives a worker its bootstrap data only once the control plane is initialized, so the whole rollout takes about two deploys)"
echo "# targets for 200/120: create -> Ready reads + writes <= 5 per machine; each machine Ready within D + 15 s of its bootstrap data; delete <= 2 more"
echo "maas_load: machines=$N deploy_s=$D seconds=$SECS maas_reads_per_machine=$(per "$CR") maas_writes_per_machine=$(per "$CW") maas_peak_rps=$CP"
