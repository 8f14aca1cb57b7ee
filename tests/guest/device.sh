#!/usr/bin/env bash
# One guest with the private link (run with -n 2; guest 2 only idles): the
# metaroce RDMA device through unmodified iproute2 and rdma-core.
#   rdma link add/show/delete, ibv_devices, ibv_devinfo -v field by field,
#   port state and async events following the netdev, MTU changes, a second
#   device on a netdev that then disappears, rxe beside it, rmmod with devices,
#   link delete, rmmod and a netns move while processes hold objects (they
#   are detached).
. "$MR_REPO/tests/lib.sh"
ko=$MR_REPO/metaroce.ko
if ((MR_ID != 1)); then pass "guest $MR_ID: link partner only"; done_testing; fi

load_kmod udp_tunnel ip6_udp_tunnel rdma_rxe dummy >/dev/null 2>&1
check "insmod metaroce.ko" insmod "$ko"
check "rdma link add mr0 type metaroce netdev $MR_IF" rdma link add mr0 type metaroce netdev "$MR_IF"

out=$(rdma link show mr0/1 2>&1)
[[ $out == *"state ACTIVE"* && $out == *"physical_state LINK_UP"* && $out == *"netdev $MR_IF"* ]] \
  && pass "rdma link show: ACTIVE LINK_UP on $MR_IF" || fail "rdma link show" "$out"

mac=$(cat /sys/class/net/"$MR_IF"/address)
IFS=: read -r m0 m1 m2 m3 m4 m5 <<<"$mac"
guid=$(printf '%02x%s:%s%s:%s%s:%s%s' $((0x$m0 ^ 2)) "$m1" "$m2" ff fe "$m3" "$m4" "$m5")
out=$(rdma dev show mr0 2>&1)
[[ $out == *"node_type ca"* && $out == *"node_guid $guid"* ]] \
  && pass "rdma dev show: node_type ca, node_guid $guid (EUI-64 of $mac)" || fail "rdma dev show" "$out"

out=$(ibv_devices 2>&1)
grep -Eq "^\s+mr0\s+${guid//:/}" <<<"$out" && pass "ibv_devices lists mr0 with its GUID" \
  || fail "ibv_devices" "$out"

# ibv_devinfo -v through rdma-core's unmodified rxe provider.
info=$(ibv_devinfo -v -d mr0 2>&1)
field() { sed -n "s/^[[:space:]]*$1:[[:space:]]*//p" <<<"$info" | head -1; }
expect() { # expect FIELD VALUE
  local got; got=$(field "$1")
  [[ $got == "$2" ]] || { errs+="$1: got '$got', want '$2'; "; }
}
errs=""
expect transport "InfiniBand (0)"
expect node_guid "$guid"
expect sys_image_guid "$guid"
expect vendor_id "0xffffff"
expect phys_port_cnt 1
expect max_mr_size 0xffffffffffffffff
expect page_size_cap 0xfffff000
expect max_qp 1048560
expect max_qp_wr 32767
expect max_srq_wr 32767
expect max_sge 32
expect max_cqe 32767
expect max_pd 1048576
expect max_qp_rd_atom 128
expect max_res_rd_atom 258048
expect max_srq_sge 27
expect atomic_cap "ATOMIC_HCA (1)"
expect max_pkeys 64
expect local_ca_ack_delay 15
expect state "PORT_ACTIVE (4)"
expect max_mtu "4096 (5)"
expect active_mtu "1024 (3)"
expect link_layer Ethernet
expect max_msg_sz 0x80000000
expect gid_tbl_len 1024
expect pkey_tbl_len 1
expect phys_state "LINK_UP (5)"
[[ -z $errs ]] && pass "ibv_devinfo -v: 27 fields as specified" || fail "ibv_devinfo -v fields" "$errs"
grep -Eq "GID\[ *[0-9]+\]:\s+::ffff:$MR_IP4, RoCE v2" <<<"$info" \
  && pass "GID table: IPv4 $MR_IP4 as RoCE v2" || fail "GID table IPv4" "$(grep GID <<<"$info")"
