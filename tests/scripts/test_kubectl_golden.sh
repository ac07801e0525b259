#!/usr/bin/env bash
# kube-sim against the real kubectl 1.32: the golden scenarios of kubernetes.md §6 (apply a
# CRD and custom resources, server-side apply, get -A / -o json / -w, wait, patch merge/json
# and the 415 for strategic merge on a CR, label, delete with and without finalizers,
# secrets with stringData and jsonpath), each checked on exit status and printed output.
set -uo pipefail
# shellcheck source=tests/scripts/kube_sim_lib.sh
. "$(dirname "$0")/kube_sim_lib.sh"
ks_need kubectl openssl
# shellcheck disable=SC2119 # no extra kube-sim flags
ks_start

M=$KS_WORK/manifests
mkdir -p "$M"
cat >"$M/crd.yaml" <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: maasmachines.infrastructure.cluster.x-k8s.io
  labels:
    cluster.x-k8s.io/v1beta1: v1beta1
spec:
  group: infrastructure.cluster.x-k8s.io
  names:
    kind: MaasMachine
    listKind: MaasMachineList
    plural: maasmachines
    singular: maasmachine
    shortNames: [mm]
    categories: [cluster-api]
  scope: Namespaced
  versions:
  - name: v1beta1
    served: true
    storage: true
    subresources:
      status: {}
    additionalPrinterColumns:
    - name: Ready
      type: string
      jsonPath: .status.conditions[?(@.type=="Ready")].status
    - name: CPU
      type: integer
      jsonPath: .spec.minCPU
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            required: [image]
            properties:
              image: {type: string, minLength: 1}
              minCPU: {type: integer, minimum: 1, default: 2}
              zone: {type: string, enum: [z1, z2]}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
EOF
cat >"$M/mm1.yaml" <<'EOF'
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: MaasMachine
metadata:
  name: mm-1
  labels: {role: worker}
spec:
  image: ubuntu
  minCPU: 2
EOF
cat >"$M/mm2.yaml" <<'EOF'
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: MaasMachine
metadata:
  name: mm-2
spec:
  image: jammy
EOF

CRD=maasmachines.infrastructure.cluster.x-k8s.io
check "version reports 1.32" 0 'Server Version: v1\.32\.' -- K version
check "get namespaces lists the seeded ones" 0 'kube-system +Active' -- K get ns
check "apply a CRD" 0 "customresourcedefinition.apiextensions.k8s.io/$CRD created" -- \
  K apply -f "$M/crd.yaml"
check "re-apply an unchanged CRD" 0 "$CRD unchanged" -- K apply -f "$M/crd.yaml"
check "wait for Established" 0 "condition met" -- \
  K wait --for=condition=Established "crd/$CRD" --timeout=10s
check "api-resources shows the short name" 0 'maasmachines +mm +infrastructure' -- \
  K api-resources --api-group=infrastructure.cluster.x-k8s.io
bad() { # bad NAME SPEC-YAML -> manifest path
  printf 'apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: MaasMachine\nmetadata: {name: %s}\nspec: %s\n' "$1" "$2" >"$M/$1.yaml"
  echo "$M/$1.yaml"
}
check "schema minimum is a 422 with the field" 1 \
  'spec.minCPU: Invalid value: 0: spec.minCPU in body should be greater than or equal to 1' -- \
  K apply -f "$(bad b1 '{image: u, minCPU: 0}')"
check "schema required" 1 'spec.image: Required value' -- K apply -f "$(bad b2 '{minCPU: 3}')"
check "schema enum" 1 'spec.zone: Unsupported value: "z3": supported values: "z1", "z2"' -- \
  K apply -f "$(bad b3 '{image: u, zone: z3}')"
check "schema type" 1 'spec.minCPU: Invalid value: "string": spec.minCPU in body must be of type integer' -- \
  K apply -f "$(bad b4 '{image: u, minCPU: "x"}')"
check "schema minLength" 1 'spec.image in body should be at least 1 chars long' -- \
  K apply -f "$(bad b5 '{image: ""}')"
