#!/usr/bin/env bash
# End to end on the local stack (issue 20): reboot-first remediation. The demo cluster (1
# control plane, 2 workers) gets a MaasRemediationTemplate (retryLimit 2, timeout 15s) and
# its MachineHealthCheck's remediation.templateRef names it (timeouts shortened for the
# test). capi-sim's Nodes follow maas-sim's kubelets (STACK_SIM_KUBELETS):
#   hung   a worker's kubelet hangs: its Node goes NotReady, the MHC creates a MaasRemediation
#          named after the Machine, capmaas power cycles the MAAS machine exactly once
#          (maas-sim's request log), the Node comes back Ready, the MaasRemediation ends
#          Succeeded (its watch shows it; the MHC deletes it) and the Machine stays;
#   dead   a worker's kubelet stays down: 2 power cycles, then the Machine is handed back
#          (OwnerRemediated False), replaced by its MachineDeployment, and its old MAAS
#          machine released.
# Also: the webhooks deny other strategies, negative retry limits and timeouts naming the
# field; the capmaas_remediation* series exist at zero before any remediation and count
# both; RBAC grants exactly what capmaas called, every remediation verb used.
#
# E2E_CAPI_CONTRACT picks the Cluster API release capi-sim plays: v1beta2 (the default,
# spec.remediation.templateRef) or v1beta1 (CAPI 1.10, spec.remediationTemplate and
# v1beta1 conditions on the Machine).
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
ks_need kubectl curl
SRC=${CAPMAAS_SOURCE_DIR:?CAPMAAS_SOURCE_DIR is not set}
BUILD=${CAPMAAS_BUILD_DIR:?CAPMAAS_BUILD_DIR is not set}
STACK_DEPLOY_SECONDS=0.5
STACK_RELEASE_SECONDS=0.3
STACK_SIM_KUBELETS=1
E2E_CAPI_CONTRACT=${E2E_CAPI_CONTRACT:-v1beta2}
STACK_CAPI_CONTRACT=$E2E_CAPI_CONTRACT
STACK_CAPMAAS_ARGS="--machine-refresh-interval 2s --maas-inventory-interval 1h --leader-elect --leader-election-namespace capmaas-system"
TIMEOUT_S=15
trap 'stack_down; ks_cleanup' EXIT
PY=/usr/bin/python3