grep -Eq "GID\[ *[0-9]+\]:\s+${MR_IP6}, RoCE v2" <<<"$info" \
  && pass "GID table: IPv6 $MR_IP6 as RoCE v2" || fail "GID table IPv6" "$(grep GID <<<"$info")"

# MTU follows the netdev: 9000 - headers fits 4096; back to 1500 -> 1024.
ip link set "$MR_IF" mtu 9000
a=$(ibv_devinfo -d mr0 | awk '/active_mtu/ {print $2}')
ip link set "$MR_IF" mtu 1500
b=$(ibv_devinfo -d mr0 | awk '/active_mtu/ {print $2}')
[[ $a == 4096 && $b == 1024 ]] && pass "active_mtu follows netdev MTU (9000 -> $a, 1500 -> $b)" \
  || fail "active_mtu follows netdev MTU" "9000 -> '$a', 1500 -> '$b'"

# Port state and async events follow the link.
stdbuf -oL ibv_asyncwatch -d mr0 >"$MR_RUNDIR/asyncwatch.out" 2>&1 &
aw=$!
nap 2
ip link set "$MR_IF" down; nap 1
down=$(ibv_devinfo -d mr0 | awk '/state:/ {print $2; exit}')
ip link set "$MR_IF" up; nap 2
up=$(ibv_devinfo -d mr0 | awk '/state:/ {print $2; exit}')
kill $aw 2>/dev/null; wait $aw 2>/dev/null
[[ $down == PORT_DOWN && $up == PORT_ACTIVE ]] && pass "port state follows link (down: $down, up: $up)" \
  || fail "port state follows link" "down: '$down', up: '$up'"
ev=$(cat "$MR_RUNDIR/asyncwatch.out")
grep -q PORT_ERR <<<"$ev" && grep -q PORT_ACTIVE <<<"$ev" \
  && pass "async events: PORT_ERR then PORT_ACTIVE" || fail "async events" "$ev"

# rxe on the same netdev must not mistake mr0 for one of its own devices (both
# report RDMA_DRIVER_RXE): rxe refuses a second device per netdev, so this add
# fails if rxe finds mr0; and netdev events reach rxe with mr0 present.
check "rdma link add rxe0 type rxe beside mr0 on $MR_IF" rdma link add rxe0 type rxe netdev "$MR_IF"
ip link set "$MR_IF" mtu 4000; ip link set "$MR_IF" down; ip link set "$MR_IF" up; ip link set "$MR_IF" mtu 1500
out=$(ibv_devinfo -d mr0 2>&1; ibv_devinfo -d rxe0 2>&1)
[[ $(grep -c 'state:.*PORT_ACTIVE' <<<"$out") == 2 ]] && pass "mr0 and rxe0 both ACTIVE after netdev events" \
  || fail "mr0 and rxe0 both ACTIVE after netdev events" "$out"

out=$(rdma link add mr9 type metaroce netdev "$MR_IF" 2>&1) \
  && fail "second device on one netdev refused" "accepted: $out" \
  || pass "second device on one netdev refused: $out"

# A second device on a netdev that then goes away.
ip link add mrdummy0 type dummy && ip link set mrdummy0 up
check "rdma link add mr1 on a dummy netdev" rdma link add mr1 type metaroce netdev mrdummy0
ip link del mrdummy0
gone=0; for i in $(seq 20); do [[ -e /sys/class/infiniband/mr1 ]] || { gone=1; break; }; nap 0.5; done
((gone)) && pass "netdev removed: its device mr1 is removed" || fail "mr1 removed with its netdev" "$(rdma dev)"

check "rdma link delete mr0" rdma link delete mr0
[[ ! -e /sys/class/infiniband/mr0 ]] && pass "mr0 gone after delete" || fail "mr0 gone after delete" "$(rdma dev)"

# rmmod removes metaroce's devices only.
check "rdma link add mr0 again, beside rxe0" rdma link add mr0 type metaroce netdev "$MR_IF"
check "rmmod metaroce with mr0 present" rmmod metaroce
[[ ! -e /sys/class/infiniband/mr0 && -e /sys/class/infiniband/rxe0 ]] \
  && pass "rmmod removed mr0 and left rxe0" || fail "rmmod removed mr0 only" "$(rdma dev)"
