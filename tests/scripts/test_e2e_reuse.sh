#!/usr/bin/env bash
# End to end, hosts that come back through a rollout (issue 24; docs/host-reuse.md), on the
# local stack. A cluster of 3 control planes and 3 workers whose templates say
# nodeReuse: true and release.erase: none, the MachineDeployment and the KubeadmControlPlane
# with maxSurge 0. maas-sim writes a data marker on each host's disks when it is deployed
# and clears it only when a release erases.
#   1. the workers roll out to a new template (nodeReuse too): 3 new Machines on the same 3
#      system ids, no erase, every data marker intact, a HostReused event each, no reuse
#      tag left on any host, every Node Ready;
#   2. the control planes roll out the same way, the endpoint record never empty (polled);
#   3. the workers scale 3 -> 2: the released host keeps its reuse tag (the hosts-waiting
#      gauge says 1, the hold's start recorded in the tag's comment in MAAS) until
#      --host-reuse-hold (30 s) passes, then loses it, and the tag, carried by no host now, is
#      deleted; capmaas is killed (SIGKILL) and restarted halfway through the hold, which
#      does not start the hold over;
#   4. the workers roll out to a template without nodeReuse and release.erase: quick: the
#      old (reusing) workers' hosts are kept unerased and the new workers get other hosts
#      (kept hosts are left to their owner); scaled 2 -> 1, the released host is
#      quick-erased (its marker cleared) and gets no tag;
# and nothing is leaked in maas-sim at any end. The reused and fresh allocations are counted.
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
# shellcheck source=tests/scripts/e2e_lib.sh
. "$(dirname "$0")/e2e_lib.sh"
ks_need kubectl curl
SRC=${CAPMAAS_SOURCE_DIR:?CAPMAAS_SOURCE_DIR is not set}
BUILD=${CAPMAAS_BUILD_DIR:?CAPMAAS_BUILD_DIR is not set}
STACK_DEPLOY_SECONDS=0.5
STACK_RELEASE_SECONDS=0.5
HOLD_S=30
STACK_CAPMAAS_ARGS="--machine-refresh-interval 2s --host-reuse-hold ${HOLD_S}s"
trap 'rm -f "$POLL_ON"; stack_down; ks_cleanup' EXIT
PY=/usr/bin/python3
POLL_ON=$KS_WORK/polling

n_ready_is() {
  k get maasmachines -o json | $PY -c 'import json,sys
i=json.load(sys.stdin)["items"]
sys.exit(0 if len(i)==int(sys.argv[1]) and all(x.get("status",{}).get("ready") for x in i) else 1)' "$1"
}
audit() { # as test_chaos.sh: every host not Ready is held by one live MaasMachine
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
sys.exit(0 if not leaked and not doubles and len(held) == len(uids) else 1)"
}
# "system_id marker erasures tags" of the hosts of ROLE (workers | cps), sorted by id
hosts_of() {
  local mm state
  mm=$(k get maasmachines -o json) && state=$(stack_maas GET state) || return 1
  $PY - "$1" <(echo "$mm") <(echo "$state") <<'PY'
import json, sys
role, mm, st = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
by = {m["system_id"]: m for m in st["machines"]}
ids = sorted(x["spec"].get("systemID") for x in mm["items"] if x["spec"].get("systemID") and
             (("cluster.x-k8s.io/control-plane" in x["metadata"].get("labels", {})) == (role == "cps")))
for i in ids:
    m = by[i]
    print(i, m.get("disk_marker"), m.get("erasures"), ",".join(m.get("tag_names", [])) or "-")
PY
}
reuse_tags() { # every host with a capmaas-reuse tag: "system_id status tag"
  stack_maas GET state | $PY -c 'import json,sys
for m in json.load(sys.stdin)["machines"]:
    for t in m.get("tag_names", []):
        if t.startswith("capmaas-reuse-"):
            print(m["system_id"], m["status_name"], t)'
}
no_reuse_tag() { [ -z "$(reuse_tags)" ]; }
metric() { stack_metrics | sed -n "s/^$1 //p"; }
machine_names() { k get machines -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort; }
from_template() { # ROLE-SELECTOR TEMPLATE N: N Machines, all cloned from TEMPLATE
  [ "$(k get machines -l "$1" -o jsonpath='{range .items[*]}{.metadata.annotations.cluster\.x-k8s\.io/cloned-from-name}{"\n"}{end}' | grep -cx -- "$2")" -eq "$3" ] &&
    [ "$(k get machines -l "$1" -o name | wc -l)" -eq "$3" ]
}
nodes_ready() {
  [ "$(wk get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c '^True$')" -eq "$1" ] &&
    [ "$(wk get nodes -o name | wc -l)" -eq "$1" ]
}
new_template() { # OLD NEW [reuse 0|1] [erase]
  k get maasmachinetemplate "$1" -o json | $PY -c 'import json,sys
t=json.load(sys.stdin)
sp=t["spec"]["template"]["spec"]
sp["nodeReuse"]=sys.argv[2]=="1"
sp["release"]={"erase": sys.argv[3]}
print(json.dumps({"apiVersion":t["apiVersion"],"kind":t["kind"],
  "metadata":{"name":sys.argv[1],"namespace":"default"},"spec":t["spec"]}))' "$2" "${3:-1}" "${4:-none}" |
    k apply -f -
}
md_to() { k patch machinedeployment demo-md-0 --type merge -p "{\"spec\":{\"template\":{\"spec\":{\"infrastructureRef\":{\"name\":\"$1\"}}}}}"; }
kcp_to() { k patch kubeadmcontrolplane demo-control-plane --type merge -p "{\"spec\":{\"machineTemplate\":{\"spec\":{\"infrastructureRef\":{\"name\":\"$1\"}}}}}"; }
WORKERS=cluster.x-k8s.io/deployment-name=demo-md-0
CPS=cluster.x-k8s.io/control-plane

