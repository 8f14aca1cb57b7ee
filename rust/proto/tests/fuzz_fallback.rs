//! Stable-Rust stand-in for the cargo-fuzz targets: millions of random and mutated
//! datagrams into the decoder and both halves of a live connection. Every packet must be
//! accepted or dropped with a counted reason; nothing may panic (overflow checks are on in
//! test builds, as in the kernel).
mod common;
use common::*;
use metaroce_proto::conn::TxKind;
use metaroce_proto::time::Instant;
use metaroce_proto::wire::{decode, peek_type, DropCounters, PacketType, ACK_LEN};

#[test]
fn mutated_packets_are_dropped_with_a_reason_never_a_panic() {
    let iters: u64 = std::env::var("FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    // Seed corpus: real datagrams of a lossy transfer in both directions; `b` bundles
    // its delayed ACKs, as the kernel does.
    let mut n = Net::new(11, 8, 0.05);
    let (mut a, mut b) = (config(1, 2, 8), config(2, 1, 8));
    (b.ack_every, b.ack_bundle) = (2, 16);
    (a.ack_delay_ns, b.ack_delay_ns) = (100_000, 100_000);
    n.connect(a, b);
    for s in 0..4 {
        n.app_a.msgs[s] = vec![3000, 0, 70_000, 1, 4096];
    }
    let mut corpus: Vec<Vec<u8>> = Vec::new();
    let mut buf = [0u8; 2048];
    let mut now = 0u64;
    while corpus.len() < 400 {
        now += 1000;
        let t = Instant(now);
        if let Some(tx) = n.a.poll_transmit(t, &mut buf, &mut n.app_a) {
            corpus.push(buf[..tx.len].to_vec());
            let _ = n.b.handle_packet(t, &buf[..tx.len], false, &mut n.app_b);
            if let TxKind::Data { .. } = tx.kind {}
        }
        while let Some(tx) = n.b.poll_transmit(t, &mut buf, &mut n.app_b) {
            corpus.push(buf[..tx.len].to_vec());
            let _ = n.a.handle_packet(t, &buf[..tx.len], false, &mut n.app_a);
        }
        n.a.handle_timeout(t, &mut n.app_a);
        if now > 1_000_000_000 {
            break;
        }
    }
    assert!(corpus.len() > 50);
    let bundles = corpus
        .iter()
        .filter(|d| d.len() > ACK_LEN && peek_type(d) == Some(PacketType::Ack))
        .count();
    assert!(bundles > 0, "no ACK bundle in the corpus");
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let mut drops = DropCounters::default();
    let mut accepted = 0u64;
    let mut pkt = Vec::with_capacity(4200);
    for i in 0..iters {
        pkt.clear();
        let r = rng.next();
        if r.is_multiple_of(16) {
            // Pure noise.
            let len = (rng.next() % 200) as usize;
            pkt.extend((0..len).map(|_| rng.next() as u8));
        } else {
            pkt.extend_from_slice(&corpus[(rng.next() % corpus.len() as u64) as usize]);
            let muts = 1 + rng.next() % 4;
            for _ in 0..muts {
                match rng.next() % 6 {
                    0 | 1 if !pkt.is_empty() => {
                        let at = (rng.next() % pkt.len() as u64) as usize;
                        pkt[at] ^= 1 << (rng.next() % 8);
                    }
                    2 if !pkt.is_empty() => {
                        let at = (rng.next() % pkt.len() as u64) as usize;
                        pkt[at] = rng.next() as u8;
                    }
                    3 => {
                        let cut = (rng.next() % (pkt.len() as u64 + 1)) as usize;
                        pkt.truncate(cut);
                    }
                    4 => pkt.extend((0..rng.next() % 64).map(|_| rng.next() as u8)),
                    _ if pkt.len() >= 12 => {
                        // Plausible but hostile sequence numbers.
                        let at = 8 + (rng.next() % 4) as usize;
                        pkt[at] = rng.next() as u8;
                    }
                    _ => {}
                }
            }
        }
        let _ = decode(&pkt);
        now += 100;
        let t = Instant(now);
        let (c, app) = if i % 2 == 0 {
            (&mut n.b, &mut n.app_b)
        } else {
            (&mut n.a, &mut n.app_a)
        };
        match c.handle_packet(t, &pkt, rng.next().is_multiple_of(7), app) {
            Ok(_) => accepted += 1,
            Err(r) => drops.count(r),
        }
        if i % 64 == 0 {
            while n.a.poll_transmit(t, &mut buf, &mut n.app_a).is_some() {}
            while n.b.poll_transmit(t, &mut buf, &mut n.app_b).is_some() {}
            n.a.handle_timeout(t, &mut n.app_a);
            n.b.handle_timeout(t, &mut n.app_b);
        }
    }
    eprintln!(
        "{iters} packets: {accepted} accepted, {} dropped",
        drops.total()
    );
    for r in metaroce_proto::wire::DropReason::ALL {
        eprintln!("  {:<22} {}", r.name(), drops.get(r));
    }
    assert_eq!(accepted + drops.total(), iters);
    assert!(drops.total() > iters / 2);
}
