#!/usr/bin/env bash
# The install manifests (config/default) render with kustomize and hang together: the
# webhook Service selects the manager's pods, the serving certificate's Secret is the one
# mounted, the Deployment runs with leader election and probes, and the ClusterRole grants
# every resource the controllers read or write.
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
ks_need kubectl
SRC=${CAPMAAS_SOURCE_DIR:?CAPMAAS_SOURCE_DIR is not set}
OUT=$KS_WORK/components.yaml

check "config/default renders" 0 '' -- kubectl kustomize "$SRC/config/default" -o "$OUT"
checks() {
  /usr/bin/python3 - "$OUT" "$1" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
by = {}
for d in docs:
    by.setdefault(d["kind"], []).append(d)
what = sys.argv[2]
dep = by["Deployment"][0]
pod = dep["spec"]["template"]
ctr = pod["spec"]["containers"][0]
if what == "selector":
    sel = by["Service"][0]["spec"]["selector"]
    labels = pod["metadata"]["labels"]
    ok = all(labels.get(k) == v for k, v in sel.items())
elif what == "cert":
    secret = by["Certificate"][0]["spec"]["secretName"]
    ok = any(v.get("secret", {}).get("secretName") == secret for v in pod["spec"]["volumes"])
elif what == "args":
    ok = "--leader-elect" in ctr["args"] and "livenessProbe" in ctr and "readinessProbe" in ctr
elif what == "namespace":
    ok = all(d["metadata"].get("namespace") in (None, "capmaas-system") for d in docs)
elif what == "rbac":
    need = {("", "secrets", "get"), ("", "events", "create"), ("", "events", "patch"),
            ("cluster.x-k8s.io", "clusters", "watch"), ("cluster.x-k8s.io", "machines", "watch"),
            ("infrastructure.cluster.x-k8s.io", "maasmachines", "patch"),
            ("infrastructure.cluster.x-k8s.io", "maasmachines/status", "patch"),
            ("infrastructure.cluster.x-k8s.io", "maasclusters/status", "patch"),
            ("infrastructure.cluster.x-k8s.io", "maasmachinetemplates", "watch"),
            ("infrastructure.cluster.x-k8s.io", "maasmachinetemplates/status", "patch"),
            ("coordination.k8s.io", "leases", "update"),
            ("ipam.cluster.x-k8s.io", "ipaddressclaims", "create"),
            ("ipam.cluster.x-k8s.io", "ipaddresses", "get")}
    have = set()
    for kind in ("ClusterRole", "Role"):
        for r in by[kind]:
            for rule in r["rules"]:
                for g in rule["apiGroups"]:
                    for res in rule["resources"]:
                        for v in rule["verbs"]:
                            have.add((g, res, v))
    missing = need - have
    print("missing:", sorted(missing))
    ok = not missing
elif what == "nosecretlist":
    bad = [(r["metadata"]["name"], v) for kind in ("ClusterRole", "Role") for r in by[kind]
           for rule in r["rules"] for v in rule["verbs"]
           if ("" in rule["apiGroups"] or "*" in rule["apiGroups"])
           and ("secrets" in rule["resources"] or "*" in rule["resources"])
           and v in ("list", "watch", "*")]
    print("secret list/watch:", bad)
    ok = not bad
elif what == "hardening":
    psc, csc = pod["spec"].get("securityContext", {}), ctr.get("securityContext", {})
    res = ctr.get("resources", {})
    tol = pod["spec"].get("tolerations", [])
    checks = {
        "runAsNonRoot": psc.get("runAsNonRoot") is True,
        "seccomp": psc.get("seccompProfile", {}).get("type") == "RuntimeDefault",
        "readOnlyRootFilesystem": csc.get("readOnlyRootFilesystem") is True,
        "noPrivilegeEscalation": csc.get("allowPrivilegeEscalation") is False,
        "dropALL": csc.get("capabilities", {}).get("drop") == ["ALL"],
        "requests": {"cpu", "memory"} <= set(res.get("requests", {})),
        "limits": {"cpu", "memory"} <= set(res.get("limits", {})),
        "controlPlaneToleration": any(t.get("key") == "node-role.kubernetes.io/control-plane"
                                      for t in tol),
    }
    print("failing:", [k for k, v in checks.items() if not v])
    ok = all(checks.values())
elif what == "spread":
    labels = pod["metadata"]["labels"]
    replicas = dep["spec"].get("replicas", 1)
    pdbs = [p for p in by.get("PodDisruptionBudget", [])
            if all(labels.get(k) == v for k, v in p["spec"]["selector"]["matchLabels"].items())]
    anti = pod["spec"].get("affinity", {}).get("podAntiAffinity", {})
    terms = anti.get("preferredDuringSchedulingIgnoredDuringExecution", []) + \
        anti.get("requiredDuringSchedulingIgnoredDuringExecution", [])
    spread = any((t.get("podAffinityTerm", t).get("topologyKey") == "kubernetes.io/hostname")
                 for t in terms)
    print("replicas", replicas, "pdbs", len(pdbs), "anti-affinity", spread)
    ok = replicas <= 1 or (len(pdbs) == 1 and pdbs[0]["spec"].get("minAvailable") == 1 and spread)
elif what == "crds":
    import glob, os
    bases = glob.glob(os.path.join(os.environ["CAPMAAS_SOURCE_DIR"], "config/crd/bases/*.yaml"))
    names = {d["metadata"]["name"] for d in by["CustomResourceDefinition"]}
    want = {yaml.safe_load(open(b))["metadata"]["name"] for b in bases}
    print("crds", sorted(names), "missing", sorted(want - names))
    ok = len(want) == 6 and names == want
print("ok" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
}
check "the webhook Service selects the manager's pods" 0 '^ok' -- checks selector
check "the serving certificate's Secret is mounted" 0 '^ok' -- checks cert
check "leader election and probes are on" 0 '^ok' -- checks args
check "everything namespaced lives in capmaas-system" 0 '^ok' -- checks namespace
check "RBAC covers what the controllers use" 0 'ok' -- checks rbac
check "every CRD of config/crd/bases is included (six)" 0 '^ok' -- checks crds
check "no role lists or watches Secrets" 0 '^ok' -- checks nosecretlist
check "the manager runs non-root, read-only, no capabilities, RuntimeDefault seccomp, bounded, on control-plane nodes" 0 '^ok' -- checks hardening
check "two replicas spread over nodes, one kept through drains" 0 '^ok' -- checks spread
echo "$KS_PASS passed, $KS_FAIL failed"
[ "$KS_FAIL" -eq 0 ]
