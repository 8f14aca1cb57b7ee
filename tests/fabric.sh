# A routed leaf–spine fabric between the two test guests (sourced by guest
# scripts after tests/lib.sh; see Documentation/fabric.rst for the diagram).
#
#   fabric_up [SPINES]        build it (default 4 spines); afterwards MR_IF,
#                             MR_IP4/6 and MR_PEER_IP4/6 name the endpoint's
#                             first-hop netdev and the routed addresses, so
#                             the usual tests run across it unchanged; a
#                             second call in the same boot (a part of
#                             on-fabric.sh) reuses it
#   fabric_spine I ACTION…    one spine's knob (guest 1 only):
#       down | up             hard failure: both its links down (the leaves
#                             drop the next hop at once, as BFD would)
#       gray PCT              gray failure: links up, PCT % loss both ways
#       netem ARGS…           any netem on both its egresses
#       congest RATE          A→B egress limited to RATE (tbf) with an
#                             ECN-marking RED queue under it
#       clear                 links up, no qdisc
#   fabric_counters           "spine I a2b=N b2a=N marked=N dropped=N" per
#                             spine: packets it forwarded each way, CE marks
#                             and drops of its queues (guest 1 only)
#   fabric_spines             the number of spines
#
# Everything runs in guest 1 (no VLAN support is needed in the test kernel):
#
#   guest 1                                                      guest 2
#   root ns        leafa          spN (N = 1..4)      leafb        root ns
#   fab0 ── host   sN ─────────── la     lb ───────── sN   MR_IF ════ MR_IF
#   198.18.1.2     198.18.1.1     198.18.1N.2  .2N.2  .2N.1 198.18.0.1  198.18.0.2
#
# The leaves route the far endpoint's prefix over every spine (equal-cost
# multipath, L4 hash: `fib_multipath_hash_policy=1` for IPv4 and IPv6), so
# the UDP source port picks the spine, in both directions. IPv6 mirrors it
# (2001:2:1::/64, 2001:2:1N::/64, 2001:2:2N::/64, 2001:2::/64). Addresses
# are from the benchmarking ranges (RFC 2544 / RFC 5180). TCP (the tests'
# side channels) is policy-routed over the last spine only, which tests
# never fail.

# _fab_router NS: a namespace that forwards, hashes on L4, drops next hops
# whose link is down and keeps its IPv6 addresses over a link down/up.
_fab_router() {
  local ns=$1
  ip netns add "$ns" || return 1
  ip -n "$ns" link set lo up
  # One sysctl for all (each program a TCG guest runs costs it tens of ms).
  ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1 \
    net.ipv4.fib_multipath_hash_policy=1 net.ipv6.fib_multipath_hash_policy=1 \
    net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 \
    net.ipv4.conf.all.ignore_routes_with_linkdown=1 \
    net.ipv6.conf.all.ignore_routes_with_linkdown=1 \
    net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.all.accept_dad=0 \
    net.ipv6.conf.all.keep_addr_on_down=1 >/dev/null
}

# _fab_addr NS DEV V4 V6: addresses on DEV in NS (ns "" = root), link up.
_fab_addr() {
  local n=() ; [[ -n $1 ]] && n=(-n "$1")
  ip "${n[@]}" addr add "$3" dev "$2" || return 1
  ip "${n[@]}" -6 addr add "$4" dev "$2" nodad || return 1
  ip "${n[@]}" link set "$2" up
}

# _fab_spine_routes I: spine I's routes to both endpoints' prefixes. The
# kernel deletes a route when its device goes admin down, so `up` and
# `clear` put them back (replace: idempotent).
_fab_spine_routes() {
  local i=$1
  ip -n "sp$i" route replace 198.18.0.0/24 via "198.18.2$i.1" &&
    ip -n "sp$i" route replace 198.18.1.0/24 via "198.18.1$i.1" &&
    ip -n "sp$i" -6 route replace 2001:2::/64 via "2001:2:2$i::1" &&
    ip -n "sp$i" -6 route replace 2001:2:1::/64 via "2001:2:1$i::1"
}

