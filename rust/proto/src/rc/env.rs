//! What the engine needs from its host (the kernel's rings, memory regions, CQs and QP
//! state; a model of them on the host), as small traits. Slots are ring slot numbers as
//! the host numbers them (the engine only compares them and steps them with
//! `*_advance`). Every method is infallible or reports failure in its return value; none
//! may panic.

use super::super::bytes::Bytes;
use super::super::conn::Event;
use super::types::{Attrs, Cqe, QpMode, RecvWqe, ScatterGather, SendWqe, WcStatus};

/// The host's scatter/gather element type, shared by the rings that hold SGEs and the
/// memory that resolves them.
pub trait HostSge {
    /// The element ([`super::Sge`] in the host model).
    type Sge: ScatterGather;
}

/// The send queue ring (IBTA 10.8.3): the consumer posts at the producer index; the
/// engine consumes in order.
pub trait SendQueue: HostSge {
    /// The producer slot (one past the newest posted WQE); `None`: the QP has no SQ.
    fn sq_producer(&self) -> Option<u32>;
    /// The slot `n` slots after `slot`.
    fn sq_advance(&self, slot: u32, n: u32) -> u32;
    /// Publishes the consumer slot (every WQE before it has completed).
    fn sq_set_consumer(&mut self, slot: u32);
    /// The WQE at `slot` (`None`: unreadable).
    fn sq_wqe(&self, slot: u32) -> Option<SendWqe>;
    /// SGE `i` of the WQE at `slot`.
    fn sq_sge(&self, slot: u32, i: u32) -> Option<Self::Sge>;
    /// Copies `dst.len()` bytes at `offset` of the inline data of the WQE at `slot`
    /// (and ATOMIC_WRITE's 8 bytes, which live there); `false` if out of the slot.
    fn sq_inline(&self, slot: u32, offset: u32, dst: &mut [u8]) -> bool;
}

/// The receive queue ring, or the shared receive queue the QP takes from (IBTA 10.2.9).
pub trait RecvQueue: HostSge {
    /// The producer slot; `None`: the QP has no RQ (it uses an SRQ).
    fn rq_producer(&self) -> Option<u32>;
    /// The slot `n` slots after `slot`.
    fn rq_advance(&self, slot: u32, n: u32) -> u32;
    /// Posted WQEs from slot `from` up to slot `to`.
    fn rq_distance(&self, from: u32, to: u32) -> u32;
    /// Publishes the consumer slot.
    fn rq_set_consumer(&mut self, slot: u32);
    /// The WQE at `slot`.
    fn rq_wqe(&self, slot: u32) -> Option<RecvWqe>;
    /// SGE `i` of the WQE at `slot`.
    fn rq_sge(&self, slot: u32, i: u32) -> Option<Self::Sge>;
    /// Takes the SRQ's next WQE, its SGEs copied into `sges` (at most `sges.len()`):
    /// `(wr_id, num_sge)`; `None` when the SRQ is empty (or the QP has none).
    fn srq_take(&mut self, sges: &mut [Self::Sge]) -> Option<(u64, u32)>;
}

/// Why a memory access failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemError {
    /// Outside the region (the Linux `EFAULT` case): a length error where lengths matter.
    Fault,
    /// Unknown or invalid key, another PD, a missing access right.
    Denied,
}

/// An atomic operation on 8 bytes of host-order memory (IBTA 9.4.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    /// Compare-and-swap: if the value equals `compare`, store `swap`.
    CmpSwap {
        /// Value compared with.
        compare: u64,
        /// Value stored on equality.
        swap: u64,
    },
    /// Fetch-and-add (wrapping).
    FetchAdd(u64),
}

impl AtomicOp {
    /// The value stored over `old`.
    pub fn apply(self, old: u64) -> u64 {
        match self {
            AtomicOp::CmpSwap { compare, swap } => {
                if old == compare {
                    swap
                } else {
                    old
                }
            }
            AtomicOp::FetchAdd(a) => old.wrapping_add(a),
        }
    }
}

