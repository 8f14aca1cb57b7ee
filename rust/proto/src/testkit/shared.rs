//! Many model QPs sharing one connection per node (Documentation/transport.rst,
//! "Streams"): QP `q`'s requests travel on stream `2q`, its READ/atomic responses on
//! `2q + 1`; the RC engines are multiplexed into one [`App`] ([`Mux`]), and a failure
//! one QP's message causes fails that QP alone ([`Scope::Streams`]). The model of what
//! the kernel's shared connections do; host only (uses `alloc`).

use super::pair::{model_config, next_event, Conn, Link, Wire};
use super::rc::{tables, Host, VecTables};
use crate::conn::{App, ConnError, Event, MsgInfo, Placement, Refuse, Scope, TxKind};
use crate::conn::{Config, Connection, MemberOut, MemberRx, Unreadable};
use crate::ident::Ident;
use crate::rc::{Engine, QpMode};
use crate::stream::Stream;
use crate::time::Instant;
use crate::wire::{peek_dst_conn, peek_type, DropReason, Op, PacketType};
use alloc::vec::Vec;

/// One QP: its verbs objects and RC engine, and what its pair is on the wire (it is a
/// member of the shared connection: Documentation/transport.rst, "Shared connections").
pub struct Qp {
    /// Verbs objects.
    pub host: Host,
    /// The RC engine (it holds the QP's two streams).
    pub engine: Engine<VecTables>,
    /// Its QPN and its peer's.
    pub qpn: u32,
    /// The peer QP's QPN.
    pub peer: u32,
    /// The pair's keys: this end's sending direction, the peer's.
    pub tx: Ident,
    /// The peer's sending direction's key.
    pub rx: Ident,
    /// Nothing of the pair accepted yet.
    pub fresh: bool,
    /// The connection's epoch when it joined ([`crate::conn::Connection::epoch`]).
    pub joined: u32,
    /// Its path MTU (0: the connection's), which its messages carry
    /// ([`MsgInfo::mtu`]).
    pub mtu: u16,
    /// Its own verbs retry limits, `(retry_cnt, rnr_retry)` (`None`: the
    /// connection's; [`App::stream_retry_limits`]).
    pub retry: Option<(u8, u8)>,
}

impl Qp {
    /// A QP with `slots` SQ/RQ slots, its streams started under its own pair's keys
    /// (`tx` this end's sending direction, `rx` the peer's): a new QP in a destroyed
    /// one's slot then starts its streams elsewhere in sequence space, and the old QP's
    /// packets still in the network fall outside its windows.
    pub fn new(slots: usize, (qpn, peer): (u32, u32), tx: Ident, rx: Ident) -> Self {
        let host = Host::new(slots, false);
        let mut engine = Engine::new(tables(host.sq.len(), host.attrs.srq_sge));
        engine.start_streams(tx, rx);
        Qp {
            host,
            engine,
            qpn,
            peer,
            tx,
            rx,
            fresh: true,
            joined: 0,
            mtu: 0,
            retry: None,
        }
    }
}

/// The model's QPN of slot `q`'s `inc`-th QP on the node whose connection id is `node`.
fn qpn(node: u32, q: usize, inc: u32) -> u32 {
    (node & 1) << 23 | (inc & 0x7ff) << 12 | (q as u32 & 0xfff)
}

/// The model's GID of the node whose connection id is `node`.
fn gid(node: u32) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&node.to_be_bytes());
    g
}

/// A QP's stream `s` of the shared connection: (QP index, the engine's stream).
fn split(s: u16) -> (usize, u16) {
    (usize::from(s / 2), s % 2)
}

/// The QPs of one node as the application of their shared connection. A slot of `None`
/// is a destroyed QP: its streams are not the connection's any more.
pub struct Mux<'a> {
    /// The QPs, by index.
    pub qps: &'a mut [Option<Qp>],
    /// Round-robin cursor over the QPs for new data.
    pub rr: &'a mut usize,
    /// The QPN a datagram being received was dispatched to (its first record's
    /// `dst_conn`), as the kernel's table does: a member other than it is not the
    /// addressee of anything in it (`rust/verbs/qp/mux.rs`, `addressee`). `None`
    /// outside a receive.
    pub arrived: Option<u32>,
}

