#!/usr/bin/env bash
# The end-to-end suite (test_e2e.sh) against a CAPI 1.10 management cluster: capi-sim plays
# contract v1beta1, its CRDs serve v1beta1 only and the release's flavor
# cluster-template-v1beta1.yaml is rendered and applied; the provider must discover v1beta1
# and read the v1beta1 shapes.
E2E_CAPI_CONTRACT=v1beta1 exec bash "$(dirname "$0")/test_e2e.sh"
