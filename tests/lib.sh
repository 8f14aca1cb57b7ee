# Shared helpers for the guest test scripts (sourced; TAP on stdout).
#   ok COND... -- DESC  run COND; print "ok"/"not ok" with DESC
#   pass DESC / fail DESC [DETAIL]
#   diag TEXT         a TAP comment
#   done_testing      print the plan (TAP allows it last) and exit 0/1
#   retry SECONDS CMD...   rerun CMD until it succeeds or SECONDS pass
#   slow SECONDS      SECONDS scaled for the kernel under test (debug: x8)

_tap_n=0
_tap_failed=0
diag() { printf '%s\n' "$*" | sed 's/^/# /'; }
pass() { _tap_n=$((_tap_n + 1)); echo "ok $_tap_n - $1"; }
# skip DESC REASON: a check that cannot be judged here, and why (TAP "# SKIP").
skip() { _tap_n=$((_tap_n + 1)); echo "ok $_tap_n - $1 # SKIP $2"; }
fail() {
  _tap_n=$((_tap_n + 1)); _tap_failed=$((_tap_failed + 1))
  echo "not ok $_tap_n - $1"
  [[ $# -gt 1 ]] && printf '%s\n' "$2" | sed 's/^/#   /'
  return 0
}
check() { # check DESC CMD...: pass if CMD succeeds; on failure show its output
  # (CMD runs in a command substitution, a subshell: what it assigns or
  # exports is lost; call such a function directly, then check its status)
  local desc=$1; shift
  local outp
  if outp=$("$@" 2>&1); then pass "$desc"; else fail "$desc" "$outp"; fi
}
retry() {
  local secs=$1; shift
  local end=$((SECONDS + secs))
  until "$@"; do
    ((SECONDS < end)) || return 1
    nap 1
  done
}
# nap SECS: sleep SECS (fractions allowed) without running a program: an exec
# costs a TCG guest 40-70 ms of CPU, and the polling loops here nap thousands
# of times a run. The read builtin times out on a pipe no one writes to.
nap() {
  [[ -n ${_mr_nap_fd:-} ]] || exec {_mr_nap_fd}<> <(:)
  read -rt "$1" -u "$_mr_nap_fd" _ || :
}
done_testing() { echo "1..$_tap_n"; exit $((_tap_failed > 0)); }

# meet NAME [TRIES]: both guests of a two-guest run reach NAME (marker files
# in $MR_RUNDIR/events; TRIES seconds, default 400).
meet() {
  mkdir -p "$MR_RUNDIR/events"
  : >"$MR_RUNDIR/events/$1.$MR_ID"
  # Polled every 0.2 s: a guest's part waits for the other's at every meet.
  local end=$((SECONDS + ${2:-$(slow 400)}))
  until [[ -f $MR_RUNDIR/events/$1.$((3 - MR_ID)) ]]; do
    ((SECONDS < end)) || { fail "guest $((3 - MR_ID)) never reached '$1'"; done_testing; }
    nap 0.2
  done
}
# swap NAME VALUE: publish VALUE under NAME, wait for the peer guest's value
# of NAME and print it (two guests agreeing on a verdict or another round).
swap() {
  local d=$MR_RUNDIR/events peer=$((3 - MR_ID))
  mkdir -p "$d"
  printf '%s\n' "$2" >"$d/$1.val.$MR_ID.tmp" && mv "$d/$1.val.$MR_ID.tmp" "$d/$1.val.$MR_ID"
  retry 400 test -f "$d/$1.val.$peer" || { fail "guest $peer never published '$1'"; done_testing; }
  cat "$d/$1.val.$peer"
}
# local_link: in a one-guest run (no private link), a veth pair mrl0/mrl1
# with guest 1's addresses on mrl0 stands in for it, so that the loopback
# tests (traffic to the guest's own address) run in a single guest. A pair
# left by an earlier test of the same guest is replaced.
local_link() {
  [[ -n ${MR_IF:-} ]] && return 0
  ip link del mrl0 2>/dev/null
  ip link add mrl0 type veth peer name mrl1 &&
  ip link set mrl1 up && ip link set mrl0 up &&
  ip addr add 198.18.0.1/24 dev mrl0 &&
  ip -6 addr add 2001:2::1/64 dev mrl0 nodad || return 1
  export MR_IF=mrl0 MR_IP4=198.18.0.1 MR_IP6=2001:2::1
}
# kernel_cpu: this guest's CPU time so far, in USER_HZ (10 ms) units, as
# "NONIDLE KERNEL USER": elapsed time on all online CPUs (/proc/uptime) less
# /proc/stat's idle, iowait and steal, then the sampled system + irq + softirq and
# user + nice ticks. The kernel measures NO_HZ idle time exactly but the
# others only by sampling ticks, and no tick sees an interrupt (and its
# softirq) that wakes an idle CPU; nor are ticks a starved vCPU missed made
# up. cpu_per_mib splits the exact non-idle time by the sampled shares.
kernel_cpu() {
  awk -v n="$(getconf _NPROCESSORS_ONLN)" 'NR == FNR { up = $1; next }
    $1 == "cpu" { printf "%d %d %d\n", up * 100 * n - ($5 + $6 + $9), $4 + $7 + $8, $2 + $3; exit }' /proc/uptime /proc/stat
}
# cpu_per_mib A B BYTES: kernel CPU ms per MiB between kernel_cpu readings A
# and B for BYTES moved, as "SPLIT SAMPLED": SPLIT is the non-idle time
# times the sampled kernel share (all of it when no tick was sampled: a CPU
# that only ran interrupts), SAMPLED the sampled kernel ticks alone (short
# by the softirq work done on an otherwise idle CPU: a WRITE receiver's
# whole data path).
cpu_per_mib() {
  awk -v a="$1" -v z="$2" -v b="$3" 'BEGIN {
    if (split(a, x, " ") != 3 || split(z, y, " ") != 3 || b <= 0) exit 1
    n = y[1] - x[1]; k = y[2] - x[2]; u = y[3] - x[3]; m = b / 1048576
    split_ = k + u > 0 ? n * k / (k + u) : n
    printf "%.1f %.1f\n", split_ * 10 / m, k * 10 / m }'
}
# counter NAME: a counter of the RDMA device $dev (`rdma statistic`).
counter() { rdma statistic show link "$dev/1" | tr ' ' '\n' | awk -v k="$1" 'p { v = $0; exit } $0 == k { p = 1 } END { print v + 0 }'; }

# owned PID: the RDMA objects of any kind (`rdma res`) that process PID holds
# on the device $dev, one line each; nothing when it holds none.
owned() {
  local r
  for r in pd mr cq qp srq ctx; do rdma res show "$r" 2>/dev/null | grep -E "(^| )$dev[ /:].*pid $1( |$)"; done
}

# Load a module from the test kernel's build tree by name: virtme-ng exposes the
# tree's modules to modprobe; insmod by path is the fallback.
load_kmod() {
  local m
  for m in "$@"; do
    modprobe "$m" 2>/dev/null && continue
    local f; f=$(find "$MR_KDIR" -name "$m.ko" -print -quit)
    [[ -n $f ]] && insmod "$f" || return 1
  done
}

# mr_shared: 1 if add_link adds a metaroce device that shares connections
# between its RC QPs to one peer, else 0: MR_SHARED (0 or 1) if set, else the
# loaded module's `shared` parameter, else what MR_MODPARAMS sets, else the
# module's default, 1 (Documentation/device.rst, "Shared connections").
mr_shared() {
  local v=${MR_SHARED:-}
  [[ -z $v ]] && v=$(cat /sys/module/metaroce/parameters/shared 2>/dev/null)
  [[ -z $v ]] && v=$(tr ',' '\n' <<<"${MR_MODPARAMS:-}" | sed -n 's/^shared=//p' | tail -1)
  case ${v:-1} in 1|Y|y) echo 1 ;; *) echo 0 ;; esac
}

