#!/usr/bin/env bash
# config/prometheus: the kustomization renders, promtool accepts the PrometheusRule's
# groups, and promtool's rule unit tests show the alerts firing (and not firing) on the
# series capmaas exports. config/grafana: the dashboard's ConfigMap and its queries. (Whether capmaas really exports every series the rules use is
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
  # One deploy fails at minute 3: the alert fires at once, naming the reason; the other
  # reasons, at zero, stay quiet.
  - interval: 1m
    input_series:
      - series: 'capmaas_maas_deploy_failures_total{reason="DeployFailed"}'
        values: '0 0 0 1 1 1 1 1 1 1'
      - series: 'capmaas_maas_deploy_failures_total{reason="DeployTimeout"}'
        values: '0x10'
    alert_rule_test:
      - eval_time: 2m
        alertname: CapmaasDeploysFailing
        exp_alerts: []
      - eval_time: 5m
        alertname: CapmaasDeploysFailing
        exp_alerts:
          - exp_labels: {severity: warning, reason: DeployFailed}
            exp_annotations:
              summary: 'MAAS deploys are failing (DeployFailed)'
              description: >-
                1 MAAS deploys did not complete in the last 30 minutes
                (DeployFailed: DeployFailed is MAAS's Failed deployment, DeployTimeout
                a deploy past --deploy-timeout, DeployRefused MAAS refusing the deploy call).
                capmaas released those machines and allocated others; the MachineReplaced and
                MachineDeployFailed events name them. Many at once point at the image or the
                MAAS region, a single one at a host.
      - eval_time: 45m
        alertname: CapmaasDeploysFailing
        exp_alerts: []
  # Every controller call fails without an answer: critical after 5 minutes.
  - interval: 1m
    input_series:
      - series: 'capmaas_maas_requests_total{op="get_machine",code="error"}'
        values: '0+5x20'
      - series: 'capmaas_maas_inventory_refreshes_total'
        values: '0x20'
    alert_rule_test:
      - eval_time: 3m
        alertname: CapmaasMAASUnreachable
        exp_alerts: []
      - eval_time: 10m
        alertname: CapmaasMAASUnreachable
        exp_alerts:
          - exp_labels: {severity: critical}
            exp_annotations: &unreachable
              summary: capmaas cannot reach MAAS
              description: >-
                For 5 minutes the controllers' MAAS calls, or the inventory refreshes, failed
                without an answer (connection refused, timeout, TLS) or with 503, and none of
                them succeeded. No machine is allocated, deployed or released meanwhile; check
                MAAS_ENDPOINT, the network to the region and the region itself.
  # Some calls fail, some succeed: MAAS is reachable (CapmaasMAASErrors is for that).
  - interval: 1m
    input_series:
      - series: 'capmaas_maas_requests_total{op="get_machine",code="error"}'
        values: '0+5x20'
      - series: 'capmaas_maas_requests_total{op="list_machines",code="200"}'
        values: '0+1x20'
    alert_rule_test:
      - eval_time: 10m
        alertname: CapmaasMAASUnreachable
        exp_alerts: []
  # No machine to reconcile, so no controller call; every inventory refresh fails: critical.
  - interval: 1m
    input_series:
      - series: 'capmaas_maas_inventory_refreshes_total'
        values: '0+1x20'
      - series: 'capmaas_maas_inventory_refresh_errors_total{reason="unreachable"}'
        values: '0+1x20'
      - series: 'capmaas_maas_inventory_refresh_errors_total{reason="unauthorized"}'
        values: '0x20'
    alert_rule_test:
      - eval_time: 10m
        alertname: CapmaasMAASUnreachable
        exp_alerts:
          - exp_labels: {severity: critical}
            exp_annotations: *unreachable
  # Every other refresh fails: reachable.
  - interval: 1m
    input_series:
      - series: 'capmaas_maas_inventory_refreshes_total'
        values: '0+2x20'
      - series: 'capmaas_maas_inventory_refresh_errors_total{reason="unreachable"}'
        values: '0+1x20'
    alert_rule_test:
      - eval_time: 10m
        alertname: CapmaasMAASUnreachable
        exp_alerts: []
  # A remediation gives up at minute 2: warning; succeeded ones alone stay quiet.
  - interval: 1m
    input_series:
      - series: 'capmaas_remediations_total{result="failed"}'
        values: '0 0 1 1 1 1'
      - series: 'capmaas_remediations_total{result="succeeded"}'
        values: '0 1 2 3 4 5'
      - series: 'capmaas_remediations_total{result="refused"}'
        values: '0x5'
    alert_rule_test:
      - eval_time: 1m
        alertname: CapmaasRemediationExhausted
        exp_alerts: []
      - eval_time: 4m
        alertname: CapmaasRemediationExhausted
        exp_alerts:
          - exp_labels: {severity: warning}
            exp_annotations:
              summary: 'Reboot remediation exhausted for 1 machine(s) in the last hour'
              description: >-
                A MaasRemediation power-cycled its machine retryLimit times and the Node did
                not come back Ready, so the Machine was handed back to Cluster API to be
                replaced. The MaasRemediation's events and conditions name the steps; a host
                that keeps failing needs a look in MAAS.
  # 12 hours left: critical after 10 minutes; 3 days left: only the 7-day warning.
  - interval: 1m
    input_series:
      - series: 'capmaas_webhook_certificate_expiry_timestamp_seconds{pod="a"}'
        values: '43200x40'
      - series: 'capmaas_webhook_certificate_expiry_timestamp_seconds{pod="b"}'
        values: '259200x40'
    alert_rule_test:
      - eval_time: 5m
        alertname: CapmaasWebhookCertificateExpiresToday
        exp_alerts: []
      - eval_time: 30m
        alertname: CapmaasWebhookCertificateExpiresToday
        exp_alerts:
          - exp_labels: {severity: critical, pod: a}
            exp_annotations:
              summary: capmaas's webhook serving certificate expires within a day
              description: >-
                Once it expires the API server refuses every create and update of the Maas
                kinds (the webhooks fail TLS). Renew the Certificate capmaas-serving-cert
                now; capmaas reloads the Secret without a restart.
