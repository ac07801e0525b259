#!/usr/bin/env bash
# kube-sim at scale, with raw HTTPS requests (Python standard library only): 10 000 objects
# created by 4 writers and seen by each of 50 concurrent watchers, a paged list over them,
# and 410 Expired for a watch from an RV the bounded history (--history 10000) has dropped.
# (e2e label: the quick tier's protocol checks are test_kubectl_protocol.sh.)
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
ks_need openssl curl
ks_start --history 10000

cat >"$KS_WORK/scale.py" <<'EOF'
import json, sys, threading, time

from ks_proto import Sim, check, finish

sim = Sim(*sys.argv[1:4])
req, watch = sim.req, sim.watch
ns = "/api/v1/namespaces/default/configmaps"

N, W, T = 10000, 50, 4
st, _, js, _ = req("GET", ns)
start_rv = js["metadata"]["resourceVersion"]
counts = [0] * W
def watcher(k):
    c, r = sim.open_watch(ns + "?watch=1&labelSelector=scale&resourceVersion=" + start_rv)
    while counts[k] < N:
        line = r.readline()
        if not line:
            break
        if json.loads(line)["type"] == "ADDED":
            counts[k] += 1
    c.close()
def creator(t):
    c = sim.conn()
    for i in range(t, N, T):
        st, _, _, _ = req("POST", ns, {"metadata": {"name": "s%05d" % i,
                                                    "labels": {"scale": "1"}}}, c=c)
        if st != 201:
            print("create failed", st)
            return
ws = [threading.Thread(target=watcher, args=(k,)) for k in range(W)]
for w in ws:
    w.start()
t0 = time.time()
cs = [threading.Thread(target=creator, args=(t,)) for t in range(T)]
for c in cs:
    c.start()
for c in cs:
    c.join()
created = time.time() - t0
for w in ws:
    w.join(120)
check("10 000 objects created and seen by each of 50 watchers",
      counts == [N] * W, "counts=%s" % sorted(set(counts)))
st, _, js, _ = req("GET", ns + "?labelSelector=scale&limit=500")
check("paged list over 10 000 objects", len(js["items"]) == 500
      and js["metadata"]["remainingItemCount"] == N - 500)
ev = watch(ns + "?watch=1&resourceVersion=1", lambda e: True)
check("old RV gives a 410 Expired ERROR event once history moved on (--history 10000)",
      bool(ev) and ev[0]["type"] == "ERROR" and ev[0]["object"]["code"] == 410
      and ev[0]["object"]["reason"] == "Expired", str(ev[:1]))
print("scale: %d creates in %.1fs" % (N, created))
finish("scale")
EOF

check "10 000 objects, 50 watchers, bounded history" 0 'scale: [0-9]+ passed, 0 failed' -- \
  env PYTHONPATH="$(dirname "$0")" timeout 250 /usr/bin/python3 "$KS_WORK/scale.py" "$KS_URL" \
  "$KS_DIR/ca.crt" "$KS_DIR/kubeconfig"
ks_finish
