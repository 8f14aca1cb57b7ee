#!/usr/bin/env bash
# Two guests joined by the routed leaf–spine fabric of tests/fabric.sh: the
# fabric routes both address families over every spine by L4 hash, and the
# RDMA device named by $1 (mr0: metaroce; rxe0: the kernel's rxe) carries
# checked data across it through the gateways. Per-spine packet counts are
# shown for the RDMA traffic.
#   fabric.sh [mr0|rxe0] [SPINES]
# With MR_FABRIC_MORE set, the script returns instead of ending the TAP
# stream, for tests/guest/fabric-events.sh to go on with the same fabric.
. "$MR_REPO/tests/lib.sh"
. "$MR_REPO/tests/fabric.sh"
dev=${1:-mr0}
fabric_up "${2:-4}"
check "peer $MR_PEER_IP4 reachable across the fabric" retry 300 ping -q -c1 -W1 "$MR_PEER_IP4"
if retry 120 ping -6 -q -c1 -W1 "$MR_PEER_IP6" >/dev/null 2>&1; then
  pass "peer $MR_PEER_IP6 reachable across the fabric"
else
  fail "peer $MR_PEER_IP6 reachable across the fabric" "$(ip -6 route; ip -6 neigh; ip -6 addr)"
fi

# spine_deltas BEFORE AFTER: "i:a2b/b2a" per spine, packets between the two
# fabric_counters snapshots.
spine_deltas() {
  paste -d' ' <(echo "$1") <(echo "$2") | awk '{
    split($3, a, "="); split($4, b, "="); split($9, c, "="); split($10, d, "=");
    printf "%s%d:%d/%d", (NR > 1 ? " " : ""), $2, c[2] - a[2], d[2] - b[2] }'
}
# spines_used DELTAS: how many spines carried at least MIN packets A→B.
spines_used() { tr ' ' '\n' <<<"$1" | awk -F'[:/]' -v m="${2:-1}" '$2 >= m { n++ } END { print n + 0 }'; }

# L4 hashing: 64 UDP flows differing only in source port spread over the
# spines (all on one or two of 4 would mean the hash ignores ports).
if ((MR_ID == 1)); then
  before=$(fabric_counters)
  python3 - "$MR_PEER_IP4" <<'EOF'
import socket, sys
for sport in range(40000, 40064):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("", sport))
    for _ in range(4):
        s.sendto(b"x" * 64, (sys.argv[1], 9))
    s.close()
EOF
  d=$(spine_deltas "$before" "$(fabric_counters)")
  n=$(fabric_spines)
  used=$(spines_used "$d" 4)
  if ((used >= n - 1 && n >= 2)); then pass "L4 ECMP: 64 UDP flows (source port only differs) over $used of $n spines ($d)"
  else fail "L4 ECMP: 64 UDP flows over only $used of $n spines" "$d"; fi
fi

add_link "$dev"
gid=$(retry 10 gid_index "$dev" "$MR_IP4") || gid=""
if [[ -n $gid ]]; then pass "$dev on $MR_IF: RoCE v2 GID for $MR_IP4 at index $gid"
else fail "$dev: RoCE v2 GID for $MR_IP4" "$(rdma link show 2>&1)"; done_testing; fi

# Checked data through the gateways: guest 1 serves, guest 2 connects.
((MR_ID == 1)) && before=$(fabric_counters)
# metaroce: sample the RC QP's per-path view (rdma -dd res show qp) while
# the pingpong runs; the last sample that shows paths is kept.
qpview=$(mktemp)
if [[ $dev == mr0 ]]; then
  (for _ in $(seq 120); do
     v=$(rdma -dd res show qp link "$dev/1" 2>/dev/null)
     grep -q p0_sport <<<"$v" && echo "$v" >"$qpview"
     nap 0.5
   done) &
  sampler=$!
fi
# The guests boot apart by minutes on a loaded host (more on the debug
# kernel): the server's wait and the client's retry window scale with it.
pp_limit=$(slow 180)
if ((MR_ID == 1)); then
  out=$(timeout "$pp_limit" ibv_rc_pingpong -d "$dev" -g "$gid" -n 200 -s 4096 -c 2>&1); rc=$?
else
  end=$((SECONDS + $(slow 300)))
  while :; do
    out=$(timeout "$pp_limit" ibv_rc_pingpong -d "$dev" -g "$gid" -n 200 -s 4096 -c "$MR_PEER_IP4" 2>&1); rc=$?
    ((rc == 0)) || grep -q 'remote address' <<<"$out" || ((SECONDS >= end)) && break
    nap 1
  done
fi
if ((rc == 0)) && grep -q 'iters in' <<<"$out"; then
  pass "$dev: ibv_rc_pingpong -c 200 x 4 KiB across the fabric, data checked: $(grep 'iters in' <<<"$out")"
elif ((MR_ID == 1)) && grep -q 'retry counter exceeded' <<<"$out"; then
  diag "last send unacknowledged after the peer left (see traffic.sh)"
else fail "$dev: ibv_rc_pingpong -c across the fabric (rc=$rc)" "$out"; fi
if [[ -n ${sampler:-} ]]; then
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
  diag "$dev: a QP during the pingpong (rdma -dd res show qp): $(tr -s ' \n' ' ' <"$qpview")"
  c=$(rdma statistic show link "$dev/1" 2>&1)
  diag "$dev: counters: $(grep -oE '(tx_packets|retransmits|rto_timeouts|path_moves|probes|rate_hint_changes|ecn_ce_marked|ecn_ce_echoed|rx_drops) [0-9]+' <<<"$c" | tr '\n' ' ')"
  if grep -qE 'rate_hint_changes [1-9]' <<<"$c"; then pass "$dev: the receiver's fair-share hint is set (rate_hint_changes > 0)"
  else fail "$dev: rate_hint_changes is 0" "$c"; fi
fi
rm -f "$qpview"
if ((MR_ID == 1)); then
  d=$(spine_deltas "$before" "$(fabric_counters)")
  diag "$dev: packets per spine during the pingpong (spine:a2b/b2a): $d"
  diag "$dev: spines carrying A->B traffic: $(spines_used "$d" 50) of $(fabric_spines)"
fi
[[ -n ${MR_FABRIC_MORE:-} ]] || done_testing
