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

: "${CAPMAAS_SOURCE_DIR:?CAPMAAS_SOURCE_DIR is not set}"
: "${CAPMAAS_TEST_CERTS:?CAPMAAS_TEST_CERTS is not set}"
ks_capmaas_webhooks
ks_webhooks_start maasmachines
check "CRDs carry the CAPI contract labels" 0 "^v1beta1 v1beta1 infrastructure-maas$" -- \
  K get crd maasmachinetemplates.infrastructure.cluster.x-k8s.io -o \
  'jsonpath={.metadata.labels.cluster\.x-k8s\.io/v1beta1} {.metadata.labels.cluster\.x-k8s\.io/v1beta2} {.metadata.labels.cluster\.x-k8s\.io/provider}'

{
  ks_manifest MaasMachine good
  cat <<'Y'
  labels:
    cluster.x-k8s.io/cluster-name: demo
spec:
  image: ubuntu/jammy
  minCPU: 2
  minMemory: 4096
  tags: [gpu, ssd, gpu]
Y
} >"$M/good.yaml"
check "a valid machine is created" 0 "maasmachine.infrastructure.cluster.x-k8s.io/good created" -- \
  K apply -f "$M/good.yaml"
check "duplicate tags were removed by the mutating webhook" 0 '^\["gpu","ssd"\]$' -- \
  K get maasmachine good -o 'jsonpath={.spec.tags}'
check "printer columns" 0 "NAME +CLUSTER +STATE +READY +PROVIDERID +MACHINE +AGE" -- \
  K get maasmachines

{
  ks_manifest MaasMachine bad
  cat <<'Y'
spec:
  image: foo/bar
  minCPU: 2000
  minMemory: 4096
  resourcePool: my pool
Y
} >"$M/bad.yaml"
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

# deploy and allocation options (docs/deploy-options.md): values the CRD schema takes but
# MAAS would refuse or ignore
{
  ks_manifest MaasMachine opts
  cat <<'Y'
spec:
  image: ubuntu/jammy
  minCPU: 2
  minMemory: 4096
  hweKernel: generic
  storageLayout:
    type: flat
    vgName: vg0
Y
} >"$M/opts.yaml"
check "kubectl prints a kernel MAAS would ignore" 1 \
  '\* spec.hweKernel: Invalid value: "generic": must be a MAAS kernel name with a ga or hwe part' -- \
  K apply -f "$M/opts.yaml"
check "... and an option of another layout" 1 \
  '\* spec.storageLayout.vgName: Forbidden: only with type lvm: the flat layout does not take it' -- \
  K apply -f "$M/opts.yaml"
check "deploy options are immutable" 1 \
  'spec.deployInMemory: Invalid value: field is immutable' -- \
  K patch maasmachine good --type=merge -p '{"spec":{"deployInMemory":true}}'

check "W6: the reference's image message" 1 \
  'denied the request: maas machine image change is not allowed, old=ubuntu/jammy, new=ubuntu/noble' -- \
  K patch maasmachine good --type=merge -p '{"spec":{"image":"ubuntu/noble"}}'
check "mutable fields may change" 0 "maasmachine.infrastructure.cluster.x-k8s.io/good patched" -- \
  K patch maasmachine good --type=merge -p '{"spec":{"resourcePool":"pool-b"}}'

{
  ks_manifest MaasMachineTemplate any
  cat <<'Y'
spec:
  template:
    spec:
      image: ubuntu/jammy
      minCPU: 0
      minMemory: 0
Y
} >"$M/anymachine.yaml"
check "a warning, not a denial, when any machine will do" 0 \
  "Warning: spec.template.spec.minCPU and spec.template.spec.minMemory are both 0: any machine will do" -- \
  K apply -f "$M/anymachine.yaml"
check "template spec is immutable" 1 \
  'spec.template.spec: Forbidden: field is immutable; create a new MaasMachineTemplate instead' -- \
  K patch maasmachinetemplate any --type=merge -p '{"spec":{"template":{"spec":{"tags":["x"]}}}}'

{
  ks_manifest MaasCluster demo
  cat <<'Y'
spec:
  dnsDomain: maas.sc
  controlPlaneEndpoint:
    host: api.maas.sc
Y
} >"$M/cluster.yaml"
check "cluster created" 0 "maascluster.infrastructure.cluster.x-k8s.io/demo created" -- \
  K apply -f "$M/cluster.yaml"
check "controlPlaneEndpoint.port defaulted to 6443" 0 "^6443$" -- \
  K get maascluster demo -o 'jsonpath={.spec.controlPlaneEndpoint.port}'
check "W3: the reference's DNS domain message" 1 \
  'denied the request: changing cluster DNS Domain not allowed' -- \
  K patch maascluster demo --type=merge -p '{"spec":{"dnsDomain":"maas.maas"}}'
check "LXD VM hosts are refused as out of scope" 1 \
  'spec.lxdConfig.enabled: Forbidden: not supported: turning a cluster.s machines into LXD VM hosts is out of scope' -- \
  K patch maascluster demo --type=merge -p '{"spec":{"lxdConfig":{"enabled":true}}}'

ks_capmaas_stop
ks_finish
