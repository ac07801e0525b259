#!/usr/bin/env bash
# In-place upgrade from the reference provider (issue 17, item 2) on the local simulated
# stack. A management cluster as the reference v0.7 left it: its CRDs (status.failureDomains
# a map, v1beta1 conditions with severity), a Ready cluster "legacy" (Cluster API v1beta1:
# Cluster, 3 Machines, kubeconfig and bootstrap Secrets) with its MaasCluster, MaasMachines
# and MaasMachineTemplate exactly as the reference writes them (tests/fixtures/reference:
# spec.systemID and providerID, the reference's finalizers and annotations), the workload
# Nodes with their providerIDs, the machines Deployed in MAAS and allocated to the provider's
# user, and the endpoint record under the name the reference gave it. Then the upgrade, as
# clusterctl does it: our release's CRDs, Secret and webhook configurations replace the
# reference's, and capmaas starts. Expected:
#   - capmaas reaches Ready for the cluster and every machine without a single MAAS write;
#   - the next status write migrated every object (failureDomains a list, no severity, a
#     reason on every condition);
#   - capmaas keeps the reference's record (its name, its IP), creates no second one;
#   - while the new webhooks serve and before the new controllers run (a rolling upgrade),
#     an update that only removes a finalizer from an object in the reference's shapes is
#     admitted, and so is a metadata-only update of the reference's template, whose spec
#     the defaults would change; a real spec change is still judged;
#   - after the takeover, deleting a worker releases exactly its machine, and deleting the
#     cluster releases the rest and deletes the reference's record.
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
ks_need kubectl curl
SRC=${CAPMAAS_SOURCE_DIR:?CAPMAAS_SOURCE_DIR is not set}
BUILD=${CAPMAAS_BUILD_DIR:?CAPMAAS_BUILD_DIR is not set}
PY=/usr/bin/python3
STACK_DIR=$KS_WORK/stack
STACK_CAPI_CONTRACT=v1beta1 # the reference v0.7 ran with Cluster API 1.9
STACK_DEPLOY_SECONDS=0.5
STACK_RELEASE_SECONDS=0.3
STACK_CAPMAAS_ARGS="--machine-refresh-interval 2s --maas-inventory-interval 1h"
trap 'stack_down; ks_cleanup' EXIT
RECORD=legacy-9e41c7.maas # the reference's <cluster>-<6 random hex>.<dnsDomain>
FIX=$SRC/tests/fixtures/reference

# --- the management cluster the reference left ------------------------------------------
# The three machines of the cluster are Deployed and powered on, allocated to the API key's
# user (admin).
$PY - "$SRC/tests/sim/maas/inventory-sample.yaml" "$KS_WORK/inventory.yaml" <<'PY'
import sys, yaml
inv = yaml.safe_load(open(sys.argv[1]))
for m in inv["machines"]:
    if m["system_id"] in ("eccapw", "hkd3ps", "9k54bh"):
        m.update(status="Deployed", owner="admin", power_state="on")
yaml.safe_dump(inv, open(sys.argv[2], "w"))
PY
mkdir -p "$STACK_DIR"
bash "$SRC/certs/gen-dev-certs.sh" "$STACK_DIR/certs" >/dev/null 2>&1 || {
  echo "not ok - cannot make certificates"
  exit 1
}
stack_reserve_port STACK_WEBHOOK_PORT || exit 1
stack_reserve_port STACK_HEALTH_PORT || exit 1
stack_reserve_port STACK_METRICS_PORT || exit 1
stack_start_sim kube-sim --port 0 --dir "$STACK_DIR/mgmt" \
  --service-override "$STACK_WEBHOOK_SERVICE=127.0.0.1:$STACK_WEBHOOK_PORT" || exit 1
STACK_KUBECONFIG=$STACK_DIR/mgmt/kubeconfig
stack_start_sim kube-sim --port 0 --dir "$STACK_DIR/workload" || exit 1
STACK_WORKLOAD_KUBECONFIG=$STACK_DIR/workload/kubeconfig
stack_start_sim maas-sim --port 0 --inventory "$KS_WORK/inventory.yaml" --api-key "$STACK_KEY" \
  --deploy-seconds "$STACK_DEPLOY_SECONDS" --release-seconds "$STACK_RELEASE_SECONDS" || exit 1
