# shellcheck shell=bash
# The local simulated stack (design.md §5), sourced by scripts/run, the end-to-end tests and
# bench/scale.sh. Not a command by itself.
#
#   stack_up WORKDIR         starts, in order: kube-sim (management, with the webhook Service
#                            routed to capmaas), kube-sim (workload clusters), maas-sim,
#                            capmaas and capi-sim; installs the provider from its release
#                            artefacts (stack_install: scripts/release, the components
#                            rendered with the stack's MAAS values, the CA injected as
#                            cert-manager would). Sets STACK_* variables (below).
#   stack_render_cluster OUT [NAME=VALUE...]
#                            the release's cluster template for the contract, rendered
#   stack_kubectl ARGS...    kubectl against the management kube-sim
#   stack_maas METHOD PATH   curl against maas-sim's /_sim/ admin API
#   stack_capmaas_start      (re)starts capmaas (the chaos test kills it)
#   stack_up_target DIR      a second management cluster (kube-sim, capmaas, capi-sim) on
#                            the same MAAS and workload API: the target of a move
#   stack_down               stops everything, newest first
#
# Inputs (environment): BUILD (build dir with capmaas and the sims), SRC (source dir),
# STACK_INVENTORY (default: the sample), STACK_DEPLOY_SECONDS (2), STACK_RELEASE_SECONDS (1),
# STACK_SIM_KUBELETS (1: capi-sim's Nodes follow maas-sim's kubelets, /_sim/kubelets),
# STACK_CAPMAAS_ARGS (extra flags), STACK_CAPI_CONTRACT (v1beta2, CAPI 1.11+; or v1beta1,
# CAPI 1.10: the Cluster API release capi-sim plays and the only version its CRDs serve),
# STACK_RELEASE_DIR (an infrastructure-maas/VERSION folder to install from; default: one
# scripts/release writes) or STACK_RELEASE_VERSION (the version it writes).
# Outputs: STACK_DIR, STACK_KUBECONFIG, STACK_WORKLOAD_KUBECONFIG, STACK_MAAS_URL,
# STACK_WEBHOOK_PORT, STACK_HEALTH_PORT, STACK_METRICS_PORT (the secure diagnostics port;
# stack_metrics scrapes it with STACK_METRICS_TOKEN), STACK_CAPMAAS_PID, STACK_PIDS,
# STACK_RELEASE_DIR, STACK_RELEASE_VERSION, STACK_COMPONENTS (what was installed).

STACK_KEY=capmaas:demo:secret
STACK_PIDS=()

# stack_reserve_port VAR: a loopback port for a listener started later (capmaas's webhook,
# health and diagnostics ports, Prometheus), in VAR. A port that bind(port 0) handed out and
# freed again was, under load, given to the next --port 0 or the source port of the next
# outgoing connection before capmaas bound it, and the stack failed at capmaas's start. So
# the port comes from below the kernel's ephemeral range (ip_local_port_range), where neither
# ever lands; a lock file per port (flock, held by this shell and what it starts until they
# exit; STACK_PORT_LOCKS) keeps parallel stacks (other scripts, other checkouts) off each
# other's ports, and a port another program listens on is skipped.
STACK_PORT_LOCKS=${STACK_PORT_LOCKS:-${TMPDIR:-/tmp}/capmaas-ports}
STACK_PORT_FDS=()
stack_reserve_port() {
  local var=$1 eph lo span port fd try
  read -r eph _ </proc/sys/net/ipv4/ip_local_port_range
  lo=$((eph > 12000 ? 10000 : 1024))
  span=$((eph - lo))
  mkdir -p "$STACK_PORT_LOCKS" || return 1
  for try in $(seq 1 100); do
    port=$((lo + (RANDOM * 32768 + RANDOM) % span))
    exec {fd}>>"$STACK_PORT_LOCKS/$port" || continue
    if flock -n "$fd" && /usr/bin/python3 -c 'import socket, sys
socket.socket().bind(("127.0.0.1", int(sys.argv[1])))' "$port" 2>/dev/null; then
      STACK_PORT_FDS+=("$fd")
      printf -v "$var" %s "$port"
      return 0
    fi
    exec {fd}>&-
  done
  echo "stack: no free port in $lo-$((eph - 1)) after $try tries" >&2
  return 1
}

