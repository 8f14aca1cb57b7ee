// SPDX-License-Identifier: GPL-2.0

//! The members of a shared connection as its application (`Mux`,
//! Documentation/device.rst, "Shared connections"): member `id`'s streams are
//! the connection's `2 id` and `2 id + 1`, and the connection reaches its RC
//! engine by locking its QP, one member at a time under the connection's
//! lock. Also the member record, the ring of members that may have something
//! to send, and the members whose QP entered the error state during a call
//! (closed once it returns). `peer` holds the connection and its tables.

use super::*;
use crate::ffi::rdma::QpState;
use crate::ffi::sync::BhGuard;
use crate::proto::conn::{
    App, ConnError, Event, MemberOut, MemberRx, MsgInfo, Placement, Refuse, Scope, Unreadable,
};
use crate::proto::ident::Ident;
use crate::proto::rc::Bound;
use crate::proto::stream::Stream;
use crate::proto::wire::{DropReason, Op};

/// One member as the connection knows it.
#[derive(Clone, Copy, Default)]
pub(super) struct Member {
    pub(super) qpn: u32,
    pub(super) peer: u32,
    /// The pair's key of this end's sending direction.
    pub(super) tx: Ident,
    /// The pair's key of the peer's sending direction.
    pub(super) rx: Ident,
    /// The other receiving key the peer may use until something was accepted
    /// (set at RTS: a peer that stays in RTR answers under its `rq_psn`'s key,
    /// as in a connection of one pair, [`Config::rx_alt`]).
    pub(super) rx_alt: Ident,
    /// The connection's epoch when the member joined.
    pub(super) joined: u32,
    /// Path MTU, bytes.
    pub(super) mtu: u16,
    /// Nothing of the member accepted yet.
    pub(super) fresh: bool,
    /// Something was sent under its `tx` key (it stays).
    pub(super) sent: bool,
    /// In the ready ring.
    pub(super) queued: bool,
    /// The path count it asks for ([`crate::proto::conn::PathWants`]).
    pub(super) paths: u8,
    /// Its QP's `(retry_cnt, rnr_retry)` since RTS: its streams fail by
    /// them ([`App::stream_retry_limits`]).
    pub(super) limits: Option<(u8, u8)>,
    /// Its engine awaited a READ or atomic response when the connection last
    /// released it: a hint, checked under its lock by [`App::awaiting`]
    /// (which clears it once the response is whole or the QP failed or left).
    pub(super) awaiting: bool,
}

/// Members that may have something to send, each at most once
/// ([`Member::queued`]): the connection asks them in turn and drops those
/// that have nothing, so an idle member costs nothing.
pub(super) struct Ready {
    pub(super) buf: KVVec<u16>,
    pub(super) head: usize,
    pub(super) len: usize,
}

impl Ready {
    pub(super) fn push(&mut self, members: &mut [Member], id: u16) {
        let cap = self.buf.len();
        let Some(m) = members.get_mut(usize::from(id)) else {
            return;
        };
        if m.queued || self.len >= cap {
            return;
        }
        if let Some(x) = self.buf.get_mut((self.head + self.len) % cap) {
            *x = id;
        }
        self.len += 1;
        m.queued = true;
    }

    fn front(&self) -> Option<u16> {
        (self.len > 0).then(|| self.buf.get(self.head).copied())?
    }

    fn pop(&mut self, members: &mut [Member]) {
        if let Some(id) = self.front() {
            if let Some(m) = members.get_mut(usize::from(id)) {
                m.queued = false;
            }
            self.head = (self.head + 1) % self.buf.len();
            self.len -= 1;
        }
    }

    /// The front member goes to the back (it sent; the others' turn).
    fn rotate(&mut self) {
        if let Some(id) = self.front() {
            let cap = self.buf.len();
            self.head = (self.head + 1) % cap;
            if let Some(x) = self.buf.get_mut((self.head + self.len - 1) % cap) {
                *x = id;
            }
        }
    }
}

