#!/usr/bin/env bash
# kube-sim wire protocol, checked with raw HTTPS requests (Python standard library only):
# auth (401 Status), /version and health without a token, discovery content types, OpenAPI
# v3 index and 404 for v2, Table output, limit/continue, watch semantics (initial ADDED,
# resourceVersion start, BOOKMARKs, 410 Expired from a bounded history, timeoutSeconds),
# optimistic concurrency, generateName, fault injection and the request log. The scale run
# (10 000 objects, 50 watchers) is test_kubectl_scale.sh.
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
ks_need openssl curl
ks_start --history 10000 --bookmark-interval 1

cat >"$KS_WORK/proto.py" <<'EOF'
import sys, threading, time, urllib.parse

from ks_proto import Sim, check, finish

sim = Sim(*sys.argv[1:4])
req, watch = sim.req, sim.watch

st, ct, js, _ = req("GET", "/api/v1/namespaces", auth=False)
check("no token is 401 Unauthorized Status", st == 401 and js["kind"] == "Status"
      and js["reason"] == "Unauthorized" and js["code"] == 401)
st, _, js, _ = req("GET", "/version", auth=False)
check("/version without a token reports 1.32", st == 200 and js["minor"] == "32")
st, ct, _, body = req("GET", "/readyz", auth=False)
check("/readyz is ok", st == 200 and body == b"ok")
agg = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
st, ct, js, _ = req("GET", "/apis", accept=agg)
check("aggregated discovery content type", ct.startswith(
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
    and js["kind"] == "APIGroupDiscoveryList")
st, ct, js, _ = req("GET", "/apis")
check("legacy discovery without the aggregated Accept", js["kind"] == "APIGroupList")
st, _, js, _ = req("GET", "/apis/coordination.k8s.io/v1")
check("APIResourceList for a group version",
      [r["name"] for r in js["resources"]] == ["leases"])
st, _, _, _ = req("GET", "/openapi/v2")
check("/openapi/v2 is 404", st == 404)
st, _, js, _ = req("GET", "/openapi/v3")
check("/openapi/v3 index lists api/v1", "api/v1" in js["paths"])
u = js["paths"]["apis/coordination.k8s.io/v1"]["serverRelativeURL"]
st, _, js, _ = req("GET", u)
patch = js["paths"]["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"]["patch"]
check("OpenAPI v3 PATCH operation has the GVK and fieldValidation",
      patch["x-kubernetes-group-version-kind"]["kind"] == "Lease"
      and "fieldValidation" in [p["name"] for p in patch["parameters"]])
st, _, js, _ = req("GET", "/api/v1/namespaces/default/nothings")
check("unknown resource is 404 NotFound Status", st == 404 and js["reason"] == "NotFound")

ns = "/api/v1/namespaces/default/configmaps"
st, _, js, _ = req("POST", ns, {"metadata": {"generateName": "gen-"}, "data": {}})
check("generateName adds 5 characters", st == 201 and len(js["metadata"]["name"]) == 9)
st, _, js, _ = req("GET", ns + "/absent")
check("404 message and details", js["message"] == 'configmaps "absent" not found'
      and js["details"] == {"name": "absent", "kind": "configmaps"})
for i in range(5):
    req("POST", ns, {"metadata": {"name": "p%d" % i, "labels": {"i": str(i)}}})
st, _, js, _ = req("GET", ns + "?limit=2&labelSelector=i")
page1 = [i["metadata"]["name"] for i in js["items"]]
cont = js["metadata"].get("continue")
check("limit returns a continue token and remainingItemCount",
      page1 == ["p0", "p1"] and cont and js["metadata"]["remainingItemCount"] == 3)
st, _, js, _ = req("GET", ns + "?limit=2&labelSelector=i&continue=" + urllib.parse.quote(cont))
check("continue returns the next page", [i["metadata"]["name"] for i in js["items"]] == ["p2", "p3"])
st, _, js, _ = req("GET", ns + "?labelSelector=i,i+notin+(1,2),i!=4")
check("set-based selector", [i["metadata"]["name"] for i in js["items"]] == ["p0", "p3"])
tbl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
st, _, js, _ = req("GET", ns + "?labelSelector=i%3D1", accept=tbl)
check("Table output", js["kind"] == "Table"
      and [c["name"] for c in js["columnDefinitions"]] == ["Name", "Data", "Age"]
      and js["rows"][0]["cells"][0] == "p1"
      and js["rows"][0]["object"]["kind"] == "PartialObjectMetadata")

st, _, cur, _ = req("GET", ns + "/p0")
rv0 = cur["metadata"]["resourceVersion"]
cur["data"] = {"k": "v"}
st, _, put1, _ = req("PUT", ns + "/p0", cur)
check("PUT with the current RV", st == 200 and put1["metadata"]["resourceVersion"] != rv0)
st, _, js, _ = req("PUT", ns + "/p0", cur)
check("PUT with a stale RV is 409 with the exact message", st == 409 and js["message"] ==
      'Operation cannot be fulfilled on configmaps "p0": the object has been modified; '
      'please apply your changes to the latest version and try again')
st, _, same, _ = req("PATCH", ns + "/p0", {"data": {"k": "v"}},
                     ctype="application/merge-patch+json")
check("no-op patch keeps the resourceVersion",
      same["metadata"]["resourceVersion"] == put1["metadata"]["resourceVersion"] if st == 200
      else False)
rv_before = same["metadata"]["resourceVersion"]

# watch from an RV: exactly the later changes, then a bookmark (interval 1 s)
threading.Timer(0.3, lambda: req("PATCH", ns + "/p1", {"data": {"x": "1"}},
                                 ctype="application/merge-patch+json")).start()
ev = watch(ns + "?watch=1&allowWatchBookmarks=true&resourceVersion=" + rv_before,
           lambda e: e[-1]["type"] == "BOOKMARK")
check("watch from RV delivers MODIFIED then BOOKMARK",
      [e["type"] for e in ev] == ["MODIFIED", "BOOKMARK"]
      and ev[0]["object"]["metadata"]["name"] == "p1", str([e["type"] for e in ev]))
ev = watch(ns + "?watch=true&labelSelector=i%3D2", lambda e: True)
check("watch without RV starts with synthetic ADDED",
      ev and ev[0]["type"] == "ADDED" and ev[0]["object"]["metadata"]["name"] == "p2")
t0 = time.time()
ev = watch(ns + "?watch=1&timeoutSeconds=1&resourceVersion=" + rv_before + "&labelSelector=i%3D9",
           lambda e: False)
check("watch ends after timeoutSeconds", ev == [] and time.time() - t0 < 5)

# faults
req("POST", "/_sim/faults", {"expireNextWatch": True})
st, _, js, _ = req("GET", ns)
ev = watch(ns + "?watch=1&resourceVersion=" + js["metadata"]["resourceVersion"], lambda e: True)
check("fault: expireNextWatch forces 410", ev and ev[0]["type"] == "ERROR"
      and ev[0]["object"]["code"] == 410)
req("POST", "/_sim/faults", {"errorRate": 1, "errorCode": 429})
st, _, js, _ = req("GET", ns)
req("POST", "/_sim/faults", {"errorRate": 0})
check("fault: errorRate 1 answers 429 TooManyRequests", st == 429
      and js["reason"] == "TooManyRequests")
def drop_later():
    time.sleep(0.5)
    req("POST", "/_sim/faults", {"dropWatches": True})
threading.Thread(target=drop_later).start()
st, _, js, _ = req("GET", ns)
t0 = time.time()
watch(ns + "?watch=1&resourceVersion=" + js["metadata"]["resourceVersion"], lambda e: False)
check("fault: dropWatches ends open watches", time.time() - t0 < 10)
st, _, js, _ = req("GET", "/_sim/requests")
check("request log records method, path, query and status",
      any(e["method"] == "PUT" and e["path"] == ns + "/p0" and e["status"] == 409
          for e in js["items"]))

finish("protocol")
EOF

check "wire protocol, watch semantics and faults" 0 'protocol: [0-9]+ passed, 0 failed' -- \
  env PYTHONPATH="$(dirname "$0")" timeout 120 /usr/bin/python3 "$KS_WORK/proto.py" "$KS_URL" "$KS_DIR/ca.crt" "$KS_DIR/kubeconfig"
# an open watch must not hold up shutdown
ks_curl GET '/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0&labelSelector=none' \
  -o /dev/null &
sleep 0.5
ks_finish
