// SPDX-License-Identifier: GPL-2.0

//! Work queue entries in the rxe ABI: send WQEs (`struct rxe_send_wqe`),
//! receive WQEs (`struct rxe_recv_wqe`) and their SGEs (`struct rxe_sge`).

use super::queue::Queue;
use crate::ffi::bindings as b;
use kernel::prelude::*;

/// One scatter/gather element of a WQE (`struct rxe_sge`), read from a ring,
/// with where it came from: an SGE of a kernel work request (written into a
/// kernel-owned work queue by the WR translation, [`crate::ffi::wr`]) may
/// name kernel memory by address; any other may not.
///
/// # Invariants
///
/// If `kernel`, the SGE is one a kernel consumer posted (`ib_post_send`,
/// `ib_post_recv`, `ib_post_srq_recv`), unchanged.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Sge {
    addr: u64,
    length: u32,
    lkey: u32,
    kernel: bool,
}

impl Sge {
    /// An SGE to write into a ring.
    pub(in crate::ffi) fn new(addr: u64, length: u32, lkey: u32) -> Self {
        Sge {
            addr,
            length,
            lkey,
            kernel: false,
        }
    }

    /// The start address.
    pub(crate) fn addr(&self) -> u64 {
        self.addr
    }

    /// The length in bytes.
    pub(crate) fn length(&self) -> u32 {
        self.length
    }

    /// The local key of the MR it names.
    pub(crate) fn lkey(&self) -> u32 {
        self.lkey
    }

    /// Posted by a kernel consumer (see the type invariant).
    pub(in crate::ffi) fn is_kernel(&self) -> bool {
        self.kernel
    }
}

/// `IB_SEND_*` flags (`enum ib_send_flags`).
pub(crate) mod send_flags {
    use crate::ffi::bindings as b;
    pub(crate) const FENCE: u32 = b::ib_send_flags_IB_SEND_FENCE as u32;
    pub(crate) const SIGNALED: u32 = b::ib_send_flags_IB_SEND_SIGNALED as u32;
    pub(crate) const SOLICITED: u32 = b::ib_send_flags_IB_SEND_SOLICITED as u32;
    pub(crate) const INLINE: u32 = b::ib_send_flags_IB_SEND_INLINE as u32;
}

/// The native-endian `u32` at byte `off` of `b` (0 past its end: never, for
/// the constant offsets below, which the `const` checks keep inside).
fn ne32(b: &[u8], off: usize) -> u32 {
    let mut w = [0u8; 4];
    if let Some(s) = b.get(off..).and_then(|t| t.get(..4)) {
        w.copy_from_slice(s);
    }
    u32::from_ne_bytes(w)
}

/// The native-endian `u64` at byte `off` of `b`, as [`ne32`].
fn ne64(b: &[u8], off: usize) -> u64 {
    let mut w = [0u8; 8];
    if let Some(s) = b.get(off..).and_then(|t| t.get(..8)) {
        w.copy_from_slice(s);
    }
    u64::from_ne_bytes(w)
}

/// A send WQE as user space wrote it into the SQ ring
/// (`struct rxe_send_wqe`), read once into kernel memory. Nothing in it is
/// trusted: lengths and keys are checked where they are used.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct SendWqe {
    pub(crate) wr_id: u64,
    /// `IB_WR_*` opcode.
    pub(crate) opcode: u32,
    pub(crate) send_flags: u32,
    /// Immediate data (as stored: network order) or rkey to invalidate.
    pub(crate) ex: u32,
    pub(crate) remote_addr: u64,
    pub(crate) rkey: u32,
    /// Total length (`dma.length`).
    pub(crate) length: u32,
    pub(crate) num_sge: u32,
    /// Atomics: `wr.atomic.compare_add`, `swap` and `rkey` (the remote
    /// address is `remote_addr`, shared with `wr.rdma`).
    pub(crate) compare_add: u64,
    pub(crate) swap: u64,
    pub(crate) atomic_rkey: u32,
    /// UD: `wr.ud.remote_qpn`, `remote_qkey` and `ah_num`.
    pub(crate) ud_qpn: u32,
    pub(crate) ud_qkey: u32,
    pub(crate) ah_num: u32,
    /// BIND_MW: `wr.mw` (`addr` is `remote_addr`).
    pub(crate) mw_length: u64,
    pub(crate) mw_mr_lkey: u32,
    pub(crate) mw_rkey: u32,
    pub(crate) mw_new_rkey: u32,
    pub(crate) mw_access: u32,
    /// REG_MR (kernel QPs): the MR's current key, its new key and access
    /// (`wr.reg`, with our key in place of the `ib_mr` pointer).
    pub(crate) reg_mr_key: u32,
    pub(crate) reg_key: u32,
    pub(crate) reg_access: u32,
}

