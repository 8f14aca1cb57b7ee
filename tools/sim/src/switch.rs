//! Switch models: output-queued ports over a shared buffer with dynamic thresholds, ECN
//! marking per queue, PFC, and the per-port counters the engine exposes.
//!
//! Units: bytes, ns, probabilities in [0, 1].
//!
//! * **Shared buffer, dynamic thresholds** (Choudhury & Hahne, "Dynamic queue length
//!   thresholds for shared-memory packet switches", IEEE/ACM ToN 1998): a switch has
//!   `B` bytes; a queue may accept a packet while its length `q < alpha × (B − used)`.
//!   One queue alone settles at `alpha/(1+alpha) × B`; `n` congested queues at
//!   `alpha/(1+n·alpha) × B` each. `B = buffer_per_tbps × switch capacity`: Broadcom
//!   Tomahawk has 16 MB for 3.2 Tb/s (5 MB/Tb/s), Tomahawk 3 32 MB for 12.8 Tb/s
//!   (2.5 MB/Tb/s); the default is 2.5 MB per Tb/s. `alpha` defaults to 1 (SONiC's
//!   buffer profiles write it as `dynamic_th` = log2 alpha, 0 being common).
//! * **ECN** (RED on the instantaneous queue, as DCQCN configures switches; Zhu et al.,
//!   "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015): a packet
//!   enqueued behind `q` bytes of its queue is CE-marked with probability 0 for
//!   `q ≤ kmin`, `pmax × (q − kmin)/(kmax − kmin)` up to `kmax`, 1 above. `kmin == kmax`
//!   is the step marking of DCTCP (mark when `q > K`). DCQCN's published settings are
//!   kmin 5 KB, kmax 200 KB, pmax 1 %.
//! * **PFC** (IEEE 802.1Qbb) for the data class: each ingress port accounts the bytes it
//!   brought in that are still in the switch. Above its XOFF threshold (dynamic,
//!   `alpha_ingress × free shared buffer`) it sends XOFF upstream; further arrivals go
//!   to the port's **headroom**, reserved out of `B`: `2 × delay × rate + 2 × MTU`
//!   (the bytes in flight during the pause frame's trip and the upstream's frame in
//!   transmission). XON when the headroom is empty and the port is `hysteresis` below
//!   the threshold. A pause frame takes the link's delay to reach the upstream
//!   transmitter, which then finishes its current frame and stops sending data until
//!   XON (frames are modelled as XOFF/XON, not pause quanta). Lossless data is never
//!   dropped at egress (the ingress accounting bounds it); a headroom overflow drop is
//!   counted separately and means mis-sized headroom.
//! * **Classes**: data (lossless under PFC) and control (ACK, NAK, CNP, lossy, never
//!   paused). With `strict_ctrl` control has its own queue served first (the usual
//!   deployment: CNPs and ACKs in a high-priority class); otherwise both share one FIFO.
//! * A packet leaves the buffer when its transmission starts (the MAC's transmit FIFO
//!   is not counted).

use crate::net::{Rng, CTRL, DATA};
use std::collections::VecDeque;

/// RED / step ECN marking on a queue's instantaneous length (bytes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ecn {
    pub kmin: u64,
    pub kmax: u64,
    pub pmax: f64,
}

impl Ecn {
    /// DCTCP-style step: mark when the queue holds more than `k` bytes.
    pub fn step(k: u64) -> Ecn {
        Ecn {
            kmin: k,
            kmax: k,
            pmax: 1.0,
        }
    }
    /// DCQCN's published switch settings: kmin 5 KB, kmax 200 KB, pmax 1 %.
    #[allow(dead_code)] // API for issue 13's baselines and workloads (roce.rs, irn.rs, workload.rs)
    pub fn dcqcn() -> Ecn {
        Ecn {
            kmin: 5_000,
            kmax: 200_000,
            pmax: 0.01,
        }
    }
    /// Whether a packet enqueued behind `q` bytes is marked.
    pub fn mark(&self, q: u64, rng: &mut Rng) -> bool {
        if q <= self.kmin {
            false
        } else if q > self.kmax {
            true
        } else {
            rng.unit() < self.pmax * (q - self.kmin) as f64 / (self.kmax - self.kmin) as f64
        }
    }
}

/// PFC parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pfc {
    /// XOFF threshold of an ingress port: `alpha × free shared buffer`.
    pub alpha: f64,
    /// XON this many bytes below the threshold.
    pub hysteresis: u64,
    /// Largest frame on the wire (sizes headroom).
    pub mtu_wire: u64,
}

/// A run's switch configuration (every switch alike).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SwitchConfig {
    /// Shared buffer per Tb/s of switch capacity, bytes; 0: unlimited (only `qlimit`).
    pub buffer_per_tbps: u64,
    /// Dynamic-threshold alpha of the egress queues (lossy).
    pub alpha: f64,
    /// Static cap per queue, bytes (u64::MAX: none).
    pub qlimit: u64,
    pub ecn: Ecn,
    /// PFC on the data class; `None`: lossy (drops at the threshold).
    pub pfc: Option<Pfc>,
    /// Control packets in their own strict-priority queue.
    pub strict_ctrl: bool,
}