STACK_MAAS_URL=$REPLY
check "the simulators start" 0 '' -- true
WK() { kubectl --kubeconfig "$STACK_WORKLOAD_KUBECONFIG" --cache-dir "$STACK_DIR/wcache" "$@"; }

# The reference's CRDs, as far as the shapes go: ours with status.failureDomains a map of
# {controlPlane, attributes} and conditions that carry severity (and need no reason).
reference_crds() {
  $PY - "$SRC/config/crd/bases" <<'PY'
import glob, sys, yaml
out = []
for f in sorted(glob.glob(sys.argv[1] + "/*.yaml")):
    crd = yaml.safe_load(open(f))
    for v in crd["spec"]["versions"]:
        st = v["schema"]["openAPIV3Schema"]["properties"].get("status", {}).get("properties", {})
        if "failureDomains" in st:
            st["failureDomains"] = {"type": "object", "additionalProperties": {
                "type": "object", "properties": {
                    "controlPlane": {"type": "boolean"},
                    "attributes": {"type": "object", "additionalProperties": {"type": "string"}}}}}
        if "conditions" in st:
            item = st["conditions"]["items"]
            item["properties"]["severity"] = {"type": "string"}
            item["required"] = ["lastTransitionTime", "status", "type"]
    out.append(crd)
yaml.safe_dump_all(out, sys.stdout)
PY
}
install_reference_crds() { reference_crds | stack_kubectl create -f -; }
install_capi() { bash "$SRC/tests/sim/capi/crds.sh" v1beta1 | stack_kubectl apply -f - >/dev/null; }
check "the reference's CRDs are installed" 0 'created' -- install_reference_crds
check "Cluster API v1beta1 is installed" 0 '' -- install_capi

# The reference's record: created before the upgrade, holding the control plane's IP.
maas_api() { # METHOD PATH [curl args]: the MAAS API with the stack's key (PLAINTEXT OAuth)
  local m=$1 p=$2
  shift 2
  curl -sS --max-time 10 -X "$m" "$STACK_MAAS_URL/api/2.0/$p" -H "Authorization: OAuth \
oauth_nonce=\"$RANDOM$RANDOM\", oauth_signature=\"%26secret\", oauth_consumer_key=\"capmaas\", \
oauth_token=\"demo\", oauth_signature_method=\"PLAINTEXT\", oauth_timestamp=\"$(date +%s)\", \
oauth_version=\"1.0\"" "$@"
}
check "the reference's DNS record exists in MAAS" 0 "$RECORD" -- maas_api POST dnsresources/ \
  --data-urlencode "fqdn=$RECORD" --data-urlencode "ip_addresses=10.20.0.11" \
  --data-urlencode "address_ttl=10"

