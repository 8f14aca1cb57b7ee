// SPDX-License-Identifier: GPL-2.0

//! Work completions in the rxe ABI (`struct ib_uverbs_wc` in user CQ
//! rings) and in kernel CQ rings (the same bytes plus the QP handle).

use crate::ffi::bindings as b;

/// A work completion in the user ABI layout (`struct ib_uverbs_wc`, 48
/// bytes): what user CQ rings hold.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct Wc {
    pub(crate) wr_id: u64,
    /// `IB_WC_*` status.
    pub(crate) status: u32,
    /// `IB_UVERBS_WC_*` opcode.
    pub(crate) opcode: u32,
    pub(crate) byte_len: u32,
    /// Immediate data (network order as carried) or invalidated rkey.
    pub(crate) ex: u32,
    pub(crate) qp_num: u32,
    pub(crate) src_qp: u32,
    /// `IB_WC_*` flags (`IB_WC_WITH_IMM` …).
    pub(crate) wc_flags: u32,
    /// Kernel CQs: `enum rdma_network_type` of a datagram's IP header
    /// (with `IB_WC_WITH_NETWORK_HDR_TYPE`), 0 otherwise.
    pub(crate) net_type: u8,
}

/// The `struct ib_qp` a kernel completion names (`ib_wc.qp`). Opaque to the
/// verbs layer, which only carries it from a QP to its CQ; never written to
/// memory user space can see.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct QpHandle(usize);

impl Wc {
    /// Size of `struct ib_uverbs_wc`.
    pub(crate) const SIZE: usize = 48;
    /// Slot size of a kernel CQ: the user ABI bytes, then the QP handle at
    /// 48 and the network header type at 56.
    pub(crate) const KERNEL_SIZE: usize = 64;

    /// The slot bytes of a kernel CQ (see [`Self::KERNEL_SIZE`]).
    pub(crate) fn kernel_bytes(&self, qp: QpHandle) -> [u8; Self::KERNEL_SIZE] {
        let mut o = [0u8; Self::KERNEL_SIZE];
        o[..Self::SIZE].copy_from_slice(&self.bytes());
        o[48..56].copy_from_slice(&qp.0.to_ne_bytes());
        o[56] = self.net_type;
        o
    }

    /// The user ABI bytes.
    pub(crate) fn bytes(&self) -> [u8; Self::SIZE] {
        let mut o = [0u8; Self::SIZE];
        o[0..8].copy_from_slice(&self.wr_id.to_ne_bytes());
        o[8..12].copy_from_slice(&self.status.to_ne_bytes());
        o[12..16].copy_from_slice(&self.opcode.to_ne_bytes());
        // 16..20 vendor_err = 0
        o[20..24].copy_from_slice(&self.byte_len.to_ne_bytes());
        o[24..28].copy_from_slice(&self.ex.to_ne_bytes());
        o[28..32].copy_from_slice(&self.qp_num.to_ne_bytes());
        o[32..36].copy_from_slice(&self.src_qp.to_ne_bytes());
        o[36..40].copy_from_slice(&self.wc_flags.to_ne_bytes());
        // pkey_index, slid 0; sl 0; dlid_path_bits 0; port_num 1
        o[46] = 1;
        o
    }
}

/// The handle of a core QP object, for its kernel completions.
pub(in crate::ffi) fn qp_handle(qp: *mut b::ib_qp) -> QpHandle {
    QpHandle(qp as usize)
}

/// A kernel CQ slot ([`Wc::kernel_bytes`]) as the `struct ib_wc` kernel
/// consumers poll.
pub(in crate::ffi) fn kernel_wc(slot: &[u8; Wc::KERNEL_SIZE]) -> b::ib_wc {
    let u32_at = |o: usize| u32::from_ne_bytes([slot[o], slot[o + 1], slot[o + 2], slot[o + 3]]);
    let mut h = [0u8; 8];
    h.copy_from_slice(&slot[48..56]);
    let mut id = [0u8; 8];
    id.copy_from_slice(&slot[0..8]);
    let mut wc = b::ib_wc::default();
    wc.__bindgen_anon_1.wr_id = u64::from_ne_bytes(id);
    wc.status = u32_at(8);
    wc.opcode = u32_at(12);
    wc.vendor_err = u32_at(16);
    wc.byte_len = u32_at(20);
    wc.ex.invalidate_rkey = u32_at(24);
    wc.qp = usize::from_ne_bytes(h) as *mut b::ib_qp;
    wc.src_qp = u32_at(32);
    wc.wc_flags = u32_at(36) as i32;
    wc.port_num = 1;
    wc.network_hdr_type = slot[56];
    wc
}
