#!/usr/bin/env bash
# Chaos during a reusing rollout (issue 24; docs/host-reuse.md, Crashes): a MachineDeployment
# of 5 workers with nodeReuse, release.erase none and maxSurge 0 rolls out to a new template
# while capmaas is killed with SIGKILL at random moments and restarted, 10 times (between a
# tag and its release, an allocate and its untag, wherever the kills land). Then: every
# MaasMachine Ready and every worker from the new template, no machine leaked in maas-sim
# (held by no live MaasMachine) and none allocated twice, and once the hold time
# (--host-reuse-hold 10s) has passed no host carries a reuse tag. How many hosts came back
# is reported.
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
# shellcheck source=tests/scripts/e2e_lib.sh
. "$(dirname "$0")/e2e_lib.sh"
ks_need kubectl curl
SRC=${CAPMAAS_SOURCE_DIR:?CAPMAAS_SOURCE_DIR is not set}
BUILD=${CAPMAAS_BUILD_DIR:?CAPMAAS_BUILD_DIR is not set}
PY=/usr/bin/python3
trap 'stack_down; ks_cleanup' EXIT
STACK_DEPLOY_SECONDS=1
STACK_RELEASE_SECONDS=0.5
HOLD_S=10
STACK_CAPMAAS_ARGS="--machine-refresh-interval 2s --maas-inventory-interval 2s --host-reuse-hold ${HOLD_S}s"

ready_n() {
  k get maasmachines -o json | $PY -c 'import json,sys; print(sum(1 for i in json.load(sys.stdin)["items"] if i.get("status",{}).get("ready")))'
}
all_ready() {
  [ "$(ready_n)" -eq "$1" ] && [ "$(k get maasmachines -o name | wc -l)" -eq "$1" ]
}
audit() {
  local uids
  uids=$(k get maasmachines -A -o jsonpath='{.items[*].metadata.uid}')
  stack_maas GET state | $PY -c "
import json,sys
uids=set('$uids'.split())
held=[m for m in json.load(sys.stdin)['machines'] if m['status_name'] not in ('Ready','Releasing','Disk erasing')]
owners=[m.get('agent_name') for m in held]
leaked=[m['system_id'] for m in held if m.get('agent_name') not in uids]
doubles=sorted({o for o in owners if owners.count(o) > 1})
print('held=%d leaked=%d doubles=%d' % (len(held), len(leaked), len(doubles)))
for m in held:
    if m['system_id'] in leaked or m.get('agent_name') in doubles:
        print('suspect: %s %s agent_name=%s' % (m['system_id'], m['status_name'], m.get('agent_name')))
sys.exit(0 if not leaked and not doubles and len(held) == len(uids) else 1)"
}
worker_ids() {
  k get maasmachines -o json | $PY -c 'import json,sys
print(" ".join(sorted(x["spec"].get("systemID","") for x in json.load(sys.stdin)["items"]
  if "cluster.x-k8s.io/control-plane" not in x["metadata"].get("labels",{}))))'
}
no_reuse_tag() {
  stack_maas GET state | $PY -c 'import json,sys
sys.exit(1 if any(t.startswith("capmaas-reuse-") for m in json.load(sys.stdin)["machines"] for t in m.get("tag_names",[])) else 0)'
}
v2_workers() {
  [ "$(k get machines -l cluster.x-k8s.io/deployment-name=demo-md-0 -o jsonpath='{range .items[*]}{.metadata.annotations.cluster\.x-k8s\.io/cloned-from-name}{"\n"}{end}' | grep -cx demo-md-0-v2)" -eq 5 ]
}

stack_up "$KS_WORK/stack" || {
  echo "not ok - the stack did not start"
  tail -n 20 "$KS_WORK"/stack/*.log
  exit 1
}
check "the stack starts" 0 '' -- true
MANIFEST=$KS_WORK/cluster.yaml
stack_render_cluster "$MANIFEST" CONTROL_PLANE_MACHINE_COUNT=1 WORKER_MACHINE_COUNT=5 || exit 1
$PY - "$MANIFEST" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
for d in docs:
    if d["kind"] == "MaasMachineTemplate" and d["metadata"]["name"] == "demo-md-0":
        d["spec"]["template"]["spec"].update({"nodeReuse": True, "release": {"erase": "none"}})
    if d["kind"] == "MachineDeployment":
        d["spec"]["rollout"] = {"strategy": {"type": "RollingUpdate",
                                             "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}}
yaml.safe_dump_all(docs, open(sys.argv[1], "w"))
PY
check "the cluster is accepted" 0 '' -- k apply -f "$MANIFEST"
check "6 MaasMachines Ready" 0 '' -- within 120 all_ready 6
BEFORE=$(worker_ids)
k get maasmachinetemplate demo-md-0 -o json | $PY -c 'import json,sys
t=json.load(sys.stdin)
print(json.dumps({"apiVersion":t["apiVersion"],"kind":t["kind"],
  "metadata":{"name":"demo-md-0-v2","namespace":"default"},"spec":t["spec"]}))' | k apply -f - >/dev/null
check "the MachineDeployment rolls out to demo-md-0-v2" 0 '' -- k patch machinedeployment demo-md-0 \
  --type merge -p '{"spec":{"template":{"spec":{"infrastructureRef":{"name":"demo-md-0-v2"}}}}}'
for i in $(seq 1 10); do
  sleep "$($PY -c 'import random; print(round(random.uniform(0.3, 1.5), 2))')"
  kill -KILL "$STACK_CAPMAAS_PID" 2>/dev/null
  wait "$STACK_CAPMAAS_PID" 2>/dev/null
  echo "# kill $i: $(ready_n)/6 Ready"
  stack_capmaas_start || { echo "capmaas did not restart"; tail -n 20 "$STACK_DIR/capmaas.log"; }
done
done_rolling() { v2_workers && all_ready 6; }
check "every worker from demo-md-0-v2 and all 6 MaasMachines Ready after 10 kills" 0 '' -- \
  within 180 done_rolling
check "no leaked and no double allocation" 0 '' -- within 20 audit
audit | sed 's/^/# /'
AFTER=$(worker_ids)
echo "# worker hosts before: $BEFORE; after: $AFTER; came back: $(comm -12 <(tr ' ' '\n' <<<"$BEFORE") <(tr ' ' '\n' <<<"$AFTER") | wc -l)/5"
check "no reuse tag left once the hold time ($HOLD_S s) has passed" 0 '' -- \
  within $((HOLD_S + 30)) no_reuse_tag
check "still no leaked and no double allocation" 0 '' -- audit
check "capmaas logged no sanitizer report" 1 '' -- grep -Eq 'runtime error|AddressSanitizer' \
  "$STACK_DIR/capmaas.log"
stack_down
echo "$KS_PASS passed, $KS_FAIL failed"
[ "$KS_FAIL" -eq 0 ]
