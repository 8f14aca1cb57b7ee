#!/usr/bin/env bash
# kselftest wrapper: tests/guest/loopback.sh (one guest): two QPs of one mr0 through the transport.
. "$(dirname "$0")/ksft_lib.sh"
need_root
need_file "$MR_REPO/metaroce.ko"
run_guest loopback.sh
