#!/usr/bin/env bash
# One guest: the verbs exerciser (tests/exerciser/, exerciser.h) against one
# device, then a kill -9 cleanup test.
#   exerciser.sh rxe        modprobe rdma_rxe; rdma link add rxe0 type rxe netdev $MR_IF
#   exerciser.sh metaroce   insmod $MR_REPO/metaroce.ko; rdma link add mr0 type metaroce netdev $MR_IF
# Runs with one guest (on a dummy netdev) or two (on the private link; guest 2
# idles). The kind can also come from MR_EX_DEV; the create/destroy iterations
# from a second argument or MR_EX_ITER (default 1000; about 25 s under TCG).
# The binary is built on the host (`make -C tests/exerciser` -> out/exerciser);
# if it is missing or older than its sources it is built here, slowly.
#   make -C tests/exerciser && qemu/vm-run tests/guest/exerciser.sh rxe
. "$MR_REPO/tests/lib.sh"
kind=${1:-${MR_EX_DEV:-rxe}}
iter=${2:-${MR_EX_ITER:-1000}}

case $kind in
  rxe) dev=rxe0 ;;
  metaroce) dev=mr0 ;;
  *) fail "unknown device kind '$kind' (rxe or metaroce)"; done_testing ;;
esac

exerciser_bin

if ((MR_ID != 1)); then pass "guest $MR_ID: idle (the exerciser needs no peer)"; done_testing; fi
load_kmod udp_tunnel ip6_udp_tunnel dummy >/dev/null 2>&1
# One guest (vm-run -n 1) has no private link: a dummy netdev with the same
# address stands in; every packet the exerciser causes is loopback anyway.
if [[ -z ${MR_IF:-} ]]; then
  MR_IF=exdummy0 MR_IP4=198.18.0.1
  check "no private link: dummy netdev $MR_IF with $MR_IP4" \
    bash -c "ip link add $MR_IF type dummy && ip link set $MR_IF up && ip addr add $MR_IP4/24 dev $MR_IF"
fi
if [[ $kind == rxe ]]; then
  check "load rdma_rxe" load_kmod rdma_rxe
  check "rdma link add rxe0 type rxe netdev $MR_IF" rdma link add rxe0 type rxe netdev "$MR_IF"
else
  check "insmod metaroce.ko" insmod "$MR_REPO/metaroce.ko"
  check "rdma link add mr0 type metaroce netdev $MR_IF" rdma link add mr0 type metaroce netdev "$MR_IF"
fi
if ! [[ -e /sys/class/infiniband/$dev ]]; then
  fail "$dev exists: the remaining checks need it" "$(rdma link show 2>&1)"
  done_testing
fi
# The exerciser wants the IPv4-mapped RoCE v2 GID; it appears shortly after the link.
gid=$(retry 20 gid_index "$dev" "$MR_IP4") && pass "RoCE v2 GID for $MR_IP4 at index $gid" \
  || { fail "RoCE v2 GID for $MR_IP4 on $dev"; gid=""; }

# The exerciser's own TAP lines become this script's (renumbered, "ex:" prefix).
# metaroce is held to IBTA where rxe is lax, and reports what it does not
# implement yet as SKIP (exerciser -S).
opts=""; [[ $kind == metaroce ]] && opts=-S
# -C: mr0 shares connections (the module's default; tests/lib.sh mr_shared).
[[ $kind == metaroce ]] && (($(mr_shared))) && opts+=" -C"
t0=$SECONDS
rcf=$MR_RUNDIR/exerciser.rc
fold_tap "ex: " < <(timeout 1800 "$ex" -d "$dev" -n "$iter" ${gid:+-g "$gid"} $opts 2>&1; echo $? >"$rcf")
rc=$(cat "$rcf")
((rc == 0)) && pass "exerciser -d $dev -n $iter exits 0 ($((SECONDS - t0)) s)" \
  || fail "exerciser -d $dev -n $iter exits 0 (exit $rc, $((SECONDS - t0)) s)"

# kill -9: a child holding PD/MR/CQ/SRQ/QPs dies; the kernel must release all.
summary() { rdma res show 2>/dev/null | grep -E "^[0-9]+: $dev: " | sed -E "s/^[0-9]+: $dev: //"; }
base=$(summary)
diag "rdma res before: $base"
"$ex" -d "$dev" -H >"$MR_RUNDIR/hold.out" 2>&1 &
child=$!
retry 60 grep -q READY "$MR_RUNDIR/hold.out"
diag "$(cat "$MR_RUNDIR/hold.out")"
held=$(summary)
diag "rdma res while held: $held"
[[ $(grep -c . < <(owned $child)) -ge 6 && $held != "$base" ]] \
  && pass "child $child holds ctx/pd/mr/cq/srq/qp objects (rdma res lists them by pid)" \
  || fail "child holds objects" "$(cat "$MR_RUNDIR/hold.out"; echo "held: $held"; owned $child)"
kill -9 $child; wait $child 2>/dev/null
gone() { [[ $(summary) == "$base" && -z $(owned $child) ]]; }
retry 30 gone && pass "after kill -9 of the child: rdma res back to '$base', nothing of pid $child" \
  || fail "after kill -9: objects left" "now: $(summary); was: $base; $(owned $child)"

if [[ $kind == rxe ]]; then
  check "rdma link delete rxe0 after the kill" rdma link delete rxe0
  check "rmmod rdma_rxe" rmmod rdma_rxe
else
  check "rdma link delete mr0 after the kill" rdma link delete mr0
  check "rmmod metaroce" rmmod metaroce
fi
done_testing
