#!/usr/bin/env bash
# kselftest wrapper: tests/guest/module.sh (one guest): load/unload, parameters, the module's KUnit suite.
. "$(dirname "$0")/ksft_lib.sh"
need_root
need_file "$MR_REPO/metaroce.ko"
run_guest module.sh
