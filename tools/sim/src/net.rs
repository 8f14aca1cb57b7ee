//! The fabric: P independent leaf–spine planes, output-queued links with rate, delay,
//! queue limit, ECN marking threshold and random loss, ECMP by 5-tuple hash.

use std::collections::VecDeque;

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

pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What a packet carries.
#[derive(Clone, Debug)]
pub enum Body {
    /// A MetaRoCE datagram (UDP payload bytes).
    Meta(Box<[u8]>),
    /// A baseline (RoCEv2-style) packet.
    Base(BasePkt),
}

/// Baseline packet: one path, go-back-N, cumulative ACK / NAK.
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

#[derive(Clone, Debug)]
pub struct Pkt {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub wire: u32,
    pub ect: bool,
    pub ce: bool,
    pub body: Body,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeId {
    Host(u32),
    Leaf(u8, u16),
    Spine(u8, u16),
}

#[derive(Debug)]
pub struct Link {
    pub to: NodeId,
    /// Picoseconds per byte.
    pub ps_per_byte: u64,
    pub delay: u64,
    pub qlimit: u64,
    pub ecn_k: u64,
    pub loss: f64,
    pub up: bool,
    pub queue: VecDeque<Pkt>,
    pub qbytes: u64,
    pub busy: bool,
    pub drops: u64,
}

/// Topology parameters.
#[derive(Clone, Copy, Debug)]
pub struct Topo {
    pub planes: u8,
    pub leaves: u16,
    pub spines: u16,
    pub hosts_per_leaf: u16,
    pub gbps: u64,
    pub delay_ns: u64,
    pub qlimit: u64,
    pub ecn_k: u64,
}

impl Topo {
    pub fn hosts(&self) -> u32 {
        u32::from(self.leaves) * u32::from(self.hosts_per_leaf)
    }
    pub fn leaf_of(&self, h: u32) -> u16 {
        (h / u32::from(self.hosts_per_leaf)) as u16
    }
}

pub struct Fabric {
    pub topo: Topo,
    pub links: Vec<Link>,
    pub salt: u64,
}

impl Fabric {
    pub fn new(topo: Topo, seed: u64) -> Fabric {
        let mut f = Fabric {
            topo,
            links: Vec::new(),
            salt: seed,
        };
        let ps = 8000 / topo.gbps.max(1);
        let n = f.nlinks();
        for i in 0..n {
            let to = f.link_target(i);
            f.links.push(Link {
                to,
                ps_per_byte: ps,
                delay: topo.delay_ns,
                qlimit: topo.qlimit,
                ecn_k: topo.ecn_k,
                loss: 0.0,
                up: true,
                queue: VecDeque::new(),
                qbytes: 0,
                busy: false,
                drops: 0,
            });
        }
        f
    }

    fn per_plane(&self) -> usize {
        let t = &self.topo;
        let h = t.hosts() as usize;
        let ls = usize::from(t.leaves) * usize::from(t.spines);
        2 * h + 2 * ls
    }
    fn nlinks(&self) -> usize {
        self.per_plane() * usize::from(self.topo.planes)
    }
    pub fn host_up(&self, p: u8, h: u32) -> usize {
        usize::from(p) * self.per_plane() + h as usize
    }
    pub fn host_down(&self, p: u8, h: u32) -> usize {
        usize::from(p) * self.per_plane() + self.topo.hosts() as usize + h as usize
    }
    pub fn up(&self, p: u8, l: u16, s: u16) -> usize {
        let t = &self.topo;
        usize::from(p) * self.per_plane()
            + 2 * t.hosts() as usize
            + usize::from(l) * usize::from(t.spines)
            + usize::from(s)
    }
    pub fn down(&self, p: u8, s: u16, l: u16) -> usize {
        let t = &self.topo;
        usize::from(p) * self.per_plane()
            + 2 * t.hosts() as usize
            + usize::from(t.leaves) * usize::from(t.spines)
            + usize::from(s) * usize::from(t.leaves)
            + usize::from(l)
    }
    fn link_target(&self, i: usize) -> NodeId {
        let t = self.topo;
        let pp = self.per_plane();
        let p = (i / pp) as u8;
        let mut r = i % pp;
        let h = t.hosts() as usize;
        if r < h {
            return NodeId::Leaf(p, t.leaf_of(r as u32));
        }
        r -= h;
        if r < h {
            return NodeId::Host(r as u32);
        }
        r -= h;
        let ls = usize::from(t.leaves) * usize::from(t.spines);
        if r < ls {
            return NodeId::Spine(p, (r % usize::from(t.spines)) as u16);
        }
        r -= ls;
        NodeId::Leaf(p, (r % usize::from(t.leaves)) as u16)
    }

    /// The plane a host puts a packet on: chosen by its UDP source port.
    pub fn plane_of(&self, sport: u16) -> u8 {
        (u32::from(sport) % u32::from(self.topo.planes)) as u8
    }

    /// Next link for a packet at `node`.
    pub fn route(&self, node: NodeId, pkt: &Pkt) -> usize {
        match node {
            NodeId::Host(h) => self.host_up(self.plane_of(pkt.sport), h),
            NodeId::Leaf(p, l) => {
                if self.topo.leaf_of(pkt.dst) == l {
                    self.host_down(p, pkt.dst)
                } else {
                    // ECMP: hash of the 5-tuple (src, dst, sport, dport, proto) and a per-switch salt.
                    let key = (u64::from(pkt.src) << 32 | u64::from(pkt.dst))
                        ^ (u64::from(pkt.sport) << 16 | 4792) << 7
                        ^ 17;
                    let hsh = mix(key ^ mix(self.salt ^ (u64::from(p) << 20 | u64::from(l))));
                    let s = (hsh % u64::from(self.topo.spines)) as u16;
                    self.up(p, l, s)
                }
            }
            NodeId::Spine(p, s) => self.down(p, s, self.topo.leaf_of(pkt.dst)),
        }
    }
}
