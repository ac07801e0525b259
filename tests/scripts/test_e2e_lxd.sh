#!/usr/bin/env bash
# End to end, LXD virtual machines (issue 21, item 3; docs/lxd.md), on the local stack with
# the sample inventory plus two MAAS VM hosts in pool "capi" (4 cores at a CPU over-commit of
# 2, 16 GiB each). The cluster's control plane is bare metal; its MachineDeployment's
# template sets spec.lxd.enabled, so its 4 workers are VMs composed on the hosts: 2 per host
# (the hosts could hold all 4 each: only the spreading puts them 2 and 2), each Deployed in
# MAAS, each MaasMachine Ready and each workload Node carrying its providerID. A kill -9 of
# capmaas while a compose is in flight (maas-sim answers it 4 s late, the VM already made)
# leaves no orphan and no second VM: the restarted capmaas adopts the VM by its hostname. A
# VM no host can fit gets MachineDeployed False naming the closest host and what it lacks.
# Scaling to 0 deletes every VM, and the hosts' capacity is free again.
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
# shellcheck source=tests/scripts/e2e_lib.sh
. "$(dirname "$0")/e2e_lib.sh"
ks_need kubectl curl
SRC=${CAPMAAS_SOURCE_DIR:?CAPMAAS_SOURCE_DIR is not set}
BUILD=${CAPMAAS_BUILD_DIR:?CAPMAAS_BUILD_DIR is not set}
STACK_DEPLOY_SECONDS=0.5
STACK_RELEASE_SECONDS=0.3
STACK_CAPMAAS_ARGS="--machine-refresh-interval 2s"
trap 'stack_down; ks_cleanup' EXIT
PY=/usr/bin/python3

# the sample inventory and two VM hosts
STACK_INVENTORY=$KS_WORK/inventory.yaml
$PY - "$SRC/tests/sim/maas/inventory-sample.yaml" "$STACK_INVENTORY" <<'PY'
import sys, yaml
inv = yaml.safe_load(open(sys.argv[1]))
inv["vm_hosts"] = [
    {"name": name, "zone": zone, "pool": "capi", "tags": ["virtual"], "cores": 4,
     "cpu_over_commit_ratio": 2, "memory": 16384, "memory_over_commit_ratio": 1,
     "storage_pools": [{"name": "default", "size_gb": 400, "default": True}]}
    for name, zone in (("lxd-a", "az1"), ("lxd-b", "az2"))]
yaml.safe_dump(inv, open(sys.argv[2], "w"))
PY

pods() { stack_maas GET pods; }
# "used-cores:vm-count" per host, e.g. "lxd-a=4:2 lxd-b=4:2"
host_use() {
  pods | $PY -c 'import json,sys
print(" ".join("%s=%d:%d" % (p["name"], p["used"]["cores"], len(p["machines"])) for p in json.load(sys.stdin)))'
}
host_use_is() { [ "$(host_use)" = "$1" ]; }
# The VMs of the MaasMachines of MachineDeployment MD (named after it by capi-sim), checked against MAAS: prints
# "ready=N deployed=N vms=N orphans=N nodes=N" where orphans are VMs no MaasMachine names
vm_audit() {
  local mms state pods_json nodes
  mms=$(k get maasmachines -o json) && state=$(stack_maas GET state) && pods_json=$(pods) &&
    nodes=$(wk get nodes -o json) || return 1
  $PY - "$1" <(echo "$mms") <(echo "$state") <(echo "$pods_json") <(echo "$nodes") <<'PY'
import json, sys
md = sys.argv[1]
mms, state, pods, nodes = (json.load(open(f)) for f in sys.argv[2:6])
mine = [m for m in mms["items"] if m["metadata"]["name"].startswith(md + "-")]
status = {m["system_id"]: m["status_name"] for m in state["machines"]}
vms = {v for p in pods for v in p["machines"]}
named = {m["spec"].get("systemID") for m in mine}
pids = {n["spec"].get("providerID") for n in nodes["items"]}
print("ready=%d deployed=%d vms=%d orphans=%d nodes=%d" % (
    sum(1 for m in mine if m.get("status", {}).get("ready")),
    sum(1 for m in mine if status.get(m["spec"].get("systemID")) == "Deployed"
        and m["spec"]["systemID"] in vms),
    len(vms), len(vms - named),
    sum(1 for m in mine if m["spec"].get("providerID") in pids)))
PY
}
audit_is() { [ "$(vm_audit "$1")" = "$2" ]; }

