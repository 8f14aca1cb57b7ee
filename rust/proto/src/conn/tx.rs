//! The sender half: [`Connection::poll_transmit`] sends, in order, pending ACKs, due
//! probes, then data — retransmissions first — within the windows and at the paced rate;
//! data packets are built around the application's bytes ([`App::payload`]).

use super::super::path::PathState;
use super::super::plane::plane_of;
use super::super::stream::STREAM_WINDOW;
use super::super::time::Instant;
use super::super::wire::{
    peek_dst_conn, set_shared, DataHeader, ProbeHeader, ACK_LEN, DATA_LEN, DF_ACKREQ, DF_FIRST,
    DF_IMM, DF_LAST, DF_RETH, DF_RETX, DF_SE, IMM_LEN, MAX_ACK_BUNDLE, MAX_DATA_HEADER, RETH_LEN,
};
use super::timers::Timer;
use super::{
    charge, wrap, App, ConnError, ConnState, Connection, Event, MsgInfo, Pkt, Refusal, RefusalKind,
    Transmit, TxKind, Unreadable, MAX_PATHS, NO_STREAM,
};

impl<const P: usize, const W: usize, const N: usize> Connection<P, W, N> {
    /// Writes the next datagram to send into `buf` (at least `mtu + 84` bytes), or returns
    /// `None` if nothing may be sent now. Call repeatedly until `None`.
    pub fn poll_transmit<A: App>(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        app: &mut A,
    ) -> Option<Transmit> {
        self.rx_batch = 0;
        if self.state == ConnState::Error(ConnError::Aborted) {
            return None;
        }
        if self.reports.ack_pending != 0 {
            if self.timers.is_armed(Timer::DelayedAck) && self.rx.iter().all(|r| r.acked == 0) {
                self.timers.stop(Timer::DelayedAck);
            }
            if let Some(t) = self.send_ack(buf, app) {
                return Some(self.ride(now, buf, t, app));
            }
        }
        if self.state != ConnState::Open {
            return None;
        }
        if self.probing != 0 {
            for p in 0..usize::from(self.cfg.paths).min(P) {
                let due = self
                    .tx
                    .get(p)
                    .map(|t| t.state != PathState::Unused && t.probe_due)
                    .unwrap_or(false);
                if due {
                    return self.send_probe(now, p, buf, app);
                }
            }
        }
        self.paced = false;
        if self.cfg.pacing && self.peer_hint != 0 && now < self.pacing_due() {
            self.paced = true;
            return None;
        }
        let r = self.send_data(now, buf, None, app);
        if r.is_none() && self.reports.ack_pending != 0 {
            // A failure while building data (an unreadable response) queued
            // a NAK: it goes out now, not at some later timer.
            return self.send_ack(buf, app);
        }
        let t = r?;
        self.pace(now, &t);
        Some(self.take_held(buf, t, app))
    }

    /// Moves the pacing clock on by the time DATA `t` takes at the paced rate.
    fn pace(&mut self, now: Instant, t: &Transmit) {
        if self.cfg.pacing && self.peer_hint != 0 {
            let bytes = (t.len as u64).saturating_add(u64::from(self.cfg.wire_overhead));
            let d = bytes.saturating_mul(1_000_000) / self.paced_rate().max(1);
            let next = self.timers.get(Timer::Pacing).max(now).add_nanos(d);
            self.timers.set(Timer::Pacing, next);
        }
    }

    /// The room, from the start of `buf`, for a datagram of ACKs with a DATA riding
    /// after them: none unless this connection lets DATA ride now (open, on one plane,
    /// no probe due, not held by pacing); at most [`Config::ack_ride`](super::Config::ack_ride)
    /// and `mtu` plus a DATA packet's largest header, a bundle's limit
    /// (`Documentation/transport.rst`, "ACKs riding on DATA").
    fn ride_room(&self, buf: &[u8], paced: bool) -> usize {
        if self.cfg.ack_ride == 0
            || self.state != ConnState::Open
            || self.probing != 0
            || self.planes > 1
            || paced
        {
            return 0;
        }
        buf.len()
            .min(usize::from(self.cfg.ack_ride))
            .min(usize::from(self.cfg.mtu).saturating_add(MAX_DATA_HEADER))
    }

