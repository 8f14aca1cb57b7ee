//! The event queue: events ordered by time (ns), ties in insertion order, so a run is
//! deterministic.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// What happens at an event's time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ev {
    /// A link's transmitter finished a packet and has more to send.
    LinkDone(u32),
    /// Packet (arena id) arrives at the far end of a link.
    Arrive(u32, u32),
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

/// log2 of a calendar bucket's width, ns.
const SHIFT: u32 = 6;
/// Buckets in the wheel (a power of two): the wheel spans 4096 × 64 ns = 262 µs.
const WHEEL: u64 = 4096;

/// Min-queue of events by (time, insertion sequence): a calendar queue (R. Brown,
/// "Calendar queues", CACM 1988, with a fixed bucket width). Events of the current
/// bucket are in a small heap; later ones within the wheel's span in unsorted
/// buckets; later still in an overflow heap. Nearly all events of a packet-level run
/// fall a few µs ahead, so push and pop cost a few comparisons, not a deep heap's
/// cache misses.
pub struct Queue {
    seq: u64,
    /// Bucket (time >> SHIFT) being served.
    bucket: u64,
    cur: BinaryHeap<Event>,
    wheel: Vec<Vec<Event>>,
    in_wheel: usize,
    far: BinaryHeap<Event>,
}

impl Default for Queue {
    fn default() -> Queue {
        Queue {
            seq: 0,
            bucket: 0,
            cur: BinaryHeap::new(),
            wheel: (0..WHEEL).map(|_| Vec::new()).collect(),
            in_wheel: 0,
            far: BinaryHeap::new(),
        }
    }
}

impl Queue {
    pub fn push(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        let e = Event {
            key: u128::from(t) << 64 | u128::from(self.seq),
            ev,
        };
        let b = t >> SHIFT;
        if b <= self.bucket {
            self.cur.push(e);
        } else if b < self.bucket + WHEEL {
            self.wheel[(b % WHEEL) as usize].push(e);
            self.in_wheel += 1;
        } else {
            self.far.push(e);
        }
    }

    /// Makes `cur` hold the earliest events, if there are any.
    fn settle(&mut self) {
        while self.cur.is_empty() {
            let far = self.far.peek().map(|e| (e.key >> 64) as u64 >> SHIFT);
            if self.in_wheel == 0 {
                match far {
                    Some(b) => self.bucket = b,
                    None => return,
                }
            } else {
                self.bucket += 1;
            }
            let slot = &mut self.wheel[(self.bucket % WHEEL) as usize];
            self.in_wheel -= slot.len();
            self.cur.extend(slot.drain(..));
            while self.far.peek().map(|e| (e.key >> 64) as u64 >> SHIFT) == Some(self.bucket) {
                let e = self.far.pop().expect("peeked");
                self.cur.push(e);
            }
        }
    }

    /// Time of the earliest event.
    pub fn peek_time(&mut self) -> Option<u64> {
        self.settle();
        self.cur.peek().map(|e| (e.key >> 64) as u64)
    }
    pub fn pop(&mut self) -> Option<(u64, Ev)> {
        self.settle();
        self.cur.pop().map(|e| ((e.key >> 64) as u64, e.ev))
    }
    pub fn len(&self) -> usize {
        self.cur.len() + self.in_wheel + self.far.len()
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
mod timer_tests {
    use super::*;

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
            let min = want
                .iter()
                .enumerate()
                .filter(|(_, x)| **x != u64::MAX)
                .map(|(i, x)| (*x, i as u32))
                .min();
            assert_eq!(t.peek(), min);
        }
    }
}
