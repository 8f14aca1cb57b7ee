//! ACK bundles (Documentation/transport.rst, "ACK bundles"; `Config::ack_bundle`): a
//! receiver that acknowledges every 2nd packet of 8 paths sends the ACKs of every path
//! holding packets back in one datagram, so a transfer costs far fewer ACK datagrams
//! with the same data, no spurious resends and no slower; and a sender judges each
//! ACK of a bundle as if it had come alone.

mod common;
use common::*;
use metaroce_proto::conn::RxEvent;
use metaroce_proto::time::Instant;
use metaroce_proto::wire::{decode_acks, peek_type, DropReason, PacketType, ACK_LEN};

/// A pair with 8 paths and 1 KiB MTU whose receiver `b` acknowledges every 2nd packet
/// of a path (or after 100 µs), bundling up to `bundle` ACKs a datagram.
fn net(bundle: u8, loss: f64) -> Net {
    let mut n = Net::new(5, 8, loss);
    let (mut a, mut b) = (config(1, 2, 8), config(2, 1, 8));
    b.ack_every = 2;
    b.ack_bundle = bundle;
    (a.ack_delay_ns, b.ack_delay_ns) = (100_000, 100_000);
    n.connect(a, b);
    n.keep_trace = true;
    n
}

/// (ACK datagrams, ACK records) the receiver delivered to the sender since trace
/// entry `from`.
fn acks(n: &Net, from: usize) -> (usize, usize) {
    let mut d = (0, 0);
    for (_, to_b, bytes, _) in &n.trace[from..] {
        if !to_b && peek_type(bytes) == Some(PacketType::Ack) {
            d.0 += 1;
            d.1 += decode_acks(bytes)
                .expect("the receiver's ACKs decode")
                .len();
        }
    }
    d
}

#[test]
fn bundles_cut_ack_datagrams_not_feedback() {
    let mut per = Vec::new();
    for bundle in [1u8, 16] {
        let mut n = net(bundle, 0.0);
        send_all(&mut n, 8, 64 * 1024); // warm: RTT samples on every path
        let (data0, t0) = (n.sent[0], n.trace.len());
        let took = send_all(&mut n, 32, 64 * 1024);
        let data = n.sent[0] - data0;
        let (dgrams, records) = acks(&n, t0);
        assert_eq!(data, 32 * 64, "bundle {bundle}: data packets sent");
        assert_eq!(n.a.stats().retx, 0, "bundle {bundle}: spurious resends");
        assert_eq!(tail_probe_count(&n), 0, "bundle {bundle}: tail probes");
        assert!(n.app_b.violations.is_empty(), "{:?}", n.app_b.violations);
        assert_eq!(n.app_b.completed[0].len(), 40);
        per.push((
            dgrams as f64 / data as f64,
            records as f64 / data as f64,
            took,
        ));
    }
    let ((d1, r1, t1), (d16, r16, t16)) = (per[0], per[1]);
    eprintln!("per DATA packet: alone {d1:.3} datagrams, {t1} ns; bundled {d16:.3} datagrams with {r16:.3} records, {t16} ns");
    // Alone: one record a datagram, every 2nd packet of a path and each message's end.
    assert_eq!(d1, r1);
    assert!((0.45..=0.8).contains(&d1), "alone: {d1} ACKs per packet");
    // Bundled: well under half the datagrams (a path's 2nd packet makes an ACK due and
    // brings along the paths holding packets back: 1-8 records, 1 when a path's
    // packets come in a burst).
    assert!(
        d16 <= d1 * 0.5,
        "bundled: {d16} ACK datagrams per packet, alone {d1}"
    );
    assert!(r16 >= d16 * 3.0, "bundled: {r16} records, {d16} datagrams");
    // Each path is acknowledged at least as often as alone.
    assert!(
        r16 >= r1 * 0.9,
        "bundled: {r16} records per packet, alone {r1}"
    );
    assert!(
        t16 as f64 <= t1 as f64 * 1.05,
        "bundled took {t16} ns, alone {t1}"
    );
}

