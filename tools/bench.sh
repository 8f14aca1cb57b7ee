#!/usr/bin/env bash
# Benchmark (not part of the pass/fail tests): one two-guest run in which
# rxe0 (the kernel's soft-RoCE) and mr0 (metaroce) sit on the same netdev and
# each carries ib_write_lat, ib_send_lat, ib_read_lat (64 B), ib_write_bw and
# ib_send_bw (4 KiB, 64 KiB, 1 MiB) on a lossless link, in REPS rounds (each
# round both devices; the table gives medians and the median of the rounds'
# ratios with their range, and each side's kernel CPU time per MiB), then ib_write_bw and ib_send_bw at
# 64 KiB under netem loss 0.1 %, 1 % and 10 % on both guests' egress, and
# under netem reordering (delay 1ms reorder 25 %, no loss), then ib_write_bw
# and ib_send_bw at 64 KiB with 1 and with 16 QPs (-q 16) on rxe0, on mr0 and
# on mr0 sharing one connection per peer (re-added with shared=1); iperf3 TCP
# over the same link is the ceiling. Prints one table: rxe, metaroce and the ratio
# metaroce/rxe, and for the loss and reordering rows each device's fraction of
# its own lossless figure and the packets it received per message against its
# lossless run's (above 1: spurious retransmissions), with the project's
# targets. A failed run shows as
# "fail" (or "timeout") and the bench goes on. See Documentation/bench.rst.
#
#   bash tools/bench.sh [--reps REPS] [--lossless]
#        (REPS 1-99, default 3 rounds: about 12-15 minutes under TCG; --lossless:
#        only the lossless rows, about 2 minutes a round plus 1-2 for the boot). The progress lines are
#        guest 1's (the server: it has no ib_read_lat figure, shown as
#        value=client); the table has both guests'. Exits 1 if the guest run
#        failed.
#
# With --fabric, the fabric rows instead (tests/guest/bench-fabric.sh): rxe0
# and mr0 on the endpoints of the routed leaf-spine of tests/fabric.sh, each
# running ib_write_bw 64 KiB lossless, with spine 1 hard down, gray (100 %
# and 5 % loss) and congested (A->B limited to RATE), and with 8 QPs; REPS
# rounds (median per row). Each row as a fraction of the same device's
# lossless fabric figure and as metaroce/rxe. ROWS: a subset, e.g. "lossless
# qp8" (the table shows the others as "-").
#
#   bash tools/bench.sh --fabric [REPS [RATE [ROWS]]]
#                                (default 3 4mbit, all six rows; 10-16 min;
#                                REPS 1-99, ROWS one quoted argument)
#   bash tools/bench.sh --help   (this text)
#
# With --table, no guest runs: one table from earlier benches' logs
# (out/bench-*.log), by tools/bench-pool.sh (see there): one log's table as
# the bench printed it, or several logs' rounds pooled, so that three benches
# of 3 rounds give one table of 9 (each figure the median, each ratio the
# median [range], over all of them). Logs of runs that did not pass, fabric
# logs and two logs of one run are refused.
#
#   bash tools/bench.sh --table LOG [LOG...]
#
# The guests' script is tests/guest/bench.sh (bench-fabric.sh); its raw output
# and the vm-run logs stay in out/ (the "logs" path printed by vm-run).
set -uo pipefail
fabric="" reps=3 only=""
usage() { sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"; }
if [[ ${1:-} == -h || ${1:-} == --help ]] && (($# == 1)); then
  usage; exit 0
elif [[ ${1:-} == --fabric ]]; then
  all_rows="lossless down gray100 gray5 congest qp8"
  # An argument given empty is refused, not taken as the default.
  fabric=1 reps=${2-3} rate=${3-4mbit} rows=${4-$all_rows}
  (($# <= 4)) || { echo "bench: --fabric takes REPS, RATE and ROWS (one quoted argument) at most (got: $*)" >&2; exit 2; }
  [[ $reps =~ ^[1-9][0-9]?$ ]] || { echo "bench: REPS must be a number from 1 to 99 (got '$reps')" >&2; exit 2; }
  [[ $rate =~ ^[1-9][0-9]*[kmg]?bit$ ]] || { echo "bench: RATE like 4mbit (got '$rate')" >&2; exit 2; }
  read -ra row_list <<<"$rows"
  ((${#row_list[@]})) || { echo "bench: ROWS names no row (rows: $all_rows)" >&2; exit 2; }
  seen=" "
  for r in "${row_list[@]}"; do
    [[ " $all_rows " == *" $r "* ]] || { echo "bench: unknown row '$r' (rows: $all_rows)" >&2; exit 2; }
    [[ $seen != *" $r "* ]] || { echo "bench: row '$r' named twice" >&2; exit 2; }
    seen+="$r "
  done
elif [[ ${1:-} == --table ]]; then
  shift; exec bash "$(dirname "${BASH_SOURCE[0]}")/bench-pool.sh" "$@"
else
  # --reps N and --lossless, each at most once, in either order
  args="$*"
  bad() { echo "bench: $1 (got: $args; bench.sh --help)" >&2; exit 2; }
  while (($#)); do
    case $1 in
      --reps)
        [[ -z ${reps_given:-} ]] || bad "--reps given twice"
        [[ ${2:-} =~ ^[1-9][0-9]?$ ]] || bad "--reps takes a number of rounds from 1 to 99"
        reps=$2 reps_given=1; shift 2 ;;
      --lossless) [[ -z $only ]] || bad "--lossless given twice"; only=lossless; shift ;;
      --table | --fabric) bad "$1 comes first, and alone with its own arguments" ;;
      *) bad "unknown argument '$1'; usage: bench.sh [--reps 1-99] [--lossless] | --fabric [REPS [RATE [ROWS]]] | --table LOG..." ;;
    esac
  done
fi
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
. tools/bench-lib.sh
export HOME=${HOME:-/root}
export PATH="$HOME/.cargo/bin:$PATH"


KDIR=${KDIR:-$(qemu/build-kernel.sh)} || { echo "bench: no test kernel" >&2; exit 1; }
export KDIR
# Rebuild the module when it is missing or older than its sources.
if [[ ! -f metaroce.ko ]] ||
   [[ -n $(find rust include Kbuild Makefile -newer metaroce.ko -type f \
             \( -name '*.rs' -o -name '*.c' -o -name '*.h' -o -name Kbuild -o -name Makefile \) \
             ! -name bindings_generated.rs -print -quit) ]]; then
  echo "[bench] building metaroce.ko" >&2
  if ! make -s KDIR="$KDIR" modules >&2; then
    [[ -f metaroce.ko ]] || { echo "bench: module build failed" >&2; exit 1; }
    echo "[bench] module build failed: benchmarking the existing metaroce.ko" >&2
  fi
fi

mkdir -p out
if [[ -n $fabric ]]; then
  name=bench-fabric guest=(tests/guest/bench-fabric.sh "$reps" "$rate" "${row_list[@]}")
  # 6 rows x 2 devices x REPS runs, each capped at 60 s (most take 10-20 s).
  limit=$((600 + reps * 12 * 70))
else
  # generous: 3 rounds took 12 minutes (stop 59), the first round's rxe
  # timeouts under loss 4 of them
  name=bench guest=(tests/guest/bench.sh "$reps" ${only:+"$only"}) limit=$((1200 + reps * 720))
fi
log=out/$name-$(date +%Y%m%d-%H%M%S).log
echo "[bench] two guests, rxe0 and mr0${fabric:+ on the fabric}; full output in $log" >&2
start=$SECONDS
# The host's UDP receive-buffer drops (/proc/net/snmp): the guests' link is UDP
# between the two QEMUs, so a drop there is a packet lost on the "lossless" link
# that neither guest counts (qemu/vm-run, MR_HOST_RMEM). Printed after the table.
udp_rcvbuf_errors() { awk '$1 == "Udp:" { if (!h) { for (i = 2; i <= NF; i++) c[$i] = i; h = 1 } else { print $c["RcvbufErrors"]; exit } }' /proc/net/snmp; }
drops0=$(udp_rcvbuf_errors)
commit=$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD 2>/dev/null || echo +dirty)
qemu/vm-run -n 2 -t "$limit" "${guest[@]}" >"$log" 2>&1 &
vm=$!
trap 'kill -TERM "$vm" 2>/dev/null; wait "$vm"; exit 130' INT TERM
# Follow guest 1's results as they come; once guest 1 is done, give guest 2
# a minute, then stop the run (a guest wedged by a kernel bug would otherwise
# hold it to the time limit). The results are read from guest 1's TAP file.
rundir="" shown=0 g1done=""
while kill -0 "$vm" 2>/dev/null; do
  sleep 5
  [[ -n $rundir ]] || rundir=$(vm_rundir "$log" "$name")
  [[ -n $rundir && -f $rundir/tap.1 ]] || continue
  n=$(grep -c '^# BENCH' "$rundir/tap.1")
  if ((n > shown)); then
    grep '^# BENCH' "$rundir/tap.1" | tail -n +$((shown + 1)) | sed 's/^# /[bench] /' >&2; shown=$n
  fi
  if [[ -f $rundir/rc.1 && ! -f $rundir/rc.2 ]]; then
    g1done=${g1done:-$SECONDS}
    if ((SECONDS - g1done > 60)); then
      echo "[bench] guest 1 finished, guest 2 did not within 60 s: stopping the run" >&2
      kill -TERM "$vm"
    fi
  fi
done
wait "$vm"; vmrc=$?
grep '^\[vm-run\]' "$log" >&2
elapsed=$((SECONDS - start))
# for --table: what ran and for how long
echo "[bench] commit $commit elapsed ${elapsed}s" >>"$log"

if [[ -n $fabric ]]; then
  # guest 1's TAP: "# BENCH side=client dev=mr0 row=gray5 rep=2 size=65536
  # value=4.31 unit=MiB/s" and "# SPINES dev=mr0 row=gray5 rep=2 1:a2b/b2a …"
  sed -n 's/^# \(BENCH\|SPINES\) /\1 /p' "${rundir:-/dev/null}/tap.1" 2>/dev/null |
    awk -v when="$(date '+%Y-%m-%d %H:%M')" -v secs="$elapsed" -v reps="$reps" -v rate="$rate" \
      -v commit="$commit" -f tools/bench-fabric.awk
else
  # both guests' TAP: "# BENCH side=server dev=mr0 test=write_bw size=65536 loss=0 value=4.31 unit=MiB/s ..."
  cat "${rundir:-/dev/null}"/tap.[12] 2>/dev/null | sed -n 's/^# BENCH //p' |
    awk -v when="$(date '+%Y-%m-%d %H:%M')" -v secs="$elapsed" -v commit="$commit" -f tools/bench.awk
fi
if [[ -n $rundir ]]; then
  k=$(grep -hE -m3 'soft lockup|BUG:|WARNING:|Oops|KASAN|UBSAN|blocked for more than' "$rundir"/console.* 2>/dev/null)
  [[ -n $k ]] && { echo "kernel problems on the guest consoles (first lines):"; sed 's/^/    /' <<<"$k"; }
fi
echo "host: UDP datagrams dropped for a full socket buffer during the run (the guests' link; other host sockets count too): $(($(udp_rcvbuf_errors) - drops0))"
echo "[bench] full output: $log; guest logs: ${rundir:-none}"
if ((vmrc != 0)); then
  echo "[bench] vm-run exit $vmrc: see $log and ${rundir:-out/}" >&2
  exit 1
fi
