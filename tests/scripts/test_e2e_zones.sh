#!/usr/bin/env bash
# End to end, MAAS zones as failure domains and autoscaling from zero (issue 20, items 2 and
# 3), on the local stack with the sample inventory (3 zones). The cluster's MaasCluster names
# no failure domains, so capmaas lists the zones that hold machines (computed here from the
# inventory file); capi-sim's KubeadmControlPlane spreads its 3 control planes over them as
# CAPI's does: one per zone, each Machine's spec.failureDomain the zone MAAS allocated in,
# each MaasMachine's status.failureDomain the same, and the workload Node labelled with it.
# Every MaasMachineTemplate's status.capacity is the smallest MAAS machine matching it
# (computed here from the inventory file and the template's spec); a smaller matching
# machine added to maas-sim lowers it within an inventory refresh; a template whose machines
# all go gets CapacityKnown False (NoMatchingMachine) and no capacity. A failure-domain list
# the user writes is kept as written. Every call capmaas made is granted by its RBAC.
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
REFRESH_S=2
STACK_CAPMAAS_ARGS="--machine-refresh-interval 2s --maas-inventory-interval ${REFRESH_S}s"
trap 'stack_down; ks_cleanup' EXIT
PY=/usr/bin/python3
INVENTORY=$SRC/tests/sim/maas/inventory-sample.yaml
EXTRA=$KS_WORK/extra-machines.json # machines this test adds to maas-sim, as maas-sim takes them
echo '[]' >"$EXTRA"


# The MAAS side as the test sees it: the inventory file plus what it added, minus what it
# deleted (DELETED: system ids). Prints the zones holding machines, one per line, sorted.
DELETED=""
inventory_zones() {
  $PY - "$INVENTORY" "$EXTRA" "$DELETED" <<'PY'
import json, sys, yaml
inv = yaml.safe_load(open(sys.argv[1]))
ms = inv["machines"] + json.load(open(sys.argv[2]))
gone = set(sys.argv[3].split())
print("\n".join(sorted({m.get("zone", "default") for m in ms if m["system_id"] not in gone})))
PY
}
# TEMPLATE: "cpu memory arch" of the smallest machine matching it (the fewest cores and the
# least memory among the matches, MiB as a canonical quantity), or "none".
expected_capacity() {
  k get maasmachinetemplate "$1" -o json | $PY -c '
import json, sys, yaml
inv = yaml.safe_load(open(sys.argv[1]))
ms = inv["machines"] + json.load(open(sys.argv[2]))
gone = set(sys.argv[3].split())
sp = json.load(sys.stdin)["spec"]["template"]["spec"]
def match(m):
    return (m["system_id"] not in gone
            and (not sp.get("resourcePool") or m.get("pool", "default") == sp["resourcePool"])
            and (not sp.get("failureDomain") or m.get("zone", "default") == sp["failureDomain"])
            and set(sp.get("tags", [])) <= set(m.get("tags", []))
            and m.get("cpu_count", 1) >= sp.get("minCPU", 0)
            and m.get("memory", 1024) >= sp.get("minMemory", 0))
fit = [m for m in ms if match(m)]
def quantity(mib):
    for unit in ("Mi", "Gi", "Ti"):
        if mib % 1024:
            return "%d%s" % (mib, unit)
        mib //= 1024
    return "%dPi" % mib
if not fit:
    print("none")
else:
    archs = {m.get("architecture", "amd64/generic").split("/")[0] for m in fit}
    print(min(m.get("cpu_count", 1) for m in fit), quantity(min(m.get("memory", 1024) for m in fit)),
          archs.pop() if len(archs) == 1 else "-")' "$INVENTORY" "$EXTRA" "$DELETED"
}
# TEMPLATE: "cpu memory arch" as its status says, or "none" without a capacity
status_capacity() {
  k get maasmachinetemplate "$1" -o json | $PY -c '
import json, sys
st = json.load(sys.stdin).get("status", {})
cap, info = st.get("capacity"), st.get("nodeInfo", {})
print("%s %s %s" % (cap["cpu"], cap["memory"], info.get("architecture", "-")) if cap else "none")'
}
capacity_is_expected() { # TEMPLATE
  local want have
  want=$(expected_capacity "$1") && have=$(status_capacity "$1") && [ -n "$want" ] && [ "$want" = "$have" ]
}
all_capacities_expected() {
  local t
  for t in $(k get maasmachinetemplates -o jsonpath='{.items[*].metadata.name}'); do
    capacity_is_expected "$t" || return 1
  done
}
cond_of() { # TEMPLATE: "status reason" of CapacityKnown
  k get maasmachinetemplate "$1" -o jsonpath='{.status.conditions[?(@.type=="CapacityKnown")].status} {.status.conditions[?(@.type=="CapacityKnown")].reason}'
}
cond_is() { [ "$(cond_of "$1")" = "$2" ]; }

