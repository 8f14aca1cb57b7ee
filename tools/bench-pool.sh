#!/usr/bin/env bash
# One table from earlier benches (`bash tools/bench.sh --table LOG...`, which
# runs this; Documentation/bench.rst): each LOG is a log tools/bench.sh wrote
# (out/bench-*.log), which names its guests' run directory; the BENCH lines of
# both guests (DIR/tap.1, DIR/tap.2) go to tools/bench.awk. No guest runs.
#
# With one LOG: its table as the bench printed it (the header dated by the
# log's start, and without the host's lines that follow the table). With several: their rounds
# pooled, log 1's rounds 1..R1, log 2's R1+1.., and a row that ran once a
# bench (iperf3, the multiple-QP rows) takes one round per log; so each figure
# is the median, and each ratio the median [range], over every log's rounds.
#
# Refused (exit 2): a file that is not a plain bench's log (a fabric bench's
# included), two logs of one run (a copy or a link counts), and, with several
# logs, a log from before stop 59 whose loss rows ran once without rounds
# (its own table: that log alone). Refused (exit 1): a log whose run did not
# pass (still running, or FAILED) or whose guests' logs are gone.
#
#   bash tools/bench-pool.sh LOG [LOG...]
set -uo pipefail
# (the logs' paths stay as given: relative to where it runs)
awk_table=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/bench.awk
. "${awk_table%/bench.awk}/bench-lib.sh"
refuse() { echo "bench: $2" >&2; exit "$1"; }
(($#)) || refuse 2 "--table takes one or more bench logs (out/bench-*.log)"

declare -A run_of   # run directory -> the log that named it
dirs=()
for l; do
  [[ -d $l ]] && refuse 2 "'$l' is a directory, not a bench log"
  [[ -e $l ]] || refuse 2 "no such log '$l'"
  [[ -f $l ]] || refuse 2 "'$l' is not a regular file, not a bench log"
  grep -q -- '^\[vm-run\] bench-fabric: ' "$l" &&
    refuse 2 "$l: a fabric bench's log (bench.sh --fabric); --table takes the plain bench's"
  dir=$(vm_rundir "$l" bench)
  [[ -n $dir ]] || refuse 2 "$l: not a bench log (no '[vm-run] bench: ... logs DIR' line)"
  grep -q -- '^\[vm-run\] bench: passed$' "$l" ||
    refuse 1 "$l: its run did not pass (still running, or FAILED: see the log)"
  [[ -f $dir/tap.1 && -f $dir/tap.2 ]] || refuse 1 "$l: its guests' logs ($dir/tap.1 and tap.2) are gone"
  grep -q '^# BENCH ' "$dir/tap.1" || refuse 1 "$l: guest 1 printed no BENCH line"
  real=$(realpath "$dir")
  if [[ -n ${run_of[$real]:-} ]]; then
    [[ $(realpath -- "$l") == $(realpath -- "${run_of[$real]}") ]] && refuse 2 "$l named twice"
    refuse 2 "$l and ${run_of[$real]} are logs of one run"
  fi
  run_of[$real]=$l
  # (awk, not grep | grep -q: an early exit of the second would SIGPIPE the first)
  if (($# > 1)) && awk '/^# BENCH .* loss=([1-9]|0\.|r)/ && !/ rep=/ { f = 1; exit } END { exit !f }' "$dir/tap.1"; then
    refuse 2 "$l: its loss rows ran once, without rounds (before stop 59); its table is --table with that log alone"
  fi
  dirs+=("$dir")
done

# the BENCH lines of run directory $1, rounds moved up by $2 (none: as they are)
lines() {
  sed -n 's/^# BENCH //p' "$1"/tap.[12] |
    awk -v off="$2" 'off == "" { print; next }
         { if (match($0, / rep=[0-9]+/)) $0 = substr($0, 1, RSTART - 1) " rep=" (substr($0, RSTART + 5, RLENGTH - 5) + off) substr($0, RSTART + RLENGTH)
           else $0 = $0 " rep=" (off + 1)
           print }'
}
# each log's commit and run time, as bench.sh appends them ("?": a log from before it did)
commit_of() { c=$(sed -n 's/^\[bench\] commit \([^ ]*\) .*/\1/p' -- "$1" | tail -n 1); echo "${c:-?}"; }
secs_of() { sed -n 's/^\[bench\] commit [^ ]* elapsed \([0-9]*\)s.*/\1/p' -- "$1" | tail -n 1; }

if (($# == 1)); then
  when=$(sed -n 's/.*bench-\([0-9]\{4\}\)\([0-9]\{2\}\)\([0-9]\{2\}\)-\([0-9]\{2\}\)\([0-9]\{2\}\)[0-9]\{2\}\.log$/\1-\2-\3 \4:\5/p' <<<"$1")
  lines "${dirs[0]}" "" |
    awk -v when="${when:-${1##*/}}" -v secs="$(secs_of "$1")" -v commit="$(commit_of "$1")" -f "$awk_table"
  exit
fi
off=0
for dir in "${dirs[@]}"; do
  lines "$dir" "$off"
  top=$(sed -n 's/^# BENCH .* rep=\([0-9]*\).*/\1/p' "$dir"/tap.[12] | sort -n | tail -n 1)
  off=$((off + ${top:-1}))
done | awk -v when="$# benches pooled: ${*##*/}" \
  -v secs="$(for l; do secs_of "$l"; done | awk '{ t += $1 } END { print t + 0 }')" \
  -v commit="$(for l; do commit_of "$l"; done | paste -sd, - | sed 's/,/, /g') (log by log)" -f "$awk_table"