const WR: usize = core::mem::offset_of!(b::rxe_send_wqe, wr);
const SDMA: usize = core::mem::offset_of!(b::rxe_send_wqe, dma);
const RDMA_OFF: usize = core::mem::offset_of!(b::rxe_send_wr, wr);
const DMA_LEN: usize = core::mem::offset_of!(b::rxe_dma_info, length);
const DMA_NSGE: usize = core::mem::offset_of!(b::rxe_dma_info, num_sge);
/// `rxe_dma_info.sge[]` / `inline_data[]`: the flexible array after the fixed fields.
const DMA_DATA: usize = core::mem::offset_of!(b::rxe_dma_info, __bindgen_anon_1);
const RDMA_DMA: usize = core::mem::offset_of!(b::rxe_recv_wqe, dma);

impl SendWqe {
    /// Bytes of a send WQE before its SGEs / inline data.
    pub(crate) const HEADER: usize = SDMA + DMA_DATA;

    /// Reads the WQE in slot `i`: its fixed fields ([`Self::HEADER`] bytes)
    /// in one copy out of the ring, each field then taken from that copy
    /// (user space may be rewriting the slot: each field is read once, and
    /// none is trusted).
    pub(crate) fn read(q: &Queue, i: u32) -> Result<Self> {
        let mut h = [0u8; Self::HEADER];
        q.read(i, 0, &mut h)?;
        let f = |off: usize| ne32(&h, off);
        let g = |off: usize| ne64(&h, off);
        let u = WR + RDMA_OFF;
        Ok(SendWqe {
            wr_id: g(WR + core::mem::offset_of!(b::rxe_send_wr, wr_id)),
            opcode: f(WR + core::mem::offset_of!(b::rxe_send_wr, opcode)),
            send_flags: f(WR + core::mem::offset_of!(b::rxe_send_wr, send_flags)),
            ex: f(WR + core::mem::offset_of!(b::rxe_send_wr, ex)),
            // `wr.rdma.remote_addr` / `rkey` (`wr.rdma` starts the union).
            remote_addr: g(u),
            rkey: f(u + 8),
            length: f(SDMA + DMA_LEN),
            num_sge: f(SDMA + DMA_NSGE),
            compare_add: g(u + 8),
            swap: g(u + 16),
            atomic_rkey: f(u + 24),
            ud_qpn: f(u),
            ud_qkey: f(u + 4),
            ah_num: f(u + 12),
            mw_length: g(u + 8),
            mw_mr_lkey: f(u + 16),
            mw_rkey: f(u + 20),
            mw_new_rkey: f(u + 24),
            mw_access: f(u + 28),
            reg_mr_key: f(u),
            reg_key: f(u + 8),
            reg_access: f(u + 12),
        })
    }

    /// SGE `n` of the send WQE in slot `i`.
    pub(crate) fn sge(q: &Queue, i: u32, n: u32) -> Result<Sge> {
        sge_at(q, i, SDMA + DMA_DATA, n)
    }

    /// Writes this WQE's fixed fields into slot `i` (kernel `post_send`),
    /// at the offsets [`Self::read`] reads; the SGEs or inline data follow
    /// ([`Self::write_sge`], [`Queue::write`] at [`Self::HEADER`]). `ud`:
    /// the QP is a datagram QP (the union holds `wr.ud`).
    pub(in crate::ffi) fn write(&self, q: &Queue, i: u32, ud: bool) -> Result {
        let w32 = |off: usize, v: u32| q.write(i, off, &v.to_ne_bytes());
        let w64 = |off: usize, v: u64| q.write(i, off, &v.to_ne_bytes());
        let u = WR + RDMA_OFF;
        // Slots are reused: clear the union before filling one member.
        q.write(i, u, &[0u8; 64])?;
        w64(
            WR + core::mem::offset_of!(b::rxe_send_wr, wr_id),
            self.wr_id,
        )?;
        w32(
            WR + core::mem::offset_of!(b::rxe_send_wr, opcode),
            self.opcode,
        )?;
        w32(
            WR + core::mem::offset_of!(b::rxe_send_wr, send_flags),
            self.send_flags,
        )?;
        w32(WR + core::mem::offset_of!(b::rxe_send_wr, ex), self.ex)?;
        w32(SDMA + DMA_LEN, self.length)?;
        w32(SDMA + DMA_NSGE, self.num_sge)?;
        match self.opcode {
            // UD sends carry no remote address: remote_qpn, qkey, ah_num.
            _ if ud => {
                w32(u, self.ud_qpn)?;
                w32(u + 4, self.ud_qkey)?;
                w32(u + 12, self.ah_num)
            }
            b::ib_wr_opcode_IB_WR_REG_MR => {
                w64(u, u64::from(self.reg_mr_key))?;
                w32(u + 8, self.reg_key)?;
                w32(u + 12, self.reg_access)
            }
            // Atomics: remote_addr, compare_add, swap, rkey.
            b::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
            | b::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
                w64(u, self.remote_addr)?;
                w64(u + 8, self.compare_add)?;
                w64(u + 16, self.swap)?;
                w32(u + 24, self.atomic_rkey)
            }
            _ => {
                w64(u, self.remote_addr)?;
                w32(u + 8, self.rkey)
            }
        }
    }

    /// Writes SGE `n` of the send WQE in slot `i`.
    pub(in crate::ffi) fn write_sge(q: &Queue, i: u32, n: u32, s: &Sge) -> Result {
        sge_put(q, i, SDMA + DMA_DATA, n, s)
    }

    /// Copies inline data bytes `[off, off + out.len())` of the WQE in slot `i`.
    pub(crate) fn inline_data(q: &Queue, i: u32, off: usize, out: &mut [u8]) -> Result {
        q.read(i, SDMA + DMA_DATA + off, out)
    }
}