    /// ACK datagram `acks`, just written to `buf`, takes along the next DATA packet if
    /// it fits in the room left ([`Self::ride_room`]); a DATA that does not fit is not
    /// built, and goes alone in the next datagram.
    fn ride<A: App>(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        acks: Transmit,
        app: &mut A,
    ) -> Transmit {
        let paced = self.cfg.pacing && self.peer_hint != 0 && now < self.pacing_due();
        let room = self.ride_room(buf, paced);
        // The DATA must be for the member the ACKs are addressed to: the receiver
        // hands the datagram to the QP its first record names (H18).
        let Ok(to) = peek_dst_conn(buf) else {
            return acks;
        };
        let Some(rest) = buf.get_mut(acks.len..room) else {
            return acks;
        };
        let Some(d) = self.send_data(now, rest, Some(to), app) else {
            return acks;
        };
        self.pace(now, &d);
        Transmit {
            len: acks.len.saturating_add(d.len),
            ..d
        }
    }

    /// DATA `t`, just written to `buf`, takes along the ACKs of the paths that hold
    /// packets back for the delayed-ACK timer, as many as fit in the room
    /// ([`Self::ride_room`]) and a bundle: they are written after it and the
    /// datagram turned so that they lead. A DATA too long for one more ACK goes
    /// alone.
    fn take_held<A: App>(&mut self, buf: &mut [u8], t: Transmit, app: &mut A) -> Transmit {
        if self.peer_inc == 0 || self.rx.iter().all(|r| r.acked == 0) {
            return t;
        }
        // Not held by pacing: this DATA was just let go.
        let room = self.ride_room(buf, false);
        // Only ACKs addressed to the DATA's member: the receiver hands the datagram to
        // the QP its first record names (H18).
        let Ok(dst) = peek_dst_conn(buf) else {
            return t;
        };
        let most = usize::from(self.cfg.ack_bundle).clamp(1, MAX_ACK_BUNDLE);
        let mut len = t.len;
        let mut to = None;
        let mut n = 0;
        for q in 0..self.rx.len().min(MAX_PATHS) {
            if n == most || len.saturating_add(ACK_LEN) > room {
                break;
            }
            let held = self.rx.get(q).is_some_and(|r| r.acked > 0);
            if !held
                || self.ack_plane_of(q) != t.plane
                || self.ack_to(q, None, app).map(|(d, _)| d) != Some(dst)
            {
                continue;
            }
            let Some(out) = buf.get_mut(len..) else { break };
            if let Some(w) = self.write_ack(q, out, to, app) {
                to = Some(w);
                self.reports.ack_pending &= !(1u64 << q);
                len += ACK_LEN;
                n += 1;
            }
        }
        if n == 0 {
            return t;
        }
        if let Some(b) = buf.get_mut(..len) {
            b.rotate_left(t.len);
        }
        if self.rx.iter().all(|r| r.acked == 0) {
            self.timers.stop(Timer::DelayedAck);
        }
        Transmit { len, ..t }
    }

    pub(super) fn send_probe<A: App>(
        &mut self,
        now: Instant,
        p: usize,
        buf: &mut [u8],
        app: &mut A,
    ) -> Option<Transmit> {
        let rto = self.tx.get(p).map(|t| self.rto(t)).unwrap_or(0);
        let (dst, token) = self.probe_to(app)?;
        let t = self.tx.get_mut(p)?;
        let stamp = now.wire_stamp();
        let h = ProbeHeader {
            path: p as u8,
            inc: self.cfg.incarnation,
            dst_conn: dst,
            psn: t.next_psn,
            stamp,
            token,
            floor: t.base_psn,
        };
        let len = h.encode(buf)?;
        set_shared(buf, self.cfg.shared)?;
        t.probe_due = false;
        let first = !core::mem::replace(&mut t.sent_since_answer, true);
        // The first probe since the path went Probing (or moved) marks when
        // validation may start: an answer to it or to any later probe counts. On an
        // active path, a tail-loss probe's marker: what the path still has in flight
        // went out before it, and is lost unless acknowledged by its answer.
        if t.probe_stamp == 0 || t.state == PathState::Active {
            t.probe_stamp = stamp.max(1);
        }
        // A marker's deadline is the tail-loss probe's (`timers`).
        if t.state == PathState::Probing {
            t.rto_at = now.add_nanos(rto);
        }
        let (src_port, steps) = (t.src_port, t.plane_steps);
        if first {
            self.went_quiet(p, now);
        }
        Some(Transmit {
            len,
            path: p as u8,
            src_port,
            plane: plane_of(p as u8, steps, self.planes, self.planes_up),
            ect: true,
            kind: TxKind::Probe,
        })
    }