# The objects, from the reference's fixtures. Owners first (ownerReferences carry the
# owners' uids), statuses through /status as the reference's controllers wrote them.
load_objects() {
  $PY - "$FIX" "$STACK_KUBECONFIG" "$STACK_WORKLOAD_KUBECONFIG" "$STACK_DIR/kcache" <<'PY'
import base64, copy, json, subprocess, sys
fix, kc, wkc, cache = sys.argv[1:]
def k(*args, stdin=None, cfg=kc):
    r = subprocess.run(["kubectl", "--kubeconfig", cfg, "--cache-dir", cache] + list(args),
                       input=stdin, capture_output=True, text=True)
    if r.returncode:
        sys.exit("kubectl %s: %s" % (" ".join(args[:3]), r.stderr))
    return r.stdout
def create(obj, cfg=kc):
    status = obj.pop("status", None)
    for f in ("uid", "resourceVersion", "generation", "creationTimestamp"):
        obj["metadata"].pop(f, None)
    k("create", "-f", "-", stdin=json.dumps(obj), cfg=cfg)
    if status is not None:
        kind = obj["kind"].lower()
        k("patch", kind, obj["metadata"]["name"], "--subresource=status", "--type=merge",
          "-p", json.dumps({"status": status}), cfg=cfg)
    return json.loads(k("get", obj["kind"].lower(), obj["metadata"]["name"], "-o", "json", cfg=cfg))
ref = lambda o, ctl: {"apiVersion": o["apiVersion"], "kind": o["kind"], "name": o["metadata"]["name"],
                      "uid": o["metadata"]["uid"], **({"controller": True, "blockOwnerDeletion": True} if ctl else {})}
load = lambda n: json.load(open("%s/%s" % (fix, n)))
mc0, mm0, mt0 = load("v0.7-maascluster.json"), load("v0.7-maasmachine.json"), load("v0.7-maasmachinetemplate.json")
CAPI = "cluster.x-k8s.io/v1beta1"
INFRA = "infrastructure.cluster.x-k8s.io/v1beta1"
record = mc0["status"]["network"]["dnsName"]
wl = open(wkc).read()
k("create", "secret", "generic", "legacy-kubeconfig", "--type=cluster.x-k8s.io/secret",
  "--from-literal=value=" + wl)
k("label", "secret", "legacy-kubeconfig", "cluster.x-k8s.io/cluster-name=legacy")
cluster = create({"apiVersion": CAPI, "kind": "Cluster",
    "metadata": {"name": "legacy", "namespace": "default"},
    "spec": {"controlPlaneEndpoint": {"host": record, "port": 6443},
             "infrastructureRef": {"apiVersion": INFRA, "kind": "MaasCluster", "name": "legacy",
                                   "namespace": "default"}},
    "status": {"phase": "Provisioned", "infrastructureReady": True, "controlPlaneReady": True,
               "conditions": [{"type": "Ready", "status": "True",
                               "lastTransitionTime": "2026-06-10T08:05:00Z"},
                              {"type": "ControlPlaneInitialized", "status": "True",
                               "lastTransitionTime": "2026-06-10T08:04:30Z"}]}})
# name, system id, zone, hostname, IP, control plane
machines = [("legacy-cp-x7k2p", "eccapw", "az2", "bold-ant", "10.20.0.11", True),
            ("legacy-md-0-hk2vq", "hkd3ps", "az1", "calm-cod", "10.20.0.10", False),
            ("legacy-md-0-m9zt4", "9k54bh", "az3", "keen-gnu", "10.20.0.12", False)]
mc = copy.deepcopy(mc0)
mc["metadata"]["ownerReferences"] = [ref(cluster, True)]
create(mc)
mt = copy.deepcopy(mt0)
mt["metadata"]["ownerReferences"] = [ref(cluster, False)]
create(mt)
for name, sid, zone, host, ip, cp in machines:
    labels = {"cluster.x-k8s.io/cluster-name": "legacy"}
    if cp:
        labels.update({"cluster.x-k8s.io/control-plane": "", "cluster.x-k8s.io/control-plane-name": "legacy-cp"})
    else:
        labels["cluster.x-k8s.io/deployment-name"] = "legacy-md-0"
    pid = "maas:///%s/%s" % (zone, sid)
    k("create", "secret", "generic", name, "--type=cluster.x-k8s.io/secret",
      "--from-literal=value=#cloud-config", "--from-literal=format=cloud-config")
    machine = create({"apiVersion": CAPI, "kind": "Machine",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"clusterName": "legacy", "version": "v1.26.4", "providerID": pid,
                 "failureDomain": zone, "bootstrap": {"dataSecretName": name},
                 "infrastructureRef": {"apiVersion": INFRA, "kind": "MaasMachine", "name": name,
                                       "namespace": "default"}},
        "status": {"phase": "Running", "bootstrapReady": True, "infrastructureReady": True,
                   "nodeRef": {"apiVersion": "v1", "kind": "Node", "name": host},
                   "addresses": [{"type": "ExternalIP", "address": ip}]}})
    mm = copy.deepcopy(mm0)
    mm["metadata"].update(name=name, labels=labels, ownerReferences=[ref(machine, True)])
    mm["spec"].update(failureDomain=zone, systemID=sid, providerID=pid)
    st = mm["status"]
    st["hostname"] = host
    st["addresses"] = [{"type": "ExternalDNS", "address": host + ".maas"},
                       {"type": "InternalDNS", "address": host + ".maas"},
                       {"type": "ExternalIP", "address": ip}, {"type": "InternalIP", "address": ip}]
    if not cp:
        st.pop("dnsAttached")
        st["conditions"] = [c for c in st["conditions"] if c["type"] != "DNSAttached"]
    create(mm)
    create({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": host, "labels": {"topology.kubernetes.io/zone": zone}},
            "spec": {"providerID": pid}}, cfg=wkc)
