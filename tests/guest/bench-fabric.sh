#!/usr/bin/env bash
# Fabric benchmark (not a pass/fail test): rxe0 (the kernel's rxe, UDP 4791)
# and mr0 (metaroce, UDP 4792) side by side on the endpoints of the routed
# leaf–spine fabric of tests/fabric.sh (4 spines, ECMP on the L4 hash), each
# running ib_write_bw at 64 KiB under the same fabric events:
#
#   lossless    no event
#   down        spine 1 hard down (fabric_spine 1 down)
#   gray100     spine 1 gray, 100 % loss both ways (a black hole)
#   gray5       spine 1 gray, 5 % loss both ways
#   congest     spine 1 congested: A→B limited to RATE (fabric_spine 1 congest)
#   qp8         8 QPs (ib_write_bw -q 8), lossless
#
# Guest 1 (endpoint A, where the fabric lives) is the client and so the
# sender: the data goes A→B, the direction `congest` limits. Guest 1 applies
# the row's event before each run and clears it after. perftest's TCP side
# channel (and iperf3) is routed over the last spine by tests/fabric.sh's
# policy rule in both leaves, so an event on spine 1 hits only the RDMA
# traffic. Each run prints
#   # BENCH side=client dev=mr0 row=gray5 rep=2 value=4.31 unit=MiB/s
# (value=timeout: hit its cap; value=fail: failed otherwise) and, in guest 1,
# the packets each spine forwarded during it and the device's counters that
# moved. tools/bench.sh --fabric turns guest 1's lines into a table.
#   bench-fabric.sh [REPS [RATE [ROW...]]]   (default 3 rounds, 4mbit, all rows)
#   (run by tools/bench.sh --fabric: qemu/vm-run -n 2 -t 3120 tests/guest/bench-fabric.sh 3 4mbit)
. "$MR_REPO/tests/lib.sh"
. "$MR_REPO/tests/fabric.sh"

