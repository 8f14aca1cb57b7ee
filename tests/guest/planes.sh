#!/usr/bin/env bash
# Two guests with MR_PLANES=2: the second private link between them ("plane
# 2", qemu/vm-run) is up beside the first and is a link of its own.
#   MR_PLANES=2 qemu/vm-run -n 2 -t 600 tests/guest/planes.sh
# Checked: plane 2's NIC (found by its MAC) is not plane 1's and carries
# $MR_IP4_2 and $MR_IP6_2; each guest pings the other over both links, IPv4
# and IPv6 (so both ways); 200 echo requests over one link show on both
# guests' counters of that link and not on the other's (at most 10 packets
# each way there, neighbour discovery and the like), plane 2 first; with
# plane 2 down in both guests, plane 1 answers 20 of 20 echo requests,
# IPv4 and IPv6, and plane 2 does not answer; brought up again (its IPv6
# address added back: IPv6 drops it on down), it answers again.
# Without MR_PLANES=2 (or with one guest) there is no plane 2: one SKIP.
[[ -n ${MR_NESTED:-} ]] || . "$MR_REPO/tests/lib.sh"
if [[ ${MR_PLANES:-1} != 2 || $MR_NGUESTS != 2 ]]; then
  skip "plane 2 beside plane 1" "no plane 2 (MR_PLANES=${MR_PLANES:-1}, $MR_NGUESTS guest(s)): MR_PLANES=2 qemu/vm-run -n 2"
  done_testing
fi

mac=52:54:00:6d:73:0$MR_ID
if [[ -n ${MR_IF2:-} && $MR_IF2 != "$MR_IF" && $(cat "/sys/class/net/$MR_IF2/address" 2>/dev/null) == "$mac" ]]; then
  pass "plane 2: NIC $MR_IF2 ($mac), plane 1: $MR_IF"
else fail "plane 2: a NIC with MAC $mac other than plane 1's ($MR_IF)" "MR_IF2=${MR_IF2:-}: $(ip -o link 2>&1)"; done_testing; fi
check "plane 2: $MR_IF2 carries $MR_IP4_2 and $MR_IP6_2" \
  bash -c "ip -o addr show dev $MR_IF2 | grep -q ' $MR_IP4_2/24 ' && ip -o addr show dev $MR_IF2 | grep -q ' $MR_IP6_2/64 '"

# pings DESC IF PEER...: PEER (each) answers an echo request sent out of IF.
pings() {
  local desc=$1 ifc=$2 p; shift 2
  for p in "$@"; do check "$desc: $p answers over $ifc" retry 90 ping -q -c1 -W1 -I "$ifc" "$p"; done
}
pings "plane 1" "$MR_IF" "$MR_PEER_IP4" "$MR_PEER_IP6"
pings "plane 2" "$MR_IF2" "$MR_PEER_IP4_2" "$MR_PEER_IP6_2"
meet pinged

# stats IF: "RX TX", the packets IF received and sent.
stats() { echo "$(<"/sys/class/net/$1/statistics/rx_packets") $(<"/sys/class/net/$1/statistics/tx_packets")"; }
# burst NAME ON OFF PEER: guest 2 sends 200 echo requests to PEER (guest 1)
# out of ON; in both guests they show on ON's counters (200 each way at
# least) and not on OFF's (10 at most each way).
burst() {
  local name=$1 on=$2 off=$3 peer=$4 n=200 r0 t0 q0 u0 r1 t1 q1 u1
  read -r r0 t0 <<<"$(stats "$on")"
  read -r q0 u0 <<<"$(stats "$off")"
  meet "${name// /-}-start"
  ((MR_ID == 1)) || check "$name: $n echo requests to $peer out of $on" ping -q -c "$n" -i 0.01 -W 2 -I "$on" "$peer"
  meet "${name// /-}-done"
  read -r r1 t1 <<<"$(stats "$on")"
  read -r q1 u1 <<<"$(stats "$off")"
  local what="$on received $((r1 - r0)), sent $((t1 - t0)); $off received $((q1 - q0)), sent $((u1 - u0))"
  if ((r1 - r0 >= n && t1 - t0 >= n)); then pass "$name: on $on's counters ($what)"
  else fail "$name: on $on's counters ($n each way at least)" "$what"; fi
  if ((q1 - q0 <= 10 && u1 - u0 <= 10)); then pass "$name: not on $off's counters ($what)"
  else fail "$name: not on $off's counters (10 each way at most)" "$what"; fi
}
burst "plane 2 traffic" "$MR_IF2" "$MR_IF" "$MR_PEER_IP4_2"
burst "plane 1 traffic" "$MR_IF" "$MR_IF2" "$MR_PEER_IP4"

# Plane 2 down in both guests: plane 1 carries on.
check "plane 2 down: ip link set $MR_IF2 down" ip link set "$MR_IF2" down
meet down
for p in "$MR_PEER_IP4" "$MR_PEER_IP6"; do
  out=$(ping -q -c 20 -i 0.05 -W 2 -I "$MR_IF" "$p" 2>&1)
  if grep -q ' 20 received' <<<"$out"; then pass "plane 2 down: plane 1: $p answers 20 of 20 over $MR_IF"
  else fail "plane 2 down: plane 1: $p answers 20 of 20 over $MR_IF" "$out"; fi
done
for p in "$MR_PEER_IP4_2" "$MR_PEER_IP6_2"; do
  if out=$(ping -q -c 2 -W 1 "$p" 2>&1); then fail "plane 2 down: $p does not answer" "$out"
  else pass "plane 2 down: $p does not answer"; fi
done
meet checked-down

# Up again, as guest-init left it (IPv6 dropped its address on down).
check "plane 2 up again: $MR_IF2 up, $MR_IP6_2 added back" \
  bash -c "ip link set $MR_IF2 up && ip -6 addr replace $MR_IP6_2/64 dev $MR_IF2 nodad"
pings "plane 2 up again" "$MR_IF2" "$MR_PEER_IP4_2" "$MR_PEER_IP6_2"
meet done
done_testing