# A MaasCluster of no Cluster (its owner is long gone): nothing reconciles it, so it stays in
# the reference's shape for the finalizer test.
orphan = copy.deepcopy(mc0)
orphan["metadata"].update(name="legacy-orphan", labels={})
del orphan["metadata"]["ownerReferences"]
del orphan["status"]["network"]
create(orphan)
print("loaded %d MaasMachines" % len(machines))
PY
}
check "the reference's objects are loaded" 0 'loaded 3 MaasMachines' -- load_objects
fd_shape() { # NAME: the JSON type of a MaasCluster's status.failureDomains
  stack_kubectl get maascluster "$1" -o json |
    $PY -c 'import json,sys; print(type(json.load(sys.stdin)["status"].get("failureDomains")).__name__)'
}
check "they are stored in the reference's shapes" 0 '^dict$' -- fd_shape legacy

# --- the upgrade ------------------------------------------------------------------------
stack_install >"$KS_WORK/install.log" 2>&1
check "the release replaces the reference's CRDs, Secret and webhooks" 0 '' -- test -n "$STACK_MAAS_ENDPOINT"
check "the stored objects are still in the reference's shapes" 0 '^dict$' -- fd_shape legacy
# --- the new webhooks serve before the new controllers lead (as in a rolling upgrade) -----
# Updates of objects still in the reference's shapes: kube-sim ratchets its CRD validation
# as kube-apiserver 1.30+ does (the stored status is not validated again), so what decides
# is the webhook.
"$BUILD/capmaas" --webhooks-only --webhook-port "$STACK_WEBHOOK_PORT" --webhook-host 127.0.0.1 \
  --webhook-cert-dir "$STACK_DIR/certs" --health-addr "127.0.0.1:$STACK_HEALTH_PORT" \
  --metrics-bind-addr "127.0.0.1:$STACK_METRICS_PORT" 2>"$STACK_DIR/webhooks-only.log" &
CM_PID=$!
CM_LOG=$STACK_DIR/webhooks-only.log
webhooks_ready() { curl -fsS "http://127.0.0.1:$STACK_HEALTH_PORT/readyz" >/dev/null; }
check "capmaas serves the webhooks (--webhooks-only)" 0 '' -- wait_until 20 webhooks_ready
check "the MaasCluster of no Cluster is in the reference's shape" 0 '^dict$' -- fd_shape legacy-orphan
check "an update that only removes its finalizer is admitted" 0 'patched' -- stack_kubectl patch \
  maascluster legacy-orphan --type=json -p '[{"op":"remove","path":"/metadata/finalizers/0"}]'
check "and it can then be deleted" 0 'deleted' -- stack_kubectl delete maascluster legacy-orphan \
  --timeout=20s
check "a label on the reference's template (duplicate tags) is admitted" 0 'labeled' -- \
  stack_kubectl label maasmachinetemplate legacy-cp team=infra
check "its spec is left as the reference wrote it" 0 '^\["ssd","ssd"\]$' -- stack_kubectl get \
  maasmachinetemplate legacy-cp -o jsonpath='{.spec.template.spec.tags}'
check "a real spec change of a reference object is still judged" 1 \
  'min cpu count change is not allowed, old=4, new=8' -- \
  stack_kubectl patch maasmachine legacy-md-0-hk2vq --type=merge -p '{"spec":{"minCPU":8}}'
ks_capmaas_stop

# --- the new controllers take over ---------------------------------------------------------
stack_maas POST reset-log >/dev/null
stack_capmaas_start
check "capmaas starts" 0 '' -- kill -0 "$STACK_CAPMAAS_PID"

