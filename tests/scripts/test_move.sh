#!/usr/bin/env bash
# clusterctl move on the local simulated stack (issue 17): a Ready cluster (1 control plane,
# 2 workers) on one management kube-sim is moved to a second one with its own capmaas and
# capi-sim, the way clusterctl does it: the Cluster is paused, every object of the cluster
# is created on the target owners first (without status, ownerReferences rebuilt with the
# target's UIDs), the sources are annotated clusterctl.cluster.x-k8s.io/delete-for-move,
# their finalizers removed and deleted, children first, and the Cluster is unpaused on the
# target. Throughout, maas-sim's request log shows no allocate, deploy, release or DNS
# delete, and the endpoint record keeps its IPs (polled). Then, on the target: the cluster
# is Ready again, workers scale, a paused cluster's MaasMachine delete releases nothing
# until unpaused, and deleting the cluster returns every machine and leaves no record.
# MOVE_CAPI_CONTRACT=v1beta1 runs it with capi-sim playing CAPI 1.10 (default v1beta2).
# MOVE_VIP=<address> runs it with the kube-vip flavor (a VIP endpoint, docs/endpoints.md):
# the reservation takes the record's place: kept in the vip annotation, never released nor
# reserved again during the move (polled), found again by the target, released at the end.
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
ks_need kubectl curl
SRC=${CAPMAAS_SOURCE_DIR:?CAPMAAS_SOURCE_DIR is not set}
BUILD=${CAPMAAS_BUILD_DIR:?CAPMAAS_BUILD_DIR is not set}
STACK_DEPLOY_SECONDS=0.5
STACK_RELEASE_SECONDS=0.3
STACK_CAPMAAS_ARGS="--machine-refresh-interval 2s --maas-inventory-interval 1h"
STACK_CAPI_CONTRACT=${MOVE_CAPI_CONTRACT:-v1beta2} # the Cluster API release capi-sim plays
MOVE_VIP=${MOVE_VIP:-}
[ -n "$MOVE_VIP" ] && STACK_FLAVOR=cluster-template-kube-vip.yaml
ANN=dns-record # the annotation naming the endpoint capmaas owns
[ -n "$MOVE_VIP" ] && ANN=vip
trap 'kill "${POLL_PID:-}" 2>/dev/null; stack_down; ks_cleanup' EXIT
PY=/usr/bin/python3

src_k() { stack_kubectl "$@"; }
dst_k() {
  kubectl --kubeconfig "$TARGET_KUBECONFIG" --cache-dir "$TARGET_DIR/kcache" \
    --request-timeout=20s "$@"
}
maas_state() { stack_maas GET state; }
in_use() {
  maas_state | $PY -c 'import json,sys; print(sum(1 for m in json.load(sys.stdin)["machines"] if m["status_name"] != "Ready"))'
}
in_use_is() { [ "$(in_use)" -eq "$1" ]; }
n_records() { maas_state | $PY -c 'import json,sys; print(len(json.load(sys.stdin)["dnsresources"]))'; }
ready_is() { # K N: N MaasMachines, all ready, and the MaasCluster Ready (kubectl wrapper K)
  "$1" get maasmachines,maasclusters -o json | $PY -c '
import json, sys
items = json.load(sys.stdin)["items"]
mms = [i for i in items if i["kind"] == "MaasMachine"]
mcs = [i for i in items if i["kind"] == "MaasCluster"]
ok = len(mms) == int(sys.argv[1]) and all(i.get("status", {}).get("ready") for i in mms)
ok = ok and len(mcs) == 1 and any(c["type"] == "Ready" and c["status"] == "True"
                                  for c in mcs[0].get("status", {}).get("conditions", []))
sys.exit(0 if ok else 1)' "$2"
}
record_ips() { # the endpoint record's IPs, sorted, or "none"
  maas_state | $PY -c "import json,sys; d=[r for r in json.load(sys.stdin)['dnsresources'] if r['fqdn']=='$1']; print(' '.join(sorted(d[0]['ips'])) if len(d)==1 else 'none')"
}
# the VIP's reservations as "ip owner", or "none"
reservations() {
  maas_state | $PY -c "import json,sys; r=json.load(sys.stdin)['reservations']; print(' '.join(sorted(x['ip']+' '+x['owner'] for x in r)) or 'none')"
}
# what the endpoint is in MAAS: the record's IPs, or the VIP's reservation
endpoint_state() { if [ -n "$MOVE_VIP" ]; then reservations; else record_ips "$1"; fi; }
log_count() { stack_maas GET requests | $PY -c 'import json,sys; print(json.load(sys.stdin)["count"])'; }
# MAAS calls since request number $1 that change machines or delete a DNS record
maas_changes_since() {
  stack_maas GET requests | $PY -c '
import json, sys
d = json.load(sys.stdin)
first = d["count"] - len(d["requests"])
since = int(sys.argv[1])
assert since >= first, "the request log wrapped"
bad = [r for i, r in enumerate(d["requests"], first) if i >= since and
       (r["op"] in ("allocate", "deploy", "release", "reserve") or
        (r["method"] == "DELETE" and "dnsresources" in r["path"]))]
print(len(bad), " ".join("%s %s %s" % (r["method"], r["path"], r["op"]) for r in bad))' "$1"
}
releases_since() {
  stack_maas GET requests | $PY -c '
import json, sys
d = json.load(sys.stdin)
first = d["count"] - len(d["requests"])
print(sum(1 for i, r in enumerate(d["requests"], first) if i >= int(sys.argv[1]) and r["op"] == "release"))' "$1"
}