fn sge_put(q: &Queue, i: u32, base: usize, n: u32, s: &Sge) -> Result {
    let at = base + (n as usize) * core::mem::size_of::<b::rxe_sge>();
    q.write(i, at, &s.addr.to_ne_bytes())?;
    q.write(i, at + 8, &s.length.to_ne_bytes())?;
    q.write(i, at + 12, &s.lkey.to_ne_bytes())
}

fn sge_at(q: &Queue, i: u32, base: usize, n: u32) -> Result<Sge> {
    let at = (n as usize)
        .checked_mul(SGE_SIZE)
        .and_then(|o| o.checked_add(base))
        .ok_or(EINVAL)?;
    // One copy for the three fields.
    let mut w = [0u8; SGE_SIZE];
    q.read(i, at, &mut w)?;
    Ok(Sge {
        addr: ne64(&w, 0),
        length: ne32(&w, 8),
        lkey: ne32(&w, 12),
        // The invariant: only the WR translation writes WQEs into a kernel
        // work queue (`Queue::write` is private to `ffi`).
        kernel: q.is_kernel_wq(),
    })
}

/// A receive WQE (`struct rxe_recv_wqe`).
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct RecvWqe {
    pub(crate) wr_id: u64,
    pub(crate) num_sge: u32,
}

impl RecvWqe {
    /// Bytes of a receive WQE before its SGEs.
    pub(crate) const HEADER: usize = RDMA_DMA + DMA_DATA;

    /// Reads the WQE in slot `i`.
    pub(crate) fn read(q: &Queue, i: u32) -> Result<Self> {
        let mut h = [0u8; Self::HEADER];
        q.read(i, 0, &mut h)?;
        Ok(RecvWqe {
            wr_id: ne64(&h, core::mem::offset_of!(b::rxe_recv_wqe, wr_id)),
            num_sge: ne32(&h, RDMA_DMA + DMA_NSGE),
        })
    }

    /// SGE `n` of the receive WQE in slot `i`.
    pub(crate) fn sge(q: &Queue, i: u32, n: u32) -> Result<Sge> {
        sge_at(q, i, RDMA_DMA + DMA_DATA, n)
    }

    /// Writes a receive WQE of `sges` into slot `i` (kernel `post_recv`).
    pub(in crate::ffi) fn write(q: &Queue, i: u32, wr_id: u64, sges: &[Sge]) -> Result {
        let mut total = 0u32;
        for (n, s) in sges.iter().enumerate() {
            sge_put(q, i, RDMA_DMA + DMA_DATA, n as u32, s)?;
            total = total.saturating_add(s.length);
        }
        q.write(
            i,
            core::mem::offset_of!(b::rxe_recv_wqe, wr_id),
            &wr_id.to_ne_bytes(),
        )?;
        q.write(i, RDMA_DMA + DMA_LEN, &total.to_ne_bytes())?;
        q.write(i, RDMA_DMA + DMA_NSGE, &(sges.len() as u32).to_ne_bytes())
    }
}

/// Bytes per SGE in a WQE.
pub(crate) const SGE_SIZE: usize = core::mem::size_of::<b::rxe_sge>();

// The fields [`SendWqe::read`] and [`RecvWqe::read`] take from their one
// copy lie inside it, and an SGE is the three fields `sge_at` reads.
const _: () = assert!(WR + RDMA_OFF + 32 <= SendWqe::HEADER);
const _: () = assert!(SDMA + DMA_NSGE + 4 <= SendWqe::HEADER);
const _: () = assert!(RDMA_DMA + DMA_NSGE + 4 <= RecvWqe::HEADER);
const _: () = assert!(core::mem::offset_of!(b::rxe_recv_wqe, wr_id) + 8 <= RecvWqe::HEADER);
const _: () = assert!(SGE_SIZE == 16);
