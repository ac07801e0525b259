#!/usr/bin/env bash
# End to end on the local simulated stack (issue 8): the demo cluster of scripts/run (3 control
# planes, 5 workers) goes Ready through capmaas's webhooks and controllers; every machine's
# providerID and MAAS zone are on its Node; the API endpoint record holds the 3 control-plane IPs; scaling
# workers 5 -> 2 releases exactly 3 machines; a machine whose deploy fails is replaced; a
# template with an unknown image is rejected at apply; deleting the cluster returns every
# machine to MAAS and leaves no record and no Maas object.
#
# Everything comes from the release artefacts (issue 16): scripts/stack.sh runs
# scripts/release, renders infrastructure-components.yaml with the stack's MAAS values and
# installs from it (Namespace, CRDs, credentials Secret, webhook configurations with the
# CA injected as cert-manager would; the rest checked), and the cluster is the release's
# template rendered with clusterctl's rules. E2E_CAPI_CONTRACT picks the Cluster API release
# capi-sim plays: v1beta2 (the default, CAPI 1.11+) renders cluster-template.yaml; v1beta1
# (CAPI 1.10, test_e2e_v1beta1.sh) the flavor cluster-template-v1beta1.yaml. Either way the
# provider discovers the version it reads.
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
ks_need kubectl curl
SRC=${CAPMAAS_SOURCE_DIR:?CAPMAAS_SOURCE_DIR is not set}
BUILD=${CAPMAAS_BUILD_DIR:?CAPMAAS_BUILD_DIR is not set}
STACK_DEPLOY_SECONDS=0.5
STACK_RELEASE_SECONDS=0.3
E2E_CAPI_CONTRACT=${E2E_CAPI_CONTRACT:-v1beta2}
STACK_CAPI_CONTRACT=$E2E_CAPI_CONTRACT
STACK_CAPMAAS_ARGS="--machine-refresh-interval 2s --maas-inventory-interval 1h --leader-elect --leader-election-namespace capmaas-system"
trap 'stack_down; ks_cleanup' EXIT
PY=/usr/bin/python3