    /// Whether path `p` may carry another data packet now: active, within its SACK
    /// span, below its window in bytes (the packet may overshoot it by less than its
    /// own size: a path whose coupled window is under two packets still carries one
    /// whole packet more, as TCP's `in_flight < cwnd` test does; an empty path always
    /// has room, whatever its configured window), and not holding back
    /// for a tail-loss probe's answer (`probing`).
    fn has_room(&self, p: usize) -> bool {
        let Some(t) = self.tx.get(p) else {
            return false;
        };
        t.state == PathState::Active
            && t.span_ok()
            && self.probing & (1u64 << (p % 64)) == 0
            && (t.inflight == 0 || t.inflight < t.cc.pwnd)
    }

    /// Whether a path other than `p` has room for `bytes` more (as
    /// [`Self::has_room`] judges, with `bytes` already sent on it).
    fn room_beside(&self, p: usize, bytes: u32) -> bool {
        let n = usize::from(self.cfg.paths).min(P);
        (0..n).any(|q| {
            q != p
                && self.has_room(q)
                && self
                    .tx
                    .get(q)
                    .is_some_and(|t| t.inflight.saturating_add(bytes) <= t.cc.pwnd)
        })
    }

    /// The path for a new data packet: the path the last one went on while it has room
    /// and its run is shorter than [`Config::train`](super::Config::train) and did not
    /// end a message, else round robin over the paths with room.
    fn pick_path(&mut self) -> Option<usize> {
        let n = usize::from(self.cfg.paths).min(P);
        if self.rr_run != 0 && self.rr_run < self.cfg.train && n != 0 {
            let last = wrap(usize::from(self.rr_path) + n - 1, n);
            if self.has_room(last) {
                self.rr_run += 1;
                return Some(last);
            }
        }
        self.pick_path_but(None)
    }

    /// Round robin over the paths with room other than `avoid`.
    fn pick_path_but(&mut self, avoid: Option<usize>) -> Option<usize> {
        let n = usize::from(self.cfg.paths).min(P);
        let start = usize::from(self.rr_path);
        for k in 0..n {
            let p = wrap(start + k, n);
            if Some(p) != avoid && self.has_room(p) {
                self.rr_path = wrap(p + 1, n) as u8;
                self.rr_run = 1;
                return Some(p);
            }
        }
        None
    }

    /// The path for a retransmission of a packet lost on path `from`: of the paths
    /// with room, the one with the shortest smoothed round trip (a lost packet delays
    /// its message's completion by the round trip it is resent over; MPTCP's
    /// lowest-RTT-first scheduler), other than `from` unless no other has room (the
    /// path that lost it may be failing: its SRTT, from packets that got through,
    /// does not say so); round robin (still other than `from` if another has room)
    /// while none of the others has an RTT sample.
    fn pick_retx_path(&mut self, from: usize) -> Option<usize> {
        let n = usize::from(self.cfg.paths).min(P);
        let mut best: Option<(usize, u32)> = None;
        for p in 0..n {
            let srtt = self.tx.get(p).map_or(0, |t| t.srtt);
            // Ranked by (lost on it, srtt): `from` only if nothing else.
            let rank = |q: usize, s: u32| (q == from, s);
            let better = !matches!(best, Some((b, bs)) if rank(b, bs) <= rank(p, srtt));
            if srtt != 0 && better && self.has_room(p) {
                best = Some((p, srtt));
            }
        }
        match best {
            Some((p, _)) if p != from => Some(p),
            _ => self.pick_path_but(Some(from)).or_else(|| self.pick_path()),
        }
    }

    fn find_lost(&self) -> Option<(usize, usize)> {
        for w in 0..W {
            let l = self.flight.lost.get(w).copied().unwrap_or(0);
            if l != 0 {
                return Some((w, l.trailing_zeros() as usize));
            }
        }
        None
    }

    /// Whether the packet being built of `stream` fills a limit that holds every
    /// path below `ack_every` packets: it takes the last free in-flight record
    /// (a new one takes a record; a retransmission has one) and `N` records are fewer
    /// than `ack_every` a path, or it takes the last SSN of its stream's window
    /// (`StreamTx::can_send`) and `STREAM_WINDOW` packets are.
    fn limit_full<A: App>(&self, stream: u16, retransmit: bool, app: &mut A) -> bool {
        let paths = u32::from(self.cfg.paths).min(P as u32);
        let below = |n: u32| n < u32::from(self.cfg.ack_every).saturating_mul(paths);
        if below(N as u32) {
            let busy: u32 = self.flight.busy.iter().map(|w| w.count_ones()).sum();
            if busy.saturating_add(u32::from(!retransmit)) >= N as u32 {
                return true;
            }
        }
        !retransmit
            && below(STREAM_WINDOW)
            && app.stream(stream).is_some_and(|st| {
                st.tx
                    .next_ssn
                    .wrapping_sub(st.tx.acked_base)
                    .wrapping_add(1)
                    >= STREAM_WINDOW
            })
    }