stack_up "$KS_WORK/stack" || {
  echo "not ok - the stack did not start"
  tail -n 20 "$KS_WORK"/stack/*.log
  exit 1
}
check "the stack starts" 0 '' -- true
MANIFEST=$KS_WORK/cluster.yaml
# workers from any capi machine of at least 1 CPU and 2 GiB: the sample's smallest (2 CPUs,
# 4 GiB) matches, and a smaller one can be added
stack_render_cluster "$MANIFEST" WORKER_MACHINE_COUNT=1 WORKER_MACHINE_MINCPU=1 \
  WORKER_MACHINE_MINMEMORY=2048 || {
  echo "not ok - the release's cluster template does not render"
  exit 1
}
check "the MaasCluster names no failure domains" 1 '' -- \
  $PY -c 'import sys,yaml; sys.exit(0 if any(d["kind"]=="MaasCluster" and d["spec"].get("failureDomains") for d in yaml.safe_load_all(open(sys.argv[1]))) else 1)' "$MANIFEST"
check "the rendered cluster is accepted by the webhooks" 0 'maasmachinetemplate' -- k apply -f "$MANIFEST"
T0=$(date +%s)
all_ready() { n_ready_is 4 && cluster_ready; }
check "4 MaasMachines Ready and the cluster Ready" 0 '' -- within 120 all_ready
echo "# cluster Ready after $(($(date +%s) - T0)) s"

# --- failure domains ------------------------------------------------------------------------
ZONES=$(inventory_zones | tr '\n' ' ' | sed 's/ $//')
echo "# zones holding machines in the inventory: $ZONES"
fds_of() { # RESOURCE NAME: the names of status.failureDomains with controlPlane true (list or map)
  k get "$1" "$2" -o json | $PY -c '
import json, sys
fd = json.load(sys.stdin).get("status", {}).get("failureDomains")
items = fd if isinstance(fd, list) else [dict(v, name=n) for n, v in (fd or {}).items()]
print(" ".join(sorted(i["name"] for i in items if i.get("controlPlane") is True)))'
}
fds_are() { [ "$(fds_of "$1" "$2")" = "$3" ]; }
check "the MaasCluster's status.failureDomains are the zones that hold machines" 0 '' -- \
  within 10 fds_are maascluster demo "$ZONES"
check "capi-sim copied them into the Cluster" 0 '' -- within 10 fds_are cluster demo "$ZONES"

# "machine failureDomain | MaasMachine status.failureDomain | MAAS zone | Node zone label" per
# control plane
placement() {
  local mach mms state nodes
  mach=$(k get machines -o json) && mms=$(mm_json) && state=$(stack_maas GET state) &&
    nodes=$(wk get nodes -o json) || return 1
  $PY - <(echo "$mach") <(echo "$mms") <(echo "$state") <(echo "$nodes") <<'PY'
import json, sys
mach, mms, state, nodes = (json.load(open(f)) for f in sys.argv[1:5])
zone = {m["system_id"]: m.get("zone", {}).get("name") if isinstance(m.get("zone"), dict) else m.get("zone")
        for m in state["machines"]}
label = {n["spec"].get("providerID"): n["metadata"].get("labels", {}).get("topology.kubernetes.io/zone")
         for n in nodes["items"]}
mm = {m["metadata"]["name"]: m for m in mms["items"]}
for m in sorted(mach["items"], key=lambda m: m["metadata"]["name"]):
    if "cluster.x-k8s.io/control-plane" not in m["metadata"].get("labels", {}):
        continue
    x = mm[m["spec"]["infrastructureRef"]["name"]]
    print(m["spec"].get("failureDomain"), x.get("status", {}).get("failureDomain"),
          zone.get(x["spec"].get("systemID")), label.get(x["spec"].get("providerID")))
PY
}
one_per_zone() {
  placement | $PY -c '
import sys
rows = [l.split() for l in sys.stdin.read().splitlines()]
zones = sys.argv[1].split()
ok = len(rows) == 3 and sorted(r[0] for r in rows) == zones and all(len(set(r)) == 1 for r in rows)
sys.exit(0 if ok else 1)' "$ZONES"
}
check "one control plane per zone: Machine, MaasMachine status, MAAS and Node label agree" 0 '' -- \
  within 30 one_per_zone
placement | sed 's/^/# control plane: machine fd, MaasMachine fd, MAAS zone, Node label: /'

# --- autoscaling from zero ------------------------------------------------------------------
check "each template's status.capacity is the smallest matching machine of the inventory" 0 '' -- \
  within 10 all_capacities_expected
for t in demo-control-plane demo-md-0; do
  echo "# $t: $(status_capacity "$t") (expected $(expected_capacity "$t")), CapacityKnown $(cond_of "$t")"
done
check "nodeInfo says linux" 0 '^linux$' -- k get maasmachinetemplate demo-md-0 -o jsonpath='{.status.nodeInfo.operatingSystem}'
check "CapacityKnown True (MachinesMatch)" 0 '' -- cond_is demo-md-0 "True MachinesMatch"
status_writes() { # PATCHes capmaas sent to maasmachinetemplates/status so far
  k get --raw /_sim/requests | $PY -c '
import json, sys
a = json.load(sys.stdin).get("access", {})
print(sum(n for key, n in a.items() if key.startswith("capmaas patch infrastructure.cluster.x-k8s.io maasmachinetemplates/status")))'
}
W0=$(status_writes)
sleep $((3 * REFRESH_S))
check "unchanged inventory refreshes write no template status" 0 "^$W0\$" -- status_writes

TINY='{"system_id":"tiny01","hostname":"tiny","cpu_count":1,"memory":3072,"zone":"az1","pool":"capi","architecture":"amd64/generic"}'
check "maas-sim takes a smaller machine that matches the worker template" 0 '' -- \
  stack_maas POST machines -H 'Content-Type: application/json' -d "[$TINY]" --fail
echo "[$TINY]" >"$EXTRA"
T1=$(date +%s)
check "the worker template's capacity drops to it within an inventory refresh" 0 '' -- \
  within $((2 * REFRESH_S + 2)) capacity_is_expected demo-md-0
echo "# demo-md-0 now $(status_capacity demo-md-0) after $(($(date +%s) - T1)) s (refresh every ${REFRESH_S}s)"
check "... which is 1 CPU and 3Gi" 0 '^1 3Gi amd64$' -- status_capacity demo-md-0
check "the control-plane template (4 CPUs or more) is unchanged" 0 '' -- capacity_is_expected demo-control-plane

GPU=$KS_WORK/gpu.yaml
cat >"$GPU" <<'EOF'
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: MaasMachineTemplate
metadata:
  name: gpu-workers
  namespace: default
spec:
  template:
    spec:
      image: u-2204-0-k-1264-0
      minCPU: 16
      minMemory: 32768
      resourcePool: default
      tags: [gpu]
EOF
check "a template for the default pool's GPU machines is accepted" 0 '' -- k apply -f "$GPU"
check "its capacity is theirs" 0 '' -- within 10 capacity_is_expected gpu-workers
GPU_IDS=$($PY -c 'import sys,yaml; print(" ".join(m["system_id"] for m in yaml.safe_load(open(sys.argv[1]))["machines"] if m.get("pool")=="default" and "gpu" in m.get("tags",[])))' "$INVENTORY")
echo "# the default pool's GPU machines: $GPU_IDS"
ids_json=$($PY -c 'import json,sys; print(json.dumps(sys.argv[1].split()))' "$GPU_IDS")
check "maas-sim deletes them" 0 '' -- stack_maas POST faults -H 'Content-Type: application/json' \
  -d "{\"delete\": $ids_json}" --fail
DELETED=$GPU_IDS
check "the template then says CapacityKnown False, NoMatchingMachine" 0 '' -- \
  within $((2 * REFRESH_S + 2)) cond_is gpu-workers "False NoMatchingMachine"
check "... and has no capacity for the autoscaler" 0 '^none$' -- status_capacity gpu-workers
check "... the expected answer too" 0 '^none$' -- expected_capacity gpu-workers
check "its message names what the template asks for" 0 'pool=default.*tags=gpu minCPU=16' -- \
  k get maasmachinetemplate gpu-workers -o jsonpath='{.status.conditions[?(@.type=="CapacityKnown")].message}'

# --- a list the user writes is kept as written -----------------------------------------------
check "the user sets spec.failureDomains: [az2]" 0 '' -- \
  k patch maascluster demo --type merge -p '{"spec":{"failureDomains":["az2"]}}'
check "status.failureDomains is that list" 0 '' -- within 10 fds_are maascluster demo az2
check "cleared again, the zones are discovered again" 0 '' -- \
  k patch maascluster demo --type merge -p '{"spec":{"failureDomains":null}}'
check "status.failureDomains are the zones again" 0 '' -- within 10 fds_are maascluster demo "$ZONES"

stack_kubectl get --raw /_sim/requests >"$KS_WORK/access.json"
check "RBAC grants every call capmaas made" 0 ' 0 findings$' -- \
  $PY "$SRC/tests/scripts/rbac_check.py" --granted-only "$STACK_DIR/infrastructure-components.yaml" "$KS_WORK/access.json"
check "capmaas logged no sanitizer report" 1 '' -- grep -Eq 'runtime error|AddressSanitizer' \
  "$STACK_DIR/capmaas.log"
stack_down
echo "$KS_PASS passed, $KS_FAIL failed"
[ "$KS_FAIL" -eq 0 ]