mm_json() { stack_kubectl get maasmachines -o json; }
ready_mms() { # the number of Ready MaasMachines
  mm_json | $PY -c 'import json,sys; print(sum(1 for i in json.load(sys.stdin)["items"] if i.get("status",{}).get("ready")))'
}
n_ready_is() { [ "$(ready_mms)" -eq "$1" ] && [ "$(mm_json | $PY -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')" -eq "$1" ]; }
cluster_ready() {
  [ "$(stack_kubectl get maascluster demo -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
maas_state() { stack_maas GET state; }
in_use() { # machines MAAS has handed out (not Ready)
  maas_state | $PY -c 'import json,sys; print(sum(1 for m in json.load(sys.stdin)["machines"] if m["status_name"] != "Ready"))'
}
in_use_is() { [ "$(in_use)" -eq "$1" ]; }

# (not through check: stack_up sets variables this shell needs)
stack_up "$KS_WORK/stack" || {
  echo "not ok - the stack did not start"
  tail -n 20 "$KS_WORK"/stack/*.log
  exit 1
}
check "the stack starts" 0 '' -- true
echo "# installed $STACK_RELEASE_VERSION from $STACK_RELEASE_DIR: $STACK_COMPONENTS"
# what the installed components hold: our CRDs with the contract label, the CA in every
# webhook, the credentials as rendered
installed_ok() {
  stack_kubectl get crd,mutatingwebhookconfigurations,validatingwebhookconfigurations -o json |
    $PY -c '
import base64, json, sys
items = json.load(sys.stdin)["items"]
ca = base64.b64encode(open(sys.argv[1], "rb").read()).decode()
crds = [i for i in items if i["kind"] == "CustomResourceDefinition" and i["spec"]["group"] == "infrastructure.cluster.x-k8s.io"]
hooks = [w for i in items if i["kind"].endswith("WebhookConfiguration") for w in i["webhooks"]]
ok = len(crds) == 6 and all(c["metadata"]["labels"].get("cluster.x-k8s.io/v1beta2") == "v1beta1" for c in crds)
ok = ok and len(hooks) == 12 and all(w["clientConfig"].get("caBundle") == ca for w in hooks)
print("%d CRDs, %d webhooks" % (len(crds), len(hooks)))
sys.exit(0 if ok else 1)' "$STACK_DIR/certs/ca.crt"
}
check "the release's CRDs and webhook configurations (CA injected) are installed" 0 '6 CRDs, 12 webhooks' -- installed_ok
check "capmaas runs with the installed Secret's MAAS endpoint" 0 "^$STACK_MAAS_URL\$" -- \
  echo "$STACK_MAAS_ENDPOINT"
MANIFEST=$KS_WORK/cluster.yaml
stack_render_cluster "$MANIFEST" || {
  echo "not ok - the release's cluster template does not render"
  exit 1
}
check "capmaas reads cluster.x-k8s.io/$E2E_CAPI_CONTRACT" 0 "version[\":= ]+cluster.x-k8s.io/$E2E_CAPI_CONTRACT" -- \
  grep -h 'reading Cluster API objects' "$STACK_DIR/capmaas.log"
check "the rendered $( [ "$E2E_CAPI_CONTRACT" = v1beta1 ] && echo cluster-template-v1beta1.yaml || echo cluster-template.yaml) ($E2E_CAPI_CONTRACT) is accepted by the webhooks" 0 'maasmachinetemplate' -- \
  stack_kubectl apply -f "$MANIFEST"
T0=$(date +%s)
all_ready() { n_ready_is 8 && cluster_ready; }
check "8 MaasMachines Ready and the cluster Ready" 0 '' -- wait_until 120 all_ready
echo "# cluster Ready after $(($(date +%s) - T0)) s (contract $E2E_CAPI_CONTRACT)"
# #18: machines in flight ride the in-flight list (one call per interval for all of them);
# a GET of one machine only confirms one the list lacks. Polling each machine with a GET,
# as before, cost at least one per machine.
machine_gets() {
  stack_maas GET requests | $PY -c '
import json, re, sys
print(sum(1 for r in json.load(sys.stdin)["requests"]
          if r["method"] == "GET" and not r["op"] and re.search(r"/machines/[^/]+/$", r["path"])))'
}
echo "# the rollout read $(machine_gets) machines one GET at a time"
check "the rollout: fewer single-machine GETs than machines (the in-flight list answers)" 0 '' -- \
  test "$(machine_gets)" -lt 8
# capi-sim wrote the contract's shapes: v1beta2 status.initialization and {name} nodeRefs
# only; v1beta1 status.infrastructureReady
shapes_match() {
  stack_kubectl get clusters,machines -o json | $PY -c '
import json, sys
v2 = sys.argv[1] == "v1beta2"
items = json.load(sys.stdin)["items"]
ok = len(items) == 9
for i in items:
    st = i.get("status", {})
    ok = ok and i["apiVersion"].endswith("/" + sys.argv[1])
    ok = ok and st.get("initialization", {}).get("infrastructureProvisioned") is True
    ok = ok and (("infrastructureReady" not in st) if v2 else st.get("infrastructureReady") is True)
    if i["kind"] == "Machine":
        ok = ok and (set(st.get("nodeRef", {})) == {"name"} if v2 else st.get("nodeRef", {}).get("kind") == "Node")
        ok = ok and ("apiGroup" in i["spec"]["infrastructureRef"]) == v2
sys.exit(0 if ok else 1)' "$E2E_CAPI_CONTRACT"
}
check "Clusters and Machines are in $E2E_CAPI_CONTRACT shapes" 0 '' -- wait_until 30 shapes_match

provider_ids() {
  mm_json | $PY -c 'import json,sys; print("\n".join(sorted(i["spec"]["providerID"] for i in json.load(sys.stdin)["items"])))'
}
node_ids() {
  kubectl --kubeconfig "$STACK_WORKLOAD_KUBECONFIG" get nodes -o json |
    $PY -c 'import json,sys; print("\n".join(sorted(i["spec"].get("providerID","") for i in json.load(sys.stdin)["items"])))'
}
nodes_match() { [ "$(provider_ids | grep -c maas:///)" -eq 8 ] && [ "$(provider_ids)" = "$(node_ids)" ]; }
check "every Node carries its machine's providerID" 0 '' -- wait_until 30 nodes_match
# maas:///<zone>/<system_id>: the zone part is the Node's topology.kubernetes.io/zone
zones_match() {
  kubectl --kubeconfig "$STACK_WORKLOAD_KUBECONFIG" get nodes -o json | $PY -c '
import json, sys
items = json.load(sys.stdin)["items"]
ok = [i["spec"]["providerID"].split("/")[3] == i["metadata"].get("labels", {}).get("topology.kubernetes.io/zone")
      for i in items if i["spec"].get("providerID")]
sys.exit(0 if len(ok) == 8 and all(ok) else 1)'
}
check "every Node is labelled with its MAAS zone" 0 '' -- zones_match

record_ips() {
  local host
  host=$(stack_kubectl get maascluster demo -o jsonpath='{.spec.controlPlaneEndpoint.host}')
  maas_state | $PY -c "import json,sys; d=[r for r in json.load(sys.stdin)['dnsresources'] if r['fqdn']=='$host']; print(' '.join(sorted(d[0]['ips'])) if len(d)==1 else 'none')"
}
cp_ips() {
  mm_json | $PY -c 'import json,sys
ips=[]
for i in json.load(sys.stdin)["items"]:
    if "cluster.x-k8s.io/control-plane" in i["metadata"].get("labels",{}):
        a=[x["address"] for x in i["status"].get("addresses",[]) if x["type"]=="ExternalIP"]
        ips.append(a[0])
print(" ".join(sorted(ips)))'
}
record_is_cps() { [ -n "$(cp_ips)" ] && [ "$(record_ips)" = "$(cp_ips)" ] && [ "$(cp_ips | wc -w)" -eq 3 ]; }
check "the endpoint record holds the 3 control-plane IPs" 0 '' -- wait_until 30 record_is_cps

# B6: at steady state the 8 Deployed machines cost one MAAS list call per interval and no
# write at all.
maas_counts() { stack_maas GET requests | $PY -c 'import json,sys; d=json.load(sys.stdin); print(d["reads"], d["writes"])'; }
# Let the last status writes and DNS checks settle: no MAAS write for a whole second.
writes() { maas_counts | cut -d' ' -f2; }
settled() {
  local w
  w=$(writes) && sleep 1 && [ "$(writes)" = "$w" ]
}
wait_until 15 settled
read -r R1 W1 <<<"$(maas_counts)"
sleep 8 # the steady-state window itself: four refresh intervals
read -r R2 W2 <<<"$(maas_counts)"
echo "# steady state: $((R2 - R1)) MAAS reads and $((W2 - W1)) writes in 8 s (interval 2 s)"
check "steady state: no MAAS write" 0 '^0$' -- echo $((W2 - W1))
# 4 intervals in the window, +2 for the window's edges; a GET per machine per interval
# would be 32.
check "steady state: about one MAAS read per interval, not one per machine" 0 '' -- \
  test $((R2 - R1)) -le 6

# #18: every MAAS request capmaas made, controllers and admission inventory alike, went
# through the process's one request budget (--maas-api-qps): the budget's count lies
# between maas-sim's count just before and just after the scrape (plus the requests
# holding a token but not yet sent, at most one per worker and the inventory).
maas_total() { maas_counts | awk '{print $1 + $2}'; }
budget_count() {
  stack_metrics |
    sed -n 's/^capmaas_client_budget_requests_total{api="maas"} \([0-9]*\)$/\1/p'
}
budget_covers_all() {
  local a m b
  a=$(maas_total) && m=$(budget_count) && b=$(maas_total)
  echo "maas-sim saw $a..$b requests, the budget counted $m"
  [ -n "$m" ] && [ "$m" -ge "$a" ] && [ "$m" -le $((b + 9)) ]
}
check "every MAAS request took a token of the process's budget" 0 'the budget counted' -- budget_covers_all

releases() { stack_maas GET requests | $PY -c 'import json,sys; print(sum(1 for r in json.load(sys.stdin)["requests"] if r.get("op")=="release"))'; }
R0=$(releases)
check "workers scale 5 -> 2" 0 'patched' -- stack_kubectl patch machinedeployment demo-md-0 \
  --type merge -p '{"spec":{"replicas":2}}'
check "5 MaasMachines remain, all Ready" 0 '' -- wait_until 60 n_ready_is 5
check "MAAS holds exactly 5 machines" 0 '' -- wait_until 30 in_use_is 5
check "exactly 3 machines were released" 0 '^3$' -- echo $(($(releases) - R0))

# The machine the allocator will pick next for a worker (cheapest free match) fails deploy.
next_worker_machine() {
  stack_kubectl get maasmachinetemplate demo-md-0 -o json >"$KS_WORK/tmpl.json"
  maas_state >"$KS_WORK/state.json"
  $PY - "$KS_WORK/tmpl.json" "$KS_WORK/state.json" "$SRC/tests/sim/maas/inventory-sample.yaml" <<'PY'
import json, sys, yaml
t = json.load(open(sys.argv[1]))["spec"]["template"]["spec"]
st = {m["system_id"]: m for m in json.load(open(sys.argv[2]))["machines"]}
inv = yaml.safe_load(open(sys.argv[3]))["machines"]
c = [m for m in inv if st[m["system_id"]]["status_name"] == "Ready"
     and m["cpu_count"] >= t.get("minCPU", 0) and m["memory"] >= t.get("minMemory", 0)
     and (not t.get("resourcePool") or m.get("pool", "default") == t["resourcePool"])
     and all(x in m.get("tags", []) for x in t.get("tags", []))]
c.sort(key=lambda m: m["cpu_count"] + m["memory"] / 1024)
print(c[0]["system_id"])
PY
}
BAD=$(next_worker_machine)
[ -n "$BAD" ] || { echo "not ok - cannot tell which machine MAAS allocates next"; exit 1; }
check "maas-sim will fail the deploy of $BAD" 0 '' -- stack_maas POST faults \
  -H 'Content-Type: application/json' -d "{\"fail_deploy\":[\"$BAD\"]}"
check "workers scale 2 -> 3" 0 'patched' -- stack_kubectl patch machinedeployment demo-md-0 \
  --type merge -p '{"spec":{"replicas":3}}'
check "6 MaasMachines Ready again" 0 '' -- wait_until 120 n_ready_is 6
on_bad() { mm_json | grep -q "\"systemID\": \"$BAD\""; }
check "none of them is on the failed machine" 1 '' -- on_bad
check "a MachineReplaced event names it" 0 "$BAD" -- stack_kubectl get events \
  --field-selector reason=MachineReplaced -o jsonpath='{.items[*].message}'
bad_free() {
  maas_state | $PY -c "import json,sys; sys.exit(0 if any(m['system_id']=='$BAD' and m['status_name']=='Ready' for m in json.load(sys.stdin)['machines']) else 1)"
}
check "the failed machine went back to MAAS" 0 '' -- wait_until 20 bad_free

# config/prometheus/rules.yaml alerts only on series this capmaas exports (the reboot
# remediation's only once a C source exports them)
PENDING_RE='^$'
grep -rq --include='*.c' --exclude-dir=tests --exclude-dir='build*' capmaas_remediations_total "$SRC" ||
  PENDING_RE='^capmaas_remediation'
rule_series_exported() {
  stack_metrics >"$KS_WORK/metrics.txt" &&
    $PY - "$SRC/config/prometheus/rules.yaml" "$KS_WORK/metrics.txt" "$PENDING_RE" <<'PY'
import re, sys, yaml
rule = yaml.safe_load(open(sys.argv[1]))
names = set()
for g in rule["spec"]["groups"]:
    for r in g["rules"]:
        names |= set(re.findall(r"\b((?:capmaas|controller_runtime|leader_election|workqueue)_[a-z0-9_]+)", r["expr"]))
types = set(re.findall(r"^# TYPE (\S+)", open(sys.argv[2]).read(), re.M))
missing = sorted(n for n in names if re.sub(r"_(bucket|sum|count)$", "", n) not in types
                 and not re.search(sys.argv[3], n))
print(len(names), "series; missing:", " ".join(missing) if missing else "none")
PY
}
check "the alert rules use only series capmaas exports" 0 'missing: none' -- rule_series_exported

cat >"$KS_WORK/bad.yaml" <<'YAML'
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: MaasMachineTemplate
metadata:
  name: bad-image
  namespace: default
spec:
  template:
    spec:
      image: nosuch/u-2204-0-k-1264-0
      minCPU: 2
      minMemory: 4096
YAML
check "a template with an unknown image is rejected at apply" 1 'spec.template.spec.image: Invalid value.*unknown operating system' -- \
  stack_kubectl apply -f "$KS_WORK/bad.yaml"

check "the cluster is deleted" 0 'deleted' -- stack_kubectl delete cluster demo --wait=false
gone() {
  [ "$(stack_kubectl get maasmachines,maasclusters -A -o name 2>/dev/null | wc -l)" -eq 0 ]
}
check "no Maas object is left" 0 '' -- wait_until 90 gone
check "every machine is Ready in MAAS again" 0 '' -- wait_until 30 in_use_is 0
n_records() { maas_state | $PY -c 'import json,sys; print(len(json.load(sys.stdin)["dnsresources"]))'; }
check "the endpoint record is gone" 0 '^0$' -- n_records
# Least privilege: every call capmaas made to the management cluster over the whole run is
# granted by the components' RBAC, and every verb the RBAC grants was used.
stack_kubectl get --raw /_sim/requests >"$KS_WORK/access.json"
check "RBAC grants exactly what capmaas called" 0 ' 0 findings$' -- \
  $PY "$SRC/tests/scripts/rbac_check.py" "$STACK_DIR/infrastructure-components.yaml" "$KS_WORK/access.json"
check "capmaas logged no sanitizer report" 1 '' -- grep -Eq 'runtime error|AddressSanitizer|ThreadSanitizer' \
  "$STACK_DIR/capmaas.log"
stack_down
echo "$KS_PASS passed, $KS_FAIL failed"
[ "$KS_FAIL" -eq 0 ]
