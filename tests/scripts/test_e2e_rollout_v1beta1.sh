#!/usr/bin/env bash
# test_e2e_rollout.sh against a CAPI 1.10 management cluster: capi-sim plays contract
# v1beta1, so the KubeadmControlPlane names its template in spec.machineTemplate.infrastructureRef.
E2E_CAPI_CONTRACT=v1beta1 exec bash "$(dirname "$0")/test_e2e_rollout.sh"
