//! The receiver half: [`Connection::handle_packet`] dispatches a datagram by its packet
//! type; data is checked against the path and stream windows and placed through
//! [`App::place`] (a refusal queues an RNR report or a NAK), probes are answered. ACKs
//! are the sender's business ([`super::ack`]).

use super::super::bytes::Bytes;
use super::super::path::PathRx;
use super::super::sack::{seq_lt, SACK_BITS};
use super::super::stream::{RxVerdict, Stream};
use super::super::time::Instant;
use super::super::wire::{
    data_in_pieces, decode, decode_data_pieces, decode_probe_packet, decode_ride, is_shared,
    peek_type, DataHeader, DropReason, Op, PacketType, ProbeHeader, DF_ACKREQ, DF_IMM, DF_LAST,
    DF_RETH, DF_SE,
};
use super::timers::Timer;
use super::RX_BATCH;
use super::{
    App, ConnError, ConnState, Connection, Placement, Refusal, RefusalKind, Refuse, Rnr, RxEvent,
    MAX_PATHS, NO_STREAM,
};

impl<const P: usize, const W: usize, const N: usize> Connection<P, W, N> {
    /// Processes one received datagram (the UDP payload). `ce` is whether the IP header
    /// carried ECN CE. Malformed or unacceptable packets return the reason to count.
    pub fn handle_packet<A: App>(
        &mut self,
        now: Instant,
        buf: &[u8],
        ce: bool,
        app: &mut A,
    ) -> Result<RxEvent, DropReason> {
        self.handle_pieces(now, Bytes::from(buf), ce, app)
    }

    /// [`Self::handle_packet`] of a datagram the host hands over in pieces ([`Bytes`]),
    /// so that a DATA packet's payload is copied once, from where the network device
    /// put it into its final memory. Only DATA whose first piece holds its header
    /// ([`data_in_pieces`]) may come in pieces; any other datagram with a second piece
    /// is `Truncated`. The verdicts are those of the datagram whole.
    pub fn handle_pieces<A: App>(
        &mut self,
        now: Instant,
        dg: Bytes<'_>,
        ce: bool,
        app: &mut A,
    ) -> Result<RxEvent, DropReason> {
        let r = self.take_pieces(now, dg, ce, app);
        if r.is_ok() {
            self.rx_batch = self.rx_batch.saturating_add(1);
        }
        r
    }

    /// Whether the host should ask what to send now rather than at the end of its
    /// receive batch: it took [`RX_BATCH`] datagrams since it last called
    /// [`Self::poll_transmit`]. A host that hands the connection a batch of datagrams
    /// before it polls (the kernel: what one NAPI poll delivered) answers the batch with
    /// one ACK datagram; this bounds how long the first of them waits for it
    /// (Documentation/transport.rst, "Receiving", step 9).
    pub fn batch_full(&self) -> bool {
        self.rx_batch >= RX_BATCH
    }