stack_up "$KS_WORK/source" || {
  echo "not ok - the source stack did not start"
  tail -n 20 "$KS_WORK"/source/*.log
  exit 1
}
check "the source management cluster starts" 0 '' -- true
stack_up_target "$KS_WORK/target" || {
  echo "not ok - the target stack did not start"
  tail -n 20 "$KS_WORK"/target/*.log
  exit 1
}
check "the target management cluster starts (its own kube-sim, capmaas, capi-sim)" 0 '' -- true

MANIFEST=$KS_WORK/cluster.yaml
stack_render_cluster "$MANIFEST" CONTROL_PLANE_MACHINE_COUNT=1 WORKER_MACHINE_COUNT=2 \
  ${MOVE_VIP:+CONTROL_PLANE_ENDPOINT_IP=$MOVE_VIP} || {
  echo "not ok - the release's cluster template does not render"
  exit 1
}
check "the cluster is applied on the source" 0 'maasmachinetemplate' -- src_k apply -f "$MANIFEST"
check "3 MaasMachines Ready and the cluster Ready on the source" 0 '' -- \
  wait_until 120 ready_is src_k 3
HOST=$(src_k get maascluster demo -o jsonpath='{.spec.controlPlaneEndpoint.host}')
[ -n "$MOVE_VIP" ] && check "the endpoint is the VIP" 0 "^$MOVE_VIP\$" -- echo "$HOST"
check "the endpoint's identity ($ANN) is kept in the MaasCluster's metadata" 0 "^$HOST\$" -- \
  src_k get maascluster demo \
  -o jsonpath="{.metadata.annotations.maas\.infrastructure\.cluster\.x-k8s\.io/$ANN}"
record_filled() { [ "$(endpoint_state "$HOST")" != none ] && [ -n "$(endpoint_state "$HOST")" ]; }
check "the endpoint $HOST is in MAAS (the record holds the control plane's IP, or the VIP is reserved)" 0 '' -- \
  wait_until 30 record_filled
IPS=$(endpoint_state "$HOST")
echo "# endpoint $HOST in MAAS: $IPS"
addresses_ok() {
  src_k get maasmachines -o json | $PY -c '
import json, sys
for i in json.load(sys.stdin)["items"]:
    t = [a["type"] for a in i["status"]["addresses"]]
    n = (len(t) - 2) // 2
    assert t == ["ExternalDNS", "InternalDNS"] + ["ExternalIP", "InternalIP"] * n and n >= 1, t
    assert i["status"].get("failureDomain"), "no status.failureDomain"
print("ok")'
}
check "addresses are the reference's (FQDN as External/InternalDNS, then each IP) and status.failureDomain is set" 0 '^ok$' -- addresses_ok

# --- the move ---------------------------------------------------------------------------
SINCE=$(log_count)
# the record's IPs, polled every 0.1 s from the pause to the end of the checks after the move
(while :; do endpoint_state "$HOST" >>"$KS_WORK/record.log"; sleep 0.1; done) &
POLL_PID=$!

check "clusterctl move pauses the Cluster on the source" 0 'patched' -- \
  src_k patch cluster demo --type merge -p '{"spec":{"paused":true}}'
all_paused() { # K: the MaasCluster and every MaasMachine say Paused=True
  "$1" get maasmachines,maasclusters -o json | $PY -c '
import json, sys
items = json.load(sys.stdin)["items"]
ok = items and all(any(c["type"] == "Paused" and c["status"] == "True" and c["reason"] == "Paused"
                       for c in i.get("status", {}).get("conditions", [])) for i in items)
sys.exit(0 if ok else 1)'
}
check "the source capmaas reports Paused on the MaasCluster and every MaasMachine" 0 '' -- \
  wait_until 30 all_paused src_k

# clusterctl's move: objects of the cluster, owners before dependents, created on the target
# without status and with ownerReferences pointing at the target's copies; then the sources,
# dependents first: delete-for-move annotation, finalizers removed, deleted.
move_cluster() {
  $PY - "$STACK_KUBECONFIG" "$TARGET_KUBECONFIG" "$KS_WORK/move.log" <<'PY'
import json, subprocess, sys
src, dst, logf = sys.argv[1:]
log = open(logf, "w")
def k(cfg, *args, data=None):
    p = subprocess.run(["kubectl", "--kubeconfig", cfg, "--request-timeout=20s", *args],
                       input=data, capture_output=True, text=True)
    log.write("kubectl %s -> %d %s\n" % (" ".join(args[:3]), p.returncode, p.stderr.strip()))
    if p.returncode:
        sys.exit("kubectl %s: %s" % (" ".join(args), p.stderr.strip()))
    return p.stdout
kinds = ["clusters.cluster.x-k8s.io", "maasclusters.infrastructure.cluster.x-k8s.io",
         "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io",
         "machinedeployments.cluster.x-k8s.io", "machinesets.cluster.x-k8s.io",
         "maasmachinetemplates.infrastructure.cluster.x-k8s.io",
         "kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io", "machines.cluster.x-k8s.io",
         "maasmachines.infrastructure.cluster.x-k8s.io"]
objs = []
for kind in kinds:
    objs += [(kind, o) for o in json.loads(k(src, "get", kind, "-n", "default", "-o", "json"))["items"]]
objs += [("secrets", o) for o in json.loads(k(src, "get", "secrets", "-n", "default", "-l",
                                              "cluster.x-k8s.io/cluster-name=demo", "-o", "json"))["items"]]
uids = {o["metadata"]["uid"] for _, o in objs}
# owners first (clusterctl's move groups)
order, done = [], set()
while len(order) < len(objs):
    ready = [(kd, o) for kd, o in objs if o["metadata"]["uid"] not in done and
             all(r["uid"] in done or r["uid"] not in uids for r in o["metadata"].get("ownerReferences", []))]
    if not ready:
        sys.exit("ownerReference cycle")
    for kd, o in ready:
        order.append((kd, o))
        done.add(o["metadata"]["uid"])
new_uid = {}
for kd, o in order:
    c = json.loads(json.dumps(o))
    m = c["metadata"]
    for f in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
              "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
        m.pop(f, None)
    c.pop("status", None)
    refs = [dict(r, uid=new_uid[r["uid"]]) for r in m.get("ownerReferences", []) if r["uid"] in new_uid]
    if refs:
        m["ownerReferences"] = refs
    else:
        m.pop("ownerReferences", None)
    made = json.loads(k(dst, "create", "-o", "json", "-f", "-", data=json.dumps(c)))
    new_uid[o["metadata"]["uid"]] = made["metadata"]["uid"]
    if made.get("status"):
        sys.exit("%s %s kept a status on create" % (kd, m["name"]))
for kd, o in reversed(order):
    name = o["metadata"]["name"]
    k(src, "patch", kd, name, "-n", "default", "--type", "merge", "-p",
      json.dumps({"metadata": {"annotations": {"clusterctl.cluster.x-k8s.io/delete-for-move": ""}}}))
    if o["metadata"].get("finalizers"):
        k(src, "patch", kd, name, "-n", "default", "--type", "merge", "-p",
          json.dumps({"metadata": {"finalizers": None}}))
    k(src, "delete", kd, name, "-n", "default", "--wait=false")
print("moved %d objects" % len(order))
PY
}
check "the cluster's objects are moved to the target and deleted from the source" 0 '^moved [0-9]+ objects' -- move_cluster
source_empty() {
  [ "$(src_k get clusters,machines,maasmachines,maasclusters -A -o name 2>/dev/null | wc -l)" -eq 0 ]
}
check "nothing of the cluster is left on the source" 0 '' -- wait_until 30 source_empty
check "the target's capmaas reports Paused while the Cluster is paused" 0 '' -- \
  wait_until 30 all_paused dst_k
check "the moved MaasCluster has no status but the endpoint's identity in its metadata" 0 "^$HOST\$" -- \
  dst_k get maascluster demo \
  -o jsonpath="{.metadata.annotations.maas\.infrastructure\.cluster\.x-k8s\.io/$ANN}"
no_status_name() { [ -z "$(dst_k get maascluster demo -o jsonpath='{.status.network.dnsName}')" ]; }
check "move copied no status: the target's MaasCluster has no status.network.dnsName" 0 '' -- \
  no_status_name
no_machine_status() { ! dst_k get maasmachines -o json | grep -q '"machineState"'; }
check "nor any MaasMachine a status.machineState" 0 '' -- no_machine_status
check "clusterctl move unpauses the Cluster on the target" 0 'patched' -- \
  dst_k patch cluster demo --type merge -p '{"spec":{"paused":false}}'
check "3 MaasMachines Ready and the cluster Ready on the target" 0 '' -- \
  wait_until 120 ready_is dst_k 3
if [ -n "$MOVE_VIP" ]; then
  check "the target found the VIP's reservation again (LoadBalancerReady), endpoint unchanged" 0 \
    "^True VIP $HOST reserved in MAAS $HOST\$" -- dst_k get maascluster demo \
    -o jsonpath='{.status.conditions[?(@.type=="LoadBalancerReady")].status} {.status.conditions[?(@.type=="LoadBalancerReady")].message} {.spec.controlPlaneEndpoint.host}'
else
  check "the target rebuilt the endpoint from the record" 0 "^$HOST\$" -- \
    dst_k get maascluster demo -o jsonpath='{.status.network.dnsName}'
fi
settled() { # no MAAS write for 2 s
  local a b
  a=$(stack_maas GET requests | $PY -c 'import json,sys; print(json.load(sys.stdin)["writes"])')
  sleep 2
  b=$(stack_maas GET requests | $PY -c 'import json,sys; print(json.load(sys.stdin)["writes"])')
  [ "$a" = "$b" ]
}
wait_until 20 settled
kill "$POLL_PID" 2>/dev/null
wait "$POLL_PID" 2>/dev/null
POLL_PID=
check "no allocate, deploy, release, reserve or DNS delete from the pause to the target's Ready" 0 '^0 ' -- \
  maas_changes_since "$SINCE"
record_steady() { # every poll saw the same IPs
  local n seen
  n=$(wc -l <"$KS_WORK/record.log")
  seen=$(sort -u "$KS_WORK/record.log" | tr '\n' '|')
  echo "$n polls saw: $seen"
  [ "$n" -gt 10 ] && [ "$seen" = "$IPS|" ]
}
check "the endpoint kept its IPs (or its one reservation) throughout the move" 0 'polls saw' -- record_steady
echo "# record polled $(wc -l <"$KS_WORK/record.log") times from the pause to the target's Ready"
check "capmaas on the target adopted every machine (3 in use in MAAS)" 0 '' -- in_use_is 3

# --- the target owns the cluster ----------------------------------------------------------
check "workers scale 2 -> 3 on the target" 0 'patched' -- dst_k patch machinedeployment demo-md-0 \
  --type merge -p '{"spec":{"replicas":3}}'
check "4 MaasMachines Ready on the target" 0 '' -- wait_until 120 ready_is dst_k 4
check "MAAS holds 4 machines" 0 '' -- wait_until 30 in_use_is 4

# pause: deleting a MaasMachine of a paused cluster releases nothing until unpaused
VICTIM=$(dst_k get maasmachines -l '!cluster.x-k8s.io/control-plane' -o jsonpath='{.items[0].metadata.name}')
R0=$(log_count)
check "the target's Cluster is paused" 0 'patched' -- \
  dst_k patch cluster demo --type merge -p '{"spec":{"paused":true}}'
check "every Maas object says Paused" 0 '' -- wait_until 30 all_paused dst_k
check "MaasMachine $VICTIM is deleted while paused" 0 'deleted' -- \
  dst_k delete maasmachine "$VICTIM" --wait=false
sleep 3 # a negative check: capmaas had 3 s to release and must not have
check "nothing is released while paused" 0 '^0$' -- releases_since "$R0"
check "the paused MaasMachine keeps its finalizer" 0 'maasmachine.infrastructure' -- \
  dst_k get maasmachine "$VICTIM" -o jsonpath='{.metadata.finalizers}'
check "the Cluster is unpaused" 0 'patched' -- \
  dst_k patch cluster demo --type merge -p '{"spec":{"paused":false}}'
released_one() { [ "$(releases_since "$R0")" -eq 1 ]; }
check "once unpaused the machine is released" 0 '' -- wait_until 30 released_one
victim_gone() { ! dst_k get maasmachine "$VICTIM" >/dev/null 2>&1; }
check "and the MaasMachine goes" 0 '' -- wait_until 30 victim_gone

check "the cluster is deleted on the target" 0 'deleted' -- dst_k delete cluster demo --wait=false
gone() { [ "$(dst_k get maasmachines,maasclusters -A -o name 2>/dev/null | wc -l)" -eq 0 ]; }
check "no Maas object is left on the target" 0 '' -- wait_until 90 gone
check "every machine is Ready in MAAS again" 0 '' -- wait_until 30 in_use_is 0
check "the endpoint record is gone" 0 '^0$' -- n_records
check "no reservation is left" 0 '^none$' -- reservations
check "no capmaas logged a sanitizer report" 1 '' -- grep -Eq 'runtime error|AddressSanitizer' \
  "$STACK_DIR/capmaas.log" "$TARGET_DIR/capmaas.log"
stack_down
echo "$KS_PASS passed, $KS_FAIL failed"
[ "$KS_FAIL" -eq 0 ]
