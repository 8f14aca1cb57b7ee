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
    /// An endpoint's timer (valid if still the one armed for this time).
    Timer(u32),
    /// An endpoint starts (a flow with a start time).
    Start(u32),
    /// A failure set (index) goes down / comes back.
    Fail(u32),
    Restore(u32),
    /// Routing of a plane reconverges.
    Reconverge(u8),
    /// Periodic measurement.
    Sample,
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

/// Min-queue of events by (time, insertion sequence).
#[derive(Default)]
pub struct Queue {
    heap: BinaryHeap<Event>,
    seq: u64,
}

impl Queue {
    pub fn push(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Event {
            key: u128::from(t) << 64 | u128::from(self.seq),
            ev,
        });
    }
    /// Time of the earliest event.
    pub fn peek_time(&self) -> Option<u64> {
        self.heap.peek().map(|e| (e.key >> 64) as u64)
    }
    pub fn pop(&mut self) -> Option<(u64, Ev)> {
        self.heap.pop().map(|e| ((e.key >> 64) as u64, e.ev))
    }
    pub fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_order_then_fifo() {
        let mut q = Queue::default();
        q.push(5, Ev::Timer(1));
        q.push(3, Ev::Timer(2));
        q.push(5, Ev::Timer(3));
        q.push(3, Ev::Timer(4));
        let v: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            v,
            [
                (3, Ev::Timer(2)),
                (3, Ev::Timer(4)),
                (5, Ev::Timer(1)),
                (5, Ev::Timer(3))
            ]
        );
    }
}
