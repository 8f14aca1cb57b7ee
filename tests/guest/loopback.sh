#!/usr/bin/env bash
# Loopback: two QPs of the same mr0 device in one guest reach each other
# through the transport (datagrams to the host's own address), as on rxe.
# One guest (a veth pair stands in for the link: tests/lib.sh local_link), or
# -n 2 (guest 2 only idles).
. "$MR_REPO/tests/lib.sh"
if ((MR_ID != 1)); then pass "guest $MR_ID: idle"; done_testing; fi
local_link && pass "a link for the device: $MR_IF" || fail "a link for the device (one guest: veth mrl0)"
load_kmod udp_tunnel ip6_udp_tunnel >/dev/null 2>&1
# MR_MODPARAMS (qemu/vm-run passes it through): module parameters.
check "insmod metaroce.ko ${MR_MODPARAMS//,/ }" insmod "$MR_REPO/metaroce.ko" ${MR_MODPARAMS//,/ }
check "rdma link add mr0 type metaroce netdev $MR_IF" rdma link add mr0 type metaroce netdev "$MR_IF"
gid=$(retry 10 gid_index mr0 "$MR_IP4") || gid=""
[[ -n $gid ]] && pass "mr0: RoCE v2 GID for $MR_IP4 at index $gid" || fail "mr0: GID for $MR_IP4"
loop() { # loop NAME SERVER-CMD... : server in the background, client to our own address
  local name=$1; shift
  "$@" >"$MR_RUNDIR/lo-server.out" 2>&1 &
  local spid=$!
  nap 1
  # The server may take tens of seconds to listen in a debug guest on a
  # loaded host (seen: > 20 s): the client retries for up to 90.
  out=$(retry 90 timeout 60 "$@" "$MR_IP4" 2>&1); rc=$?
  wait "$spid"; src=$?
  if ((rc == 0 && src == 0)) && grep -q 'iters in' <<<"$out"; then
    pass "mr0 loopback: $name: $(grep 'iters in' <<<"$out")"
  else fail "mr0 loopback: $name (client rc=$rc, server rc=$src)" "$out $(cat "$MR_RUNDIR/lo-server.out") $(dmesg | tail -10)"; fi
}
loop "ibv_rc_pingpong -c 20 x 4 KiB" timeout 150 ibv_rc_pingpong -d mr0 -g "$gid" -n 20 -s 4096 -c
loop "ibv_ud_pingpong -c 20 x 1 KiB" timeout 150 ibv_ud_pingpong -d mr0 -g "$gid" -n 20 -s 1024 -c
# Datagrams to the host's own address go through lo, which takes UDP GSO
# bursts: with a train of 2 or more, runs of DATA went as bursts
# (Documentation/device.rst, "Trains").
dev=mr0
bursts=$(counter tx_gso_bursts)
train=$(cat /sys/module/metaroce/parameters/train 2>/dev/null)
if ((${train:-0} <= 1)); then
  skip "mr0 loopback: runs of DATA sent as UDP GSO bursts" "train=${train:-?}: packet by packet"
elif ((bursts > 0)); then
  pass "mr0 loopback: to the host's own address (lo), runs of DATA sent as UDP GSO bursts (tx_gso_bursts $bursts)"
else fail "mr0 loopback: no UDP GSO burst sent to the host's own address (lo)" "$(rdma statistic show link mr0/1 2>&1)"; fi
check "rdma link delete mr0" rdma link delete mr0
check "rmmod metaroce" rmmod metaroce
done_testing
