#!/usr/bin/env bash
# Admission against the MAAS of the cluster a template names (docs/credentials.md, issue 21):
# two maas-sims, A (the process-wide MAAS_ENDPOINT) and B (named by a MaasCluster's
# spec.identityRef Secret). Pool "only-a" exists in A only, "only-b" in B only. A template
# labelled cluster.x-k8s.io/cluster-name=cb is checked against B: only-b is accepted, only-a
# denied; an unlabelled one is checked against A: only-a accepted, only-b denied. A cluster
# whose Secret is missing is admitted with the "MAAS checks skipped" warning naming it. The
# key of B never shows in capmaas's log.
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
ks_need kubectl base64 curl

: "${CAPMAAS_SOURCE_DIR:?CAPMAAS_SOURCE_DIR is not set}"
: "${CAPMAAS_TEST_CERTS:?CAPMAAS_TEST_CERTS is not set}"
: "${CAPMAAS_BUILD_DIR:?CAPMAAS_BUILD_DIR is not set}"
KEY_A=ck:tk:secret1
KEY_B=ckb-consumer-77:tkb-token-key-88:tsb-token-secret-99

ks_maas_start "$KEY_B"
B_URL=$MAAS_URL
B_PID=$MAAS_PID
trap 'ks_stop_pid "$B_PID"; ks_cleanup' EXIT
ks_maas_start "$KEY_A"
A_URL=$MAAS_URL

add_pool() { # add_pool MAAS_URL POOL SYSTEM_ID: a pool with one machine
  curl -sf -X POST -H 'Content-Type: application/json' -d "{\"name\":\"$2\"}" \
    "${1%/MAAS}/_sim/pools" >/dev/null &&
    curl -sf -X POST -H 'Content-Type: application/json' \
      -d "{\"system_id\":\"$3\",\"cpu_count\":4,\"memory\":8192,\"pool\":\"$2\"}" \
      "${1%/MAAS}/_sim/machines" >/dev/null
}
add_pool "$A_URL" only-a onlya1 || exit 1
add_pool "$B_URL" only-b onlyb1 || exit 1

# capmaas starts before kube-sim (which calls it): its kubeconfig appears at $KS_WORK/sim
MAAS_ENDPOINT=$A_URL MAAS_API_KEY=$KEY_A ks_capmaas_webhooks --maas-inventory-interval 1s \
  --kubeconfig "$KS_WORK/sim/kubeconfig"
ks_webhooks_start maasmachinetemplates

secret() { # secret NAME ENDPOINT KEY
  printf 'apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\ndata:\n' "$1"
  printf '  endpoint: %s\n  apiKey: %s\n' "$(printf %s "$2" | base64 -w0)" \
    "$(printf %s "$3" | base64 -w0)"
}
maascluster() { # maascluster NAME SECRET
  ks_manifest MaasCluster "$1"
  printf '  labels:\n    cluster.x-k8s.io/cluster-name: %s\n' "$1"
  printf 'spec:\n  dnsDomain: maas\n  identityRef:\n    kind: Secret\n    name: %s\n' "$2"
}
template() { # template NAME CLUSTER POOL: a MaasMachineTemplate (CLUSTER "" = no label)
  ks_manifest MaasMachineTemplate "$1"
  [ -n "$2" ] && printf '  labels:\n    cluster.x-k8s.io/cluster-name: %s\n' "$2"
  printf 'spec:\n  template:\n    spec:\n      image: ubuntu/jammy\n      minCPU: 2\n'
  printf '      minMemory: 4096\n      resourcePool: %s\n' "$3"
}

secret maas-b "$B_URL" "$KEY_B" >"$M/secret.yaml"
check "the identity Secret is created" 0 "secret/maas-b created" -- K apply -f "$M/secret.yaml"
maascluster cb maas-b >"$M/cb.yaml"
check "a MaasCluster naming it is admitted" 0 "maascluster.infrastructure.cluster.x-k8s.io/cb created" -- \
  K apply -f "$M/cb.yaml"
maascluster cn missing-secret >"$M/cn.yaml"
check "a MaasCluster naming a missing Secret is admitted" 0 "cn created" -- K apply -f "$M/cn.yaml"

# B's inventory is loaded on the first use: a dry run until its verdicts come
denied_b() { ! K apply --dry-run=server -f "$M/t-b-a.yaml" >/dev/null 2>&1; }
template t-b-a cb only-a >"$M/t-b-a.yaml"
if ! wait_until 20 denied_b; then
  echo "not ok - B's inventory never judged a template" >&2
  cat "$CM_LOG" >&2
fi
check "labelled cb: a pool only the default MAAS has is denied" 1 \
  'spec.template.spec.resourcePool: Invalid value: "only-a": no such resource pool in MAAS' -- \
  K apply -f "$M/t-b-a.yaml"
template t-b-b cb only-b >"$M/t-b-b.yaml"
check "labelled cb: a pool of cb's MAAS is accepted" 0 \
  "maasmachinetemplate.infrastructure.cluster.x-k8s.io/t-b-b created" -- K apply -f "$M/t-b-b.yaml"
template t-a-b "" only-b >"$M/t-a-b.yaml"
check "unlabelled: a pool only cb's MAAS has is denied (the default MAAS)" 1 \
  'spec.template.spec.resourcePool: Invalid value: "only-b": no such resource pool in MAAS' -- \
  K apply -f "$M/t-a-b.yaml"
template t-a-a "" only-a >"$M/t-a-a.yaml"
check "unlabelled: a pool of the default MAAS is accepted" 0 \
  "maasmachinetemplate.infrastructure.cluster.x-k8s.io/t-a-a created" -- K apply -f "$M/t-a-a.yaml"
template t-n cn only-b >"$M/t-n.yaml"
check "labelled with a cluster whose Secret is missing: admitted with a warning naming it" 0 \
  'Warning: MAAS checks skipped: Secret .*/missing-secret named by the cluster.s spec.identityRef does not exist' -- \
  K apply -f "$M/t-n.yaml"

check "the key of B is in no log record" 1 '' -- grep -Eq 'ckb-consumer-77|tkb-token-key-88|tsb-token-secret-99' "$CM_LOG"
ks_capmaas_stop
ks_finish
