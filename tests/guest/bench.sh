#!/usr/bin/env bash
# Benchmark (not a pass/fail test), in each of two guests: rxe0 (the kernel's
# rxe) and mr0 (metaroce) side by side on the same netdev; iperf3 TCP as the
# ceiling, then perftest latency and bandwidth over each device on a lossless
# link, then ib_write_bw and ib_send_bw at 64 KiB under netem loss (0.1 %,
# 1 %, 10 %) on both guests' egress, then under netem reordering (delay 1ms
# reorder 25%, no loss), then ib_write_bw and ib_send_bw at 64 KiB with 1 and
# 16 QPs on rxe0, on mr0 and on mr0 sharing one connection per peer (labelled
# mr0s, test=write_bw_q16 etc.). Guest 1 serves, guest 2 connects. Every result
# becomes one machine-readable TAP comment,
#   # BENCH side=server dev=mr0 test=write_bw size=65536 loss=0 value=4.31 unit=MiB/s pkmsg=64.25
# (loss=r25 for the reordering rows; pkmsg: packets the device received
# during the run per message, from its `rdma statistic` counter, rcvd_pkts
# for rxe and rx_packets for metaroce: on the server of a WRITE or SEND run,
# the data packets and every duplicate of them, so its ratio to the lossless
# run's is 1 plus the share of spurious retransmissions)
# (value=timeout when the run hit its time limit, value=fail when it failed
# otherwise); tools/bench.sh turns guest 1's lines into a table. A failed run
# is recorded and the bench goes on: nothing here prints "not ok" for a
# measurement.
# The lossless, loss and reordering rows run REPS rounds (default 3), each
# round both devices in turn, so each round gives one ratio from the same
# minutes (rep=K on the line; a loss row's fraction of lossless pairs it with
# the same round's lossless figure); the multi-QP rows run once; with
# "lossless", only the lossless rows. Bandwidth lines carry cpu=: this guest's kernel CPU time
# per MiB moved, in ms: where both devices do their work (user time is
# perftest busy-polling its CQ, all of the run whatever the device, and the
# same user-space provider posting for both): the exact non-idle time split
# by the sampled kernel share (cpu_per_mib in tests/lib.sh says why the
# sampled system + irq + softirq ticks alone fall short: they miss the
# softirq work done on an idle CPU; tick= carries them, for comparison).
# The latency rows are ib_write_lat, ib_send_lat and ib_read_lat at 64 B;
# test=send_bw_ev is ib_send_bw -e (event mode) at 64 KiB, for comparison.
#   bench.sh [REPS [lossless]]   (run by tools/bench.sh, which sets vm-run's time limit)
. "$MR_REPO/tests/lib.sh"
reps=${1:-3} only=${2:-}
[[ $reps =~ ^[1-9][0-9]*$ && ( -z $only || $only == lossless ) ]] ||
  { echo "usage: bench.sh [REPS [lossless]]" >&2; exit 2; }

# Messages per bandwidth run: 16 MiB each, a few seconds at the 2-5 MiB/s of
# TCG guests.
declare -A iters=([4096]=4096 [65536]=256 [1048576]=16)
devs=(rxe0 mr0)
run_timeout=90       # per perftest run, each side
connect_window=150   # how long the client keeps trying to reach the server
# Loss rows: 64 KiB messages, 128 of them (8 MiB) per run and a shorter cap,
# so that a device that crawls under loss costs at most a minute per run.
loss_rates=(0.1 1 10)   # netem loss, percent, on both guests' egress
loss_size=65536
loss_iters=128
loss_timeout=60
# Reordering rows: netem holds every packet 1 ms but sends 25 % at once, ahead
# of the ones it holds (netem's reorder needs a delay); labelled loss=r25.
reorder_netem="delay 1ms reorder 25%"

server() { ((MR_ID == 1)); }
side() { server && echo server || echo client; }
# bench DEV TEST SIZE LOSS VALUE UNIT [PKMSG [CPU [TICK]]]: with $rep set, rep=$rep too.
bench() {
  diag "BENCH side=$(side) dev=$1 test=$2 size=$3 loss=$4 value=$5 unit=$6${7:+ pkmsg=$7}${8:+ cpu=$8}${9:+ tick=$9}${rep:+ rep=$rep}"
}
rep="" ev=""
# rxpkts DEV: the packets DEV has received (rxe: rcvd_pkts; metaroce:
# rx_packets), or nothing if its counters cannot be read.
rxpkts() {
  rdma statistic show link "$1/1" 2>/dev/null |
    awk '{ for (i = 1; i < NF; i++) if ($i == "rcvd_pkts" || $i == "rx_packets") { print $(i + 1); exit } }'
}

