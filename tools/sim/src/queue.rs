//! The event queue: events ordered by time (ns), ties in insertion order, so a run is
//! deterministic.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// What happens at an event's time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ev {
    /// A link's transmitter finished a packet and has more to send.
    LinkDone(u32),
    /// Packet (arena id) arrives at the far end of the link it is on
    /// ([`crate::net::Pkt::in_link`]); one word, so an event is 8 bytes.
    Arrive(u32),
    /// A PFC frame reaches a link's transmitter: pause (true) or resume.
    Pause(u32, bool),
    /// An endpoint starts (a flow with a start time).
    Start(u32),
    /// A failure set (index) goes down / comes back.
    Fail(u32),
    #[allow(dead_code)] // constructed by Sim::restore_at, an API for workloads
    Restore(u32),
    /// Routing of a plane reconverges.
    Reconverge(u8),
    /// Periodic measurement.
    Sample,
    /// A workload transfer (index) may start: its start time has come.
    Post(u32),
}

// Eight bytes: a nanosecond bucket of the wheel holds a few dozen at full scale.
const _: () = assert!(std::mem::size_of::<Ev>() == 8);

#[derive(Clone, Copy, Debug)]
struct Event {
    key: u128,
    ev: Ev,
}
impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    fn cmp(&self, o: &Self) -> Ordering {
        o.key.cmp(&self.key)
    }
}

/// Slots in the wheel (a power of two): one per ns, so the wheel spans 2.05 µs, more
/// than a hop (serialisation plus 1 µs of propagation).
const WHEEL: usize = 2048;
const WORDS: usize = WHEEL / 64;

/// Min-queue of events by (time, insertion sequence): a calendar queue (R. Brown,
/// "Calendar queues", CACM 1988) with one bucket per nanosecond. A bucket holds the
/// events of one time only, in push order, which is their sequence order, so nothing
/// is sorted: push appends, pop reads the next entry. Events later than the wheel's
/// span wait in a heap (`far`); pushed for a time before the bucket being served (a
/// timer fired in between) in another (`early`). A bitmap of non-empty buckets finds
/// the next time in a sparse run.
///
/// Order: events of time `t` in `far` were all pushed before any of time `t` in the
/// wheel (the served time only grows, and an event goes to `far` only while `t` is at
/// least a wheel span ahead), so a bucket is `far`'s events of its time, then its own.
pub struct Queue {
    seq: u64,
    /// Time of the bucket being served (`cur`).
    now: u64,
    /// Events at `now`, in sequence order; `pos` is the next one.
    cur: Vec<Ev>,
    pos: usize,
    /// Events at times `now + 1 ..= now + WHEEL - 1`, slot `t % WHEEL`.
    wheel: Vec<Vec<Ev>>,
    /// Bit `i`: slot `i` is not empty.
    bits: [u64; WORDS],
    in_wheel: usize,
    /// Events at `now + WHEEL` or later.
    far: BinaryHeap<Event>,
    /// Events before `now`.
    early: BinaryHeap<Event>,
}

impl Default for Queue {
    fn default() -> Queue {
        Queue {
            seq: 0,
            now: 0,
            cur: Vec::new(),
            pos: 0,
            wheel: (0..WHEEL).map(|_| Vec::new()).collect(),
            bits: [0; WORDS],
            in_wheel: 0,
            far: BinaryHeap::new(),
            early: BinaryHeap::new(),
        }
    }
}

impl Queue {
    fn keyed(&mut self, t: u64, ev: Ev) -> Event {
        Event {
            key: u128::from(t) << 64 | u128::from(self.seq),
            ev,
        }
    }

    pub fn push(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        if t == self.now {
            self.cur.push(ev);
        } else if t > self.now && t - self.now < WHEEL as u64 {
            let i = (t % WHEEL as u64) as usize;
            self.wheel[i].push(ev);
            self.bits[i / 64] |= 1 << (i % 64);
            self.in_wheel += 1;
        } else if t > self.now {
            let e = self.keyed(t, ev);
            self.far.push(e);
        } else {
            let e = self.keyed(t, ev);
            self.early.push(e);
        }
    }