# add_link DEV: the RDMA device DEV on the private link $MR_IF, as a test
# (rxe*: the kernel's rxe; otherwise metaroce, loading metaroce.ko if needed).
add_link() {
  local dev=$1
  load_kmod udp_tunnel ip6_udp_tunnel >/dev/null 2>&1
  if [[ $dev == rxe* ]]; then
    load_kmod rdma_rxe >/dev/null 2>&1
    check "rdma link add $dev type rxe netdev $MR_IF" rdma link add "$dev" type rxe netdev "$MR_IF"
  else
    # MR_MODPARAMS (host environment, through qemu/vm-run): module
    # parameters, comma-separated, e.g. MR_MODPARAMS=paths=4.
    # shellcheck disable=SC2086
    lsmod | grep -q '^metaroce ' ||
      check "insmod metaroce.ko ${MR_MODPARAMS//,/ }" insmod "$MR_REPO/metaroce.ko" ${MR_MODPARAMS//,/ }
    # MR_SHARED=0|1: this device's connection mode (the `shared` parameter,
    # written through sysfs for this `rdma link add` alone, then restored);
    # unset: the module's (mr_shared).
    local p=/sys/module/metaroce/parameters/shared was mode
    was=$(cat "$p" 2>/dev/null)
    [[ -n ${MR_SHARED:-} ]] && check "shared=$MR_SHARED through sysfs (was ${was:-?})" bash -c "echo $MR_SHARED > $p"
    check "rdma link add $dev type metaroce netdev $MR_IF" rdma link add "$dev" type metaroce netdev "$MR_IF"
    [[ -n ${MR_SHARED:-} ]] && echo "${was:-Y}" >"$p"
    mode=shared; (($(mr_shared))) || mode=per-QP
    check "$dev: added with $mode connections (dmesg)" \
      bash -c "dmesg | grep -E '$MR_IF: fair share ' | tail -1 | grep -q '$mode connections'"
  fi
}

# link_ready DEV [NETEM-ARGS...]: after add_link DEV, the set-up the two-guest
# tests share: the peer answers a ping over $MR_IF, netem with NETEM-ARGS (if
# any) shapes this guest's egress on it, and gid is set to DEV's RoCE v2 GID
# index for $MR_IP4; each checked, and without a GID the test stops there.
link_ready() {
  local dev=$1; shift
  check "peer reachable over $MR_IF" retry 90 ping -q -c1 -W1 "$MR_PEER_IP4"
  if (($#)); then
    load_kmod sch_netem >/dev/null 2>&1
    check "netem on $MR_IF: $*" tc qdisc add dev "$MR_IF" root netem "$@"
  fi
  gid=$(retry 10 gid_index "$dev" "$MR_IP4") || gid=""
  if [[ -n $gid ]]; then pass "$dev: RoCE v2 GID for $MR_IP4 at index $gid"
  else fail "$dev: RoCE v2 GID for $MR_IP4" "$(rdma link show 2>&1)"; done_testing; fi
}

# GID index of DEV port 1 whose GID carries ADDR (v4: ::ffff:a.b.c.d) with RoCE v2 type.
gid_index() {
  local dev=$1 addr=$2 want g i t
  if [[ $addr == *.*.*.* ]]; then
    want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${addr//./ })
  else
    want=$(python3 -c 'import ipaddress,sys; e=ipaddress.ip_address(sys.argv[1]).exploded; print(":".join(e.replace(":","")[i:i+4] for i in range(0,32,4)))' "$addr")
  fi
  for g in /sys/class/infiniband/"$dev"/ports/1/gids/*; do
    i=${g##*/}
    t=$(cat /sys/class/infiniband/"$dev"/ports/1/gid_attrs/types/"$i" 2>/dev/null) || continue
    [[ $(cat "$g") == "$want" && $t == "RoCE v2" ]] && { echo "$i"; return 0; }
  done
  return 1
}

# slow SECONDS: a time limit scaled for the kernel under test: MR_SLOW times
# SECONDS (default: 8 on the debug flavour, which has kmemleak, where perftest
# runs about 10-30 times slower under TCG; else 1).
slow() {
  if [[ -z ${MR_SLOW:-} ]]; then
    mountpoint -q /sys/kernel/debug 2>/dev/null || mount -t debugfs none /sys/kernel/debug 2>/dev/null
    [[ -e /sys/kernel/debug/kmemleak ]] && MR_SLOW=8 || MR_SLOW=1
  fi
  echo $(($1 * MR_SLOW))
}

# qp_timeout: the IBTA local ACK timeout exponent a verbs test asks for
# (perftest -u; the timer runs 4.096 us * 2^N, IBTA 9.7.6.1.3): perftest's
# default 14 on the normal kernel, one more per doubling of MR_SLOW (17 on the
# debug kernel), so that the retry budget covers the same number of round
# trips when everything runs MR_SLOW times slower.
qp_timeout() {
  local s e=14
  s=$(slow 1)
  while ((s > 1)); do e=$((e + 1)); s=$(((s + 1) / 2)); done
  echo "$e"
}

# On kernels with kmemleak (the debug flavour): scan twice and report as a test.
check_kmemleak() {
  local k=/sys/kernel/debug/kmemleak n
  mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
  [[ -w $k ]] || return 0
  echo scan > $k; sleep 2; echo scan > $k
  n=$(grep -c unreferenced $k)
  ((n == 0)) && pass "kmemleak: 0 unreferenced objects" || fail "kmemleak: $n unreferenced objects" "$(head -40 $k)"
}

# fold_tap PREFIX: another TAP producer's lines (stdin) become this script's:
# its "ok"/"not ok" lines renumbered in our sequence, their descriptions
# prefixed with PREFIX; its plan dropped; anything else passed through.
fold_tap() {
  local line
  while IFS= read -r line; do
    case $line in
      "ok "*) pass "$1${line#ok * - }" ;;
      "not ok "*) fail "$1${line#not ok * - }" ;;
      1..*) ;;
      *) echo "$line" ;;
    esac
  done
}

