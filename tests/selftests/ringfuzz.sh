#!/usr/bin/env bash
# kselftest wrapper: tests/guest/ringfuzz.sh (one guest): user space scribbling on the rings it shares with the kernel.
# Arguments: ROUNDS SEED (default 10 rounds, seed 0x5eed1: a fixed case for CI; KSELFTEST_RINGFUZZ_SH_ARGS="100" for a longer, clock-seeded run).
. "$(dirname "$0")/ksft_lib.sh"
need_root
need_file "$MR_REPO/metaroce.ko" "$MR_REPO/out/ringfuzz"
if (($#)); then run_guest ringfuzz.sh "$@"; else run_guest ringfuzz.sh 10 0x5eed1; fi