impl Mux<'_> {
    fn qp(&mut self, s: u16) -> Option<(&mut Qp, u16)> {
        let (q, l) = split(s);
        Some((self.qps.get_mut(q)?.as_mut()?, l))
    }

    /// The member whose QPN is `qpn` (its slot is the QPN's low 12 bits).
    fn by_qpn(&mut self, qpn: u32) -> Option<(u16, &mut Qp)> {
        if self.arrived.is_some_and(|a| a != qpn) {
            return None;
        }
        let q = (qpn & 0xfff) as usize;
        let qp = self.qps.get_mut(q)?.as_mut().filter(|qp| qp.qpn == qpn)?;
        Some((q as u16, qp))
    }
}

impl App for Mux<'_> {
    fn stream(&mut self, s: u16) -> Option<&mut Stream> {
        let (qp, l) = self.qp(s)?;
        qp.engine.stream(l)
    }

    fn ready_stream(&mut self) -> Option<(u16, MsgInfo)> {
        let n = self.qps.len();
        for k in 0..n {
            let q = (*self.rr + k) % n;
            let Some(Some(qp)) = self.qps.get_mut(q) else {
                continue;
            };
            if let Some((l, m)) = qp.engine.bind(&mut qp.host).ready_stream() {
                *self.rr = (q + 1) % n;
                let m = MsgInfo { mtu: qp.mtu, ..m };
                return Some(((q * 2) as u16 + l, m));
            }
        }
        None
    }

    /// Each QP's streams start from its own pair's keys, which the connection's
    /// receiving key does not change.
    fn restart_rx(&mut self, _id: Ident) {}

    fn message(&mut self, s: u16, msn: u32) -> Option<MsgInfo> {
        let (qp, l) = self.qp(s)?;
        let m = qp.engine.bind(&mut qp.host).message(l, msn)?;
        Some(MsgInfo { mtu: qp.mtu, ..m })
    }

    fn payload(&mut self, s: u16, msn: u32, off: u32, dst: &mut [u8]) -> Result<(), Unreadable> {
        let (qp, l) = self.qp(s).ok_or(Unreadable::Local)?;
        qp.engine.bind(&mut qp.host).payload(l, msn, off, dst)
    }

    fn carries(&mut self, s: u16, op: Op) -> bool {
        self.qp(s)
            .is_some_and(|(qp, l)| qp.engine.bind(&mut qp.host).carries(l, op))
    }

    fn place(&mut self, p: &Placement<'_>) -> Result<(), Refuse> {
        let (qp, l) = self.qp(p.stream).ok_or(Refuse::Invalid)?;
        // A QP in the error state takes no packet unless it lingers after refusing a
        // request; on a shared connection it says so (closed), and the sender fails
        // that QP's stream alone (transport.rst, "Shared connections").
        if qp.host.mode == QpMode::Err && !qp.engine.lingers() {
            return Err(Refuse::Closed);
        }
        qp.engine
            .bind(&mut qp.host)
            .place(&Placement { stream: l, ..*p })
    }

    fn complete(&mut self, s: u16, msn: u32) {
        if let Some((qp, l)) = self.qp(s) {
            qp.engine.bind(&mut qp.host).complete(l, msn);
        }
    }

    fn stream_retry_limits(&mut self, s: u16) -> Option<(u8, u8)> {
        self.qp(s)?.0.retry
    }

    /// Each QP's engine says whether its request stream awaits a response.
    fn awaiting(&mut self, from: u16) -> Option<u16> {
        let (first, _) = split(from.saturating_add(1));
        let skip = first.min(self.qps.len());
        for (q, qp) in self.qps.iter_mut().enumerate().skip(skip) {
            let Some(qp) = qp else { continue };
            if qp.engine.awaiting() {
                return u16::try_from(q * 2).ok();
            }
        }
        None
    }

    fn completion_lost(&mut self, s: u16) -> bool {
        self.qp(s)
            .is_some_and(|(qp, l)| qp.engine.bind(&mut qp.host).completion_lost(l))
    }

    fn acked(&mut self, s: u16, msn: u32) {
        if let Some((qp, l)) = self.qp(s) {
            qp.engine.bind(&mut qp.host).acked(l, msn);
        }
    }

    fn refusal(&mut self, s: u16, msn: u32) -> Option<Refuse> {
        let (qp, l) = self.qp(s)?;
        qp.engine.bind(&mut qp.host).refusal(l, msn)
    }

    fn refused(&mut self, s: u16, msn: u32, e: ConnError) {
        if let Some((qp, l)) = self.qp(s) {
            qp.engine.bind(&mut qp.host).refused(l, msn, e);
        }
    }

    /// One QP's failure: that QP enters the error state (flushing its work) and its two
    /// streams close; the connection and the other QPs carry on.
    fn stream_error(&mut self, s: u16, e: ConnError) -> Scope {
        if let Some((qp, _)) = self.qp(s) {
            qp.engine.bind(&mut qp.host).error(e);
        }
        let first = s & !1;
        Scope::Streams { first, n: 2 }
    }

    fn error(&mut self, e: ConnError) {
        for qp in self.qps.iter_mut().flatten() {
            qp.engine.bind(&mut qp.host).error(e);
        }
    }

    fn event(&mut self, _e: Event) {}

    fn member_rx(&mut self, dst: u32, token: u32) -> Result<MemberRx, DropReason> {
        let (id, qp) = self.by_qpn(dst).ok_or(DropReason::WrongConnection)?;
        if token != qp.rx.token() {
            return Err(DropReason::BadToken);
        }
        Ok(MemberRx {
            id,
            fresh: qp.fresh,
            joined: qp.joined,
        })
    }

    fn member_accepted(&mut self, id: u16) {
        if let Some(Some(qp)) = self.qps.get_mut(usize::from(id)) {
            qp.fresh = false;
        }
    }

    fn member_tx(&mut self, dst: u32) -> Option<(u16, u32)> {
        let (id, qp) = self.by_qpn(dst)?;
        Some((id, qp.tx.token()))
    }

    fn member_out(&mut self, id: u16) -> Option<MemberOut> {
        let qp = self.qps.get(usize::from(id))?.as_ref()?;
        Some(MemberOut {
            to: qp.peer,
            tx_token: qp.tx.token(),
            rx_token: qp.rx.token(),
        })
    }

    fn any_member(&mut self) -> Option<u16> {
        let q = self.qps.iter().position(|x| x.is_some())?;
        Some(q as u16)
    }

    fn stream_in(&mut self, id: u16, wire: u16) -> Option<u16> {
        (wire < 2).then(|| id.wrapping_mul(2).wrapping_add(wire))
    }

    fn stream_out(&mut self, s: u16) -> Option<(u16, u16)> {
        let (q, l) = split(s);
        self.qps.get(q)?.as_ref()?;
        Some((q as u16, l))
    }
}

