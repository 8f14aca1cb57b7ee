//! A host model of an RC QP's verbs objects for the RC engine ([`crate::rc`]): SQ and RQ
//! rings, an optional SRQ, memory regions, CQs with a capacity, QP state and events. Two
//! of them talk over a model link in [`super::pair`] (re-exported here). Host only (uses
//! `alloc`).

use crate::bytes::Bytes;
use crate::rc::{
    self, access, AtomicOp, Attrs, Completions, Cqe, HostSge, LocalOps, MemError, Memory, Observe,
    QpControl, QpMode, RecvQueue, RecvWqe, Resp, RxMsg, RxRecv, SendMsg, SendQueue, SendWqe, Sge,
    Storage, Taken, WcStatus, WrOpcode,
};
use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;

/// A send WQE in the model's SQ: the engine's fields, its SGEs and its inline data.
#[derive(Clone, Debug, Default)]
pub struct SqEntry {
    /// The WQE.
    pub wqe: SendWqe,
    /// Its SGEs.
    pub sges: Vec<Sge>,
    /// Its inline data (and ATOMIC_WRITE's 8 bytes).
    pub inline: Vec<u8>,
}

/// An SGE of `len` bytes at offset `off` of the region at `va`, opened by `lkey`.
pub fn sge(va: u64, off: usize, len: usize, lkey: u32) -> Sge {
    Sge {
        addr: va + off as u64,
        length: len as u32,
        lkey,
    }
}

impl SqEntry {
    /// A signaled WQE of `op` with `sges` (its length their sum), no remote side.
    pub fn signaled(op: WrOpcode, wr_id: u64, sges: Vec<Sge>) -> Self {
        let length = sges.iter().map(|s| s.length).sum();
        SqEntry {
            wqe: SendWqe {
                wr_id,
                opcode: op as u32,
                send_flags: rc::send_flags::SIGNALED,
                length,
                num_sge: sges.len() as u32,
                ..SendWqe::default()
            },
            sges,
            inline: Vec::new(),
        }
    }

    /// The same WQE aimed at `va` under `rkey` (RDMA and atomics).
    pub fn at(mut self, va: u64, rkey: u32) -> Self {
        self.wqe.remote_addr = va;
        self.wqe.rkey = rkey;
        self.wqe.atomic_rkey = rkey;
        self
    }
}

/// A memory region: `bytes` at `va`, opened by `key` (lkey and rkey alike).
#[derive(Clone, Debug)]
pub struct Mr {
    /// Local and remote key.
    pub key: u32,
    /// Address of byte 0.
    pub va: u64,
    /// Contents.
    pub bytes: Vec<u8>,
    /// `IB_ACCESS_*` bits.
    pub access: u32,
    /// Not invalidated.
    pub valid: bool,
}

/// Asynchronous events the model recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// `IB_EVENT_SQ_DRAINED`.
    SqDrained,
    /// `IB_EVENT_QP_LAST_WQE_REACHED`.
    LastWqeReached,
}

/// One QP's verbs objects.
#[derive(Clone, Debug)]
pub struct Host {
    /// QP state.
    pub mode: QpMode,
    /// QP attributes.
    pub attrs: Attrs,
    /// SQ slots (a power of two; the ring holds one fewer).
    pub sq: Vec<SqEntry>,
    /// SQ producer and consumer slots.
    pub sq_prod: u32,
    /// See `sq_prod`.
    pub sq_cons: u32,
    /// RQ slots (empty with an SRQ).
    pub rq: Vec<(RecvWqe, Vec<Sge>)>,
    /// RQ producer and consumer slots.
    pub rq_prod: u32,
    /// See `rq_prod`.
    pub rq_cons: u32,
    /// The SRQ's posted WQEs (`Some`: the QP uses an SRQ).
    pub srq: Option<VecDeque<(u64, Vec<Sge>)>>,
    /// Memory regions.
    pub mrs: Vec<Mr>,
    /// Send completions.
    pub send_cq: Vec<Cqe>,
    /// Receive completions and their solicited flag.
    pub recv_cq: Vec<(Cqe, bool)>,
    /// Completions each CQ takes before it overruns (`usize::MAX`: unbounded).
    pub cq_cap: usize,
    /// Events raised.
    pub events: Vec<Event>,
    /// Response packets that could not be the answers they named ([`crate::rc::Env::bad_response`]).
    pub bad_responses: u32,
    /// Snapshot this region's bytes at every successful send completion (into
    /// `snapshots`), to check what a completion guarantees at the moment it is written.
    pub snapshot_key: Option<u32>,
    /// `(wr_id, bytes)` of each snapshot.
    pub snapshots: Vec<(u64, Vec<u8>)>,
}