    /// [`Self::handle_pieces`] but for the batch count.
    fn take_pieces<A: App>(
        &mut self,
        now: Instant,
        dg: Bytes<'_>,
        ce: bool,
        app: &mut A,
    ) -> Result<RxEvent, DropReason> {
        let buf = dg.head();
        if buf.len() != dg.len() && !data_in_pieces(buf) {
            return Err(DropReason::Truncated);
        }
        if self.state == ConnState::Error(ConnError::Aborted) {
            return Err(DropReason::Closed);
        }
        // Dispatch on the type byte so each header is decoded in place (same validation
        // and drop reasons as `wire::decode`).
        // The mode is checked once the header is known to be well formed, before
        // anything of it is looked up (`Documentation/transport.rst`, H16).
        match peek_type(buf) {
            Some(PacketType::Data) => {
                let (h, payload) = decode_data_pieces(dg)?;
                self.mode_check(buf)?;
                let due = self.reports.ack_pending;
                let r = self.on_data(now, &h, payload, ce, app);
                self.lead_ack(h.path, due);
                r
            }
            Some(PacketType::Ack) => {
                let (acks, data) = decode_ride(buf)?;
                // A DATA riding after the ACKs is decoded before anything of the
                // datagram is applied (`Documentation/transport.rst`, "ACKs riding on
                // DATA").
                let data = match data {
                    Some(d) => Some(decode_data_pieces(Bytes::from(d))?),
                    None => None,
                };
                self.mode_check(buf)?;
                // Each ACK of a bundle is judged as if it had come alone: one refused
                // changes nothing, the others take effect; the datagram counts as
                // dropped under the first refused one's reason, but for the `Closed`
                // of the ACKs after one that failed the connection (a NAK)
                // (`Documentation/transport.rst`, "ACK bundles").
                let open = !matches!(self.state, ConnState::Error(_));
                let mut r = Ok(RxEvent::Ack);
                for a in acks {
                    let one = self.on_ack(now, &a, app);
                    let closed_here = open && one == Err(DropReason::Closed);
                    if r.is_ok() && !closed_here {
                        r = one;
                    }
                }
                // The DATA last, judged as if it had come alone; the datagram's
                // verdict is the first refused record's, the DATA's if none was.
                if let Some((h, payload)) = data {
                    let due = self.reports.ack_pending;
                    let one = self.on_data(now, &h, payload, ce, app);
                    self.lead_ack(h.path, due);
                    let closed_here = open && one == Err(DropReason::Closed);
                    if r.is_ok() && !closed_here {
                        r = one;
                    }
                }
                r
            }
            Some(PacketType::Probe) => {
                let pr = decode_probe_packet(buf)?;
                self.mode_check(buf)?;
                let due = self.reports.ack_pending;
                let r = self.on_probe(&pr, app);
                self.lead_ack(pr.path, due);
                r
            }
            // Too short, DATAGRAM (not a connection's) or unknown: `decode` says why.
            Some(PacketType::Datagram) | None => match decode(buf) {
                Err(e) => Err(e),
                Ok(_) => Err(DropReason::UnknownType),
            },
        }
    }

    /// If the packet just handled, on `path`, made its path's ACK due (it was not
    /// before, `due`), the ACK datagram goes out on that path's port
    /// ([`Connection::send_ack`]).
    fn lead_ack(&mut self, path: u8, due: u64) {
        let bit = 1u64.checked_shl(u32::from(path)).unwrap_or(0);
        if self.reports.ack_pending & !due & bit != 0 {
            self.reports.ack_lead = path;
        }
    }

    /// A datagram of the other mode (its [`TYPE_SHARED`](super::super::wire::TYPE_SHARED) bit against
    /// [`Config::shared`](super::Config::shared)) is the peer's, but its paths,
    /// sequences and addressing mean something else here: drop it, whatever it says.
    fn mode_check(&self, buf: &[u8]) -> Result<(), DropReason> {
        if is_shared(buf) == self.cfg.shared {
            Ok(())
        } else {
            Err(DropReason::ModeMismatch)
        }
    }

    /// The receive-side path of a data packet or probe: any path the connection has
    /// room for (`P`, at most 64), not only the `paths` it sends on, so a peer
    /// configured with more paths than this end is still understood.
    pub(super) fn rx_path_check(&self, conn: u32, path: u8) -> Result<usize, DropReason> {
        self.path_check(conn, path, P.min(MAX_PATHS))
    }

    /// The path of an ACK: one this end sends on (`paths`), or did before
    /// [`Connection::set_paths`] retired it.
    pub(super) fn tx_path_check(&self, conn: u32, path: u8) -> Result<usize, DropReason> {
        let sent = self.cfg.paths.max(self.sent_paths);
        self.path_check(conn, path, usize::from(sent).min(P))
    }

    fn path_check(&self, conn: u32, path: u8, paths: usize) -> Result<usize, DropReason> {
        // A shared connection's datagrams name a member, which the application
        // checks ([`super::members`]).
        if !self.cfg.shared && conn != self.cfg.local_conn {
            return Err(DropReason::WrongConnection);
        }
        let p = usize::from(path);
        if p >= paths {
            return Err(DropReason::BadPath);
        }
        Ok(p)
    }

