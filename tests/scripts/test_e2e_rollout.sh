#!/usr/bin/env bash
# End to end, a rollout as Cluster API does it (issue 24, item 6), on the local stack: a
# cluster of 3 control planes and 3 workers is Ready; new MaasMachineTemplates are created
# and the MachineDeployment and the KubeadmControlPlane pointed at them. capi-sim then
# replaces every Machine as CAPI's controllers do: the MachineDeployment through a new
# MachineSet (<md>-<5 characters>, the old one deleted once empty) within its defaults
# maxSurge 1 / maxUnavailable 0 (never more than 4 workers, never fewer than 3 ready), the
# control plane one at a time, new before old (never more than 4). Polled throughout: the
# MaasCluster's endpoint record in maas-sim is never empty. At the end every Machine is
# new and from the new templates, every MaasMachine and Node Ready, and nothing is leaked in
# maas-sim (every machine not Ready belongs to a live MaasMachine, one each).
# E2E_CAPI_CONTRACT picks the Cluster API release capi-sim plays: v1beta2 (the default) or
# v1beta1 (test_e2e_rollout_v1beta1.sh).
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
# shellcheck source=tests/scripts/e2e_lib.sh
. "$(dirname "$0")/e2e_lib.sh"
ks_need kubectl curl
SRC=${CAPMAAS_SOURCE_DIR:?CAPMAAS_SOURCE_DIR is not set}
BUILD=${CAPMAAS_BUILD_DIR:?CAPMAAS_BUILD_DIR is not set}
E2E_CAPI_CONTRACT=${E2E_CAPI_CONTRACT:-v1beta2}
STACK_CAPI_CONTRACT=$E2E_CAPI_CONTRACT
STACK_DEPLOY_SECONDS=0.5
STACK_RELEASE_SECONDS=0.3
STACK_CAPMAAS_ARGS="--machine-refresh-interval 2s"
trap 'rm -f "$POLL_ON"; stack_down; ks_cleanup' EXIT
PY=/usr/bin/python3
POLL_ON=$KS_WORK/polling

n_ready_is() { # N: N MaasMachines, every one Ready
  k get maasmachines -o json | $PY -c 'import json,sys
i=json.load(sys.stdin)["items"]
sys.exit(0 if len(i)==int(sys.argv[1]) and all(x.get("status",{}).get("ready") for x in i) else 1)' "$1"
}
# Leaks and doubles, as test_chaos.sh: every MAAS machine not Ready (nor Releasing) carries
# the UID of a live MaasMachine, no UID owns two, and as many are held as MaasMachines exist.
audit() {
  local uids
  uids=$(k get maasmachines -A -o jsonpath='{.items[*].metadata.uid}')
  stack_maas GET state | $PY -c "
import json,sys
uids=set('$uids'.split())
held=[m for m in json.load(sys.stdin)['machines'] if m['status_name'] not in ('Ready','Releasing')]
owners=[m.get('agent_name') for m in held]
leaked=[m['system_id'] for m in held if m.get('agent_name') not in uids]
doubles=sorted({o for o in owners if owners.count(o) > 1})
print('held=%d leaked=%d doubles=%d' % (len(held), len(leaked), len(doubles)))
sys.exit(0 if not leaked and not doubles and len(held) == len(uids) else 1)"
}
machine_names() { k get machines -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort; }
machinesets() { # the MachineDeployment's MachineSets: "name hash-label" per line
  k get machinesets -o json | $PY -c 'import json,sys
for m in json.load(sys.stdin)["items"]:
    if m["metadata"].get("labels",{}).get("cluster.x-k8s.io/deployment-name") == "demo-md-0":
        print(m["metadata"]["name"], m["metadata"]["labels"].get("machine-template-hash"))'
}

