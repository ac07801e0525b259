#!/usr/bin/env bash
# End to end, a VIP endpoint (issue 26, docs/endpoints.md) on the local stack with the sample
# inventory: the release's kube-vip flavor with CONTROL_PLANE_ENDPOINT_IP 10.20.0.11, the
# address MAAS would give the first control-plane machine it deploys (eccapw's, in the
# inventory). capmaas reserves it in MAAS as capmaas's user before any machine deploys; the
# cluster (3 control planes, 2 workers) goes Ready with the VIP as its endpoint and no MAAS
# DNS record but the reservation's ownership record (capmaas-vip-<MaasCluster UID>); a poller sees no machine ever holding the VIP; the webhooks deny a VIP in a
# dynamic range and a change of the endpoint type, naming the field; deleting the cluster
# releases the reservation and every machine, and leaves nothing in MAAS. Every call capmaas
# made is granted by its RBAC.
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
STACK_CAPMAAS_ARGS="--machine-refresh-interval 2s --maas-inventory-interval 2s"
STACK_FLAVOR=cluster-template-kube-vip.yaml
trap 'kill "${POLL_PID:-}" 2>/dev/null; stack_down; ks_cleanup' EXIT
PY=/usr/bin/python3
VIP=10.20.0.11

maas_state() { stack_maas GET state; }
mm_ready_is() {
  k get maasmachines -o json | $PY -c 'import json,sys
i=json.load(sys.stdin)["items"]
sys.exit(0 if len(i)==int(sys.argv[1]) and all(x.get("status",{}).get("ready") for x in i) else 1)' "$1"
}
# "ip owner" of each reservation, sorted
reservations() {
  maas_state | $PY -c 'import json,sys
print("\n".join(sorted("%s %s" % (r["ip"], r["owner"]) for r in json.load(sys.stdin)["reservations"])))'
}
# MAAS DNS records other than the VIP's ownership record (capmaas-vip-<MaasCluster UID>)
n_records() { maas_state | $PY -c 'import json,sys; print(sum(1 for r in json.load(sys.stdin)["dnsresources"] if not r["fqdn"].startswith("capmaas-vip-")))'; }
n_all_records() { maas_state | $PY -c 'import json,sys; print(len(json.load(sys.stdin)["dnsresources"]))'; }
# the addresses of the ownership record of MaasCluster demo
proof_ips() {
  local uid
  uid=$(k get maascluster demo -o jsonpath='{.metadata.uid}') || return 1
  maas_state | $PY -c 'import json,sys
print(" ".join(i for r in json.load(sys.stdin)["dnsresources"] if r["fqdn"].split(".")[0] == "capmaas-vip-" + sys.argv[1] for i in r["ips"]))' "$uid"
}
in_use() {
  maas_state | $PY -c 'import json,sys; print(sum(1 for m in json.load(sys.stdin)["machines"] if m["status_name"] != "Ready"))'
}
in_use_is() { [ "$(in_use)" -eq "$1" ]; }
# the user capmaas's requests are signed as (maas-sim's request log)
capmaas_user() {
  stack_maas GET requests | $PY -c 'import json,sys
u={r["user"] for r in json.load(sys.stdin)["requests"] if r.get("op")=="reserve"}
print(" ".join(sorted(u)))'
}

count_op() { # OP PATH-PART: maas-sim's logged requests with that op on that path
  stack_maas GET requests | $PY -c 'import json,sys
print(sum(1 for r in json.load(sys.stdin)["requests"] if r.get("op")==sys.argv[1] and sys.argv[2] in r["path"]))' "$1" "$2"
}
vip_released_last() {
  stack_maas GET requests | $PY -c '
import json, sys
rs = json.load(sys.stdin)["requests"]
vip = [i for i, r in enumerate(rs) if r["op"] == "release" and "ipaddresses" in r["path"]]
mach = [i for i, r in enumerate(rs) if r["op"] == "release" and "machines" in r["path"]]
print("ok" if len(vip) == 1 and mach and vip[0] > max(mach) else "vip %s machines %s" % (vip, mach))'
}