check "unknown field with fieldValidation=Strict" 1 'unknown field "spec.foo"' -- \
  K apply -f "$(bad b6 '{image: u, foo: 1}')"
check "unknown field pruned with --validate=false" 0 'b7 created' -- \
  K apply --validate=false -f "$(bad b7 '{image: u, foo: 1}')"
check "pruned and defaulted" 0 '^\{"image":"u","minCPU":2\}$' -- K get mm b7 -o 'jsonpath={.spec}'
check "delete it" 0 'b7" deleted' -- K delete mm b7
# Ratcheting (kube-apiserver 1.30+): a value stored under an older schema is not validated
# again by an update that leaves it as it is; a change of it is.
check "an object valid under the schema" 0 'r1 created' -- K apply -f "$(bad r1 '{image: u, minCPU: 1}')"
sed 's/minimum: 1, default: 2/minimum: 3, default: 3/' "$M/crd.yaml" >"$M/crd-tight.yaml"
check "the schema tightens" 0 "$CRD configured" -- K apply -f "$M/crd-tight.yaml"
check "an update that leaves the old value is admitted" 0 'r1 labeled' -- K label mm r1 team=a
check "a change of it is validated" 1 'spec.minCPU in body should be greater than or equal to 3' -- \
  K patch mm r1 --type=merge -p '{"spec":{"minCPU":2}}'
check "the schema is restored" 0 "$CRD configured" -- K apply -f "$M/crd.yaml"
check "delete the ratcheted object" 0 'r1" deleted' -- K delete mm r1
check "apply a custom resource" 0 'maasmachine.infrastructure.cluster.x-k8s.io/mm-1 created' -- \
  K apply -f "$M/mm1.yaml"
check "re-apply unchanged" 0 'mm-1 unchanged' -- K apply -f "$M/mm1.yaml"
sed 's/minCPU: 2/minCPU: 4/' "$M/mm1.yaml" >"$M/mm1b.yaml"
check "apply a change" 0 'mm-1 configured' -- K apply -f "$M/mm1b.yaml"
check "printer columns in get" 0 'mm-1 +4 ' -- K get mm
check "get -A adds the namespace column" 0 '^default +mm-1 ' -- K get maasmachines -A
check "generation bumped by the spec change" 0 '^2$' -- \
  K get mm mm-1 -o 'jsonpath={.metadata.generation}'
check "get -o json" 0 '"kind": "MaasMachine"' -- K get mm mm-1 -o json
check "apply --server-side creates" 0 'mm-2 serverside-applied' -- \
  K apply --server-side -f "$M/mm2.yaml"
check "apply --server-side again" 0 'mm-2 serverside-applied' -- \
  K apply --server-side -f "$M/mm2.yaml"
check "server-side apply records managedFields" 0 'manager: kubectl' -- \
  K get mm mm-2 -o yaml --show-managed-fields
check "patch --type merge" 0 'mm-2 patched' -- K patch mm mm-2 --type merge -p '{"spec":{"minCPU":8}}'
check "patch --type json" 0 'mm-2 patched' -- \
  K patch mm mm-2 --type json -p '[{"op":"replace","path":"/spec/image","value":"noble"}]'
check "patch result visible" 0 '^noble 8$' -- \
  K get mm mm-2 -o 'jsonpath={.spec.image} {.spec.minCPU}'
check "strategic merge patch on a CR is 415" 1 \
  'the body of the request was in an unknown format - accepted media types include: application/json-patch\+json, application/merge-patch\+json, application/apply-patch\+yaml' -- \
  K patch mm mm-2 -p '{"spec":{"minCPU":9}}'
check "status subresource patch" 0 'mm-2 patched' -- \
  K patch mm mm-2 --subresource status --type merge \
  -p '{"status":{"conditions":[{"type":"Ready","status":"True"}]}}'
check "status change keeps generation (create, merge, json = 3)" 0 '^3$' -- \
  K get mm mm-2 -o 'jsonpath={.metadata.generation}'
check "main endpoint ignores status" 0 'mm-2 patched' -- \
  K patch mm mm-2 --type merge -p '{"status":{"conditions":[]},"spec":{"zone":"z1"}}'
