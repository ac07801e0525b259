#!/usr/bin/env bash
# The clusterctl release artefacts, checked as clusterctl and a user would meet them:
# scripts/release v0.2.0 into a temporary folder (layout, idempotence, refused versions);
# the components' CRD contract labels against metadata.yaml, their image, the credentials
# variables and the cert-manager wiring; the templates rendered with clusterctl's variable
# rules (tests/release/render.py) from exactly the documented variables, with defaults, and
# with variables missing (every missing name reported); the ClusterClass flavor's
# references; and the rendered MaasCluster / MaasClusterTemplate / MaasMachineTemplates
# reviewed by the real capmaas webhooks (--webhooks-only), without MAAS and, when maas-sim
# is built, against the sample MAAS inventory.
#
# environment: CAPMAAS_BIN (default build/capmaas), CAPMAAS_BUILD_DIR (maas-sim),
#   CAPMAAS_TEST_CERTS (certificates; made with certs/gen-dev-certs.sh otherwise),
#   CAPMAAS_SOURCE_DIR. Exit status 0 when every check passes, 1 otherwise.
# shellcheck disable=SC2016 # many strings here are literal ${...} templates
set -uo pipefail
src=${CAPMAAS_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
here=$src/tests/release
version=v0.2.0
pass=0
fail=0
pids=()
work=$(mktemp -d)
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
  local p
  for p in "${pids[@]}"; do
    if kill -0 "$p" 2>/dev/null; then
      kill "$p" 2>/dev/null
      wait "$p" 2>/dev/null
    fi
  done
  rm -rf "$work"
}
trap cleanup EXIT

ok() {
  pass=$((pass + 1))
  echo "ok - $*"
}
bad() {
  fail=$((fail + 1))
  echo "not ok - $1"
  [ $# -lt 2 ] || printf '%s\n' "$2" | sed 's/^/    | /' | head -20
}
skip() { echo "skip - $*"; }
finish() {
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
  exit
}
# expect DESC CMD...: CMD must succeed
expect() {
  local desc=$1 out
  shift
  if out=$("$@" 2>&1); then ok "$desc"; else bad "$desc" "$out"; fi
}
# pycheck DESC ARGS...: tests/release/checks.py ARGS, its own ok/not ok lines are counted
pycheck() {
  local desc=$1 out rc
  shift
  out=$("$py" "$here/checks.py" "$@" 2>&1)
  rc=$?
  printf '%s\n' "$out" | sed 's/^/    /'
  if [ "$rc" -eq 0 ]; then ok "$desc"; else bad "$desc"; fi
}
# wait_for SECONDS CMD...: polls CMD every 0.1 s
wait_for() {
  local i
  for ((i = 0; i < $1 * 10; i++)); do
    "${@:2}" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3) || {
  echo "SKIP: python3 is not installed"
  exit 0
}
command -v kubectl >/dev/null || {
  echo "SKIP: kubectl is not installed"
  exit 0
}
have_yaml=0
"$py" -c 'import yaml' 2>/dev/null && have_yaml=1
render() { "$py" "$here/render.py" "$@"; }

# ---- the renderer's rules (clusterctl's: drone/envsubst) ----
# rule DESC WANT-OUTPUT TEMPLATE [NAME=VALUE...]
rule() {
  local desc=$1 want=$2 tpl=$3 got
  shift 3
  got=$(printf '%s' "$tpl" | env -i PATH="$PATH" "$@" "$py" "$here/render.py" 2>&1)
  if [ "$got" = "$want" ]; then ok "render: $desc"; else
    bad "render: $desc" "want: $want"$'\n'"got:  $got"
  fi
}
{
  rule '${A} takes the value' 'x=1' 'x=${A}' A=1
  rule '${A} set to empty is set' 'x=' 'x=${A}' A=
  rule ':= and :- default when unset or empty' 'd d e e' '${A:=d} ${B:-d} ${C:=e} ${D:-e}' C=
  rule '= defaults when empty too (envsubst)' 'x=d' 'x=${A=d}' A=
  rule 'a default may nest a variable' 'x=a-b-c' 'x=${A:=a-${B}-c}' B=b
  rule 'legacy ${ A } spacing' 'x=1 1 1' 'x=${ A } ${A } ${ A}' A=1
  rule '$${A} is a literal, $$ one $' 'x=${A} $' 'x=$${A} $$'
  rule 'a default of one space renders an empty flow list' 'tags: [ ]' 'tags: [${T:= }]'
  rule 'a comma list becomes several tags' 'tags: [a,b]' 'tags: [${T:= }]' T=a,b
}
msg=$(printf 'x: ${A:=}\n' | env -i PATH="$PATH" "$py" "$here/render.py" 2>&1)
rc=$?
if [ "$rc" -eq 1 ] && grep -q '\[A\]' <<<"$msg"; then
  ok "render: an empty default is no default (clusterctl reports A as missing)"
else
  bad "render: empty default (rc=$rc)" "$msg"
fi
printf 'x: ${A\n' | "$py" "$here/render.py" >/dev/null 2>&1
rc=$?
if [ "$rc" -eq 2 ]; then ok "render: an unclosed \${ is a bad substitution (exit 2)"; else
  bad "render: unclosed \${ gave exit $rc"
fi

# ---- scripts/release ----
out=$work/release
rel=$out/infrastructure-maas/$version
expect "scripts/release --out DIR $version succeeds" "$src/scripts/release" --out "$out" "$version"
want="cluster-template-clusterclass.yaml cluster-template-ipam.yaml cluster-template-kube-vip.yaml cluster-template-v1beta1.yaml cluster-template.yaml clusterclass-maas-default.yaml infrastructure-components.yaml metadata.yaml"
got=$(cd "$rel" 2>/dev/null && printf '%s\n' * | tr '\n' ' ' | sed 's/ $//')
if [ "$got" = "$want" ]; then ok "layout infrastructure-maas/$version/: $got"; else
  bad "layout infrastructure-maas/$version/" "want: $want"$'\n'"got:  $got"
fi
others=$(cd "$out/infrastructure-maas" && for e in * .*; do
  case $e in . | .. | "$version" | '*' | '.*') ;; *) echo "$e" ;; esac