    fn find_free(&self) -> Option<(usize, usize)> {
        for w in 0..W {
            let used = self.flight.busy.get(w).copied().unwrap_or(u64::MAX);
            // Records beyond N do not exist: treat their bits as used.
            let valid = N.saturating_sub(w * 64);
            let used = if valid >= 64 {
                used
            } else {
                used | (u64::MAX << valid)
            };
            if used != u64::MAX {
                return Some((w, (!used).trailing_zeros() as usize));
            }
        }
        None
    }

    /// Writes the next DATA packet (a retransmission first) to `buf`; with `to`, only
    /// one addressed to `dst_conn` `to` (one riding after ACKs to it), else nothing
    /// changes.
    pub(super) fn send_data<A: App>(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        to: Option<u32>,
        app: &mut A,
    ) -> Option<Transmit> {
        // Start-up ramp: the window may at most double per round trip (slow start) until
        // the peer's rate hint has had time to count every sender.
        if self.flight.inflight >= self.flight.ramp && self.flight.inflight > 0 {
            return None;
        }
        if let Some(cap) = self.hint_cap() {
            let sum = self.qwnd_sum();
            if self.flight.inflight >= cap.min(sum) && self.flight.inflight > 0 {
                return None;
            }
        }
        // Retransmissions first, on any healthy path.
        if let Some((w, i)) = self.find_lost() {
            let k = *self.flight.pool.get(w * 64 + i)?;
            let Some(st) = app.stream(k.stream()) else {
                self.fail_stream(k.stream(), ConnError::MessageVanished, app);
                return None;
            };
            let msn = st.tx.msn_from_low(k.msn);
            let ssn = st.tx.ssn_from_low(k.ssn);
            let Some(info) = app.message(k.stream(), msn) else {
                self.fail_stream(k.stream(), ConnError::MessageVanished, app);
                return None;
            };
            let p = self.pick_retx_path(usize::from(k.path()))?;
            let t = self.build_data(
                now,
                p,
                buf,
                to,
                k.stream(),
                msn,
                ssn,
                k.offset(),
                k.len,
                &info,
                true,
                app,
            )?;
            if let Some(l) = self.flight.lost.get_mut(w) {
                *l &= !(1u64 << i);
            }
            self.track(now, w, i, p, k.len);
            self.stats.retx = self.stats.retx.wrapping_add(1);
            if let TxKind::Data { psn, .. } = t.kind {
                app.event(Event::Retransmit {
                    path: p as u8,
                    psn,
                    from_path: k.path(),
                    stream: k.stream(),
                    ssn,
                });
            }
            if let Some(pt) = self.tx.get_mut(p) {
                pt.retx = pt.retx.wrapping_add(1);
            }
            return Some(t);
        }
        let (w, i) = self.find_free()?;
        // The application's choice; one it should not have offered (no room, held by
        // RNR, closed, not lent, or stream 65535, which is none) is passed over, a few
        // times at most (its round robin moves on).
        let mut pick = None;
        for _ in 0..4 {
            let (s, info) = app.ready_stream()?;
            if let Some(st) = app
                .stream(s)
                .filter(|st| st.tx.can_send() && s != NO_STREAM)
            {
                pick = Some((s, info, st.tx.tx_msn, st.tx.tx_off, st.tx.next_ssn));
                break;
            }
        }
        let (s, info, msn, off, ssn) = pick?;
        let rem = info.len.saturating_sub(off);
        let mtu = match info.mtu {
            0 => self.cfg.mtu,
            m => m.min(self.cfg.mtu),
        };
        let len = rem.min(u32::from(mtu)) as u16;
        let p = self.pick_path()?;
        let t = self.build_data(now, p, buf, to, s, msn, ssn, off, len, &info, false, app)?;
        let last = off.saturating_add(u32::from(len)) >= info.len;
        if let Some(k) = self.flight.pool.get_mut(w * 64 + i) {
            *k = Pkt {
                path: 0,
                meta: if last { 0x10 } else { 0 },
                stream: s,
                psn: 0,
                ssn: ssn as u16,
                msn: msn as u16,
                len,
                off_lo: off as u16,
                off_hi: (off >> 16) as u16,
            };
        }
        if let Some(st) = app.stream(s) {
            st.tx.next_ssn = st.tx.next_ssn.wrapping_add(1);
            if last {
                st.tx.tx_msn = st.tx.tx_msn.wrapping_add(1);
                st.tx.tx_off = 0;
            } else {
                st.tx.tx_off = off.saturating_add(u32::from(len));
            }
        }
        // A message's last packet ends its path's run ([`Config::train`]): the next
        // message starts on the next path, and a run is never one message's end and
        // the next one's start (whose datagrams differ in length).
        if last {
            self.rr_run = u8::MAX;
        }
        // Streams with a message partly sent ([`Self::sending`]).
        match (off == 0, last) {
            (true, false) => self.partial = self.partial.saturating_add(1),
            (false, true) => self.partial = self.partial.saturating_sub(1),
            _ => {}
        }
        if let Some(b) = self.flight.busy.get_mut(w) {
            *b |= 1u64 << i;
        }
        self.track(now, w, i, p, len);
        Some(t)
    }

