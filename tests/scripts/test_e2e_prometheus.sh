#!/usr/bin/env bash
# The dashboard and the alerts against a real Prometheus (issue 20, "See it"): Debian's
# prometheus scrapes the local stack's capmaas as config/prometheus's ServiceMonitor does
# (HTTPS on the diagnostics port, the scraper ServiceAccount's bearer token, the certificate
# verified with the stack's CA under the ServiceMonitor's serverName) every second, and
# evaluates config/prometheus/rules.yaml's groups every second. A small cluster (1 control
# plane, 1 worker) comes up while maas-sim fails the worker's first deploy. Then: the
# target is up; every rule is loaded and healthy; CapmaasDeploysFailing fires; every query
# of config/grafana/capmaas.json (Grafana's variables substituted: $job by the scrape's job,
# the interval variables by 1m) returns at least one series, and the dashboard's job
# variable lists the job. The reboot-remediation queries may be empty only while no C
# source exports capmaas_remediations_total; once one does, they are held to it too. The
# per-identity budget queries (capmaas_maas_identity_budget_*{identity}) are held too: a
# MaasCluster naming an identity Secret (the stack's MAAS, its key) makes the identity,
# and capmaas exports its four series once it is in use.
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
ks_need kubectl curl prometheus
SRC=${CAPMAAS_SOURCE_DIR:?CAPMAAS_SOURCE_DIR is not set}
BUILD=${CAPMAAS_BUILD_DIR:?CAPMAAS_BUILD_DIR is not set}
STACK_DEPLOY_SECONDS=0.5
STACK_RELEASE_SECONDS=0.3
STACK_CAPMAAS_ARGS="--machine-refresh-interval 2s --leader-elect --leader-election-namespace capmaas-system"
trap 'stack_down; ks_cleanup' EXIT
PY=/usr/bin/python3
DASH=$SRC/config/grafana/capmaas.json
JOB=capmaas
T0=$(date +%s)

# (not through check: stack_up sets variables this shell needs)
stack_up "$KS_WORK/stack" || {
  echo "not ok - the stack did not start"
  exit 1
}
check "the stack starts" 0 '' -- true

