//! ACKREQ at the sender's other in-flight limits (`Connection::build_data`,
//! Documentation/transport.rst, "Flag rules"): besides the start-up ramp, the hint cap
//! and the path windows, a sender stops when every in-flight record is taken (`N`: the
//! kernel's per-QP connection has 64, its shared one 256) or when a stream has
//! `STREAM_WINDOW` (128) packets unacknowledged. With many paths those limits leave
//! each path fewer packets than the receiver's `ack_every`, so no path's ACK comes due
//! and, without the sender's ACKREQ, every round waits for the delayed-ACK timer (a
//! stop-49 trial: 64 paths at `ack_every` 2 took 2.64 ms against 0.40 at 1).
//!
//! A self-contained two-node loop (the shared harness is for 8-path connections):
//! 10 us one way, no loss, a 20 ms delayed-ACK timer so a wait cannot hide.

mod common;

use common::{kernel_like_config, TestApp};
use metaroce_proto::conn::{Connection, TxKind};
use metaroce_proto::time::Instant;
use metaroce_proto::wire::{decode_data_packet, peek_type, PacketType, DF_ACKREQ};
use std::collections::BTreeMap;

const ONE_WAY: u64 = 10_000;
const ACK_DELAY: u32 = 20_000_000;

struct Out {
    took: u64,
    retx: u32,
    asked: usize,
    data: usize,
    acks: usize,
}

/// `count` messages of `len` bytes from A to B over `paths` paths, both ends at
/// `ack_every` `every`, on connections of `N` records; each direction's link sends
/// at `gbps` Gb/s (0: at once).
fn transfer<const P: usize, const W: usize, const N: usize>(
    paths: u8,
    every: u8,
    count: usize,
    len: u32,
    gbps: u64,
) -> Out {
    let cfg = |l, p| {
        let mut c = kernel_like_config(l, p);
        (c.paths, c.ack_every, c.ack_delay_ns) = (paths, every, ACK_DELAY);
        // Sprayed packet by packet: this loop answers each datagram alone, where a
        // path's run (`train`) makes its ACK due within the run; a receiver taking
        // batches, as the kernel does, answers a run at once (tests/train.rs).
        c.train = 1;
        c
    };
    let (ca, cb) = (cfg(1, 2), cfg(2, 1));
    let mut a: Connection<P, W, N> = Connection::new(ca);
    let mut b: Connection<P, W, N> = Connection::new(cb);
    let (mut app_a, mut app_b) = (TestApp::keyed(&ca), TestApp::keyed(&cb));
    app_a.msgs[0] = vec![len; count];
    let mut q: BTreeMap<(u64, u64), (bool, Vec<u8>)> = BTreeMap::new();
    let (start, mut now, mut seq) = (1_000_000u64, 1_000_000u64, 0u64);
    let mut out = Out {
        took: 0,
        retx: 0,
        asked: 0,
        data: 0,
        acks: 0,
    };
    let mut buf = [0u8; 2048];
    // When each direction's link is free again, ns.
    let mut free = [0u64; 2];
    let mut depart = |to_b: bool, now: u64, bytes: usize| {
        let l = &mut free[usize::from(!to_b)];
        // Serialisation, ns (none at 0 Gb/s).
        let ser = (bytes as u64 * 8).checked_div(gbps).unwrap_or(0);
        *l = (*l).max(now) + ser;
        *l + ONE_WAY
    };
    loop {
        while let Some(t) = a.poll_transmit(Instant(now), &mut buf, &mut app_a) {
            let bytes = buf[..t.len].to_vec();
            if let TxKind::Data { .. } = t.kind {
                let (h, _) = decode_data_packet(&bytes).expect("A's DATA decodes");
                out.asked += usize::from(h.flags & DF_ACKREQ != 0);
                out.data += 1;
            }
            q.insert((depart(true, now, bytes.len()), seq), (true, bytes));
            seq += 1;
        }
        while let Some(t) = b.poll_transmit(Instant(now), &mut buf, &mut app_b) {
            let bytes = buf[..t.len].to_vec();
            out.acks += usize::from(peek_type(&bytes) == Some(PacketType::Ack));
            q.insert((depart(false, now, bytes.len()), seq), (false, bytes));
            seq += 1;
        }
        if app_a.acked[0].len() == count {
            out.took = now - start;
            out.retx = a.stats().retx;
            assert!(app_b.violations.is_empty(), "{:?}", app_b.violations);
            return out;
        }
        let next = [
            q.keys().next().map(|k| k.0),
            a.poll_timeout().map(|t| t.0),
            b.poll_timeout().map(|t| t.0),
        ]
        .into_iter()
        .flatten()
        .min()
        .expect("something pending");
        assert!(next < start + 10_000_000_000, "stuck");
        now = now.max(next);
        while let Some(e) = q.first_entry() {
            if e.key().0 > now {
                break;
            }
            let (to_b, bytes) = e.remove();
            let _ = if to_b {
                b.handle_packet(Instant(now), &bytes, false, &mut app_b)
            } else {
                a.handle_packet(Instant(now), &bytes, false, &mut app_a)
            };
        }
        a.handle_timeout(Instant(now), &mut app_a);
        b.handle_timeout(Instant(now), &mut app_b);
    }
}

