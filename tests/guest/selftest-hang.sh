#!/usr/bin/env bash
# Runner self-test: a guest that never finishes. qemu/vm-run must report a hang
# at its time limit, fail the run, and kill the guest.
. "$MR_REPO/tests/lib.sh"
echo "# sleeping forever on purpose"
sleep 100000
pass "unreachable"
