//! Shared connections (Documentation/transport.rst, "Shared connections"): one
//! connection carries the streams of several QP pairs, its *members*. A datagram is
//! addressed to one member (`dst_conn`: the receiver's QPN of the pair) and carries that
//! pair's token, so every datagram proves knowledge of one pair's set-up, and no
//! connection-wide key or stream numbering has to be agreed: a member's streams are 0
//! (requests) and 1 (responses) on the wire, as in a connection of its own. The paths,
//! their sequences and the congestion state are the connection's.
//!
//! The receiver takes its paths' sequences from the sender's floors: a path is
//! *unsynchronised* until the first packet of the peer's current incarnation that passes
//! every check on it, whose floor becomes its cumulative PSN. A DATA or PROBE of another
//! incarnation is stale unless its member has had nothing accepted yet (a pair set up
//! after the peer's connection was: the peer's connection is new), and then it starts
//! the new incarnation: every path unsynchronised again.
//!
//! [`Config::shared`](super::Config::shared) turns this on; the application answers for
//! its members ([`App::member_rx`] and the others below). Without it a connection is
//! one QP pair's, addressed and keyed by its [`Config`](super::Config).

use super::super::path::PathRx;
use super::super::stream::RETRY_COUNTED;
use super::super::wire::DropReason;
use super::{App, ConnError, Connection, NO_STREAM};

/// A DATA or PROBE's addressee, as the application knows it ([`App::member_rx`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberRx {
    /// The member's index (the application's).
    pub id: u16,
    /// Nothing from this member was accepted yet ([`App::member_accepted`]).
    pub fresh: bool,
    /// The connection's [`Connection::epoch`] when the member joined.
    pub joined: u32,
}

/// Where a member's datagrams go: the peer's QPN of the pair and the tokens of the
/// pair's two directions ([`App::member_out`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberOut {
    /// The peer's QPN (`dst_conn` of what this end sends for the member).
    pub to: u32,
    /// The token of this end's sending direction (its DATA and PROBE).
    pub tx_token: u32,
    /// The token of the peer's sending direction (ACKs for the peer's data).
    pub rx_token: u32,
}

impl<const P: usize, const W: usize, const N: usize> Connection<P, W, N> {
    /// Receiver, shared connection: the addressee of a DATA or PROBE (`dst`, `token`)
    /// and whether its incarnation `inc` is acceptable (changes nothing).
    pub(super) fn member_check<A: App>(
        &self,
        dst: u32,
        token: u32,
        inc: u16,
        app: &mut A,
    ) -> Result<MemberRx, DropReason> {
        let m = app.member_rx(dst, token)?;
        // Only a member set up since the peer's current incarnation was taken, which
        // has had nothing accepted, proves a renewal: an older one's datagram of
        // another incarnation is of the past, even if nothing of it was accepted (its
        // packets all lost or held), and must not bring the past back.
        let renews = m.fresh && m.joined >= self.stats.resyncs;
        if self.peer_inc != 0 && inc != self.peer_inc && !renews {
            return Err(DropReason::StaleIncarnation);
        }
        Ok(m)
    }

    /// Receiver: whether path `p`'s window admits a packet of incarnation `inc`, PSN
    /// `psn`, floor `floor` ([`PathRx::admits`]): the window as it stands, or, if the
    /// path is unsynchronised or the packet starts a new incarnation (a shared
    /// connection), a fresh one at the floor. `None`: no such path.
    pub(super) fn path_admits(&self, p: usize, inc: u16, psn: u32, floor: u32) -> Option<bool> {
        if self.cfg.shared && (self.peer_inc != inc || self.unsynced & (1u64 << (p % 64)) != 0) {
            let fresh = PathRx {
                cum: floor,
                ..PathRx::EMPTY
            };
            return Some(fresh.admits(psn, floor));
        }
        Some(self.rx.get(p)?.admits(psn, floor))
    }

    /// Receiver: a packet of incarnation `inc` on path `p`, floor `floor`, passed every
    /// check: a new incarnation unsynchronises every path; path `p` takes the floor if
    /// unsynchronised. (Not shared: the incarnation is just noted.)
    pub(super) fn adopt(&mut self, p: usize, inc: u16, floor: u32) {
        if !self.cfg.shared {
            self.peer_inc = inc;
            return;
        }
        if inc != self.peer_inc {
            self.peer_inc = inc;
            self.unsynced = u64::MAX;
            self.stats.resyncs = self.stats.resyncs.wrapping_add(1);
        }
        let bit = 1u64 << (p % 64);
        if self.unsynced & bit != 0 {
            self.unsynced &= !bit;
            if let Some(r) = self.rx.get_mut(p) {
                *r = PathRx {
                    cum: floor,
                    ..PathRx::EMPTY
                };
            }
        }
    }
}

