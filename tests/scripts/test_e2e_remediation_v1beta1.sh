#!/usr/bin/env bash
# test_e2e_remediation.sh against a CAPI 1.10 management cluster: capi-sim plays contract
# v1beta1, so the MachineHealthCheck names the template in spec.remediationTemplate and the
# Machine handed back carries a v1beta1 OwnerRemediated condition (with its severity).
E2E_CAPI_CONTRACT=v1beta1 exec bash "$(dirname "$0")/test_e2e_remediation.sh"
