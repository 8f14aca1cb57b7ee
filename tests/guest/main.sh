#!/usr/bin/env bash
# The main job, in each of two guests: load metaroce.ko, then carry unmodified
# rdma-core traffic across the private link and print what the tools printed.
# Until the metaroce data path lands (issue 5), the traffic rides the kernel's
# rxe on the same netdev; metaroce's transport takes its place then.
. "$MR_REPO/tests/lib.sh"
load_kmod udp_tunnel ip6_udp_tunnel >/dev/null 2>&1
check "insmod metaroce.ko" insmod "$MR_REPO/metaroce.ko"
diag "$(dmesg | grep -m1 'metaroce .* loaded')"
MR_NESTED=1 MR_VERBOSE=1 . "$MR_REPO/tests/guest/rxe-smoke.sh"
check "rmmod metaroce" rmmod metaroce
done_testing
