#!/usr/bin/env bash
# kselftest wrapper: tests/guest/kverbs.sh mr0 last_wqe=1 (one guest): the kernel verbs test module in loopback.
. "$(dirname "$0")/ksft_lib.sh"
need_root
need_file "$MR_REPO/metaroce.ko" "$MR_REPO/tests/modules/kverbs/kverbs_test.ko"
run_guest kverbs.sh mr0 last_wqe=1