done)
if [ -z "$others" ]; then ok "nothing else is left in infrastructure-maas/"; else
  bad "stray entries in infrastructure-maas/" "$others"
fi
expect "metadata.yaml is config/metadata.yaml" cmp "$src/config/metadata.yaml" "$rel/metadata.yaml"
for t in cluster-template.yaml cluster-template-v1beta1.yaml cluster-template-clusterclass.yaml \
  cluster-template-ipam.yaml cluster-template-kube-vip.yaml clusterclass-maas-default.yaml; do
  expect "$t is templates/$t" cmp "$src/templates/$t" "$rel/$t"
done
sum1=$(cd "$rel" && sha256sum -- *)
"$src/scripts/release" --out "$out" "$version" >/dev/null 2>&1
sum2=$(cd "$rel" && sha256sum -- *)
if [ "$sum1" = "$sum2" ]; then ok "a second run writes the same bytes"; else
  bad "a second run changed the output" "$(diff <(echo "$sum1") <(echo "$sum2"))"
fi
CAPMAAS_RELEASE_OUT=$work/env-out "$src/scripts/release" "$version" >/dev/null 2>&1
expect "CAPMAAS_RELEASE_OUT selects the output root" \
  test -s "$work/env-out/infrastructure-maas/$version/infrastructure-components.yaml"
for v in 0.2.0 v0.2 v0.2.0-rc.1 v0.02.0 v1.0.0 v0.3.0; do
  msg=$("$src/scripts/release" --out "$work/refused" "$v" 2>&1)
  rc=$?
  if [ "$rc" -ne 0 ] && [ ! -e "$work/refused/infrastructure-maas/$v" ]; then
    ok "refuses $v: $msg"
  else
    bad "scripts/release accepted $v (rc=$rc)" "$msg"
  fi
done

