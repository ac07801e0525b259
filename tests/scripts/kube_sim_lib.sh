# shellcheck shell=bash
# Helpers for the kube-sim script tests (sourced, not a test itself): start kube-sim on a
# free port in a temporary directory, run the real kubectl against it, count assertions.
#
#   ks_start [extra kube-sim args]   starts kube-sim; sets KS_DIR, KS_URL, KS_PID, KS_WORK
#   ks_maas_start KEY [args]         starts maas-sim (sample inventory); sets MAAS_URL, MAAS_PID
#   ks_capmaas_webhooks [args]       starts capmaas --webhooks-only on free ports; sets CM_PID,
#                                    CM_PORT, CM_LOG (stopped at exit)
#   ks_capmaas_stop                  stops it and counts a failure unless it exits cleanly
#   ks_webhooks_start CRD            starts kube-sim calling capmaas for the webhook Service,
#                                    installs our CRDs and the shipped webhook configurations
#   ks_manifest KIND NAME            the head of an infrastructure.cluster.x-k8s.io/v1beta1
#                                    object (through metadata.name) on stdout
#   wait_until SECONDS CMD...        polls CMD every 0.05 s until it succeeds (1 if it never does)
#   K ARGS...                        kubectl with the sim's kubeconfig and a private cache
#   check DESC EXPECTED_RC EXPECTED_REGEX -- CMD...   runs CMD, asserts rc and output
#   ks_finish                        stops kube-sim, checks a clean exit, prints the tally

KS_PASS=0
KS_FAIL=0
KS_PID=
MAAS_PID=
CM_PID=
KS_WORK=$(mktemp -d)
# shellcheck source=scripts/stack.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/stack.sh"

ks_stop_pid() { # ks_stop_pid PID: SIGTERM, then wait for it
  if [ -n "$1" ] && kill -0 "$1" 2>/dev/null; then
    kill "$1" 2>/dev/null
    wait "$1" 2>/dev/null
  fi
}
ks_cleanup() {
  ks_stop_pid "$CM_PID"
  ks_stop_pid "$MAAS_PID"
  ks_stop_pid "$KS_PID"
  rm -rf "$KS_WORK"
}
trap ks_cleanup EXIT

ks_need() {
  local b
  for b in "$@"; do
    if ! command -v "$b" >/dev/null 2>&1; then
      echo "SKIP: $b is not installed"
      echo "0 passed, 0 failed"
      exit 0
    fi
  done
}

ks_start() {
  KS_DIR=$KS_WORK/sim
  sim_start "$KS_WORK" kube-sim --port 0 --dir "$KS_DIR" "$@" || exit 1
  KS_PID=$SIM_PID
  KS_URL=$REPLY
  KS_LOG=$KS_WORK/kube-sim.$SIM_SEQ.log
}

ks_maas_start() { # KEY [maas-sim args]
  local key=$1
  shift
  sim_start "$KS_WORK" maas-sim --port 0 --inventory \
    "${CAPMAAS_SOURCE_DIR:?}/tests/sim/maas/inventory-sample.yaml" --api-key "$key" "$@" || exit 1
  MAAS_PID=$SIM_PID
  MAAS_URL=$REPLY
}

wait_until() { # wait_until SECONDS CMD...
  local i
  for i in $(seq 1 $(($1 * 20))); do
    "${@:2}" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  return 1
}

cm_port() { sed -n 's/.*"webhook_port":"\([0-9]*\)".*/\1/p' "$CM_LOG" | head -1; }
cm_listening() { [ -n "$(cm_port)" ]; }
ks_capmaas_webhooks() { # [capmaas args]: --webhooks-only with the test certs, every port 0
  CM_LOG=$KS_WORK/capmaas.log
  "${CAPMAAS_BIN:?CAPMAAS_BIN is not set}" --webhooks-only --webhook-port 0 \
    --webhook-host 127.0.0.1 --health-addr 127.0.0.1:0 --metrics-bind-addr 127.0.0.1:0 \
    --webhook-cert-dir "${CAPMAAS_TEST_CERTS:?}" "$@" 2>"$CM_LOG" &
  CM_PID=$!
  if ! wait_until 10 cm_listening; then
    echo "capmaas did not start:" >&2
    cat "$CM_LOG" >&2
    exit 1
  fi
  CM_PORT=$(cm_port)
}