impl<const P: usize, const W: usize, const N: usize> Connection<P, W, N> {
    /// Receiver: member `id`'s packet on path `p` passed every check: it is no longer
    /// fresh, and the path's ACKs go to its pair.
    pub(super) fn took<A: App>(&mut self, p: usize, id: u16, app: &mut A) {
        app.member_accepted(id);
        if let Some(m) = self.ack_member.get_mut(p) {
            *m = id;
        }
    }

    /// Where an ACK of path `p` goes, and with which token: the pair of the path's
    /// newest accepted packet, or of the stream `named` (a NAK naming a message, which
    /// must reach that pair), or any member left.
    pub(super) fn ack_to<A: App>(
        &self,
        p: usize,
        named: Option<u16>,
        app: &mut A,
    ) -> Option<(u32, u32)> {
        if !self.cfg.shared {
            return Some((self.cfg.peer_conn, self.cfg.rx_ident.token()));
        }
        let id = match named {
            Some(s) => app.stream_out(s)?.0,
            None => *self.ack_member.get(p)?,
        };
        let out = app
            .member_out(id)
            .or_else(|| app.any_member().and_then(|m| app.member_out(m)))?;
        Some((out.to, out.rx_token))
    }

    /// Where a DATA of stream `s` goes: (`dst_conn`, token, wire stream).
    pub(super) fn data_to<A: App>(&self, s: u16, app: &mut A) -> Option<(u32, u32, u16)> {
        if !self.cfg.shared {
            return Some((self.cfg.peer_conn, self.cfg.tx_ident.token(), s));
        }
        let (id, wire) = app.stream_out(s)?;
        let out = app.member_out(id)?;
        Some((out.to, out.tx_token, wire))
    }

    /// Where a PROBE goes: (`dst_conn`, token).
    pub(super) fn probe_to<A: App>(&self, app: &mut A) -> Option<(u32, u32)> {
        if !self.cfg.shared {
            return Some((self.cfg.peer_conn, self.cfg.tx_ident.token()));
        }
        let out = app.any_member().and_then(|m| app.member_out(m))?;
        Some((out.to, out.tx_token))
    }

    /// Sender: an ACK addressed to `dst` with `token`: the member it is for (`None`:
    /// not shared), or why it is dropped.
    pub(super) fn ack_from<A: App>(
        &self,
        dst: u32,
        token: u32,
        app: &mut A,
    ) -> Result<Option<u16>, DropReason> {
        if !self.cfg.shared {
            if token != self.cfg.tx_ident.token() {
                return Err(DropReason::BadToken);
            }
            return Ok(None);
        }
        let (id, tx_token) = app.member_tx(dst).ok_or(DropReason::WrongConnection)?;
        if token != tx_token {
            return Err(DropReason::BadToken);
        }
        Ok(Some(id))
    }
}