check "status kept after main-endpoint patch" 0 '^True$' -- \
  K get mm mm-2 -o 'jsonpath={.status.conditions[0].status}'
check "Ready column from a filtered jsonPath" 0 'mm-2 +True +8 ' -- K get mm
check "wait --for=condition=Ready" 0 'condition met' -- \
  K wait --for=condition=Ready mm/mm-2 --timeout=10s
printf 'apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: MaasMachine\nmetadata: {name: mm-2}\nspec: {image: noble, minCPU: 5}\n' >"$M/mm2c.yaml"
check "server-side apply conflict with another manager" 1 \
  'Apply failed with 1 conflict: conflict with "kubectl-patch" using infrastructure.cluster.x-k8s.io/v1beta1: .spec.minCPU' -- \
  K apply --server-side -f "$M/mm2c.yaml"
check "server-side apply --force-conflicts takes the field" 0 'mm-2 serverside-applied' -- \
  K apply --server-side --force-conflicts -f "$M/mm2c.yaml"
check "forced value stored" 0 '^5$' -- K get mm mm-2 -o 'jsonpath={.spec.minCPU}'
check "label" 0 'mm-2 labeled' -- K label mm mm-2 env=prod
check "label selector =" 0 '^mm-2 ' -- K get mm -l env=prod --no-headers
check "label selector in" 0 '^mm-2 ' -- K get mm -l 'env in (prod,dev)' --no-headers
check "label selector !key" 0 '^mm-1 ' -- K get mm -l '!env' --no-headers
check "label selector notin keeps unlabelled" 0 '^mm-1 +4 ' -- K get mm -l 'env notin (prod)' --no-headers
check "field selector" 0 '^mm-1 ' -- K get mm --field-selector metadata.name=mm-1 --no-headers
check "unsupported field selector is 400" 1 'field label not supported: spec.image' -- \
  K get mm --field-selector spec.image=x

# get -w: the watch prints the change made while it runs, and exits 0 when the stream ends
# (kube-sim ends it once the change is printed, as a watch timeout would)
(K get mm -w >"$KS_WORK/watch.out" 2>&1; echo "rc=$?" >>"$KS_WORK/watch.out") &
wpid=$!
wait_until 10 grep -q 'mm-1' "$KS_WORK/watch.out"
K patch mm mm-1 --type merge -p '{"spec":{"minCPU":6}}' >/dev/null
wait_until 10 grep -q 'mm-1 \+6 ' "$KS_WORK/watch.out"
ks_curl POST /_sim/faults -d '{"dropWatches":true}' >/dev/null
wait "$wpid"
check "get -w shows the modification" 0 'mm-1 +6 ' -- cat "$KS_WORK/watch.out"
check "get -w exits 0 when the stream ends" 0 '^rc=0$' -- cat "$KS_WORK/watch.out"

check "add a finalizer" 0 'mm-1 patched' -- \
  K patch mm mm-1 --type merge -p '{"metadata":{"finalizers":["example.com/hold"]}}'
check "delete with a finalizer returns at once with --wait=false" 0 'mm-1" deleted' -- \
  K delete mm mm-1 --wait=false
check "deletionTimestamp set, object kept" 0 '^20' -- \
  K get mm mm-1 -o 'jsonpath={.metadata.deletionTimestamp}'
check "no new finalizers while deleting" 1 'no new finalizers can be added' -- \
  K patch mm mm-1 --type merge -p '{"metadata":{"finalizers":["example.com/hold","x.io/y"]}}'
(K delete mm mm-1 --timeout=15s >"$KS_WORK/del.out" 2>&1; echo "rc=$?" >>"$KS_WORK/del.out") &
dpid=$!
wait_until 10 grep -q 'deleted' "$KS_WORK/del.out" # the DELETE is in, kubectl now waits
check "remove the finalizer" 0 'mm-1 patched' -- \
  K patch mm mm-1 --type json -p '[{"op":"remove","path":"/metadata/finalizers"}]'