/// Members whose QP entered the error state while the connection ran, whose
/// streams it closes once the call returns.
#[derive(Default)]
pub(super) struct Closing {
    pub(super) ids: [u16; 8],
    pub(super) n: usize,
    /// More than `ids` holds: every member is checked.
    pub(super) overflow: bool,
}

impl Closing {
    fn push(&mut self, id: u16) {
        if self.ids[..self.n].contains(&id) {
            return;
        }
        match self.ids.get_mut(self.n) {
            Some(x) => {
                *x = id;
                self.n += 1;
            }
            None => self.overflow = true,
        }
    }
}

/// Whether a member QP is in the error state with its streams still open
/// (the connection has yet to close them).
fn in_error_open(i: &mut Inner) -> bool {
    i.io.attr.state == QpState::Err && i.rc.stream(0).is_some_and(|s| !s.tx.closed)
}

/// Stream `s` of the connection: (member id, the member's stream).
pub(super) fn split(s: u16) -> (u16, u16) {
    (s / 2, s % 2)
}

/// The members of one connection as its application: stream `s` is member
/// `s / 2`'s engine stream `s % 2`, reached by locking that member's QP
/// (one at a time, held until another is needed or the call returns).
pub(super) struct Mux<'a> {
    pub(super) dev: &'a DevShared<Qp>,
    pub(super) qps: &'a [Option<Arc<Qp>>],
    pub(super) members: &'a mut [Member],
    pub(super) ready: &'a mut Ready,
    pub(super) closing: &'a mut Closing,
    /// The QPN and member id a received datagram was dispatched to.
    pub(super) arrived: Option<(u32, u16)>,
    pub(super) some: Option<u16>,
    pub(super) held: Option<(u16, BhGuard<'a, Inner>)>,
}

impl Drop for Mux<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

impl<'a> Mux<'a> {
    /// Unlocks the member held, noting it for [`Closing`] if it entered the
    /// error state with its streams open (or lost a completion to a full CQ,
    /// which puts it there: IBTA class G, the other members carry on).
    fn release(&mut self) {
        let Some((id, mut g)) = self.held.take() else {
            return;
        };
        let Some(Some(qp)) = self.qps.get(usize::from(id)) else {
            return;
        };
        let Inner { io, rc, .. } = &mut *g;
        let lost = rc.settle(&mut Glue { qp, io });
        if let Some(m) = self.members.get_mut(usize::from(id)) {
            m.awaiting = rc.awaiting();
        }
        if lost || in_error_open(&mut g) {
            self.closing.push(id);
        }
    }

    /// Member `id`'s QP and its locked state; it may have something to send
    /// after this (it goes in the ready ring).
    fn lock(&mut self, id: u16) -> Option<(&'a Qp, &mut Inner)> {
        let qps = self.qps;
        let qp: &'a Qp = qps.get(usize::from(id))?.as_ref()?;
        if self.held.as_ref().map(|h| h.0) != Some(id) {
            self.release();
            self.held = Some((id, qp.inner.lock()));
            self.ready.push(self.members, id);
        }
        let (_, g) = self.held.as_mut()?;
        Some((qp, &mut **g))
    }

    /// `f` on the engine of stream `s`'s member, with the member's stream.
    fn with<R>(
        &mut self,
        s: u16,
        f: impl FnOnce(&mut Bound<'_, RcTables, Glue<'_>>, u16) -> R,
    ) -> Option<R> {
        let (id, l) = split(s);
        let (qp, inner) = self.lock(id)?;
        let Inner { io, rc, .. } = inner;
        let mut env = Glue { qp, io };
        Some(f(&mut rc.bind(&mut env), l))
    }

    /// Whether member `id` is in the error state with its streams open.
    pub(super) fn in_error_open(&mut self, id: u16) -> bool {
        self.lock(id).is_some_and(|(_, i)| in_error_open(i))
    }

