//! Unreliable connected QPs (IBTA 9.8.2, 9.7.5.1; rxe's UC paths) over the MetaRoCE
//! wire (Documentation/transport.rst, "UC: the unreliable connected service").
//!
//! A UC QP sends SEND, SEND_WITH_IMM, RDMA WRITE and RDMA WRITE_WITH_IMM messages as DATA
//! packets on path 0 of its connection, one PSN sequence, each packet once: no ACK, no
//! retransmission, no congestion window. A send WQE completes when its last packet has
//! been handed to the network. The receiver takes packets in PSN order: a gap (a lost
//! packet) or a packet out of its message's sequence drops the message in progress, and
//! the receiver waits for the first packet of a new message (as rxe's UC responder: a
//! PSN sequence error drops packets until a FIRST or ONLY). A message that cannot be
//! received (no receive posted, a bad R_Key, longer than its receive) is dropped too
//! (responder class D, IBTA 9.9.3); the receive it would have used stays posted for the
//! next message. Only a receive WQE that cannot be used at all (class A: a bad L_Key in
//! it) moves the QP to the error state.
//!
//! The engine's SQ/RQ/SRQ handling, gather/scatter and completions are shared with RC;
//! the link state ([`UcLink`]) is the caller's, next to the engine.

use super::super::bytes::Bytes;
use super::super::ident::Ident;
use super::super::path::FLOOR_WINDOW;
use super::super::wire::{
    data_in_pieces, decode, decode_data_pieces, is_shared, peek_type, DataHeader, DropReason, Op,
    PacketType, Reth, DF_FIRST, DF_IMM, DF_LAST, DF_RETH, DF_SE,
};
use super::env::Env;
use super::sge::{gather, SgeError};
use super::types::{send_flags, QpMode, WcStatus, WrOpcode};
use super::{Engine, Tables, Taken};

/// The message a UC receiver is assembling.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct RxMessage {
    msn: u32,
    op: Op,
    len: u32,
    /// Offset of the next packet expected.
    next: u32,
    reth: Reth,
    /// It consumes a receive (one is held for it).
    recv: bool,
}

/// What the receiver is doing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum RxState {
    /// Between messages: the next packet must be a FIRST (or ONLY).
    #[default]
    Idle,
    /// Assembling a message.
    In(RxMessage),
}

/// Counters of a UC link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UcStats {
    /// Packets sent.
    pub tx_packets: u32,
    /// Messages received whole.
    pub rx_messages: u32,
    /// Messages dropped by the receiver (a lost packet, no receive posted, a bad R_Key, a
    /// SEND longer than its receive).
    pub rx_dropped: u32,
    /// Packets the receiver skipped while waiting for a message's first packet.
    pub rx_skipped: u32,
}

/// What a received UC packet did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UcRx {
    /// Placed; its message goes on.
    Placed,
    /// Placed, and its message completed.
    Completed,
    /// Accepted by the link (PSN and token), but its message is dropped or was already
    /// being dropped ([`UcStats`] says which).
    Discarded,
}

/// The connection state of a UC QP: its identity, the sender's PSN and segmentation
/// position, the receiver's expected PSN and message in progress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UcLink {
    /// This QP's connection id (its QPN).
    pub local_conn: u32,
    /// The peer's.
    pub peer_conn: u32,
    /// Largest payload per packet this QP sends, bytes.
    pub mtu: u16,
    /// The most payload a packet it accepts may carry, bytes; 0 (or less than `mtu`):
    /// `mtu` (as [`crate::conn::Config::rx_mtu`]).
    pub rx_mtu: u16,
    /// The UDP source port the host sends from (ECMP entropy; the core does not use it).
    pub src_port: u16,
    tx_ident: Ident,
    rx_ident: Ident,
    tx_psn: u32,
    tx_msn: u32,
    /// Offset of the next packet of the send WQE at the SQ's head; `None` between WQEs.
    tx_off: Option<u32>,
    rx_psn: u32,
    rx: RxState,
    stats: UcStats,
}

impl UcLink {
    /// The receiving half, at RTR: packets from the peer carry `rx`'s token and start at
    /// its first PSN ([`Ident::isn`] of path 0).
    pub fn open_rx(&mut self, local_conn: u32, mtu: u16, rx: Ident) {
        self.local_conn = local_conn;
        self.mtu = mtu.max(1);
        self.rx_ident = rx;
        self.rx_psn = rx.isn(0);
        self.rx = RxState::Idle;
    }