/// One node: its QPs and the connection they share.
pub struct SharedNode {
    /// The QPs (`None`: destroyed).
    pub qps: Vec<Option<Qp>>,
    /// The shared connection.
    pub conn: Conn,
    rr: usize,
    /// QPs created so far: the incarnation of the next (its keys differ from every
    /// earlier QP's in the same slot).
    created: u32,
}

impl SharedNode {
    fn mux(&mut self) -> (&mut Conn, Mux<'_>) {
        self.mux_for(None)
    }

    /// [`Self::mux`] for a datagram dispatched to QPN `arrived`.
    fn mux_for(&mut self, arrived: Option<u32>) -> (&mut Conn, Mux<'_>) {
        (
            &mut self.conn,
            Mux {
                qps: &mut self.qps,
                rr: &mut self.rr,
                arrived,
            },
        )
    }

    /// A new QP in the first free slot (index returned), its streams started under its
    /// pair's keys, derived as a verbs QP's are from the GIDs and QPNs (the peer node
    /// creates its side of the pair in the same order, so both derive the same keys).
    pub fn add_qp(&mut self, slots: usize) -> usize {
        let q = self
            .qps
            .iter()
            .position(|x| x.is_none())
            .unwrap_or(self.qps.len());
        let cfg = self.conn.config();
        let (me, peer) = (cfg.local_conn, cfg.peer_conn);
        let inc = self.created;
        self.created += 1;
        let (a, b) = (qpn(me, q, inc), qpn(peer, q, inc));
        let tx = Ident::derive(&gid(me), &gid(peer), a, b, 0);
        let rx = Ident::derive(&gid(peer), &gid(me), b, a, 0);
        let mut qp = Qp::new(slots, (a, b), tx, rx);
        qp.joined = self.conn.epoch();
        let qp = Some(qp);
        match self.qps.get_mut(q) {
            Some(slot) => *slot = qp,
            None => self.qps.push(qp),
        }
        q
    }

