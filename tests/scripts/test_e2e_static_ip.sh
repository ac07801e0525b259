#!/usr/bin/env bash
# End to end on the local stack (issue 19): spec.staticIP in MAAS.
#   1. A cluster "demo" (1 control plane with spec.staticIP 10.20.0.200 on maas-sim's
#      provisioning subnet, 1 worker on MAAS's automatic address) goes Ready: the control
#      plane is Deployed on 10.20.0.200 (its MAAS interface shows the STATIC link, the AUTO
#      one gone), status.addresses and the API endpoint's DNS record hold it, StaticIPApplied
#      is True; the worker keeps its AUTO link.
#   2. A cluster "dup" whose control plane asks for the worker's address (held by that
#      deployed machine): StaticIPApplied False/StaticIPFailed with MAAS's "IP address is
#      already in use.", a Warning event; the machine tried goes back Ready in MAAS with its
#      AUTO link; no allocation leaks (only demo's 2 hosts held) and no allocate/release storm
#      (at most 2 allocates with its stamp in the 12 s after the first refusal: 10 s backoff).
#   3. Both clusters deleted: every host back Ready in MAAS and no STATIC link left anywhere
#      (the deployed control plane is released, then unlinked once Ready).
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
ks_need kubectl curl
SRC=${CAPMAAS_SOURCE_DIR:?CAPMAAS_SOURCE_DIR is not set}
BUILD=${CAPMAAS_BUILD_DIR:?CAPMAAS_BUILD_DIR is not set}
STACK_DEPLOY_SECONDS=0.5
STACK_RELEASE_SECONDS=0.3
STACK_CAPMAAS_ARGS="--machine-refresh-interval 2s --maas-inventory-interval 1h"
trap 'stack_down; ks_cleanup' EXIT
PY=/usr/bin/python3
STATIC=10.20.0.200

mm_json() { stack_kubectl get maasmachines -o json; }
maas_state() { stack_maas GET state; }
# "name systemID uid ready addresses condition-status condition-reason condition-message" of
# the MaasMachine whose name starts with PREFIX
mm_line() { # PREFIX
  mm_json | $PY -c '
import json, sys
for i in json.load(sys.stdin)["items"]:
    m, s = i["metadata"], i.get("status", {})
    if not m["name"].startswith(sys.argv[1]):
        continue
    c = {x["type"]: x for x in s.get("conditions", [])}.get("StaticIPApplied", {})
    ips = ",".join(a["address"] for a in s.get("addresses", []) if a["type"] == "ExternalIP")
    print(m["name"], i["spec"].get("systemID", "-"), m["uid"], bool(s.get("ready")), ips or "-",
          c.get("status", "-"), c.get("reason", "-"), c.get("message", "-"), sep="|")' "$1"
}
# Renders cluster NAME with 1 control plane (its template given staticIP IP) and W workers.
render() { # NAME IP W OUT
  stack_render_cluster "$4" CLUSTER_NAME="$1" CONTROL_PLANE_MACHINE_COUNT=1 \
    WORKER_MACHINE_COUNT="$3" || return 1
  $PY - "$4" "$1" "$2" <<'PY'
import sys
path, name, ip = sys.argv[1:4]
docs = open(path).read().split("\n---\n")
for k, d in enumerate(docs):
    if "kind: MaasMachineTemplate" in d and 'name: "%s-control-plane"' % name in d:
        docs[k] = d.rstrip("\n") + (
            "\n      staticIP:\n        ip: %s\n        cidr: 10.20.0.0/24\n"
            "        gateway: 10.20.0.1\n        nameservers: [10.20.0.2]\n" % ip)
        break
else:
    sys.exit("no control-plane MaasMachineTemplate in " + path)
open(path, "w").write("\n---\n".join(docs))
PY
}
ready_count() { # N: N MaasMachines, all Ready
  mm_json | $PY -c '
import json, sys
items = json.load(sys.stdin)["items"]
sys.exit(0 if len(items) == int(sys.argv[1]) and all(i.get("status", {}).get("ready") for i in items) else 1)' "$1"
}
links_of() { # SYSTEM_ID: "mode:ip" of its links
  maas_state | $PY -c '
import json, sys
for m in json.load(sys.stdin)["machines"]:
    if m["system_id"] == sys.argv[1]:
        print(" ".join("%s:%s" % (l["mode"], l["ip_address"] or "-") for l in m["links"]))' "$1"
}
record_ips() {
  maas_state | $PY -c '
import json, sys
print(" ".join(" ".join(d["ips"]) for d in json.load(sys.stdin)["dnsresources"]))'
}
held() { # hosts not Ready in MAAS or stamped
  maas_state | $PY -c '
import json, sys
h = [m["system_id"] for m in json.load(sys.stdin)["machines"]
     if m["status_name"] != "Ready" or m.get("agent_name")]
print(len(h), " ".join(h))'
}
no_static_left() {
  maas_state | $PY -c '
import json, sys
bad = ["%s %s:%s" % (m["system_id"], l["mode"], l["ip_address"])
       for m in json.load(sys.stdin)["machines"] for l in m["links"] if l["mode"] != "auto"]
print(" ".join(bad))
sys.exit(1 if bad else 0)'
}
allocates_for() { # UID
  stack_maas GET requests | $PY -c '
import json, sys
print(sum(1 for r in json.load(sys.stdin)["requests"]
          if r.get("op") == "allocate" and r.get("agent_name") == sys.argv[1]))' "$1"
}