check "insmod again, add, delete" bash -c "insmod $ko && rdma link add mr0 type metaroce netdev $MR_IF && rdma link delete mr0 && rmmod metaroce"

# A device removed while processes hold objects on it (disassociate_ucontext):
# `rdma link delete` and `rmmod` return at once instead of waiting for the
# processes; the RDMA core destroys their objects, their later verbs calls
# fail with EIO, and the rings they still have mapped stay plain memory.
# The holder is the exerciser's hold mode (PD, MR, CQ, SRQ, an RC QP in RTS,
# a UD QP, rings mapped); on SIGUSR1 it checks what it sees (TAP) and exits.
exerciser_bin
dmesg_from=$(dmesg | wc -l)
holders=()
# hold NAME: an exerciser holding objects on mr0 (pid in $held) until SIGUSR1;
# RDMAV_ALLOW_DISASSOC_DESTROY: libibverbs then takes a destroy's EIO (the
# kernel already destroyed the object) for success.
hold() {
  RDMAV_ALLOW_DISASSOC_DESTROY=1 "$ex" -d mr0 -H >"$MR_RUNDIR/$1.out" 2>&1 &
  held=$!; holders+=("$held")
  if retry 60 grep -q READY "$MR_RUNDIR/$1.out" \
    && grep -q "READY pd=1 mr=1 cq=1 srq=1 rc=1 ud=1" "$MR_RUNDIR/$1.out"; then
    pass "$1: process $held holds PD, MR, CQ, SRQ, RC and UD QPs on mr0"
  else
    fail "$1: process holds objects on mr0" "$(cat "$MR_RUNDIR/$1.out")"
  fi
}
# within SECS DESC CMD...: pass if CMD exits 0 within SECS. A removal the
# kernel makes wait (uninterruptibly) for the holders is failed, then ended
# by killing them.
within() {
  local secs=$1 desc=$2; shift 2
  local t0=$SECONDS pid rc
  "$@" >"$MR_RUNDIR/within.out" 2>&1 &
  pid=$!
  while kill -0 $pid 2>/dev/null && ((SECONDS - t0 < secs)); do nap 1; done
  if kill -0 $pid 2>/dev/null; then
    fail "$desc within $secs s" "still waiting after $secs s; killing the holders to end it"
    kill -9 "${holders[@]}" 2>/dev/null
    wait $pid
    return 1
  fi
  wait $pid; rc=$?
  ((rc == 0)) && pass "$desc ($((SECONDS - t0)) s)" \
    || fail "$desc (exit $rc)" "$(cat "$MR_RUNDIR/within.out")"
}
# gone NAME PID: SIGUSR1 to a holder whose device is gone; its TAP lines
# become ours; it must exit 0 (or be killed and die).
gone() {
  local name=$1 pid=$2 line rc
  kill -USR1 "$pid" 2>/dev/null
  if ! retry 60 bash -c "! kill -0 $pid 2>/dev/null"; then
    fail "$name: exits after SIGUSR1" "still running after 60 s: killing it"
    kill -9 "$pid"
    retry 10 bash -c "! kill -0 $pid 2>/dev/null" && pass "$name: dies on kill -9" \
      || fail "$name: dies on kill -9" "$(cat /proc/"$pid"/stack 2>&1)"
    return
  fi
  wait "$pid"; rc=$?
  while IFS= read -r line; do
    case $line in
      "ok "*) pass "$name: ${line#ok * - }" ;;
      "not ok "*) fail "$name: ${line#not ok * - }" ;;
    esac
  done <"$MR_RUNDIR/$name.out"
  ((rc == 0)) && pass "$name: exits 0 after its device went away" \
    || fail "$name: exits 0 (exit $rc)" "$(cat "$MR_RUNDIR/$name.out")"
}
listed() { rdma link show 2>/dev/null | grep -q "^link mr0/"; }

