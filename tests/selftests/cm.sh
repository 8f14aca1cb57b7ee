#!/usr/bin/env bash
# kselftest wrapper: tests/guest/cm.sh mr0 (two guests): rping, ucmatose, udaddy through rdma_cm.
. "$(dirname "$0")/ksft_lib.sh"
need_root
need_peer
need_file "$MR_REPO/metaroce.ko"
run_guest cm.sh mr0