    pub(super) fn on_probe<A: App>(
        &mut self,
        h: &ProbeHeader,
        app: &mut A,
    ) -> Result<RxEvent, DropReason> {
        let p = self.rx_path_check(h.dst_conn, h.path)?;
        if self.cfg.shared {
            let m = self.member_check(h.dst_conn, h.token, h.inc, app)?;
            let admits = self.path_admits(p, h.inc, h.psn, h.floor);
            if !admits.ok_or(DropReason::BadPath)? || h.psn.wrapping_sub(h.floor) > SACK_BITS {
                return Err(DropReason::PsnOutOfWindow);
            }
            self.adopt(p, h.inc, h.floor);
            self.took(p, m.id, app);
            self.note_ingress(p);
            let rx = self.rx.get_mut(p).ok_or(DropReason::BadPath)?;
            rx.apply_floor(h.floor);
            rx.echo = h.stamp;
            self.reports.ack_pending |= 1u64 << p;
            return Ok(RxEvent::Probe);
        }
        let key = self.rx_key_for(h.token).ok_or(DropReason::BadToken)?;
        self.inc_check(h.inc)?;
        // A probe's PSN is its path's next one: within 256 of the floor.
        let fresh = PathRx {
            cum: key.isn(p as u8),
            ..PathRx::EMPTY
        };
        let rx = self
            .rx
            .get(p)
            .filter(|_| key == self.cfg.rx_ident)
            .unwrap_or(&fresh);
        if !rx.admits(h.psn, h.floor) || h.psn.wrapping_sub(h.floor) > SACK_BITS {
            return Err(DropReason::PsnOutOfWindow);
        }
        self.settle_rx_key(key, h.inc, app);
        self.note_ingress(p);
        let rx = self.rx.get_mut(p).ok_or(DropReason::BadPath)?;
        rx.apply_floor(h.floor);
        rx.echo = h.stamp;
        self.reports.ack_pending |= 1u64 << p;
        Ok(RxEvent::Probe)
    }

    /// The verbs layer refused data packet `h` of path `p` (`r`; `next_msn`: its
    /// stream's next message to complete): queues what the peer must hear (an RNR
    /// report, a NAK, or a refusal held until its NAK is due) and returns the drop
    /// reason. The packet passed every check, and its floor (the sender's word that the
    /// path's PSNs below it are resolved) holds whatever becomes of it: it is applied,
    /// and nothing else changes. Otherwise a path whose packets are all refused (an RNR
    /// wait) keeps `cum` where the refusals began, and once the sender has resent more
    /// than 256 PSNs its ACKs, RNR reports included, fall behind the sender's floor and
    /// are dropped (`ack_out_of_range`): each refused packet then waited out a path
    /// timeout.
    fn refused(
        &mut self,
        p: usize,
        h: &DataHeader,
        s: u16,
        r: Refuse,
        next_msn: u32,
    ) -> DropReason {
        let reason = match r {
            Refuse::Rnr(Rnr(t)) => {
                self.reports.ack_pending |= 1u64 << p;
                self.reports.rnr = Some(Refusal {
                    path: p as u8,
                    kind: RefusalKind::Rnr { timer: t },
                    psn: h.psn,
                    stream: NO_STREAM,
                    msn: 0,
                });
                DropReason::ReceiverNotReady
            }
            // A NAK acknowledges every earlier message of the stream (IBTA 9.7.5.2.4):
            // it waits until they are complete. Before, the packet is dropped as it
            // came (held) and the sender resends it. A refusal not to be reported
            // before the earlier messages of its stream complete (or the responses
            // owed are acknowledged) is held too; the NAK goes as soon as it is due
            // ([`Self::release`]).
            Refuse::Access | Refuse::Invalid if h.msn == next_msn => {
                self.reports.ack_pending |= 1u64 << p;
                let kind = if r == Refuse::Invalid {
                    RefusalKind::Invalid
                } else {
                    RefusalKind::Access
                };
                self.reports.nak = Some(Refusal {
                    path: p as u8,
                    kind,
                    psn: h.psn,
                    stream: s,
                    msn: next_msn,
                });
                DropReason::Refused
            }
            Refuse::Access | Refuse::Invalid | Refuse::Held => {
                self.hold(p, h.psn, s);
                DropReason::Refused
            }
            // Reported at once, naming the packet's own message (a NAK already due
            // keeps its slot; the next packet of the stream reports it then).
            Refuse::Closed => {
                self.reports.ack_pending |= 1u64 << p;
                if !matches!(self.reports.nak, Some(n) if n.kind != RefusalKind::Held) {
                    self.reports.nak = Some(Refusal {
                        path: p as u8,
                        kind: RefusalKind::Closed,
                        psn: h.psn,
                        stream: s,
                        msn: h.msn,
                    });
                }
                DropReason::Refused
            }
        };
        // The report must reach the sender, which takes only its own incarnation (a
        // shared connection: the path synchronised on it, as for an accepted packet).
        self.adopt(p, h.inc, h.floor);
        if let Some(rx) = self.rx.get_mut(p) {
            rx.apply_floor(h.floor);
        }
        reason
    }

