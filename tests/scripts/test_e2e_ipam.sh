#!/usr/bin/env bash
# End to end, Cluster API's IPAM contract (issue 19): the release's flavor
# cluster-template-ipam.yaml (3 control planes whose addresses come from an InClusterIPPool,
# 2 workers on MAAS's own addresses), on the local stack with capi-sim's stand-in for the
# in-cluster IPAM provider. Each control plane is Deployed with its claimed address (a STATIC
# link on its MAAS interface), status.addresses holds it, the endpoint record holds exactly
# those 3; a MaasMachine of a pool that does not exist waits with a condition naming it and
# takes nothing from MAAS; scaling the control plane down returns the addresses to the pool;
# deleting the cluster leaves no claim, no IPAddress and no STATIC link; capmaas used every
# IPAM verb its RBAC grants and nothing more.
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
STACK_CAPMAAS_ARGS="--machine-refresh-interval 2s --maas-inventory-interval 1h --leader-elect --leader-election-namespace capmaas-system"
STACK_FLAVOR=cluster-template-ipam.yaml
trap 'stack_down; ks_cleanup' EXIT
PY=/usr/bin/python3
POOL=demo-control-plane
# m19's sample inventory: the boot subnet 10.20.0.0/24 (gateway 10.20.0.1), machines' own
# addresses 10.20.0.10-33
RANGE_LO=10.20.0.100
RANGE_HI=10.20.0.149

