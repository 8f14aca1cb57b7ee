#!/usr/bin/env bash
# Runs another guest test across the routed leaf–spine fabric of
# tests/fabric.sh instead of the direct link: builds the fabric, then runs
# the script with MR_IF / MR_IP4 / MR_PEER_IP4 naming the routed endpoints.
#   on-fabric.sh SCRIPT [ARGS...]     e.g. on-fabric.sh cm.sh mr0
. "$MR_REPO/tests/lib.sh"
. "$MR_REPO/tests/fabric.sh"
script=$1; shift
fabric_up 4
check "peer $MR_PEER_IP4 reachable across the fabric" retry 300 ping -q -c1 -W1 "$MR_PEER_IP4"
MR_NESTED=1 . "$MR_REPO/tests/guest/$script" "$@"
done_testing
