#!/usr/bin/env bash
# The container image (scripts/image): two builds with one SOURCE_DATE_EPOCH give the same
# archive and manifest digest; umoci unpacks it; the root filesystem is at most 20 MB, owned
# 0:0, with no shell or package manager; the config runs /capmaas as 65532:65532; and the
# unpacked root really works: chroot as 65532 runs `capmaas --version`, then serves the
# webhooks over TLS on loopback and answers an AdmissionReview posted by curl from the host.
# Needs root (chroot, chown); exits 77 (skipped) otherwise.
#
# environment: CAPMAAS_IMAGE_BIN  a Release capmaas to package (default: build build-img)
# The check functions run through expect and wait_for, cleanup through the trap:
# shellcheck disable=SC2317
set -uo pipefail
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: tests/image needs root (chroot --userspec, chown)"
  exit 77
fi
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=scripts/deps.sh
. "$src/scripts/deps.sh"
capmaas_ensure_packages "${CAPMAAS_IMAGE_PACKAGES[@]}" "${CAPMAAS_IMAGE_TEST_PACKAGES[@]}" ||
  exit 1

pass=0
fail=0
pid=
work=$(mktemp -d)
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT

ok() {
  echo "ok   $1"
  pass=$((pass + 1))
}
bad() {
  echo "FAIL $1${2:+: $2}"
  fail=$((fail + 1))
}
# expect DESC CMD...: CMD must succeed
expect() {
  local desc=$1 out
  shift
  if out=$("$@" 2>&1); then ok "$desc"; else bad "$desc" "$out"; fi
}
# wait_for SECONDS CMD...: polls CMD every 0.1 s; 1 if it never succeeds
wait_for() {
  local end=$((SECONDS + $1))
  shift
  until "$@"; do
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 0.1
  done
}
finish() {
  echo "tests/image: $pass passed, $fail failed"
  [ "$fail" -eq 0 ]
  exit
}

version=$(sed -n 's/^project(capmaas VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
# One binary and one set of inputs for both builds, so that work going on in the checkout
# meanwhile (a commit, an edited source) cannot tell the two apart.
export SOURCE_DATE_EPOCH=1700000000
CAPMAAS_IMAGE_REVISION=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)
export CAPMAAS_IMAGE_REVISION
if [ -n "${CAPMAAS_IMAGE_BIN:-}" ]; then
  cp "$CAPMAAS_IMAGE_BIN" "$work/capmaas-bin"
else
  build=$src/build-img
  if ! { cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF &&
    cmake --build "$build" -j"$(nproc)" --target capmaas; } >"$work/build.log" 2>&1; then
    cat "$work/build.log"
    bad "Release build of capmaas"
    finish
  fi
  cp "$build/capmaas" "$work/capmaas-bin"
fi
export CAPMAAS_IMAGE_BIN=$work/capmaas-bin

digest=()
for run in 1 2; do
  start=$(date +%s%N)
  if ! CAPMAAS_IMAGE_OUT=$work/out$run "$src/scripts/image" >"$work/image$run.log" 2>&1; then
    cat "$work/image$run.log"
    bad "scripts/image (build $run)"
    finish
  fi
  ms=$((($(date +%s%N) - start) / 1000000))
  digest+=("$(sed -n 's/^manifest: *//p' "$work/image$run.log")")
  echo "build $run: ${digest[-1]} in $ms ms"
done
archive=$work/out1/capmaas-$version.oci.tar
if [ -n "${digest[0]}" ] && [ "${digest[0]}" = "${digest[1]}" ]; then
  ok "two builds give the same manifest digest ${digest[0]}"
else
  bad "two builds give the same manifest digest" "${digest[*]}"
fi
expect "the two archives are identical byte for byte" \
  cmp "$archive" "$work/out2/capmaas-$version.oci.tar"
echo "archive: $(stat -c %s "$archive") bytes"

mkdir "$work/layout"
tar -xf "$archive" -C "$work/layout"
expect "umoci unpacks the image (digests verified)" \
  umoci unpack --image "$work/layout:v$version" "$work/bundle"
root=$work/bundle/rootfs
[ -x "$root/capmaas" ] || {
  bad "the unpacked root holds /capmaas"
  finish
}