    /// The time of the first non-empty wheel slot after `now`, if any.
    fn next_in_wheel(&self) -> Option<u64> {
        if self.in_wheel == 0 {
            return None;
        }
        let start = ((self.now + 1) % WHEEL as u64) as usize;
        let (w0, b0) = (start / 64, start % 64);
        // The first word from bit b0, the other words, then the first word's low bits.
        for k in 0..=WORDS {
            let w = (w0 + k) % WORDS;
            let mut word = self.bits[w];
            if k == 0 {
                word &= !0u64 << b0;
            }
            if word != 0 {
                let i = w * 64 + word.trailing_zeros() as usize;
                let d = (i + WHEEL - start) % WHEEL + 1;
                return Some(self.now + d as u64);
            }
        }
        unreachable!("in_wheel > 0 but no bit set")
    }

    /// Makes `early` or `cur` hold the earliest events, if there are any.
    fn settle(&mut self) {
        if !self.early.is_empty() || self.pos < self.cur.len() {
            return;
        }
        let far = self.far.peek().map(|e| (e.key >> 64) as u64);
        let t = match (self.next_in_wheel(), far) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => return,
        };
        self.now = t;
        self.cur.clear();
        self.pos = 0;
        while self.far.peek().map(|e| (e.key >> 64) as u64) == Some(t) {
            let e = self.far.pop().expect("peeked");
            self.cur.push(e.ev);
        }
        let i = (t % WHEEL as u64) as usize;
        if self.bits[i / 64] & 1 << (i % 64) != 0 {
            self.bits[i / 64] &= !(1 << (i % 64));
            self.in_wheel -= self.wheel[i].len();
            if self.cur.is_empty() {
                std::mem::swap(&mut self.cur, &mut self.wheel[i]);
            } else {
                let slot = std::mem::take(&mut self.wheel[i]);
                self.cur.extend_from_slice(&slot);
                self.wheel[i] = slot;
                self.wheel[i].clear();
            }
        }
    }

    /// Time of the earliest event.
    pub fn peek_time(&mut self) -> Option<u64> {
        self.settle();
        if let Some(e) = self.early.peek() {
            return Some((e.key >> 64) as u64);
        }
        (self.pos < self.cur.len()).then_some(self.now)
    }
    pub fn pop(&mut self) -> Option<(u64, Ev)> {
        self.settle();
        if let Some(e) = self.early.pop() {
            return Some(((e.key >> 64) as u64, e.ev));
        }
        let ev = *self.cur.get(self.pos)?;
        self.pos += 1;
        Some((self.now, ev))
    }
    /// The event `k` places after the next one among those of the time being served,
    /// if there is one (to prefetch what it will touch).
    #[inline(always)]
    pub fn ahead(&self, k: usize) -> Option<Ev> {
        self.cur.get(self.pos + k).copied()
    }
    pub fn len(&self) -> usize {
        self.early.len() + (self.cur.len() - self.pos) + self.in_wheel + self.far.len()
    }
}

/// Endpoint deadlines: an indexed binary min-heap of (time, endpoint) with one entry per
/// endpoint, updated in place, so re-arming a timer leaves nothing stale behind.
#[derive(Default)]
pub struct Timers {
    heap: Vec<(u64, u32)>,
    /// Per endpoint: its index in `heap`, or `u32::MAX`.
    pos: Vec<u32>,
}

const NONE: u32 = u32::MAX;

