#!/usr/bin/env bash
# Two guests: unmodified rdma-core tools carry traffic across the private
# link over the RDMA device named by $1 (default mr0, metaroce; rxe0 for the
# kernel's rxe). Guest 1 serves, guest 2 connects.
#   traffic.sh [mr0|rxe0] [quick|NETEM-ARGS...]
# With netem arguments (e.g. `loss 1% duplicate 1% delay 1ms reorder 25%`),
# both guests shape their egress on the link with them first: the data checks
# then run over a lossy, duplicating, reordering link.
[[ -n ${MR_NESTED:-} ]] || . "$MR_REPO/tests/lib.sh"
dev=${1:-mr0}
add_link "$dev"
check "peer reachable over $MR_IF" retry 90 ping -q -c1 -W1 "$MR_PEER_IP4"
shift
mode=${1:-} lossy=""
if [[ -n $mode && $mode != quick ]]; then
  lossy=1
  load_kmod sch_netem >/dev/null 2>&1
  check "netem on $MR_IF: $*" tc qdisc add dev "$MR_IF" root netem "$@"
fi
gid=$(retry 10 gid_index "$dev" "$MR_IP4") || gid=""
if [[ -n $gid ]]; then pass "$dev: RoCE v2 GID for $MR_IP4 at index $gid"
else fail "$dev: RoCE v2 GID for $MR_IP4" "$(rdma link show 2>&1)"; fi

server() { ((MR_ID == 1)); }
# Each run has its own TCP port (both guests step through the same
# sequence): a client never reaches the previous run's server, and no run
# waits for the previous one's port to be released.
tport=18515
next_port() { tport=$((tport + 1)); }
# Time limits are scaled by tests/lib.sh's slow (x8 on the debug kernel, where
# the two guests reach a run tens of seconds apart); MR_SLOW is settled once
# here, so that each $(slow N) below runs no program.
slow 1 >/dev/null
run() { # run TIMEOUT CMD... : guest 2 retries until guest 1's server is up
  local t; t=$(slow "$1"); shift
  if server; then timeout "$t" "$@" 2>&1; return; fi
  local end=$((SECONDS + $(slow 60))) o r
  while :; do
    o=$(timeout "$t" "$@" "$MR_PEER_IP4" 2>&1); r=$?
    printf '%s\n' "$o"
    ((r == 0)) && return 0
    # Once connected (the peer's address was exchanged), never start again:
    # the server has moved on to the next test on the same port.
    grep -q 'remote address' <<<"$o" && return "$r"
    ((SECONDS < end)) || return "$r"
    nap 1
  done
}
# -c: each side checks every received buffer against the sender's pattern.
pingpong() { # pingpong ITERS SIZE [EXTRA-OPTION]
  next_port
  out=$(run 120 ibv_rc_pingpong -d "$dev" -g "$gid" -p "$tport" -n "$1" -s "$2" -c ${3:-}); rc=$?
  [[ -n ${MR_VERBOSE:-} ]] && diag "$out"
  if ((rc == 0)) && grep -q 'iters in' <<<"$out"; then
    pass "$dev: ibv_rc_pingpong -c ${3:-}${3:+ }$1 x $2 B, data checked: $(grep 'iters in' <<<"$out")"
  elif { server || [[ -n $lossy ]]; } && grep -q 'retry counter exceeded' <<<"$out"; then
    # ibv_rc_pingpong ends without a closing handshake: when the link drops
    # the last ACKs (netem, or the host's UDP socket between two starved TCG
    # guests), the side that finished first has destroyed its QP, so the
    # other side's last send can only end in IBV_WC_RETRY_EXC_ERR (so it
    # would on rxe). On a clean link the client's side is the check; on the
    # lossy link either side may be last, and the strict check of the lossy
    # data path is integrity.sh (which has a closing handshake).
    diag "last send unacknowledged after the peer left: $(grep -m1 Failed <<<"$out")"
  else fail "$dev: ibv_rc_pingpong -c $1 x $2 B (rc=$rc)" "$out$(dmesg | tail -20)"; fi
}
pingpong 20 4096
# Multi-packet messages whose length is no multiple of the path MTU.
[[ $mode == quick ]] || pingpong 10 60001
# -e: completions through CQ events (ibv_req_notify_cq, completion channel).
[[ $mode == quick || -n $lossy ]] || pingpong 20 4096 -e

