#!/usr/bin/env bash
# The bench's table (tools/bench.awk, Documentation/bench.rst) from made-up BENCH
# lines whose medians, ranges and per-round ratios are known: it checks the rules
# a reader of the table relies on, not any measured figure. Run by tests/host.sh.
#   bash tests/bench-table.sh
set -euo pipefail
cd "$(dirname "$0")/.."
fails=0
check() { # DESCRIPTION PATTERN TEXT: TEXT has a line matching the ERE PATTERN
  if grep -Eq -- "$2" <<<"$3"; then echo "ok - $1"; else echo "not ok - $1"; fails=$((fails + 1)); fi
}
check_not() { # DESCRIPTION PATTERN TEXT: no line of TEXT matches PATTERN
  if grep -Eq -- "$2" <<<"$3"; then echo "not ok - $1"; fails=$((fails + 1)); else echo "ok - $1"; fi
}
table() { awk -v when=test -v secs=1 -v commit=test -f tools/bench.awk; }
line() { # DEV TEST SIZE LOSS VALUE PKMSG REP
  echo "side=server dev=$1 test=$2 size=$3 loss=$4 value=$5 unit=MiB/s pkmsg=$6 cpu=10.0 tick=5.0 rep=$7"
}

# Three rounds. write_bw 64 KiB: rxe 10 each round, metaroce 14, 15, 16 (ratios
# 1.4, 1.5, 1.6). Packets per message, lossless and at 1 % loss, round by round:
# metaroce 48, 60, 40 and 48, 66, 60 (each round's ratio 1.00, 1.10, 1.50: median
# 1.10; the medians' quotient would be 60/48 = 1.25, round 1's alone 1.00); rxe 64,
# 128, 64 and 96, 128, 64 (1.50, 1.00, 1.00: median 1.00; the medians' quotient and
# round 1's alone 1.50).
mrl=(48 60 40) mrk=(48 66 60) rxl=(64 128 64) rxk=(96 128 64)
rounds=$(
  for r in 1 2 3; do
    line rxe0 write_bw 65536 0 10 "${rxl[r - 1]}" $r
    line mr0 write_bw 65536 0 $((13 + r)) "${mrl[r - 1]}" $r
    line rxe0 write_bw 65536 1 3 "${rxk[r - 1]}" $r
    line mr0 write_bw 65536 1 12 "${mrk[r - 1]}" $r
  done
)
out=$(table <<<"$rounds")
check "lossless ratio: the median of the rounds' ratios with their range" \
  '^write_bw +64 KiB +MiB/s +10\.00 +15\.00 1\.50 \[1\.40-1\.60\] ' "$out"
check "loss row: pk is the median of each round's ratio to its own lossless run (rxe 1.00, metaroce 1.10)" \
  '^write_bw +64 KiB +1% .* 1\.00 +1\.10 ' "$out"
check_not "no send_bw_ev row in a log without one" '^send_bw_ev +64 KiB' "$out"

# A log from before the loss rows ran in rounds: one loss run per device, no rep= on
# it; pk is its figure over the lossless median (metaroce 60/48, rxe 96/64).
old=$(grep -v ' loss=1 ' <<<"$rounds"; line rxe0 write_bw 65536 1 3 96 0 | sed 's/ rep=0$//'
  line mr0 write_bw 65536 1 12 60 0 | sed 's/ rep=0$//')
out=$(table <<<"$old")
check "a log without rounds on its loss rows: pk against the lossless median (rxe 1.50, metaroce 1.25)" \
  '^write_bw +64 KiB +1% .* 1\.50 +1\.25 ' "$out"

