# shellcheck shell=bash
# Helpers for the kube-sim script tests (sourced, not a test itself): start kube-sim on a
# free port in a temporary directory, run the real kubectl against it, count assertions.
#
#   ks_start [extra kube-sim args]   starts kube-sim; sets KS_DIR, KS_URL, KS_PID, KS_WORK
#   K ARGS...                        kubectl with the sim's kubeconfig and a private cache
#   check DESC EXPECTED_RC EXPECTED_REGEX -- CMD...   runs CMD, asserts rc and output
#   ks_finish                        stops kube-sim, checks a clean exit, prints the tally

KS_PASS=0
KS_FAIL=0
KS_PID=
KS_WORK=$(mktemp -d)

ks_cleanup() {
  if [ -n "$KS_PID" ] && kill -0 "$KS_PID" 2>/dev/null; then
    kill "$KS_PID" 2>/dev/null
    wait "$KS_PID" 2>/dev/null
  fi
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
  local sim=${CAPMAAS_BUILD_DIR:?CAPMAAS_BUILD_DIR is not set}/kube-sim
  KS_DIR=$KS_WORK/sim
  "$sim" --port 0 --dir "$KS_DIR" "$@" >"$KS_WORK/stdout" 2>"$KS_WORK/stderr" &
  KS_PID=$!
  for _ in $(seq 1 200); do
    if grep -q '^listening on ' "$KS_WORK/stdout" 2>/dev/null; then
      KS_URL=$(sed -n 's/^listening on //p' "$KS_WORK/stdout" | head -1)
      return 0
    fi
    kill -0 "$KS_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "kube-sim did not start:" >&2
  cat "$KS_WORK/stderr" >&2
  exit 1
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
  if [ "$rc" -eq "$want_rc" ] && printf '%s\n' "$out" | grep -Eq -- "$want_re"; then
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
    echo "kube-sim did not stop within 10 s of SIGTERM" >>"$KS_WORK/stderr"
    kill -KILL "$KS_PID"
  fi
  wait "$KS_PID"
  rc=$?
  KS_PID=
  if [ "$rc" -eq 0 ] && ! grep -Eq 'runtime error|AddressSanitizer|LeakSanitizer' \
    "$KS_WORK/stderr"; then
    KS_PASS=$((KS_PASS + 1))
    echo "ok - kube-sim exits cleanly on SIGTERM"
  else
    KS_FAIL=$((KS_FAIL + 1))
    echo "not ok - kube-sim exit status $rc"
    tail -30 "$KS_WORK/stderr" | sed 's/^/    | /'
  fi
  echo "$KS_PASS passed, $KS_FAIL failed"
  [ "$KS_FAIL" -eq 0 ]
}