    fn qwnd_sum(&self) -> u32 {
        self.tx
            .iter()
            .filter(|t| t.state == PathState::Active)
            .fold(0u32, |a, t| a.saturating_add(t.cc.pwnd))
    }

    /// The windows a congested path's additive increase is shared by: those of the
    /// connection's Active paths that see congestion too (paths through one shared
    /// bottleneck are all marked by it; an unmarked path is not on it).
    pub(super) fn coupled_sum(&self) -> u32 {
        self.tx
            .iter()
            .filter(|t| t.state == PathState::Active && t.cc.congested())
            .fold(0u32, |a, t| a.saturating_add(t.cc.pwnd))
    }

    /// Records pool entry `(w, i)` as in flight on path `p` with the PSN just assigned.
    fn track(&mut self, now: Instant, w: usize, i: usize, p: usize, len: u16) {
        // The RTO runs from the path's last answer; a probe timeout from its newest
        // packet, this one.
        let Some(t) = self.tx.get(p) else { return };
        // (Not while a reordering hold runs: its expiry rearms the deadline.)
        let rearm = (Self::pto_armed(t) || t.rto_at == Instant::NEVER) && !t.reo.hold();
        let at = now.add_nanos(self.path_deadline(t));
        let Some(t) = self.tx.get_mut(p) else { return };
        let psn = t.next_psn.wrapping_sub(1);
        if rearm {
            t.rto_at = at;
        }
        t.inflight = t.inflight.saturating_add(charge(len));
        if let Some(k) = self.flight.pool.get_mut(w * 64 + i) {
            k.path = p as u8;
            k.psn = psn as u16;
        }
        if let Some(m) = self.flight.members.get_mut(p).and_then(|m| m.get_mut(w)) {
            *m |= 1u64 << i;
        }
        self.flight.inflight = self.flight.inflight.saturating_add(charge(len));
        if self.retry_at == Instant::NEVER {
            if let Some(t) = self.ack_timeout() {
                self.retry_at = now.add_nanos(t);
            }
        }
        self.stats.data_tx = self.stats.data_tx.wrapping_add(1);
    }