# stack_release_ports: the reservations go (stack_down; the processes holding them are gone).
stack_release_ports() {
  local fd
  for fd in "${STACK_PORT_FDS[@]}"; do
    exec {fd}>&-
  done
  STACK_PORT_FDS=()
}

# stack_wait_line FILE REGEX SECONDS PID: waits for a line in FILE; the sed group 1 of REGEX
# is printed.
stack_wait_line() {
  local i v
  for i in $(seq 1 $(($3 * 10))); do
    v=$(sed -n "s/$2/\1/p" "$1" 2>/dev/null | head -1)
    if [ -n "$v" ]; then
      echo "$v"
      return 0
    fi
    kill -0 "$4" 2>/dev/null || break
    sleep 0.1
  done
  echo "stack: $(basename "$1") did not show /$2/; its log:" >&2
  tail -n 20 "${1%.out}.log" >&2 2>/dev/null
  if ! kill -0 "$4" 2>/dev/null; then
    wait "$4" 2>/dev/null
    echo "stack: the process (pid $4) has exited with status $?; its stdout:" >&2
    tail -n 5 "${1%.log}.out" >&2 2>/dev/null
  fi
  return 1
}

# Every process the stack starts gets SIGTERM when the shell that started it exits
# (setpriv --pdeathsig, util-linux), so a test killed halfway leaves nothing running. Start
# them from the script's own shell: one started in a $(...) would stop with that subshell.
if command -v setpriv >/dev/null 2>&1; then
  STACK_PDEATH=(setpriv --pdeathsig TERM)
else
  STACK_PDEATH=()
fi

# sim_start DIR NAME ARGS...: the one way every script starts a simulator: runs BUILD/NAME
# (stdout DIR/NAME.K.out, stderr DIR/NAME.K.log, K counting up), waits up to 20 s for its
# "listening on URL" line. Sets REPLY=URL and SIM_PID; returns 1 (with the log) if it never
# came.
SIM_SEQ=0
sim_start() {
  local dir=$1 name=$2
  shift 2
  SIM_SEQ=$((SIM_SEQ + 1))
  mkdir -p "$dir"
  "${STACK_PDEATH[@]}" "${BUILD:-$CAPMAAS_BUILD_DIR}/$name" "$@" >"$dir/$name.$SIM_SEQ.out" \
    2>"$dir/$name.$SIM_SEQ.log" &
  SIM_PID=$!
  REPLY=$(stack_wait_line "$dir/$name.$SIM_SEQ.out" '^listening on \(.*\)$' 20 "$SIM_PID")
}

stack_start_sim() { # NAME ARGS...: sim_start in STACK_DIR, the process joins STACK_PIDS
  sim_start "$STACK_DIR" "$@"
  local rc=$?
  STACK_PIDS+=("$SIM_PID")
  return $rc
}

stack_kubectl() {
  kubectl --kubeconfig "$STACK_KUBECONFIG" --cache-dir "$STACK_DIR/kcache" \
    --request-timeout=20s "$@"
}

# A scraper for capmaas's secure /metrics, as config/prometheus sets one up: ServiceAccount
# default/prometheus bound to the capmaas-metrics-reader ClusterRole; STACK_METRICS_TOKEN
# is a token of it.
stack_metrics_reader() {
  if ! { stack_kubectl create serviceaccount prometheus >/dev/null &&
    stack_kubectl apply -f "$SRC/config/prometheus/metrics_reader_role.yaml" >/dev/null &&
    stack_kubectl create clusterrolebinding capmaas-metrics-reader \
      --clusterrole=capmaas-metrics-reader --serviceaccount=default:prometheus >/dev/null &&
    STACK_METRICS_TOKEN=$(stack_kubectl create token prometheus --duration=24h); }; then
    echo "stack: cannot make the metrics scraper's token" >&2
    return 1
  fi
}

stack_metrics() { # GET /metrics over HTTPS as the scraper
  curl -sS --max-time 10 --cacert "$STACK_DIR/certs/ca.crt" \
    -H "Authorization: Bearer $STACK_METRICS_TOKEN" "https://127.0.0.1:$STACK_METRICS_PORT/metrics"
}

stack_maas() { # METHOD PATH [curl args]
  local m=$1 p=$2
  shift 2
  curl -sS --max-time 10 -X "$m" "${STACK_MAAS_URL%/MAAS}/_sim/$p" "$@"
}