    fn member(&self, id: u16) -> Option<&Member> {
        self.qps.get(usize::from(id))?.as_ref()?;
        self.members.get(usize::from(id))
    }

    /// The member a datagram addressed to `dst` is for: the one it was
    /// dispatched to (by its QPN).
    fn addressee(&self, dst: u32) -> Option<u16> {
        self.arrived.filter(|a| a.0 == dst).map(|a| a.1)
    }

    fn mtu_of(&self, s: u16, m: &mut MsgInfo) {
        if let Some(x) = self.member(split(s).0) {
            m.mtu = x.mtu;
        }
    }
}

impl App for Mux<'_> {
    fn stream(&mut self, s: u16) -> Option<&mut Stream> {
        let (id, l) = split(s);
        self.lock(id)?.1.rc.stream(l)
    }

    /// The ready ring in turn: the front member's next message, if it has
    /// one (then it goes to the back), else it leaves the ring.
    fn ready_stream(&mut self) -> Option<(u16, MsgInfo)> {
        let mut n = self.ready.len;
        while n > 0 {
            n -= 1;
            let id = self.ready.front()?;
            match self.with(id * 2, |b, _| b.ready_stream()).flatten() {
                Some((l, mut m)) => {
                    self.ready.rotate();
                    let s = id * 2 + l;
                    self.mtu_of(s, &mut m);
                    return Some((s, m));
                }
                None => self.ready.pop(self.members),
            }
        }
        None
    }

    /// Each member's streams start from its own pair's keys
    /// ([`Self::member_rx`] switches them).
    fn restart_rx(&mut self, _id: Ident) {}

    fn message(&mut self, s: u16, msn: u32) -> Option<MsgInfo> {
        let mut m = self.with(s, |b, l| b.message(l, msn))??;
        self.mtu_of(s, &mut m);
        Some(m)
    }

    fn payload(&mut self, s: u16, msn: u32, off: u32, dst: &mut [u8]) -> Result<(), Unreadable> {
        self.with(s, |b, l| b.payload(l, msn, off, dst))
            .unwrap_or(Err(Unreadable::Local))
    }

    /// A member's wire stream 0 carries its requests, 1 its responses
    /// (transport.rst, C10).
    fn carries(&mut self, s: u16, op: Op) -> bool {
        self.with(s, |b, l| b.carries(l, op)).unwrap_or(false)
    }

    /// A member QP takes packets in RTR, RTS and SQD, and in the error state
    /// only while it lingers to deliver a refusal; otherwise it is closed
    /// (transport.rst, "Shared connections").
    fn place(&mut self, p: &Placement<'_>) -> Result<(), Refuse> {
        let (id, l) = split(p.stream);
        let (qp, inner) = self.lock(id).ok_or(Refuse::Closed)?;
        let Inner { io, rc, .. } = inner;
        if !io.takes_packets(rc.lingers()) {
            return Err(Refuse::Closed);
        }
        let mut env = Glue { qp, io };
        rc.bind(&mut env).place(&Placement { stream: l, ..*p })
    }

    fn complete(&mut self, s: u16, msn: u32) {
        self.with(s, |b, l| b.complete(l, msn));
    }

    fn completion_lost(&mut self, s: u16) -> bool {
        self.with(s, |b, l| b.completion_lost(l)).unwrap_or(false)
    }

    fn stream_retry_limits(&mut self, s: u16) -> Option<(u8, u8)> {
        self.members.get(usize::from(split(s).0))?.limits
    }

    /// The request stream of the first member from `from` on whose engine
    /// awaits a response: those marked at their last release
    /// ([`Member::awaiting`]) are asked under their lock, and the mark of one
    /// that no longer does (or left) is cleared. Asked once per local ACK
    /// timer tick, not per packet.
    fn awaiting(&mut self, from: u16) -> Option<u16> {
        let first = usize::from(split(from.saturating_add(1)).0);
        for id in first..self.members.len() {
            if !self.members.get(id).is_some_and(|m| m.awaiting) {
                continue;
            }
            let id = u16::try_from(id).ok()?;
            if self.lock(id).is_some_and(|(_, i)| i.rc.awaiting()) {
                return id.checked_mul(2);
            }
            if let Some(m) = self.members.get_mut(usize::from(id)) {
                m.awaiting = false;
            }
        }
        None
    }

    fn acked(&mut self, s: u16, msn: u32) {
        self.with(s, |b, l| b.acked(l, msn));
    }

    fn refusal(&mut self, s: u16, msn: u32) -> Option<Refuse> {
        self.with(s, |b, l| b.refusal(l, msn))?
    }

    fn refused(&mut self, s: u16, msn: u32, e: ConnError) {
        self.with(s, |b, l| b.refused(l, msn, e));
    }

    /// One member's failure: its QP enters the error state and its two
    /// streams close; the connection and the other members carry on.
    fn stream_error(&mut self, s: u16, e: ConnError) -> Scope {
        self.with(s, |b, _| b.error(e));
        Scope::Streams {
            first: s & !1,
            n: 2,
        }
    }

    fn error(&mut self, e: ConnError) {
        for id in 0..self.qps.len() as u16 {
            self.with(id * 2, |b, _| b.error(e));
        }
    }

    fn event(&mut self, e: Event) {
        let id = match e {
            Event::Retransmit { stream, .. } => Some(split(stream).0),
            _ => self.arrived.map(|a| a.1).or(self.some),
        };
        let qpn = id.and_then(|i| self.member(i)).map_or(0, |m| m.qpn);
        conn_event(self.dev, qpn, e);
    }

    fn member_rx(&mut self, dst: u32, token: u32) -> Result<MemberRx, DropReason> {
        let id = self.addressee(dst).ok_or(DropReason::WrongConnection)?;
        let m = *self.member(id).ok_or(DropReason::WrongConnection)?;
        if token != m.rx.token() {
            // The peer's other key, while nothing was accepted: the member's
            // receiving halves start over from it.
            let alt = m.rx_alt;
            if !(m.fresh && alt != Ident::DEFAULT && token == alt.token()) {
                return Err(DropReason::BadToken);
            }
            if let Some(x) = self.members.get_mut(usize::from(id)) {
                x.rx = alt;
                x.rx_alt = Ident::DEFAULT;
            }
            self.with(id * 2, |b, _| b.restart_rx(alt));
        }
        Ok(MemberRx {
            id,
            fresh: m.fresh,
            joined: m.joined,
        })
    }

    fn member_accepted(&mut self, id: u16) {
        if let Some(m) = self.members.get_mut(usize::from(id)) {
            m.fresh = false;
            m.rx_alt = Ident::DEFAULT;
        }
    }

    fn member_tx(&mut self, dst: u32) -> Option<(u16, u32)> {
        let id = self.addressee(dst)?;
        Some((id, self.member(id)?.tx.token()))
    }

    fn member_out(&mut self, id: u16) -> Option<MemberOut> {
        let m = self.member(id)?;
        Some(MemberOut {
            to: m.peer,
            tx_token: m.tx.token(),
            rx_token: m.rx.token(),
        })
    }

    /// A member for a PROBE (or an ACK whose member left): its sending key
    /// is used, so it stays (`sent`).
    fn any_member(&mut self) -> Option<u16> {
        let id = self
            .arrived
            .map(|a| a.1)
            .filter(|i| self.member(*i).is_some())
            .or(self.some)?;
        self.members.get_mut(usize::from(id))?.sent = true;
        Some(id)
    }

    fn stream_in(&mut self, id: u16, wire: u16) -> Option<u16> {
        (wire < 2).then(|| id * 2 + wire)
    }

    fn stream_out(&mut self, s: u16) -> Option<(u16, u16)> {
        let (id, l) = split(s);
        self.member(id)?;
        self.members.get_mut(usize::from(id))?.sent = true;
        Some((id, l))
    }
}