# refused DESC WHAT PATTERN FILE [NAME=VALUE…]: render.py on FILE with only these variables
# set (and PATH) fails with status 1, naming the missing ones as PATTERN (a grep regex)
refused() {
  local desc=$1 what=$2 pat=$3 file=$4 msg rc
  shift 4
  msg=$(env -i PATH="$PATH" "$@" "$py" "$here/render.py" "$file" 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" -eq 1 ] && grep -q "$pat" <<<"$msg"; then
    ok "$desc: $msg"
  else
    bad "$what (rc=$rc)" "$msg"
  fi
}

# ---- components ----
comp=$rel/infrastructure-components.yaml
vars=$(render --list "$comp" | tr '\n' ' ')
if [ "$vars" = "MAAS_API_KEY required MAAS_ENDPOINT required " ]; then
  ok "the components' only variables are MAAS_API_KEY and MAAS_ENDPOINT, both required"
else
  bad "components variables" "$vars"
fi
ep=http://10.0.0.2:5240/MAAS
key=ck:tk:secret
if env -i PATH="$PATH" MAAS_ENDPOINT=$ep MAAS_API_KEY=$key "$py" "$here/render.py" "$comp" \
  >"$work/components.yaml" 2>"$work/err"; then
  ok "the components render with MAAS_ENDPOINT and MAAS_API_KEY alone"
else
  bad "rendering the components" "$(cat "$work/err")"
fi
refused "without credentials both names are reported" "missing credentials" \
  '\[MAAS_API_KEY, MAAS_ENDPOINT\]' "$comp"
if [ "$have_yaml" = 1 ]; then
  pycheck "components: contract labels, image, credentials, cert-manager wiring" \
    components "$rel/metadata.yaml" "$work/components.yaml" "$version" "$ep" "$key"
else
  skip "python3 has no yaml module: structural component checks"
  n_crd=$(grep -c '^kind: CustomResourceDefinition' "$comp")
  n_lab=$(grep -c '^    cluster.x-k8s.io/v1beta2: v1beta1' "$comp")
  if [ "$n_crd" -gt 0 ] && [ "$n_crd" = "$n_lab" ]; then ok "$n_crd CRDs, $n_lab contract labels"
  else bad "contract labels: $n_lab of $n_crd CRDs"; fi
fi

# ---- the default template ----
tmpl=$rel/cluster-template.yaml
documented="CLUSTER_NAME CONTROL_PLANE_MACHINE_COUNT CONTROL_PLANE_MACHINE_IMAGE CONTROL_PLANE_MACHINE_MINCPU CONTROL_PLANE_MACHINE_MINMEMORY CONTROL_PLANE_MACHINE_RESOURCEPOOL CONTROL_PLANE_MACHINE_TAG KUBERNETES_VERSION MAAS_DNS_DOMAIN NAMESPACE WORKER_MACHINE_COUNT WORKER_MACHINE_IMAGE WORKER_MACHINE_MINCPU WORKER_MACHINE_MINMEMORY WORKER_MACHINE_RESOURCEPOOL WORKER_MACHINE_TAG"
for f in "$tmpl" "$rel/cluster-template-v1beta1.yaml" "$rel/cluster-template-clusterclass.yaml" \
  "$rel/cluster-template-ipam.yaml" "$rel/clusterclass-maas-default.yaml"; do
  names=$(render --list "$f" | awk '{print $1}' | tr '\n' ' ' | sed 's/ $//')
  b=$(basename "$f")
  if [ "$b" = clusterclass-maas-default.yaml ]; then
    # the class templates use the machine and DNS variables, not the counts or the version
    if [ -n "$names" ] && [ -z "$(comm -23 <(tr ' ' '\n' <<<"$names") <(tr ' ' '\n' <<<"$documented"))" ]; then
      ok "$b uses only documented variables: $names"
    else
      bad "$b variables" "$names"
    fi
  elif [ "$b" = cluster-template-ipam.yaml ]; then
    # the default's variables and the control-plane pool's
    want_ipam=$(tr ' ' '\n' <<<"$documented CONTROL_PLANE_IP_POOL_ADDRESSES CONTROL_PLANE_IP_POOL_GATEWAY CONTROL_PLANE_IP_POOL_PREFIX" | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')
    if [ "$names" = "$want_ipam" ]; then ok "$b uses exactly the documented variables and the pool's"
    else bad "$b variables" "want: $want_ipam"$'\n'"got:  $names"; fi
  elif [ "$names" = "$documented" ]; then
    ok "$b uses exactly the documented variables"
  else
    bad "$b variables" "want: $documented"$'\n'"got:  $names"
  fi
done
required=$(render --list "$tmpl" | awk '$2 == "required" {print $1}' | tr '\n' ' ')
if [ "$required" = "CLUSTER_NAME CONTROL_PLANE_MACHINE_IMAGE KUBERNETES_VERSION WORKER_MACHINE_IMAGE " ]; then
  ok "required without a default: $required"
else
  bad "required variables" "$required"
fi

# shellcheck disable=SC2054 # ssd,gpu is one value: a comma-separated tag list
full=(CLUSTER_NAME=demo NAMESPACE=capi-demo KUBERNETES_VERSION=v1.31.4
  CONTROL_PLANE_MACHINE_COUNT=3 WORKER_MACHINE_COUNT=3 MAAS_DNS_DOMAIN=lab.maas
  CONTROL_PLANE_MACHINE_IMAGE=custom/u-2204-0-k-1314-0 CONTROL_PLANE_MACHINE_MINCPU=4
  CONTROL_PLANE_MACHINE_MINMEMORY=8192 CONTROL_PLANE_MACHINE_RESOURCEPOOL=capi
  CONTROL_PLANE_MACHINE_TAG=control-plane WORKER_MACHINE_IMAGE=ubuntu/jammy
  WORKER_MACHINE_MINCPU=2 WORKER_MACHINE_MINMEMORY=4096 WORKER_MACHINE_RESOURCEPOOL=capi
  WORKER_MACHINE_TAG=ssd,gpu)
minimal=(CLUSTER_NAME=demo KUBERNETES_VERSION=v1.31.4
  CONTROL_PLANE_MACHINE_IMAGE=custom/u-2204-0-k-1314-0 WORKER_MACHINE_IMAGE=ubuntu/jammy)
# render_env OUT FILE... with only PATH and the given NAME=VALUE words
render_env() {
  local o=$1
  shift
  local files=() envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    files+=("$1")
    shift
  done
  shift
  envs=("$@")
  env -i PATH="$PATH" "${envs[@]}" "$py" "$here/render.py" "${files[@]}" >"$o" 2>"$o.err"
}
if render_env "$work/c.yaml" "$tmpl" -- "${full[@]}"; then
  ok "the default flavor renders from the 16 documented variables alone"
else
  bad "rendering the default flavor" "$(cat "$work/c.yaml.err")"
fi
if grep -q '\${' "$work/c.yaml"; then bad "no \${ is left in the rendered cluster"; else
  ok "no \${ is left in the rendered cluster"
fi
if render_env "$work/min.yaml" "$tmpl" -- "${minimal[@]}"; then
  ok "the default flavor renders from the four required variables (defaults for the rest)"
else
  bad "rendering with defaults" "$(cat "$work/min.yaml.err")"
fi
refused "with nothing set every required name is reported at once" "missing variables" \
  '\[CLUSTER_NAME, CONTROL_PLANE_MACHINE_IMAGE, KUBERNETES_VERSION, WORKER_MACHINE_IMAGE\]' "$tmpl"
refused "a partial set reports just the two images" "partial variables" \
  '\[CONTROL_PLANE_MACHINE_IMAGE, WORKER_MACHINE_IMAGE\]' "$tmpl" \
  CLUSTER_NAME=x KUBERNETES_VERSION=v1.31.4
if [ "$have_yaml" = 1 ]; then
  pycheck "the rendered default flavor has the expected kinds, refs and values" template "$work/c.yaml"
  pycheck "defaults: 1 control plane, 0 workers, 2 CPU, 4096 MiB, pool default, no tags, domain maas" \
    defaults "$work/min.yaml"
fi
# kubectl's own YAML reader, offline: a kustomization holding the rendered file
mkdir -p "$work/kparse"
cp "$work/c.yaml" "$work/kparse/cluster.yaml"
printf 'resources:\n  - cluster.yaml\n' >"$work/kparse/kustomization.yaml"
if kubectl kustomize "$work/kparse" >"$work/kparse.out" 2>&1; then
  ok "kubectl reads the rendered cluster offline ($(grep -c '^kind:' "$work/kparse.out") objects)"
else
  bad "kubectl kustomize of the rendered cluster" "$(cat "$work/kparse.out")"
fi

# ---- the v1beta1 flavor (CAPI 1.10) ----
# the default flavor's objects in CAPI v1beta1 core kinds: the same once versions and
# references are mapped to v1beta2
if render_env "$work/v1.yaml" "$rel/cluster-template-v1beta1.yaml" -- "${full[@]}"; then
  ok "the v1beta1 flavor renders from the 16 documented variables alone"
else
  bad "rendering the v1beta1 flavor" "$(cat "$work/v1.yaml.err")"
fi
if [ "$have_yaml" = 1 ]; then
  if msg=$("$py" - "$work/v1.yaml" "$work/c.yaml" 2>&1 <<'PY'
import sys, yaml
CORE = ("cluster.x-k8s.io", "controlplane.cluster.x-k8s.io", "bootstrap.cluster.x-k8s.io")
v1, v2 = ([d for d in yaml.safe_load_all(open(f)) if d] for f in sys.argv[1:])
def up(o, path=""):
    if isinstance(o, list):
        return [up(x, path) for x in o]
    if not isinstance(o, dict):
        return o
    o = {k: up(v, path + "." + k) for k, v in o.items()}
    if path.endswith("Ref"):
        assert set(o) == {"apiVersion", "kind", "name"}, "%s is not {apiVersion, kind, name}" % path
        o["apiGroup"] = o.pop("apiVersion").split("/")[0]
    return o
bad = []
for d in v1:
    g, ver = d["apiVersion"].rsplit("/", 1)
    if g in CORE:
        bad += [] if ver == "v1beta1" else ["%s is %s" % (d["kind"], d["apiVersion"])]
        d["apiVersion"] = g + "/v1beta2"
    if d["kind"] == "KubeadmControlPlane":
        mt = d["spec"]["machineTemplate"]
        d["spec"]["machineTemplate"] = {"spec": {"infrastructureRef": mt.pop("infrastructureRef")}, **mt}
    if d["kind"] == "MachineHealthCheck":  # CAPI's v1beta1 -> v1beta2 conversion
        s = d["spec"]
        secs = lambda t: int(t[:-1]) * {"s": 1, "m": 60, "h": 3600}[t[-1]]
        s["checks"] = {"nodeStartupTimeoutSeconds": secs(s.pop("nodeStartupTimeout")),
                       "unhealthyNodeConditions": [
                           {"type": c["type"], "status": c["status"],
                            "timeoutSeconds": secs(c["timeout"])}
                           for c in s.pop("unhealthyConditions")]}
        s["remediation"] = {"triggerIf": {"unhealthyLessThanOrEqualTo": s.pop("maxUnhealthy")}}
v1 = [up(d) for d in v1]
if bad or v1 != v2:
    sys.exit("; ".join(bad) or "the objects differ from the default flavor's")
print("%d objects" % len(v1))
PY
  ); then
    ok "the v1beta1 flavor is the default flavor in v1beta1 core kinds and {apiVersion, kind, name} refs ($msg)"
  else
    bad "the v1beta1 flavor" "$msg"
  fi
fi

# ---- the clusterclass flavor ----
if render_env "$work/cc.yaml" "$rel/cluster-template-clusterclass.yaml" -- "${full[@]}" &&
  render_env "$work/class.yaml" "$rel/clusterclass-maas-default.yaml" -- "${full[@]}"; then
  ok "the clusterclass flavor and clusterclass-maas-default.yaml render from the same variables"
else
  bad "rendering the clusterclass flavor" "$(cat "$work/cc.yaml.err" "$work/class.yaml.err" 2>/dev/null)"
fi
if [ "$have_yaml" = 1 ]; then
  pycheck "ClusterClass maas-default: refs, variables and patches agree with the Cluster" \
    clusterclass "$work/cc.yaml" "$work/class.yaml"
fi

# ---- the kube-vip flavor (docs/endpoints.md) ----
kv=$rel/cluster-template-kube-vip.yaml
kv_names=$(render --list "$kv" | awk '{print $1}' | tr '\n' ' ' | sed 's/ $//')
want_kv=$(tr ' ' '\n' <<<"$documented CONTROL_PLANE_ENDPOINT_IP KUBE_VIP_INTERFACE KUBE_VIP_VERSION" | LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')
if [ "$kv_names" = "$want_kv" ]; then ok "the kube-vip flavor uses the default's variables and the VIP's"
else bad "kube-vip flavor variables" "want: $want_kv"$'\n'"got:  $kv_names"; fi
refused "the kube-vip flavor needs the VIP" "kube-vip without CONTROL_PLANE_ENDPOINT_IP" \
  '\[CONTROL_PLANE_ENDPOINT_IP\]' "$kv" "${minimal[@]}"
if render_env "$work/kv.yaml" "$kv" -- "${full[@]}" CONTROL_PLANE_ENDPOINT_IP=10.20.0.50 \
  KUBE_VIP_INTERFACE=ens5 && render_env "$work/kv-min.yaml" "$kv" -- "${minimal[@]}" \
  CONTROL_PLANE_ENDPOINT_IP=10.20.0.50; then
  ok "the kube-vip flavor renders (with KUBE_VIP_INTERFACE, and with its default)"
else
  bad "rendering the kube-vip flavor" "$(cat "$work/kv.yaml.err" "$work/kv-min.yaml.err")"
fi
if [ "$have_yaml" = 1 ]; then
  pycheck "kube-vip: super-admin.conf during kubeadm init on the first control plane, admin.conf after it and on joins" \
    kube-vip "$work/kv.yaml" 10.20.0.50 ens5
  pycheck "kube-vip defaults: the interface is found before kubeadm (auto)" \
    kube-vip "$work/kv-min.yaml" 10.20.0.50 auto
fi

# ---- capmaas admission ----
bin=${CAPMAAS_BIN:-$src/build/capmaas}
if [ ! -x "$bin" ]; then
  skip "no capmaas binary ($bin): admission checks"
  finish
fi
[ "$have_yaml" = 1 ] || {
  skip "python3 has no yaml module: admission checks"
  finish
}
certs=${CAPMAAS_TEST_CERTS:-}
if [ -z "$certs" ] || [ ! -s "$certs/tls.crt" ]; then
  certs=$work/certs
  bash "$src/certs/gen-dev-certs.sh" "$certs" >/dev/null 2>&1 || {
    bad "certs/gen-dev-certs.sh"
    finish
  }
fi
# start_capmaas LOG [args]: --webhooks-only on free ports, in the background
start_capmaas() {
  local log=$1
  shift
  "$bin" --webhooks-only --webhook-port 0 --webhook-host 127.0.0.1 \
    --health-addr 127.0.0.1:0 --metrics-bind-addr 127.0.0.1:0 \
    --webhook-cert-dir "$certs" "$@" 2>"$log" &
  pids+=($!)
}
port_of() { sed -n 's/.*"webhook_port":"\([0-9]*\)".*/\1/p' "$1" | head -1; }
# shellcheck disable=SC2317 # called through wait_for
port_ready() { [ -n "$(port_of "$1")" ]; }
# worker_template FILE: the workers' MaasMachineTemplate (named *-md-0) of FILE on stdout
worker_template() {
  "$py" - "$1" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
yaml.safe_dump_all([d for d in docs if d["kind"] == "MaasMachineTemplate"
                    and d["metadata"]["name"].endswith("-md-0")], sys.stdout)
PY
}
# kind_only KIND FILE: the objects of that kind in FILE on stdout
kind_only() {
  "$py" - "$1" "$2" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[2])) if d]
yaml.safe_dump_all([d for d in docs if d["kind"] == sys.argv[1]], sys.stdout)
PY
}
start_capmaas "$work/capmaas.log"
if wait_for 10 port_ready "$work/capmaas.log"; then
  cm_port=$(port_of "$work/capmaas.log")
  ok "capmaas --webhooks-only serves on 127.0.0.1:$cm_port (no MAAS)"
  pycheck "the rendered default flavor passes capmaas admission" \
    admit "$cm_port" "$certs/ca.crt" allowed "$work/c.yaml" "$work/min.yaml"
  pycheck "the rendered ClusterClass templates pass capmaas admission" \
    admit "$cm_port" "$certs/ca.crt" allowed "$work/class.yaml"
  pycheck "the rendered kube-vip flavor passes capmaas admission" \
    admit "$cm_port" "$certs/ca.crt" allowed "$work/kv.yaml"
  bad_env=("${full[@]}" WORKER_MACHINE_IMAGE=plan9/4e WORKER_MACHINE_MINCPU=4096)
  render_env "$work/bad.yaml" "$tmpl" -- "${bad_env[@]}"
  worker_template "$work/bad.yaml" >"$work/bad-md.yaml"
  pycheck "control: an unknown osystem and 4096 CPUs in the worker template are denied" \
    admit "$cm_port" "$certs/ca.crt" denied "$work/bad-md.yaml"
