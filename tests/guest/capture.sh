#!/usr/bin/env bash
# Two guests: a lossy integrity run over mr0 captured with tcpdump on both
# ends, for the host to decode with the Wireshark dissector
# (tools/wireshark/metaroce.lua; tests/capture-check.sh runs this script and
# then checks the captures with tshark).
#   capture.sh [-s SEED] [-n OPS] [-M MAXSIZE] [NETEM-ARGS...]
# Defaults: seed 5, 60 ops up to 256 KiB, netem `loss 1% delay 1ms reorder 25%`.
#
# netem applies to MetaRoCE datagrams only (a prio qdisc whose fourth band,
# netem, takes UDP to port 4792), so its counters are the transport's alone.
# tcpdump on $MR_IF sees a guest's datagrams after netem and its peer's as
# they arrive, so the host (tests/wireshark.py capture) can check, per guest,
#   captured leaving  = netem's packets sent
#   tx_packets delta (the ACKs destroy_qp repeats included) = captured
#                      leaving + netem drops (a run of DATA is one GSO skb,
#                      one netem drop of up to `train` datagrams: with
#                      tx_gso_bursts > 0, between the drops and train times
#                      them)
#   captured arriving = rx_packets + unknown_qpn_drops deltas
#                    <= what the peer captured leaving (the link may lose)
# with every packet captured (tcpdump: 0 dropped by kernel; the equations
# above find any datagram missing). No duplication: a netem duplicate is a datagram the
# module did not send.
#
# Each guest leaves in $MR_RUNDIR: capture.$MR_ID.pcap, tcpdump.$MR_ID.log,
# counters.$MR_ID.{before,after} (`rdma statistic`), netem.$MR_ID (tc -s),
# train.$MR_ID (the module's `train`),
# qp.$MR_ID (the RC QPs seen by `rdma -dd resource show qp` during the run:
# lqpn, rqpn and path source ports) and ip.$MR_ID (its address).
[[ -n ${MR_NESTED:-} ]] || . "$MR_REPO/tests/lib.sh"
dev=mr0
args=(-s 5 -n 60 -M 262144)
while [[ ${1:-} == -[snM] && $# -ge 2 ]]; do
  case $1 in -s) args[1]=$2 ;; -n) args[3]=$2 ;; -M) args[5]=$2 ;; esac
  shift 2
done
(($# > 0)) || set -- loss 1% delay 1ms reorder 25%
integrity_built
if command -v tcpdump >/dev/null; then pass "tcpdump present: $(tcpdump --version 2>&1 | head -1)"
else fail "tcpdump not installed on the host (tools/setup.sh installs it)"; done_testing; fi

add_link "$dev"
check "peer reachable over $MR_IF" retry 90 ping -q -c1 -W1 "$MR_PEER_IP4"
load_kmod sch_netem sch_prio cls_u32 >/dev/null 2>&1
check "prio qdisc on $MR_IF" tc qdisc add dev "$MR_IF" root handle 1: prio bands 4
check "netem on band 4: $*" tc qdisc add dev "$MR_IF" parent 1:4 handle 40: netem "$@"
check "UDP to port 4792 into netem" tc filter add dev "$MR_IF" parent 1: protocol ip prio 1 \
  u32 match ip protocol 17 0xff match ip dport 4792 0xffff flowid 1:4
gid=$(retry 10 gid_index "$dev" "$MR_IP4") || gid=""
if [[ -n $gid ]]; then pass "$dev: RoCE v2 GID for $MR_IP4 at index $gid"
else fail "$dev: RoCE v2 GID for $MR_IP4" "$(rdma link show 2>&1)"; done_testing; fi
echo "$MR_IP4" >"$MR_RUNDIR/ip.$MR_ID"

# Capture first (both guests), then count, then run. tcpdump writes to the
# guest's memory (writing each packet through 9p to $MR_RUNDIR is slower than
# the traffic); the file is copied there at the end.
tmp=$(mktemp -d /dev/shm/capture.XXXXXX 2>/dev/null || mktemp -d)
pcap=$tmp/capture.pcap
tcpdump -i "$MR_IF" -B 16384 -s 0 -U -w "$pcap" udp port 4792 2>"$MR_RUNDIR/tcpdump.$MR_ID.log" &
tcpd=$!
check "tcpdump listening on $MR_IF" retry 20 grep -q 'listening on' "$MR_RUNDIR/tcpdump.$MR_ID.log"
rdma statistic show link "$dev/1" >"$MR_RUNDIR/counters.$MR_ID.before"
meet capturing

# The RC QPs and their paths' source ports, polled while the test runs.
qpf=$MR_RUNDIR/qp.$MR_ID
: >"$qpf"
( while :; do rdma -dd resource show qp link "$dev/1" >>"$qpf" 2>&1; nap 0.5; done ) &
poller=$!

run_integrity "$dev" "$gid" -- "${args[@]}"
kill "$poller"; wait "$poller" 2>/dev/null

# Both ends done: nothing of the transport is in flight once netem's delay
# has passed. Count, let tcpdump catch up (the file stops growing), then stop
# it: on SIGINT it reports what the kernel passed it ("received by filter"),
# what it wrote ("captured") and what the kernel dropped.
meet finished
nap 2
rdma statistic show link "$dev/1" >"$MR_RUNDIR/counters.$MR_ID.after"
tc -s qdisc show dev "$MR_IF" >"$MR_RUNDIR/netem.$MR_ID"
cat /sys/module/metaroce/parameters/train >"$MR_RUNDIR/train.$MR_ID" 2>/dev/null
size=-1 same=0
while ((same < 3)); do
  nap 1
  s=$(stat -c %s "$pcap")
  if ((s == size)); then same=$((same + 1)); else same=0 size=$s; fi
done
kill -INT "$tcpd"; wait "$tcpd"
cp "$pcap" "$MR_RUNDIR/capture.$MR_ID.pcap" && rm -rf "$tmp"
diag "$(cat "$MR_RUNDIR/tcpdump.$MR_ID.log")"
log=$MR_RUNDIR/tcpdump.$MR_ID.log
captured=$(awk '/packets captured/ {print $1}' "$log")
filtered=$(awk '/received by filter/ {print $1}' "$log")
drops=$(awk '/dropped by kernel/ {print $1}' "$log")
# "received by filter" may exceed "captured" by a datagram that arrived as
# tcpdump stopped, after the counters above were read: the host's equations
# (every datagram the counters account for is in the capture) are the exact
# check; here, none may have been dropped for want of buffer.
if [[ $drops == 0 && -n $captured && -n $filtered ]] && ((captured > 0)); then
  pass "tcpdump: $captured packets captured ($filtered received by filter), 0 dropped by kernel"
else fail "tcpdump: every packet captured (captured ${captured:-?}, received by filter ${filtered:-?}, dropped by kernel ${drops:-?})" "$(cat "$log")"; fi
diag "$(cat "$MR_RUNDIR/netem.$MR_ID")"
diag "$(tail -n 20 "$qpf")"
done_testing