    #[allow(clippy::too_many_arguments)]
    fn build_data<A: App>(
        &mut self,
        now: Instant,
        p: usize,
        buf: &mut [u8],
        to: Option<u32>,
        stream: u16,
        msn: u32,
        ssn: u32,
        offset: u32,
        len: u16,
        info: &MsgInfo,
        retransmit: bool,
        app: &mut A,
    ) -> Option<Transmit> {
        let (dst, token, wire_stream) = self.data_to(stream, app)?;
        if to.is_some_and(|d| d != dst) {
            return None;
        }
        let t = self.tx.get(p)?;
        let end = offset.saturating_add(u32::from(len));
        let last = end >= info.len;
        let mut flags = 0u8;
        if offset == 0 {
            flags |= DF_FIRST;
        }
        if last {
            flags |= DF_LAST;
        }
        if info.op.needs_reth() {
            flags |= DF_RETH;
        }
        if info.op.has_imm() && last {
            flags |= DF_IMM;
        }
        if info.solicited && last {
            flags |= DF_SE;
        }
        if retransmit {
            flags |= DF_RETX;
        }
        // Room first: a packet that does not fit changes nothing (a DATA riding after
        // ACKs is offered what room they leave, [`Self::ride`]).
        let mut hl = DATA_LEN;
        if flags & DF_RETH != 0 {
            hl += RETH_LEN;
        }
        if flags & DF_IMM != 0 {
            hl += IMM_LEN;
        }
        if buf.len() < hl.saturating_add(usize::from(len)) {
            return None;
        }
        // The sender can send nothing more after this packet (the start-up ramp or the
        // hint cap is full, or this path's window is and no other path has room) and
        // so few packets are in flight that the paths' ACKs may all wait on packets the
        // receiver holds back for its delayed-ACK timer: ask for an immediate ACK. The
        // peer's `ack_every` is taken to be this end's (as its `ack_delay_ns` is, for
        // the probe timeouts); with twice that many packets a path in flight, paths
        // reach it as ACKs free their windows, and each ACK takes the others' held
        // packets along in a bundle. Asking on every packet of a window-limited
        // connection had each acknowledged alone.
        let one = charge(len);
        let two = one.saturating_mul(2);
        let conn_cap = self.flight.ramp.min(self.hint_cap().unwrap_or(u32::MAX));
        let paths = u32::from(self.cfg.paths).min(P as u32);
        let every = u32::from(self.cfg.ack_every.max(2));
        let few = self.flight.inflight.saturating_add(one)
            < two.saturating_mul(every).saturating_mul(paths);
        // `few` first: the walk over the paths runs only when it can matter (a
        // window-limited connection, the common case, skips it on every packet).
        let blocked = || {
            self.flight.inflight.saturating_add(two) > conn_cap
                || (t.inflight.saturating_add(two) > t.cc.pwnd && !self.room_beside(p, two))
        };
        if few && blocked() {
            flags |= DF_ACKREQ;
        } else if few && now >= self.limit_ask_at && self.limit_full(stream, retransmit, app) {
            // Two more limits stop the sender: the in-flight records (`N`) and a
            // stream's window of `STREAM_WINDOW` unacknowledged packets. Where one
            // holds each path below `ack_every` (many paths), no path's ACK comes due
            // once it is full: ask on the packet that fills it, at most once in the
            // smallest RTT (no answer comes sooner; each refill after an ACK fills it
            // again; the smoothed RTT, queueing included, held asks back past refills
            // that needed them).
            flags |= DF_ACKREQ;
            self.limit_ask_at = now.add_nanos(u64::from(self.min_rtt));
        }
        let h = DataHeader {
            path: p as u8,
            inc: self.cfg.incarnation,
            dst_conn: dst,
            psn: t.next_psn,
            stamp: now.wire_stamp(),
            token,
            stream: wire_stream,
            op: info.op as u8,
            flags,
            payload_len: len,
            tag: info.tag,
            floor: t.base_psn,
            ssn,
            msn,
            offset,
            msg_len: info.len,
            reth: info.reth,
            imm: info.imm,
        };
        let hl = h.header_len();
        if buf.len() < hl.saturating_add(usize::from(len)) || hl > MAX_DATA_HEADER {
            return None;
        }
        h.encode(buf)?;
        set_shared(buf, self.cfg.shared)?;
        let dst = buf.get_mut(hl..hl + usize::from(len))?;
        if let Err(e) = app.payload(stream, msn, offset, dst) {
            if e == Unreadable::Remote {
                // Tell the peer (on path 0; a NAK naming no message fails its whole
                // connection: the request this answers is one of the peer's
                // messages, which this connection cannot name).
                self.reports.nak = Some(Refusal {
                    path: 0,
                    kind: RefusalKind::Access,
                    psn: self.rx.first().map_or(0, |r| r.cum),
                    stream: NO_STREAM,
                    msn: 0,
                });
                self.reports.ack_pending |= 1;
            }
            self.fail_stream(stream, ConnError::LocalProtection, app);
            return None;
        }
        let (src_port, steps) = (t.src_port, t.plane_steps);
        let psn = t.next_psn;
        let mut first = false;
        if let Some(t) = self.tx.get_mut(p) {
            t.next_psn = t.next_psn.wrapping_add(1);
            first = !core::mem::replace(&mut t.sent_since_answer, true);
        }
        if first {
            self.went_quiet(p, now);
        }
        Some(Transmit {
            len: hl + usize::from(len),
            path: p as u8,
            src_port,
            plane: plane_of(p as u8, steps, self.planes, self.planes_up),
            ect: true,
            kind: TxKind::Data {
                stream,
                msn,
                offset,
                len,
                psn,
                retransmit,
            },
        })
    }
}