impl Host {
    /// A QP in RTS with `slots` SQ and RQ slots (a power of two), every remote access
    /// allowed, `max_rd_atomic` and `max_dest_rd_atomic` 16 ([`MAX_DEST_RD_ATOMIC`]),
    /// 4 SGEs, 64 inline bytes.
    pub fn new(slots: usize, srq: bool) -> Self {
        let slots = slots.next_power_of_two().max(2);
        Host {
            mode: QpMode::Rts,
            attrs: Attrs {
                access: access::REMOTE_WRITE | access::REMOTE_READ | access::REMOTE_ATOMIC,
                min_rnr_timer: 1,
                max_rd_atomic: 16,
                max_dest_rd_atomic: MAX_DEST_RD_ATOMIC,
                max_send_sge: 4,
                max_inline_data: 64,
                max_recv_sge: 4,
                srq_sge: srq.then_some(4),
                sq_sig_all: false,
            },
            sq: vec![SqEntry::default(); slots],
            sq_prod: 0,
            sq_cons: 0,
            rq: if srq {
                Vec::new()
            } else {
                vec![(RecvWqe::default(), Vec::new()); slots]
            },
            rq_prod: 0,
            rq_cons: 0,
            srq: srq.then(VecDeque::new),
            mrs: Vec::new(),
            send_cq: Vec::new(),
            recv_cq: Vec::new(),
            cq_cap: usize::MAX,
            events: Vec::new(),
            bad_responses: 0,
            snapshot_key: None,
            snapshots: Vec::new(),
        }
    }

    fn mask(n: usize) -> u32 {
        (n as u32).wrapping_sub(1)
    }

    /// Registers `len` zeroed bytes under `key` with `access`; returns the region's
    /// address.
    pub fn reg_mr(&mut self, key: u32, len: usize, access: u32) -> u64 {
        let va = u64::from(key) << 32 | 0x1000;
        self.mrs.push(Mr {
            key,
            va,
            bytes: vec![0; len],
            access,
            valid: true,
        });
        va
    }

    /// The region `key` names.
    pub fn mr(&self, key: u32) -> Option<&Mr> {
        self.mrs.iter().find(|m| m.key == key)
    }

    /// The region `key` names, mutably.
    pub fn mr_mut(&mut self, key: u32) -> Option<&mut Mr> {
        self.mrs.iter_mut().find(|m| m.key == key)
    }

    /// Posts a send WQE; `false` if the SQ is full.
    pub fn post_send(&mut self, e: SqEntry) -> bool {
        let m = Self::mask(self.sq.len());
        let next = self.sq_prod.wrapping_add(1) & m;
        if next == self.sq_cons {
            return false;
        }
        if let Some(s) = self.sq.get_mut(self.sq_prod as usize) {
            *s = e;
        }
        self.sq_prod = next;
        true
    }

    /// Posts a receive (to the SRQ if the QP has one); `false` if the RQ is full.
    pub fn post_recv(&mut self, wr_id: u64, sges: &[Sge]) -> bool {
        let num_sge = sges.len() as u32;
        if let Some(q) = self.srq.as_mut() {
            q.push_back((wr_id, sges.to_vec()));
            return true;
        }
        let m = Self::mask(self.rq.len());
        let next = self.rq_prod.wrapping_add(1) & m;
        if next == self.rq_cons {
            return false;
        }
        if let Some(s) = self.rq.get_mut(self.rq_prod as usize) {
            *s = (RecvWqe { wr_id, num_sge }, sges.to_vec());
        }
        self.rq_prod = next;
        true
    }

