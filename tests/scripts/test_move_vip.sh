#!/usr/bin/env bash
# clusterctl move of a VIP cluster (issue 26, docs/endpoints.md): test_move.sh with the
# kube-vip flavor. The reservation is never released nor made again during the move, the
# target finds it by address and keeps the endpoint, and the final delete releases it.
exec env MOVE_VIP=10.20.0.50 bash "$(dirname "$0")/test_move.sh"