    /// The sending half, at RTS: packets to `peer_conn` carry `tx`'s token and start at
    /// its first PSN.
    pub fn open_tx(&mut self, peer_conn: u32, tx: Ident) {
        self.peer_conn = peer_conn;
        self.tx_ident = tx;
        self.tx_psn = tx.isn(0);
        self.tx_off = None;
    }

    /// Back to RESET: nothing open.
    pub fn reset(&mut self) {
        *self = UcLink::default();
    }

    /// The link's counters.
    pub fn stats(&self) -> &UcStats {
        &self.stats
    }

    /// The next PSN the receiver expects.
    pub fn rx_psn(&self) -> u32 {
        self.rx_psn
    }

    /// The next PSN the sender uses.
    pub fn tx_psn(&self) -> u32 {
        self.tx_psn
    }
}

/// The message op of a UC send WQE opcode; `None`: not a UC operation (IBTA 9.8.2: UC
/// carries SEND and RDMA WRITE, with or without immediate data).
fn uc_op(opcode: u32) -> Option<Op> {
    Some(match WrOpcode::from_raw(opcode)? {
        WrOpcode::Send => Op::Send,
        WrOpcode::SendWithImm => Op::SendImm,
        WrOpcode::RdmaWrite => Op::Write,
        WrOpcode::RdmaWriteWithImm => Op::WriteImm,
        _ => return None,
    })
}

