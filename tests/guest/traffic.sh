#!/usr/bin/env bash
# Two guests: unmodified rdma-core tools carry traffic across the private
# link over the RDMA device named by $1 (default mr0, metaroce; rxe0 for the
# kernel's rxe). Guest 1 serves, guest 2 connects.
#   traffic.sh [mr0|rxe0] [quick]
[[ -n ${MR_NESTED:-} ]] || . "$MR_REPO/tests/lib.sh"
dev=${1:-mr0}
load_kmod udp_tunnel ip6_udp_tunnel >/dev/null 2>&1
if [[ $dev == rxe* ]]; then
  load_kmod rdma_rxe >/dev/null 2>&1
  check "rdma link add $dev type rxe netdev $MR_IF" rdma link add "$dev" type rxe netdev "$MR_IF"
else
  lsmod | grep -q '^metaroce ' || check "insmod metaroce.ko" insmod "$MR_REPO/metaroce.ko"
  check "rdma link add $dev type metaroce netdev $MR_IF" rdma link add "$dev" type metaroce netdev "$MR_IF"
fi
check "peer reachable over $MR_IF" retry 90 ping -q -c1 -W1 "$MR_PEER_IP4"
gid=$(retry 10 gid_index "$dev" "$MR_IP4") || gid=""
if [[ -n $gid ]]; then pass "$dev: RoCE v2 GID for $MR_IP4 at index $gid"
else fail "$dev: RoCE v2 GID for $MR_IP4" "$(rdma link show 2>&1)"; fi

server() { ((MR_ID == 1)); }
run() { # run TIMEOUT CMD... : guest 2 retries until guest 1's server is up
  local t=$1; shift
  if server; then timeout "$t" "$@" 2>&1
  else retry 60 timeout "$t" "$@" "$MR_PEER_IP4" 2>&1; fi
}
# -c: each side checks every received buffer against the sender's pattern.
pingpong() { # pingpong ITERS SIZE
  out=$(run 120 ibv_rc_pingpong -d "$dev" -g "$gid" -n "$1" -s "$2" -c); rc=$?
  [[ -n ${MR_VERBOSE:-} ]] && diag "$out"
  if ((rc == 0)) && grep -q 'iters in' <<<"$out"; then
    pass "$dev: ibv_rc_pingpong -c $1 x $2 B, data checked: $(grep 'iters in' <<<"$out")"
  else fail "$dev: ibv_rc_pingpong -c $1 x $2 B (rc=$rc)" "$out$(dmesg | tail -20)"; fi
  sleep 2  # let the other side release its port
}
pingpong 20 4096
# Multi-packet messages whose length is no multiple of the path MTU.
[[ ${2:-} == quick ]] || pingpong 10 60001

out=$(run 180 ib_write_bw -d "$dev" -x "$gid" -s 65536 -n 100 -F); rc=$?
[[ -n ${MR_VERBOSE:-} ]] && diag "$out"
line=$(awk '$1 == 65536 && NF >= 4' <<<"$out" | tail -1)
if ((rc == 0)) && [[ -n $line ]]; then
  pass "$dev: ib_write_bw 100 x 64 KiB: $(awk '{print $4 " MB/s avg"}' <<<"$line")"
else fail "$dev: ib_write_bw (rc=$rc)" "$out$(dmesg | tail -20)"; fi
[[ -n ${MR_NESTED:-} ]] || done_testing
