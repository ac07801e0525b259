#!/usr/bin/env bash
# kube-sim against Debian's python3-kubernetes (22.6): create/list/watch/patch/replace of a
# ConfigMap and of a custom object (including the /status subresource), 409 on a stale
# resourceVersion, 404 after delete. Uses /usr/bin/python3 (the system interpreter that has
# the package), never whichever python3 comes first on PATH.
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
ks_need kubectl openssl
if ! /usr/bin/python3 -c 'import kubernetes' 2>/dev/null; then
  echo "SKIP: python3-kubernetes is not installed (apt-get install python3-kubernetes)"
  echo "0 passed, 0 failed"
  exit 0
fi
# shellcheck disable=SC2119 # no extra kube-sim flags
ks_start

cat >"$KS_WORK/crd.yaml" <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
EOF
check "CRD for the python checks" 0 'created' -- K apply -f "$KS_WORK/crd.yaml"

cat >"$KS_WORK/check.py" <<'EOF'
import sys
import threading

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from ks_proto import check, finish

config.load_kube_config(config_file=sys.argv[1])
v1 = client.CoreV1Api()
ns = "default"

cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py-cm", labels={"app": "py"}),
                        data={"a": "1"})
created = v1.create_namespaced_config_map(ns, cm)
check("create ConfigMap returns uid and resourceVersion",
      bool(created.metadata.uid) and bool(created.metadata.resource_version))
lst = v1.list_namespaced_config_map(ns, label_selector="app=py")
check("list with a label selector", [i.metadata.name for i in lst.items] == ["py-cm"])
check("list with a non-matching selector is empty",
      v1.list_namespaced_config_map(ns, label_selector="app=other").items == [])

threading.Timer(0.1, lambda: v1.patch_namespaced_config_map(
    "py-cm", ns, {"data": {"b": "2"}})).start()
events = []
w = watch.Watch()
for ev in w.stream(v1.list_namespaced_config_map, ns,
                   resource_version=lst.metadata.resource_version, timeout_seconds=10):
    events.append((ev["type"], ev["object"].metadata.name, dict(ev["object"].data or {})))
    if ev["type"] == "MODIFIED":
        w.stop()
check("watch from the list RV sees the patch",
      events[:1] == [("MODIFIED", "py-cm", {"a": "1", "b": "2"})])

try:
    v1.replace_namespaced_config_map("py-cm", ns, created)
    check("replace with a stale resourceVersion is 409", False)
except ApiException as e:
    check("replace with a stale resourceVersion is 409",
          e.status == 409 and "the object has been modified" in e.body)

cur = v1.read_namespaced_config_map("py-cm", ns)
cur.data["c"] = "3"
rep = v1.replace_namespaced_config_map("py-cm", ns, cur)
check("replace with the current resourceVersion", rep.data == {"a": "1", "b": "2", "c": "3"})
same = v1.replace_namespaced_config_map("py-cm", ns, rep)
check("no-op replace keeps the resourceVersion",
      same.metadata.resource_version == rep.metadata.resource_version)

co = client.CustomObjectsApi()
g, ver, plural = "example.com", "v1", "widgets"
body = {"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1", "labels": {"tier": "gold"}}, "spec": {"size": 1},
        "status": {"phase": "ignored"}}
obj = co.create_namespaced_custom_object(g, ver, ns, plural, body)
check("create custom object drops status (status subresource)",
      obj["spec"] == {"size": 1} and "status" not in obj and obj["metadata"]["generation"] == 1)
lst = co.list_namespaced_custom_object(g, ver, ns, plural, label_selector="tier=gold")
check("list custom objects", [i["metadata"]["name"] for i in lst["items"]] == ["w1"])

threading.Timer(0.1, lambda: co.patch_namespaced_custom_object(
    g, ver, ns, plural, "w1", {"spec": {"size": 2}})).start()
seen = []
for ev in w.stream(co.list_namespaced_custom_object, g, ver, ns, plural,
                   resource_version=lst["metadata"]["resourceVersion"], timeout_seconds=10):
    seen.append((ev["type"], ev["object"]["spec"]["size"], ev["object"]["metadata"]["generation"]))
    if ev["type"] == "MODIFIED":
        w.stop()
check("watch custom objects sees the merge patch", seen[:1] == [("MODIFIED", 2, 2)])

st = co.patch_namespaced_custom_object_status(g, ver, ns, plural, "w1",
                                              {"status": {"phase": "Ready"}})
check("status patch sets status without bumping generation",
      st["status"] == {"phase": "Ready"} and st["metadata"]["generation"] == 2)

bookmarks = []
for ev in w.stream(co.list_namespaced_custom_object, g, ver, ns, plural,
                   resource_version=st["metadata"]["resourceVersion"], timeout_seconds=1):
    bookmarks.append(ev["type"])
check("watch with nothing new ends at timeoutSeconds", bookmarks == [])

co.delete_namespaced_custom_object(g, ver, ns, plural, "w1")
try:
    co.get_namespaced_custom_object(g, ver, ns, plural, "w1")
    check("deleted custom object is 404", False)
except ApiException as e:
    check("deleted custom object is 404", e.status == 404)

v1.delete_namespaced_config_map("py-cm", ns)
check("deleted ConfigMap is gone",
      v1.list_namespaced_config_map(ns, label_selector="app=py").items == [])
finish("python")
EOF

check "python3-kubernetes client scenarios" 0 'python: [0-9]+ passed, 0 failed' -- \
  env PYTHONPATH="$(dirname "$0")" timeout 120 /usr/bin/python3 "$KS_WORK/check.py" "$KS_DIR/kubeconfig"

ks_finish
