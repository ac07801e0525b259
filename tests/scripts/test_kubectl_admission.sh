#!/usr/bin/env bash
# kube-sim admission webhooks, driven by kubectl: a small Python webhook server over TLS
# (allow, deny, patch + warning, slow) is called by kube-sim through a URL and through a
# service reference mapped with --service-override; checks mutation, denial message,
# warnings, timeout under failurePolicy Fail and Ignore, and certificate verification.
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
ks_need kubectl openssl

certs=${CAPMAAS_TEST_CERTS:-}
if [ -z "$certs" ] || [ ! -f "$certs/tls.crt" ]; then
  certs=$KS_WORK/certs
  bash "${CAPMAAS_SOURCE_DIR:-$(dirname "$0")/../..}/certs/gen-dev-certs.sh" "$certs" >/dev/null
fi

cat >"$KS_WORK/hook.py" <<'EOF'
import base64, json, ssl, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        req = body["request"]
        path = self.path.split("?")[0]
        with open(sys.argv[4], "a") as log:
            log.write("%s %s %s %s\n" % (self.path, req["operation"], req["kind"]["kind"],
                                         req.get("name", "")))
        resp = {"uid": req["uid"], "allowed": True}
        if path == "/deny":
            resp = {"uid": req["uid"], "allowed": False,
                    "status": {"code": 403, "message": "denied by test"}}
        elif path == "/patch":
            if req["object"]["metadata"].get("labels"):
                ops = [{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}]
            else:
                ops = [{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}]
            resp["patchType"] = "JSONPatch"
            resp["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
            resp["warnings"] = ["mutated by test"]
        elif path == "/slow":
            time.sleep(3)
        out = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                          "response": resp}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
with open(sys.argv[3], "w") as f:
    f.write(str(srv.server_address[1]))
threading.Timer(240, srv.shutdown).start()
srv.serve_forever()
EOF

/usr/bin/python3 "$KS_WORK/hook.py" "$certs/tls.crt" "$certs/tls.key" "$KS_WORK/port" \
  "$KS_WORK/calls" &
hook_pid=$!
trap 'kill $hook_pid 2>/dev/null; ks_cleanup' EXIT
for _ in $(seq 1 100); do
  [ -s "$KS_WORK/port" ] && break
  sleep 0.1
done
port=$(cat "$KS_WORK/port")
ca=$(base64 -w0 <"$certs/ca.crt")

ks_start --service-override "capmaas-system/capmaas-webhook-service=127.0.0.1:$port"

config() { # config KIND NAME: the head of a webhook configuration, up to its list
  printf 'apiVersion: admissionregistration.k8s.io/v1\nkind: %s\nmetadata: {name: %s}\nwebhooks:\n' \
    "$1" "$2"
}
hook() { # hook NAME CLIENT-CONFIG RULE [LINE...]: one webhook of the list (LINEs as written)
  printf -- '- name: %s\n  admissionReviewVersions: [v1]\n  sideEffects: None\n' "$1"
  [ $# -le 3 ] || printf '  %s\n' "${@:4}"
  printf '  clientConfig: %s\n  rules:\n  - %s\n' "$2" "$3"
}
core() { # core OPERATIONS RESOURCE: a rule for core/v1 RESOURCE
  printf '{operations: [%s], apiGroups: [""], apiVersions: [v1], resources: [%s]}' "$1" "$2"
}
service='{namespace: capmaas-system, name: capmaas-webhook-service, path: /deny, port: 443}'
{
  config MutatingWebhookConfiguration test-mutating
  hook patch.test.io "{url: \"https://127.0.0.1:$port/patch\", caBundle: \"$ca\"}" \
    "$(core CREATE configmaps)"
} >"$KS_WORK/mutating.yaml"
{
  config ValidatingWebhookConfiguration test-validating
  hook deny.test.io "{caBundle: \"$ca\", service: $service}" "$(core 'CREATE, UPDATE' configmaps)" \
    'objectSelector: {matchLabels: {deny: "true"}}'
  hook slow.test.io "{url: \"https://127.0.0.1:$port/slow\", caBundle: \"$ca\"}" \
    "$(core CREATE secrets)" 'timeoutSeconds: 1' 'failurePolicy: Fail'
} >"$KS_WORK/validating.yaml"

check "create a MutatingWebhookConfiguration" 0 'test-mutating created' -- \
  K apply -f "$KS_WORK/mutating.yaml"
check "create a ValidatingWebhookConfiguration" 0 'test-validating created' -- \
  K apply -f "$KS_WORK/validating.yaml"
check "mutating webhook warning reaches kubectl" 0 'Warning: mutated by test' -- \
  K create configmap m1 --from-literal=a=b
check "mutating webhook patch applied" 0 '^yes$' -- \
  K get cm m1 -o 'jsonpath={.metadata.labels.mutated}'
check "webhook called with ?timeout=10s" 0 '^/patch\?timeout=10s CREATE ConfigMap m1$' -- \
  cat "$KS_WORK/calls"
check "server dry run calls the webhook and stores nothing" 0 'configmap/dry1 created \(server dry run\)' -- \
  K create configmap dry1 --from-literal=a=b --dry-run=server
check "dry-run object not stored" 1 'not found' -- K get cm dry1
cat >"$KS_WORK/denied.yaml" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata: {name: d1, labels: {deny: "true"}}
data: {a: b}
EOF
check "validating webhook (service override) denies" 1 \
  'admission webhook "deny.test.io" denied the request: denied by test' -- \
  K apply -f "$KS_WORK/denied.yaml"
check "denied object was not stored" 1 'not found' -- K get cm d1
check "objectSelector leaves other objects alone" 0 'configmap/ok1 created' -- \
  K create configmap ok1 --from-literal=a=b
check "timeout under failurePolicy Fail is a 500" 1 \
  'failed calling webhook "slow.test.io": failed to call webhook: Post "https://127.0.0.1:[0-9]+/slow\?timeout=1s": context deadline exceeded' -- \
  K create secret generic s1 --from-literal=a=b
check "switch to failurePolicy Ignore" 0 'patched' -- \
  K patch validatingwebhookconfiguration test-validating --type json \
  -p '[{"op":"replace","path":"/webhooks/1/failurePolicy","value":"Ignore"}]'
check "timeout under failurePolicy Ignore lets the write through" 0 'secret/s1 created' -- \
  K create secret generic s1 --from-literal=a=b
check "switch slow hook to a CA that does not match, policy Fail" 0 'patched' -- \
  K patch validatingwebhookconfiguration test-validating --type json \
  -p "[{\"op\":\"replace\",\"path\":\"/webhooks/1/failurePolicy\",\"value\":\"Fail\"},{\"op\":\"replace\",\"path\":\"/webhooks/1/clientConfig/caBundle\",\"value\":\"$(base64 -w0 <"$KS_DIR/ca.crt")\"}]"
check "certificate not signed by caBundle fails the call" 1 'x509: certificate signed by unknown authority' -- \
  K create secret generic s2 --from-literal=a=b
check "delete the webhook configurations" 0 'deleted' -- \
  K delete validatingwebhookconfiguration test-validating
check "writes work again" 0 'secret/s2 created' -- K create secret generic s2 --from-literal=a=b

kill "$hook_pid" 2>/dev/null
ks_finish