mm_json() { stack_kubectl get maasmachines -o json; }
all_ready() {
  [ "$(stack_kubectl get maascluster legacy -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ] &&
    mm_json | $PY -c '
import json, sys
items = json.load(sys.stdin)["items"]
ok = len(items) == 3 and all(i["status"].get("ready") and any(c["type"] == "Ready" and c["status"] == "True"
    and c.get("observedGeneration") is not None for c in i["status"].get("conditions", [])) for i in items)
sys.exit(0 if ok else 1)'
}
check "the cluster and its 3 machines are Ready under capmaas" 0 '' -- wait_until 60 all_ready
migrated() {
  stack_kubectl get maascluster legacy -o json >"$KS_WORK/mc.json" && mm_json >"$KS_WORK/mm.json" &&
    $PY - "$KS_WORK/mc.json" "$KS_WORK/mm.json" <<'PY'
import json, sys
mc = json.load(open(sys.argv[1]))
objs = [mc] + json.load(open(sys.argv[2]))["items"]
conds = [c for o in objs for c in o["status"].get("conditions", [])]
fd = mc["status"].get("failureDomains")
ok = fd == [{"name": "az1", "controlPlane": True}, {"name": "az2", "controlPlane": True}]
ok = ok and all(c.get("reason") and "severity" not in c for c in conds)
ok = ok and all(o["status"].get("initialization", {}).get("provisioned") is True for o in objs)
print("failureDomains", json.dumps(fd), "conditions", len(conds))
sys.exit(0 if ok else 1)
PY
}
wait_until 20 migrated
check "the status writes migrated every object to the current shapes" 0 'failureDomains \[' -- migrated
kept() {
  mm_json | $PY -c '
import json, sys
items = json.load(sys.stdin)["items"]
print(sum(i["metadata"].get("finalizers") == ["maasmachine.infrastructure.cluster.x-k8s.io"] and
          "cluster.x-k8s.io/cloned-from-name" in i["metadata"].get("annotations", {}) for i in items))'
}
check "their finalizers and the reference's annotations are kept" 0 '^3$' -- kept

maas_writes() { # the non-GET MAAS requests since capmaas started, one per line
  stack_maas GET requests | $PY -c '
import json, sys
for r in json.load(sys.stdin)["requests"]:
    if r["method"] != "GET":
        print(r["method"], r["path"], r["op"])'
}
# steady: no MAAS write for two refresh intervals
settled() { sleep 4 && [ -z "$(maas_writes)" ]; }
wait_until 10 settled
check "the takeover made no MAAS write (no allocate, deploy, release, power or DNS change)" 0 '^$' -- maas_writes
record() { # "<n records> <IPs of $RECORD>"
  stack_maas GET state | $PY -c "
import json, sys
d = json.load(sys.stdin)['dnsresources']
print(len(d), ' '.join(' '.join(sorted(r['ips'])) for r in d if r['fqdn'] == '$RECORD'))"
}
check "capmaas keeps the reference's record, with its IP, and adds none" 0 '^1 10\.20\.0\.11$' -- record
check "the endpoint is still the reference's record" 0 "^$RECORD:6443\$" -- stack_kubectl get \
  maascluster legacy -o jsonpath='{.spec.controlPlaneEndpoint.host}:{.spec.controlPlaneEndpoint.port}'
node_ids() { WK get nodes -o jsonpath='{range .items[*]}{.spec.providerID} {end}'; }
check "the Nodes keep their providerIDs" 0 'maas:///az2/eccapw' -- node_ids

# --- after the takeover, capmaas owns the machines and the record --------------------------
state_of() { # SYSTEM_ID: its MAAS status_name
  stack_maas GET state | $PY -c "import json,sys; print([m['status_name'] for m in json.load(sys.stdin)['machines'] if m['system_id'] == '$1'][0])"
}
check "deleting a worker is admitted" 0 'deleted' -- stack_kubectl delete maasmachine \
  legacy-md-0-m9zt4 --wait=false
mm_gone() { ! stack_kubectl get maasmachine "$1" >/dev/null 2>&1; }
check "its MaasMachine goes" 0 '' -- wait_until 30 mm_gone legacy-md-0-m9zt4
check "its machine, and only it, was released" 0 '^POST /MAAS/api/2.0/machines/9k54bh/ release$' -- maas_writes
released() { [ "$(state_of 9k54bh)" = Ready ]; }
check "and is Ready in MAAS again" 0 '' -- wait_until 10 released
check "the cluster's MaasMachines and MaasCluster are deleted" 0 'deleted' -- \
  stack_kubectl delete maasmachines,maasclusters --all --wait=false
gone() { [ "$(stack_kubectl get maasmachines,maasclusters -o name 2>/dev/null | wc -l)" -eq 0 ]; }
check "no Maas object is left" 0 '' -- wait_until 60 gone
in_use() { stack_maas GET state | $PY -c 'import json,sys; print(sum(1 for m in json.load(sys.stdin)["machines"] if m["status_name"] != "Ready"))'; }
none_in_use() { [ "$(in_use)" -eq 0 ]; }
check "every machine is back in MAAS" 0 '' -- wait_until 20 none_in_use
check "the reference's record is deleted with the cluster" 0 '^0 $' -- record
check "capmaas logged no sanitizer report" 1 '' -- grep -Eq 'runtime error|AddressSanitizer' \
  "$STACK_DIR/capmaas.log"
stack_down
echo "$KS_PASS passed, $KS_FAIL failed"
[ "$KS_FAIL" -eq 0 ]