fn report(what: &str, o: &Out) {
    eprintln!(
        "{what}: {:.3} ms, {} DATA ({} with ACKREQ), {} ACK datagrams, {} resent",
        o.took as f64 / 1e6,
        o.data,
        o.asked,
        o.acks,
        o.retx
    );
}

/// 8 x 256 KiB over each `(paths, ack_every)` of `cases` on connections of `N`
/// records, on links without a rate and at 10 Gb/s: no wait for the 20 ms timer (a
/// round would take it), nothing resent, and ACKREQ at most once in the smallest RTT,
/// not on every refill after an ACK (a stop-50 trial: at 10 Gb/s, asking on every
/// packet that took the last record asked on half the packets; now 5-8 %).
fn asks_at_the_limit<const W: usize, const N: usize>(cases: &[(u8, u8)]) {
    for &(paths, every) in cases {
        for gbps in [0, 10] {
            let o = transfer::<64, W, N>(paths, every, 8, 256 * 1024, gbps);
            let what = format!("{N} records, {paths} paths, ack_every {every}, {gbps} Gb/s");
            report(&what, &o);
            assert!(o.took < 10_000_000, "{what}: waited for the timer");
            assert_eq!(o.retx, 0, "{what}");
            assert!(
                o.asked * 10 < o.data,
                "{what}: {} of {} asked",
                o.asked,
                o.data
            );
        }
    }
}

/// The per-QP kernel connection's 64 records over 64 paths (the `paths` parameter's
/// most) and over 8 paths with `ack_every` 9 (its range is 1-64): each path holds at
/// most 1 (or 8) packets, below `ack_every`.
#[test]
fn a_full_record_pool_asks() {
    asks_at_the_limit::<1, 64>(&[(64, 2), (64, 4), (32, 3), (8, 9), (8, 16)]);
}

/// The kernel's shared connection (256 records): a stream's 128-packet window over 64
/// paths is 2 packets a path, below `ack_every` 3 or 4.
#[test]
fn a_full_stream_window_asks() {
    asks_at_the_limit::<4, 256>(&[(64, 3), (64, 4), (16, 9)]);
}

/// Where the paths reach `ack_every` below the limits (8 paths at the default 2), the
/// limits add no ACKREQ: the ACK load stays the delayed ACK's.
#[test]
fn no_ask_where_paths_reach_ack_every() {
    for gbps in [0, 10] {
        let o = transfer::<64, 1, 64>(8, 2, 8, 256 * 1024, gbps);
        report(
            &format!("64 records, 8 paths, ack_every 2, {gbps} Gb/s"),
            &o,
        );
        assert!(o.asked * 50 < o.data, "{} of {} asked", o.asked, o.data);
    }
}