stack_up "$KS_WORK/stack" || {
  echo "not ok - the stack did not start"
  tail -n 20 "$KS_WORK"/stack/*.log
  exit 1
}
check "the stack starts" 0 '' -- true
check "maas-sim serves the two VM hosts, empty" 0 '' -- host_use_is "lxd-a=0:0 lxd-b=0:0"

MANIFEST=$KS_WORK/cluster.yaml
stack_render_cluster "$MANIFEST" CONTROL_PLANE_MACHINE_COUNT=1 WORKER_MACHINE_COUNT=4 \
  WORKER_MACHINE_MINCPU=2 WORKER_MACHINE_MINMEMORY=4096 || {
  echo "not ok - the release's cluster template does not render"
  exit 1
}
# the workers' template: VMs of 20 GB on hosts tagged "virtual", amd64, an LVM layout
$PY - "$MANIFEST" <<'PY'
import sys, yaml
docs = list(yaml.safe_load_all(open(sys.argv[1])))
for d in docs:
    if d and d["kind"] == "MaasMachineTemplate" and d["metadata"]["name"] == "demo-md-0":
        d["spec"]["template"]["spec"]["lxd"] = {"enabled": True, "vmConfig": {"diskSize": 20}}
        d["spec"]["template"]["spec"]["tags"] = ["virtual"]
        # the deploy options apply to a VM too
        d["spec"]["template"]["spec"]["architecture"] = "amd64"
        d["spec"]["template"]["spec"]["storageLayout"] = {"type": "lvm"}
yaml.safe_dump_all(docs, open(sys.argv[1], "w"))
PY
check "the cluster with VM workers is accepted by the webhooks" 0 'maasmachinetemplate' -- \
  k apply -f "$MANIFEST"
vm_template() { # NAME POOL [EXTRA-JSON for vmConfig]: a VM template, as kubectl apply reads it
  cat <<EOF
{"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasMachineTemplate",
 "metadata": {"name": "$1", "namespace": "default"},
 "spec": {"template": {"spec": {"image": "u-2204-0-k-1264-0", "minCPU": 2, "minMemory": 4096,
   "resourcePool": "$2", "lxd": {"enabled": true, "vmConfig": {"diskSize": 20${3:+, $3}}}}}}}
EOF
}
apply_json() { k apply -f - <<<"$1"; }
check "a VM template for a pool without VM hosts is denied, naming the hosts there are" 1 \
  'spec.template.spec.lxd.enabled: Invalid value: true: no MAAS VM host in pool default \(VM hosts: lxd-a \(pool capi, zone az1, tags virtual\)' -- \
  apply_json "$(vm_template vm-default default)"
check "a VM template asking for vmConfig.network is denied (not implemented)" 1 \
  'spec.template.spec.lxd.vmConfig.network: Forbidden: not supported' -- \
  apply_json "$(vm_template vm-net capi '"network": "br0"')"
check "a VM larger than any host could ever hold is denied, naming what it lacks" 1 \
  'spec.template.spec.lxd.vmConfig.diskSize: Invalid value: .*lacks storage \(400 GB free in its default pool, 900 wanted\) even when empty' -- \
  apply_json "$(vm_template vm-huge capi | sed 's/"diskSize": 20/"diskSize": 900/')"
T0=$(date +%s)
check "4 VM workers: Ready, Deployed in MAAS, Nodes with their providerIDs" 0 '' -- \
  within 150 audit_is demo-md-0 "ready=4 deployed=4 vms=4 orphans=0 nodes=4"
echo "# 4 VMs Ready after $(($(date +%s) - T0)) s: $(vm_audit demo-md-0)"
check "2 VMs per host (spread, though either host holds 4)" 0 '' -- \
  host_use_is "lxd-a=4:2 lxd-b=4:2"
echo "# hosts: $(host_use)"
per_vm() { # the first host's use per VM: "cores memory disk-bytes"
  pods | $PY -c 'import json,sys
p=json.load(sys.stdin)[0]
n=len(p["machines"])
print(p["used"]["cores"]//n, p["used"]["memory"]//n, p["storage_pools"][0]["used"]//n)'
}
check "each VM was composed with the worker's sizes and a 20 GB disk" 0 '^2 4096 20000000000$' -- per_vm
hosts_recorded() { # the vm-host annotation of MD's MaasMachines, sorted
  k get maasmachines -o json | $PY -c 'import json,sys
print(" ".join(sorted(m["metadata"].get("annotations", {}).get("maas.infrastructure.cluster.x-k8s.io/vm-host", "-")
                      for m in json.load(sys.stdin)["items"] if m["metadata"]["name"].startswith(sys.argv[1] + "-"))))' "$1"
}
check "the MaasMachines record their host" 0 '^lxd-a lxd-a lxd-b lxd-b$' -- hosts_recorded demo-md-0
check "VMComposed events name the host" 0 'Composed VM .* on MAAS VM host lxd-' -- \
  k get events --field-selector reason=VMComposed -o jsonpath='{.items[*].message}'
vm_ops() { # "composes-with-architecture layouts-on-VMs" in the request log
  stack_maas GET requests | $PY -c 'import json,sys
r=json.load(sys.stdin)["requests"]
print(sum(1 for x in r if x["op"] == "compose" and x["status"] == 200),
      sum(1 for x in r if x["op"] == "set_storage_layout" and x["path"].startswith("/MAAS/api/2.0/machines/vm") and x["status"] == 200))'
}
check "4 composes, and the LVM layout set on each VM before its allocation" 0 '^4 4$' -- vm_ops

# --- kill -9 while a compose is in flight ----------------------------------------------------
check "maas-sim answers composes 4 s late (the VM made at once)" 0 '' -- \
  stack_maas POST faults -H 'Content-Type: application/json' -d '{"compose_delay_ms": 4000}' --fail
stack_maas POST reset-log >/dev/null
check "scaled to 5 workers" 0 '' -- k patch machinedeployment demo-md-0 --type merge -p '{"spec":{"replicas":5}}'
n_vms_is() { [ "$(pods | $PY -c 'import json,sys; print(sum(len(p["machines"]) for p in json.load(sys.stdin)))')" = "$1" ]; }
check "the fifth VM exists in MAAS while its compose is unanswered" 0 '' -- within 60 n_vms_is 5
kill -KILL "$STACK_CAPMAAS_PID" 2>/dev/null
wait "$STACK_CAPMAAS_PID" 2>/dev/null
check "capmaas was killed (SIGKILL) during the compose" 1 '' -- kill -0 "$STACK_CAPMAAS_PID"
# in this shell, not in check's $(...): the new capmaas's PID must reach STACK_PIDS
restarted=0
stack_capmaas_start && restarted=1
check "capmaas restarts" 0 '' -- test "$restarted" = 1
check "5 VM workers Ready: the VM adopted by its hostname, no orphan" 0 '' -- \
  within 90 audit_is demo-md-0 "ready=5 deployed=5 vms=5 orphans=0 nodes=5"
echo "# after the kill: $(vm_audit demo-md-0); hosts: $(host_use)"
composes() {
  stack_maas GET requests | $PY -c 'import json,sys
print(sum(1 for r in json.load(sys.stdin)["requests"] if r["op"] == "compose"))'
}
check "one compose for the fifth worker, never a second" 0 '^1$' -- composes
stack_maas POST faults -H 'Content-Type: application/json' -d '{"compose_delay_ms": 0}' >/dev/null

# --- no host fits ------------------------------------------------------------------------------
BIG=$KS_WORK/big.yaml
$PY - "$MANIFEST" "$BIG" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
out = []
for d in docs:
    if d["kind"] == "MaasMachineTemplate" and d["metadata"]["name"] == "demo-md-0":
        d["metadata"]["name"] = "demo-big"
        d["spec"]["template"]["spec"]["minCPU"] = 6
        out.append(d)
    elif d["kind"] == "MachineDeployment":
        d["metadata"]["name"] = "demo-big"
        d["spec"]["replicas"] = 1
        d["spec"]["template"]["spec"]["infrastructureRef"]["name"] = "demo-big"
        out.append(d)
yaml.safe_dump_all(out, open(sys.argv[2], "w"))
PY
check "a MachineDeployment of one 6-core VM is accepted" 0 '' -- k apply -f "$BIG"
big_cond() { # FIELD of the demo-big MaasMachine's MachineDeployed condition
  k get maasmachines -o json | $PY -c 'import json,sys
for m in json.load(sys.stdin)["items"]:
    if m["metadata"]["name"].startswith("demo-big-"):
        for c in m.get("status", {}).get("conditions", []):
            if c["type"] == "MachineDeployed":
                print(" ".join(c.get(f, "") for f in sys.argv[1:]))' "$@"
}
big_msg() { big_cond message; }
big_has() { big_msg | grep -Eq "$1"; }
# lxd-a holds 3 VMs (6 of 8 cores), lxd-b 2 (4 of 8): lxd-b is the closest and lacks cores
check "it waits with MachineDeployed False naming the closest host and what it lacks" 0 '' -- \
  within 30 big_has 'no MAAS VM host fits cores=6.*the closest, lxd-b, lacks cores \(4 free, 6 wanted\)'
echo "# $(big_msg)"
check "... reason VMHostUnavailable" 0 '^False VMHostUnavailable$' -- big_cond status reason
check "... and a NoVMHostAvailable event" 0 'lacks cores' -- \
  k get events --field-selector reason=NoVMHostAvailable -o jsonpath='{.items[*].message}'
check "nothing was composed for it" 0 '' -- n_vms_is 5
check "the big MachineDeployment is deleted" 0 '' -- k delete machinedeployment demo-big --wait=false
mm_names() { k get maasmachines -o jsonpath='{.items[*].metadata.name}'; }
big_gone() { ! mm_names | grep -q 'demo-big-'; }
check "... and its MaasMachine goes" 0 '' -- within 60 big_gone

# --- scale to 0 ---------------------------------------------------------------------------------
stack_maas POST reset-log >/dev/null
check "scaled to 0 workers" 0 '' -- k patch machinedeployment demo-md-0 --type merge -p '{"spec":{"replicas":0}}'
check "every VM is deleted in MAAS and the hosts' capacity is free" 0 '' -- \
  within 90 host_use_is "lxd-a=0:0 lxd-b=0:0"
storage_used() {
  pods | $PY -c 'import json,sys; print(" ".join(str(p["storage_pools"][0]["used"]) for p in json.load(sys.stdin)))'
}
check "... storage too" 0 '^0 0$' -- storage_used
no_workers() { ! mm_names | grep -q 'demo-md-0-'; }
check "the worker MaasMachines are gone" 0 '' -- within 60 no_workers
vm_calls() { # "deletes releases": capmaas's DELETE machines/<vm>/ answered 204, and its releases
  stack_maas GET requests | $PY -c 'import json,sys
r=json.load(sys.stdin)["requests"]
print(sum(1 for x in r if x["method"] == "DELETE" and x["path"].startswith("/MAAS/api/2.0/machines/vm") and x["status"] == 204),
      sum(1 for x in r if x["op"] == "release" and x["path"].startswith("/MAAS/api/2.0/machines/vm")))'
}
check "the 5 VMs were deleted (DELETE machines/<id>/), none released" 0 '^5 0$' -- vm_calls
check "the control plane is untouched (bare metal, Ready)" 0 '^true$' -- \
  k get maasmachines -l cluster.x-k8s.io/control-plane -o jsonpath='{.items[0].status.ready}'

stack_kubectl get --raw /_sim/requests >"$KS_WORK/access.json"
check "RBAC grants every call capmaas made" 0 ' 0 findings$' -- \
  $PY "$SRC/tests/scripts/rbac_check.py" --granted-only "$STACK_DIR/infrastructure-components.yaml" "$KS_WORK/access.json"
check "capmaas logged no sanitizer report" 1 '' -- grep -Eq 'runtime error|AddressSanitizer' \
  "$STACK_DIR/capmaas.log"
stack_down
echo "$KS_PASS passed, $KS_FAIL failed"
[ "$KS_FAIL" -eq 0 ]
