#!/usr/bin/env bash
# The shipped manifests end to end: kube-sim loads config/crd/bases and
# config/webhook/manifests.yaml (caBundle injected as cert-manager would), calls the real
# capmaas over HTTPS through the Service, and the real kubectl shows what a user sees:
# denials with every field error, the reference's immutability messages, warnings, the
# defaulting patches applied, and the printer columns.
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
ks_need kubectl openssl base64

SRC=${CAPMAAS_SOURCE_DIR:?CAPMAAS_SOURCE_DIR is not set}
CERTS=${CAPMAAS_TEST_CERTS:?CAPMAAS_TEST_CERTS is not set}
ks_capmaas_webhooks

ks_start --service-override "capmaas-system/capmaas-webhook-service=127.0.0.1:$CM_PORT"

M=$KS_WORK/manifests
mkdir -p "$M"
CA=$(base64 -w0 "$CERTS/ca.crt")
sed "s|^    clientConfig:$|    clientConfig:\n      caBundle: $CA|" \
  "$SRC/config/webhook/manifests.yaml" >"$M/webhooks.yaml"

check "apply the CRDs" 0 "maasmachines.infrastructure.cluster.x-k8s.io created" -- \
  K apply -f "$SRC/config/crd/bases"
check "CRDs established" 0 "condition met" -- \
  K wait --for=condition=Established crd/maasmachines.infrastructure.cluster.x-k8s.io \
  crd/maasclusters.infrastructure.cluster.x-k8s.io --timeout=10s
check "CRDs carry the CAPI contract labels" 0 "^v1beta1 v1beta1 infrastructure-maas$" -- \
  K get crd maasmachinetemplates.infrastructure.cluster.x-k8s.io -o \
  'jsonpath={.metadata.labels.cluster\.x-k8s\.io/v1beta1} {.metadata.labels.cluster\.x-k8s\.io/v1beta2} {.metadata.labels.cluster\.x-k8s\.io/provider}'
check "apply the webhook configurations" 0 "vmaasmachine|validating-webhook-configuration created" -- \
  K apply -f "$M/webhooks.yaml"

cat >"$M/good.yaml" <<'Y'
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: MaasMachine
metadata:
  name: good
  labels:
    cluster.x-k8s.io/cluster-name: demo
spec:
  image: ubuntu/jammy
  minCPU: 2
  minMemory: 4096
  tags: [gpu, ssd, gpu]
Y
check "a valid machine is created" 0 "maasmachine.infrastructure.cluster.x-k8s.io/good created" -- \
  K apply -f "$M/good.yaml"
check "duplicate tags were removed by the mutating webhook" 0 '^\["gpu","ssd"\]$' -- \
  K get maasmachine good -o 'jsonpath={.spec.tags}'
check "printer columns" 0 "NAME +CLUSTER +STATE +READY +PROVIDERID +MACHINE +AGE" -- \
  K get maasmachines

cat >"$M/bad.yaml" <<'Y'
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: MaasMachine
metadata:
  name: bad
spec:
  image: foo/bar
  minCPU: 2000
  minMemory: 4096
  resourcePool: my pool
Y
# The denial is a 422 Invalid with causes, so kubectl lists every cause, as it does for the
# API server's own schema errors.
check "kubectl prints every field error of a bad machine" 1 \
  'The MaasMachine "bad" is invalid: ' -- K apply -f "$M/bad.yaml"
check "... the unknown osystem" 1 \
  '\* spec.image: Invalid value: "foo/bar": unknown operating system "foo" \(known: caringo, centos, custom, esxi, ol, rhel, suse, ubuntu, ubuntu-core, windows\)' -- \
  K apply -f "$M/bad.yaml"
check "... the CPU range" 1 '\* spec.minCPU: Invalid value: 2000: must be less than or equal to 1024' -- \
  K apply -f "$M/bad.yaml"
check "... the pool name" 1 \
  "\\* spec.resourcePool: Invalid value: \"my pool\": must be a MAAS name: letters, digits, '-' and '_' only" -- \
  K apply -f "$M/bad.yaml"
check "the bad machine was not stored" 1 'not found' -- K get maasmachine bad

check "W6: the reference's image message" 1 \
  'denied the request: maas machine image change is not allowed, old=ubuntu/jammy, new=ubuntu/noble' -- \
  K patch maasmachine good --type=merge -p '{"spec":{"image":"ubuntu/noble"}}'
check "mutable fields may change" 0 "maasmachine.infrastructure.cluster.x-k8s.io/good patched" -- \
  K patch maasmachine good --type=merge -p '{"spec":{"resourcePool":"pool-b"}}'

cat >"$M/anymachine.yaml" <<'Y'
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: MaasMachineTemplate
metadata:
  name: any
spec:
  template:
    spec:
      image: ubuntu/jammy
      minCPU: 0
      minMemory: 0
Y
check "a warning, not a denial, when any machine will do" 0 \
  "Warning: spec.template.spec.minCPU and spec.template.spec.minMemory are both 0: any machine will do" -- \
  K apply -f "$M/anymachine.yaml"
check "template spec is immutable" 1 \
  'spec.template.spec: Forbidden: field is immutable; create a new MaasMachineTemplate instead' -- \
  K patch maasmachinetemplate any --type=merge -p '{"spec":{"template":{"spec":{"tags":["x"]}}}}'

cat >"$M/cluster.yaml" <<'Y'
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: MaasCluster
metadata:
  name: demo
spec:
  dnsDomain: maas.sc
  controlPlaneEndpoint:
    host: api.maas.sc
Y
check "cluster created" 0 "maascluster.infrastructure.cluster.x-k8s.io/demo created" -- \
  K apply -f "$M/cluster.yaml"
check "controlPlaneEndpoint.port defaulted to 6443" 0 "^6443$" -- \
  K get maascluster demo -o 'jsonpath={.spec.controlPlaneEndpoint.port}'
check "W3: the reference's DNS domain message" 1 \
  'denied the request: changing cluster DNS Domain not allowed' -- \
  K patch maascluster demo --type=merge -p '{"spec":{"dnsDomain":"maas.maas"}}'

kill -TERM "$CM_PID"
wait "$CM_PID"
rc=$?
CM_PID=
if [ "$rc" -ne 0 ]; then
  echo "not ok - capmaas exited with $rc"
  KS_FAIL=$((KS_FAIL + 1))
fi
ks_finish