ks_capmaas_stop() {
  local rc
  kill -TERM "$CM_PID"
  wait "$CM_PID"
  rc=$?
  CM_PID=
  if [ "$rc" -ne 0 ] || grep -Eq 'runtime error|AddressSanitizer|LeakSanitizer' "$CM_LOG"; then
    echo "not ok - capmaas exited with $rc"
    tail -n 20 "$CM_LOG" | sed 's/^/    | /'
    KS_FAIL=$((KS_FAIL + 1))
  fi
}

# ks_webhooks_start CRD: kube-sim sending the webhook Service's calls to capmaas on CM_PORT;
# checks that our CRDs apply (CRD, a plural, among those created) and get established (CRD and
# maasclusters), and that the shipped webhook configurations apply, with the test CA injected
# as cert-manager would. Sets M, a directory for the test's manifests.
ks_webhooks_start() {
  local crd=$1.infrastructure.cluster.x-k8s.io ca
  ks_start --service-override "capmaas-system/capmaas-webhook-service=127.0.0.1:$CM_PORT"
  M=$KS_WORK/manifests
  mkdir -p "$M"
  ca=$(base64 -w0 "${CAPMAAS_TEST_CERTS:?}/ca.crt")
  sed "s|^    clientConfig:$|    clientConfig:\n      caBundle: $ca|" \
    "${CAPMAAS_SOURCE_DIR:?}/config/webhook/manifests.yaml" >"$M/webhooks.yaml"
  check "apply the CRDs" 0 "$crd created" -- K apply -f "$CAPMAAS_SOURCE_DIR/config/crd/bases"
  check "CRDs established" 0 "condition met" -- \
    K wait --for=condition=Established "crd/$crd" \
    crd/maasclusters.infrastructure.cluster.x-k8s.io --timeout=10s
  check "apply the webhook configurations" 0 "validating-webhook-configuration created" -- \
    K apply -f "$M/webhooks.yaml"
}

ks_manifest() { # ks_manifest KIND NAME
  printf 'apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: %s\n' "$1"
  printf 'metadata:\n  name: %s\n' "$2"
}

K() {
  kubectl --kubeconfig "$KS_DIR/kubeconfig" --cache-dir "$KS_WORK/cache" --request-timeout=20s "$@"
}

ks_token() {
  sed -n 's/^ *token: //p' "$KS_DIR/kubeconfig"
}

# curl against the sim with the token: ks_curl METHOD PATH [curl args...]
ks_curl() {
  local m=$1 p=$2
  shift 2
  curl -sS --max-time 20 --cacert "$KS_DIR/ca.crt" -H "Authorization: Bearer $(ks_token)" \
    -X "$m" "$KS_URL$p" "$@"
}

check() {
  local desc=$1 want_rc=$2 want_re=$3 out rc
  shift 4
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -eq "$want_rc" ] && grep -Eq -- "$want_re" <<<"$out"; then
    KS_PASS=$((KS_PASS + 1))
    echo "ok - $desc"
  else
    KS_FAIL=$((KS_FAIL + 1))
    echo "not ok - $desc (rc=$rc, want $want_rc, want /$want_re/)"
    printf '%s\n' "$out" | sed 's/^/    | /' | head -20
  fi
}

ks_finish() {
  local rc
  kill -TERM "$KS_PID"
  for _ in $(seq 1 100); do
    kill -0 "$KS_PID" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$KS_PID" 2>/dev/null; then
    echo "kube-sim did not stop within 10 s of SIGTERM" >>"$KS_LOG"
    kill -KILL "$KS_PID"
  fi
  wait "$KS_PID"
  rc=$?
  KS_PID=
  if [ "$rc" -eq 0 ] && ! grep -Eq 'runtime error|AddressSanitizer|LeakSanitizer' \
    "$KS_LOG"; then
    KS_PASS=$((KS_PASS + 1))
    echo "ok - kube-sim exits cleanly on SIGTERM"
  else
    KS_FAIL=$((KS_FAIL + 1))
    echo "not ok - kube-sim exit status $rc"
    tail -30 "$KS_LOG" | sed 's/^/    | /'
  fi
  echo "$KS_PASS passed, $KS_FAIL failed"
  [ "$KS_FAIL" -eq 0 ]
}