    /// Runs `f` on `len` bytes at `va` of region `key` after the key, validity, access
    /// and bound checks the kernel makes (in its order: denial before bounds).
    fn access<R>(
        &mut self,
        key: u32,
        va: u64,
        len: usize,
        need: u32,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R, MemError> {
        let m = self
            .mrs
            .iter_mut()
            .find(|m| m.key == key)
            .ok_or(MemError::Denied)?;
        if !m.valid || m.access & need != need {
            return Err(MemError::Denied);
        }
        let off = va.checked_sub(m.va).ok_or(MemError::Fault)?;
        let off = usize::try_from(off).map_err(|_| MemError::Fault)?;
        let end = off.checked_add(len).ok_or(MemError::Fault)?;
        let b = m.bytes.get_mut(off..end).ok_or(MemError::Fault)?;
        Ok(f(b))
    }
}

impl SendQueue for Host {
    fn sq_producer(&self) -> Option<u32> {
        Some(self.sq_prod)
    }
    fn sq_advance(&self, slot: u32, n: u32) -> u32 {
        slot.wrapping_add(n) & Self::mask(self.sq.len())
    }
    fn sq_set_consumer(&mut self, slot: u32) {
        self.sq_cons = slot;
    }
    fn sq_wqe(&self, slot: u32) -> Option<SendWqe> {
        self.sq.get(slot as usize).map(|e| e.wqe)
    }
    fn sq_sge(&self, slot: u32, i: u32) -> Option<Sge> {
        self.sq.get(slot as usize)?.sges.get(i as usize).copied()
    }
    fn sq_inline(&self, slot: u32, offset: u32, dst: &mut [u8]) -> bool {
        let Some(e) = self.sq.get(slot as usize) else {
            return false;
        };
        let o = offset as usize;
        match e.inline.get(o..o + dst.len()) {
            Some(s) => {
                dst.copy_from_slice(s);
                true
            }
            None => false,
        }
    }
}

impl RecvQueue for Host {
    fn rq_producer(&self) -> Option<u32> {
        self.srq.is_none().then_some(self.rq_prod)
    }
    fn rq_advance(&self, slot: u32, n: u32) -> u32 {
        slot.wrapping_add(n) & Self::mask(self.rq.len())
    }
    fn rq_distance(&self, from: u32, to: u32) -> u32 {
        to.wrapping_sub(from) & Self::mask(self.rq.len())
    }
    fn rq_set_consumer(&mut self, slot: u32) {
        self.rq_cons = slot;
    }
    fn rq_wqe(&self, slot: u32) -> Option<RecvWqe> {
        self.rq.get(slot as usize).map(|e| e.0)
    }
    fn rq_sge(&self, slot: u32, i: u32) -> Option<Sge> {
        self.rq.get(slot as usize)?.1.get(i as usize).copied()
    }
    fn srq_take(&mut self, sges: &mut [Sge]) -> Option<(u64, u32)> {
        let (wr_id, s) = self.srq.as_mut()?.pop_front()?;
        for (d, x) in sges.iter_mut().zip(s.iter()) {
            *d = *x;
        }
        Some((wr_id, s.len() as u32))
    }
}

impl HostSge for Host {
    type Sge = Sge;
}

/// The address of `len` bytes at `skip` into `sge`; [`MemError::Fault`] if they leave it.
fn in_sge(sge: &Sge, skip: usize, len: usize) -> Result<u64, MemError> {
    let end = skip.checked_add(len).ok_or(MemError::Fault)?;
    if end > sge.length as usize {
        return Err(MemError::Fault);
    }
    sge.addr.checked_add(skip as u64).ok_or(MemError::Fault)
}

impl Memory for Host {
    fn local_check(&mut self, sge: &Sge, skip: usize, len: usize) -> Result<(), MemError> {
        let va = in_sge(sge, skip, len)?;
        self.access(sge.lkey, va, len, 0, |_| ())
    }
    fn local_read(&mut self, sge: &Sge, skip: usize, dst: &mut [u8]) -> Result<(), MemError> {
        let va = in_sge(sge, skip, dst.len())?;
        self.access(sge.lkey, va, dst.len(), 0, |b| dst.copy_from_slice(b))
    }
    fn local_write(&mut self, sge: &Sge, skip: usize, src: Bytes<'_>) -> Result<(), MemError> {
        let va = in_sge(sge, skip, src.len())?;
        self.access(sge.lkey, va, src.len(), access::LOCAL_WRITE, |b| {
            src.copy_to(b);
        })
    }
    fn remote_check(&mut self, rkey: u32, va: u64, len: usize, need: u32) -> Result<(), MemError> {
        self.access(rkey, va, len, need, |_| ())
    }
    fn remote_read(&mut self, rkey: u32, va: u64, dst: &mut [u8]) -> Result<(), MemError> {
        self.access(rkey, va, dst.len(), access::REMOTE_READ, |b| {
            dst.copy_from_slice(b)
        })
    }
    fn remote_write(&mut self, rkey: u32, va: u64, src: Bytes<'_>) -> Result<(), MemError> {
        self.access(rkey, va, src.len(), access::REMOTE_WRITE, |b| {
            src.copy_to(b);
        })
    }
    fn remote_atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, MemError> {
        self.access(rkey, va, 8, access::REMOTE_ATOMIC, |b| {
            let mut cur = [0u8; 8];
            cur.copy_from_slice(b);
            let old = u64::from_ne_bytes(cur);
            b.copy_from_slice(&op.apply(old).to_ne_bytes());
            old
        })
    }
    fn invalidate(&mut self, key: u32) -> bool {
        match self.mr_mut(key) {
            Some(m) if m.valid => {
                m.valid = false;
                true
            }
            _ => false,
        }
    }
}

impl Completions for Host {
    fn push_send(&mut self, c: &Cqe) -> bool {
        if self.send_cq.len() >= self.cq_cap {
            return false;
        }
        self.send_cq.push(*c);
        if let (Some(k), WcStatus::Success) = (self.snapshot_key, c.status) {
            let b = self.mr(k).map(|m| m.bytes.clone()).unwrap_or_default();
            self.snapshots.push((c.wr_id, b));
        }
        true
    }
    fn push_recv(&mut self, c: &Cqe, solicited: bool) -> bool {
        if self.recv_cq.len() >= self.cq_cap {
            return false;
        }
        self.recv_cq.push((*c, solicited));
        true
    }
}

/// The model ignores the connection's events.
impl Observe for Host {}

impl QpControl for Host {
    fn attrs(&self) -> Attrs {
        self.attrs
    }
    fn mode(&self) -> QpMode {
        self.mode
    }
    fn enter_error(&mut self) {
        self.mode = QpMode::Err;
    }
    fn sq_drained(&mut self) {
        self.events.push(Event::SqDrained);
    }
    fn last_wqe_reached(&mut self) {
        self.events.push(Event::LastWqeReached);
    }
    fn bad_response(&mut self) {
        self.bad_responses += 1;
    }
}

impl LocalOps for Host {
    /// LOCAL_INV invalidates the MR `ex` names (`LOC_QP_OP_ERR` if it cannot); BIND_MW
    /// and REG_MR are not modelled (`LOC_QP_OP_ERR`).
    fn local_op(&mut self, slot: u32) -> WcStatus {
        let w = self.sq_wqe(slot).unwrap_or_default();
        match WrOpcode::from_raw(w.opcode) {
            Some(WrOpcode::LocalInv) if self.invalidate(w.ex) => WcStatus::Success,
            _ => WcStatus::LocQpOpErr,
        }
    }
}

/// The model QP's `max_dest_rd_atomic` until a test changes it
/// ([`super::pair::Node::set_max_dest_rd_atomic`]).
pub const MAX_DEST_RD_ATOMIC: u8 = 16;

/// The engine's tables in `Vec`s.
pub type VecTables =
    Storage<Vec<SendMsg>, Vec<u32>, Vec<RxMsg>, Vec<RxRecv>, Vec<Taken>, Vec<Sge>, Vec<Resp>>;

/// Tables for an SQ and RQ of `slots` slots (a power of two) and, with an SRQ,
/// `srq_sge` SGEs per SRQ WQE, sized as the kernel sizes them; the response table for
/// [`MAX_DEST_RD_ATOMIC`].
pub fn tables(slots: usize, srq_sge: Option<u32>) -> VecTables {
    let srq = srq_sge.unwrap_or(0) as usize;
    Storage {
        sends: vec![SendMsg::default(); slots],
        reads: vec![0; slots],
        rx: vec![RxMsg::default(); rc::RX_TRACK],
        recvs: vec![
            RxRecv::default();
            if srq > 0 {
                rc::RX_TRACK
            } else {
                slots.min(rc::RX_TRACK)
            }
        ],
        taken: vec![Taken::default(); if srq > 0 { rc::RX_TRACK } else { 0 }],
        taken_sges: vec![Sge::default(); rc::RX_TRACK * srq],
        resps: vec![Resp::default(); rc::resp_slots(MAX_DEST_RD_ATOMIC)],
        sge: core::marker::PhantomData,
    }
}

/// Sets `max_dest_rd_atomic` of a model QP to `d` as `modify_qp` does: a response table
/// of [`rc::resp_slots`]`(d)` in place of `engine`'s, holding what it held (kept as it is
/// if they do not fit). Returns whether the table was replaced.
pub fn set_max_dest_rd_atomic(host: &mut Host, engine: &mut rc::Engine<VecTables>, d: u8) -> bool {
    host.attrs.max_dest_rd_atomic = d;
    let mut to = vec![Resp::default(); rc::resp_slots(d)];
    if !engine.move_resps(&mut to) {
        return false;
    }
    engine.tables_mut().resps = to;
    true
}

pub use super::pair::{
    fuzz_engine, incarnation_of, model_config, Conn, Link, Node, Pair, Rng, Wire,
};