else
  bad "capmaas --webhooks-only did not start" "$(cat "$work/capmaas.log")"
fi

# Against MAAS: maas-sim with the sample inventory (pool capi, tags control-plane and
# ssd, domain maas, uploaded image u-2204-0-k-1264-0).
sim=${CAPMAAS_BUILD_DIR:-$(dirname "$bin")}/maas-sim
if [ ! -x "$sim" ]; then
  skip "no maas-sim ($sim): admission against a MAAS inventory"
  finish
fi
simkey=ck:tk:secret1
"$sim" --port 0 --inventory "$src/tests/sim/maas/inventory-sample.yaml" --api-key "$simkey" \
  >"$work/maas-sim.out" 2>"$work/maas-sim.log" &
pids+=($!)
if ! wait_for 20 grep -q '^listening on ' "$work/maas-sim.out"; then
  bad "maas-sim did not start" "$(cat "$work/maas-sim.log")"
  finish
fi
maas_url=$(sed -n 's/^listening on \(.*\)$/\1/p' "$work/maas-sim.out" | head -1)
MAAS_ENDPOINT=$maas_url MAAS_API_KEY=$simkey start_capmaas "$work/capmaas-maas.log" \
  --maas-inventory-interval 1s
if wait_for 10 port_ready "$work/capmaas-maas.log" &&
  wait_for 10 grep -q 'MAAS inventory refreshed' "$work/capmaas-maas.log"; then
  cm_port=$(port_of "$work/capmaas-maas.log")
  ok "capmaas --webhooks-only with the maas-sim inventory serves on 127.0.0.1:$cm_port"
  fit=("${full[@]}" MAAS_DNS_DOMAIN=maas CONTROL_PLANE_MACHINE_IMAGE=custom/u-2204-0-k-1264-0
    WORKER_MACHINE_TAG=ssd)
  render_env "$work/fit.yaml" "$tmpl" -- "${fit[@]}"
  render_env "$work/fit-class.yaml" "$rel/clusterclass-maas-default.yaml" -- "${fit[@]}"
  pycheck "templates fitting the inventory are allowed with no warning" \
    admit "$cm_port" "$certs/ca.crt" allowed-quiet "$work/fit.yaml" "$work/fit-class.yaml"
  render_env "$work/nofit.yaml" "$tmpl" -- "${fit[@]}" WORKER_MACHINE_RESOURCEPOOL=gpu-pool
  worker_template "$work/nofit.yaml" >"$work/nofit-md.yaml"
  pycheck "control: a resource pool MAAS does not have is denied" \
    admit "$cm_port" "$certs/ca.crt" denied "$work/nofit-md.yaml"
  render_env "$work/kv-fit.yaml" "$kv" -- "${fit[@]}" CONTROL_PLANE_ENDPOINT_IP=10.20.0.50
  pycheck "a kube-vip VIP that is free in MAAS is allowed with no warning" \
    admit "$cm_port" "$certs/ca.crt" allowed-quiet "$work/kv-fit.yaml"
  render_env "$work/kv-dhcp-all.yaml" "$kv" -- "${fit[@]}" CONTROL_PLANE_ENDPOINT_IP=10.20.0.233
  kind_only MaasCluster "$work/kv-dhcp-all.yaml" >"$work/kv-dhcp.yaml"
  pycheck "control: a VIP inside the subnet's dynamic range is denied" \
    admit "$cm_port" "$certs/ca.crt" denied "$work/kv-dhcp.yaml"
else
  bad "capmaas did not load the maas-sim inventory" "$(cat "$work/capmaas-maas.log")"
fi
finish
