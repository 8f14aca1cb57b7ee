# Sourced by the kselftest wrappers in this folder: the MR_* environment the
# guest scripts (tests/guest/) expect, with defaults for a machine that was
# not booted by qemu/vm-run, and the SKIP convention (exit 4).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -z ${MR_REPO:-} ]]; then
  # In the tree: ../..; an installed copy (make install): ./repo.
  if [[ -f $here/../lib.sh ]]; then MR_REPO=$(cd "$here/../.." && pwd); else MR_REPO=$here/repo; fi
fi
: "${MR_ID:=1}" "${MR_NGUESTS:=1}" "${MR_KDIR:=${KDIR:-/lib/modules/$(uname -r)/build}}"
name=$(basename "$0" .sh)
# A directory of its own per test: two-guest tests meet through marker files
# there (both guests run the same list, so they agree on the name).
if [[ -n ${MR_RUNDIR:-} ]]; then
  MR_RUNDIR=$MR_RUNDIR/ksft-$name
else
  MR_RUNDIR=$(mktemp -d "${TMPDIR:-/dev/shm}/metaroce-ksft-$name.XXXXXX")
fi
mkdir -p "$MR_RUNDIR"
export MR_REPO MR_ID MR_NGUESTS MR_KDIR MR_RUNDIR
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

ksft_skip() { echo "SKIP: $*"; exit 4; }
need_root() { ((EUID == 0)) || ksft_skip "needs root"; }
need_file() {
  local f v
  for f; do
    [[ -e $f ]] || ksft_skip "missing $f (make -C tests/selftests all, on the host)"
    # A module built for another kernel (e.g. the installed copy run on the
    # build host instead of a test guest): SKIP, naming both.
    if [[ $f == *.ko ]] && command -v modinfo >/dev/null; then
      v=$(modinfo -F vermagic "$f" 2>/dev/null | awk '{print $1}')
      [[ -z $v || $v == "$(uname -r)" ]] ||
        ksft_skip "$f is built for kernel $v, this is $(uname -r): run in a test guest (qemu/vm-run)"
    fi
  done
}
need_peer() {
  [[ $MR_NGUESTS == 2 && -n ${MR_IF:-} ]] ||
    ksft_skip "two-guest test: needs the peer guest and private link of qemu/vm-run -n 2"
}
# run_guest SCRIPT ARGS...: the guest test itself (TAP; exit 1 on "not ok").
run_guest() { exec bash "$MR_REPO/tests/guest/$1" "${@:2}"; }