    /// Keeps a refusal held on `stream` (the packet `psn` of path `p`) in the NAK slot,
    /// unless a NAK waits there to be sent.
    fn hold(&mut self, p: usize, psn: u32, stream: u16) {
        if !matches!(self.reports.nak, Some(n) if n.kind != RefusalKind::Held) {
            self.reports.nak = Some(Refusal {
                path: p as u8,
                kind: RefusalKind::Held,
                psn,
                stream,
                msn: 0,
            });
        }
    }

    /// A held refusal becomes a NAK (on the path and PSN it was last seen on) once the
    /// application says it is due ([`App::refusal`]): its message is the stream's next
    /// to complete and nothing else holds it back. Checked after anything that may
    /// complete a message or acknowledge a response.
    pub(super) fn release<A: App>(&mut self, app: &mut A) {
        let Some(h) = self.reports.nak.filter(|n| n.kind == RefusalKind::Held) else {
            return;
        };
        let Some(next) = app.stream(h.stream).map(|s| s.rx.next_msn) else {
            return;
        };
        let kind = match app.refusal(h.stream, next) {
            Some(Refuse::Access) => RefusalKind::Access,
            Some(Refuse::Invalid) => RefusalKind::Invalid,
            _ => return,
        };
        self.reports.nak = Some(Refusal {
            kind,
            msn: next,
            ..h
        });
        self.reports.ack_pending |= 1u64 << (h.path % 64);
    }

    /// A late original arrived on path `p` ([`super::super::stream::StreamRx::late`]):
    /// an arrival the path reports (`acked`, so the sender hears of a packet it had
    /// given up on) and a CE mark it echoes at once, nothing else: no floor, no mark, no
    /// timestamp echo (an RTT sample tens of ms stale would inflate the path's RTO), no
    /// placement (Documentation/transport.rst, "Receiver operation", step 4).
    fn late_original(&mut self, now: Instant, p: usize, ce: bool) {
        self.stats.dup_rx = self.stats.dup_rx.wrapping_add(1);
        let Some(rx) = self.rx.get_mut(p) else {
            return;
        };
        rx.acked = rx.acked.saturating_add(1);
        if ce {
            rx.ce = rx.ce.saturating_add(1);
            self.reports.ack_pending |= 1u64 << p;
        } else if !self.timers.is_armed(Timer::DelayedAck) {
            let at = now.add_nanos(u64::from(self.cfg.ack_delay_ns));
            self.timers.set(Timer::DelayedAck, at);
        }
    }