# exerciser_bin: sets ex to out/exerciser (built on the host: `make -C
# tests/exerciser`); if that is missing or older than one of its sources
# (every .c in tests/exerciser but ringfuzz.c, and the headers), builds one in
# $MR_RUNDIR instead and sets ex to that (slow under TCG).
exerciser_bin() {
  local f srcs=() stale=0
  ex=$MR_REPO/out/exerciser
  [[ -x $ex ]] || stale=1
  for f in "$MR_REPO"/tests/exerciser/*.[ch]; do
    [[ $f == */ringfuzz.c ]] && continue
    [[ $f == *.c ]] && srcs+=("$f")
    [[ $ex -ot $f ]] && stale=1
  done
  if ((stale)); then
    diag "out/exerciser missing or stale: building it in the guest (slow under TCG)"
    ex=$MR_RUNDIR/exerciser
    check "build the exerciser" gcc -O2 -o "$ex" "${srcs[@]}" -libverbs
  fi
}

# integrity_built: out/integrity exists and is newer than its source (the
# host builds it: `make -C tests/integrity`); a test without it stops here.
integrity_built() {
  local bin=$MR_REPO/out/integrity
  if [[ -x $bin && ! $bin -ot $MR_REPO/tests/integrity/integrity.c ]]; then pass "out/integrity built and up to date"
  else fail "out/integrity missing or older than its source: run 'make -C tests/integrity' on the host"; done_testing; fi
}