# SRQ: several RC QPs taking receives from one shared receive queue.
if [[ $mode != quick && -z $lossy ]]; then
  next_port
  out=$(run 120 ibv_srq_pingpong -d "$dev" -g "$gid" -p "$tport" -n 20 -s 4096 -q 4 -c); rc=$?
  [[ -n ${MR_VERBOSE:-} ]] && diag "$out"
  if ((rc == 0)) && grep -q 'iters in' <<<"$out"; then
    pass "$dev: ibv_srq_pingpong -c 4 QPs, 20 x 4 KiB, data checked: $(grep 'iters in' <<<"$out")"
  elif server && grep -q 'retry counter exceeded' <<<"$out"; then
    diag "server: last send unacknowledged after the client left (see pingpong above): $(grep -m1 Failed <<<"$out")"
  else fail "$dev: ibv_srq_pingpong -c (rc=$rc)" "$out$(dmesg | tail -20)"; fi
fi

# unreliable TOOL SIZE WHAT: ibv_ud_pingpong / ibv_uc_pingpong -c, 20
# exchanges, every buffer checked. Neither service resends: a datagram the
# bed itself loses (the host's UDP socket between two TCG guests can) stalls
# the pingpong, so a timed-out run is tried once more, saying so; the drop
# counters of the first try are shown.
unreliable() {
  local tool=$1 size=$2 what=$3 try
  next_port
  for try in 1 2; do
    # The second try on a port outside the sequence: if only one side tries
    # again, it cannot meet the other side's next run.
    out=$(run 120 "$tool" -d "$dev" -g "$gid" -p $((tport + 1000 * (try - 1))) -n 20 -s "$size" -c); rc=$?
    [[ -n ${MR_VERBOSE:-} ]] && diag "$out"
    ((rc == 0)) && grep -q 'iters in' <<<"$out" && break
    ((try == 1)) && diag "$tool: first try failed (rc=$rc; $(rdma statistic show link "$dev/1" 2>&1 |
      grep -o 'uc_msg_drops [0-9]*\|rx_drop_no_receive [0-9]*' | tr '\n' ' ')): trying once more"
    nap 2
  done
  if ((rc == 0)) && grep -q 'iters in' <<<"$out"; then
    pass "$dev: $tool -c 20 x $what, data checked: $(grep 'iters in' <<<"$out")"
  else fail "$dev: $tool -c (rc=$rc)" "$out$(dmesg | tail -20)"; fi
}
# UD: one datagram per message, at most the active MTU (1024 at MTU 1500).
# UC (unreliable connected): 4 KiB messages of 4 packets each.
if [[ $mode != quick && -z $lossy ]]; then
  unreliable ibv_ud_pingpong 1024 "1024 B"
  unreliable ibv_uc_pingpong 4096 "4 KiB (4 packets each)"
fi

# perftest TOOL SIZE ITERS [OPTIONS]: unmodified perftest between the guests;
# the average bandwidth (or, for ib_atomic_bw, the message rate) is reported.
perftest() {
  local tool=$1 size=$2 iters=$3 line
  next_port
  out=$(run 180 "$tool" -d "$dev" -x "$gid" -p "$tport" -s "$size" -n "$iters" -F ${4:-}); rc=$?
  [[ -n ${MR_VERBOSE:-} ]] && diag "$out"
  line=$(awk -v s="$size" '$1 == s && NF >= 4' <<<"$out" | tail -1)
  if ((rc == 0)) && [[ -n $line ]]; then
    pass "$dev: $tool ${4:-}${4:+ }$iters x $size B: $(awk '{print $4 " MB/s avg, " $5 " Mpps"}' <<<"$line")"
  else fail "$dev: $tool ${4:-}${4:+ }$iters x $size B (rc=$rc)" "$out$(dmesg | tail -20)"; fi
}
perftest ib_write_bw 65536 100
perftest ib_send_bw 65536 100
[[ $mode == quick ]] || { perftest ib_read_bw 65536 100; perftest ib_atomic_bw 8 200; }
# UC RDMA WRITEs, also on the lossy link (no completion waits on the
# responder, so a dropped message cannot stall the run).
[[ $mode == quick ]] || perftest ib_write_bw 65536 100 "-c UC"
# Latency: ib_write_lat ping-pongs RDMA WRITEs that each side polls for in
# memory (no completion on the responder): t_typical and t_avg in usec.
if [[ $mode != quick ]]; then
  next_port
  out=$(run 180 ib_write_lat -d "$dev" -x "$gid" -p "$tport" -s 64 -n 200 -F); rc=$?
  [[ -n ${MR_VERBOSE:-} ]] && diag "$out"
  line=$(awk '$1 == 64 && NF >= 6' <<<"$out" | tail -1)
  if ((rc == 0)) && [[ -n $line ]]; then
    pass "$dev: ib_write_lat 200 x 64 B: $(awk '{print "t_typical " $5 " us, t_avg " $6 " us"}' <<<"$line")"
  else fail "$dev: ib_write_lat 200 x 64 B (rc=$rc)" "$out$(dmesg | tail -20)"; fi