stack_up "$KS_WORK/stack" || {
  echo "not ok - the stack did not start"
  tail -n 20 "$KS_WORK"/stack/*.log
  exit 1
}
check "the stack starts" 0 '' -- true
MANIFEST=$KS_WORK/cluster.yaml
stack_render_cluster "$MANIFEST" WORKER_MACHINE_COUNT=3 || {
  echo "not ok - the release's cluster template does not render"
  exit 1
}
# both templates reuse hosts and keep their disks; both owners replace old before new
$PY - "$MANIFEST" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
for d in docs:
    if d["kind"] == "MaasMachineTemplate":
        d["spec"]["template"]["spec"].update({"nodeReuse": True, "release": {"erase": "none"}})
    if d["kind"] == "MachineDeployment":
        d["spec"]["rollout"] = {"strategy": {"type": "RollingUpdate",
                                             "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}}
    if d["kind"] == "KubeadmControlPlane":
        d["spec"]["rollout"] = {"strategy": {"type": "RollingUpdate",
                                             "rollingUpdate": {"maxSurge": 0}}}
yaml.safe_dump_all(docs, open(sys.argv[1], "w"))
PY
check "the cluster (nodeReuse, erase none, maxSurge 0) is accepted, with the maxSurge warning" 0 \
  'nodeReuse: a host comes back only when its old Machine is gone' -- k apply -f "$MANIFEST"
check "6 MaasMachines Ready" 0 '' -- within 120 n_ready_is 6
W0=$(hosts_of workers)
C0=$(hosts_of cps)
echo "# workers: $(echo "$W0" | tr '\n' ';')"
echo "# control planes: $(echo "$C0" | tr '\n' ';')"
check "each host carries its data marker, never erased, no reuse tag" 0 '' -- \
  $PY -c 'import sys; rows=[l.split() for l in sys.argv[1].splitlines()]; sys.exit(0 if len(rows)==6 and all(r[1]!="None" and r[2]=="0" and "capmaas-reuse-" not in r[3] for r in rows) else 1)' "$W0
$C0"
F0=$(metric 'capmaas_host_reuse_allocations_total{source="fresh"}')
check "6 fresh allocations counted" 0 '^6$' -- echo "$F0"

# --- 1. the workers roll out; their hosts come back --------------------------------------------
OLD=$(machine_names)
check "a new worker template (nodeReuse) is accepted" 0 '' -- new_template demo-md-0 demo-md-0-v2 1 none
check "the MachineDeployment is pointed at it" 0 '' -- md_to demo-md-0-v2
T0=$(date +%s)
workers_rolled() { from_template "$WORKERS" demo-md-0-v2 3 && n_ready_is 6; }
check "3 new worker Machines from demo-md-0-v2, all Ready" 0 '' -- within 180 workers_rolled
echo "# workers rolled out in $(($(date +%s) - T0)) s"
# the reuse tag leaves a host at the first pass whose view of it shows the tag (a fleet list
# may be a few seconds older than the tag); the hosts are compared without it
check "no reuse tag is left on any host" 0 '' -- within 20 no_reuse_tag
W1=$(hosts_of workers)
check "... on the same 3 hosts, never erased, the data markers intact" 0 '' -- \
  diff <(echo "$W0") <(echo "$W1")
echo "# workers now: $(echo "$W1" | tr '\n' ';')"
reused_events() { k get events --field-selector reason=HostReused -o jsonpath='{range .items[*]}{.message}{"\n"}{end}'; }
check "a HostReused event names each reused host" 0 '' -- \
  test "$(reused_events | grep -o 'MAAS machine [a-z0-9]*' | sort -u | awk '{print $3}')" = "$(echo "$W0" | awk '{print $1}')"
check "3 reused allocations counted" 0 '^3$' -- metric 'capmaas_host_reuse_allocations_total{source="reused"}'
check "6 Nodes Ready" 0 '' -- within 30 nodes_ready 6
check "nothing leaked" 0 '' -- within 20 audit

# --- 2. the control planes roll out; theirs come back, the endpoint never empty -----------------
HOST=$(k get maascluster demo -o jsonpath='{.spec.controlPlaneEndpoint.host}')
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
    n += 1
    empty += not (recs and recs[0].get("ips"))
    time.sleep(0.2)
print("samples=%d empty=%d" % (n, empty))
PY
POLLER=$!
check "a new control-plane template (nodeReuse) is accepted" 0 '' -- \
  new_template demo-control-plane demo-control-plane-v2 1 none
check "the KubeadmControlPlane is pointed at it" 0 '' -- kcp_to demo-control-plane-v2
T0=$(date +%s)
cps_rolled() { from_template "$CPS" demo-control-plane-v2 3 && n_ready_is 6; }
check "3 new control planes from demo-control-plane-v2, all Ready" 0 '' -- within 240 cps_rolled
echo "# control planes rolled out in $(($(date +%s) - T0)) s"
rm -f "$POLL_ON"
wait "$POLLER"
check "no reuse tag is left" 0 '' -- within 20 no_reuse_tag
C1=$(hosts_of cps)
check "... on the same 3 hosts, never erased, the data markers intact" 0 '' -- \
  diff <(echo "$C0") <(echo "$C1")
check "the endpoint record was never empty during it" 0 '^samples=[1-9][0-9]* empty=0$' -- \
  cat "$KS_WORK/dns-samples"
check "every Machine is new" 0 '' -- test -z "$(comm -12 <(echo "$OLD") <(machine_names))"
check "6 Nodes Ready" 0 '' -- within 30 nodes_ready 6
check "nothing leaked" 0 '' -- within 20 audit

# --- 3. a host nobody takes back loses its tag after the hold time ------------------------------
check "the workers scale 3 -> 2" 0 '' -- k patch machinedeployment demo-md-0 --type merge -p '{"spec":{"replicas":2}}'
one_waiting() { [ "$(reuse_tags | grep -c ' Ready ')" -eq 1 ]; }
check "the released host waits, Ready, with its reuse tag" 0 '' -- within 30 one_waiting
T0=$(date +%s)
gauge_is() { [ "$(metric capmaas_host_reuse_waiting_hosts)" = "$1" ]; }
check "the hosts-waiting gauge says 1" 0 '' -- within 15 gauge_is 1
hold_recorded() { # the waiting host's hold start, in its tag's comment in MAAS
  stack_maas GET state | $PY -c 'import json,sys
st = json.load(sys.stdin)
held = [(m["system_id"], t) for m in st["machines"] if m["status_name"] == "Ready"
        for t in m.get("tag_names", []) if t.startswith("capmaas-reuse-")]
com = {t["name"]: t["comment"] for t in st.get("tags", [])}
sys.exit(0 if len(held) == 1 and "; held since: %s=" % held[0][0] in com.get(held[0][1], "") else 1)'
}
check "the hold's start is recorded in the tag's comment in MAAS" 0 '' -- within 15 hold_recorded
RESTART_AT=$((T0 + HOLD_S / 2))
while [ "$(date +%s)" -lt "$RESTART_AT" ]; do sleep 1; done # the hold's middle, whatever the poll took
kill -KILL "$STACK_CAPMAAS_PID" 2>/dev/null
wait "$STACK_CAPMAAS_PID" 2>/dev/null
stack_capmaas_start || { echo "capmaas did not restart"; tail -n 20 "$STACK_DIR/capmaas.log"; }
check "capmaas restarted $(($(date +%s) - T0)) s into the hold" 0 '' -- kill -0 "$STACK_CAPMAAS_PID"
check "after the hold time ($HOLD_S s) the tag is gone" 0 '' -- within $((HOLD_S + 30)) no_reuse_tag
ELAPSED=$(($(date +%s) - T0))
echo "# tag removed $ELAPSED s after the host was seen waiting (restart at $((HOLD_S / 2)) s)"
check "... not before it" 0 '' -- test "$ELAPSED" -ge $((HOLD_S - 6))
check "... nor a hold time after the restart: the restart did not start the hold over" 0 '' -- \
  test "$ELAPSED" -lt $((HOLD_S + HOLD_S / 2 - 2))
no_reuse_tag_in_maas() { ! stack_maas GET state | grep -q '"name":"capmaas-reuse-'; }
check "no reuse tag is left in MAAS (deleted once no host carries it)" 0 '' -- \
  within 20 no_reuse_tag_in_maas
check "one tag expiry counted (since the restart)" 0 '^1$' -- metric capmaas_host_reuse_tags_expired_total
check "nothing leaked" 0 '' -- within 20 audit

# --- 4. without nodeReuse: other owners leave kept hosts alone; the release erases as configured
check "a worker template without nodeReuse, erase quick, is accepted" 0 '' -- \
  new_template demo-md-0-v2 demo-md-0-v3 0 quick
W2=$(hosts_of workers)
check "the MachineDeployment is pointed at it" 0 '' -- md_to demo-md-0-v3
rolled3() { from_template "$WORKERS" demo-md-0-v3 2 && n_ready_is 5; }
check "2 new worker Machines from demo-md-0-v3, all Ready" 0 '' -- within 180 rolled3
W3=$(hosts_of workers)
echo "# workers before: $(echo "$W2" | tr '\n' ';') after: $(echo "$W3" | tr '\n' ';')"
check "the v2 workers' hosts (nodeReuse) were kept, not erased, and the v3 workers got others" 0 '' -- \
  test -z "$(comm -12 <(echo "$W2" | awk '{print $1}') <(echo "$W3" | awk '{print $1}'))"
kept_unerased() { # the v2 hosts: released without erase, their markers intact
  stack_maas GET state | $PY -c 'import json,sys
before = [l.split() for l in sys.argv[1].splitlines()]
by = {m["system_id"]: m for m in json.load(sys.stdin)["machines"]}
sys.exit(0 if before and all(by[r[0]]["erasures"] == int(r[2]) and by[r[0]].get("disk_marker") == r[1]
                             for r in before) else 1)' "$W2"
}
check "... and those were released without erase, their data kept" 0 '' -- kept_unerased
check "the workers scale 2 -> 1" 0 '' -- k patch machinedeployment demo-md-0 --type merge -p '{"spec":{"replicas":1}}'
erased_one() { # exactly one v3 host was quick-erased: one erasure more, its marker gone
  stack_maas GET state | $PY -c 'import json,sys
before = {l.split()[0]: l.split() for l in sys.argv[1].splitlines()}
by = {m["system_id"]: m for m in json.load(sys.stdin)["machines"]}
done = [i for i, r in before.items() if by[i]["erasures"] == int(r[2]) + 1 and by[i].get("disk_marker") is None
        and by[i]["status_name"] == "Ready"
        and not any(t.startswith("capmaas-reuse-") for t in by[i].get("tag_names", []))]
sys.exit(0 if len(done) == 1 else 1)' "$W3"
}
check "the released v3 host was erased on release (erase quick), its data gone, no reuse tag" 0 '' -- \
  within 30 erased_one
check "nothing leaked" 0 '' -- within 20 audit
check "capmaas logged no sanitizer report" 1 '' -- grep -Eq 'runtime error|AddressSanitizer' \
  "$STACK_DIR/capmaas.log"
stack_down
echo "$KS_PASS passed, $KS_FAIL failed"
[ "$KS_FAIL" -eq 0 ]
