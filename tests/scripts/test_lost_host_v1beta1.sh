#!/usr/bin/env bash
# test_lost_host.sh against a CAPI 1.10 management cluster: capi-sim plays contract v1beta1,
# so the MaasMachine's failureReason reaches the Machine and the MachineHealthCheck of the
# v1beta1 flavor remediates it at once.
E2E_CAPI_CONTRACT=v1beta1 exec bash "$(dirname "$0")/test_lost_host.sh"