# within SECONDS CMD...: CMD until it succeeds, for at most SECONDS of wall time (the checks
# below run several kubectl calls each: wait_until's count of tries would last far longer)
within() {
  local end=$(($(date +%s) + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || return 1
    sleep 0.5
  done
}
maas_state() { stack_maas GET state; }
n_ready_is() { # N: N MaasMachines, all Ready
  mm_json | $PY -c 'import json,sys
i=json.load(sys.stdin)["items"]
sys.exit(0 if len(i)==int(sys.argv[1]) and all(x.get("status",{}).get("ready") for x in i) else 1)' "$1"
}
# "claim address" per answered claim, sorted by address
claimed() {
  k get ipaddresses -o json | $PY -c 'import json,sys
print("\n".join(sorted("%s %s" % (a["spec"]["claimRef"]["name"], a["spec"]["address"]) for a in json.load(sys.stdin)["items"])))'
}
claimed_ips() { claimed | awk '{print $2}' | sort | tr '\n' ' ' | sed 's/ $//'; }
n_claims() { k get ipaddressclaims -o name | wc -l; }
n_addresses() { k get ipaddresses -o name | wc -l; }
pool_counts() { k get inclusterippool "$POOL" -o jsonpath='{.status.ipAddresses.total} {.status.ipAddresses.used} {.status.ipAddresses.free}'; }
pool_counts_are() { [ "$(pool_counts)" = "$*" ]; }
in_use() {
  maas_state | $PY -c 'import json,sys; print(sum(1 for m in json.load(sys.stdin)["machines"] if m["status_name"] != "Ready"))'
}
in_use_is() { [ "$(in_use)" -eq "$1" ]; }
record_ips() {
  local host
  host=$(k get maascluster demo -o jsonpath='{.spec.controlPlaneEndpoint.host}')
  maas_state | $PY -c "import json,sys; d=[r for r in json.load(sys.stdin)['dnsresources'] if r['fqdn']=='$host']; print(' '.join(sorted(d[0]['ips'])) if len(d)==1 else 'none')"
}
# "system_id ip" of every STATIC link MAAS holds (maas-sim's state lists each machine's links)
static_links() {
  maas_state | $PY -c 'import json,sys
out=[]
for m in json.load(sys.stdin)["machines"]:
    for l in m.get("links", []):
        if l.get("mode") == "static":
            out.append("%s %s" % (m["system_id"], l.get("ip_address", "")))
print("\n".join(sorted(out)))'
}
n_static_links() { static_links | grep -c . || true; }

stack_up "$KS_WORK/stack" || {
  echo "not ok - the stack did not start"
  tail -n 20 "$KS_WORK"/stack/*.log
  exit 1
}
check "the stack starts" 0 '' -- true
check "capmaas reads the IPAM contract at ipam.cluster.x-k8s.io/v1beta2" 0 'v1beta2' -- \
  grep -h 'reading Cluster API IPAM objects' "$STACK_DIR/capmaas.log"
MANIFEST=$KS_WORK/cluster.yaml
stack_render_cluster "$MANIFEST" WORKER_MACHINE_COUNT=2 \
  CONTROL_PLANE_IP_POOL_ADDRESSES="$RANGE_LO-$RANGE_HI" CONTROL_PLANE_IP_POOL_GATEWAY=10.20.0.1 || {
  echo "not ok - the release's $STACK_FLAVOR does not render"
  exit 1
}
check "the rendered $STACK_FLAVOR is accepted by the webhooks" 0 'inclusterippool' -- \
  k apply -f "$MANIFEST"
T0=$(date +%s)
all_ready() { n_ready_is 5 && cluster_ready; }
check "5 MaasMachines Ready and the cluster Ready" 0 '' -- within 120 all_ready
echo "# cluster Ready after $(($(date +%s) - T0)) s"

# one claim per control plane, owned by it, answered from the pool; none for the workers
claims_ok() {
  k get ipaddressclaims,maasmachines -o json | $PY -c '
import json, sys
items = json.load(sys.stdin)["items"]
mms = {m["metadata"]["uid"]: m for m in items if m["kind"] == "MaasMachine"}
claims = [c for c in items if c["kind"] == "IPAddressClaim"]
cps = [m for m in mms.values() if "cluster.x-k8s.io/control-plane" in m["metadata"].get("labels", {})]
ok = len(claims) == 3 and len(cps) == 3
for c in claims:
    owner = [r for r in c["metadata"]["ownerReferences"] if r.get("controller")]
    m = mms.get(owner[0]["uid"]) if len(owner) == 1 else None
    ok = ok and m is not None and m in cps and c["metadata"]["name"] == m["metadata"]["name"] + "-0"
    ok = ok and c["metadata"]["labels"].get("cluster.x-k8s.io/cluster-name") == "demo"
    ok = ok and c["spec"]["poolRef"] == {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": sys.argv[1]}
    ok = ok and c.get("status", {}).get("addressRef", {}).get("name") == c["metadata"]["name"]
print(len(claims), "claims")
sys.exit(0 if ok else 1)' "$POOL"
}
check "one IPAddressClaim per control plane, owned by it, answered; none for the workers" 0 '3 claims' -- claims_ok
in_range() {
  claimed_ips | $PY -c 'import ipaddress,sys
ips=sys.stdin.read().split()
lo,hi=(int(ipaddress.ip_address(x)) for x in sys.argv[1:3])
sys.exit(0 if len(ips)==3 and len(set(ips))==3 and all(lo<=int(ipaddress.ip_address(i))<=hi for i in ips) else 1)' "$RANGE_LO" "$RANGE_HI"
}
check "3 distinct addresses from the pool's range" 0 '' -- in_range
echo "# claimed: $(claimed | tr '\n' ',')"
check "the pool counts them: 50 total, 3 used, 47 free" 0 '' -- within 20 pool_counts_are 50 3 47
conds_true() {
  mm_json | $PY -c 'import json,sys
ok=0
for m in json.load(sys.stdin)["items"]:
    c={x["type"]:x for x in m["status"].get("conditions",[])}
    cp="cluster.x-k8s.io/control-plane" in m["metadata"].get("labels",{})
    if cp and c.get("IPAddressClaimed",{}).get("status")=="True": ok+=1
    if not cp and "IPAddressClaimed" in c: ok-=10
sys.exit(0 if ok==3 else 1)'
}
check "the control planes say IPAddressClaimed True, the workers carry no such condition" 0 '' -- conds_true
check "an IPAddressClaimed event names each claimed address" 0 '' -- bash -c "
  msgs=\$(kubectl --kubeconfig '$STACK_KUBECONFIG' get events --field-selector reason=IPAddressClaimed -o jsonpath='{.items[*].message}')
  for ip in $(claimed_ips); do grep -q \"\$ip \" <<<\"\$msgs\" || exit 1; done"

# each control plane's MAAS interface holds its address as a STATIC link; no worker has one
mm_of_claim() { k get ipaddressclaim "$1" -o jsonpath='{.metadata.ownerReferences[0].name}'; }
links_match() {
  local want="" c ip sid
  while read -r c ip; do
    sid=$(k get maasmachine "$(mm_of_claim "$c")" -o jsonpath='{.spec.systemID}')
    want+="$sid $ip"$'\n'
  done < <(claimed)
  [ "$(static_links)" = "$(sort <<<"${want%$'\n'}")" ]
}
check "MAAS holds each claimed address as a STATIC link on its control plane, and no other" 0 '' -- \
  within 20 links_match
addresses_hold() {
  local c ip
  while read -r c ip; do
    k get maasmachine "$(mm_of_claim "$c")" -o jsonpath='{.status.addresses[*].address}' | grep -qw "$ip" || return 1
  done < <(claimed)
}
check "each control plane's status.addresses holds its claimed address" 0 '' -- addresses_hold
record_is_claimed() { [ "$(record_ips)" = "$(claimed_ips)" ]; }
check "the endpoint record holds exactly the 3 claimed addresses" 0 '' -- within 30 record_is_claimed

# a MachineDeployment whose template names a pool that does not exist: its MaasMachine
# waits with a condition naming the pool, and MAAS is not asked for a machine
USED=$(in_use)
cat >"$KS_WORK/nopool.yaml" <<YAML
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: MaasMachineTemplate
metadata:
  name: demo-nopool
  namespace: default
spec:
  template:
    spec:
      image: u-2204-0-k-1264-0
      minCPU: 2
      minMemory: 4096
      resourcePool: capi
      addressesFromPools:
        - apiGroup: ipam.cluster.x-k8s.io
          kind: InClusterIPPool
          name: nosuch
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata:
  name: demo-nopool
  namespace: default
spec:
  clusterName: demo
  replicas: 1
  selector:
    matchLabels:
      cluster.x-k8s.io/cluster-name: demo
  template:
    metadata:
      labels:
        cluster.x-k8s.io/cluster-name: demo
    spec:
      clusterName: demo
      version: v1.26.4
      bootstrap:
        configRef:
          apiGroup: bootstrap.cluster.x-k8s.io
          kind: KubeadmConfigTemplate
          name: demo-md-0
      infrastructureRef:
        apiGroup: infrastructure.cluster.x-k8s.io
        kind: MaasMachineTemplate
        name: demo-nopool
YAML
check "a MachineDeployment whose template names a missing pool is accepted" 0 'created' -- \
  k apply -f "$KS_WORK/nopool.yaml"
nopool_cond() {
  mm_json | $PY -c 'import json,sys
for m in json.load(sys.stdin)["items"]:
    if m["metadata"]["name"].startswith("demo-nopool"):
        for c in m.get("status",{}).get("conditions",[]):
            if c["type"]=="IPAddressClaimed" and c["status"]=="False" and "nosuch" in c.get("message",""):
                print(c["reason"]+": "+c["message"]); sys.exit(0)
sys.exit(1)'
}
check "its MaasMachine says the claim is not answered, naming the pool" 0 '' -- \
  within 30 nopool_cond
echo "# $(nopool_cond)"
check "MAAS was not asked for a machine for it" 0 '' -- in_use_is "$USED"
check "the MachineDeployment is deleted" 0 'deleted' -- k delete machinedeployment demo-nopool
nopool_gone() { ! mm_json | grep -q demo-nopool && [ "$(n_claims)" -eq 3 ]; }
check "its MaasMachine and claim go" 0 '' -- within 60 nopool_gone

# scale the control plane down: the addresses of the removed ones go back to the pool after
# their machines were released; MAAS holds no STATIC link for them
check "the control plane scales 3 -> 1" 0 'patched' -- \
  k patch kubeadmcontrolplane demo-control-plane --type merge -p '{"spec":{"replicas":1}}'
check "3 MaasMachines remain, all Ready" 0 '' -- within 90 n_ready_is 3
check "one claim and one IPAddress remain" 0 '' -- within 30 bash -c \
  "[ \$(kubectl --kubeconfig '$STACK_KUBECONFIG' get ipaddressclaims -o name | wc -l) -eq 1 ] && [ \$(kubectl --kubeconfig '$STACK_KUBECONFIG' get ipaddresses -o name | wc -l) -eq 1 ]"
check "the pool has 49 free again" 0 '' -- within 20 pool_counts_are 50 1 49
check "MAAS holds one STATIC link, the remaining control plane's" 0 '' -- within 20 links_match
check "the endpoint record holds just that address" 0 '' -- within 30 record_is_claimed
check "MAAS holds exactly 3 machines" 0 '' -- within 30 in_use_is 3

check "the cluster is deleted" 0 'deleted' -- k delete cluster demo --wait=false
gone() {
  [ "$(k get maasmachines,maasclusters,ipaddressclaims,ipaddresses -A -o name 2>/dev/null | wc -l)" -eq 0 ]
}
check "no Maas object, claim or IPAddress is left" 0 '' -- within 90 gone
check "every machine is Ready in MAAS again" 0 '' -- within 30 in_use_is 0
check "MAAS holds no STATIC link" 0 '^0$' -- n_static_links
check "the pool is whole again" 0 '' -- within 20 pool_counts_are 50 0 50
# the scrape (TokenReview, SubjectAccessReview) is part of what the RBAC grants
check "capmaas serves its metrics to the scraper" 0 'capmaas_maas_requests_total' -- stack_metrics
k get --raw /_sim/requests >"$KS_WORK/access.json"
check "RBAC grants exactly what capmaas called, every IPAM verb used" 0 ' 0 findings$' -- \
  $PY "$SRC/tests/scripts/rbac_check.py" --ipam "$STACK_DIR/infrastructure-components.yaml" "$KS_WORK/access.json"
check "capmaas logged no sanitizer report" 1 '' -- grep -Eq 'runtime error|AddressSanitizer|ThreadSanitizer' \
  "$STACK_DIR/capmaas.log" "$STACK_DIR"/capi-sim*.log
stack_down
echo "$KS_PASS passed, $KS_FAIL failed"
[ "$KS_FAIL" -eq 0 ]
