#!/usr/bin/env bash
# kselftest wrapper: tests/guest/abuse.sh mr0 (two guests): UC perftest, message-size extremes, kill -9 mid-transfer, MTU changes under traffic.
. "$(dirname "$0")/ksft_lib.sh"
need_root
need_peer
need_file "$MR_REPO/metaroce.ko"
run_guest abuse.sh mr0
