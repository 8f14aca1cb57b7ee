#!/usr/bin/env bash
# One guest: metaroce.ko loads, logs its version, exposes udp_port, refuses bad
# parameter values with the right errno, passes its KUnit suite in the kernel,
# and survives CYCLES insmod/rmmod cycles with no leak and no warning.
#   module.sh [CYCLES]   (default 100, or $MR_CYCLES; every load runs the
#                        KUnit suite, so a debug guest wants fewer: 20)
. "$MR_REPO/tests/lib.sh"
ko=$MR_REPO/metaroce.ko
cycles=${1:-${MR_CYCLES:-100}}
[[ $cycles =~ ^[1-9][0-9]*$ ]] || { fail "CYCLES must be a positive number, not '$cycles'"; done_testing; }

load_kmod udp_tunnel ip6_udp_tunnel >/dev/null 2>&1

check "insmod metaroce.ko" insmod "$ko"
check "version logged at load" bash -c "dmesg | grep -E 'metaroce [0-9]+\.[0-9]+\.[0-9]+ loaded: udp_port=4792'"
check "udp_port parameter reads 4792" bash -c "[[ \$(cat /sys/module/metaroce/parameters/udp_port) == 4792 ]]"

# KUnit ran the suite when the module loaded; debugfs keeps the KTAP result.
res=/sys/kernel/debug/kunit/metaroce/results
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
cases="metaroce_test_layout metaroce_test_param metaroce_test_proto metaroce_test_rdma_helpers"
cases+=" metaroce_test_udp_loopback metaroce_test_udp_port_busy metaroce_test_timer metaroce_test_defer"
missing=""
for c in $cases; do grep -Eq "^ +ok [0-9]+ $c\$" "$res" 2>/dev/null || missing+="$c "; done
if [[ -r $res && -z $missing ]] && grep -Eq '^ok [0-9]+ metaroce' "$res" && ! grep -q '^ *not ok' "$res"; then
  pass "KUnit suite metaroce: $(grep -Ec '^ +ok [0-9]+ ' "$res") cases ok ($cases)"
else
  fail "KUnit suite metaroce (not ok or missing: $missing)" "$(cat "$res" 2>&1)"
fi
check "rmmod metaroce" rmmod metaroce

errs=""
out=$(insmod "$ko" udp_port=4791 2>&1) && errs+="4791 accepted; "
[[ $out == *"Address already in use"* ]] || errs+="4791: '$out'; "
out=$(insmod "$ko" udp_port=0 2>&1) && errs+="0 accepted; "
# insmod words EINVAL from init as "Invalid parameters"; the module says why.
[[ $out == *"Invalid parameters"* ]] || errs+="0: '$out'; "
dmesg | grep -q 'udp_port=0 refused (errno -22)' || errs+="no log line for 0; "
dmesg | grep -q 'udp_port=4791 refused (errno -98)' || errs+="no log line for 4791; "
[[ -z $errs ]] && pass "bad udp_port refused (4791: EADDRINUSE, 0: EINVAL)" || fail "bad udp_port refused" "$errs"

# CYCLES load/unload cycles: nothing left behind, no growth in slab/vmalloc.
mem() { awk '/^(Slab|VmallocUsed|Percpu):/ { s += $2 } END { print s }' /proc/meminfo; }
insmod "$ko" && rmmod metaroce      # warm caches once
echo 3 > /proc/sys/vm/drop_caches
before=$(mem) bad=0
for i in $(seq "$cycles"); do
  insmod "$ko" || { bad=1; break; }
  rmmod metaroce || { bad=1; break; }
done
echo 3 > /proc/sys/vm/drop_caches
after=$(mem)
if ((bad == 0)) && ! lsmod | grep -q '^metaroce '; then
  pass "$cycles insmod/rmmod cycles"
else
  fail "$cycles insmod/rmmod cycles" "failed at cycle $i"
fi
growth=$((after - before))
diag "slab+vmalloc+percpu before ${before} kB, after ${after} kB"
if ((growth < 256)); then pass "no memory growth over $cycles cycles (${growth} kB)"
else fail "no memory growth over $cycles cycles" "grew ${growth} kB"; fi
check_kmemleak
done_testing
