//! ACKs riding on DATA (Documentation/transport.rst, "ACKs riding on DATA";
//! `Config::ack_ride`), host-tested on two model QPs with the kernel's delayed ACK
//! (`ack_every` 2, `ack_delay_us` 100, bundles of 16): a READ ping-pong (as
//! `ib_read_lat`) sends one datagram each way per READ, its request and response each
//! carrying the ACK the other end owes, against two each way without; the bytes land and
//! complete as before; a ride whose DATA is malformed is dropped whole, its ACKs not
//! applied; and a loss of a datagram that carried both is recovered.
mod rc_common;
use metaroce_proto::rc::{WcOpcode, WcStatus, WrOpcode};
use metaroce_proto::testkit::rc::{model_config, Pair};
use metaroce_proto::time::Instant;
use metaroce_proto::wire::{decode_ride, peek_type, DropReason, PacketType};
use rc_common::*;

/// A clean pair (20 µs each way) with the kernel's ACK settings and ACKs riding on
/// DATA as `ride` says.
fn pair(ride: bool, seed: u64) -> (Pair, u64, u64) {
    let (mut p, a, b) = setup(16, false, clean(), seed);
    for (n, (l, r)) in [(&mut p.a, (1, 2)), (&mut p.b, (2, 1))] {
        let mut c = model_config(l, r);
        c.paths = 8;
        c.ack_every = 2;
        c.ack_bundle = 16;
        c.ack_delay_ns = 100_000;
        c.ack_ride = if ride { u16::MAX } else { 0 };
        n.connect(c);
    }
    (p, a, b)
}

/// Runs in 2 µs steps until A has `n` send completions (at most 10 ms).
fn until_completions(p: &mut Pair, n: usize) {
    for _ in 0..5000 {
        if p.a.host.send_cq.len() >= n {
            return;
        }
        let end = p.now + 2_000;
        p.run(2_000);
        p.now = p.now.max(end);
    }
    panic!("{} completions of {n}", p.a.host.send_cq.len());
}

/// `reads` READs of 64 bytes one after another, each posted once the last completed (an
/// `ib_read_lat` loop); the datagrams each end sent for them, with the final ACK.
fn ping_pong(ride: bool, reads: u64) -> [u64; 2] {
    let (mut p, a, b) = pair(ride, 11);
    for i in 0..reads {
        let off = (i as usize % 64) * 64;
        assert!(p.a.host.post_send(read(i + 1, a, b, off, 64)));
        p.doorbell(0);
        until_completions(&mut p, i as usize + 1);
    }
    assert!(p.run(1_000_000_000), "went quiet");
    assert_eq!(p.a.host.send_cq.len() as u64, reads);
    for (i, c) in p.a.host.send_cq.iter().enumerate() {
        send_ok(c, i as u64 + 1, WcOpcode::RdmaRead, 64);
    }
    for i in 0..reads.min(64) as usize {
        let got = &p.a.host.mr(A_MR).unwrap().bytes[LAND + i * 64..LAND + (i + 1) * 64];
        assert!(
            got.iter()
                .enumerate()
                .all(|(k, &x)| x == pattern(i * 64 + k + 7)),
            "READ {i} landed"
        );
    }
    assert_eq!(p.rx_drops, [0, 0]);
    assert_eq!(p.a.conn.stats().retx + p.b.conn.stats().retx, 0);
    p.datagrams
}

#[test]
fn a_read_ping_pong_sends_one_datagram_each_way() {
    let reads = 50;
    let on = ping_pong(true, reads);
    let off = ping_pong(false, reads);
    eprintln!("{reads} READs: datagrams A, B: riding {on:?}, alone {off:?}");
    // Riding: the request carries the ACK of the last response, the response the
    // request's ACK; the last response's ACK goes at the delayed-ACK timer.
    assert!(on[0] <= reads + 2 && on[1] <= reads + 2, "{on:?}");
    // Alone: each end acknowledges what it took, at once.
    assert!(
        off[0] >= 2 * reads - 2 && off[1] >= 2 * reads - 2,
        "{off:?}"
    );
}