wait "$dpid"
check "a waiting delete sees the object go" 0 'rc=0' -- cat "$KS_WORK/del.out"
check "object gone" 1 'NotFound.*"mm-1" not found' -- K get mm mm-1
check "delete without finalizers" 0 'mm-2" deleted' -- K delete mm mm-2

check "create secret generic" 0 'secret/s1 created' -- \
  K create secret generic s1 --from-literal=password=hunter2
check "secret data is base64" 0 '^aHVudGVyMg==$' -- K get secret s1 -o 'jsonpath={.data.password}'
cat >"$M/s2.yaml" <<'EOF'
apiVersion: v1
kind: Secret
metadata: {name: s2}
stringData: {user: admin}
EOF
check "apply a Secret with stringData" 0 'secret/s2 created' -- K apply -f "$M/s2.yaml"
check "stringData merged into data" 0 '^YWRtaW4= Opaque$' -- \
  K get secret s2 -o 'jsonpath={.data.user} {.type}'
check "secret columns" 0 's2 +Opaque +1 ' -- K get secrets
check "create configmap" 0 'configmap/c1 created' -- K create configmap c1 --from-literal=a=b
check "strategic merge patch on a built-in" 0 'configmap/c1 patched' -- \
  K patch cm c1 -p '{"data":{"c":"d"}}'
check "configmap after strategic patch" 0 '^b d$' -- K get cm c1 -o 'jsonpath={.data.a} {.data.c}'
check "already exists is 409" 1 'configmaps "c1" already exists' -- \
  K create configmap c1 --from-literal=a=b
check "namespaced create in a missing namespace" 1 'namespaces "nope" not found' -- \
  K create configmap c2 -n nope --from-literal=a=b
# ownerReference garbage collection: background, foreground, orphan
gc_pair() { # gc_pair OWNER DEP: creates both, DEP owned by OWNER
  K create configmap "$1" --from-literal=a=b >/dev/null
  local uid
  uid=$(K get cm "$1" -o 'jsonpath={.metadata.uid}')
  printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  ownerReferences:\n  - {apiVersion: v1, kind: ConfigMap, name: %s, uid: %s}\n' \
    "$2" "$1" "$uid" | K apply -f - >/dev/null
}
gc_pair own-bg dep-bg
check "background delete of an owner" 0 'own-bg" deleted' -- K delete cm own-bg
check "background: dependent collected" 1 'not found' -- K get cm dep-bg
gc_pair own-fg dep-fg
check "foreground delete of an owner" 0 'own-fg" deleted' -- \
  K delete cm own-fg --cascade=foreground --timeout=15s
check "foreground: dependent collected" 1 'not found' -- K get cm dep-fg
check "foreground: owner gone" 1 'not found' -- K get cm own-fg
gc_pair own-or dep-or
check "orphan delete of an owner" 0 'own-or" deleted' -- \
  K delete cm own-or --cascade=orphan --timeout=15s
check "orphan: dependent kept without the reference" 0 '^dep-or:$' -- \
  K get cm dep-or -o 'jsonpath={.metadata.name}:{.metadata.ownerReferences}'
check "create a namespace" 0 'namespace/team created' -- K create namespace team
check "create in it" 0 'configmap/c3 created' -- K create configmap c3 -n team --from-literal=a=b
check "delete the namespace (waits for its contents)" 0 'namespace "team" deleted' -- \
  K delete namespace team --timeout=15s
check "contents gone with it" 1 'not found' -- K get cm c3 -n team
check "a custom object before deleting its CRD" 0 'mm-3 created' -- \
  K apply -f "$(bad mm-3 '{image: u}')"
check "delete the CRD" 0 "$CRD\" deleted" -- K delete crd "$CRD" --timeout=15s
check "its resource is no longer served" 1 \
  "the server doesn't have a resource type|could not find the requested resource" -- \
  K get maasmachines

check "re-created CRD starts empty" 0 "$CRD created" -- K apply -f "$M/crd.yaml"
check "no custom objects survive CRD deletion" 0 'No resources found' -- \
  K get maasmachines.v1beta1.infrastructure.cluster.x-k8s.io -A

ks_finish
