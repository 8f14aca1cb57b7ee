#!/usr/bin/env bash
# Kernel verbs data path, in one guest: the test module
# tests/modules/kverbs/kverbs_test.ko is a kernel ULP that connects two RC QPs
# of one device to each other (loopback through the device's transport) and
# checks SEND/RECV (0 B .. 66000 B, multi-SGE, IMM, inline), RDMA WRITE (+IMM),
# READ, atomics, fast registration (REG_MR, SEND_WITH_INV, LOCAL_INV), SRQ,
# remote access errors, unsignaled WRs, CQ events, error returns, flush on ERR and
# ib_drain_qp, inline SEND_WITH_INV, huge ib_alloc_mr, CQ overrun
# (IB_EVENT_CQ_ERR), SEND_WITH_INV of an unknown rkey, every payload byte compared;
# on mr0 also the extension API's kernel side: a QP's paths (and, sharing,
# its stream class), and the device's planes: one (its netdev) at first, the
# refused sets (0 or 9 netdevs, the first not the device's, one twice,
# loopback: -EINVAL; no such netdev: -ENODEV) changing nothing, SEND and
# WRITE byte-exact with a second plane set (the first other Ethernet netdev
# that is up: mrl1 here, the second link with MR_PLANES=2), then one plane
# again. Its TAP lines ("kverbs_test: ok N - ...") in the kernel log become
# this script's TAP. Then a second load with
# corrupt=3 (one expected byte of the 3rd payload comparison flipped) must
# report exactly that test as failed: the module's own self-check.
# One guest (a veth pair stands in for the link: tests/lib.sh local_link), or
# -n 2 (guest 2 only idles). PARAMS go to the module's first load
# (e.g. last_wqe=1: also expect IB_EVENT_QP_LAST_WQE_REACHED for an SRQ QP
# moved to ERR, as tests/run does; access_errors=0: skip the
# IB_WC_REM_ACCESS_ERR cases).
#   kverbs.sh [-S|-P] [mr0|rxe0] [PARAMS...]  (-P: a connection per QP; -S,
#   or neither (the module's default): mr0 shares connections,
#   so A and B, a loopback pair, are members of one; the extension API's
#   shared cases run then)
. "$MR_REPO/tests/lib.sh"
case ${1:-} in -S) export MR_SHARED=1; shift ;; -P) export MR_SHARED=0; shift ;; esac
if ((MR_ID != 1)); then pass "guest $MR_ID: idle"; done_testing; fi
local_link && pass "a link for the device: $MR_IF" || fail "a link for the device (one guest: veth mrl0)"
dev=${1:-mr0}
shift
modargs=("$@")
# rxe's DMA MR reads whatever a user-space address maps to: skip that check there.
[[ $dev == rxe* ]] && modargs=(dma_user_va=0 "${modargs[@]}")
ko=$MR_REPO/tests/modules/kverbs/kverbs_test.ko
par=/sys/module/kverbs_test/parameters
add_link "$dev"
gid=$(retry 20 gid_index "$dev" "$MR_IP4") || gid=""
[[ -n $gid ]] && pass "$dev: RoCE v2 GID for $MR_IP4 at index $gid" || fail "$dev: GID for $MR_IP4"
[[ -f $ko ]] || { fail "no $ko (build: make -C \$KDIR M=\$PWD/tests/modules/kverbs LLVM=1 modules)"; done_testing; }

# run_module ARGS...: insmod, then the module's kernel log lines since the load
# in $klog, its counts in $np/$nf; rmmod.
run_module() {
  local mark t0=$SECONDS
  # A marker, not a line count: once the kernel's log ring is full, old lines drop
  # and a count taken before the load would skip the module's first lines.
  mark="kverbs.sh run $$ $RANDOM $SECONDS"
  echo "$mark" >/dev/kmsg
  if ! insmod "$ko" dev="$dev" "$@"; then fail "insmod kverbs_test.ko $*"; return 1; fi
  klog=$(dmesg | sed -n "/$mark/,\$p" | sed -n 's/^\[ *[0-9.]*\] kverbs_test: //p')
  np=$(cat $par/passed) nf=$(cat $par/failed) fin=$(cat $par/finished)
  diag "kverbs_test${*:+ $*} on $dev: $np passed, $nf failed, finished=$fin, $((SECONDS - t0)) s"
  check "rmmod kverbs_test" rmmod kverbs_test
}

# 1. The real run: each of the module's results is a test here.
if run_module "${modargs[@]}"; then
  n=0
  while IFS= read -r l; do
    if [[ $l =~ ^ok\ [0-9]+\ -\ (.*)$ ]]; then pass "$dev kverbs: ${BASH_REMATCH[1]}"; n=$((n + 1))
    elif [[ $l =~ ^not\ ok\ [0-9]+\ -\ (.*)$ ]]; then fail "$dev kverbs: ${BASH_REMATCH[1]}"; n=$((n + 1))
    elif [[ $l == "# "* ]]; then diag "${l#\# }"
    fi
  done <<<"$klog"
  ((fin == 1 && nf == 0 && np == n && n >= 30)) && pass "$dev kverbs: finished, $np passed, 0 failed ($n results in the log)" ||
    fail "$dev kverbs: finished=$fin, $np passed, $nf failed, $n results in the log"
fi

# 2. Self-check: a corrupted comparison (the 3rd: SEND 4 KiB) must fail that test, only it.
if run_module corrupt=3 "${modargs[@]}"; then
  bad=$(grep -E '^not ok' <<<"$klog")
  if ((fin == 1 && nf == 1)) && [[ $bad == *'SEND 4 KiB'* ]]; then
    pass "$dev kverbs corrupt=3: exactly the corrupted test fails (${bad#not }), the rest ($np) pass after a reconnect"
  else
    fail "$dev kverbs corrupt=3: expected only 'SEND 4 KiB' to fail: finished=$fin, $np passed, $nf failed" "$bad"
  fi
fi

check "rdma link delete $dev" timeout 120 rdma link delete "$dev"
[[ $dev == rxe* ]] || check "rmmod metaroce" rmmod metaroce
w=$(dmesg | grep -E 'WARNING:|BUG:|Call Trace' | head -5)
[[ -z $w ]] && pass "no WARNING/BUG in the kernel log" || fail "kernel log has warnings" "$w"
done_testing
