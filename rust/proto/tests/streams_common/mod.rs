//! A minimal application with arbitrary stream ids and a hand-driven two-node harness
//! (every datagram passes through the test), for breaking the stream changes.
#![allow(dead_code)]

use metaroce_proto::conn::{
    App, Config, ConnError, Connection, MsgInfo, Placement, Refuse, Rnr, Scope, Transmit,
    Unreadable,
};
use metaroce_proto::ident::Ident;
use metaroce_proto::stream::Stream;
use metaroce_proto::testkit::rc::model_config;
use metaroce_proto::time::Instant;
use metaroce_proto::wire::{Op, Reth};
use std::collections::{BTreeMap, BTreeSet};

pub type C = Connection<4, 1, 64>;

#[derive(Default)]
pub struct Mini {
    pub streams: BTreeMap<u16, Stream>,
    /// Messages per stream: (len, fill byte).
    pub msgs: BTreeMap<u16, Vec<(u32, u8)>>,
    /// (stream, msn, offset, first byte) of every placement.
    pub placed: Vec<(u16, u32, u32, u8)>,
    pub completed: Vec<(u16, u32)>,
    pub completed_at: Vec<u64>,
    pub now: u64,
    pub acked: Vec<(u16, u32)>,
    pub refuse: BTreeMap<(u16, u32), Refuse>,
    /// Streams whose receiver is not ready (every packet refused with RNR).
    pub rnr: BTreeSet<u16>,
    /// RNR timer code per stream (default 1) and how many refusals are left (None: all).
    pub rnr_code: BTreeMap<u16, u8>,
    pub rnr_left: BTreeMap<u16, u32>,
    /// Scope of a stream's failure: `None` the connection, else streams `s & !mask ..`
    /// (`Some(n)`: the aligned group of n streams holding s).
    pub group: Option<u16>,
    pub stream_errors: Vec<(u16, ConnError)>,
    pub errors: Vec<ConnError>,
    pub refused: Vec<(u16, u32, ConnError)>,
    /// ready_stream's round-robin cursor.
    pub rr: u16,
    /// If set, ready_stream always returns this stream (an app that ignores can_send).
    pub stubborn: Option<u16>,
}

impl Mini {
    pub fn add_stream(&mut self, s: u16, tx: Ident, rx: Ident) {
        self.streams.insert(s, Stream::start(tx, rx, s));
        self.msgs.entry(s).or_default();
    }
    pub fn post(&mut self, s: u16, len: u32, fill: u8) {
        self.msgs.entry(s).or_default().push((len, fill));
    }
    fn info(&self, s: u16, msn: u32) -> Option<MsgInfo> {
        let (len, _) = *self.msgs.get(&s)?.get(msn as usize)?;
        Some(MsgInfo {
            op: Op::Write,
            len,
            reth: Reth {
                va: 0x1000,
                rkey: 7,
                len,
            },
            imm: 0,
            tag: msn as u16,
            solicited: false,
            mtu: 0,
        })
    }
}

impl App for Mini {
    fn stream(&mut self, s: u16) -> Option<&mut Stream> {
        self.streams.get_mut(&s)
    }
    fn ready_stream(&mut self) -> Option<(u16, MsgInfo)> {
        if let Some(s) = self.stubborn {
            let msn = self.streams.get(&s)?.tx.tx_msn;
            return self.info(s, msn).map(|m| (s, m));
        }
        let keys: Vec<u16> = self.streams.keys().copied().collect();
        let n = keys.len();
        let start = keys.iter().position(|k| *k >= self.rr).unwrap_or(0);
        for k in 0..n {
            let s = keys[(start + k) % n];
            let st = self.streams[&s];
            if !st.tx.can_send() {
                continue;
            }
            if let Some(m) = self.info(s, st.tx.tx_msn) {
                self.rr = s.wrapping_add(1);
                return Some((s, m));
            }
        }
        None
    }
    fn restart_rx(&mut self, id: Ident) {
        for (s, st) in self.streams.iter_mut() {
            st.restart_rx(id, *s);
        }
    }
    fn message(&mut self, s: u16, msn: u32) -> Option<MsgInfo> {
        self.info(s, msn)
    }
    fn payload(&mut self, s: u16, msn: u32, _off: u32, dst: &mut [u8]) -> Result<(), Unreadable> {
        let fill = self
            .msgs
            .get(&s)
            .and_then(|m| m.get(msn as usize))
            .map_or(0, |m| m.1);
        dst.fill(fill);
        Ok(())
    }
    fn place(&mut self, p: &Placement<'_>) -> Result<(), Refuse> {
        if let Some(r) = self.refuse.get(&(p.stream, p.msn)) {
            return Err(*r);
        }
        if self.rnr.contains(&p.stream) {
            let left = self.rnr_left.get_mut(&p.stream);
            let refuse = match left {
                None => true,
                Some(n) if *n > 0 => {
                    *n -= 1;
                    true
                }
                Some(_) => false,
            };
            if refuse {
                let code = self.rnr_code.get(&p.stream).copied().unwrap_or(1);
                return Err(Rnr(code).into());
            }
        }
        self.placed.push((
            p.stream,
            p.msn,
            p.offset,
            p.payload.bytes().next().unwrap_or(0),
        ));
        Ok(())
    }
    fn complete(&mut self, s: u16, msn: u32) {
        self.completed.push((s, msn));
        self.completed_at.push(self.now);
    }
    fn acked(&mut self, s: u16, msn: u32) {
        self.acked.push((s, msn));
    }
    fn refused(&mut self, s: u16, msn: u32, e: ConnError) {
        self.refused.push((s, msn, e));
    }
    fn stream_error(&mut self, s: u16, e: ConnError) -> Scope {
        self.stream_errors.push((s, e));
        match self.group {
            None => Scope::Connection,
            Some(n) => Scope::Streams {
                first: s - s % n,
                n,
            },
        }
    }
    fn error(&mut self, e: ConnError) {
        self.errors.push(e);
    }
}