EOF
check "the alerts fire on the series capmaas exports, and only then" 0 'SUCCESS' -- \
  promtool test rules "$KS_WORK/rules_test.yml"

# config/grafana: the dashboard as the ConfigMap Grafana's sidecar loads, every query
# parsing as PromQL and filtered by the dashboard's job. (That each returns series is the
# end-to-end test's, against a Prometheus scraping capmaas: test_e2e_prometheus.sh.)
DASH=$SRC/config/grafana/capmaas.json
check "config/grafana renders" 0 '' -- kubectl kustomize "$SRC/config/grafana" -o "$KS_WORK/grafana.yaml"
check "one ConfigMap labelled grafana_dashboard: \"1\" holding capmaas.json as it is" 0 '^ok$' -- \
  /usr/bin/python3 -c 'import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
cm = docs[0]
ok = (len(docs) == 1 and cm["kind"] == "ConfigMap" and cm["metadata"]["labels"].get("grafana_dashboard") == "1"
      and cm["data"] == {"capmaas.json": open(sys.argv[2]).read()})
print("ok" if ok else "FAIL")' "$KS_WORK/grafana.yaml" "$DASH"
check "the dashboard's panels, variables and queries are well-formed" 0 '^ok$' -- \
  /usr/bin/python3 "$SRC/tests/scripts/dashboard.py" lint "$DASH"
/usr/bin/python3 "$SRC/tests/scripts/dashboard.py" rules "$DASH" capmaas 5m >"$KS_WORK/dashboard_rules.json"
check "promtool parses every panel's query" 0 'SUCCESS: [0-9]+ rules found' -- \
  promtool check rules "$KS_WORK/dashboard_rules.json"
echo "$KS_PASS passed, $KS_FAIL failed"
[ "$KS_FAIL" -eq 0 ]