# stack_capmaas_start: starts capmaas and waits for its controllers. Should one of its ports
# be taken meanwhile all the same (a program outside the reservations), that is said; the
# health and diagnostics ports are then chosen again and capmaas started once more (the
# webhook port stays: the management kube-sim routes the webhook Service to it).
stack_capmaas_start() {
  local try taken from
  for try in 1 2 3; do
    from=$(($({ wc -l <"$STACK_DIR/capmaas.log"; } 2>/dev/null || echo 0) + 1))
    stack_capmaas_run && return 0
    taken=$(sed -n "$from,\$ s/.*cannot listen on [^ ]*:\([0-9]*\): Address already in use.*/\1/p" \
      "$STACK_DIR/capmaas.log" | tail -1)
    [ -n "$taken" ] || return 1
    echo "stack: capmaas could not listen on port $taken: another program took it" >&2
    [ "$taken" != "$STACK_WEBHOOK_PORT" ] || return 1
    stack_reserve_port STACK_HEALTH_PORT && stack_reserve_port STACK_METRICS_PORT || return 1
  done
  return 1
}

stack_capmaas_run() {
  # shellcheck disable=SC2086 # STACK_CAPMAAS_ARGS is a list of flags
  MAAS_ENDPOINT=$STACK_MAAS_ENDPOINT MAAS_API_KEY=$STACK_MAAS_API_KEY "${STACK_PDEATH[@]}" "$BUILD/capmaas" \
    --kubeconfig "$STACK_KUBECONFIG" --webhook-port "$STACK_WEBHOOK_PORT" \
    --webhook-host 127.0.0.1 --webhook-cert-dir "$STACK_DIR/certs" \
    --health-addr "127.0.0.1:$STACK_HEALTH_PORT" --diagnostics-address "127.0.0.1:$STACK_METRICS_PORT" \
    --maas-inventory-interval 5s ${STACK_CAPMAAS_ARGS:-} \
    >>"$STACK_DIR/capmaas.out" 2>>"$STACK_DIR/capmaas.log" &
  STACK_CAPMAAS_PID=$!
  STACK_PIDS+=("$STACK_CAPMAAS_PID")
  stack_wait_line "$STACK_DIR/capmaas.log" '.*\(controllers started\).*' 60 \
    "$STACK_CAPMAAS_PID" >/dev/null
}

# The webhook Service of the components; kube-sim routes it to the local capmaas.
STACK_WEBHOOK_SERVICE=capmaas-system/capmaas-webhook-service

