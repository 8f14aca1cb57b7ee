#!/usr/bin/env bash
# Where the CPU goes (a measurement, not a pass/fail test; issue 16,
# Documentation/bench.rst "Profiles"): in each of two guests, rxe0 and mr0
# (a connection per QP, as the bench's mr0 rows) on the same netdev; for each
# device, ib_TEST of SIZE bytes (TEST write_bw, the default, or send_bw; SIZE
# 1-1048576, 65536 by default; 32 MiB a run, at most 65536 messages; guest 2
# -> guest 1) under `perf record -a -g`
# (cpu-clock: TCG guests have no PMU) on both guests, then the top symbols of
# each side by self time as a share of its busy (not idle) time (`perf report
# --no-children --sort dso,sym`), printed as "# PROFILE dev=D side=S busy_pct=P
# dso=O sym=NAME" lines, the share of the RDMA module itself (dso [metaroce] or
# [rdma_rxe]) as "# PROFILE-DSO ...", all kept in the run directory
# (profile.DEV.ID.txt).
#   qemu/vm-run -n 2 -t 900 tests/guest/profile.sh [TOP (20) [TEST (write_bw) [SIZE (65536)]]]
. "$MR_REPO/tests/lib.sh"
top=${1:-20} test=${2:-write_bw} size=${3:-65536}
[[ $top =~ ^[0-9]+$ && $test =~ ^(write|send)_bw$ && $size =~ ^[1-9][0-9]{0,6}$ ]] && ((size <= 1048576)) ||
  { echo "usage: profile.sh [TOP [write_bw|send_bw [SIZE (1-1048576)]]]" >&2; exit 2; }
# 32 MiB a run, at most 65536 messages (perf records 45 s; a run cut at 60 s fails)
iters=$((33554432 / size > 65536 ? 65536 : 33554432 / size))
server() { ((MR_ID == 1)); }
side() { server && echo server || echo client; }
command -v perf >/dev/null || { fail "perf: not installed (apt install linux-perf)"; done_testing; }

load_kmod udp_tunnel ip6_udp_tunnel >/dev/null 2>&1
load_kmod rdma_rxe >/dev/null 2>&1
check "rdma link add rxe0 type rxe netdev $MR_IF" rdma link add rxe0 type rxe netdev "$MR_IF"
check "insmod metaroce.ko ${MR_MODPARAMS//,/ } shared=0" insmod "$MR_REPO/metaroce.ko" ${MR_MODPARAMS//,/ } shared=0
check "rdma link add mr0 type metaroce netdev $MR_IF" rdma link add mr0 type metaroce netdev "$MR_IF"
check "peer reachable over $MR_IF" retry 90 ping -q -c1 -W1 "$MR_PEER_IP4"
sysctl -qw kernel.kptr_restrict=0 kernel.perf_event_paranoid=-1

port=18700
for dev in rxe0 mr0; do
  gid=$(retry 10 gid_index "$dev" "$MR_IP4") || { fail "$dev: RoCE v2 GID"; continue; }
  port=$((port + 1))
  meet "ready-$dev"
  # perf's data in guest memory (the run directory is 9p: writing it there
  # would be profiled too).
  data=/dev/shm/perf.$dev.$MR_ID.data
  perf record -q -a -g -e cpu-clock -F 997 -o "$data" -- sleep 45 >/dev/null 2>&1 &
  ppid=$!
  # perf's start-up (synthesising every process's maps, under TCG) can take
  # longer than a run: start the run once perf has written its data file, and
  # a moment after. Both guests wait so, and meet again.
  for _ in $(seq 40); do [[ -s $data ]] && break; sleep 0.5; done
  sleep 2
  meet "perf-$dev"
  if server; then
    out=$(timeout 60 "ib_$test" -d "$dev" -x "$gid" -s "$size" -n "$iters" -F -p "$port" 2>&1); rc=$?
  else
    end=$((SECONDS + 40))
    while :; do
      out=$(timeout 60 "ib_$test" -d "$dev" -x "$gid" -s "$size" -n "$iters" -F -p "$port" "$MR_PEER_IP4" 2>&1); rc=$?
      ((rc == 0)) || ! grep -Eq "Couldn.t connect|Unable to open|Failed to" <<<"$out" || ((SECONDS >= end)) && break
      sleep 1
    done
  fi
  bw=$(awk -v s="$size" '$1 == s { print $4 }' <<<"$out" | tail -1)
  ((rc == 0)) && pass "$dev: ib_$test $size B under perf (${bw:-?} MB/s, $(side))" ||
    fail "$dev: ib_$test $size B under perf (exit $rc)" "$out"
  kill -INT "$ppid" 2>/dev/null; wait "$ppid" 2>/dev/null
  rep=$MR_RUNDIR/profile.$dev.$MR_ID.txt
  # Self time by object and symbol, as shares of the busy time: the guest's
  # idle loop (a TCG vCPU halted) left out.
  perf report -q -i "$data" --kallsyms /proc/kallsyms --no-children --sort dso,sym --stdio -g none 2>/dev/null |
    awk '$1 ~ /%$/ { p = $1; sub("%", "", p); $1 = ""; sym = $0
                     if (sym ~ /safe_halt|default_idle|cpuidle|poll_idle|acpi_idle/) { idle += p; next }
                     n++; pct[n] = p; name[n] = sym; busy += p }
         END { for (i = 1; i <= n; i++) printf "%.2f%s\n", (busy ? 100 * pct[i] / busy : 0), name[i]
               printf "# idle %.1f%% of the samples\n", idle }' >"$rep"
  if [[ -s $rep ]]; then
    pass "$dev: profile of the $(side) ($(grep -c '^[0-9]' "$rep") symbols, $(sed -n 's/^# //p' "$rep"))"
    for d in metaroce rdma_rxe kernel.vmlinux; do
      diag "PROFILE-DSO dev=$dev side=$(side) dso=$d busy_pct=$(awk -v d="[$d]" '$2 == d { s += $1 } END { printf "%.1f", s }' "$rep")"
    done
    head -n "$top" "$rep" | grep '^[0-9]' | while read -r pct dso sym; do
      diag "PROFILE dev=$dev side=$(side) busy_pct=$pct dso=$dso sym=$sym"
    done
  else
    fail "$dev: profile of the $(side)" "$(perf report -i "$data" --stdio 2>&1 | head -20)"
  fi
  rm -f "$data"
  meet "done-$dev"
done
done_testing