fi
if [[ $dev == mr* ]]; then
  # Device counters: traffic ran, so packets went both ways.
  out=$(rdma statistic show link "$dev/1" 2>&1)
  diag "$out"
  tx=$(grep -o 'tx_packets [0-9]*' <<<"$out" | awk '{print $2}')
  rx=$(grep -o 'rx_packets [0-9]*' <<<"$out" | awk '{print $2}')
  if [[ ${tx:-0} -gt 100 && ${rx:-0} -gt 100 ]]; then
    pass "$dev: rdma statistic show: tx_packets $tx, rx_packets $rx"
  else fail "$dev: rdma statistic show counts the traffic" "$out"; fi
  cnt() { grep -o " $1 [0-9]*" <<<"$out" | awk '{print $2}'; }
  txb=$(cnt tx_bytes) rxb=$(cnt rx_bytes)
  # Every datagram carries at least a header: bytes > 32 x packets.
  if [[ ${txb:-0} -gt $((32 * ${tx:-0})) && ${rxb:-0} -gt $((32 * ${rx:-0})) ]]; then
    pass "$dev: tx_bytes $txb, rx_bytes $rxb"
  else fail "$dev: byte counters count the traffic" "$out"; fi
  # Runs of DATA go as one UDP GSO burst only through a netdev that takes
  # them (NETIF_F_GSO_UDP_L4; Documentation/device.rst, "Trains"):
  # elsewhere each datagram goes alone, and software GSO never copies them.
  uso=$(ethtool -k "$MR_IF" 2>/dev/null | awk '$1 == "tx-udp-segmentation:" { print $2 }')
  bursts=$(cnt tx_gso_bursts)
  case $uso in
    off) [[ ${bursts:-x} == 0 ]] && pass "$dev: $MR_IF takes no UDP GSO burst (ethtool -k): none sent (tx_gso_bursts 0)" ||
           fail "$dev: $MR_IF takes no UDP GSO burst, yet tx_gso_bursts is ${bursts:-missing}" "$out" ;;
    on) if (($(cat /sys/module/metaroce/parameters/train 2>/dev/null || echo 0) <= 1)); then
          skip "$dev: runs sent as GSO bursts" "train 1 (or unreadable): packet by packet"
        elif [[ ${bursts:-0} -gt 0 ]]; then pass "$dev: $MR_IF takes UDP GSO bursts (ethtool -k): runs sent as bursts (tx_gso_bursts $bursts)"
        else fail "$dev: $MR_IF takes UDP GSO bursts, yet none was sent" "$out"; fi ;;
    *) skip "$dev: GSO bursts against the netdev's UDP segmentation" "ethtool -k $MR_IF: tx-udp-segmentation '${uso:-?}'" ;;
  esac
  if [[ -n $lossy ]]; then
    # netem drops 1 % of each side's packets: the receivers' SACK gaps show
    # the senders the losses, which they resend.
    sl=$(cnt sack_losses) rt=$(cnt retransmits)
    if [[ ${sl:-0} -gt 0 && ${rt:-0} -gt 0 ]]; then
      pass "$dev: lossy link: sack_losses $sl, retransmits $rt"
    else fail "$dev: lossy link shows in sack_losses and retransmits" "$out"; fi
    # UC has no retransmission: the receiver of ib_write_bw -c UC (guest 1)
    # dropped the messages that lost (or had reordered) a packet.
    if server; then
      ud=$(cnt uc_msg_drops)
      if [[ ${ud:-0} -gt 0 ]]; then pass "$dev: lossy link: UC messages dropped whole: uc_msg_drops $ud"
      else fail "$dev: lossy link shows in uc_msg_drops" "$out"; fi
    fi
  fi
fi
[[ -n ${MR_NESTED:-} ]] || done_testing
