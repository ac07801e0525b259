#!/usr/bin/env bash
# kube-sim's authentication and authorization APIs through the real kubectl, as a user of a
# real API server sees them: kubectl create token, TokenReview and SubjectAccessReview with
# kubectl create -f (status filled in, never stored: get is 405), their 400 and 422 errors,
# kubectl auth can-i --as against the shipped RBAC (config/rbac's review role for the
# manager, config/prometheus's metrics-reader role for a scraper); then capmaas's secure
# /metrics scraped with curl and the token kubectl minted.
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
ks_need kubectl curl openssl
SRC=${CAPMAAS_SOURCE_DIR:?CAPMAAS_SOURCE_DIR is not set}
ks_start
SA=system:serviceaccount:default

two_sas() { K create sa prometheus && K create sa nobody; }
check "create two ServiceAccounts" 0 'serviceaccount/nobody created' -- two_sas
TOKEN=$(K create token prometheus --duration=1h)
NOBODY=$(K create token nobody)
minted() { [ -n "$TOKEN" ] && echo minted; }
check "kubectl create token mints a token" 0 '^minted$' -- minted
check "a token for a missing ServiceAccount is 404" 1 'serviceaccounts "ghost" not found' -- \
  K create token ghost

review() { # review TOKEN: a TokenReview through kubectl create -f -
  printf 'apiVersion: authentication.k8s.io/v1\nkind: TokenReview\nspec:\n  token: "%s"\n' "$1" |
    K create -f - -o jsonpath='{.status.authenticated}/{.status.user.username}/{.status.user.groups}'
}
check "TokenReview authenticates the ServiceAccount's token" 0 \
  "^true/$SA:prometheus/.*system:serviceaccounts:default" -- review "$TOKEN"
check "TokenReview of a bad token: not authenticated" 0 '^//$' -- review not-a-token
tokenless() { printf 'apiVersion: authentication.k8s.io/v1\nkind: TokenReview\nspec: {}\n' | K create -f -; }
check "TokenReview without a token is 400" 1 'token is required for TokenReview' -- tokenless
check "reviews are not stored: get is 405" 1 'MethodNotAllowed' -- K get tokenreviews

check "apply config/prometheus's metrics-reader role" 0 'capmaas-metrics-reader created' -- \
  K apply -f "$SRC/config/prometheus/metrics_reader_role.yaml"
check "bind it to the scraper" 0 'created' -- K create clusterrolebinding scrape \
  --clusterrole=capmaas-metrics-reader --serviceaccount=default:prometheus
sar() { # sar USER: may USER get /metrics?
  printf 'apiVersion: authorization.k8s.io/v1\nkind: SubjectAccessReview\nspec:\n  user: %s\n  nonResourceAttributes: {path: /metrics, verb: get}\n' "$1" |
    K create -f - -o jsonpath='{.status.allowed} {.status.reason}'
}
check "SubjectAccessReview allows the bound scraper" 0 \
  '^true RBAC: allowed by ClusterRoleBinding "scrape" of ClusterRole "capmaas-metrics-reader"' \
  -- sar "$SA:prometheus"
check "... and not another user" 0 '^false' -- sar "$SA:nobody"
attrless() { printf 'apiVersion: authorization.k8s.io/v1\nkind: SubjectAccessReview\nspec: {user: u}\n' | K create -f -; }
check "a SubjectAccessReview without attributes is 422" 1 \
  'spec.resourceAttributes: Required value: exactly one of nonResourceAttributes or resourceAttributes' -- \
  attrless
check "kubectl auth can-i --as the scraper" 0 '^yes' -- \
  K auth can-i get /metrics --as="$SA:prometheus"
check "kubectl auth can-i --as another" 1 '^no' -- K auth can-i get /metrics --as="$SA:nobody"

# The manager's review role as config/default installs it
kubectl kustomize "$SRC/config/default" >"$KS_WORK/components.yaml"
/usr/bin/python3 - "$KS_WORK/components.yaml" >"$KS_WORK/auth.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
keep = [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")
        and d["metadata"]["name"].startswith("capmaas-metrics-auth")]
print(yaml.safe_dump_all(keep))
PY
check "apply config/default's review role" 0 'capmaas-metrics-auth-rolebinding created' -- \
  K apply -f "$KS_WORK/auth.yaml"
MGR=system:serviceaccount:capmaas-system:capmaas-manager
check "the manager may create TokenReviews" 0 '^yes' -- \
  K auth can-i create tokenreviews.authentication.k8s.io --as="$MGR"
check "the manager may create SubjectAccessReviews" 0 '^yes' -- \
  K auth can-i create subjectaccessreviews.authorization.k8s.io --as="$MGR"
check "... and nothing else through that role" 1 '^no' -- \
  K auth can-i create selfsubjectaccessreviews.authorization.k8s.io --as="$MGR"

# capmaas's secure /metrics, scraped as Prometheus would
ks_capmaas_webhooks --kubeconfig "$KS_DIR/kubeconfig" --diagnostics-address 127.0.0.1:0
DPORT=$(sed -n 's/.*"diagnostics_port":"\([0-9]*\)".*/\1/p' "$CM_LOG" | head -1)
scrape() { # scrape [TOKEN]: the status code
  curl -sS -o /dev/null -w '%{http_code}' --cacert "$CAPMAAS_TEST_CERTS/ca.crt" \
    ${1:+-H "Authorization: Bearer $1"} "https://127.0.0.1:$DPORT/metrics"
}
check "no token: 401" 0 '^401$' -- scrape
check "a token without the role: 403" 0 '^403$' -- scrape "$NOBODY"
check "the scraper's token: 200" 0 '^200$' -- scrape "$TOKEN"
check "plain HTTP is refused" 0 '^000$' -- \
  sh -c "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$DPORT/metrics; true"
check "the tokens never reach capmaas's log" 1 '' -- grep -qF -e "$TOKEN" -e "$NOBODY" "$CM_LOG"
ks_capmaas_stop
ks_finish