    /// QPs that entered the error state outside a failure the connection reported
    /// (moved to ERR, a lost completion: IBTA class G) close their streams, as a
    /// stream failure does; run before the connection sends.
    fn settle(&mut self) {
        for q in 0..self.qps.len() {
            let Some(Some(qp)) = self.qps.get_mut(q) else {
                continue;
            };
            qp.engine.settle(&mut qp.host);
            let open = qp.engine.stream(0).is_some_and(|st| !st.tx.closed);
            if qp.host.mode == QpMode::Err && open {
                let (conn, mut mux) = self.mux();
                conn.close_streams((q * 2) as u16, 2, &mut mux);
            }
        }
    }

    /// Destroys QP `q`: its streams close (packets in flight forgotten) and leave the
    /// connection.
    pub fn destroy_qp(&mut self, q: usize) {
        let first = (q * 2) as u16;
        let (conn, mut mux) = self.mux();
        conn.close_streams(first, 2, &mut mux);
        if let Some(slot) = self.qps.get_mut(q) {
            *slot = None;
        }
    }

    /// Hands datagram `bytes` to the connection at `now` (nothing is sent in answer
    /// until the pair next runs): `Err` with the reason it was dropped.
    pub fn deliver(&mut self, now: Instant, bytes: &[u8]) -> Result<(), DropReason> {
        let (conn, mut mux) = self.mux_for(peek_dst_conn(bytes).ok());
        conn.handle_packet(now, bytes, false, &mut mux).map(|_| ())
    }

    /// QP `q` (panics if it was destroyed or never created: tests only).
    pub fn qp(&mut self, q: usize) -> &mut Qp {
        self.qps[q].as_mut().expect("a live QP")
    }
}

/// Two nodes whose QPs pair up (QP `q` of node 0 with QP `q` of node 1) over one shared
/// connection each way, over a seeded impaired link.
pub struct SharedPair {
    /// The nodes.
    pub nodes: [SharedNode; 2],
    /// The link and what is in flight on it.
    pub wire: Wire,
    /// Simulated time, ns.
    pub now: u64,
    /// Datagrams each node's connection dropped.
    pub rx_drops: [u64; 2],
    /// Drops the first transmission of DATA on these streams (a loss that hits one QP).
    pub lose_first_on: Vec<u16>,
    /// (node, stream, MSN, time) of every receive completion of a request (in order).
    pub completions: Vec<(u8, u16, u32, u64)>,
    /// The largest DATA payload each node sent on each stream: (node, stream, bytes).
    pub largest: Vec<(u8, u16, u16)>,
    /// Datagrams each node sent with a DATA riding after ACKs.
    pub rides: [u64; 2],
}

