#!/usr/bin/env bash
# Scale benchmark (issue 8): N MaasMachines (3 control planes + N-3 workers of the release's
# cluster template, rendered by stack_render_cluster) from created to Ready on the local
# simulated stack, maas-sim deploying in 0 s from an inventory generated to fit. Ends with
# one line:
#   scale: machines=<N> seconds=<s> maas_reads_per_machine=<r> maas_writes_per_machine=<w> kube_writes_per_machine=<k> peak_rss_kib=<r>
# Readiness is followed by watches (bench/ready_watch.py), not lists, so the bench's own
# polling costs the API server little even at 10 000 machines.
# kube writes are capmaas's writes to objects (events are reported apart); MAAS writes are
# every non-GET request maas-sim served. Targets for N = 1000: <= 60 s, <= 5 MAAS and <= 4
# Kubernetes writes per machine, peak RSS <= 64 MiB. The MAAS request budget is off
# (--maas-api-qps 0): this measures capmaas, not the budget.
#
#   bench/scale.sh [N]      (default 1000)
set -uo pipefail
N=${1:-1000}
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
STACK_DEPLOY_SECONDS=0
STACK_RELEASE_SECONDS=0
STACK_CAPMAAS_ARGS="--machine-concurrency ${CONCURRENCY:-8} --kube-api-qps 1000 --kube-api-burst 2000 --maas-api-qps 0 ${SCALE_ARGS:-}"
stack_up "$WORK/stack" || exit 1
stack_render_cluster "$WORK/cluster.yaml" WORKER_MACHINE_COUNT=$((N - 3)) || exit 1
stack_maas POST reset-log >/dev/null
KUBECTL=(kubectl --kubeconfig "$STACK_KUBECONFIG" --cache-dir "$STACK_DIR/kcache")
$PY bench/ready_watch.py "$N" 900 "${KUBECTL[@]}" >"$WORK/ready" &
WATCH=$!
sleep 1 # the watches are open before the first object exists
stack_kubectl apply -f "$WORK/cluster.yaml" >/dev/null || exit 1
if ! wait "$WATCH"; then
  echo "not Ready after 15 minutes" >&2
  exit 1
fi
cat "$WORK/ready" >&2
SECS=$(sed -n 's/.* seconds=\([0-9.]*\).*/\1/p' "$WORK/ready")
read -r MR MW < <(stack_maas GET requests | $PY -c "import json,sys; d=json.load(sys.stdin); print(round(d['reads']/$N, 2), round(d['writes']/$N, 2))")
KJ=$(curl -sS --cacert "$STACK_DIR/mgmt/ca.crt" -H "Authorization: Bearer $(sed -n 's/^ *token: //p' "$STACK_KUBECONFIG")" \
  "$(sed -n 's/^ *server: //p' "$STACK_KUBECONFIG" | head -1)/_sim/requests")
KW=$(echo "$KJ" | $PY -c "import json,sys
c=json.load(sys.stdin)['counts']
print(round(sum(v for k,v in c.items() if k.startswith('capmaas ') and k.endswith(' objects') and ' GET ' not in k)/$N, 2))")
EV=$(echo "$KJ" | $PY -c "import json,sys
c=json.load(sys.stdin)['counts']
print(round(sum(v for k,v in c.items() if k.startswith('capmaas ') and k.endswith(' events') and ' GET ' not in k)/$N, 2))")
echo "$KJ" | $PY -c "import collections,json,sys
c=json.load(sys.stdin)['counts']
t=collections.Counter()
for k,v in c.items():
    w=k.split()
    t[w[0]+' '+w[1]]+=v
print('# management API requests per machine:', ', '.join('%s %.2f' % (k, v/$N) for k,v in t.most_common(12)))"
RSS=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$STACK_CAPMAAS_PID/status")
# CPU seconds each process used (user + system): comparable across runs on a busy machine
CPU=""
for p in $(printf '%s\n' "${STACK_PIDS[@]}" "$STACK_CAPMAAS_PID" | sort -u); do
  [ -r "/proc/$p/stat" ] || continue
  CPU+=" $(cat "/proc/$p/comm")=$(awk -v t="$(getconf CLK_TCK)" '{printf "%.1f", ($14 + $15) / t}' "/proc/$p/stat")"
done
echo "# cpu seconds:$CPU; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# events written per machine: $EV; targets for 1000: <= 60 s, <= 5 MAAS, <= 4 kube writes, <= 65536 KiB"
echo "scale: machines=$N seconds=$SECS maas_reads_per_machine=$MR maas_writes_per_machine=$MW kube_writes_per_machine=$KW peak_rss_kib=$RSS"
