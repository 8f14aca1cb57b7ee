#!/usr/bin/env bash
# Several guest tests in one boot, one after the other (tests/lib.sh
# run_parts): the boot, link set-up and module load are paid once instead of
# per test. Each part runs as it would alone, with its own marker directory;
# between parts the guests meet and the links, netem and modules a part left
# are removed.
#   seq.sh SCRIPT ARGS... [+ SCRIPT ARGS...]...
#   qemu/vm-run -n 2 -t 900 tests/guest/seq.sh traffic.sh rxe0 quick + traffic.sh mr0
. "$MR_REPO/tests/lib.sh"
run_parts "$@"
done_testing