reps=${1:-3}
rate=${2:-4mbit}
spines=4
devs=(rxe0 mr0)
rows=(lossless down gray100 gray5 congest qp8)
(($# > 2)) && rows=("${@:3}")
size=65536
iters=256            # 16 MiB per run; with -q 8, 32 per QP (perftest's -n is per QP)
run_timeout=60       # client (guest 1), per run
server_timeout=110   # server: the client's cap plus its event and counter work
connect_window=150   # how long the client keeps trying to reach the server

client() { ((MR_ID == 1)); }
side() { client && echo client || echo server; }
# bench DEV ROW REP VALUE
bench() { diag "BENCH side=$(side) dev=$1 row=$2 rep=$3 size=$size value=$4 unit=MiB/s"; }

load_kmod udp_tunnel ip6_udp_tunnel >/dev/null 2>&1
load_kmod rdma_rxe >/dev/null 2>&1
load_kmod sch_netem sch_tbf sch_red >/dev/null 2>&1
fabric_up "$spines"
check "peer $MR_PEER_IP4 reachable across the fabric" retry 300 ping -q -c1 -W1 "$MR_PEER_IP4"

# TCP (perftest's side channel, iperf3) crosses the last spine only:
# tests/fabric.sh pins it there with a policy rule in both leaves.

check "rdma link add rxe0 type rxe netdev $MR_IF" rdma link add rxe0 type rxe netdev "$MR_IF"
check "insmod metaroce.ko" insmod "$MR_REPO/metaroce.ko"
check "rdma link add mr0 type metaroce netdev $MR_IF" rdma link add mr0 type metaroce netdev "$MR_IF"
declare -A gid
for d in "${devs[@]}"; do
  gid[$d]=$(retry 10 gid_index "$d" "$MR_IP4") || gid[$d]=""
  if [[ -n ${gid[$d]} ]]; then pass "$d on $MR_IF: RoCE v2 GID for $MR_IP4 at index ${gid[$d]}"
  else fail "$d: RoCE v2 GID for $MR_IP4" "$(rdma link show 2>&1)"; fi
done

# perf TIMEOUT PORT CMD...: guest 2 serves CMD once; guest 1 reruns it while
# it only fails to connect (the server is not listening yet), until the
# connect window closes. Each run has its own TCP port, so a side that fell
# behind cannot meet a later run's peer.
connect_err='Unable to open file descriptor|Couldn.t connect|Failed to exchange data|Failed to connect'
perf() {
  local t=$1 port=$2; shift 2
  if ! client; then timeout "$t" "$@" -p "$port" 2>&1; return; fi
  local end=$((SECONDS + connect_window)) out rc
  while :; do
    out=$(timeout "$t" "$@" -p "$port" "$MR_PEER_IP4" 2>&1); rc=$?
    if ((rc == 0)) || ! grep -Eq "$connect_err" <<<"$out" || ((SECONDS >= end)); then
      printf '%s\n' "$out"; return $rc
    fi
    sleep 1
  done
}

# TCP through one spine (the pinned one), guest 1 -> guest 2, 10 s: what one
# spine carries for a guest, to read the congest rate against.
if ! command -v iperf3 >/dev/null; then
  diag "iperf3: not installed"
  bench tcp iperf3 0 na
else
  if client; then
    out=""; rc=1
    end=$((SECONDS + 60))
    while ((SECONDS < end)); do
      out=$(timeout 60 iperf3 -c "$MR_PEER_IP4" -p 5301 -t 10 -J 2>&1); rc=$?
      ((rc == 0)) && grep -q '"sum_received"' <<<"$out" && break
      rc=1
      sleep 1
    done
  else
    out=$(timeout 90 iperf3 -s -1 -J -p 5301 2>&1); rc=$?
  fi
  v=$(python3 -c 'import json,sys
d = json.loads(sys.stdin.read())
print("%.2f" % (d["end"]["sum_received"]["bits_per_second"] / 8 / 2**20))' <<<"$out" 2>/dev/null)
  if ((rc == 0)) && [[ -n $v ]]; then bench tcp iperf3 0 "$v"
  else bench tcp iperf3 0 fail; diag "iperf3: rc=$rc"; diag "$(tail -5 <<<"$out")"; fi
fi

# event ROW apply|clear (guest 1 only)
event() {
  local row=$1 op=$2
  client || return 0
  if [[ $op == clear ]]; then
    case $row in lossless | qp8) return 0 ;; esac
    fabric_spine 1 clear; fabric_spine 1 up >/dev/null 2>&1
    return 0
  fi
  case $row in
    down) fabric_spine 1 down ;;
    gray100) fabric_spine 1 gray 100 ;;
    gray5) fabric_spine 1 gray 5 ;;
    congest) fabric_spine 1 congest "$rate" ;;
    *) return 0 ;;
  esac
}

# spine_deltas BEFORE AFTER: "I:a2b/b2a" per spine, packets between two
# fabric_counters snapshots, and the drops/CE marks of spine queues that moved.
spine_deltas() {
  paste -d' ' <(echo "$1") <(echo "$2") | awk '{
    for (k = 3; k <= 6; k++) { split($k, a, "="); split($(k + 6), b, "="); d[k] = b[2] - a[2] }
    s = s sprintf("%s%d:%d/%d", (NR > 1 ? " " : ""), $2, d[3], d[4])
    if (d[5] || d[6]) q = q sprintf(" spine%d_marked=%d spine%d_dropped=%d", $2, d[5], $2, d[6])
  } END { print s q }'
}
# counters DEV: "name value" per line, the device's port counters.
counters() {
  rdma statistic show link "$1/1" 2>/dev/null |
    awk '{ for (i = 1; i < NF; i++) if ($(i + 1) ~ /^[0-9]+$/ && $i ~ /^[a-z_0-9]+$/) print $i, $(i + 1) }'
}
# counter_deltas BEFORE AFTER: "name=delta" for those that moved.
counter_deltas() {
  awk 'NR == FNR { b[$1] = $2; next } $2 != b[$1] { printf "%s%s=%d", sep, $1, $2 - b[$1]; sep = " " }' \
    <(echo "$1") <(echo "$2")
}