/// Memory regions and windows of the QP's PD (IBTA 10.6). Local accesses check the
/// lkey, PD, `need` access bits and bounds; remote accesses resolve an rkey (an MR's, or
/// a memory window bound to this QP, checked against the window first) and check the
/// access right named. Each call is one hold of the region (the check and the access
/// cannot be separated by a deregistration).
pub trait Memory: HostSge {
    /// Checks that the `len` bytes at `skip` into local SGE `sge` are readable by the QP
    /// (inside the SGE and its region).
    fn local_check(&mut self, sge: &Self::Sge, skip: usize, len: usize) -> Result<(), MemError>;
    /// Reads `dst.len()` bytes at `skip` into local SGE `sge`.
    fn local_read(&mut self, sge: &Self::Sge, skip: usize, dst: &mut [u8]) -> Result<(), MemError>;
    /// Writes `src` (its pieces back to back) at `skip` into local SGE `sge` (needs
    /// `IB_ACCESS_LOCAL_WRITE`).
    fn local_write(&mut self, sge: &Self::Sge, skip: usize, src: Bytes<'_>)
        -> Result<(), MemError>;
    /// Checks that `rkey` opens `len` bytes at `va` with `need` ([`super::access`]).
    fn remote_check(&mut self, rkey: u32, va: u64, len: usize, need: u32) -> Result<(), MemError>;
    /// Reads for an RDMA READ (needs `REMOTE_READ`).
    fn remote_read(&mut self, rkey: u32, va: u64, dst: &mut [u8]) -> Result<(), MemError>;
    /// Writes `src` (its pieces back to back) for an RDMA WRITE or ATOMIC_WRITE (needs
    /// `REMOTE_WRITE`), all of it or nothing (the whole range checked first).
    fn remote_write(&mut self, rkey: u32, va: u64, src: Bytes<'_>) -> Result<(), MemError>;
    /// Checks `REMOTE_ATOMIC` access to the 8 bytes at `va` and applies `op` under the
    /// region's lock: returns the original value (host order).
    fn remote_atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, MemError>;
    /// SEND_WITH_INV: invalidates the window or fast-registration MR `key` of the QP's PD
    /// (IBTA 10.6.7.2.2); `false` if it cannot be.
    fn invalidate(&mut self, key: u32) -> bool;
}

/// The completion queues (send and receive may be one).
pub trait Completions {
    /// Writes a send completion; `false` if the CQ was full (the completion is lost).
    fn push_send(&mut self, c: &Cqe) -> bool;
    /// Writes a receive completion; `false` if the CQ was full.
    fn push_recv(&mut self, c: &Cqe, solicited: bool) -> bool;
}

/// The QP's state and attributes as the host keeps them, and its asynchronous events.
pub trait QpControl {
    /// The current attributes.
    fn attrs(&self) -> Attrs;
    /// The current state.
    fn mode(&self) -> QpMode;
    /// Moves the QP to the error state (the engine flushes).
    fn enter_error(&mut self);
    /// `IB_EVENT_SQ_DRAINED` (IBTA 10.3.1.2).
    fn sq_drained(&mut self);
    /// `IB_EVENT_QP_LAST_WQE_REACHED` (IBTA 11.6.3.1).
    fn last_wqe_reached(&mut self);
    /// A response packet that cannot be the answer it names (a broken peer: it answers
    /// no READ or atomic outstanding, or not the kind of request it names, or has
    /// another length than the request asked for): counted; nothing of it is placed and
    /// the WQE fails (Documentation/transport.rst, C11).
    fn bad_response(&mut self);
}

/// Local operations of the send queue (BIND_MW, LOCAL_INV, REG_MR), which change the
/// host's memory tables.
pub trait LocalOps {
    /// Runs the local operation of the WQE at `slot`; its status (rxe's:
    /// `LOC_QP_OP_ERR` for a failed REG_MR or MR invalidation, `MW_BIND_ERR` for a
    /// window).
    fn local_op(&mut self, slot: u32) -> WcStatus;
}

/// What the QP's connection reports as it runs ([`Event`]: losses, retransmissions,
/// path changes, timeouts, hint changes), passed through unchanged; by default ignored.
pub trait Observe {
    /// The connection reported `e`.
    fn conn_event(&mut self, _e: Event) {}
}

/// Everything the engine needs.
pub trait Env:
    SendQueue + RecvQueue + Memory + Completions + QpControl + LocalOps + Observe
{
}
impl<T: SendQueue + RecvQueue + Memory + Completions + QpControl + LocalOps + Observe> Env for T {}