/// The ACK datagram B answers a READ with, its response riding on it, is refused whole
/// when the response is malformed: A neither takes the ACK (its request stays
/// unacknowledged) nor the response; the real one then completes the READ.
#[test]
fn a_malformed_ride_changes_nothing() {
    let (mut p, a, b) = pair(true, 5);
    assert!(p.a.host.post_send(read(1, a, b, 0, 64)));
    p.doorbell(0);
    for (to, d) in p.take_wire() {
        p.inject(to, &d);
    }
    let answers = p.take_wire();
    let (_, ride) = answers
        .iter()
        .find(|(to, d)| *to == 0 && peek_type(d) == Some(PacketType::Ack))
        .expect("an ACK datagram to A");
    let (acks, data) = decode_ride(ride).unwrap();
    assert_eq!(acks.len(), 1);
    let data_at = ride.len() - data.expect("the response rides on the ACK").len();
    // A reserved DATA flag (byte 23 of the DATA), then a torn payload.
    let mut bad = ride.clone();
    bad[data_at + 23] |= 0x80;
    for (d, why) in [
        (&bad[..], DropReason::BadFlags),
        (&ride[..ride.len() - 1], DropReason::LengthMismatch),
    ] {
        let n = &mut p.a;
        let before = format!("{:?}{:?}{:?}", n.conn, n.engine, n.host);
        let r = n
            .conn
            .handle_packet(Instant(p.now), d, false, &mut n.engine.bind(&mut n.host));
        assert_eq!(r, Err(why));
        assert_eq!(before, format!("{:?}{:?}{:?}", n.conn, n.engine, n.host));
    }
    assert!(p.a.host.send_cq.is_empty());
    p.inject(0, ride);
    assert!(p.run(1_000_000_000));
    assert_eq!(p.a.host.send_cq.len(), 1);
    assert_eq!(p.a.host.send_cq[0].status, WcStatus::Success);
}

/// Every datagram that carries an ACK and a DATA is lost once: both are recovered
/// (the DATA resent, the ACK repeated by the next) and every READ and WRITE completes.
#[test]
fn a_lost_ride_is_recovered() {
    let (mut p, a, b) = pair(true, 9);
    let mut lost = 0;
    for i in 0..40u64 {
        let off = (i as usize % 32) * 64;
        let e = if i % 2 == 0 {
            read(i + 1, a, b, off, 64)
        } else {
            rdma(
                wqe(WrOpcode::RdmaWrite, i + 1, vec![sge(a, off, 64, A_MR)]),
                b + 8192 + off as u64,
                B_MR,
            )
        };
        assert!(p.a.host.post_send(e));
        p.doorbell(0);
        for _ in 0..2000 {
            for (to, d) in p.take_wire() {
                let rides = peek_type(&d) == Some(PacketType::Ack)
                    && decode_ride(&d).is_ok_and(|r| r.1.is_some());
                if rides && lost < 10 {
                    lost += 1;
                    continue;
                }
                p.inject(to, &d);
            }
            p.tick(10_000);
            if p.a.host.send_cq.len() > i as usize {
                break;
            }
        }
    }
    assert!(p.run(1_000_000_000));
    assert!(lost > 0, "no datagram carried both");
    assert_eq!(p.a.host.send_cq.len(), 40);
    assert!(p
        .a
        .host
        .send_cq
        .iter()
        .all(|c| c.status == WcStatus::Success));
    let bm = &p.b.host.mr(B_MR).unwrap().bytes;
    let am = &p.a.host.mr(A_MR).unwrap().bytes;
    for i in (1..40).step_by(2) {
        let off = (i % 32) * 64;
        assert_eq!(
            &bm[8192 + off..8192 + off + 64],
            &am[off..off + 64],
            "WRITE {i}"
        );
    }
}
