# shellcheck shell=bash
# What the end-to-end scripts share, once stack_up has run (sourced after kube_sim_lib.sh):
#   k ARGS...              kubectl on the management cluster
#   wk ARGS...             kubectl on the workload cluster
#   within SECONDS CMD...  CMD until it succeeds, for at most SECONDS of wall time
#   mm_json                the MaasMachines as JSON
#   n_ready_is N           exactly N MaasMachines, every one status.ready
#   cluster_ready          MaasCluster demo's Ready condition is True
# A script that needs another shape defines its own after sourcing this file.

k() { stack_kubectl "$@"; }
wk() { kubectl --kubeconfig "$STACK_WORKLOAD_KUBECONFIG" "$@"; }
within() {
  local end=$(($(date +%s) + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || return 1
    sleep 0.25
  done
}
mm_json() { k get maasmachines -o json; }
n_ready_is() {
  mm_json | /usr/bin/python3 -c 'import json,sys
i=json.load(sys.stdin)["items"]
sys.exit(0 if len(i)==int(sys.argv[1]) and all(x.get("status",{}).get("ready") for x in i) else 1)' "$1"
}
cluster_ready() {
  [ "$(k get maascluster demo -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