/// The model QPs' configuration ([`model_config`]) with `paths` paths and a first
/// window of 1 MiB (no slow start in these hand-driven cases).
pub fn cfg(local: u32, peer: u32, paths: u8) -> Config {
    Config {
        paths,
        init_qwnd: 1 << 20,
        ..model_config(local, peer)
    }
}

pub struct Node {
    pub c: C,
    pub app: Mini,
}

impl Node {
    pub fn new(local: u32, peer: u32, paths: u8) -> Self {
        Node {
            c: C::new(cfg(local, peer, paths)),
            app: Mini::default(),
        }
    }
    /// Everything the node sends now.
    pub fn drain(&mut self, now: u64) -> Vec<(Transmit, Vec<u8>)> {
        self.app.now = now;
        let mut out = Vec::new();
        let mut buf = [0u8; 2048];
        while let Some(t) = self.c.poll_transmit(Instant(now), &mut buf, &mut self.app) {
            out.push((t, buf[..t.len].to_vec()));
            if out.len() > 10_000 {
                panic!("poll_transmit does not stop");
            }
        }
        out
    }
    pub fn recv(
        &mut self,
        now: u64,
        b: &[u8],
    ) -> Result<metaroce_proto::conn::RxEvent, metaroce_proto::wire::DropReason> {
        self.app.now = now;
        self.c.handle_packet(Instant(now), b, false, &mut self.app)
    }
    pub fn tick(&mut self, now: u64) {
        self.app.now = now;
        if self.c.poll_timeout().is_some_and(|t| t.0 <= now) {
            self.c.handle_timeout(Instant(now), &mut self.app);
        }
    }
}

/// Runs a and b, delivering everything (except what `drop` says) with `delay` ns, until
/// quiet or `until`. Returns the number of datagrams carried.
pub fn run(
    a: &mut Node,
    b: &mut Node,
    now: &mut u64,
    until: u64,
    delay: u64,
    mut drop: impl FnMut(u8, &Transmit) -> bool,
) -> usize {
    let mut wire: Vec<(u64, u8, Vec<u8>)> = Vec::new();
    let mut carried = 0;
    loop {
        for (i, n) in [&mut *a, &mut *b].into_iter().enumerate() {
            for (t, bytes) in n.drain(*now) {
                if !drop(i as u8, &t) {
                    wire.push((*now + delay, 1 - i as u8, bytes));
                }
            }
        }
        let next_pkt = wire.iter().map(|w| w.0).min();
        let next_t = [a.c.poll_timeout(), b.c.poll_timeout()]
            .into_iter()
            .flatten()
            .map(|t| t.0)
            .min();
        let at = match (next_pkt, next_t) {
            (None, None) => return carried,
            (Some(p), None) => p,
            (None, Some(t)) => t,
            (Some(p), Some(t)) => p.min(t),
        };
        if at > until {
            *now = until;
            return carried;
        }
        *now = (*now).max(at);
        if let Some(k) = wire.iter().position(|w| w.0 <= *now) {
            let (_, to, bytes) = wire.remove(k);
            carried += 1;
            let n = if to == 0 { &mut *a } else { &mut *b };
            let _ = n.recv(*now, &bytes);
            continue;
        }
        a.tick(*now);
        b.tick(*now);
    }
}