impl Timers {
    /// Sets endpoint `id`'s deadline (`u64::MAX`: none).
    pub fn set(&mut self, id: u32, t: u64) {
        let i = id as usize;
        if i >= self.pos.len() {
            self.pos.resize(i + 1, NONE);
        }
        let p = self.pos[i];
        if t == u64::MAX {
            if p != NONE {
                self.remove(p as usize);
            }
        } else if p == NONE {
            self.heap.push((t, id));
            self.pos[i] = (self.heap.len() - 1) as u32;
            self.up(self.heap.len() - 1);
        } else {
            let old = self.heap[p as usize].0;
            self.heap[p as usize].0 = t;
            if t < old {
                self.up(p as usize);
            } else {
                self.down(p as usize);
            }
        }
    }
    /// Lowers endpoint `id`'s deadline to `t` if that is earlier than its entry (or it
    /// has none); a later `t` leaves the entry as it is. The engine re-arms an
    /// endpoint's timer on nearly every packet, mostly to a later time (an RTO pushed
    /// back by an ACK): those re-arms cost nothing here, and an entry found earlier
    /// than its endpoint's real deadline when it comes up is moved then ([`Sim::run`]
    /// keeps the real deadline; [`Timers::set`]).
    ///
    /// [`Sim::run`]: crate::sim::Sim::run
    pub fn lower(&mut self, id: u32, t: u64) {
        let p = self.pos.get(id as usize).copied().unwrap_or(NONE);
        if p == NONE || t < self.heap[p as usize].0 {
            self.set(id, t);
        }
    }
    /// The earliest deadline.
    pub fn peek(&self) -> Option<(u64, u32)> {
        self.heap.first().copied()
    }
    fn remove(&mut self, p: usize) {
        let last = self.heap.len() - 1;
        self.swap(p, last);
        let (_, id) = self.heap.pop().expect("non-empty");
        self.pos[id as usize] = NONE;
        if p < self.heap.len() {
            self.down(p);
            self.up(p);
        }
    }
    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.pos[self.heap[a].1 as usize] = a as u32;
        self.pos[self.heap[b].1 as usize] = b as u32;
    }
    fn up(&mut self, mut i: usize) {
        while i > 0 {
            let p = (i - 1) / 2;
            if self.heap[i] >= self.heap[p] {
                break;
            }
            self.swap(i, p);
            i = p;
        }
    }
    fn down(&mut self, mut i: usize) {
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < self.heap.len() && self.heap[l] < self.heap[m] {
                m = l;
            }
            if r < self.heap.len() && self.heap[r] < self.heap[m] {
                m = r;
            }
            if m == i {
                return;
            }
            self.swap(i, m);
            i = m;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_order_then_fifo() {
        let mut q = Queue::default();
        q.push(5, Ev::Start(1));
        q.push(3, Ev::Start(2));
        q.push(5, Ev::Start(3));
        q.push(3, Ev::Start(4));
        let v: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            v,
            [
                (3, Ev::Start(2)),
                (3, Ev::Start(4)),
                (5, Ev::Start(1)),
                (5, Ev::Start(3))
            ]
        );
    }

    #[test]
    fn calendar_matches_a_sorted_order() {
        // Times near and far, pushed while popping (never before the last popped).
        let mut q = Queue::default();
        let mut rng = crate::net::Rng::new(3);
        let mut now = 0;
        let mut all = Vec::new();
        let mut got = Vec::new();
        let mut n = 0u32;
        for round in 0..20_000 {
            for _ in 0..(rng.next_u64() % 3) {
                let dt = match rng.next_u64() % 4 {
                    0 => 0,
                    1 => rng.next_u64() % 100,
                    2 => rng.next_u64() % 5_000,
                    _ => rng.next_u64() % 2_000_000,
                };
                q.push(now + dt, Ev::Start(n));
                all.push((now + dt, n));
                n += 1;
            }
            if round % 2 == 0 {
                if let Some((t, Ev::Start(i))) = q.pop() {
                    assert!(t >= now);
                    now = t;
                    got.push((t, i));
                }
            }
        }
        while let Some((t, Ev::Start(i))) = q.pop() {
            got.push((t, i));
        }
        all.sort();
        assert_eq!(got, all);
    }
}