# write_bw 4 KiB: metaroce 16 in round 1, then a timeout and a failure; rxe 10 each
# round. The ratio is round 1's alone and must say so, and the row is a miss.
out=$(table <<<"$rounds
$(for r in 1 2 3; do line rxe0 write_bw 4096 0 10 4 $r; done
  line mr0 write_bw 4096 0 16 3 1; line mr0 write_bw 4096 0 timeout 3 2; line mr0 write_bw 4096 0 fail 3 3)")
check "a ratio from fewer rounds than ran says how many, and a failed metaroce run is a miss" \
  '^write_bw +4 KiB +MiB/s +10\.00 +16\.00 1\.60 \(1/3\) +>= 1\.5 +NO \(a run failed\)' "$out"
# 10 % loss: metaroce 12 in round 1 (rxe 3), timed out in rounds 2 and 3 (rxe 3): its
# ratio to rxe counts the timeouts as 0, as its frac does: 4.00, 0, 0, median 0.
out=$(table <<<"$rounds
$(for r in 1 2 3; do line rxe0 write_bw 65536 10 3 64 $r; done
  line mr0 write_bw 65536 10 12 48 1; line mr0 write_bw 65536 10 timeout 48 2; line mr0 write_bw 65536 10 timeout 48 3)")
check "a loss row's mr/rxe counts metaroce's timed-out rounds as 0" \
  '^write_bw +64 KiB +10% .* 0\.00 \[0\.00-4\.00\] .*>= 0\.6 +NO' "$out"

# A latency of 0.00 usec is no figure (as a bandwidth of 0.00 MiB/s): write_lat with
# metaroce at 0 in round 1 and 12 in round 2, rxe 10 in both: the ratio is round 2's.
out=$(table <<<"$(for r in 1 2; do echo "side=server dev=rxe0 test=write_lat size=64 loss=0 value=10 unit=usec rep=$r"; done
  echo "side=server dev=mr0 test=write_lat size=64 loss=0 value=0.00 unit=usec rep=1"
  echo "side=server dev=mr0 test=write_lat size=64 loss=0 value=12 unit=usec rep=2")")
check "a latency of 0.00 is left out, not a hit" '^write_lat +64 B +usec .* 1\.20 \(1/2\) +<= 1 +NO' "$out"

# send_bw 64 KiB: ratios 12.85/7.95 and 13.47/9.75, median 1.499: shown as 1.50, a
# miss of the 1.5 target, which the verdict must say with its third decimal.
out=$(table <<<"$(line rxe0 send_bw 65536 0 7.95 64 1; line mr0 send_bw 65536 0 12.85 48 1
  line rxe0 send_bw 65536 0 9.75 64 2; line mr0 send_bw 65536 0 13.47 48 2)")
check "a miss that rounds to the target says so with three decimals" \
  '^send_bw +64 KiB .* 1\.50 \[1\.38-1\.62\] +>= 1\.5 +NO \(1\.499\)' "$out"

out=$(table <<<"$rounds
$(line rxe0 send_bw_ev 65536 0 20 64 1; line mr0 send_bw_ev 65536 0 22 48 1)")
check "an event-mode row when the log has one" '^send_bw_ev +64 KiB +MiB/s +20\.00 +22\.00 1\.10' "$out"

# --table pools benches: bench 1 with rounds 1-2 (write_bw 64 KiB: rxe 10, metaroce 14
# and 15; iperf3 20, once, without a round), bench 2 with one round (rxe 10, metaroce
# 17; iperf3 30): 3 rounds, ratio 1.50 [1.40-1.70] (bench 2's round overwriting one
# of bench 1's would lose 1.40 or 1.50), iperf3 the median of its two runs (25), each
# bench's commit named.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fake() { # N COMMIT: a bench log and its guest logs, the BENCH lines from stdin
  mkdir -p "$tmp/run$1"; sed 's/^/# BENCH /' >"$tmp/run$1/tap.1"; : >"$tmp/run$1/tap.2"
  printf '[vm-run] bench: 2 guest(s), TCG, limit 2640s, logs %s\n[vm-run] bench: passed\n[bench] commit %s elapsed 100s\n' \
    "$tmp/run$1" "$2" >"$tmp/bench-$1.log"
}
{ for r in 1 2; do line rxe0 write_bw 65536 0 10 64 $r; line mr0 write_bw 65536 0 $((13 + r)) 48 $r; done
  echo "side=server dev=tcp test=iperf3 size=0 loss=0 value=20 unit=MiB/s"; } | fake 1 aaa1111
{ line rxe0 write_bw 65536 0 10 64 1; line mr0 write_bw 65536 0 17 48 1
  echo "side=server dev=tcp test=iperf3 size=0 loss=0 value=30 unit=MiB/s"; } | fake 2 bbb2222
# (a refused --table is a failed check below, not the end of this script)
out=$(bash tools/bench.sh --table "$tmp/bench-1.log" "$tmp/bench-2.log") || true
check "--table: the benches' rounds pooled (3 rounds, the ratio over all three)" \
  '^write_bw +64 KiB +MiB/s +10\.00 +15\.00 1\.50 \[1\.40-1\.70\] ' "$out"
check "--table: a row without rounds takes the median of its runs, one a bench" \
  'same link: 25\.00 MiB/s; write_bw 64 KiB / iperf3: rxe 0\.40, metaroce 0\.60 ' "$out"
check "--table: the header counts the pooled rounds and names each log's commit and the time" \
  'commit aaa1111, bbb2222 \(log by log\) \(two QEMU guests, 200 s, 3 round\(s\)\)' "$out"
rc_of() { if bash tools/bench.sh --table "$@" >/dev/null 2>&1; then echo 0; else echo $?; fi; }
# a run directory whose path holds " logs " (vm-run's line ends in "logs DIR")
mkdir -p "$tmp/a logs b"; cp -r "$tmp/run1" "$tmp/a logs b/run1"
sed "s|logs $tmp/run1\$|logs $tmp/a logs b/run1|" "$tmp/bench-1.log" >"$tmp/spaced.log"
out=$(bash tools/bench.sh --table "$tmp/spaced.log" 2>&1) || true
check "--table: a run directory whose path holds ' logs '" '^write_bw +64 KiB +MiB/s +10\.00 +14\.50 1\.45 \[1\.40-1\.50\] ' "$out"
cp "$tmp/bench-1.log" "$tmp/copy.log"
check "--table refuses two logs of one run, a copy included (exit 2)" '^2 2$' \
  "$(rc_of "$tmp/bench-1.log" "$tmp/bench-1.log") $(rc_of "$tmp/bench-1.log" "$tmp/copy.log")"
grep -v 'bench: passed' "$tmp/bench-2.log" >"$tmp/running.log"
check "--table refuses a log whose run did not pass (exit 1)" '^1$' "$(rc_of "$tmp/bench-1.log" "$tmp/running.log")"
# bench 3: lossless rows only (one round, write_bw 64 KiB rxe 10, metaroce 15), pooled
# with bench 4, whose two rounds also ran 1 % loss: the loss row ran in 2 of the 3
# rounds, and both gave a ratio, so no "(K/N)".
line rxe0 write_bw 65536 0 10 64 1 | { cat; line mr0 write_bw 65536 0 15 48 1; } | fake 3 ccc3333
{ for r in 1 2; do line rxe0 write_bw 65536 0 10 64 $r; line mr0 write_bw 65536 0 15 48 $r
    line rxe0 write_bw 65536 1 5 64 $r; line mr0 write_bw 65536 1 14 48 $r; done; } | fake 4 ddd4444
out=$(bash tools/bench.sh --table "$tmp/bench-3.log" "$tmp/bench-4.log") || true
check "--table: a lossless-only bench's rounds do not count against the loss rows" \
  '^write_bw +64 KiB +1% +5\.00 .* 2\.80 \[2\.80-2\.80\] +1\.00 +1\.00 +>= 0\.95' "$out"
# the multiple-QP rows ran once a bench: rxe's 16-QP send_bw failed in bench 5 and
# gave 26 in bench 6; the pooled figure says it is 1 of 2.
q() { echo "side=server dev=$1 test=send_bw_q$2 size=65536 loss=0 value=$3 unit=MiB/s"; }
{ q rxe0 1 10; q rxe0 16 fail; q mr0 1 15; q mr0 16 29; q mr0s 1 17; q mr0s 16 22; } | fake 5 eee5555
{ q rxe0 1 11; q rxe0 16 26; q mr0 1 16; q mr0 16 30; q mr0s 1 18; q mr0s 16 23; } | fake 6 fff6666
out=$(bash tools/bench.sh --table "$tmp/bench-5.log" "$tmp/bench-6.log") || true
check "--table: a multiple-QP figure from fewer benches than ran it says how many" '^ +16 +26\.00\(1/2\) +29\.50 ' "$out"
# rxe timed out in one round and failed in two: "fail" (neither the first value nor
# the one ranked first on a tie)
out=$(table <<<"$(line rxe0 write_bw 65536 r25 timeout 64 1; line rxe0 write_bw 65536 r25 fail 64 2
  line rxe0 write_bw 65536 r25 fail 64 3)")
check "a figure with no number shows its most frequent value" '^write_bw +64 KiB +ro25% +fail ' "$out"
# what --table refuses (exit 2): a fabric bench's log, a directory, a file that is no
# bench log, and, pooled with others, a log whose loss rows ran without rounds
cp "$tmp/bench-1.log" "$tmp/fabric.log"; sed -i 's/^\[vm-run\] bench:/[vm-run] bench-fabric:/' "$tmp/fabric.log"
{ line rxe0 write_bw 65536 0 10 64 1; line mr0 write_bw 65536 0 15 48 1
  echo "side=server dev=mr0 test=write_bw size=65536 loss=1 value=12 unit=MiB/s pkmsg=48"; } | fake 7 ggg7777
check "--table refuses a fabric log, a directory, README.md and, pooled, a log without loss rounds (exit 2 each)" \
  '^2 2 2 2 0$' "$(rc_of "$tmp/fabric.log") $(rc_of "$tmp") $(rc_of README.md) $(rc_of "$tmp/bench-7.log" "$tmp/bench-1.log") $(rc_of "$tmp/bench-7.log")"

((fails == 0)) && echo "bench table: all passed" || { echo "bench table: $fails failed"; exit 1; }
