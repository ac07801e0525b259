#!/usr/bin/env bash
# config/prometheus: the kustomization renders, promtool accepts the PrometheusRule's
# groups, and promtool's rule unit tests show the alerts firing (and not firing) on the
# series capmaas exports. (Whether capmaas really exports every series the rules use is
# checked by the end-to-end test against a running capmaas.) Needs promtool (Debian's
# prometheus package; .ci/run installs it).
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
ks_need kubectl promtool
SRC=${CAPMAAS_SOURCE_DIR:?CAPMAAS_SOURCE_DIR is not set}
OUT=$KS_WORK/prometheus.yaml

check "config/prometheus renders" 0 '' -- kubectl kustomize "$SRC/config/prometheus" -o "$OUT"
check "a metrics-reader ClusterRole, a Service, a ServiceMonitor and a PrometheusRule" 0 \
  '^ClusterRole PrometheusRule Service ServiceMonitor$' -- \
  /usr/bin/python3 -c 'import sys, yaml
print(" ".join(sorted(d["kind"] for d in yaml.safe_load_all(open(sys.argv[1])) if d)))' "$OUT"
check "the ServiceMonitor scrapes the Service's https port with a token, verifying TLS" 0 '^ok$' -- \
  /usr/bin/python3 -c 'import sys, yaml
docs = {d["kind"]: d for d in yaml.safe_load_all(open(sys.argv[1])) if d}
ep = docs["ServiceMonitor"]["spec"]["endpoints"][0]
port = docs["Service"]["spec"]["ports"][0]
ok = (ep["scheme"] == "https" and ep["port"] == port["name"] and port["port"] == 8443
      and ep["bearerTokenFile"].endswith("/serviceaccount/token")
      and not ep["tlsConfig"].get("insecureSkipVerify") and ep["tlsConfig"]["ca"]["secret"]["key"] == "ca.crt"
      and {"nonResourceURLs": ["/metrics"], "verbs": ["get"]} in docs["ClusterRole"]["rules"])
print("ok" if ok else "FAIL")' "$OUT"
/usr/bin/python3 -c 'import sys, yaml
rule = next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "PrometheusRule")
yaml.safe_dump(rule["spec"], open(sys.argv[2], "w"))' "$OUT" "$KS_WORK/rules.yml"
check "promtool accepts the rules" 0 'SUCCESS' -- promtool check rules "$KS_WORK/rules.yml"

cat >"$KS_WORK/rules_test.yml" <<'EOF'
rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  # Neither replica leads for more than 5 minutes: critical. One leading: quiet.
  - interval: 1m
    input_series:
      - series: 'leader_election_master_status{name="controller-leader-election-capmaas",pod="a"}'
        values: '0x10'
      - series: 'leader_election_master_status{name="controller-leader-election-capmaas",pod="b"}'
        values: '0x10'
      - series: 'leader_election_master_status{name="other-lease",pod="c"}'
        values: '1x10'
    alert_rule_test:
      - eval_time: 3m
        alertname: CapmaasNoLeader
        exp_alerts: []
      - eval_time: 8m
        alertname: CapmaasNoLeader
        exp_alerts:
          - exp_labels: {severity: critical}
            exp_annotations:
              summary: No capmaas replica holds the leader Lease
              description: >-
                No replica has led for 5 minutes, so no MaasMachine or MaasCluster is
                reconciled: new machines are not allocated and deleted ones not released.
  - interval: 1m
    input_series:
      - series: 'leader_election_master_status{name="controller-leader-election-capmaas",pod="a"}'
        values: '0x10'
      - series: 'leader_election_master_status{name="controller-leader-election-capmaas",pod="b"}'
        values: '1x10'
    alert_rule_test:
      - eval_time: 8m
        alertname: CapmaasNoLeader
        exp_alerts: []
  # The certificate expires 3 days after the start: firing after the hour it must hold.
  # Another with 30 days left stays quiet.
  - interval: 1m
    input_series:
      - series: 'capmaas_webhook_certificate_expiry_timestamp_seconds{pod="a"}'
        values: '259200x150'
      - series: 'capmaas_webhook_certificate_expiry_timestamp_seconds{pod="b"}'
        values: '2592000x150'
    alert_rule_test:
      - eval_time: 30m
        alertname: CapmaasWebhookCertificateExpiring
        exp_alerts: []
      - eval_time: 2h
        alertname: CapmaasWebhookCertificateExpiring
        exp_alerts:
          - exp_labels: {severity: warning, pod: a}
            exp_annotations:
              summary: capmaas's webhook serving certificate expires within 7 days
              description: >-
                cert-manager renews it well before this; if it has not, check the Certificate
                capmaas-serving-cert. A value of 0 means no certificate is loaded.
  # Half of the MAAS calls fail (503) for half an hour.
  - interval: 1m
    input_series:
      - series: 'capmaas_maas_requests_total{op="get_machine",code="200"}'
        values: '0+10x40'
      - series: 'capmaas_maas_requests_total{op="get_machine",code="503"}'
        values: '0+10x40'
    alert_rule_test:
      - eval_time: 10m
        alertname: CapmaasMAASErrors
        exp_alerts: []
      - eval_time: 35m
        alertname: CapmaasMAASErrors
        exp_alerts:
          - exp_labels: {severity: warning}
            exp_annotations:
              summary: MAAS is failing capmaas's requests
              description: >-
                More than a fifth of the calls to MAAS failed over 15 minutes
                (capmaas_maas_requests_total by op and code shows which).
EOF
check "the alerts fire on the series capmaas exports, and only then" 0 'SUCCESS' -- \
  promtool test rules "$KS_WORK/rules_test.yml"
echo "$KS_PASS passed, $KS_FAIL failed"
[ "$KS_FAIL" -eq 0 ]
