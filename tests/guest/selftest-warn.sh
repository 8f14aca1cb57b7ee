#!/usr/bin/env bash
# Runner self-test: loads a module that WARNs. The script itself "passes";
# qemu/vm-run must still fail the run because the kernel warned.
. "$MR_REPO/tests/lib.sh"
check "insmod mr_warn.ko (WARNs on purpose)" insmod "$MR_REPO/tests/modules/warn/mr_warn.ko"
done_testing