stack_up "$KS_WORK/stack" || {
  echo "not ok - the stack did not start"
  tail -n 20 "$KS_WORK"/stack/*.log
  exit 1
}
check "the stack starts (Cluster API $E2E_CAPI_CONTRACT)" 0 '' -- true
MANIFEST=$KS_WORK/cluster.yaml
stack_render_cluster "$MANIFEST" WORKER_MACHINE_COUNT=3 || {
  echo "not ok - the release's cluster template does not render"
  exit 1
}
check "the cluster is accepted" 0 '' -- k apply -f "$MANIFEST"
all_ready() { n_ready_is 6 && cluster_ready; }
check "6 MaasMachines Ready and the cluster Ready" 0 '' -- within 120 all_ready
OLD=$(machine_names)
MS0=$(machinesets)
check "the MachineDeployment's Machines come from one MachineSet named <md>-<5 characters>" 0 \
  '^demo-md-0-[bcdfghjklmnpqrstvwxz2456789]{5} [0-9]+-[bcdfghjklmnpqrstvwxz2456789]{5}$' -- echo "$MS0"
set_members() { k get machines -l "cluster.x-k8s.io/set-name=${1%% *},machine-template-hash=${1##* }" -o name | wc -l; }
check "its 3 Machines carry its name and hash" 0 '^3$' -- set_members "$MS0"
HOST=$(k get maascluster demo -o jsonpath='{.spec.controlPlaneEndpoint.host}')
check "the endpoint has a DNS name" 0 '\.' -- echo "$HOST"

# --- the poller: the endpoint record and the Machine counts, every 0.2 s during the rollout
touch "$POLL_ON"
$PY - "${STACK_MAAS_URL%/MAAS}/_sim/state" "$HOST" "$POLL_ON" >"$KS_WORK/dns-samples" <<'PY' &
import json, os, sys, time, urllib.request
url, host, on = sys.argv[1:4]
n = empty = 0
while os.path.exists(on):
    try:
        st = json.load(urllib.request.urlopen(url, timeout=5))
    except Exception:
        time.sleep(0.2)
        continue
    recs = [r for r in st.get("dnsresources", []) if r.get("fqdn") == host]
    ips = recs[0].get("ips", []) if len(recs) == 1 else []
    n += 1
    empty += not ips
    time.sleep(0.2)
print("samples=%d empty=%d" % (n, empty))
PY
DNS_POLLER=$!
machine_counts() { # "workers workers-ready control-planes" (Machines not being deleted)
  k get machines -o json | $PY -c 'import json,sys
w=wr=cp=0
for m in json.load(sys.stdin)["items"]:
    if m["metadata"].get("deletionTimestamp"):
        continue
    st=m.get("status",{})
    ready=st.get("infrastructureReady") or st.get("initialization",{}).get("infrastructureProvisioned")
    if "cluster.x-k8s.io/control-plane" in m["metadata"].get("labels",{}):
        cp+=1
    else:
        w+=1; wr+=bool(ready)
print(w, wr, cp)'
}
(while [ -e "$POLL_ON" ]; do
  machine_counts
  sleep 0.3
done) >"$KS_WORK/count-samples" 2>/dev/null &
COUNT_POLLER=$!

# --- the rollout: new templates, the owners pointed at them ----------------------------------
new_template() { # OLD NEW: a copy of template OLD named NEW
  k get maasmachinetemplate "$1" -o json | $PY -c 'import json,sys
t=json.load(sys.stdin)
print(json.dumps({"apiVersion":t["apiVersion"],"kind":t["kind"],
  "metadata":{"name":sys.argv[1],"namespace":"default"},"spec":t["spec"]}))' "$2" | k apply -f -
}
new_templates() { new_template demo-md-0 demo-md-0-v2 && new_template demo-control-plane demo-control-plane-v2; }
check "new MaasMachineTemplates are accepted" 0 '' -- new_templates
T0=$(date +%s)
check "the MachineDeployment is pointed at its new template" 0 '' -- \
  k patch machinedeployment demo-md-0 --type merge \
  -p '{"spec":{"template":{"spec":{"infrastructureRef":{"name":"demo-md-0-v2"}}}}}'
if [ "$E2E_CAPI_CONTRACT" = v1beta2 ]; then
  KCP_PATCH='{"spec":{"machineTemplate":{"spec":{"infrastructureRef":{"name":"demo-control-plane-v2"}}}}}'
else
  KCP_PATCH='{"spec":{"machineTemplate":{"infrastructureRef":{"name":"demo-control-plane-v2"}}}}'
fi
check "the KubeadmControlPlane is pointed at its new template" 0 '' -- \
  k patch kubeadmcontrolplane demo-control-plane --type merge -p "$KCP_PATCH"

rolled_out() { # every Machine new, from the new templates, and every MaasMachine Ready
  local now
  now=$(machine_names)
  [ "$(wc -l <<<"$now")" -eq 6 ] && [ -z "$(comm -12 <(echo "$OLD") <(echo "$now"))" ] &&
    [ "$(k get machines -o jsonpath='{range .items[*]}{.metadata.annotations.cluster\.x-k8s\.io/cloned-from-name}{"\n"}{end}' | grep -c -- '-v2$')" -eq 6 ] &&
    n_ready_is 6
}
check "every Machine is replaced by one from the new templates, all Ready" 0 '' -- within 180 rolled_out
echo "# rolled out in $(($(date +%s) - T0)) s"
check "the cluster stays Ready" 0 '' -- cluster_ready
nodes_ready() {
  [ "$(wk get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c '^True$')" -eq 6 ] &&
    [ "$(wk get nodes -o name | wc -l)" -eq 6 ]
}
check "6 Nodes, each Ready (the old ones gone)" 0 '' -- within 30 nodes_ready
status_of() { k get "$1" "$2" -o jsonpath='{.status.replicas} {.status.updatedReplicas} {.status.readyReplicas}'; }
status_is() { [ "$(status_of "$1" "$2")" = "3 3 3" ]; }
check "the MachineDeployment's status: 3 replicas, 3 updated, 3 ready" 0 '' -- \
  within 15 status_is machinedeployment demo-md-0
check "the KubeadmControlPlane's status: 3 replicas, 3 updated, 3 ready" 0 '' -- \
  within 15 status_is kubeadmcontrolplane demo-control-plane
one_new_set() {
  local now
  now=$(machinesets)
  [ "$(wc -l <<<"$now")" -eq 1 ] && [ "$now" != "$MS0" ]
}
check "one MachineSet is left, a new one; the old one is deleted" 0 '' -- within 15 one_new_set
MS1=$(machinesets)
echo "# MachineSets: before $MS0, after $MS1"
check "the new MachineSet is named <md>-<5 characters> too" 0 \
  '^demo-md-0-[bcdfghjklmnpqrstvwxz2456789]{5} [0-9]+-[bcdfghjklmnpqrstvwxz2456789]{5}$' -- echo "$MS1"
check "its spec.template names the new template" 0 '^demo-md-0-v2$' -- \
  k get machineset "${MS1%% *}" -o jsonpath='{.spec.template.spec.infrastructureRef.name}'

rm -f "$POLL_ON"
wait "$DNS_POLLER" "$COUNT_POLLER" 2>/dev/null
echo "# endpoint record: $(cat "$KS_WORK/dns-samples")"
check "the endpoint record was never empty during the rollout" 0 '^samples=[1-9][0-9]* empty=0$' -- \
  cat "$KS_WORK/dns-samples"
bounds() { # every sample: workers <= 4, workers ready >= 3 (maxUnavailable 0), control planes <= 4
  $PY -c 'import sys
rows=[list(map(int,l.split())) for l in open(sys.argv[1]) if len(l.split())==3]
print("samples=%d max_workers=%d min_ready_workers=%d max_cps=%d" % (len(rows),
  max(r[0] for r in rows), min(r[1] for r in rows), max(r[2] for r in rows)))
sys.exit(0 if rows and all(r[0] <= 4 and r[1] >= 3 and r[2] <= 4 for r in rows) else 1)' "$KS_WORK/count-samples"
}
check "maxSurge 1 / maxUnavailable 0 held: at most 4 workers, never fewer than 3 ready; at most 4 control planes" 0 '' -- bounds
echo "# $(bounds)"
check "the workers did surge (a 4th existed at some point)" 0 '' -- \
  $PY -c 'import sys; sys.exit(0 if any(l.split()[0]=="4" for l in open(sys.argv[1])) else 1)' "$KS_WORK/count-samples"
check "nothing leaked in maas-sim: 6 held, each by a live MaasMachine" 0 '' -- within 20 audit
check "... as the audit says" 0 '^held=6 leaked=0 doubles=0$' -- audit
check "capmaas logged no sanitizer report" 1 '' -- grep -Eq 'runtime error|AddressSanitizer' \
  "$STACK_DIR/capmaas.log"
check "capi-sim logged no sanitizer report" 1 '' -- grep -Eq 'runtime error|AddressSanitizer' \
  "$STACK_DIR"/capi-sim.*.log
stack_down
echo "$KS_PASS passed, $KS_FAIL failed"
[ "$KS_FAIL" -eq 0 ]