stack_up "$KS_WORK/stack" || {
  echo "not ok - the stack did not start"
  tail -n 20 "$KS_WORK"/stack/*.log
  exit 1
}
check "the stack starts" 0 '' -- true
MANIFEST=$KS_WORK/cluster.yaml
stack_render_cluster "$MANIFEST" CONTROL_PLANE_ENDPOINT_IP=$VIP CONTROL_PLANE_MACHINE_COUNT=3 \
  WORKER_MACHINE_COUNT=2 KUBE_VIP_INTERFACE=eth0 || {
  echo "not ok - the release's kube-vip flavor does not render"
  exit 1
}
check "the flavor asks for a VIP endpoint" 0 '^VIP 10.20.0.11$' -- $PY -c '
import sys, yaml
mc = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d["kind"] == "MaasCluster"][0]
print(mc["spec"]["endpoint"]["type"], mc["spec"]["endpoint"]["address"])' "$MANIFEST"

# --- admission against MAAS: a VIP in the dynamic range is denied, naming the field -----------
BAD=$KS_WORK/bad.yaml
cat >"$BAD" <<'YAML'
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: MaasCluster
metadata:
  name: dhcp-vip
  namespace: default
spec:
  dnsDomain: maas
  endpoint:
    type: VIP
    address: 10.20.0.233
YAML
inventory_loaded() { grep -q 'MAAS inventory refreshed' "$STACK_DIR/capmaas.log"; }
wait_until 30 inventory_loaded
check "a VIP inside a dynamic range is denied, naming spec.endpoint.address" 1 \
  'spec.endpoint.address: Invalid value: "10.20.0.233": is inside the dynamic \(DHCP\) range' -- \
  k apply -f "$BAD"

# no machine may ever hold the VIP: every machine's addresses, polled from the apply on
(while :; do maas_state | $PY -c 'import json,sys
for m in json.load(sys.stdin)["machines"]:
    for ip in m.get("ip_addresses") or []:
        print(m["system_id"], ip)' >>"$KS_WORK/ips.log" 2>/dev/null; sleep 0.2; done) &
POLL_PID=$!
check "the rendered cluster is accepted by the webhooks" 0 'maascluster' -- k apply -f "$MANIFEST"
T0=$(date +%s)
all_ready() { mm_ready_is 5 && cluster_ready; }
check "5 MaasMachines Ready and the cluster Ready" 0 '' -- wait_until 180 all_ready
echo "# cluster Ready after $(($(date +%s) - T0)) s"
check "the endpoint is the VIP" 0 "^$VIP:6443\$" -- \
  k get maascluster demo -o jsonpath='{.spec.controlPlaneEndpoint.host}:{.spec.controlPlaneEndpoint.port}'
check "capi-sim copied it into the Cluster" 0 "^$VIP\$" -- \
  k get cluster demo -o jsonpath='{.spec.controlPlaneEndpoint.host}'
check "LoadBalancerReady says the VIP is reserved" 0 "^True VIP $VIP reserved in MAAS\$" -- \
  k get maascluster demo -o jsonpath='{.status.conditions[?(@.type=="LoadBalancerReady")].status} {.status.conditions[?(@.type=="LoadBalancerReady")].message}'
check "APIServerAvailable True through the endpoint" 0 '^True$' -- \
  k get maascluster demo -o jsonpath='{.status.conditions[?(@.type=="APIServerAvailable")].status}'
USER=$(capmaas_user)
check "maas-sim holds the reservation for capmaas's MAAS user ($USER), and only it" 0 \
  "^$VIP $USER\$" -- reservations
check "capmaas reserved it once" 0 '^1$' -- count_op reserve ipaddresses
check "no MAAS DNS record was made for the endpoint" 0 '^0$' -- n_records
check "the reservation carries this cluster's ownership record" 0 "^$VIP\$" -- proof_ips
no_dns_wait() { ! k get maasmachines -o json | grep -q DNSAttachPending; }
check "the control planes wait for no DNS record" 0 '' -- no_dns_wait
echo "# eccapw (whose inventory address is the VIP) deployed with: $(grep '^eccapw ' "$KS_WORK/ips.log" | sort -u | cut -d' ' -f2 | tr '\n' ' ')"
sleep 1
kill "$POLL_PID" 2>/dev/null
wait "$POLL_PID" 2>/dev/null
POLL_PID=
check "no machine ever held the VIP ($(wc -l <"$KS_WORK/ips.log") address samples)" 1 '' -- \
  grep -q " $VIP\$" "$KS_WORK/ips.log"
check "the endpoint type cannot change now, the denial names the field" 1 \
  'spec.endpoint.type: Invalid value: "DNS": field is immutable once the cluster has an endpoint' -- \
  k patch maascluster demo --type merge -p '{"spec":{"endpoint":{"type":"DNS"}}}'

# --- delete: machines first, then the reservation ---------------------------------------------
check "the cluster is deleted" 0 'deleted' -- k delete cluster demo --wait=false
gone() { [ "$(k get maasmachines,maasclusters -A -o name 2>/dev/null | wc -l)" -eq 0 ]; }
check "no Maas object is left" 0 '' -- wait_until 90 gone
check "every machine is Ready in MAAS again" 0 '' -- wait_until 30 in_use_is 0
check "the reservation is released" 0 '^$' -- reservations
check "and no DNS record is left (the ownership record went with the release)" 0 '^0$' -- \
  n_all_records
check "capmaas released the VIP once, after the last machine" 0 '^ok$' -- vip_released_last

stack_kubectl get --raw /_sim/requests >"$KS_WORK/access.json"
check "RBAC grants every call capmaas made" 0 ' 0 findings$' -- \
  $PY "$SRC/tests/scripts/rbac_check.py" --granted-only "$STACK_DIR/infrastructure-components.yaml" "$KS_WORK/access.json"
check "capmaas logged no sanitizer report" 1 '' -- grep -Eq 'runtime error|AddressSanitizer' \
  "$STACK_DIR/capmaas.log"
stack_down
echo "$KS_PASS passed, $KS_FAIL failed"
[ "$KS_FAIL" -eq 0 ]