_fab_build() {
  local spines=$1 i via4=() via6=() back4=() back6=()
  load_kmod sch_netem sch_tbf sch_red >/dev/null 2>&1
  _fab_router leafa && _fab_router leafb || return 1
  # Endpoint A: fab0 in the root namespace, its peer in leafa.
  ip link add fab0 type veth peer name host netns leafa || return 1
  _fab_addr "" fab0 198.18.1.2/24 2001:2:1::2/64 || return 1
  _fab_addr leafa host 198.18.1.1/24 2001:2:1::1/64 || return 1
  # The link to guest 2 becomes leafb's port.
  ip link set "$MR_IF" netns leafb || return 1
  _fab_addr leafb "$MR_IF" 198.18.0.1/24 2001:2::1/64 || return 1
  for ((i = 1; i <= spines; i++)); do
    _fab_router "sp$i" || return 1
    ip -n leafa link add "s$i" type veth peer name la netns "sp$i" || return 1
    ip -n leafb link add "s$i" type veth peer name lb netns "sp$i" || return 1
    _fab_addr leafa "s$i" "198.18.1$i.1/24" "2001:2:1$i::1/64" || return 1
    _fab_addr "sp$i" la "198.18.1$i.2/24" "2001:2:1$i::2/64" || return 1
    _fab_addr leafb "s$i" "198.18.2$i.1/24" "2001:2:2$i::1/64" || return 1
    _fab_addr "sp$i" lb "198.18.2$i.2/24" "2001:2:2$i::2/64" || return 1
    _fab_spine_routes "$i" || return 1
    via4+=(nexthop via "198.18.1$i.2" dev "s$i")
    via6+=(nexthop via "2001:2:1$i::2" dev "s$i")
    back4+=(nexthop via "198.18.2$i.2" dev "s$i")
    back6+=(nexthop via "2001:2:2$i::2" dev "s$i")
  done
  ip -n leafa route add 198.18.0.0/24 "${via4[@]}" || return 1
  ip -n leafa -6 route add 2001:2::/64 "${via6[@]}" || return 1
  ip -n leafb route add 198.18.1.0/24 "${back4[@]}" || return 1
  ip -n leafb -6 route add 2001:2:1::/64 "${back6[@]}" || return 1
  # TCP (the tests' side channels: perftest, integrity) always crosses the
  # last spine, which the tests never fail: a side channel hashed onto a
  # gray spine would stall the test, not the transport under test.
  ip -n leafa rule add ipproto tcp lookup 100 || return 1
  ip -n leafa -6 rule add ipproto tcp lookup 100 || return 1
  ip -n leafb rule add ipproto tcp lookup 100 || return 1
  ip -n leafb -6 rule add ipproto tcp lookup 100 || return 1
  ip -n leafa route add 198.18.0.0/24 via "198.18.1$spines.2" dev "s$spines" table 100 || return 1
  ip -n leafa -6 route add 2001:2::/64 via "2001:2:1$spines::2" dev "s$spines" table 100 || return 1
  ip -n leafb route add 198.18.1.0/24 via "198.18.2$spines.2" dev "s$spines" table 100 || return 1
  ip -n leafb -6 route add 2001:2:1::/64 via "2001:2:2$spines::2" dev "s$spines" table 100 || return 1
  ip route add 198.18.0.0/24 via 198.18.1.1 || return 1
  ip -6 route add 2001:2::/64 via 2001:2:1::1
}

fabric_up() {
  local spines=${1:-4}
  # Already built in this boot (a part of on-fabric.sh): the variables are
  # inherited; the fabric is not built twice.
  if [[ -n ${MR_FABRIC:-} ]]; then
    [[ $MR_FABRIC_SPINES == "$spines" ]] && pass "fabric: already up in this boot ($spines spines)" ||
      fail "fabric: already up with $MR_FABRIC_SPINES spines, $spines asked for"
    return 0
  fi
  if ((MR_ID == 1)); then
    check "fabric: leafa, $spines spines, leafb (namespaces, ECMP with L4 hash)" _fab_build "$spines"
    MR_IF=fab0 MR_IP4=198.18.1.2 MR_IP6=2001:2:1::2
  else
    check "fabric: route to guest 1's endpoint via leafb" \
      eval 'ip route add 198.18.1.0/24 via 198.18.0.1 && ip -6 route add 2001:2:1::/64 via 2001:2::1'
    MR_PEER_IP4=198.18.1.2 MR_PEER_IP6=2001:2:1::2
  fi
  MR_FABRIC_SPINES=$spines
  export MR_IF MR_IP4 MR_IP6 MR_PEER_IP4 MR_PEER_IP6 MR_FABRIC=1 MR_FABRIC_SPINES
}

fabric_spines() { echo "$MR_FABRIC_SPINES"; }

fabric_spine() {
  local i=$1 act=$2 d; shift 2
  local ns=sp$i
  case $act in
    down) ip -n "$ns" link set la down && ip -n "$ns" link set lb down ;;
    up) ip -n "$ns" link set la up && ip -n "$ns" link set lb up && _fab_spine_routes "$i" ;;
    gray) fabric_spine "$i" netem loss "$1%" ;;
    netem)
      for d in la lb; do
        tc -n "$ns" qdisc replace dev "$d" root netem "$@" || return 1
      done ;;
    congest)
      # A→B leaves the spine on lb. RED marks ECT packets CE from 6 kB of
      # queue, surely at 18 kB (12 and 36 ms at 4 Mbit/s: marks must come
      # before the sender's RTO gives a queued packet up, as a switch's ECN
      # threshold does; at 30 kB, 60 ms of queue, the few packets marked
      # could arrive after their resends and be dropped as stale, so
      # nothing was echoed); tbf holds the rate.
      tc -n "$ns" qdisc replace dev lb root handle 1: tbf rate "$1" burst 16kb latency 100ms &&
        tc -n "$ns" qdisc add dev lb parent 1:1 handle 10: red limit 400000 min 6000 \
          max 18000 avpkt 1500 burst 6 probability 0.2 bandwidth "$1" ecn ;;
    clear)
      for d in la lb; do
        tc -n "$ns" qdisc del dev "$d" root 2>/dev/null
        ip -n "$ns" link set "$d" up
      done
      _fab_spine_routes "$i" 2>/dev/null; return 0 ;;
    *) echo "fabric_spine: unknown action $act" >&2; return 2 ;;
  esac
}

# _fab_stat NS DEV FIELD: a link statistic (rx_packets …) from sysfs.
_fab_stat() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/$3" 2>/dev/null || echo 0; }

fabric_counters() {
  local i n marked dropped
  n=$(fabric_spines)
  for ((i = 1; i <= n; i++)); do
    marked=$(tc -n "sp$i" -s qdisc show dev lb | awk '/marked/ { for (k = 1; k < NF; k++) if ($k == "marked") s += $(k + 1) } END { print s + 0 }')
    dropped=$(tc -n "sp$i" -s qdisc show | awk '/dropped/ { for (k = 1; k < NF; k++) if ($k == "(dropped") { v = $(k + 1); sub(",", "", v); s += v } } END { print s + 0 }')
    echo "spine $i a2b=$(_fab_stat "sp$i" la rx_packets) b2a=$(_fab_stat "sp$i" lb rx_packets) marked=$marked dropped=$dropped"
  done
}
