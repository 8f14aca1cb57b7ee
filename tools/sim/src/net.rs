//! Packets and the things every part of the engine shares: a deterministic PRNG, the
//! 5-tuple hash, the packet arena (no allocation per packet), the toy baseline's header.

use crate::endpoint;

/// Deterministic PRNG (splitmix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Loads `v` and discards it: the out-of-order core issues the load at once and goes
/// on, so a cache miss overlaps the work before it (a prefetch without `unsafe`; no
/// effect on any result).
#[inline(always)]
pub fn touch(v: u64) {
    std::hint::black_box(v);
}

/// The splitmix64 finaliser: a cheap, well-mixing 64-bit hash.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The 5-tuple key of a packet (src, dst, UDP sport, UDP dport 4792, protocol 17) that
/// every switch hashes, with its own salt, to pick an ECMP member.
pub fn flow_key(src: u32, dst: u32, sport: u16) -> u64 {
    (u64::from(src) << 32 | u64::from(dst)) ^ (u64::from(sport) << 16 | 4792) << 7 ^ 17
}

/// Bytes of a MetaRoCE datagram kept per packet: every header (data 68 B at most, ACK
/// 72 B, probe, datagram) fits, so a packet's payload is never copied or stored. The
/// receiver sees the header followed by stale bytes; payload contents are not simulated
/// (the test application counts bytes, it does not check them). A longer datagram that
/// is not DATA (an ACK bundle) is kept whole ([`Body::MetaLong`]).
pub const HEAD: usize = 128;
const _: () = assert!(
    metaroce_proto::wire::MAX_DATA_HEADER <= HEAD
        && metaroce_proto::wire::ACK_LEN <= HEAD
        && metaroce_proto::wire::PROBE_LEN <= HEAD
        && metaroce_proto::wire::DATAGRAM_LEN <= HEAD
);

/// What a packet carries.
#[derive(Clone, Debug)]
pub enum Body {
    /// A MetaRoCE datagram of `len` UDP payload bytes, of which the first
    /// `min(len, HEAD)` are kept.
    Meta { len: u16, head: [u8; HEAD] },
    /// A MetaRoCE datagram longer than [`HEAD`] whose every byte matters (an ACK
    /// bundle, `Documentation/transport.rst`, "ACK bundles"), kept whole.
    MetaLong(Box<[u8]>),
    /// A toy go-back-N baseline packet.
    Toy(BasePkt),
    /// A packet of a [`endpoint::Endpoint`] (DCQCN RoCEv2, IRN, ...).
    Ext(endpoint::BasePkt),
}

/// Toy baseline packet: one path, go-back-N, cumulative ACK / NAK.
#[derive(Clone, Copy, Debug)]
pub struct BasePkt {
    pub conn: u32,
    pub kind: BaseKind,
}

#[derive(Clone, Copy, Debug)]
pub enum BaseKind {
    Data { psn: u32, len: u32, ts: u64 },
    Ack { epsn: u32, ce: bool, echo: u64 },
    Nak { epsn: u32 },
}

/// Traffic class: data is lossless when the run enables PFC; control (ACK, NAK, CNP) is
/// lossy and, with `strict_ctrl`, served before data at every port.
pub const DATA: u8 = 0;
pub const CTRL: u8 = 1;

#[derive(Clone, Debug)]
pub struct Pkt {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    /// [`DATA`] or [`CTRL`].
    pub class: u8,
    pub ect: bool,
    pub ce: bool,
    /// Bytes on the wire: headers, FCS, preamble and inter-frame gap included.
    pub wire: u32,
    /// [`flow_key`], computed once at the sender.
    pub key: u64,
    /// The link the packet is on: at a switch, the one it arrived on (ingress
    /// accounting) until an output queue takes it; from then on the one it will
    /// cross, and crosses (its arrival event names only the packet).
    pub in_link: u32,
}

/// Packet arena: packets live in one vector and are named by index by events and
/// queues; freed slots are reused, so the steady state allocates nothing. The header
/// fields switches read are apart from the bodies only endpoints read, so forwarding
/// touches 48 bytes per packet.
#[derive(Default)]
pub struct Pool {
    pkts: Vec<Pkt>,
    bodies: Vec<Body>,
    free: Vec<u32>,
}

impl Pool {
    pub fn alloc(&mut self, p: Pkt, b: Body) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.pkts[i as usize] = p;
                self.bodies[i as usize] = b;
                i
            }
            None => {
                self.pkts.push(p);
                self.bodies.push(b);
                (self.pkts.len() - 1) as u32
            }
        }
    }
    /// [`Pool::alloc`] of a MetaRoCE datagram of `len` bytes whose first bytes are
    /// `head`, written in place (no packet-sized copies); the rest of the kept head is
    /// left as it was (only `min(len, HEAD)` bytes are ever read).
    pub fn alloc_meta(&mut self, p: Pkt, len: u16, head: &[u8]) -> u32 {
        if head.len() > HEAD {
            // Kept whole (an ACK bundle): `head` is the datagram.
            debug_assert_eq!(head.len(), usize::from(len));
            return self.alloc(p, Body::MetaLong(head.into()));
        }
        let i = match self.free.pop() {
            Some(i) => {
                self.pkts[i as usize] = p;
                i
            }
            None => {
                self.pkts.push(p);
                self.bodies.push(Body::Meta {
                    len: 0,
                    head: [0; HEAD],
                });
                (self.pkts.len() - 1) as u32
            }
        };
        let b = &mut self.bodies[i as usize];
        if !matches!(b, Body::Meta { .. }) {
            *b = Body::Meta {
                len: 0,
                head: [0; HEAD],
            };
        }
        if let Body::Meta { len: l, head: h } = b {
            *l = len;
            h[..head.len()].copy_from_slice(head);
        }
        i
    }
    pub fn body(&self, i: u32) -> &Body {
        &self.bodies[i as usize]
    }
    /// [`Pool::alloc`] of a copy of `p` and `b` (a packet from another partition's
    /// arena), written in place.
    pub fn alloc_copy(&mut self, p: &Pkt, b: &Body) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.pkts[i as usize].clone_from(p);
                self.bodies[i as usize].clone_from(b);
                i
            }
            None => self.alloc(p.clone(), b.clone()),
        }
    }
    pub fn free(&mut self, i: u32) {
        self.free.push(i);
    }
    /// Prefetches ([`touch`]) packet `i`'s header (and its body's lines if `body`).
    #[inline(always)]
    pub fn prefetch(&self, i: u32, body: bool) {
        if let Some(p) = self.pkts.get(i as usize) {
            touch(p.key);
        }
        if body {
            // Every line of a MetaRoCE body: the receiver copies its kept bytes.
            if let Some(Body::Meta { len, head }) = self.bodies.get(i as usize) {
                touch(u64::from(*len) ^ u64::from(head[63]) ^ u64::from(head[HEAD - 1]));
            }
        }
    }
    pub fn get(&self, i: u32) -> &Pkt {
        &self.pkts[i as usize]
    }
    pub fn get_mut(&mut self, i: u32) -> &mut Pkt {
        &mut self.pkts[i as usize]
    }
    /// Packets alive (in queues, on wires).
    pub fn live(&self) -> usize {
        self.pkts.len() - self.free.len()
    }
}