impl SwitchConfig {
    /// The original simulator's ports: one FIFO of `qlimit` bytes each, no shared
    /// buffer, step ECN at `k`.
    #[cfg_attr(not(test), allow(dead_code))] // the engine tests' fabric
    pub fn legacy(qlimit: u64, k: u64) -> SwitchConfig {
        SwitchConfig {
            buffer_per_tbps: 0,
            alpha: 1.0,
            qlimit,
            ecn: Ecn::step(k),
            pfc: None,
            strict_ctrl: false,
        }
    }
    /// A Tomahawk-class shared-buffer switch (2.5 MB per Tb/s, alpha 1), lossy, with
    /// the given ECN, control in a strict-priority queue.
    pub fn shared(ecn: Ecn) -> SwitchConfig {
        SwitchConfig {
            buffer_per_tbps: 2_500_000,
            alpha: 1.0,
            qlimit: u64::MAX,
            ecn,
            pfc: None,
            strict_ctrl: true,
        }
    }
    /// The same with PFC (ingress alpha 1, hysteresis 2 MTUs).
    pub fn lossless(ecn: Ecn, mtu_wire: u64) -> SwitchConfig {
        SwitchConfig {
            pfc: Some(Pfc {
                alpha: 1.0,
                hysteresis: 2 * mtu_wire,
                mtu_wire,
            }),
            ..SwitchConfig::shared(ecn)
        }
    }
    /// PFC headroom of an ingress port fed by a link of `delay` ns at `ps_per_byte`.
    pub fn headroom(&self, delay: u64, ps_per_byte: u64) -> u64 {
        match self.pfc {
            Some(p) => 2 * delay * 1000 / ps_per_byte.max(1) + 2 * p.mtu_wire,
            None => 0,
        }
    }
}

/// A switch's shared buffer.
#[derive(Clone, Copy, Debug, Default)]
pub struct Buffer {
    /// Shared pool, bytes (after headroom reservations); u64::MAX: unlimited.
    pub size: u64,
    /// Bytes in the shared pool.
    pub used: u64,
    /// Peak of `used`.
    pub peak: u64,
}

impl Buffer {
    pub fn free(&self) -> u64 {
        self.size.saturating_sub(self.used)
    }
    /// Dynamic threshold: whether a queue (or ingress port) holding `q` bytes may take
    /// `len` more.
    pub fn admits(&self, q: u64, len: u64, alpha: f64) -> bool {
        if self.size == u64::MAX {
            return true;
        }
        let free = self.free();
        len <= free && (q as f64) < alpha * free as f64
    }
    pub fn take(&mut self, len: u64) {
        self.used += len;
        self.peak = self.peak.max(self.used);
    }
    pub fn give(&mut self, len: u64) {
        self.used -= len;
    }
}

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drop {
    /// Buffer threshold (lossy) or static queue limit.
    Buffer,
    /// PFC headroom exceeded (mis-sized headroom).
    Headroom,
    /// The link is down, or a stale route sent the packet to it, or no route.
    Failure,
    /// Random loss on a link that stays up.
    Gray,
}

/// Counters of one link (its transmitter, its output queue, and its far end's ingress).
/// The per-packet counters come first (see [`Port`]'s layout).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct PortStats {
    /// Bytes and packets transmitted (wire bytes).
    pub tx_bytes: u64,
    pub tx_pkts: u64,
    pub ecn_marks: u64,
    /// Peak bytes waiting in the output queue (both classes).
    pub peak_q: u64,
    pub drop_buffer: u64,
    pub drop_headroom: u64,
    pub drop_failure: u64,
    pub drop_gray: u64,
    /// XOFF / XON frames the far end sent to pause this link's transmitter.
    pub xoff_frames: u64,
    pub xon_frames: u64,
    /// Time this link's transmitter spent paused, ns.
    pub paused_ns: u64,
}

impl PortStats {
    pub fn drops(&self) -> u64 {
        self.drop_buffer + self.drop_headroom + self.drop_failure + self.drop_gray
    }
    /// Adds `o`'s counts (the same link as another partition counted it,
    /// [`crate::parallel`]); the peak is the larger.
    pub fn merge(&mut self, o: &PortStats) {
        self.tx_bytes += o.tx_bytes;
        self.tx_pkts += o.tx_pkts;
        self.ecn_marks += o.ecn_marks;
        self.peak_q = self.peak_q.max(o.peak_q);
        self.drop_buffer += o.drop_buffer;
        self.drop_headroom += o.drop_headroom;
        self.drop_failure += o.drop_failure;
        self.drop_gray += o.drop_gray;
        self.xoff_frames += o.xoff_frames;
        self.xon_frames += o.xon_frames;
        self.paused_ns += o.paused_ns;
    }
    pub fn count(&mut self, why: Drop) {
        match why {
            Drop::Buffer => self.drop_buffer += 1,
            Drop::Headroom => self.drop_headroom += 1,
            Drop::Failure => self.drop_failure += 1,
            Drop::Gray => self.drop_gray += 1,
        }
    }
}

