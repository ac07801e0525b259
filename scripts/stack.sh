# shellcheck shell=bash
# The local simulated stack (design.md §5), sourced by scripts/run, the end-to-end tests and
# bench/scale.sh. Not a command by itself.
#
#   stack_up WORKDIR         starts, in order: kube-sim (management, with the webhook Service
#                            routed to capmaas), kube-sim (workload clusters), maas-sim,
#                            capmaas and capi-sim; installs the CRDs and the webhook
#                            configurations. Sets STACK_* variables (below).
#   stack_kubectl ARGS...    kubectl against the management kube-sim
#   stack_maas METHOD PATH   curl against maas-sim's /_sim/ admin API
#   stack_capmaas_start      (re)starts capmaas (the chaos test kills it)
#   stack_down               stops everything, newest first
#
# Inputs (environment): BUILD (build dir with capmaas and the sims), SRC (source dir),
# STACK_INVENTORY (default: the sample), STACK_DEPLOY_SECONDS (2), STACK_RELEASE_SECONDS (1),
# STACK_CAPMAAS_ARGS (extra flags), STACK_CAPI_CONTRACT (v1beta1, as examples/cluster.yaml;
# or v1beta2: the Cluster API release capi-sim plays and the only version its CRDs serve).
# Outputs: STACK_DIR, STACK_KUBECONFIG, STACK_WORKLOAD_KUBECONFIG, STACK_MAAS_URL,
# STACK_WEBHOOK_PORT, STACK_HEALTH_PORT, STACK_METRICS_PORT, STACK_CAPMAAS_PID, STACK_PIDS.

STACK_KEY=capmaas:demo:secret
STACK_PIDS=()

stack_free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
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
  tail -20 "${1%.out}.log" >&2 2>/dev/null
  return 1
}

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
  "${BUILD:-$CAPMAAS_BUILD_DIR}/$name" "$@" >"$dir/$name.$SIM_SEQ.out" \
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

stack_maas() { # METHOD PATH [curl args]
  local m=$1 p=$2
  shift 2
  curl -sS --max-time 10 -X "$m" "${STACK_MAAS_URL%/MAAS}/_sim/$p" "$@"
}

stack_capmaas_start() {
  MAAS_ENDPOINT=$STACK_MAAS_URL MAAS_API_KEY=$STACK_KEY "$BUILD/capmaas" \
    --kubeconfig "$STACK_KUBECONFIG" --webhook-port "$STACK_WEBHOOK_PORT" \
    --webhook-host 127.0.0.1 --webhook-cert-dir "$STACK_DIR/certs" \
    --health-addr "127.0.0.1:$STACK_HEALTH_PORT" --metrics-bind-addr "127.0.0.1:$STACK_METRICS_PORT" \
    --maas-inventory-interval 5s ${STACK_CAPMAAS_ARGS:-} \
    >>"$STACK_DIR/capmaas.out" 2>>"$STACK_DIR/capmaas.log" &
  STACK_CAPMAAS_PID=$!
  STACK_PIDS+=($STACK_CAPMAAS_PID)
  stack_wait_line "$STACK_DIR/capmaas.log" '.*\(controllers started\).*' 60 \
    "$STACK_CAPMAAS_PID" >/dev/null
}

# Installs our CRDs and capi-sim's, then the webhook configurations with the CA injected as
# cert-manager would.
stack_install() {
  local ca
  stack_kubectl apply -f "$SRC/config/crd/bases/" >/dev/null &&
    bash "$SRC/tests/sim/capi/crds.sh" "${STACK_CAPI_CONTRACT:-v1beta1}" >"$STACK_DIR/capi-crds.yaml" &&
    stack_kubectl apply -f "$STACK_DIR/capi-crds.yaml" >/dev/null || return 1
  ca=$(base64 -w0 <"$STACK_DIR/certs/ca.crt")
  sed "s|^    clientConfig:$|    clientConfig:\n      caBundle: $ca|" \
    "$SRC/config/webhook/manifests.yaml" >"$STACK_DIR/webhooks.yaml"
  stack_kubectl apply -f "$STACK_DIR/webhooks.yaml" >/dev/null
}

stack_up() {
  STACK_DIR=$1
  mkdir -p "$STACK_DIR" && rm -f "$STACK_DIR"/*.out "$STACK_DIR"/*.log
  bash "$SRC/certs/gen-dev-certs.sh" "$STACK_DIR/certs" >/dev/null 2>&1 || {
    echo "stack: cannot make certificates" >&2
    return 1
  }
  STACK_WEBHOOK_PORT=$(stack_free_port)
  STACK_HEALTH_PORT=$(stack_free_port)
  STACK_METRICS_PORT=$(stack_free_port)
  stack_start_sim kube-sim --port 0 --dir "$STACK_DIR/mgmt" \
    --service-override "capmaas-system/capmaas-webhook-service=127.0.0.1:$STACK_WEBHOOK_PORT" ||
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
  stack_capmaas_start || return 1
  stack_start_sim capi-sim --port 0 --kubeconfig "$STACK_KUBECONFIG" \
    --workload-kubeconfig "$STACK_WORKLOAD_KUBECONFIG" \
    --capi-contract "${STACK_CAPI_CONTRACT:-v1beta1}" || return 1
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
}