size=$(find "$root" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
echo "rootfs: $size bytes uncompressed ($(find "$root" -type f | wc -l) files)"
if [ "$size" -le 20000000 ]; then ok "root filesystem $size bytes <= 20 MB"; else
  bad "root filesystem $size bytes <= 20 MB"; fi

config_check() {
  python3 - "$work/bundle/config.json" "$work/layout" "$version" <<'EOF'
import json, sys
rt = json.load(open(sys.argv[1]))
user, args = rt["process"]["user"], rt["process"]["args"]
assert (user["uid"], user["gid"]) == (65532, 65532), user
assert args == ["/capmaas"], args
index = json.load(open(sys.argv[2] + "/index.json"))
m = index["manifests"][0]
assert m["annotations"]["org.opencontainers.image.ref.name"] == "v" + sys.argv[3], m
blob = lambda d: json.load(open(sys.argv[2] + "/blobs/sha256/" + d.split(":")[1]))
cfg = blob(blob(m["digest"])["config"]["digest"])
assert cfg["config"]["User"] == "65532:65532", cfg["config"]
assert cfg["config"]["Entrypoint"] == ["/capmaas"], cfg["config"]
assert cfg["created"] == "2023-11-14T22:13:20Z", cfg["created"]
assert cfg["config"]["Labels"]["org.opencontainers.image.version"] == sys.argv[3]
EOF
}
expect "config: entrypoint /capmaas, user 65532:65532, created = SOURCE_DATE_EPOCH, labels" \
  config_check

layer_times() { # every entry of the layer has mtime SOURCE_DATE_EPOCH and owner 0/0
  local blob
  blob=$(python3 -c 'import json,sys; d=sys.argv[1]; i=json.load(open(d+"/index.json"))
m=json.load(open(d+"/blobs/sha256/"+i["manifests"][0]["digest"][7:]))
print(d+"/blobs/sha256/"+m["layers"][0]["digest"][7:])' "$work/layout")
  [ -z "$(TZ=UTC tar -tvzf "$blob" --full-time | awk '$2 != "0/0" || $4" "$5 != "2023-11-14 22:13:20"')" ]
}
expect "layer entries: owner 0/0, mtime SOURCE_DATE_EPOCH" layer_times

no_tools() { # no shell, no package manager, no symbolic links, nothing in a bin directory
  local found
  found=$(find "$root" \( -name sh -o -name bash -o -name dash -o -name busybox -o \
    -name 'apt*' -o -name 'dpkg*' -o -type l -o -path '*/bin/*' \) -print)
  if [ -e "$root/bin/sh" ] || [ -n "$found" ]; then
    echo "/bin/sh or: $found"
    return 1
  fi
}
expect "no /bin/sh, no shell, package manager or symbolic link in the root" no_tools
expect "CA bundle at /etc/ssl/certs/ca-certificates.crt" test -s "$root/etc/ssl/certs/ca-certificates.crt"
expect "/etc/passwd and /etc/group name 65532 nonroot" \
  grep -q '^nonroot:x:65532:65532:' "$root/etc/passwd"
expect "/etc/group names 65532" grep -q '^nonroot:x:65532:' "$root/etc/group"
libcurl=$(sed -n 's/^#define CAPMAAS_CURL_SONAME "\(.*\)"$/\1/p' "$src/base/curl_lib.c")
expect "the dlopen'ed $libcurl is in the root" \
  test -n "$(find "$root" -name "$libcurl" -type f)"

got=$(chroot --userspec=65532:65532 "$root" /capmaas --version 2>&1)
if [ "$got" = "capmaas $version" ]; then ok "chroot as 65532: /capmaas --version = $got"; else
  bad "chroot as 65532: /capmaas --version" "$got"; fi

# The webhooks from inside the root, as 65532, with certificates only 65532 can read.
bash "$src/certs/gen-dev-certs.sh" "$work/certs" >/dev/null
mkdir -m 0755 "$root/certs"
install -o 65532 -g 65532 -m 0444 "$work/certs/tls.crt" "$root/certs/tls.crt"
install -o 65532 -g 65532 -m 0400 "$work/certs/tls.key" "$root/certs/tls.key"
log=$work/capmaas.log
chroot --userspec=65532:65532 "$root" /capmaas --webhooks-only --webhook-host 127.0.0.1 \
  --webhook-port 0 --health-addr 127.0.0.1:0 --diagnostics-address 0 \
  --webhook-cert-dir /certs 2>"$log" &
pid=$!
port_of() { sed -n 's/.*"webhook_port":"\([0-9]*\)".*/\1/p' "$log" | head -1; }
listening() { [ -n "$(port_of)" ]; }
if ! wait_for 10 listening; then
  cat "$log"
  bad "capmaas --webhooks-only starts in the chroot"
  finish
fi
port=$(port_of)
ok "capmaas --webhooks-only serves on 127.0.0.1:$port in the chroot"
expect "the server runs as UID 65532" test "$(stat -c %u "/proc/$pid")" = 65532

uid=6f0b6c39-0d1e-4a6b-8d1c-1a2b3c4d5e6f
cat >"$work/review.json" <<EOF
{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
 "uid":"$uid","operation":"CREATE",
 "kind":{"group":"infrastructure.cluster.x-k8s.io","version":"v1beta1","kind":"MaasMachine"},
 "resource":{"group":"infrastructure.cluster.x-k8s.io","version":"v1beta1","resource":"maasmachines"},
 "name":"m1","namespace":"default",
 "object":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"MaasMachine",
  "metadata":{"name":"m1","namespace":"default"},
  "spec":{"image":"ubuntu/jammy","minCPU":2,"minMemory":4096}}}}
EOF
answer=$(curl -sS --max-time 10 --cacert "$work/certs/ca.crt" -o "$work/answer.json" \
  -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$work/review.json" \
  "https://127.0.0.1:$port/validate-infrastructure-cluster-x-k8s-io-v1beta1-maasmachine" 2>&1)
review_check() {
  python3 - "$work/answer.json" "$uid" <<'EOF'
import json, sys
a = json.load(open(sys.argv[1]))
assert a["apiVersion"] == "admission.k8s.io/v1" and a["kind"] == "AdmissionReview", a
assert a["response"]["uid"] == sys.argv[2], a
assert a["response"]["allowed"] is True, a
EOF
}
if [ "$answer" = 200 ] && review_check; then
  ok "TLS AdmissionReview from the host: 200, allowed, uid echoed"
  echo "     $(cat "$work/answer.json")"
else
  bad "TLS AdmissionReview from the host" "$answer $(cat "$work/answer.json" 2>/dev/null)"
fi

kill -TERM "$pid"
stopped() { ! kill -0 "$pid" 2>/dev/null; }
if wait_for 10 stopped; then
  wait "$pid"
  rc=$?
  pid=
  if [ "$rc" -eq 0 ]; then ok "SIGTERM: capmaas stops, exit 0"; else
    bad "SIGTERM: capmaas stops, exit 0" "exit $rc"; fi
else
  bad "SIGTERM: capmaas stops within 10 s"
fi
if grep -q '"level":"error"' "$log"; then bad "no error in the server log" "$(cat "$log")"; else
  ok "no error in the server log"; fi
finish