/// A packet waiting in an output queue, with the header fields its transmission needs,
/// so the transmitter does not read the packet arena.
#[derive(Clone, Copy, Debug)]
pub struct Queued {
    pub pid: u32,
    /// The link it arrived on (ingress accounting).
    pub in_link: u32,
    /// Bytes on the wire.
    pub wire: u32,
    /// [`DATA`] or [`CTRL`].
    pub class: u8,
}

/// Run-time state of one link. Laid out (`repr(C)`, cache-line aligned) with what every
/// packet touches first: the queues, their lengths, the transmitter, the link's loss
/// knobs and the per-packet counters fill the first three cache lines; PFC and failure
/// state, read rarely, come after.
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub struct Port {
    /// Output queues by class ([`DATA`], [`CTRL`]).
    pub q: [VecDeque<Queued>; 2],
    pub qbytes: [u64; 2],
    /// The transmitter is busy until then (ns).
    pub busy_until: u64,
    /// Gray failure: probability a transmitted packet is lost.
    pub loss: f64,
    /// Reordering: probability a packet takes `reorder_ns` extra ns.
    pub reorder_p: f64,
    pub reorder_ns: u64,
    /// A transmit-done event is scheduled.
    pub done_pending: bool,
    /// Data transmission paused by PFC (since `paused_at`).
    pub paused: bool,
    /// Up (a failed link drops everything sent to it).
    pub up: bool,
    /// This link as its far switch's ingress port: XOFF sent.
    pub xoff: bool,
    pub stats: PortStats,
    pub paused_at: u64,
    /// When it failed (routing learns of it `reconverge` ns later).
    pub failed_at: u64,
    /// This link as its far switch's ingress port: data bytes in the shared pool and
    /// in headroom.
    pub ing_shared: u64,
    pub ing_hdrm: u64,
    /// Headroom of that ingress port, bytes.
    pub headroom: u64,
}

impl Port {
    pub fn new() -> Port {
        Port {
            up: true,
            ..Port::default()
        }
    }
    /// The queue a packet of `class` goes to.
    pub fn queue_of(class: u8, strict_ctrl: bool) -> usize {
        if class == CTRL && strict_ctrl {
            1
        } else {
            0
        }
    }
    pub fn waiting(&self) -> u64 {
        self.qbytes[0] + self.qbytes[1]
    }
    /// The queue to serve next, if any may send (control first; data unless paused).
    /// With one shared FIFO (queue 0) a pause stops control packets queued in it too.
    pub fn eligible(&self) -> Option<usize> {
        if !self.q[1].is_empty() {
            Some(1)
        } else if !self.q[0].is_empty() && !self.paused {
            Some(0)
        } else {
            None
        }
    }
}

/// Whether PFC applies to a packet of `class`.
pub fn lossless(cfg: &SwitchConfig, class: u8) -> bool {
    cfg.pfc.is_some() && class == DATA
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_threshold_caps_one_queue() {
        for alpha in [0.5, 1.0, 2.0, 8.0] {
            let mut b = Buffer {
                size: 10_000_000,
                ..Buffer::default()
            };
            let mut q = 0u64;
            while b.admits(q, 1000, alpha) {
                b.take(1000);
                q += 1000;
            }
            let cap = alpha / (1.0 + alpha) * 10_000_000.0;
            assert!(q as f64 <= cap + 1000.0, "alpha {alpha}: {q} > {cap}");
            assert!(q as f64 >= cap - 1000.0, "alpha {alpha}: {q} < {cap}");
        }
    }

    #[test]
    fn dynamic_threshold_shares_between_queues() {
        // Two queues filled alternately settle at alpha/(1+2 alpha) each.
        let mut b = Buffer {
            size: 1_000_000,
            ..Buffer::default()
        };
        let mut q = [0u64; 2];
        for _ in 0..10_000 {
            for x in &mut q {
                if b.admits(*x, 100, 1.0) {
                    b.take(100);
                    *x += 100;
                }
            }
        }
        for x in q {
            assert!((x as f64 - 1_000_000.0 / 3.0).abs() < 1000.0, "{x}");
        }
    }

    #[test]
    fn ecn_red_and_step() {
        let mut rng = Rng::new(1);
        let s = Ecn::step(100);
        assert!(!s.mark(100, &mut rng) && s.mark(101, &mut rng));
        let r = Ecn {
            kmin: 0,
            kmax: 1000,
            pmax: 0.5,
        };
        let n = (0..100_000).filter(|_| r.mark(500, &mut rng)).count();
        assert!((n as f64 / 100_000.0 - 0.25).abs() < 0.01, "{n}");
        assert!(r.mark(1001, &mut rng));
    }
}
