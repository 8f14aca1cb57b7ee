#!/usr/bin/env bash
# kselftest wrapper: tests/guest/integrity.sh mr0 (two guests): every opcode, bytes checked.
. "$(dirname "$0")/ksft_lib.sh"
need_root
need_peer
need_file "$MR_REPO/metaroce.ko" "$MR_REPO/out/integrity"
run_guest integrity.sh mr0
