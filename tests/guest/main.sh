#!/usr/bin/env bash
# The main job, in each of two guests: load metaroce.ko, add a metaroce RDMA
# device with `rdma link add`, show it through unmodified rdma-core, and carry
# unmodified ibv_rc_pingpong and ib_write_bw traffic across the private link
# over mr0, i.e. over the MetaRoCE transport (UDP port 4792).
. "$MR_REPO/tests/lib.sh"
load_kmod udp_tunnel ip6_udp_tunnel >/dev/null 2>&1
# MR_MODPARAMS (qemu/vm-run passes it through): module parameters.
check "insmod metaroce.ko ${MR_MODPARAMS//,/ }" insmod "$MR_REPO/metaroce.ko" ${MR_MODPARAMS//,/ }
diag "$(dmesg | grep -m1 'metaroce .* loaded')"
MR_NESTED=1 MR_VERBOSE=1 . "$MR_REPO/tests/guest/traffic.sh" mr0
diag "$(ibv_devices 2>&1)"
diag "$(rdma link show mr0/1)"
diag "$(ibv_devinfo -d mr0 | grep -E 'hca_id|transport|node_guid|state|active_mtu|link_layer')"
check "rdma link delete mr0" rdma link delete mr0
check "rmmod metaroce" rmmod metaroce
done_testing
