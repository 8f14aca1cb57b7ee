//! What a baseline sender QP is made of besides its loss recovery, shared by RoCEv2
//! ([`crate::roce`]) and IRN ([`crate::irn`]): the posted messages and their PSN ranges
//! ([`MsgQueue`]), and the transmit gate ([`Limiter`]): the DCQCN reaction point and the
//! NIC's per-QP rate limiter, which holds the next packet back by `8·wire/Rc` after a
//! packet of `wire` bytes left.

use crate::dcqcn::{DcqcnParams, Rp};
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug)]
struct Msg {
    first: u32,
    npkts: u32,
    len: u64,
}

/// One packet's place in its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PktInfo {
    pub len: u32,
    pub msg: u32,
    pub first: bool,
    pub last: bool,
}

/// The posted messages of a sender and their PSN ranges (shared with IRN).
#[derive(Clone, Debug)]
pub struct MsgQueue {
    mtu: u32,
    msgs: VecDeque<Msg>,
    /// Messages retired from the front (fully acknowledged).
    retired: u32,
    end: u32,
    /// Payload bytes acknowledged.
    pub acked_bytes: u64,
}

impl MsgQueue {
    pub fn new(mtu: u32) -> MsgQueue {
        assert!(mtu > 0);
        MsgQueue {
            mtu,
            msgs: VecDeque::new(),
            retired: 0,
            end: 0,
            acked_bytes: 0,
        }
    }

    /// Append a message of `len` bytes; returns its number (from 0, per QP).
    pub fn post(&mut self, len: u64) -> u32 {
        let npkts = len.div_ceil(u64::from(self.mtu)).max(1);
        let npkts = u32::try_from(npkts).expect("message too long for u32 PSNs");
        let first = self.end;
        self.end = first.checked_add(npkts).expect("PSN space exhausted");
        self.msgs.push_back(Msg { first, npkts, len });
        self.retired + self.msgs.len() as u32 - 1
    }

    /// One past the last PSN posted.
    pub fn end(&self) -> u32 {
        self.end
    }

    /// Messages fully acknowledged.
    pub fn retired(&self) -> u32 {
        self.retired
    }

    fn last_len(&self, m: &Msg) -> u32 {
        (m.len - u64::from(m.npkts - 1) * u64::from(self.mtu)) as u32
    }

    /// The packet at `psn` (which must be posted and not yet acknowledged).
    pub fn pkt(&self, psn: u32) -> PktInfo {
        let i = self.msgs.partition_point(|m| m.first + m.npkts <= psn);
        let m = &self.msgs[i];
        debug_assert!(psn >= m.first && psn < m.first + m.npkts);
        let off = psn - m.first;
        let last = off + 1 == m.npkts;
        PktInfo {
            len: if last { self.last_len(m) } else { self.mtu },
            msg: self.retired + i as u32,
            first: off == 0,
            last,
        }
    }

    /// PSNs below `una` are acknowledged (was `old`): count their bytes, retire the
    /// messages they complete.
    pub fn ack(&mut self, old: u32, una: u32) {
        let mut p = old;
        for m in self.msgs.iter() {
            if p >= una {
                break;
            }
            let end = m.first + m.npkts;
            if end <= p {
                continue;
            }
            let hi = una.min(end);
            let full = hi - p;
            let mut b = u64::from(full) * u64::from(self.mtu);
            if hi == end {
                b = b - u64::from(self.mtu) + u64::from(self.last_len(m));
            }
            self.acked_bytes += b;
            p = hi;
        }
        while let Some(m) = self.msgs.front() {
            if m.first + m.npkts <= una {
                self.msgs.pop_front();
                self.retired += 1;
            } else {
                break;
            }
        }
    }
}

/// A sender's transmit gate: the DCQCN reaction point and the rate limiter that
/// spaces departures by `8·wire/Rc` (shared with IRN).
#[derive(Clone, Debug)]
pub struct Limiter {
    pub rp: Option<Rp>,
    next_tx: f64,
    last_tx: u64,
    last_wire: u32,
    last_timer: Option<u64>,
}

impl Limiter {
    pub fn new(p: Option<DcqcnParams>) -> Limiter {
        Limiter {
            rp: p.map(Rp::new),
            next_tx: 0.0,
            last_tx: 0,
            last_wire: 0,
            last_timer: None,
        }
    }

    /// May a packet leave at `now`?
    pub fn ready(&self, now: u64) -> bool {
        self.rp.is_none() || now as f64 >= self.next_tx
    }

    fn gap(&self, wire: u32) -> f64 {
        match &self.rp {
            Some(rp) => f64::from(wire) * 8e9 / rp.rate_bps(),
            None => 0.0,
        }
    }

    fn rate_changed(&mut self) {
        if self.last_wire > 0 {
            self.next_tx = self.last_tx as f64 + self.gap(self.last_wire);
        }
    }

    /// A packet of `wire` bytes left at `now`.
    pub fn sent(&mut self, now: u64, wire: u32) {
        self.last_tx = now;
        self.last_wire = wire;
        self.next_tx = now as f64 + self.gap(wire);
        if let Some(rp) = &mut self.rp {
            if rp.on_sent(u64::from(wire)) {
                self.rate_changed();
            }
        }
    }

    pub fn on_cnp(&mut self, now: u64) {
        if let Some(rp) = &mut self.rp {
            if rp.on_cnp(now) {
                self.rate_changed();
            }
        }
    }

    pub fn on_timer(&mut self, now: u64) {
        self.last_timer = Some(now);
        if let Some(rp) = &mut self.rp {
            if rp.on_timer(now) {
                self.rate_changed();
            }
        }
    }

    /// DCQCN timers and, if the sender has a packet waiting, the pacer's next departure
    /// (reported once: after an `on_timer` at or past it the engine is expected to poll
    /// whenever the NIC has room, and no timer repeats it).
    pub fn next_timer(&self, has_data: bool) -> Option<u64> {
        let pace = if has_data && self.rp.is_some() {
            let t = self.next_tx.ceil() as u64;
            self.last_timer.is_none_or(|l| t > l).then_some(t)
        } else {
            None
        };
        let rp = self.rp.as_ref().and_then(|r| r.next_timer());
        min_opt(pace, rp)
    }

    /// Current rate limit, bits/s (None without DCQCN).
    pub fn rate_bps(&self) -> Option<f64> {
        self.rp.as_ref().map(|r| r.rate_bps())
    }
}

pub fn min_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MTU: u32 = 4096;

    #[test]
    fn message_bookkeeping() {
        let mut q = MsgQueue::new(MTU);
        assert_eq!(q.post(10_000), 0); // 3 packets: 4096 4096 1808
        assert_eq!(q.post(0), 1); // 1 packet of 0 bytes
        assert_eq!(q.post(4096), 2); // 1 packet
        assert_eq!(q.end(), 5);
        let p = q.pkt(2);
        assert_eq!((p.len, p.msg, p.first, p.last), (1808, 0, false, true));
        let p = q.pkt(3);
        assert_eq!((p.len, p.msg, p.first, p.last), (0, 1, true, true));
        q.ack(0, 2);
        assert_eq!(q.acked_bytes, 8192);
        assert_eq!(q.retired(), 0);
        q.ack(2, 4);
        assert_eq!(q.acked_bytes, 10_000);
        assert_eq!(q.retired(), 2);
        assert_eq!(q.pkt(4).msg, 2);
        q.ack(4, 5);
        assert_eq!(q.acked_bytes, 14_096);
        assert_eq!(q.retired(), 3);
    }
}