#[test]
fn bundles_survive_loss_of_data_and_acks() {
    for seed in 1..=6u64 {
        let mut n = net(16, 0.02);
        n.rng = Rng((seed * 7919) | 1);
        n.lose_acks = true;
        send_all(&mut n, 24, 64 * 1024);
        assert!(n.app_b.violations.is_empty(), "{:?}", n.app_b.violations);
        assert!(n.app_a.errors.is_empty(), "{:?}", n.app_a.errors);
        assert_eq!(n.app_b.completed[0], (0..24).collect::<Vec<u32>>());
        assert_eq!(n.app_a.acked[0].len(), 24, "seed {seed}");
        let (dgrams, records) = acks(&n, 0);
        assert!(records > dgrams * 2, "seed {seed}: {records} in {dgrams}");
    }
}

/// Runs a transfer until the receiver has a bundle of at least 3 ACKs on its way
/// to the sender, and takes it out of the network.
fn catch_bundle(n: &mut Net) -> Vec<u8> {
    for _ in 0..8 {
        n.app_a.msgs[0].push(64 * 1024);
    }
    for _ in 0..100_000 {
        let key = n.q.iter().find_map(|(k, (to_b, bytes, _, _))| {
            (!to_b && bytes.len() >= 3 * ACK_LEN).then_some(*k)
        });
        if let Some(k) = key {
            return n.q.remove(&k).unwrap().1;
        }
        let t = n.now + 1_000;
        if !n.run(t) {
            // Nothing was due before `t`.
            n.now = t;
        }
    }
    panic!("no bundle of 3 ACKs");
}

#[test]
fn a_bundle_is_judged_record_by_record() {
    let mut n = net(16, 0.0);
    send_all(&mut n, 2, 64 * 1024);
    let b = catch_bundle(&mut n);
    let now = Instant(n.now);
    let a0 = n.a;
    let before = a0.inflight();

    // Whole: every record acknowledges its path's packets.
    let mut whole = a0;
    let r = whole.handle_packet(now, &b, false, &mut n.app_a.clone());
    assert_eq!(r, Ok(RxEvent::Ack));
    let all = before - whole.inflight();
    assert!(
        all >= 3,
        "{all} packets acknowledged by {} ACKs",
        b.len() / ACK_LEN
    );

    // The second record names PSNs never sent: it alone is refused, and counted.
    let mut bad = b.clone();
    bad[ACK_LEN + 20..ACK_LEN + 24].copy_from_slice(&0x4000_0000u32.to_be_bytes());
    let mut part = a0;
    let r = part.handle_packet(now, &bad, false, &mut n.app_a.clone());
    assert_eq!(r, Err(DropReason::AckOutOfRange));
    let some = before - part.inflight();
    assert!(some > 0 && some < all, "{some} of {all} acknowledged");

    // A record for another connection: the datagram is refused whole.
    for at in [5usize, 16] {
        let mut other = b.clone();
        other[2 * ACK_LEN + at] ^= 1;
        let mut none = a0;
        let r = none.handle_packet(now, &other, false, &mut n.app_a.clone());
        assert_eq!(r, Err(DropReason::WrongConnection), "byte {at}");
        assert_eq!(none.inflight(), before);
        assert_eq!(none.stats(), a0.stats());
    }
    // A torn last record, or more than 16: refused whole.
    let mut none = a0;
    let r = none.handle_packet(now, &b[..b.len() - 1], false, &mut n.app_a.clone());
    assert_eq!(r, Err(DropReason::Truncated));
    let mut long = Vec::new();
    while long.len() <= 16 * ACK_LEN {
        long.extend_from_slice(&b[..ACK_LEN]);
    }
    let r = none.handle_packet(now, &long, false, &mut n.app_a.clone());
    assert_eq!(r, Err(DropReason::LengthMismatch));
    assert_eq!(none.inflight(), before);
}
