#!/usr/bin/env bash
# kselftest wrapper: tests/guest/observe.sh mr0 (two guests): metaroce:* trace events, resource views and counters during traffic.
. "$(dirname "$0")/ksft_lib.sh"
need_root
need_peer
need_file "$MR_REPO/metaroce.ko"
run_guest observe.sh mr0
