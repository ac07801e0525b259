#!/usr/bin/env bash
# Admission that knows MAAS, as a user sees it (beyond.md B1): kubectl apply through kube-sim
# and the shipped webhook manifests to the real capmaas, whose inventory cache reads a real
# maas-sim with the sample inventory. A template with an unknown tag, pool or image or more
# CPUs than any machine has is denied at once with the field named; a valid one is created;
# a pool added to MAAS at run time is accepted on the next apply; with MAAS stopped the apply
# succeeds with the "MAAS checks skipped" warning.
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
ks_need kubectl base64 curl

: "${CAPMAAS_SOURCE_DIR:?CAPMAAS_SOURCE_DIR is not set}"
: "${CAPMAAS_TEST_CERTS:?CAPMAAS_TEST_CERTS is not set}"
: "${CAPMAAS_BUILD_DIR:?CAPMAAS_BUILD_DIR is not set}"
KEY=ck:tk:secret1
ks_maas_start "$KEY"
SIM_ROOT=${MAAS_URL%/MAAS}
MAAS_ENDPOINT=$MAAS_URL MAAS_API_KEY=$KEY ks_capmaas_webhooks --maas-inventory-interval 1s
if ! wait_until 10 grep -q 'MAAS inventory refreshed' "$CM_LOG"; then
  echo "capmaas did not load the MAAS inventory:" >&2
  cat "$CM_LOG" >&2
  exit 1
fi

ks_webhooks_start maasmachinetemplates

template() { # template NAME SPEC-LINES...: a MaasMachineTemplate manifest on stdout
  ks_manifest MaasMachineTemplate "$1"
  printf 'spec:\n  template:\n    spec:\n'
  printf '      %s\n' "${@:2}"
}

template cp-good 'image: custom/u-2204-0-k-1264-0' 'minCPU: 8' 'minMemory: 16384' \
  'resourcePool: capi' 'tags: [control-plane]' >"$M/good.yaml"
check "a template MAAS can satisfy is created" 0 \
  "maasmachinetemplate.infrastructure.cluster.x-k8s.io/cp-good created" -- K apply -f "$M/good.yaml"

# First, while no name miss has used the (at most once per 10 s) synchronous refresh.
template cp-late 'image: ubuntu/jammy' 'minCPU: 2' 'minMemory: 4096' 'resourcePool: late-pool' \
  >"$M/late.yaml"
curl -sf -X POST -H 'Content-Type: application/json' -d '{"name":"late-pool"}' \
  "$SIM_ROOT/_sim/pools" >/dev/null
curl -sf -X POST -H 'Content-Type: application/json' \
  -d '{"system_id":"late01","cpu_count":4,"memory":8192,"pool":"late-pool"}' \
  "$SIM_ROOT/_sim/machines" >/dev/null
check "a pool added to MAAS a moment ago is accepted" 0 \
  "maasmachinetemplate.infrastructure.cluster.x-k8s.io/cp-late created" -- K apply -f "$M/late.yaml"

template cp-tag 'image: ubuntu/jammy' 'minCPU: 2' 'minMemory: 4096' 'tags: [control-plane, nvme]' \
  >"$M/tag.yaml"
check "kubectl prints the denial of an unknown tag" 1 \
  'The MaasMachineTemplate "cp-tag" is invalid: spec.template.spec.tags\[1\]: Invalid value: "nvme": no such tag in MAAS \(known: control-plane, gpu, ssd, virtual\)' -- \
  K apply -f "$M/tag.yaml"
check "the denied template was not stored" 1 'not found' -- K get maasmachinetemplate cp-tag

template cp-big 'image: ubuntu/jammy' 'minCPU: 64' 'minMemory: 4096' 'resourcePool: capi' \
  >"$M/big.yaml"
check "kubectl prints the best MAAS has" 1 \
  'spec.template.spec.minCPU: Invalid value: 64: no machine in pool "capi" has more than 16 CPUs' -- \
  K apply -f "$M/big.yaml"

template cp-img 'image: custom/u-2404' 'minCPU: 2' 'minMemory: 4096' >"$M/img.yaml"
check "kubectl prints the denial of an image MAAS does not have" 1 \
  'spec.template.spec.image: Invalid value: "custom/u-2404": no such boot resource in MAAS' -- \
  K apply -f "$M/img.yaml"

ks_stop_pid "$MAAS_PID"
MAAS_PID=
template cp-down 'image: ubuntu/jammy' 'minCPU: 2' 'minMemory: 4096' 'resourcePool: gone-pool' \
  >"$M/down.yaml"
# The background refresh (every second here) notices that MAAS is gone.
MPORT=$(sed -n 's/.*"metrics_port":"\([0-9]*\)".*/\1/p' "$CM_LOG" | head -1)
for _ in $(seq 1 100); do
  curl -s "http://127.0.0.1:$MPORT/metrics" |
    grep -Eq '^capmaas_maas_inventory_refresh_errors_total\{reason="unreachable"\} [1-9]' && break
  sleep 0.1
done
check "with MAAS stopped the apply succeeds with a warning" 0 \
  'Warning: MAAS checks skipped: MAAS is unreachable' -- K apply -f "$M/down.yaml"
check "... and the object is stored" 0 "cp-down" -- K get maasmachinetemplate cp-down

ks_capmaas_stop
ks_finish
