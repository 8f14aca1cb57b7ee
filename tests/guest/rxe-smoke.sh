#!/usr/bin/env bash
# Two guests: the kernel's own soft-RoCE (rxe) carries unmodified rdma-core
# traffic across the private link — proof the bed moves real RDMA traffic.
# Guest 1 serves, guest 2 connects. Sizes are for TCG speed (~9 MB/s).
[[ -n ${MR_NESTED:-} ]] || . "$MR_REPO/tests/lib.sh"

load_kmod udp_tunnel ip6_udp_tunnel rdma_rxe >/dev/null 2>&1
check "rdma link add rxe0 type rxe netdev $MR_IF" rdma link add rxe0 type rxe netdev "$MR_IF"
check "peer reachable over $MR_IF" retry 90 ping -q -c1 -W1 "$MR_PEER_IP4"
if ! [[ -e /sys/class/infiniband/rxe0 ]]; then
  fail "rxe0 exists: the remaining checks need it" "$(lsmod; rdma link show 2>&1)"
  [[ -n ${MR_NESTED:-} ]] && return 1
  done_testing
fi

gid=$(retry 10 gid_index rxe0 "$MR_IP4") || gid=""
if [[ -n $gid ]]; then pass "RoCE v2 GID for $MR_IP4 at index $gid"
else fail "RoCE v2 GID for $MR_IP4" "$(rdma link show; grep -H . /sys/class/infiniband/rxe0/ports/1/gids/* 2>&1 | head)"; fi

if ((MR_ID == 1)); then
  out=$(timeout 120 ibv_rc_pingpong -d rxe0 -g "$gid" -n 20 -s 4096 2>&1); rc=$?
else
  out=$(retry 60 timeout 120 ibv_rc_pingpong -d rxe0 -g "$gid" -n 20 -s 4096 "$MR_PEER_IP4" 2>&1); rc=$?
fi
[[ -n ${MR_VERBOSE:-} ]] && diag "$out"
if ((rc == 0)) && grep -q 'iters in' <<<"$out"; then
  pass "ibv_rc_pingpong 20 x 4 KiB: $(grep 'iters in' <<<"$out")"
else fail "ibv_rc_pingpong (rc=$rc)" "$out"; fi

sleep 2  # let the other side's pingpong release its port
if ((MR_ID == 1)); then
  out=$(timeout 180 ib_write_bw -d rxe0 -x "$gid" -s 65536 -n 100 -F 2>&1); rc=$?
else
  out=$(retry 60 timeout 180 ib_write_bw -d rxe0 -x "$gid" -s 65536 -n 100 -F "$MR_PEER_IP4" 2>&1); rc=$?
fi
[[ -n ${MR_VERBOSE:-} ]] && diag "$out"
line=$(awk '$1 == 65536 && NF >= 4' <<<"$out" | tail -1)
if ((rc == 0)) && [[ -n $line ]]; then
  pass "ib_write_bw 100 x 64 KiB: $(awk '{print $4 " MB/s avg"}' <<<"$line")"
else fail "ib_write_bw (rc=$rc)" "$out"; fi
[[ -n ${MR_NESTED:-} ]] || done_testing