#[cfg(test)]
mod order_tests {
    use super::*;

    #[test]
    fn early_far_and_wheel_keep_time_then_push_order() {
        // After a peek has moved the served bucket ahead, pushes before it (a timer
        // fired in between) and pushes of one time into `far` and later into the wheel.
        let mut q = Queue::default();
        let mut rng = crate::net::Rng::new(11);
        let mut all = Vec::new();
        let mut got = Vec::new();
        let mut now = 0u64;
        for n in 0..50_000u32 {
            let t = match rng.next_u64() % 5 {
                0 => now,
                1 => now + rng.next_u64() % 3,
                2 => now + rng.next_u64() % 3_000,
                3 => now + WHEEL as u64 + rng.next_u64() % 3,
                _ => now + rng.next_u64() % 50_000,
            };
            q.push(t, Ev::Start(n));
            all.push((t, n));
            if rng.next_u64().is_multiple_of(3) {
                // Peek (moves the served bucket), then maybe pop.
                if let Some(pt) = q.peek_time() {
                    if rng.next_u64().is_multiple_of(2) {
                        let (t, ev) = q.pop().expect("peeked");
                        assert_eq!(t, pt);
                        let Ev::Start(i) = ev else { unreachable!() };
                        got.push((t, i));
                        now = t;
                    }
                }
            }
        }
        while let Some((t, Ev::Start(i))) = q.pop() {
            got.push((t, i));
        }
        assert_eq!(q.len(), 0);
        all.sort();
        assert_eq!(got, all);
    }
}

#[cfg(test)]
mod timer_tests {
    use super::*;

    /// The earliest (deadline, endpoint) of per-endpoint deadlines (`u64::MAX`: none).
    fn earliest(d: &[u64]) -> Option<(u64, u32)> {
        d.iter()
            .enumerate()
            .filter(|(_, x)| **x != u64::MAX)
            .map(|(i, x)| (*x, i as u32))
            .min()
    }

    #[test]
    fn lower_keeps_entries_at_or_before_the_real_deadline() {
        // The engine's use: `real` is the deadline, the heap may lag behind it (earlier);
        // fixing up the stale head fires exactly the real deadlines, in (time, id) order.
        let mut t = Timers::default();
        let mut rng = crate::net::Rng::new(9);
        let mut real = vec![u64::MAX; 40];
        let mut now = 0u64;
        for _ in 0..20_000 {
            let id = (rng.next_u64() % 40) as u32;
            let v = if rng.unit() < 0.1 {
                u64::MAX
            } else {
                now + 1 + rng.next_u64() % 500
            };
            real[id as usize] = v;
            if v != u64::MAX {
                t.lower(id, v);
            }
            if rng.unit() < 0.5 {
                // Fire the earliest real deadline, fixing stale entries first.
                while let Some((tt, i)) = t.peek() {
                    let r = real[i as usize];
                    if r == tt {
                        assert_eq!(Some((tt, i)), earliest(&real));
                        assert!(tt >= now);
                        now = tt;
                        t.set(i, u64::MAX);
                        real[i as usize] = u64::MAX;
                        break;
                    }
                    assert!(tt < r, "an entry is never later than its deadline");
                    t.set(i, r);
                }
            }
        }
    }

    #[test]
    fn timers_update_in_place() {
        let mut t = Timers::default();
        let mut rng = crate::net::Rng::new(7);
        let mut want = vec![u64::MAX; 50];
        for _ in 0..5000 {
            let id = (rng.next_u64() % 50) as u32;
            let v = if rng.unit() < 0.2 {
                u64::MAX
            } else {
                rng.next_u64() % 1000
            };
            t.set(id, v);
            want[id as usize] = v;
            assert_eq!(t.peek(), earliest(&want));
        }
    }
}
