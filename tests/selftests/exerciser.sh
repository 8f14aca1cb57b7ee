#!/usr/bin/env bash
# kselftest wrapper: tests/guest/exerciser.sh metaroce (one guest): verbs objects, transitions, errnos, kill -9 cleanup.
. "$(dirname "$0")/ksft_lib.sh"
need_root
need_file "$MR_REPO/metaroce.ko" "$MR_REPO/out/exerciser"
run_guest exerciser.sh metaroce