check "insmod metaroce.ko (delete while held)" insmod "$ko"
check "rdma link add mr0" rdma link add mr0 type metaroce netdev "$MR_IF"
hold holder1
within 60 "rdma link delete mr0 while process $held holds objects on it" rdma link delete mr0
! listed && [[ ! -e /sys/class/infiniband/mr0 ]] && pass "mr0 gone: not in rdma link show, not in sysfs" \
  || fail "mr0 gone after delete" "$(rdma link show 2>&1)"
# The holder still has the uverbs file open and the rings mapped: the module
# must not be pinned, and its later calls must not reach the module's code.
within 60 "rmmod metaroce while the disassociated process lives" rmmod metaroce
gone holder1 "$held"

check "insmod metaroce.ko (rmmod while held)" insmod "$ko"
check "rdma link add mr0" rdma link add mr0 type metaroce netdev "$MR_IF"
hold holder2
gid=$(retry 20 gid_index mr0 "$MR_IP4")
ibv_rc_pingpong -d mr0 -g "${gid:-1}" >"$MR_RUNDIR/pingpong-idle.out" 2>&1 &
pp=$!; holders+=("$pp")
nap 3
kill -0 $pp 2>/dev/null && pass "idle ibv_rc_pingpong server $pp on mr0" \
  || fail "idle ibv_rc_pingpong server on mr0" "$(cat "$MR_RUNDIR/pingpong-idle.out")"
within 60 "rmmod metaroce while processes $held and $pp hold mr0" rmmod metaroce
[[ ! -e /sys/module/metaroce && ! -e /sys/class/infiniband/mr0 ]] && ! listed \
  && pass "module and mr0 gone" || fail "module and mr0 gone" "$(lsmod | grep metaroce; rdma link show 2>&1)"
gone holder2 "$held"
kill "$pp" 2>/dev/null
retry 10 bash -c "! kill -0 $pp 2>/dev/null" && pass "idle ibv_rc_pingpong server ends on SIGTERM" \
  || { fail "idle ibv_rc_pingpong server ends on SIGTERM" "$(cat /proc/$pp/stack 2>&1)"; kill -9 $pp; }
wait "$pp" 2>/dev/null
lsmod | grep -q "^metaroce " && rmmod metaroce  # the old behaviour leaves it loaded
check "insmod, add, delete, rmmod after the detached processes" \
  bash -c "insmod $ko && rdma link add mr0 type metaroce netdev $MR_IF && rdma link delete mr0 && rmmod metaroce"

# With disassociate_ucontext the RDMA core also lets a device move to another
# network namespace once the subsystem is in exclusive mode (device.c:
# ib_device_set_netns_put): disabling it for the move detaches its processes
# the same way; it comes back to init_net when that namespace is deleted.
check "rdma system set netns exclusive" rdma system set netns exclusive
check "insmod metaroce.ko (netns move while held)" insmod "$ko"
check "rdma link add mr0" rdma link add mr0 type metaroce netdev "$MR_IF"
hold holder3
check "ip netns add mrns" ip netns add mrns
within 60 "rdma dev set mr0 netns mrns while process $held holds objects on it" rdma dev set mr0 netns mrns
ip netns exec mrns rdma dev show mr0 >/dev/null 2>&1 && ! rdma dev show mr0 >/dev/null 2>&1 \
  && pass "mr0 now in netns mrns only" || fail "mr0 moved to mrns" "$(rdma dev show 2>&1; ip netns exec mrns rdma dev show 2>&1)"
gone holder3 "$held"
ip netns del mrns
retry 60 rdma dev show mr0 >/dev/null 2>&1 && pass "mr0 back in init_net after netns mrns is deleted" \
  || fail "mr0 back in init_net" "$(rdma dev show 2>&1)"
check "rdma link delete mr0 (back from mrns)" rdma link delete mr0
check "rmmod metaroce" rmmod metaroce
check "rdma system set netns shared" rdma system set netns shared
k=$(dmesg | tail -n +$((dmesg_from + 1)) | grep -E "WARNING|BUG|Oops|Call Trace|KASAN|UBSAN|hung_task|blocked for more")
[[ -z $k ]] && pass "dmesg: no WARNING/BUG/Call Trace during the removals" || fail "dmesg during the removals" "$k"
check_kmemleak
done_testing