mm_json() { stack_kubectl get maasmachines -o json; }
n_ready_is() {
  mm_json | $PY -c '
import json, sys
items = json.load(sys.stdin)["items"]
ready = sum(1 for i in items if i.get("status", {}).get("ready"))
sys.exit(0 if ready == len(items) == int(sys.argv[1]) else 1)' "$1"
}
cluster_ready() {
  [ "$(stack_kubectl get maascluster demo -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wl_kubectl() { kubectl --kubeconfig "$STACK_WORKLOAD_KUBECONFIG" --request-timeout=20s "$@"; }
node_ready_is() { # NODE STATUS
  [ "$(wl_kubectl get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = "$2" ]
}
metric() { # NAME{LABELS}: its value, or "absent"
  stack_metrics | $PY -c '
import sys
want = sys.argv[1]
for line in sys.stdin:
    name, _, value = line.rstrip("\n").rpartition(" ")
    if name == want:
        print(value.split(".")[0] if value.endswith(".0") or value.isdigit() else value)
        sys.exit(0)
print("absent")' "$1"
}
metric_is() { [ "$(metric "$1")" = "$2" ]; }
# "<succeeded> <failed> <refused> <power cycles> <in progress>"
remediation_metrics() {
  echo "$(metric 'capmaas_remediations_total{result="succeeded"}')" \
    "$(metric 'capmaas_remediations_total{result="failed"}')" \
    "$(metric 'capmaas_remediations_total{result="refused"}')" \
    "$(metric capmaas_remediation_power_cycles_total)" "$(metric capmaas_remediations_in_progress)"
}
remediation_metrics_are() { [ "$(remediation_metrics)" = "$*" ]; }
# A Ready worker MaasMachine not yet used: "name systemID machine node"
pick_worker() { # EXCEPT_SYSTEM_ID
  stack_kubectl get machines -o json >"$KS_WORK/machines.json"
  mm_json | $PY -c '
import json, sys
nodes = {}
for m in json.load(open(sys.argv[1]))["items"]:
    nodes[m["metadata"]["name"]] = m.get("status", {}).get("nodeRef", {}).get("name")
for i in sorted(json.load(sys.stdin)["items"], key=lambda i: i["metadata"]["name"]):
    m, s = i["metadata"], i.get("status", {})
    if "cluster.x-k8s.io/control-plane" in m.get("labels", {}) or not s.get("ready"):
        continue
    if i["spec"]["systemID"] == sys.argv[2]:
        continue
    owner = [o["name"] for o in m.get("ownerReferences", []) if o["kind"] == "Machine"][0]
    if nodes.get(owner):
        print(m["name"], i["spec"]["systemID"], owner, nodes[owner])
        break' "$KS_WORK/machines.json" "${1:-}"
}
# maas-sim's power calls on SYSTEM_ID since the log was reset: "<offs> <ons> <releases>"
power_calls() { # SYSTEM_ID
  stack_maas GET requests | $PY -c '
import json, sys
sid = sys.argv[1]
rs = [r for r in json.load(sys.stdin)["requests"] if "/machines/%s/" % sid in r["path"]]
n = lambda op: sum(1 for r in rs if r["method"] == "POST" and (r.get("op") or "").endswith(op))
print(n("power_off"), n("power_on"), n("release"))' "$1"
}
watched() { # FILE PYTHON-PREDICATE-ON-o: some version in a kubectl --watch -o json FILE
  $PY - "$1" "$2" <<'PY'
import json, sys
text, dec, i = open(sys.argv[1]).read(), json.JSONDecoder(), 0
while True:
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    try:
        o, i = dec.raw_decode(text, i)
    except ValueError:
        break
    if eval(sys.argv[2], {"o": o}):
        sys.exit(0)
sys.exit(1)
PY
}
event_reasons() { # OBJECT-NAME: the reasons of the events about the MaasRemediation
  stack_kubectl get events -o json | $PY -c '
import json, sys
print(" ".join(e["reason"] for e in json.load(sys.stdin)["items"]
               if e["involvedObject"].get("kind") == "MaasRemediation"
               and e["involvedObject"].get("name") == sys.argv[1]))' "$1"
}
gone() { ! stack_kubectl get "$1" "$2" -o name >/dev/null 2>&1; }
host_status_is() { # SYSTEM_ID STATUS
  stack_maas GET state | $PY -c '
import json, sys
m = [m for m in json.load(sys.stdin)["machines"] if m["system_id"] == sys.argv[1]]
print(m[0]["status_name"] if m else "absent")
sys.exit(0 if m and m[0]["status_name"] == sys.argv[2] else 1)' "$1" "$2"
}
template() { # NAME STRATEGY-JSON
  cat <<YAML
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: MaasRemediationTemplate
metadata:
  name: $1
  namespace: default
spec:
  template:
    spec:
      strategy: $2
YAML
}

stack_up "$KS_WORK/stack" || {
  echo "not ok - the stack did not start"
  tail -n 20 "$KS_WORK"/stack/*.log
  exit 1
}
check "the stack starts (capi-sim's Nodes follow maas-sim's kubelets)" 0 '' -- true
wait_until 20 remediation_metrics_are 0 0 0 0 0
check "the remediation series exist at zero before any remediation" 0 '^0 0 0 0 0$' -- \
  remediation_metrics

# --- admission -----------------------------------------------------------------------------
template bad-type '{type: Reprovision}' >"$KS_WORK/bad-type.yaml"
template bad-retry '{retryLimit: -1}' >"$KS_WORK/bad-retry.yaml"
template bad-timeout '{timeout: "-5m"}' >"$KS_WORK/bad-timeout.yaml"
check "a strategy other than Reboot is denied naming the field" 1 \
  'spec.template.spec.strategy.type: Unsupported value: "Reprovision"' -- \
  stack_kubectl apply -f "$KS_WORK/bad-type.yaml"
check "a negative retryLimit is denied naming the field" 1 \
  'spec.template.spec.strategy.retryLimit: Invalid value: -1' -- \
  stack_kubectl apply -f "$KS_WORK/bad-retry.yaml"
check "a negative timeout is denied naming the field" 1 \
  'spec.template.spec.strategy.timeout: Invalid value: "-5m"' -- \
  stack_kubectl apply -f "$KS_WORK/bad-timeout.yaml"
template demo-reboot "{retryLimit: 2, timeout: ${TIMEOUT_S}s}" >"$KS_WORK/reboot.yaml"
check "the MaasRemediationTemplate (retryLimit 2) is admitted" 0 'created' -- \
  stack_kubectl apply -f "$KS_WORK/reboot.yaml"
check "... and defaulted to the Reboot strategy" 0 '^Reboot$' -- \
  stack_kubectl get maasremediationtemplate demo-reboot -o jsonpath='{.spec.template.spec.strategy.type}'

# --- the cluster ---------------------------------------------------------------------------
MANIFEST=$KS_WORK/cluster.yaml
stack_render_cluster "$MANIFEST" CONTROL_PLANE_MACHINE_COUNT=1 WORKER_MACHINE_COUNT=2 || {
  echo "not ok - the release's cluster template does not render"
  exit 1
}
check "the cluster (1 control plane, 2 workers, a MachineHealthCheck) is applied" 0 \
  'machinehealthcheck.cluster.x-k8s.io/demo-md-0 created' -- stack_kubectl apply -f "$MANIFEST"
all_ready() { n_ready_is 3 && cluster_ready; }
check "3 MaasMachines Ready and the cluster Ready" 0 '' -- wait_until 120 all_ready
REF='{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"MaasRemediationTemplate","name":"demo-reboot"}'
if [ "$E2E_CAPI_CONTRACT" = v1beta2 ]; then
  MHC_PATCH='{"spec":{"checks":{"unhealthyNodeConditions":[{"type":"Ready","status":"Unknown","timeoutSeconds":2},{"type":"Ready","status":"False","timeoutSeconds":2}]},"remediation":{"triggerIf":{"unhealthyLessThanOrEqualTo":1},"templateRef":'"$REF"'}}}'
else
  MHC_PATCH='{"spec":{"unhealthyConditions":[{"type":"Ready","status":"Unknown","timeout":"2s"},{"type":"Ready","status":"False","timeout":"2s"}],"maxUnhealthy":1,"remediationTemplate":'"$REF"'}}'
fi
check "the MachineHealthCheck remediates through demo-reboot (timeouts 2 s)" 0 'patched' -- \
  stack_kubectl patch machinehealthcheck demo-md-0 --type merge -p "$MHC_PATCH"

# --- a hung kubelet: one power cycle brings it back ------------------------------------------
read -r NAME SID MACHINE NODE <<<"$(pick_worker)"
echo "# hung: worker $NAME (Machine $MACHINE, Node $NODE) on MAAS machine $SID"
stack_maas POST reset-log >/dev/null
stack_kubectl get maasremediations --watch -o json >"$KS_WORK/hung-watch.json" 2>/dev/null &
WATCH_PID=$!
sleep 0.5 # the watch has listed
check "hung: maas-sim hangs $SID's kubelet" 0 '^ok' -- \
  stack_maas POST kubelets -H 'Content-Type: application/json' -d "{\"$SID\":\"hung\"}"
check "hung: the Node $NODE goes NotReady" 0 '' -- wait_until 20 node_ready_is "$NODE" Unknown
check "hung: the MHC creates MaasRemediation $MACHINE, owned by the Machine" 0 '' -- \
  wait_until 30 watched "$KS_WORK/hung-watch.json" \
  'o["metadata"]["name"] == "'"$MACHINE"'" and any(r["kind"] == "Machine" and r["name"] == "'"$MACHINE"'" for r in o["metadata"].get("ownerReferences", []))'
check "hung: the Node $NODE is Ready again" 0 '' -- wait_until 60 node_ready_is "$NODE" True
check "hung: the MaasRemediation ends Succeeded after 1 power cycle" 0 '' -- \
  wait_until 30 watched "$KS_WORK/hung-watch.json" \
  'o["metadata"]["name"] == "'"$MACHINE"'" and o.get("status", {}).get("phase") == "Succeeded" and o["status"].get("retryCount") == 1'
check "hung: the MHC deletes it once the Machine is healthy (the finalizer lets it go)" 0 '' -- \
  wait_until 30 gone maasremediation "$MACHINE"
kill "$WATCH_PID" 2>/dev/null
wait "$WATCH_PID" 2>/dev/null
check "hung: exactly one power cycle of $SID in maas-sim's log, no release" 0 '^1 1 0$' -- \
  power_calls "$SID"
check "hung: events name each step" 0 'PoweringOff.*PoweredOff.*PoweredOn.*RemediationSucceeded' -- \
  event_reasons "$MACHINE"
check "hung: the Machine $MACHINE stays" 0 '' -- stack_kubectl get machine "$MACHINE" -o name
wait_until 10 remediation_metrics_are 1 0 0 1 0
check "hung: 1 succeeded, 1 power cycle, none in progress" 0 '^1 0 0 1 0$' -- remediation_metrics

# --- a dead kubelet: 2 power cycles, then the Machine is replaced ---------------------------
read -r NAME2 SID2 MACHINE2 NODE2 <<<"$(pick_worker "$SID")"
echo "# dead: worker $NAME2 (Machine $MACHINE2, Node $NODE2) on MAAS machine $SID2"
stack_maas POST reset-log >/dev/null
check "dead: maas-sim kills $SID2's kubelet for good" 0 '^ok' -- \
  stack_maas POST kubelets -H 'Content-Type: application/json' -d "{\"$SID2\":\"dead\"}"
check "dead: the Node $NODE2 goes NotReady" 0 '' -- wait_until 20 node_ready_is "$NODE2" Unknown
check "dead: the MHC creates MaasRemediation $MACHINE2" 0 '' -- \
  wait_until 30 stack_kubectl get maasremediation "$MACHINE2" -o name
check "dead: the Machine $MACHINE2 is replaced after retryLimit power cycles" 0 '' -- \
  wait_until $((3 * TIMEOUT_S + 40)) gone machine "$MACHINE2"
wait_until 30 eval '[ "$(power_calls "$SID2")" = "2 2 1" ]'
check "dead: exactly 2 power cycles of $SID2, then its release" 0 '^2 2 1$' -- power_calls "$SID2"
check "dead: the old MAAS machine $SID2 is back in MAAS" 0 '' -- wait_until 30 host_status_is "$SID2" Ready
check "dead: 3 MaasMachines Ready again, none on $SID2" 0 '' -- \
  wait_until 90 eval 'n_ready_is 3 && ! mm_json | grep -q "\"systemID\": \"$SID2\""'
check "dead: the MaasRemediation went with its Machine" 0 '' -- wait_until 30 gone maasremediation "$MACHINE2"
wait_until 10 remediation_metrics_are 1 1 0 3 0
check "dead: 1 failed, 3 power cycles in all, none in progress" 0 '^1 1 0 3 0$' -- remediation_metrics

stack_kubectl get --raw /_sim/requests >"$KS_WORK/access.json"
check "RBAC grants exactly what capmaas called, every remediation verb used" 0 ' 0 findings$' -- \
  $PY "$SRC/tests/scripts/rbac_check.py" --remediation "$STACK_DIR/infrastructure-components.yaml" "$KS_WORK/access.json"
check "capmaas logged no sanitizer report" 1 '' -- grep -Eq 'runtime error|AddressSanitizer|ThreadSanitizer' \
  "$STACK_DIR/capmaas.log"
stack_down
echo "$KS_PASS passed, $KS_FAIL failed"
[ "$KS_FAIL" -eq 0 ]