impl<const P: usize, const W: usize, const N: usize> Connection<P, W, N> {
    /// Shared connections, a tick of the local ACK timer (every `ack_timeout_ns` while
    /// anything is outstanding or awaits a response): every stream with a packet
    /// outstanding or a request awaiting its response ([`App::awaiting`]), not held by
    /// an RNR refusal (which has its own count), counts the tick, once. A stream's
    /// count starts over when the peer acknowledges any of its packets
    /// ([`crate::stream::StreamTx::on_acked`]) or, for a stream awaiting a response,
    /// when a packet of the response arrives (its owner clears the count), so its
    /// first tick after that only arms it: a retry is a tick that finds it without
    /// progress since the previous tick, a whole timeout or more (IBTA 9.7.6.1.3: the
    /// timer expires "without an acknowledgement"; a stream acknowledged just before a
    /// tick is not late). Each retry counts in `ack_timeouts`. A stream past its QP's
    /// `retry_cnt` retries fails alone with [`ConnError::RetryExceeded`] (its owner's
    /// QP, as IBTA 9.7.6.1.3 has it for a QP of its own), while the others and the
    /// connection carry on. So a stream fails between `retry_cnt + 1` and
    /// `retry_cnt + 2` timeouts after it first had a packet outstanding or a response
    /// due since its last progress (plus any ticks it spent held by RNR): never earlier
    /// than a QP of its own connection would (Documentation/transport.rst, "Retries are
    /// each stream's").
    pub(super) fn stream_retries<A: App>(&mut self, app: &mut A) {
        let mut over = NO_STREAM;
        let mut retries = 0u32;
        // A stream has a record per packet in flight: the first record counts it and
        // marks it (`RETRY_COUNTED`), the others skip it, and so does the walk over
        // the streams awaiting responses; a second pass clears the marks, so every
        // tick starts unmarked.
        for (w, bit) in self.flight.in_use() {
            if let Some(s) = self.flight.stream_of(w, bit) {
                self.count_tick(s, &mut retries, &mut over, app);
            }
        }
        let mut from = 0;
        while let Some(s) = next_awaiting(app, &mut from) {
            self.count_tick(s, &mut retries, &mut over, app);
        }
        for (w, bit) in self.flight.in_use() {
            if let Some(st) = self.flight.stream_of(w, bit).and_then(|s| app.stream(s)) {
                st.tx.retries &= !RETRY_COUNTED;
            }
        }
        let mut from = 0;
        while let Some(s) = next_awaiting(app, &mut from) {
            if let Some(st) = app.stream(s) {
                st.tx.retries &= !RETRY_COUNTED;
            }
        }
        self.stats.ack_timeouts = self.stats.ack_timeouts.wrapping_add(retries);
        // Fail the streams past the limit, one at a time (a failure closes streams
        // and changes the records).
        // At most one failure per record (an application whose scope leaves the
        // stream open cannot make this spin; any left fail at the next tick).
        let mut budget = N;
        while over != NO_STREAM && budget > 0 && self.state == super::ConnState::Open {
            budget -= 1;
            self.fail_stream(over, ConnError::RetryExceeded, app);
            over = self.stream_past_limit(app);
        }
    }

    /// One tick of the local ACK timer for stream `s` ([`Self::stream_retries`]),
    /// unless it was counted in this tick already: `retries` counts a retry, `over`
    /// takes the first stream past its limit.
    fn count_tick<A: App>(&mut self, s: u16, retries: &mut u32, over: &mut u16, app: &mut A) {
        let Some(st) = app.stream(s) else {
            return;
        };
        let tx = &mut st.tx;
        if tx.closed || tx.rnr_held > 0 || tx.retries & RETRY_COUNTED != 0 {
            return;
        }
        // Ticks without progress: the first arms, each later one is a retry.
        let n = (tx.retries & !RETRY_COUNTED)
            .saturating_add(1)
            .min(!RETRY_COUNTED);
        tx.retries = RETRY_COUNTED | n;
        if n >= 2 {
            *retries = retries.saturating_add(1);
        }
        if *over == NO_STREAM {
            let limit = app
                .stream_retry_limits(s)
                .map_or(self.cfg.retry_cnt, |(c, _)| c);
            if retries_past(n, limit) {
                *over = s;
            }
        }
    }

    /// A stream with a packet outstanding or a response due, still open and past its
    /// retry limit; [`NO_STREAM`] if none.
    fn stream_past_limit<A: App>(&self, app: &mut A) -> u16 {
        let past = |s: u16, app: &mut A| {
            let limit = app
                .stream_retry_limits(s)
                .map_or(self.cfg.retry_cnt, |(c, _)| c);
            app.stream(s)
                .is_some_and(|st| !st.tx.closed && retries_past(st.tx.retries, limit))
        };
        for (w, bit) in self.flight.in_use() {
            if let Some(s) = self.flight.stream_of(w, bit) {
                if past(s, app) {
                    return s;
                }
            }
        }
        let mut from = 0;
        while let Some(s) = next_awaiting(app, &mut from) {
            if past(s, app) {
                return s;
            }
        }
        NO_STREAM
    }
}

/// The next stream awaiting a response ([`App::awaiting`]) numbered `*from` or above,
/// `*from` moving past it; `None` once there is none (or the application answers out of
/// order, which would not end).
fn next_awaiting<A: App>(app: &mut A, from: &mut u32) -> Option<u16> {
    let f = u16::try_from(*from).ok()?;
    let s = app.awaiting(f).filter(|&s| s >= f)?;
    *from = u32::from(s) + 1;
    Some(s)
}

/// Whether a stream that counted `ticks` local ACK timer ticks without progress (the
/// first of which only armed it: [`Connection::stream_retries`]) is past `retry_cnt`
/// retries.
fn retries_past(ticks: u8, retry_cnt: u8) -> bool {
    ticks.saturating_sub(1) > retry_cnt
}
