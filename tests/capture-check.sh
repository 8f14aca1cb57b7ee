#!/usr/bin/env bash
# The Wireshark dissector on a real capture: two guests run a lossy integrity
# test over mr0 under tcpdump (tests/guest/capture.sh), then on the host tshark
# decodes both captures with tools/wireshark/metaroce.lua and
# tests/wireshark.py checks that every frame is MetaRoCE with no malformed or
# expert marker, names the peer's QP, that there is one connection, that
# each guest's datagrams, by type, match its module's counters, netem's and
# the other guest's capture, and that the messages each capture shows, by op,
# match the WRs and bytes the integrity client logged.
#   tests/capture-check.sh [capture.sh ARGS...]
#   tests/capture-check.sh --dir DIR   (or --dir=DIR) only decode and check the captures a
#       capture.sh run left in DIR (tests/run runs capture.sh as a part of
#       another boot: DIR is that run's out/seq-<time>/partK)
# Needs the test kernel, metaroce.ko and out/integrity built (tests/run does),
# tcpdump and tshark on the host (tools/setup.sh). Logs and captures:
# out/capture-<time>/.
set -uo pipefail
# --dir DIR / --dir=DIR: DIR as given, relative to the caller's directory.
dir="" dir_set=0
usage() { sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
case ${1:-} in
  -h|--help) usage; exit 0 ;;
  --dir) dir_set=1; dir=${2:-}; (($# <= 2)) || { echo "capture-check: --dir DIR takes nothing after it" >&2; exit 2; } ;;
  --dir=*) dir_set=1; dir=${1#--dir=}; (($# <= 1)) || { echo "capture-check: --dir=DIR takes nothing after it" >&2; exit 2; } ;;
  # capture.sh's arguments are netem's (loss 1% ...): an option here is a typo,
  # refused before any guest boots.
  -*) echo "capture-check: unknown option '$1' (-h for help)" >&2; exit 2 ;;
esac
((dir_set)) && [[ -n $dir && -d $dir ]] && dir=$(cd "$dir" && pwd)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
command -v tshark >/dev/null || { echo "tshark not installed (tools/setup.sh)"; exit 1; }
export MR_OUT=${MR_OUT:-$repo/out}
if ((dir_set)); then
  for f in capture.1.pcap capture.2.pcap ip.1 ip.2 qp.1 qp.2 counters.1.before counters.1.after \
    counters.2.before counters.2.after netem.1 netem.2 tap.1 tap.2; do
    [[ -f $dir/$f ]] || { echo "capture-check: '$dir' is not what a capture.sh run leaves (no $f)"; exit 1; }
  done
  echo "capture-check: decoding $dir/capture.{1,2}.pcap with $(tshark --version 2>/dev/null | head -1)"
  exec python3 tests/wireshark.py capture "$dir"
fi
before=$(ls -d "$MR_OUT"/capture-* 2>/dev/null)
qemu/vm-run -n 2 -t "${MR_CAPTURE_TIMEOUT:-600}" tests/guest/capture.sh "$@"
rc=$?
rundir=$(comm -13 <(printf '%s\n' $before | sort) <(ls -d "$MR_OUT"/capture-* | sort) | tail -1)
((rc == 0)) || { echo "capture-check: the guests failed (logs: $rundir)"; exit 1; }
echo "capture-check: decoding $rundir/capture.{1,2}.pcap with $(tshark --version 2>/dev/null | head -1)"
python3 tests/wireshark.py capture "$rundir"