load_kmod udp_tunnel ip6_udp_tunnel >/dev/null 2>&1
load_kmod rdma_rxe >/dev/null 2>&1
load_kmod sch_netem >/dev/null 2>&1
tc qdisc del dev "$MR_IF" root >/dev/null 2>&1   # lossless rows: no netem
check "rdma link add rxe0 type rxe netdev $MR_IF" rdma link add rxe0 type rxe netdev "$MR_IF"
# mr0 with a connection per QP (shared=0; the module's default shares them),
# as every bench row before the "mr0s" ones; MR_MODPARAMS (qemu/vm-run passes
# it through, e.g. MR_MODPARAMS=train=1 bash tools/bench.sh) adds module
# parameters for an A/B run, shared=0 staying.
check "insmod metaroce.ko ${MR_MODPARAMS//,/ } shared=0" insmod "$MR_REPO/metaroce.ko" ${MR_MODPARAMS//,/ } shared=0
check "rdma link add mr0 type metaroce netdev $MR_IF" rdma link add mr0 type metaroce netdev "$MR_IF"
check "peer reachable over $MR_IF" retry 90 ping -q -c1 -W1 "$MR_PEER_IP4"
declare -A gid
for d in "${devs[@]}"; do
  gid[$d]=$(retry 10 gid_index "$d" "$MR_IP4") || gid[$d]=""
  if [[ -n ${gid[$d]} ]]; then pass "$d: RoCE v2 GID for $MR_IP4 at index ${gid[$d]}"
  else fail "$d: RoCE v2 GID for $MR_IP4" "$(rdma link show 2>&1)"; fi
done

# perf TIMEOUT PORT CMD...: the server runs CMD once; the client reruns it
# while it only fails to connect (server not listening yet), until the
# connect window closes. Each run uses its own TCP port (-p), so a side that
# fell behind cannot meet a later run's peer.
connect_err='Unable to open file descriptor|Couldn.t connect|Failed to exchange data|Failed to connect'
perf() {
  local t=$1 port=$2; shift 2
  if server; then timeout "$t" "$@" -p "$port" 2>&1; return; fi
  local end=$((SECONDS + connect_window)) out rc
  while :; do
    out=$(timeout "$t" "$@" -p "$port" "$MR_PEER_IP4" 2>&1); rc=$?
    if ((rc == 0)) || ! grep -Eq "$connect_err" <<<"$out" || ((SECONDS >= end)); then
      printf '%s\n' "$out"; return $rc
    fi
    sleep 1
  done
}

# TCP ceiling over the same link (no RDMA), first: a device that wedges a
# guest later cannot take it with it. Guest 1 serves one test (-1) and reports
# what it received, the perftest runs' direction (guest 2 -> guest 1).
if ! command -v iperf3 >/dev/null; then
  diag "iperf3: not installed"
  bench tcp iperf3 0 0 na MiB/s
else
  if server; then
    out=$(timeout 90 iperf3 -s -1 -J -p 5301 2>&1); rc=$?
  else
    out=""; rc=1
    end=$((SECONDS + 60))
    while ((SECONDS < end)); do
      out=$(timeout 60 iperf3 -c "$MR_PEER_IP4" -p 5301 -t 10 -J 2>&1); rc=$?
      # iperf3 -J exits 0 even on "Connection refused": retry until a result.
      ((rc == 0)) && grep -q '"sum_received"' <<<"$out" && break
      rc=1
      sleep 1
    done
  fi
  v=$(python3 -c 'import json,sys
d = json.loads(sys.stdin.read())
print("%.2f" % (d["end"]["sum_received"]["bits_per_second"] / 8 / 2**20))' <<<"$out" 2>/dev/null)
  if ((rc == 0)) && [[ -n $v ]]; then bench tcp iperf3 0 0 "$v" MiB/s
  else bench tcp iperf3 0 0 fail MiB/s; diag "iperf3: rc=$rc"; diag "$(tail -5 <<<"$out")"; fi
fi

# measure DEV TEST SIZE ITERS TIMEOUT LOSS [QPS LABEL]: one perftest run on the
# next port; prints its BENCH line; returns perf's exit status (124: timed
# out). With QPS: perftest's -q QPS (ITERS per QP), the BENCH line's test
# TEST_qQPS and its dev LABEL (mr0s: mr0 sharing connections).
port=18600
measure() {
  local d=$1 t=$2 s=$3 n=$4 to=$5 loss=$6 unit=MiB/s out rc v t0=$SECONDS p0 p1 pk="" q=() bt=$2 bd=$1 c0 c1 cpu="" tick=""
  [[ $t == *_lat ]] && unit=usec
  [[ -n ${7:-} ]] && { q=(-q "$7"); bt=${t}_q$7 bd=${8:-$d}; }
  # event mode (perftest -e: both sides sleep on a completion channel
  # instead of busy-polling the CQ); the line's test TEST_ev
  [[ -n $ev ]] && { q+=(-e); bt=${bt}_ev; }
  port=$((port + 1))
  # Both guests start each run together: a client still retrying a run the
  # server gave up on (its TCP side channel could not connect under 10 %
  # loss) would otherwise fall behind for good, and every later run of the
  # bench would time out on both devices.
  meet "run-$port" "$((connect_window + 2 * to))"
  if [[ -z ${gid[$d]} ]]; then bench "$bd" "$bt" "$s" "$loss" fail "$unit"; return 1; fi
  p0=$(rxpkts "$d")
  c0=$(kernel_cpu)
  out=$(perf "$to" "$port" "ib_$t" -d "$d" -x "${gid[$d]}" -s "$s" -n "$n" "${q[@]}" -F); rc=$?
  c1=$(kernel_cpu)
  p1=$(rxpkts "$d")
  # per message: with -q, ITERS per QP
  [[ $p0 =~ ^[0-9]+$ && $p1 =~ ^[0-9]+$ ]] && pk=$(awk -v d=$((p1 - p0)) -v n=$((n * ${7:-1})) 'BEGIN { printf "%.2f", d / n }')
  # CPU ms per MiB moved (units of 10 ms): includes perftest's own setup,
  # the same for both devices.
  [[ $unit == MiB/s ]] && read -r cpu tick < <(cpu_per_mib "$c0" "$c1" $((s * n * ${7:-1})))
  if [[ $t == *_lat ]]; then
    # "#bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%"
    v=$(awk -v s="$s" '$1 == s && NF >= 6 { v = $6 } END { print v }' <<<"$out")
  else
    # "#bytes #iterations BW_peak BW_average MsgRate": BW in MiB/s.
    v=$(awk -v s="$s" '$1 == s && NF >= 4 { v = $4 } END { print v }' <<<"$out")
  fi
  if ((rc == 0)) && [[ -n $v ]]; then bench "$bd" "$bt" "$s" "$loss" "$v" "$unit" "${pk:--}" "$cpu" "$tick"; return 0; fi
  # ib_read_lat reports on the client only: the server's side of a good run
  if ((rc == 0)) && [[ $t == read_lat ]] && server; then bench "$bd" "$bt" "$s" "$loss" client "$unit" "${pk:--}"; return 0; fi
  if ((rc == 124)); then v=timeout; else v=fail; fi
  bench "$bd" "$bt" "$s" "$loss" "$v" "$unit"
  diag "$bd ib_$t -s $s -n $n ${q[*]}, loss $loss%: rc=$rc after $((SECONDS - t0)) s"
  [[ -n $out ]] && diag "$(tail -8 <<<"$out")"
  ((rc == 0)) && return 1
  return $rc
}

# Under loss, then reordering: each guest puts the same netem qdisc on its own
# egress at the start of a phase; the phase's first run starts only once both
# guests reached it (the client connects to the server's new port), so both
# links are lossy by then; perftest's TCP side channel rides out the loss. Each
# run is capped at $loss_timeout s; a device's run that timed out (on either
# guest: they agree by swapping exit codes, since both must keep running the
# same sequence of runs) is recorded as timed out in the later rounds without
# being run (rxe's go-back-N times out at 10 % loss and under reordering every
# time, a minute a run).
declare -A gone=()
netem_ok=""
if command -v tc >/dev/null && tc qdisc replace dev "$MR_IF" root netem loss 0% 2>/dev/null; then
  netem_ok=1
else
  diag "netem: not available ($(tc qdisc replace dev "$MR_IF" root netem loss 0% 2>&1))"
fi
tc qdisc del dev "$MR_IF" root >/dev/null 2>&1
# both guests run the loss rows, or neither (they must run the same sequence)
if [[ $only != lossless && $(swap netem-ok "${netem_ok:-0}") != 1 ]]; then
  [[ -n $netem_ok ]] && diag "netem: not available on the other guest"
  netem_ok=""
fi
# peer_rc KIND RC: publish this guest's exit status RC of the run on $port and
# set peer to the other guest's (both guests then judge the run alike); a guest
# that never publishes ends this guest's part.
peer_rc() {
  peer=$(swap "$1-rc-$port" "$2") || { fail "guest $((3 - MR_ID)) never published the exit status of run $port"; done_testing; }
}
loss_phase() { # LOSS (a rate in percent, or r25) NETEM-ARGS...
  local loss=$1 d t rc peer; shift
  if [[ -z $netem_ok ]]; then
    for d in "${devs[@]}"; do for t in write_bw send_bw; do bench "$d" "$t" "$loss_size" "$loss" fail MiB/s; done; done
    return
  fi
  tc qdisc replace dev "$MR_IF" root netem "$@"
  diag "netem on $MR_IF: $(tc qdisc show dev "$MR_IF" | head -1)"
  for d in "${order[@]}"; do for t in write_bw send_bw; do
    if [[ -n ${gone["$d $t $loss"]:-} ]]; then
      port=$((port + 1))
      bench "$d" "$t" "$loss_size" "$loss" timeout MiB/s
      continue
    fi
    measure "$d" "$t" "$loss_size" "$loss_iters" "$loss_timeout" "$loss"; rc=$?
    peer_rc loss "$rc"
    ((rc == 124 || peer == 124)) && gone["$d $t $loss"]=1
  done; done
  tc qdisc del dev "$MR_IF" root
}

# REPS rounds. Each: both devices in turn on the lossless link, latency first,
# then bandwidth from the largest message (fewest messages in flight) down;
# then (unless "lossless") the loss and reordering rows. After two lossless
# runs in a row that hit the timeout, the device's remaining lossless runs of
# the round are recorded as failed without running (a wedged peer would only
# eat the time limit); a run counts as timed out when it did on either guest,
# so both apply the rule alike.
runs=("write_lat 64" "send_lat 64" "read_lat 64")
for t in write_bw send_bw; do for s in 1048576 65536 4096; do runs+=("$t $s"); done; done
# and SEND 64 KiB in event mode: the server of a polling ib_send_bw shares its
# one vCPU with the receive softirq (Documentation/bench-history.rst, "Data path
# (stop 58)"); no target, for comparison
runs+=("send_bw 65536 ev")
for ((rep = 1; rep <= reps; rep++)); do
  # The devices take turns going first (rxe0 in odd rounds, mr0 in even
  # ones): over an even number of rounds a run's place in the round (the
  # host's state, the guests' page cache) favours neither device; over the
  # default 3, rxe0 goes first twice.
  if ((rep % 2)); then order=("${devs[@]}"); else order=("${devs[1]}" "${devs[0]}"); fi
  for d in "${order[@]}"; do
    timeouts=0
    for r in "${runs[@]}"; do
      read -r t s ev <<<"$r"
      # Latency: 1000 round trips (200 until stop 61, whose t_avg swung 2x
      # between rounds under TCG), 1-2 s a run.
      if [[ $t == *_lat ]]; then n=1000 unit=usec; else n=${iters[$s]} unit=MiB/s; fi
      if ((timeouts >= 2)); then
        port=$((port + 1))
        bench "$d" "$t${ev:+_ev}" "$s" 0 fail "$unit"; diag "$d ib_$t -s $s: skipped after 2 timeouts in a row"; continue
      fi
      measure "$d" "$t" "$s" "$n" "$run_timeout" 0; rc=$?
      # Counted from both guests' exit statuses, so that both skip alike
      # (one side timed out while the other failed otherwise).
      peer_rc lossless "$rc"
      if ((rc == 124 || peer == 124)); then timeouts=$((timeouts + 1)); else timeouts=0; fi
    done
  done
  ev=""
  [[ $only == lossless ]] && continue
  for loss in "${loss_rates[@]}"; do loss_phase "$loss" loss "$loss%"; done
  # shellcheck disable=SC2086  # the netem arguments: words
  loss_phase r25 $reorder_netem
done
rep=""
[[ $only == lossless ]] && { pass "bench finished (lossless rows only)"; done_testing; }

# Multiple QPs, lossless, 64 KiB: 1 QP (256 messages) and 16 QPs (-q 16, 16
# messages each: the same 16 MiB) on rxe0 and on mr0 with a connection per
# QP, then on mr0 re-added with the `shared` parameter set (all QPs to the
# peer ride one connection: Documentation/device.rst, "Shared connections";
# labelled mr0s). Both guests switch mr0 at the same point (a meet), since
# both ends must run the same mode.
mq_runs() { # DEV LABEL
  local t
  for t in write_bw send_bw; do
    measure "$1" "$t" 65536 256 "$run_timeout" 0 1 "$2"
    measure "$1" "$t" 65536 16 "$run_timeout" 0 16 "$2"
  done
}
mq_runs rxe0 rxe0
mq_runs mr0 mr0
meet mq-shared
sp=/sys/module/metaroce/parameters/shared
if rdma link delete mr0 && echo 1 >"$sp" && rdma link add mr0 type metaroce netdev "$MR_IF"; then
  echo 0 >"$sp"
  diag "mr0 re-added: $(dmesg | grep -E "$MR_IF: fair share" | tail -1)"
  gid[mr0]=$(retry 10 gid_index mr0 "$MR_IP4") || gid[mr0]=""
else
  echo 0 >"$sp"
  diag "mr0: could not be re-added with shared=1"; gid[mr0]=""
fi
meet mq-shared-added
mq_runs mr0 mr0s

# No teardown: the guest is discarded, and unload is tests/guest/traffic.sh's job.
pass "bench finished"
done_testing