    /// A DATA packet. Every check comes before any state changes (in this order, which
    /// decides the drop reason counted): connection and path, token, payload length,
    /// stream and an op it carries ([`App::carries`]), the path window
    /// ([`super::super::path::PathRx::admits`]), the stream window; then the
    /// application places it or refuses it, and a refused packet
    /// changes no path or stream state but its path's floor ([`Self::refused`]); like
    /// an accepted one it settles the receiving key ([`super::Config::rx_alt`] closes)
    /// and the peer's incarnation: it carried the right token and fit the windows.
    pub(super) fn on_data<A: App>(
        &mut self,
        now: Instant,
        h: &DataHeader,
        payload: Bytes<'_>,
        ce: bool,
        app: &mut A,
    ) -> Result<RxEvent, DropReason> {
        let p = self.rx_path_check(h.dst_conn, h.path)?;
        // Who the packet is from: the connection's own peer under one of its keys, or
        // (shared) a member, whose wire stream maps to one of the connection's.
        let (key, member) = if self.cfg.shared {
            let m = self.member_check(h.dst_conn, h.token, h.inc, app)?;
            (self.cfg.rx_ident, Some(m.id))
        } else {
            let key = self.rx_key_for(h.token).ok_or(DropReason::BadToken)?;
            self.inc_check(h.inc)?;
            (key, None)
        };
        if h.payload_len > self.cfg.mtu.max(self.cfg.rx_mtu) {
            return Err(DropReason::BadOffset);
        }
        let s = match member {
            Some(id) => app.stream_in(id, h.stream).unwrap_or(NO_STREAM),
            None => h.stream,
        };
        let Some(st) = app.stream(s).filter(|_| s != NO_STREAM) else {
            return Err(DropReason::StreamOutOfRange);
        };
        let mut srx = st.rx;
        // (The header check took only ops 0-10.)
        let op = Op::from_u8(h.op).unwrap_or(Op::Send);
        if !app.carries(s, op) {
            return Err(DropReason::UnknownOp);
        }
        if member.is_none() && key != self.cfg.rx_ident {
            // The alternative key (nothing received yet): the windows it starts.
            let fresh = PathRx {
                cum: key.isn(p as u8),
                ..PathRx::EMPTY
            };
            if !fresh.admits(h.psn, h.floor) {
                return Err(DropReason::PsnOutOfWindow);
            }
            let mut fresh = Stream::EMPTY;
            fresh.restart_rx(key, s);
            if fresh.rx.check(h.ssn) == RxVerdict::OutOfWindow {
                return Err(DropReason::SsnOutOfWindow);
            }
            self.settle_rx_key(key, h.inc, app);
            srx = fresh.rx;
        }
        if !self
            .path_admits(p, h.inc, h.psn, h.floor)
            .ok_or(DropReason::BadPath)?
        {
            return Err(DropReason::PsnOutOfWindow);
        }
        let verdict = srx.check(h.ssn);
        if verdict == RxVerdict::OutOfWindow {
            // A late original (Documentation/transport.rst, "Receiver operation",
            // step 4): under the settled key, its SSN out of the stream window behind
            // it by at most 2^16, its PSN behind the path's cumulative PSN (the
            // sender's floor passed it).
            let settled = member.is_some() || key == self.cfg.rx_ident;
            let behind = self.rx.get(p).is_some_and(|r| seq_lt(h.psn, r.cum));
            if settled && behind && srx.late(h.ssn) {
                self.late_original(now, p, ce);
                return Ok(RxEvent::Duplicate);
            }
            return Err(DropReason::SsnOutOfWindow);
        }
        let last = h.flags & DF_LAST != 0;
        let mut lost = None;
        let mut completed = false;
        let ev = if verdict == RxVerdict::New {
            let pl = Placement {
                stream: s,
                msn: h.msn,
                offset: h.offset,
                msg_len: h.msg_len,
                op,
                reth: (h.flags & DF_RETH != 0).then_some(h.reth),
                imm: (h.flags & DF_IMM != 0).then_some(h.imm),
                tag: h.tag,
                solicited: h.flags & DF_SE != 0,
                payload,
            };
            if let Err(r) = app.place(&pl) {
                let next_msn = srx.next_msn;
                // It passed every check: who sent it is settled as for an accepted
                // packet (the member's pair; the receiving key, closing the
                // alternative, Documentation/transport.rst, "Derivation").
                match member {
                    Some(id) => self.took(p, id, app),
                    None => self.settle_rx_key(key, h.inc, app),
                }
                return Err(self.refused(p, h, s, r, next_msn));
            }
            let done = srx.accept(h.ssn, last);
            if let Some(st) = app.stream(s) {
                st.rx = srx;
            }
            for msn in done.msns() {
                completed = true;
                app.complete(s, msn);
                // Shared: a completion the member's QP could not write is NAKed
                // (closed), so that the sender fails that message and does not take
                // this packet's ACK for it (Documentation/transport.rst, "Shared
                // connections"). The first such message of the packet is named.
                if self.cfg.shared && lost.is_none() && app.completion_lost(s) {
                    lost = Some(msn);
                }
            }
            RxEvent::Data
        } else {
            self.stats.dup_rx = self.stats.dup_rx.wrapping_add(1);
            RxEvent::Duplicate
        };
        match member {
            Some(id) => {
                self.adopt(p, h.inc, h.floor);
                self.took(p, id, app);
            }
            None => self.settle_rx_key(key, h.inc, app),
        }
        self.note_ingress(p);
        let rx = self.rx.get_mut(p).ok_or(DropReason::BadPath)?;
        rx.apply_floor(h.floor);
        rx.echo = h.stamp;
        let in_order = h.psn == rx.cum;
        rx.mark(h.psn);
        rx.acked = rx.acked.saturating_add(1);
        if ce {
            rx.ce = rx.ce.saturating_add(1);
        }
        // ACK at once on anything the sender must hear about quickly; otherwise every
        // `ack_every` packets of the path, or after `ack_delay_ns`. The end of a READ
        // or atomic response completes nothing at its sender: with `ack_ride` its ACK
        // waits, to ride on the next request (`Documentation/transport.rst`, "ACKs
        // riding on DATA").
        let answer =
            self.cfg.ack_ride != 0 && (h.op == Op::ReadResp as u8 || h.op == Op::AtomicResp as u8);
        let urgent = rx.acked >= u16::from(self.cfg.ack_every)
            || ((last || completed) && !answer)
            || ce
            || !in_order
            || ev == RxEvent::Duplicate
            || h.flags & DF_ACKREQ != 0;
        if let Some(msn) = lost {
            self.reports.nak = Some(Refusal {
                path: p as u8,
                kind: RefusalKind::Closed,
                psn: h.psn,
                stream: s,
                msn,
            });
        }
        if urgent || lost.is_some() {
            self.reports.ack_pending |= 1u64 << p;
            // A message completed (its last packet to arrive, on whatever path),
            // or a sender whose window is full: the sender waits for the packets
            // of every path, so every path that holds back an ACK answers now,
            // not at the delayed-ACK timer (Documentation/transport.rst,
            // "Receiving", step 9).
            if completed || h.flags & DF_ACKREQ != 0 {
                for (q, r) in self.rx.iter().enumerate().take(MAX_PATHS) {
                    if r.acked > 0 {
                        self.reports.ack_pending |= 1u64 << q;
                    }
                }
            }
        } else if !self.timers.is_armed(Timer::DelayedAck) {
            let at = now.add_nanos(u64::from(self.cfg.ack_delay_ns));
            self.timers.set(Timer::DelayedAck, at);
        }
        if ev == RxEvent::Data {
            self.release(app);
            // New data from the peer is its answer too (a READ's or atomic's response
            // is, IBTA 9.7.6.1.3): it restarts a running local ACK timer, so a
            // request waiting behind a long READ response, or the READ itself, is not
            // retried out. (A shared connection counts each stream's progress
            // instead: its timer only ticks.)
            if !self.cfg.shared && self.retry_at != Instant::NEVER {
                self.progress(now, false, app);
            }
        }
        Ok(ev)
    }
}