stack_up "$KS_WORK/stack" || {
  echo "not ok - the stack did not start"
  tail -n 20 "$KS_WORK"/stack/*.log
  exit 1
}
check "the stack starts" 0 '' -- true

# --- 1. a control plane on its static address ------------------------------------------------
DEMO=$KS_WORK/demo.yaml
render demo "$STATIC" 1 "$DEMO" || {
  echo "not ok - the cluster template does not render"
  exit 1
}
check "cluster demo (control plane with staticIP $STATIC) is applied" 0 \
  'maasmachinetemplate.infrastructure.cluster.x-k8s.io/demo-control-plane created' -- \
  stack_kubectl apply -f "$DEMO"
check "both MaasMachines Ready" 0 '' -- wait_until 120 ready_count 2
IFS='|' read -r CP_NAME CP_SID _ _ CP_IPS CP_ST CP_REASON _ < <(mm_line demo-control-plane)
check "the control plane's status.addresses hold $STATIC, StaticIPApplied True" 0 '' -- \
  test "$CP_IPS|$CP_ST|$CP_REASON" = "$STATIC|True|StaticIPApplied"
check "its MAAS interface has the STATIC link only" 0 "^static:$STATIC\$" -- links_of "$CP_SID"
check "the API endpoint's DNS record holds $STATIC" 0 "$STATIC" -- record_ips
IFS='|' read -r _ W_SID _ _ W_IP _ _ _ < <(mm_line demo-md-0)
check "the worker keeps MAAS's automatic address ($W_IP)" 0 "^auto:$W_IP\$" -- links_of "$W_SID"

# --- 2. an address another machine holds -------------------------------------------------------
DUP=$KS_WORK/dup.yaml
render dup "$W_IP" 0 "$DUP" || exit 1
stack_maas POST reset-log >/dev/null
check "cluster dup (control plane with the worker's address) is applied" 0 'created' -- \
  stack_kubectl apply -f "$DUP"
dup_failed() { mm_line dup-control-plane | grep -q '|False|StaticIPFailed|'; }
check "dup's control plane: StaticIPApplied False/StaticIPFailed" 0 '' -- wait_until 60 dup_failed
T0=$(date +%s)
IFS='|' read -r DUP_NAME _ DUP_UID _ _ _ _ DUP_MSG < <(mm_line dup-control-plane)
check "the condition names the address and MAAS's message" 0 '' -- \
  test "$DUP_MSG" = "$W_IP on the boot interface: IP address is already in use."
check "a Warning event StaticIPFailed" 0 'IP address is already in use' -- \
  stack_kubectl get events --field-selector reason=StaticIPFailed -o jsonpath='{.items[*].message}'
two_held() { held | grep -q '^2 '; }
check "no leaked allocation: only demo's 2 hosts are held" 0 '' -- wait_until 20 two_held
all_auto_but_cp() {
  maas_state | $PY -c '
import json, sys
bad = [m["system_id"] for m in json.load(sys.stdin)["machines"] if m["system_id"] != sys.argv[1]
       and [l["mode"] for l in m["links"]] != ["auto"]]
sys.exit(1 if bad else 0)' "$CP_SID"
}
check "the refused host got its AUTO link back" 0 '' -- wait_until 10 all_auto_but_cp
sleep $((T0 + 12 - $(date +%s) > 0 ? T0 + 12 - $(date +%s) : 0))
check "no allocate/release storm: at most 2 allocates with its stamp in 12 s" 0 '^[12]$' -- \
  allocates_for "$DUP_UID"

# --- 3. delete: every STATIC link comes off -------------------------------------------------------
check "both clusters are deleted" 0 'deleted' -- \
  stack_kubectl delete -f "$DUP" -f "$DEMO" --wait=false --ignore-not-found
none_left() { [ "$(mm_json | $PY -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')" = 0 ]; }
check "every MaasMachine is gone" 0 '' -- wait_until 90 none_left
none_held() { held | grep -q '^0'; }
check "every host is back Ready in MAAS" 0 '' -- wait_until 30 none_held
check "no STATIC link is left in MAAS" 0 '' -- no_static_left
check "capmaas logged no sanitizer report" 1 '' -- grep -Eq 'runtime error|AddressSanitizer|ThreadSanitizer' \
  "$STACK_DIR/capmaas.log"
stack_down
echo "$KS_PASS passed, $KS_FAIL failed"
[ "$KS_FAIL" -eq 0 ]