# run_integrity DEV GID [BOTH-ARGS...] [-- CLIENT-ARGS...]: the integrity test
# (tests/integrity/integrity.c) between the two guests on DEV: guest 1 serves,
# guest 2 drives as the client (connecting, retrying, until the server
# listens) with CLIENT-ARGS too (-s/-n/-M: the server takes them from the
# client). Its TAP lines become the caller's ("DEV: ..."); "#" lines pass
# through; then a test that it exited 0. Returns its exit status.
run_integrity() {
  local dev=$1 gid=$2 both=() client=() line rc t0=$SECONDS
  shift 2
  while (($#)) && [[ $1 != -- ]]; do both+=("$1"); shift; done
  (($#)) && { shift; client=("$@"); }
  local role=server
  ((MR_ID == 1)) || { role="client $MR_PEER_IP4"; both+=("${client[@]}"); }
  local rcf=$MR_RUNDIR/integrity.rc.$MR_ID
  rm -f "$rcf"
  fold_tap "$dev: " < <(timeout 540 "$MR_REPO/out/integrity" -d "$dev" -g "$gid" "${both[@]}" $role 2>&1; echo $? >"$rcf")
  # No status written (the writer was killed) is a failure, never a 0.
  rc=$(cat "$rcf" 2>/dev/null) && [[ $rc =~ ^[0-9]+$ ]] || rc=255
  ((rc == 0)) && pass "$dev: integrity $role exits 0 ($((SECONDS - t0)) s)" \
    || fail "$dev: integrity $role exits 0 (exit $rc, $((SECONDS - t0)) s)" "$(dmesg | tail -20)"
  return "$rc"
}

# run_parts SCRIPT ARGS... [+ SCRIPT ARGS...]...: several guest tests
# (tests/guest/SCRIPT) in this one boot, one after the other, as children of
# this script: each has an MR_RUNDIR of its own (its `meet` markers cannot
# meet an earlier part's), and its TAP lines become the caller's, prefixed
# "SCRIPT ARGS: "; a part whose exit status was never written fails, and so
# does a call with no part at all. Between parts both guests meet; then the
# RDMA state a part leaves is undone: every RDMA link deleted, a root qdisc
# it added on $MR_IF removed (two-guest runs), metaroce.ko and rdma_rxe
# unloaded (checked: a part after which the module cannot unload fails).
# Anything else a part changes (processes it started, the MTU, sysctls,
# other qdiscs, tracing) is the part's own to restore, as when run alone.
run_parts() {
  local k=0 part=() line rc rcf q0 all="$*"
  q0=$(tc qdisc show dev "${MR_IF:-lo}" root 2>/dev/null)
  while (($#)); do
    part=()
    while (($#)) && [[ $1 != + ]]; do part+=("$1"); shift; done
    (($#)) && shift
    ((${#part[@]})) || { diag "run_parts: an empty part (two '+' in a row, or one at an end) skipped"; continue; }
    k=$((k + 1))
    local name="${part[*]}" t0=$SECONDS
    rcf=$MR_RUNDIR/part$k.rc.$MR_ID
    mkdir -p "$MR_RUNDIR/part$k"
    diag "part $k: ${part[*]}"
    rm -f "$rcf"
    # The part's own output is also kept as partK/tap.ID (tests/wireshark.py
    # reads a capture part's tallies there).
    fold_tap "$name: " < <(MR_RUNDIR=$MR_RUNDIR/part$k bash "$MR_REPO/tests/guest/${part[0]}" "${part[@]:1}" 2>&1 |
      tee "$MR_RUNDIR/part$k/tap.$MR_ID"; echo "${PIPESTATUS[0]}" >"$rcf")
    # No status written (the part's shell was killed) is a failure, never a 0.
    rc=$(cat "$rcf" 2>/dev/null) && [[ $rc =~ ^[0-9]+$ ]] || rc="none written"
    [[ $rc == 0 ]] && pass "$name: exits 0 ($((SECONDS - t0)) s)" || fail "$name: exits 0 (exit $rc, $((SECONDS - t0)) s)"
    ((MR_NGUESTS == 2)) && meet "part$k-done" 900
    part_cleanup "$q0" "$name"
    ((MR_NGUESTS == 2)) && meet "part$k-clean" 300
  done
  ((k > 0)) || fail "run_parts: no part to run (arguments: '$all')"
}
# part_cleanup QDISC NAME: undo what the part NAME of run_parts left (see there).
part_cleanup() {
  local l
  for l in $(rdma link show 2>/dev/null | awk '{ sub("/.*", "", $2); print $2 }'); do
    timeout 120 rdma link delete "$l" 2>/dev/null
  done
  if [[ -n ${MR_IF:-} && $(tc qdisc show dev "$MR_IF" root 2>/dev/null) != "$1" ]]; then
    tc qdisc del dev "$MR_IF" root 2>/dev/null
  fi
  if lsmod | grep -q '^metaroce '; then
    check "after $2: rmmod metaroce" retry 30 rmmod metaroce
  fi
  lsmod | grep -q '^rdma_rxe ' && { retry 30 rmmod rdma_rxe || fail "after $2: rmmod rdma_rxe"; }
  return 0
}
