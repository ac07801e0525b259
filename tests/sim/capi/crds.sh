#!/usr/bin/env bash
# Prints tests/sim/capi/crds.yaml for one capi-sim contract (capi-sim --capi-contract):
#   crds.sh v1beta2   every kind served and stored as v1beta2 only (CAPI 1.11+)
#   crds.sh v1beta1   every kind served and stored as v1beta1 only (CAPI 1.10)
# kube-sim does not convert between CRD versions, so the other version is not served.
# crds.yaml itself serves both (storage v1beta1), for tests that write one shape to both.
set -euo pipefail
mode=${1:?usage: crds.sh v1beta2|v1beta1}
case $mode in v1beta2 | v1beta1) ;; *)
  echo "crds.sh: unknown contract $mode" >&2
  exit 2
  ;;
esac
awk -v want="$mode" '
  /^  - name: v1beta[12]$/ { cur = $3 }
  /^    served: / && cur != "" { sub(/served: .*/, "served: " (cur == want ? "true" : "false")) }
  /^    storage: / && cur != "" { sub(/storage: .*/, "storage: " (cur == want ? "true" : "false")); cur = "" }
  { print }
' "$(dirname "$0")/crds.yaml"
