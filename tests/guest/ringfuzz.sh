#!/usr/bin/env bash
# One guest: the ring fuzzer (tests/exerciser/ringfuzz.c) against mr0 on a
# dummy netdev: user space writing garbage into the rings it shares with the
# kernel (SQ/RQ/SRQ/CQ WQEs and indices) must never WARN, oops, hang or leak.
# Its deterministic cases and each fuzz round run in a child; the fuzzer checks
# `rdma res show` and a clean loopback after each. Then the kernel log has no
# WARNING/BUG/KASAN/UBSAN and kmemleak (debug kernel) finds nothing.
#   ringfuzz.sh [ROUNDS [SEED]]   (default 100 rounds and a seed from the
#                                 clock; the fuzzer prints the seed)
#   make -C tests/exerciser && qemu/vm-run -n 1 -t 900 tests/guest/ringfuzz.sh [ROUNDS [SEED]]
. "$MR_REPO/tests/lib.sh"
# All in a function: bash parses it whole, so the file changing on the host
# (a 9p mount) during the run is never read again (an edit made mid-run once
# sent the guest's netfs into unbounded read retries: a stack overflow).
main() {
  rounds=${1:-100}
  seed=${2:-}
  src=$MR_REPO/tests/exerciser/ringfuzz.c
  fz=$MR_REPO/out/ringfuzz

  if ((MR_ID != 1)); then pass "guest $MR_ID: idle (the fuzzer needs no peer)"; done_testing; fi
  if [[ ! -x $fz || $fz -ot $src ]]; then
    diag "out/ringfuzz missing or stale: building it in the guest (slow under TCG)"
    fz=$MR_RUNDIR/ringfuzz
    check "build the ring fuzzer" gcc -O2 -pthread -o "$fz" "$src" -libverbs
  fi
  load_kmod udp_tunnel ip6_udp_tunnel dummy >/dev/null 2>&1
  if [[ -z ${MR_IF:-} ]]; then
    MR_IF=fzdummy0 MR_IP4=198.18.0.1
    check "no private link: dummy netdev $MR_IF with $MR_IP4" \
      bash -c "ip link add $MR_IF type dummy && ip link set $MR_IF up && ip addr add $MR_IP4/24 dev $MR_IF"
  fi
  dmesg_from=$(dmesg | wc -l)
  check "insmod metaroce.ko" insmod "$MR_REPO/metaroce.ko"
  check "rdma link add mr0 type metaroce netdev $MR_IF" rdma link add mr0 type metaroce netdev "$MR_IF"
  gid=$(retry 20 gid_index mr0 "$MR_IP4") && pass "RoCE v2 GID for $MR_IP4 at index $gid" \
    || { fail "RoCE v2 GID for $MR_IP4 on mr0"; done_testing; }

  # The fuzzer's TAP lines become this script's ("fz:" prefix).
  t0=$SECONDS
  rcf=$MR_RUNDIR/ringfuzz.rc
  fold_tap "fz: " < <(timeout 3000 "$fz" -d mr0 -g "$gid" -n "$rounds" ${seed:+-s "$seed"} 2>&1; echo $? >"$rcf")
  rc=$(cat "$rcf")
  ((rc == 0)) && pass "ringfuzz -n $rounds exits 0 ($((SECONDS - t0)) s)" \
    || fail "ringfuzz -n $rounds exits 0 (exit $rc, $((SECONDS - t0)) s)"

  res=$(rdma res show 2>/dev/null | grep -E '^[0-9]+: mr0: ')
  diag "rdma res after the fuzzer: $res"
  check "rdma link delete mr0" rdma link delete mr0
  check "rmmod metaroce" rmmod metaroce
  k=$(dmesg | tail -n +$((dmesg_from + 1)) | grep -E "WARNING|BUG|Oops|Call Trace|KASAN|UBSAN|hung_task|blocked for more|refcount")
  [[ -z $k ]] && pass "dmesg: no WARNING/BUG/KASAN/UBSAN since the module was loaded" || fail "dmesg since the load" "$k"
  check_kmemleak
  done_testing
}
main "$@"
