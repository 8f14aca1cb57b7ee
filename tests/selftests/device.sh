#!/usr/bin/env bash
# kselftest wrapper: tests/guest/device.sh (two guests): mr0 through iproute2 and rdma-core.
. "$(dirname "$0")/ksft_lib.sh"
need_root
need_peer
need_file "$MR_REPO/metaroce.ko" "$MR_REPO/out/exerciser"
run_guest device.sh
