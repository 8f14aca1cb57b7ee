#!/usr/bin/env bash
# Runs other guest tests across the routed leaf–spine fabric of
# tests/fabric.sh instead of the direct link: builds the fabric once, then
# runs the scripts one after the other (tests/lib.sh run_parts) with MR_IF /
# MR_IP4 / MR_PEER_IP4 naming the routed endpoints.
#   on-fabric.sh SCRIPT ARGS... [+ SCRIPT ARGS...]...   e.g. on-fabric.sh cm.sh mr0 + nvmeof.sh mr0
. "$MR_REPO/tests/lib.sh"
. "$MR_REPO/tests/fabric.sh"
fabric_up 4
check "peer $MR_PEER_IP4 reachable across the fabric" retry 300 ping -q -c1 -W1 "$MR_PEER_IP4"
run_parts "$@"
done_testing