# measure DEV ROW REP: one ib_write_bw on the next port; prints its BENCH line.
port=18700
measure() {
  local d=$1 row=$2 rep=$3 q=1 n=$iters to=$run_timeout out rc v t0=$SECONDS before c0
  port=$((port + 1))
  [[ $row == qp8 ]] && q=8 n=$((iters / 8))
  client || to=$server_timeout
  if [[ -z ${gid[$d]} ]]; then bench "$d" "$row" "$rep" fail; return 1; fi
  if client; then before=$(fabric_counters); c0=$(counters "$d"); fi
  out=$(perf "$to" "$port" ib_write_bw -d "$d" -x "${gid[$d]}" -s "$size" -n "$n" -q "$q" -F); rc=$?
  # "#bytes #iterations BW_peak BW_average MsgRate": BW in MiB/s.
  v=$(awk -v s="$size" '$1 == s && NF >= 4 { v = $4 } END { print v }' <<<"$out")
  if ((rc == 0)) && [[ -n $v ]]; then bench "$d" "$row" "$rep" "$v"
  else
    if ((rc == 124)); then v=timeout; elif ((rc == 0)); then v=na; else v=fail; fi
    bench "$d" "$row" "$rep" "$v"
    if [[ $v != na ]]; then
      diag "$d $row rep $rep: ib_write_bw -q $q -n $n: rc=$rc after $((SECONDS - t0)) s"
      # perftest's errors go to stderr, unbuffered, ahead of its stdout.
      [[ -n $out ]] && diag "$(grep -iE 'error|fail|status|couldn|unable|exceeded' <<<"$out" | head -8)"
      [[ -n $out ]] && diag "$(tail -4 <<<"$out")"
    fi
  fi
  if client; then
    diag "SPINES dev=$d row=$row rep=$rep $(spine_deltas "$before" "$(fabric_counters)") ($((SECONDS - t0)) s)"
    diag "COUNTERS dev=$d row=$row rep=$rep $(counter_deltas "$c0" "$(counters "$d")")"
  fi
}

# Rounds of every row, each row running both devices under one event; rows
# and devices in the same order in both guests. No skip rule: every run is
# capped, and the two guests must run the same sequence.
for ((rep = 1; rep <= reps; rep++)); do
  for row in "${rows[@]}"; do
    if client; then
      event "$row" apply || diag "event $row: could not apply"
      diag "EVENT row=$row rep=$rep spine1: $(tc -n sp1 qdisc show dev lb | head -1 | tr -s ' '); links $(ip -n sp1 -br link show la | awk '{print $2}')/$(ip -n sp1 -br link show lb | awk '{print $2}')"
    fi
    for d in "${devs[@]}"; do measure "$d" "$row" "$rep"; done
    event "$row" clear
  done
done
if client; then
  diag "spine 1 routes after the last clear: $(ip -n sp1 route | tr '\n' ';')"
  diag "leafa: $(ip -n leafa route show 198.18.0.0/24 | tr -s ' \n' ' ')"
fi
# Where packets were dropped outside the spines' qdiscs over the whole bench
# (interfaces with nonzero drop counters, and the softnet backlog's drops).
netdrops() {
  local ns l sum=0 a
  for ns in root $(ip netns list | awk '{ print $1 }'); do
    local ex=(); [[ $ns != root ]] && ex=(ip netns exec "$ns")
    "${ex[@]}" sh -c 'cd /sys/class/net && for d in *; do
        echo "$d $(cat "$d/statistics/rx_dropped") $(cat "$d/statistics/tx_dropped")"; done' |
      awk -v ns="$ns" '$2 + $3 > 0 { printf " %s/%s rx_dropped=%d tx_dropped=%d", ns, $1, $2, $3 }'
  done
  while read -r l; do a=($l); sum=$((sum + 16#${a[1]})); done </proc/net/softnet_stat
  printf ' softnet_dropped=%d' "$sum"
}
diag "DROPS$(netdrops)"

# No teardown: the guest is discarded.
pass "fabric bench finished"
done_testing
