// SPDX-License-Identifier: GPL-2.0

//! Layout probes: the KUnit suite compares bindgen's layout of the C structs
//! the driver touches with the C compiler's (`metaroce_c_sizeof` in helpers.c).
//! A mismatch means the bindings were generated with the wrong flags.

use super::bindings as b;
use core::mem::size_of;

/// `size_of` of the Rust binding of the probed type, or 0 for an unknown probe.
pub(crate) fn rust_sizeof(probe: b::metaroce_layout_probe) -> usize {
    match probe {
        b::metaroce_layout_probe_METAROCE_PROBE_IB_DEVICE => size_of::<b::ib_device>(),
        b::metaroce_layout_probe_METAROCE_PROBE_IB_DEVICE_OPS => size_of::<b::ib_device_ops>(),
        b::metaroce_layout_probe_METAROCE_PROBE_IB_QP => size_of::<b::ib_qp>(),
        b::metaroce_layout_probe_METAROCE_PROBE_IB_CQ => size_of::<b::ib_cq>(),
        b::metaroce_layout_probe_METAROCE_PROBE_IB_UD_WR => size_of::<b::ib_ud_wr>(),
        b::metaroce_layout_probe_METAROCE_PROBE_SK_BUFF => size_of::<b::sk_buff>(),
        b::metaroce_layout_probe_METAROCE_PROBE_NET_DEVICE => size_of::<b::net_device>(),
        b::metaroce_layout_probe_METAROCE_PROBE_UDP_TUNNEL_SOCK_CFG => {
            size_of::<b::udp_tunnel_sock_cfg>()
        }
        b::metaroce_layout_probe_METAROCE_PROBE_IB_PD => size_of::<b::ib_pd>(),
        b::metaroce_layout_probe_METAROCE_PROBE_IB_UCONTEXT => size_of::<b::ib_ucontext>(),
        b::metaroce_layout_probe_METAROCE_PROBE_IB_DEVICE_ATTR => size_of::<b::ib_device_attr>(),
        b::metaroce_layout_probe_METAROCE_PROBE_IB_PORT_ATTR => size_of::<b::ib_port_attr>(),
        b::metaroce_layout_probe_METAROCE_PROBE_IB_PORT_IMMUTABLE => {
            size_of::<b::ib_port_immutable>()
        }
        b::metaroce_layout_probe_METAROCE_PROBE_IB_EVENT => size_of::<b::ib_event>(),
        b::metaroce_layout_probe_METAROCE_PROBE_RDMA_LINK_OPS => size_of::<b::rdma_link_ops>(),
        b::metaroce_layout_probe_METAROCE_PROBE_NOTIFIER_BLOCK => size_of::<b::notifier_block>(),
        b::metaroce_layout_probe_METAROCE_PROBE_HRTIMER => size_of::<b::hrtimer>(),
        b::metaroce_layout_probe_METAROCE_PROBE_SPINLOCK => size_of::<b::spinlock_t>(),
        b::metaroce_layout_probe_METAROCE_PROBE_DEV_HEAD_EXT => {
            crate::ffi::rdma::device::EXT_OFFSET
        }
        _ => 0,
    }
}
