#!/usr/bin/env bash
# Benchmark (not part of the pass/fail tests): one two-guest run in which
# rxe0 (the kernel's soft-RoCE) and mr0 (metaroce) sit on the same netdev and
# each carries ib_write_bw and ib_send_bw (4 KiB, 64 KiB, 1 MiB) and
# ib_write_lat (64 B) on a lossless link, then ib_write_bw and ib_send_bw at
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
#   bash tools/bench.sh          (about 10 minutes under TCG)
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
#                                (default 3 4mbit, all six rows; 10-16 min)
#
# The guests' script is tests/guest/bench.sh (bench-fabric.sh); its raw output
# and the vm-run logs stay in out/ (the "logs" path printed by vm-run).
set -uo pipefail
fabric=""
if [[ ${1:-} == --fabric ]]; then
  fabric=1 reps=${2:-3} rate=${3:-4mbit} rows=${4:-lossless down gray100 gray5 congest qp8}
  [[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "bench: REPS must be a number" >&2; exit 2; }
  [[ $rate =~ ^[0-9]+[kmg]?bit$ ]] || { echo "bench: RATE like 4mbit" >&2; exit 2; }
elif (($#)); then
  sed -n '2,/^set -uo/{/^set -uo/d;p}' "$0" >&2; exit 2
fi
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
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
  # shellcheck disable=SC2206  # ROWS: words, one argument each
  name=bench-fabric guest=(tests/guest/bench-fabric.sh "$reps" "$rate" $rows)
  # 6 rows x 2 devices x REPS runs, each capped at 60 s (most take 10-20 s).
  limit=$((600 + reps * 12 * 70))
else
  name=bench guest=(tests/guest/bench.sh) limit=1800
fi
log=out/$name-$(date +%Y%m%d-%H%M%S).log
echo "[bench] two guests, rxe0 and mr0${fabric:+ on the fabric}; full output in $log" >&2
start=$SECONDS
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
  [[ -n $rundir ]] || rundir=$(sed -n "s/^\[vm-run\] $name: .* logs \(.*\)\$/\1/p" "$log")
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

if [[ -n $fabric ]]; then
  # guest 1's TAP: "# BENCH side=client dev=mr0 row=gray5 rep=2 size=65536
  # value=4.31 unit=MiB/s" and "# SPINES dev=mr0 row=gray5 rep=2 1:a2b/b2a …"
  sed -n 's/^# \(BENCH\|SPINES\) /\1 /p' "${rundir:-/dev/null}/tap.1" 2>/dev/null |
    awk -v when="$(date '+%Y-%m-%d %H:%M')" -v secs="$elapsed" -v reps="$reps" -v rate="$rate" \
      -v commit="$commit" -f tools/bench-fabric.awk
else
# guest 1's TAP: # BENCH side=server dev=mr0 test=write_bw size=65536 loss=1 value=4.31 unit=MiB/s
sed -n 's/^# BENCH //p' "${rundir:-/dev/null}/tap.1" 2>/dev/null | awk -v when="$(date '+%Y-%m-%d %H:%M')" -v secs="$elapsed" '
  function kv(s,   a, i, n, p) {
    split("", f); n = split(s, a, " ")
    for (i = 1; i <= n; i++) { p = index(a[i], "="); f[substr(a[i], 1, p - 1)] = substr(a[i], p + 1) }
  }
  function hsize(s) {
    if (s >= 1048576 && s % 1048576 == 0) return s / 1048576 " MiB"
    if (s >= 1024 && s % 1024 == 0) return s / 1024 " KiB"
    return s " B"
  }
  function num(x) { return x ~ /^[0-9.]+$/ }
  function get(test, size, loss, dev) {
    return (test SUBSEP size SUBSEP loss SUBSEP dev) in val ? val[test, size, loss, dev] : "-"
  }
  function div(a, b) { return (num(a) && num(b) && b + 0 > 0) ? sprintf("%.2f", a / b) : "-" }
  # target: "ge X" or "le X" on value v; prints "X yes|no", or "X -" without v
  function tgt(kind, x, v) {
    if (kind == "") return ""
    return sprintf("%s %-4s %s", kind == "ge" ? ">=" : "<=", x, \
      !num(v) ? "-" : ((kind == "ge" ? v + 0 >= x : v + 0 <= x) ? "yes" : "NO"))
  }
  function bad(v) { if (v == "fail" || v == "timeout") nfail++ }
  function row(test, size, unit, kind, x,   r, m, ratio) {
    r = get(test, size, 0, "rxe0"); m = get(test, size, 0, "mr0"); ratio = div(m, r)
    printf "%-10s %-7s %-6s %9s %9s %7s   %s\n", test, hsize(size), unit, r, m, ratio, tgt(kind, x, ratio)
    bad(r); bad(m)
  }
  function pk(test, size, loss, dev) {
    return (test SUBSEP size SUBSEP loss SUBSEP dev) in pkm ? pkm[test, size, loss, dev] : "-"
  }
  # loss "r25": netem reorder 25 % (delay 1ms), no loss
  function lab(l) { return l ~ /^r/ ? "ro" substr(l, 2) "%" : l "%" }
  function lrow(test, size, loss, kind, x,   r, m, r0, m0, rf, mf) {
    r = get(test, size, loss, "rxe0"); m = get(test, size, loss, "mr0")
    r0 = get(test, size, 0, "rxe0"); m0 = get(test, size, 0, "mr0")
    rf = div(r, r0); mf = div(m, m0)
    printf "%-10s %-7s %6s %9s %6s %9s %6s %7s %6s %6s   %s\n", test, hsize(size), lab(loss), r, rf, m, mf, div(m, r), \
      div(pk(test, size, loss, "rxe0"), pk(test, size, 0, "rxe0")), \
      div(pk(test, size, loss, "mr0"), pk(test, size, 0, "mr0")), \
      tgt(kind, x, (m == "fail" || m == "timeout") ? 0 : mf)
    bad(r); bad(m)
  }
  # the multi-QP rows of TEST: 1 QP, 16 QPs, and 16/1 per device
  function mqrow(label, r, m, s, kind, x) {
    printf "%-10s %-5s %8s %8s %9s %7s %7s %7s   %s\n", label == "1" ? test_ : "", label, r, m, s, \
      label == "16/1" ? "" : div(m, r), label == "16/1" ? "" : div(s, r), label == "16/1" ? "" : div(s, m), tgt(kind, x, s)
  }
  function mqrows(test,   q, r1, m1, s1, r16, m16, s16) {
    test_ = test
    r1 = get(test "_q1", 65536, 0, "rxe0"); m1 = get(test "_q1", 65536, 0, "mr0"); s1 = get(test "_q1", 65536, 0, "mr0s")
    r16 = get(test "_q16", 65536, 0, "rxe0"); m16 = get(test "_q16", 65536, 0, "mr0"); s16 = get(test "_q16", 65536, 0, "mr0s")
    mqrow("1", r1, m1, s1); mqrow("16", r16, m16, s16)
    mqrow("16/1", div(r16, r1), div(m16, m1), div(s16, s1), "ge", 1)
    bad(r1); bad(m1); bad(s1); bad(r16); bad(m16); bad(s16)
  }
  { kv($0); l = ("loss" in f) ? f["loss"] : 0; val[f["test"], f["size"], l, f["dev"]] = f["value"]
    if ("pkmsg" in f) pkm[f["test"], f["size"], l, f["dev"]] = f["pkmsg"]
    if (l != 0 && !(l in seen)) { seen[l] = 1; losses[++nl] = l } }
  END {
    printf "\nmetaroce bench, %s (two QEMU guests, %d s)\n\n", when, secs
    print "lossless"
    printf "%-10s %-7s %-6s %9s %9s %7s   %s\n", "test", "size", "unit", "rxe", "metaroce", "mr/rxe", "target mr/rxe"
    printf "%-10s %-7s %-6s %9s %9s %7s   %s\n", "----", "----", "----", "---", "--------", "------", "-------------"
    n = split("write_bw send_bw", tests, " ")
    for (i = 1; i <= n; i++) {
      row(tests[i], 4096, "MiB/s", "ge", 1.5); row(tests[i], 65536, "MiB/s", "ge", 1.5); row(tests[i], 1048576, "MiB/s", "ge", 1.5)
    }
    row("write_lat", 64, "usec", "le", 1)
    print "\nunder loss (netem loss on both guests\047 egress) and reordering (ro25%: netem delay 1ms reorder 25%), MiB/s;"
    print "\"frac\" = fraction of the same device\047s lossless 64 KiB figure; \"rxe pk\", \"mr pk\" = packets the server"
    print "received per message against the same device\047s lossless 64 KiB run (above 1: spurious retransmissions)"
    printf "%-10s %-7s %6s %9s %6s %9s %6s %7s %6s %6s   %s\n", "test", "size", "loss", "rxe", "frac", "metaroce", "frac", "mr/rxe", "rxe pk", "mr pk", "target mr frac"
    printf "%-10s %-7s %6s %9s %6s %9s %6s %7s %6s %6s   %s\n", "----", "----", "----", "---", "----", "--------", "----", "------", "------", "-----", "--------------"
    if (nl == 0) print "(no loss rows)"
    for (i = 1; i <= n; i++)
      for (k = 1; k <= nl; k++)
        lrow(tests[i], 65536, losses[k], losses[k] == 1 ? "ge" : losses[k] == 10 ? "ge" : "", losses[k] == 1 ? 0.95 : 0.6)
    print "\nmultiple QPs, lossless, 64 KiB, 16 MiB per run (1 QP: 256 messages; 16 QPs: -q 16, 16 each), MiB/s;"
    print "\"mr/QP\" = metaroce with a connection per QP (shared=0), \"mr/shared\" = metaroce with one connection"
    print "per peer for all QPs (shared=1); the \"16/1\" rows: each device\047s 16-QP figure over its 1-QP one"
    printf "%-10s %-5s %8s %8s %9s %7s %7s %7s   %s\n", "test", "QPs", "rxe", "mr/QP", "mr/shared", "QP/rxe", "sh/rxe", "sh/QP", "target 16/1 (shared)"
    printf "%-10s %-5s %8s %8s %9s %7s %7s %7s   %s\n", "----", "---", "---", "-----", "---------", "------", "------", "-----", "--------------------"
    for (i = 1; i <= n; i++) mqrows(tests[i])
    t = get("iperf3", 0, 0, "tcp")
    if (t == "na") print "\niperf3: not installed"
    else printf "\nceiling: iperf3 TCP guest 2 -> guest 1, same link: %s MiB/s\n", t
    print "targets: metaroce >= 1.5x rxe lossless bandwidth; write_lat (t_avg, usec) <= rxe;"
    print "metaroce under loss >= 0.95 of its lossless bandwidth at 1 % loss and >= 0.6 at 10 %;"
    print "16 QPs sharing one connection carry at least what one QP does (16/1 >= 1)."
    print "bandwidth in MiB/s (perftest\047s MB/sec), higher is better; write_lat lower is better."
    print "loss and reordering rows run 128 x 64 KiB, capped at 60 s; lossless 64 KiB rows run 256 x 64 KiB."
    print "guests run under TCG emulation: only the ratio within one run means anything."
    if (NR == 0) print "\nno BENCH lines from guest 1: the run broke early, see the log"
    else if (nfail) printf "%d result(s) fail/timeout; details in the log (# lines after each)\n", nfail
  }'
fi
if [[ -n $rundir ]]; then
  k=$(grep -hE -m3 'soft lockup|BUG:|WARNING:|Oops|KASAN|UBSAN|blocked for more than' "$rundir"/console.* 2>/dev/null)
  [[ -n $k ]] && { echo "kernel problems on the guest consoles (first lines):"; sed 's/^/    /' <<<"$k"; }
fi
if ((vmrc != 0)); then
  echo "[bench] vm-run exit $vmrc: see $log and ${rundir:-out/}" >&2
fi
echo "[bench] full output: $log; guest logs: ${rundir:-none}"
