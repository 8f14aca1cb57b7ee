// SPDX-License-Identifier: GPL-2.0

//! The RDMA core's enums and flag sets, generated from bindgen's constants
//! (`bindings_generated.rs` is their single source): access flags, work
//! request and completion opcodes, completion status and flags, device and
//! port capabilities.
//!
//! Work request and completion opcodes and statuses are the RC engine's
//! (`crate::proto::rc`, host-tested, so it cannot see bindgen): the QP glue
//! asserts each of their values equal to the kernel's at compile time
//! (`rust/verbs/qp/env.rs`).

use crate::ffi::bindings as b;

/// A C enum as a Rust enum over the same values.
/// Memory access flags (`enum ib_access_flags`, IBTA 10.6.3.3), as the
/// `u32` bits verbs carry.
pub(crate) mod access {
    use super::b;
    pub(crate) const LOCAL_WRITE: u32 = b::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
    pub(crate) const REMOTE_WRITE: u32 = b::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
    pub(crate) const REMOTE_READ: u32 = b::ib_access_flags_IB_ACCESS_REMOTE_READ;
    pub(crate) const REMOTE_ATOMIC: u32 = b::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
    pub(crate) const MW_BIND: u32 = b::ib_access_flags_IB_ACCESS_MW_BIND;
    /// Any remote access.
    pub(crate) const REMOTE: u32 = REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC;
}

/// Work completion flags (`enum ib_wc_flags`).
pub(crate) mod wc_flags {
    use super::b;
    pub(crate) const GRH: u32 = b::ib_wc_flags_IB_WC_GRH;
    pub(crate) const WITH_IMM: u32 = b::ib_wc_flags_IB_WC_WITH_IMM;
    pub(crate) const WITH_NETWORK_HDR_TYPE: u32 = b::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE;
}

/// The header a RoCE v2 packet arrived with (`enum rdma_network_type`), as
/// the `network_hdr_type` of a work completion.
pub(crate) mod network_type {
    use super::b;
    pub(crate) const IPV4: u8 = b::rdma_network_type_RDMA_NETWORK_IPV4 as u8;
    pub(crate) const IPV6: u8 = b::rdma_network_type_RDMA_NETWORK_IPV6 as u8;
}

/// Device capability flags (`enum ib_device_cap_flags`, with the uverbs
/// ones), for [`super::DeviceAttrs::device_cap_flags`].
pub(crate) mod device_cap {
    use super::b;
    pub(crate) const PORT_ACTIVE_EVENT: u64 =
        b::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT as u64;
    pub(crate) const SYS_IMAGE_GUID: u64 = b::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID as u64;
    pub(crate) const MEM_WINDOW: u64 = b::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW as u64;
    pub(crate) const MEM_WINDOW_TYPE_2B: u64 =
        b::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B as u64;
    pub(crate) const MEM_MGT_EXTENSIONS: u64 =
        b::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64;
    pub(crate) const ATOMIC_WRITE: u64 =
        b::ib_uverbs_device_cap_flags_IB_UVERBS_DEVICE_ATOMIC_WRITE as u64;
}

/// Port capability bits (`enum ib_port_capability_mask_bits`), for
/// [`super::PortAttrs::port_cap_flags`].
pub(crate) mod port_cap {
    use super::b;
    pub(crate) const CM_SUP: u32 = b::ib_port_capability_mask_bits_IB_PORT_CM_SUP;
}
