#!/usr/bin/env bash
# kselftest wrapper: tests/guest/traffic.sh mr0 (two guests): rdma-core and perftest across mr0.
. "$(dirname "$0")/ksft_lib.sh"
need_root
need_peer
need_file "$MR_REPO/metaroce.ko"
run_guest traffic.sh mr0