impl<T: Tables> Engine<T> {
    /// UC requester: writes the next packet to send into `buf` (at least the MTU plus
    /// [`super::super::wire::MAX_DATA_HEADER`] bytes) and returns its length, or `None`
    /// if nothing is to be sent. Local operations (BIND_MW, LOCAL_INV, REG_MR) at the
    /// head of the SQ run here, in order. A WQE UC cannot carry (READ, atomics, too many
    /// SGEs, inline data over the limit) or whose bytes are not all readable completes
    /// with `IB_WC_LOC_QP_OP_ERR` / `IB_WC_LOC_PROT_ERR` before any packet of it is sent,
    /// and the QP enters the error state. `stamp`: the low 32 bits of the sender's
    /// nanosecond clock.
    pub fn uc_transmit<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        link: &mut UcLink,
        stamp: u32,
        buf: &mut [u8],
    ) -> Option<usize> {
        loop {
            let started = link.tx_off.is_some();
            // A message in progress finishes in SQD (IBTA 10.3.1.2); none starts.
            if self.error.is_some() || (!started && env.mode() != QpMode::Rts) {
                return None;
            }
            let (slot, w) = self.datagram_next(env)?;
            if started {
                break;
            }
            if WrOpcode::from_raw(w.opcode).is_some_and(WrOpcode::is_local) {
                let status = env.local_op(slot);
                if !self.datagram_sent(env, slot, &w, status) {
                    return None;
                }
                continue;
            }
            let a = env.attrs();
            let inline = w.send_flags & send_flags::INLINE != 0;
            let bad = uc_op(w.opcode).is_none()
                || w.num_sge > a.max_send_sge
                || (inline && w.length > a.max_inline_data)
                || w.length > (1 << 31);
            if bad {
                self.datagram_sent(env, slot, &w, WcStatus::LocQpOpErr);
                return None;
            }
            if !inline && !Self::check_gather(env, &w, slot) {
                self.datagram_sent(env, slot, &w, WcStatus::LocProtErr);
                return None;
            }
            link.tx_off = Some(0);
        }
        let (slot, w) = self.datagram_next(env)?;
        let op = uc_op(w.opcode)?;
        let off = link.tx_off.unwrap_or(0);
        let n = w.length.saturating_sub(off).min(u32::from(link.mtu));
        let last = off.saturating_add(n) >= w.length;
        let mut flags = if off == 0 { DF_FIRST } else { 0 };
        if last {
            flags |= DF_LAST;
            if op.has_imm() {
                flags |= DF_IMM;
            }
            if w.send_flags & send_flags::SOLICITED != 0 {
                flags |= DF_SE;
            }
        }
        let reth = if op.needs_reth() {
            flags |= DF_RETH;
            Reth {
                va: w.remote_addr,
                rkey: w.rkey,
                len: w.length,
            }
        } else {
            Reth::default()
        };
        let h = DataHeader {
            path: 0,
            // UC has no ACK to echo it and nothing stale to tell apart: a constant.
            inc: 1,
            dst_conn: link.peer_conn,
            psn: link.tx_psn,
            stamp,
            token: link.tx_ident.token(),
            stream: 0,
            op: op as u8,
            flags,
            payload_len: n as u16,
            tag: 0,
            floor: link.tx_psn,
            ssn: link.tx_psn,
            msn: link.tx_msn,
            offset: off,
            msg_len: w.length,
            reth,
            // Stored in network order (as RC carries it).
            imm: u32::from_be(w.ex),
        };
        let hl = h.encode(buf)?;
        let end = hl.checked_add(n as usize)?;
        let ok = buf
            .get_mut(hl..end)
            .is_some_and(|d| gather(env, &w, slot, off, d).is_ok());
        if !ok {
            // Its memory went away after the check (deregistered while sending): the
            // rest is not sent (the receiver drops the message) and the WQE fails.
            link.tx_off = None;
            link.tx_msn = link.tx_msn.wrapping_add(1);
            self.datagram_sent(env, slot, &w, WcStatus::LocProtErr);
            return None;
        }
        link.tx_psn = link.tx_psn.wrapping_add(1);
        link.stats.tx_packets = link.stats.tx_packets.wrapping_add(1);
        if last {
            link.tx_off = None;
            link.tx_msn = link.tx_msn.wrapping_add(1);
            self.datagram_sent(env, slot, &w, WcStatus::Success);
        } else {
            link.tx_off = Some(off.saturating_add(n));
        }
        Some(end)
    }

    /// Whether the UC requester is between messages (nothing half sent).
    pub fn uc_idle(link: &UcLink) -> bool {
        link.tx_off.is_none()
    }

    /// UC responder: one received datagram (the UDP payload). Checks, before any state
    /// changes: a DATA packet, this connection, path 0, the peer's token, the MTU, a UC
    /// operation, a PSN less than 2^16 ahead of the expected one (behind or further:
    /// `psn_out_of_window`). Then a PSN gap drops the message in progress, and the
    /// packet is placed if it continues (or starts) a message.
    pub fn uc_receive<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        link: &mut UcLink,
        buf: &[u8],
    ) -> Result<UcRx, DropReason> {
        self.uc_receive_pieces(env, link, Bytes::from(buf))
    }

    /// [`Self::uc_receive`] of a datagram the host hands over in pieces (as
    /// [`crate::conn::Connection::handle_pieces`]: only DATA whose first piece holds its
    /// header, [`data_in_pieces`]; any other datagram with a second piece is `Truncated`).
    pub fn uc_receive_pieces<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        link: &mut UcLink,
        dg: Bytes<'_>,
    ) -> Result<UcRx, DropReason> {
        let buf = dg.head();
        if buf.len() != dg.len() && !data_in_pieces(buf) {
            return Err(DropReason::Truncated);
        }
        if peek_type(buf) != Some(PacketType::Data) {
            return Err(decode(buf).err().unwrap_or(DropReason::UnknownType));
        }
        let (h, payload) = decode_data_pieces(dg)?;
        // A UC QP is never a shared connection's (Documentation/transport.rst, C22).
        if is_shared(buf) {
            return Err(DropReason::ModeMismatch);
        }
        if h.dst_conn != link.local_conn {
            return Err(DropReason::WrongConnection);
        }
        if h.path != 0 {
            return Err(DropReason::BadPath);
        }
        if link.rx_ident == Ident::DEFAULT || h.token != link.rx_ident.token() {
            return Err(DropReason::BadToken);
        }
        if h.payload_len > link.mtu.max(link.rx_mtu) {
            return Err(DropReason::BadOffset);
        }
        let op = Op::from_u8(h.op).ok_or(DropReason::UnknownOp)?;
        if !matches!(op, Op::Send | Op::SendImm | Op::Write | Op::WriteImm) {
            return Err(DropReason::UnknownOp);
        }
        let gap = h.psn.wrapping_sub(link.rx_psn);
        if gap >= FLOOR_WINDOW {
            return Err(DropReason::PsnOutOfWindow);
        }
        // Accepted: from here on the packet moves the link.
        link.rx_psn = h.psn.wrapping_add(1);
        if gap != 0 {
            self.uc_drop_message(link);
        }
        if h.flags & DF_FIRST != 0 {
            // A message still open lost its last packet (IBTA class D1E).
            self.uc_drop_message(link);
            if !self.uc_start(env, link, &h, op) {
                link.stats.rx_dropped = link.stats.rx_dropped.wrapping_add(1);
                return Ok(UcRx::Discarded);
            }
        }
        let m = match link.rx {
            RxState::In(m)
                if m.msn == h.msn && m.op == op && m.len == h.msg_len && m.next == h.offset =>
            {
                m
            }
            _ => {
                // Not the packet the message in progress expects (or none is): the
                // message is dropped; wait for a new one.
                self.uc_drop_message(link);
                link.stats.rx_skipped = link.stats.rx_skipped.wrapping_add(1);
                return Ok(UcRx::Discarded);
            }
        };
        if !payload.is_empty() {
            let placed = match op {
                Op::Write | Op::WriteImm => {
                    let va = m.reth.va.wrapping_add(u64::from(h.offset));
                    env.remote_write(m.reth.rkey, va, payload).is_ok()
                }
                _ => {
                    let r = if env.attrs().srq_sge.is_some() {
                        let i = self.t.taken().len();
                        let i = (self.rx_rsn as usize).checked_rem(i).unwrap_or(0);
                        self.scatter_taken(env, i, h.offset, payload)
                    } else {
                        Self::scatter(env, self.rq_cons, h.offset, payload)
                    };
                    match r {
                        Ok(()) => true,
                        // Longer than its receive: class D, the message is dropped.
                        Err(SgeError::Len) => false,
                        // The receive cannot be written at all: class A.
                        Err(e) => {
                            let status = if e == SgeError::Prot {
                                WcStatus::LocProtErr
                            } else {
                                WcStatus::LocQpOpErr
                            };
                            self.rx_error = Some((self.rx_rsn, status));
                            link.rx = RxState::Idle;
                            self.flush(env);
                            return Ok(UcRx::Discarded);
                        }
                    }
                }
            };
            if !placed {
                self.uc_drop_message(link);
                return Ok(UcRx::Discarded);
            }
        }
        let next = h.offset.saturating_add(u32::from(h.payload_len));
        if h.flags & DF_LAST == 0 {
            link.rx = RxState::In(RxMessage { next, ..m });
            return Ok(UcRx::Placed);
        }
        link.rx = RxState::Idle;
        link.stats.rx_messages = link.stats.rx_messages.wrapping_add(1);
        if m.recv {
            self.complete_receive(env, m.op, m.len, h.imm, h.flags & DF_SE != 0);
        }
        Ok(UcRx::Completed)
    }

    /// A FIRST packet: whether its message can be received (the QP's access rights and
    /// the R_Key for a WRITE, a posted receive for a receive-consuming message); if so it
    /// becomes the message in progress.
    fn uc_start<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        link: &mut UcLink,
        h: &DataHeader,
        op: Op,
    ) -> bool {
        use super::types::access;
        if matches!(op, Op::Write | Op::WriteImm) {
            if env.attrs().access & access::REMOTE_WRITE == 0 {
                return false;
            }
            // (A zero-length RDMA WRITE validates no R_Key, IBTA 9.7.4.1.4.)
            if h.msg_len != 0
                && env
                    .remote_check(
                        h.reth.rkey,
                        h.reth.va,
                        h.msg_len as usize,
                        access::REMOTE_WRITE,
                    )
                    .is_err()
            {
                return false;
            }
        }
        let recv = op != Op::Write;
        if recv && !self.uc_hold_receive(env) {
            return false;
        }
        link.rx = RxState::In(RxMessage {
            msn: h.msn,
            op,
            len: h.msg_len,
            next: 0,
            reth: h.reth,
            recv,
        });
        true
    }

    /// The receive the next receive-consuming message uses: the RQ's oldest, or an SRQ
    /// WQE taken (and kept across dropped messages) for the next receive sequence
    /// number. `false`: none posted.
    fn uc_hold_receive<E: Env<Sge = T::Sge>>(&mut self, env: &mut E) -> bool {
        let Some(ms) = env.attrs().srq_sge else {
            return env
                .rq_producer()
                .is_some_and(|prod| env.rq_distance(self.rq_cons, prod) != 0);
        };
        let n = self.t.taken().len();
        let Some(i) = (self.rx_rsn as usize).checked_rem(n) else {
            return false;
        };
        if self.t.taken().get(i).is_some_and(|t| t.valid) {
            return true;
        }
        let ms = ms as usize;
        let from = i.saturating_mul(ms);
        let Some(sl) = self.t.taken_sges().get_mut(from..from.saturating_add(ms)) else {
            return false;
        };
        let Some((wr_id, num_sge)) = env.srq_take(sl) else {
            return false;
        };
        if let Some(t) = self.t.taken().get_mut(i) {
            *t = Taken {
                valid: true,
                wr_id,
                num_sge,
            };
        }
        true
    }

    /// The message in progress (if any) is dropped: counted; the receive it held stays
    /// for the next message.
    fn uc_drop_message(&mut self, link: &mut UcLink) {
        if let RxState::In(_) = link.rx {
            link.stats.rx_dropped = link.stats.rx_dropped.wrapping_add(1);
        }
        link.rx = RxState::Idle;
    }
}