# --- Prometheus, configured as the ServiceMonitor and the PrometheusRule say ---------------
P=$KS_WORK/prometheus
mkdir -p "$P/data"
printf '%s' "$STACK_METRICS_TOKEN" >"$P/token"
chmod 600 "$P/token"
$PY - "$SRC/config/prometheus" "$P" "$STACK_DIR/certs/ca.crt" "127.0.0.1:$STACK_METRICS_PORT" "$JOB" <<'PY' || exit 1
import json, os, sys, yaml
cfg, out, ca, target, job = sys.argv[1:]
rule = yaml.safe_load(open(os.path.join(cfg, "rules.yaml")))
yaml.safe_dump(rule["spec"], open(os.path.join(out, "rules.yml"), "w"))
ep = yaml.safe_load(open(os.path.join(cfg, "monitor.yaml")))["spec"]["endpoints"][0]
conf = {
    "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
    "rule_files": ["rules.yml"],
    "scrape_configs": [{
        "job_name": job, "scheme": ep["scheme"], "metrics_path": ep["path"],
        "authorization": {"type": "Bearer", "credentials_file": os.path.join(out, "token")},
        "tls_config": {"ca_file": ca, "server_name": ep["tlsConfig"]["serverName"]},
        "static_configs": [{"targets": [target]}],
    }],
}
json.dump(conf, open(os.path.join(out, "prometheus.yml"), "w"), indent=1)
PY
within() { # SECONDS CMD...: polls CMD every 0.2 s until it succeeds, for SECONDS of wall time
  local end=$(($(date +%s) + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || return 1
    sleep 0.2
  done
}
stack_reserve_port PROM_PORT || exit 1
PROM=http://127.0.0.1:$PROM_PORT
(cd "$P" && exec prometheus --config.file="$P/prometheus.yml" --storage.tsdb.path="$P/data" \
  --web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn >"$P/prometheus.log" 2>&1) &
STACK_PIDS+=("$!") # stack_down stops it first
prom_ready() { curl -sf --max-time 2 "$PROM/-/ready" >/dev/null; }
check "Prometheus starts on loopback" 0 '' -- within 20 prom_ready
prom_get() { # PATH [curl -G args]: the JSON answer
  local p=$1
  shift
  curl -sS --max-time 5 -G "$PROM$p" "$@"
}
target_up() {
  prom_get /api/v1/targets | $PY -c '
import json, sys
t = json.load(sys.stdin)["data"]["activeTargets"]
print(" ".join("%s %s %s" % (x["labels"]["job"], x["health"], x["lastError"]) for x in t))
sys.exit(0 if len(t) == 1 and t[0]["health"] == "up" else 1)'
}
within 20 target_up
check "Prometheus scrapes capmaas's /metrics over HTTPS with the token" 0 "^$JOB up" -- target_up

rules_ok() { # every rule of the file loaded, each evaluated without error
  prom_get /api/v1/rules | $PY -c '
import json, sys, yaml
want = sum(len(g["rules"]) for g in yaml.safe_load(open(sys.argv[1]))["groups"])
rules = [r for g in json.load(sys.stdin)["data"]["groups"] for r in g["rules"]]
bad = ["%s: %s %s" % (r["name"], r["health"], r.get("lastError", "")) for r in rules if r["health"] != "ok"]
print("%d of %d rules loaded; not ok: %s" % (len(rules), want, "; ".join(bad) or "none"))
sys.exit(0 if len(rules) == want and not bad else 1)' "$P/rules.yml"
}
within 20 rules_ok
check "Prometheus loaded every rule of config/prometheus and evaluates each without error" 0 \
  'not ok: none' -- rules_ok

# --- a cluster whose worker's first MAAS machine fails its deploy -------------------------
# The machine maas-sim hands the worker first (the cheapest free match: the allocator's
# rule, as test_e2e.sh reads it) fails to deploy; capmaas replaces it.
BAD=$($PY - "$SRC/tests/sim/maas/inventory-sample.yaml" <<'PY'
import sys, yaml
inv = yaml.safe_load(open(sys.argv[1]))["machines"]
c = [m for m in inv if m.get("pool", "default") == "capi" and m["cpu_count"] >= 2 and m["memory"] >= 4096]
c.sort(key=lambda m: m["cpu_count"] + m["memory"] / 1024)
print(c[0]["system_id"])
PY
)
check "maas-sim will fail the deploy of $BAD" 0 '' -- stack_maas POST faults \
  -H 'Content-Type: application/json' -d "{\"fail_deploy\":[\"$BAD\"]}"
MANIFEST=$KS_WORK/cluster.yaml
stack_render_cluster "$MANIFEST" CONTROL_PLANE_MACHINE_COUNT=1 WORKER_MACHINE_COUNT=1 || exit 1
check "the cluster (1 control plane, 1 worker) is accepted" 0 'maasmachinetemplate' -- \
  stack_kubectl apply -f "$MANIFEST"
ready_is() {
  stack_kubectl get maasmachines -o json | $PY -c '
import json, sys
items = json.load(sys.stdin)["items"]
sys.exit(0 if len(items) == int(sys.argv[1]) and all(i.get("status", {}).get("ready") for i in items) else 1)' "$1"
}
check "both MaasMachines become Ready" 0 '' -- within 60 ready_is 2
check "the worker's first machine was replaced" 0 "$BAD" -- stack_kubectl get events \
  --field-selector reason=MachineReplaced -o jsonpath='{.items[*].message}'

alert_firing() { # NAME LABEL=VALUE
  prom_get /api/v1/alerts | $PY -c '
import json, sys
name, kv = sys.argv[1], sys.argv[2].split("=", 1)
a = [x for x in json.load(sys.stdin)["data"]["alerts"] if x["labels"]["alertname"] == name]
print(" ".join("%s{%s}" % (x["state"], x["labels"].get(kv[0], "")) for x in a) or "none")
sys.exit(0 if any(x["state"] == "firing" and x["labels"].get(kv[0]) == kv[1] for x in a) else 1)' "$@"
}
within 20 alert_firing CapmaasDeploysFailing reason=DeployFailed
check "CapmaasDeploysFailing fires for the failed deploy" 0 'firing\{DeployFailed\}' -- \
  alert_firing CapmaasDeploysFailing reason=DeployFailed

# --- an identity: its budget's series for the per-identity panel ---------------------------
# A MaasCluster of its own (no Cluster: nothing is allocated for it, and it writes no status
# while it waits for one) naming a Secret with the stack's MAAS endpoint and key; its pass
# loads the identity (logged), whose budget capmaas then exports.
ident_cluster() {
  stack_kubectl create secret generic maas-e2e-identity \
    --from-literal=endpoint="$STACK_MAAS_URL" --from-literal=apiKey="$STACK_KEY" &&
    stack_kubectl apply -f - <<'YAML'
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: MaasCluster
metadata:
  name: identity-probe
  namespace: default
  labels:
    cluster.x-k8s.io/cluster-name: identity-probe
spec:
  dnsDomain: maas
  identityRef:
    kind: Secret
    name: maas-e2e-identity
YAML
}
check "a MaasCluster naming an identity Secret is accepted" 0 'identity-probe' -- ident_cluster
ident_loaded() {
  grep -F 'MAAS identity loaded' "$STACK_DIR/capmaas.log" | grep -F 'default/maas-e2e-identity'
}
within 30 ident_loaded
check "capmaas loads the identity" 0 'maas-e2e-identity' -- ident_loaded
ident_series() {
  curl -sS --max-time 5 -G "$PROM/api/v1/query" \
    --data-urlencode 'query=capmaas_maas_identity_budget_requests_total{identity="default/maas-e2e-identity"}' |
    $PY -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(len(r)); sys.exit(0 if r else 1)'
}
within 30 ident_series
check "Prometheus has its budget series, labelled by the Secret" 0 '^1$' -- ident_series

# --- every panel's query returns series ----------------------------------------------------
# Queries that may be empty until the remediation controller exports its series.
PENDING_RE='^$'
grep -rq --include='*.c' --exclude-dir=tests --exclude-dir='build*' capmaas_remediations_total "$SRC" ||
  PENDING_RE='capmaas_remediation'
$PY "$SRC/tests/scripts/dashboard.py" queries "$DASH" "$JOB" 1m >"$KS_WORK/queries.jsonl"
panel_series() { # prints each query's series count; fails while one is empty
  $PY - "$PROM" "$KS_WORK/queries.jsonl" "$PENDING_RE" <<'PY'
import json, re, sys, urllib.parse, urllib.request
prom, path, pending = sys.argv[1:]
empty = 0
for line in open(path):
    q = json.loads(line)
    url = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": q["expr"]})
    d = json.load(urllib.request.urlopen(url, timeout=5))
    n = len(d["data"]["result"]) if d["status"] == "success" else -1
    print(n, q["panel"], q["ref"], q["expr"])
    if n < 1 and not re.search(pending, q["expr"]):
        empty += 1
sys.exit(1 if empty else 0)
PY
}
within 20 panel_series
panel_series >"$KS_WORK/series.txt"
RC=$?
N_PENDING=0
[ "$PENDING_RE" = '^$' ] || N_PENDING=$(grep -Ec "$PENDING_RE" "$KS_WORK/queries.jsonl")
echo "# $(wc -l <"$KS_WORK/queries.jsonl") queries; $N_PENDING may be empty (no C source exports capmaas_remediations_total yet)"
check "every panel's query returns at least one series" 0 '' -- test "$RC" -eq 0
[ "$RC" -eq 0 ] || grep -E '^(0|-1) ' "$KS_WORK/series.txt" | grep -Ev "$PENDING_RE" | sed 's/^/    | empty: /'
var_lists_job() {
  $PY "$SRC/tests/scripts/dashboard.py" variables "$DASH" | while IFS= read -r v; do
    m=$($PY -c 'import json,sys; v=json.loads(sys.argv[1]); print(v["metric"], v["label"])' "$v")
    prom_get "/api/v1/label/${m#* }/values" --data-urlencode "match[]=${m% *}" |
      $PY -c 'import json,sys; print(" ".join(json.load(sys.stdin)["data"]))'
  done
}
check "the dashboard's job variable lists the scrape's job" 0 "(^| )$JOB( |$)" -- var_lists_job

check "capmaas logged no sanitizer report" 1 '' -- grep -Eq 'runtime error|AddressSanitizer' \
  "$STACK_DIR/capmaas.log"
stack_down
echo "# $(($(date +%s) - T0)) s"
echo "$KS_PASS passed, $KS_FAIL failed"
[ "$KS_FAIL" -eq 0 ]