impl SharedPair {
    /// `qps` QP pairs of `slots` slots over `link`, seeded.
    pub fn new(qps: usize, slots: usize, link: Link, seed: u64) -> Self {
        let node = |local, peer| {
            let mut n = SharedNode {
                qps: Vec::new(),
                conn: Connection::new(Config {
                    shared: true,
                    ..model_config(local, peer)
                }),
                rr: 0,
                created: 0,
            };
            for _ in 0..qps {
                n.add_qp(slots);
            }
            n
        };
        SharedPair {
            nodes: [node(1, 2), node(2, 1)],
            wire: Wire::new(link, seed),
            now: 1_000_000,
            rx_drops: [0; 2],
            lose_first_on: Vec::new(),
            completions: Vec::new(),
            largest: Vec::new(),
            rides: [0; 2],
        }
    }

    fn pump(&mut self, i: usize) {
        let now = Instant(self.now);
        let mut buf = [0u8; 1024 + 256];
        self.nodes[i].settle();
        loop {
            let n = &mut self.nodes[i];
            let (conn, mut mux) = n.mux();
            let Some(t) = conn.poll_transmit(now, &mut buf, &mut mux) else {
                break;
            };
            let bytes = buf.get(..t.len).unwrap_or(&[]).to_vec();
            if let TxKind::Data { stream, len, .. } = t.kind {
                if peek_type(&bytes) == Some(PacketType::Ack) {
                    self.rides[i] += 1;
                }
                let node = i as u8;
                match self
                    .largest
                    .iter_mut()
                    .find(|e| (e.0, e.1) == (node, stream))
                {
                    Some(e) => e.2 = e.2.max(len),
                    None => self.largest.push((node, stream, len)),
                }
            }
            if let TxKind::Data {
                stream,
                retransmit: false,
                ..
            } = t.kind
            {
                if let Some(k) = self.lose_first_on.iter().position(|s| *s == stream) {
                    self.lose_first_on.swap_remove(k);
                    continue;
                }
            }
            self.wire.send(self.now, i as u8, bytes);
        }
    }

    /// Every node's doorbell: sends what it can.
    pub fn doorbell(&mut self) {
        self.pump(0);
        self.pump(1);
    }

    /// Runs until both sides are quiet or `budget_ns` of simulated time passed (the
    /// clock then stands at the budget's end); returns whether they went quiet.
    pub fn run(&mut self, budget_ns: u64) -> bool {
        let end = self.now.saturating_add(budget_ns);
        self.doorbell();
        loop {
            let timers = self.nodes.iter().filter_map(|n| n.conn.poll_timeout());
            let next_timer = timers.map(|t| t.0).min();
            let Some(at) = next_event(self.wire.next_arrival(), next_timer) else {
                return true;
            };
            if at > end {
                self.now = self.now.max(end);
                return false;
            }
            self.now = self.now.max(at);
            if let Some((to, bytes)) = self.wire.take_due(self.now) {
                let to = usize::from(to);
                let before = self.recv_counts(to);
                let now = Instant(self.now);
                let (conn, mut mux) = self.nodes[to].mux_for(peek_dst_conn(&bytes).ok());
                if conn
                    .handle_pieces(now, super::as_received(&bytes), false, &mut mux)
                    .is_err()
                {
                    self.rx_drops[to] += 1;
                }
                self.note_completions(to, &before);
                self.pump(to);
                continue;
            }
            for i in 0..2 {
                let t = self.now;
                let (conn, mut mux) = self.nodes[i].mux();
                if conn.poll_timeout().is_some_and(|d| d.0 <= t) {
                    conn.handle_timeout(Instant(t), &mut mux);
                }
                self.pump(i);
            }
        }
    }

    fn recv_counts(&self, i: usize) -> Vec<usize> {
        let qps = self.nodes[i].qps.iter();
        qps.map(|q| q.as_ref().map_or(0, |q| q.host.recv_cq.len()))
            .collect()
    }

    fn note_completions(&mut self, i: usize, before: &[usize]) {
        for (q, qp) in self.nodes[i].qps.iter().enumerate() {
            let Some(qp) = qp else { continue };
            let was = before.get(q).copied().unwrap_or(0);
            for (c, _) in qp.host.recv_cq.iter().skip(was) {
                let s = (q * 2) as u16;
                self.completions
                    .push((i as u8, s, c.wr_id as u32, self.now));
            }
        }
    }
}
