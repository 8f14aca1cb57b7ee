#!/usr/bin/env bash
# The main job: two guests, metaroce.ko loaded in both, RDMA devices added with
# `rdma link add`, and unmodified ibv_rc_pingpong and ib_write_bw carrying data
# across. Prints the tools' own output.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
export HOME=${HOME:-/root}
bash tools/setup.sh >&2
KDIR=$(qemu/build-kernel.sh); export KDIR
make -s KDIR="$KDIR" modules >&2
exec qemu/vm-run -n 2 -t 600 tests/guest/main.sh