# stack_release: the release artefacts the stack installs from. STACK_RELEASE_DIR (an
# infrastructure-maas/VERSION folder) if set, else scripts/release writes
# STACK_RELEASE_VERSION (default: vMAJOR.MINOR.0 of config/metadata.yaml's newest series of
# contract STACK_CAPI_CONTRACT, as clusterctl picks) into STACK_DIR/release. Sets STACK_RELEASE_DIR and STACK_RELEASE_VERSION.
stack_release() {
  if [ -n "${STACK_RELEASE_DIR:-}" ]; then
    STACK_RELEASE_VERSION=$(basename "$STACK_RELEASE_DIR")
    return 0
  fi
  # clusterctl's pick: the newest release series of the contract the core speaks
  STACK_RELEASE_VERSION=${STACK_RELEASE_VERSION:-$(awk -v want="${STACK_CAPI_CONTRACT:-v1beta2}" '
    /major:/ { ma = $NF } /minor:/ { mi = $NF }
    /contract:/ && $NF == want { v = "v" ma "." mi ".0" } END { print v }' "$SRC/config/metadata.yaml")}
  [ -n "$STACK_RELEASE_VERSION" ] || {
    echo "stack: config/metadata.yaml has no release series of contract ${STACK_CAPI_CONTRACT:-v1beta2}" >&2
    return 1
  }
  "$SRC/scripts/release" --out "$STACK_DIR/release" "$STACK_RELEASE_VERSION" \
    >"$STACK_DIR/release.log" 2>&1 || {
    echo "stack: scripts/release $STACK_RELEASE_VERSION failed:" >&2
    cat "$STACK_DIR/release.log" >&2
    return 1
  }
  STACK_RELEASE_DIR=$STACK_DIR/release/infrastructure-maas/$STACK_RELEASE_VERSION
}

# stack_components_prepare RENDERED OUT: what `clusterctl init` and cert-manager would do
# with the rendered components, for a management cluster (kube-sim) that runs no pods.
# Writes OUT with what the provider's install needs here, in order: the Namespace, the CRDs,
# the credentials Secret and the webhook configurations, each object annotated
# cert-manager.io/inject-ca-from (naming a Certificate of the components) getting the CA
# (STACK_DIR/certs/ca.crt) as its caBundle. Everything else (RBAC, the Service, the
# Deployment, the Issuer and Certificate) is checked: present, well-formed and wired to each
# other (the Deployment's container `manager` runs the release's image and reads the
# Secret, which holds the stack's MAAS values; the webhooks call STACK_WEBHOOK_SERVICE,
# which selects the Deployment's pods; the Certificate covers that Service and is issued by
# an Issuer of the components). Prints one summary line; exit 1 with the reasons if not.
stack_components_prepare() {
  /usr/bin/python3 - "$1" "$2" "$STACK_DIR/certs/ca.crt" \
    "${CAPMAAS_RELEASE_IMAGE:-ghcr.io/capmaas/capmaas}:$STACK_RELEASE_VERSION" \
    "$STACK_MAAS_URL" "$STACK_KEY" "$STACK_WEBHOOK_SERVICE" <<'PY'
import base64, sys, yaml
src, out, ca_path, image, endpoint, key, service = sys.argv[1:]
docs = [d for d in yaml.safe_load_all(open(src)) if d]
errs = []
def need(cond, msg):
    if not cond:
        errs.append(msg)
    return cond
def find(kind, name=None, ns=None):
    return [d for d in docs if d.get("kind") == kind and name in (None, d["metadata"].get("name"))
            and ns in (None, d["metadata"].get("namespace"))]
for d in docs:
    need(d.get("apiVersion") and d.get("kind") and d.get("metadata", {}).get("name"),
         "an object without apiVersion, kind or name: %r" % (d,))
APPLY = ["Namespace", "CustomResourceDefinition", "Secret",
         "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
CHECK = ["ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding",
         "Service", "Deployment", "PodDisruptionBudget", "Certificate", "Issuer"]
for d in docs:
    need(d.get("kind") in APPLY + CHECK, "unexpected kind %s in the components" % d.get("kind"))
if errs:
    sys.exit("stack: components: " + "; ".join(errs))
nss = find("Namespace")
need(len(nss) == 1, "want one Namespace, have %d" % len(nss))
ns = nss[0]["metadata"]["name"] if nss else None
for d in docs:
    if d["kind"] not in ("Namespace", "CustomResourceDefinition", "ClusterRole",
                         "ClusterRoleBinding", "MutatingWebhookConfiguration",
                         "ValidatingWebhookConfiguration"):
        need(d["metadata"].get("namespace") == ns,
             "%s %s is not in namespace %s" % (d["kind"], d["metadata"]["name"], ns))
# the credentials Secret holds the rendered MAAS values
secrets = find("Secret")
need(len(secrets) == 1, "want one Secret, have %d" % len(secrets))
sd = secrets[0].get("stringData", {}) if secrets else {}
need(sd.get("MAAS_ENDPOINT") == endpoint and sd.get("MAAS_API_KEY") == key,
     "the Secret does not hold the rendered MAAS_ENDPOINT and MAAS_API_KEY")
# the Deployment: container manager, the release's image, credentials from the Secret
deps = find("Deployment")
need(len(deps) == 1, "want one Deployment, have %d" % len(deps))
pod = deps[0]["spec"]["template"] if deps else {"spec": {}}
mgr = [c for c in pod["spec"].get("containers", []) if c.get("name") == "manager"]
if need(len(mgr) == 1, "the Deployment has no container named manager"):
    need(mgr[0].get("image") == image, "the manager runs %s, not %s" % (mgr[0].get("image"), image))
    refs = {e["name"]: e.get("valueFrom", {}).get("secretKeyRef", {}) for e in mgr[0].get("env", [])}
    for v in ("MAAS_ENDPOINT", "MAAS_API_KEY"):
        r = refs.get(v, {})
        need(secrets and r.get("name") == secrets[0]["metadata"]["name"] and r.get("key") in sd,
             "the manager's %s does not come from the Secret" % v)
sa = pod["spec"].get("serviceAccountName")
need(find("ServiceAccount", sa, ns), "the Deployment's ServiceAccount %s is missing" % sa)
for b in find("RoleBinding") + find("ClusterRoleBinding"):
    rk = b["roleRef"]["kind"]
    need(find(rk, b["roleRef"]["name"], ns if rk == "Role" else None),
         "%s %s binds a missing %s" % (b["kind"], b["metadata"]["name"], rk))
    for sub in b.get("subjects", []):
        need(sub["kind"] != "ServiceAccount" or find("ServiceAccount", sub["name"], sub.get("namespace")),
             "%s %s binds a missing ServiceAccount" % (b["kind"], b["metadata"]["name"]))
# the webhook Service: the one kube-sim routes, selecting the manager's pods and port
svc_ns, svc_name = service.split("/")
svcs = find("Service", svc_name, svc_ns)
if need(len(svcs) == 1, "the components have no Service %s" % service):
    labels = pod.get("metadata", {}).get("labels", {})
    sel = svcs[0]["spec"].get("selector", {})
    need(sel and all(labels.get(k) == v for k, v in sel.items()),
         "the Service %s does not select the Deployment's pods" % service)
    ports = [p for c in mgr for p in c.get("ports", [])]
    for p in svcs[0]["spec"].get("ports", []):
        need(any(p.get("targetPort") in (q.get("containerPort"), q.get("name")) for q in ports),
             "the Service's targetPort %s is no port of the manager" % p.get("targetPort"))
# cert-manager: Issuer -> Certificate (covering the Service) -> the manager's cert volume
certs = {"%s/%s" % (c["metadata"]["namespace"], c["metadata"]["name"]): c for c in find("Certificate")}
for c in certs.values():
    ir = c["spec"].get("issuerRef", {})
    need(find(ir.get("kind", "Issuer"), ir.get("name"), ns if ir.get("kind", "Issuer") == "Issuer" else None),
         "Certificate %s names a missing issuer" % c["metadata"]["name"])
    need("%s.%s.svc" % (svc_name, svc_ns) in c["spec"].get("dnsNames", []),
         "Certificate %s does not cover %s.%s.svc" % (c["metadata"]["name"], svc_name, svc_ns))
    need(any(v.get("secret", {}).get("secretName") == c["spec"].get("secretName")
             for v in pod["spec"].get("volumes", [])),
         "the manager does not mount Certificate %s's Secret" % c["metadata"]["name"])
# CA injection, as cert-manager's cainjector does
ca = base64.b64encode(open(ca_path, "rb").read()).decode()
injected = 0
for d in docs:
    frm = d["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from")
    if frm is None:
        continue
    if not need(frm in certs, "%s %s injects from a missing Certificate %s" % (d["kind"], d["metadata"]["name"], frm)):
        continue
    if d["kind"] == "CustomResourceDefinition":
        cc = [d.get("spec", {}).get("conversion", {}).get("webhook", {}).get("clientConfig")]
    else:
        cc = [w.get("clientConfig") for w in d.get("webhooks", [])]
    for c in cc:
        if c is not None:
            c["caBundle"] = ca
            injected += 1
for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
    for d in find(kind):
        for w in d.get("webhooks", []):
            s = w.get("clientConfig", {}).get("service", {})
            need("%s/%s" % (s.get("namespace"), s.get("name")) == service and w["clientConfig"].get("caBundle"),
                 "webhook %s calls %s/%s without an injected CA" % (w.get("name"), s.get("namespace"), s.get("name")))
if errs:
    sys.exit("stack: components: " + "; ".join(errs))
apply = [d for k in APPLY for d in docs if d["kind"] == k]
yaml.safe_dump_all(apply, open(out, "w"), sort_keys=False)
count = lambda ks: ", ".join("%d %s" % (n, k) for k in ks for n in [len(find(k))] if n)
print("applied %s; checked %s; %d caBundles injected" % (count(APPLY), count(CHECK), injected))
PY
}

# Installs from the release artefacts as clusterctl would: renders
# infrastructure-components.yaml with the stack's MAAS_ENDPOINT and MAAS_API_KEY, applies
# what kube-sim needs of it (stack_components_prepare) and capi-sim's CRDs (the Cluster API
# core stand-in, serving STACK_CAPI_CONTRACT). capmaas then takes its MAAS credentials from
# the installed Secret, as the Deployment's secretKeyRefs would. Sets STACK_COMPONENTS (the
# summary line) and STACK_MAAS_ENDPOINT / STACK_MAAS_API_KEY (read back from the Secret).
stack_install() {
  local comp=$STACK_DIR/infrastructure-components.yaml
  stack_release || return 1
  env -i PATH="$PATH" MAAS_ENDPOINT="$STACK_MAAS_URL" MAAS_API_KEY="$STACK_KEY" \
    /usr/bin/python3 "$SRC/tests/release/render.py" "$STACK_RELEASE_DIR/infrastructure-components.yaml" \
    >"$comp" || {
    echo "stack: $STACK_RELEASE_DIR/infrastructure-components.yaml does not render" >&2
    return 1
  }
  # shellcheck disable=SC2034 # an output for the scripts sourcing this file
  STACK_COMPONENTS=$(stack_components_prepare "$comp" "$STACK_DIR/install.yaml") || return 1
  stack_kubectl apply -f "$STACK_DIR/install.yaml" >"$STACK_DIR/install.out" &&
    bash "$SRC/tests/sim/capi/crds.sh" "${STACK_CAPI_CONTRACT:-v1beta2}" >"$STACK_DIR/capi-crds.yaml" &&
    stack_kubectl apply -f "$STACK_DIR/capi-crds.yaml" >/dev/null || return 1
  STACK_MAAS_ENDPOINT=$(stack_secret_value MAAS_ENDPOINT)
  STACK_MAAS_API_KEY=$(stack_secret_value MAAS_API_KEY)
  if [ -z "$STACK_MAAS_ENDPOINT" ] || [ -z "$STACK_MAAS_API_KEY" ]; then
    echo "stack: the installed credentials Secret lacks the MAAS values" >&2
    return 1
  fi
}

stack_secret_value() { # KEY: a key of the installed credentials Secret, decoded
  stack_kubectl get secret -n capmaas-system capmaas-manager-bootstrap-credentials \
    -o "jsonpath={.data.$1}" | base64 -d
}

# stack_render_cluster OUT [NAME=VALUE...]: the release's cluster template for
# STACK_CAPI_CONTRACT (v1beta2: cluster-template.yaml; v1beta1: the flavor
# cluster-template-v1beta1.yaml) rendered with clusterctl's rules into OUT. By default the
# cluster "demo" in namespace default: Kubernetes v1.26.4, 3 control planes (4 CPUs,
# 8 GiB) and 5 workers (2 CPUs, 4 GiB), all from the MAAS pool "capi" with the sample
# inventory's image; NAME=VALUE words override any variable. STACK_FLAVOR names another
# v1beta2 template of the release (cluster-template-ipam.yaml).
stack_render_cluster() {
  local out=$1 flavor=${STACK_FLAVOR:-cluster-template.yaml}
  shift
  [ "${STACK_CAPI_CONTRACT:-v1beta2}" = v1beta1 ] && flavor=cluster-template-v1beta1.yaml
  env -i PATH="$PATH" CLUSTER_NAME=demo NAMESPACE=default KUBERNETES_VERSION=v1.26.4 \
    CONTROL_PLANE_MACHINE_COUNT=3 WORKER_MACHINE_COUNT=5 \
    CONTROL_PLANE_MACHINE_IMAGE=u-2204-0-k-1264-0 WORKER_MACHINE_IMAGE=u-2204-0-k-1264-0 \
    CONTROL_PLANE_MACHINE_MINCPU=4 CONTROL_PLANE_MACHINE_MINMEMORY=8192 \
    CONTROL_PLANE_MACHINE_RESOURCEPOOL=capi WORKER_MACHINE_RESOURCEPOOL=capi "$@" \
    /usr/bin/python3 "$SRC/tests/release/render.py" "$STACK_RELEASE_DIR/$flavor" >"$out" || {
    echo "stack: $flavor does not render" >&2
    return 1
  }
}

stack_up() {
  STACK_DIR=$1
  mkdir -p "$STACK_DIR" && rm -f "$STACK_DIR"/*.out "$STACK_DIR"/*.log
  bash "$SRC/certs/gen-dev-certs.sh" "$STACK_DIR/certs" >/dev/null 2>&1 || {
    echo "stack: cannot make certificates" >&2
    return 1
  }
  stack_reserve_port STACK_WEBHOOK_PORT || return 1
  stack_reserve_port STACK_HEALTH_PORT || return 1
  stack_reserve_port STACK_METRICS_PORT || return 1
  stack_start_sim kube-sim --port 0 --dir "$STACK_DIR/mgmt" \
    --service-override "$STACK_WEBHOOK_SERVICE=127.0.0.1:$STACK_WEBHOOK_PORT" ||
    return 1
  STACK_KUBECONFIG=$STACK_DIR/mgmt/kubeconfig
  stack_start_sim kube-sim --port 0 --dir "$STACK_DIR/workload" || return 1
  STACK_WORKLOAD_KUBECONFIG=$STACK_DIR/workload/kubeconfig
  stack_start_sim maas-sim --port 0 \
    --inventory "${STACK_INVENTORY:-$SRC/tests/sim/maas/inventory-sample.yaml}" \
    --api-key "$STACK_KEY" --deploy-seconds "${STACK_DEPLOY_SECONDS:-2}" \
    --release-seconds "${STACK_RELEASE_SECONDS:-1}" || return 1
  STACK_MAAS_URL=$REPLY
  stack_install || return 1
  stack_metrics_reader || return 1
  stack_capmaas_start || return 1
  local kubelets=()
  [ "${STACK_SIM_KUBELETS:-0}" = 1 ] && kubelets=(--maas-sim "${STACK_MAAS_URL%/MAAS}")
  stack_start_sim capi-sim --port 0 --kubeconfig "$STACK_KUBECONFIG" \
    --workload-kubeconfig "$STACK_WORKLOAD_KUBECONFIG" \
    --capi-contract "${STACK_CAPI_CONTRACT:-v1beta2}" "${kubelets[@]}" || return 1
}

# stack_up_target DIR: a second management cluster, the target of a clusterctl move: its own
# kube-sim (the webhook Service routed to its own capmaas), the provider installed from the
# same release, its own capmaas and capi-sim, sharing the first stack's maas-sim and
# workload kube-sim. Call after stack_up. Sets TARGET_DIR, TARGET_KUBECONFIG,
# TARGET_CAPMAAS_PID; the STACK_* variables keep describing the first stack, and
# stack_down stops both.
stack_up_target() {
  local dir=$STACK_DIR kc=$STACK_KUBECONFIG wh=$STACK_WEBHOOK_PORT hp=$STACK_HEALTH_PORT
  local mp=$STACK_METRICS_PORT pid=$STACK_CAPMAAS_PID rc=1
  STACK_DIR=$1
  mkdir -p "$STACK_DIR" && rm -f "$STACK_DIR"/*.out "$STACK_DIR"/*.log
  if bash "$SRC/certs/gen-dev-certs.sh" "$STACK_DIR/certs" >/dev/null 2>&1; then
    STACK_KUBECONFIG=$STACK_DIR/mgmt/kubeconfig
    stack_reserve_port STACK_WEBHOOK_PORT && stack_reserve_port STACK_HEALTH_PORT &&
      stack_reserve_port STACK_METRICS_PORT &&
      stack_start_sim kube-sim --port 0 --dir "$STACK_DIR/mgmt" \
        --service-override "$STACK_WEBHOOK_SERVICE=127.0.0.1:$STACK_WEBHOOK_PORT" &&
      stack_install && stack_capmaas_start &&
      stack_start_sim capi-sim --port 0 --kubeconfig "$STACK_KUBECONFIG" \
        --workload-kubeconfig "$STACK_WORKLOAD_KUBECONFIG" \
        --capi-contract "${STACK_CAPI_CONTRACT:-v1beta2}" && rc=0
  else
    echo "stack: cannot make certificates" >&2
  fi
  # shellcheck disable=SC2034 # outputs for the scripts sourcing this file
  TARGET_DIR=$STACK_DIR
  # shellcheck disable=SC2034
  TARGET_KUBECONFIG=$STACK_KUBECONFIG
  # shellcheck disable=SC2034
  TARGET_CAPMAAS_PID=$STACK_CAPMAAS_PID
  STACK_DIR=$dir STACK_KUBECONFIG=$kc STACK_WEBHOOK_PORT=$wh STACK_HEALTH_PORT=$hp
  STACK_METRICS_PORT=$mp STACK_CAPMAAS_PID=$pid
  return $rc
}

stack_down() {
  local i p
  for ((i = ${#STACK_PIDS[@]} - 1; i >= 0; i--)); do
    p=${STACK_PIDS[$i]}
    kill -0 "$p" 2>/dev/null && kill -TERM "$p" 2>/dev/null
  done
  for p in "${STACK_PIDS[@]}"; do
    wait "$p" 2>/dev/null
  done
  STACK_PIDS=()
  stack_release_ports
}
