//! What a packet the verbs layer refuses (RNR) changes at the receiver
//! (Documentation/transport.rst, "Receiver operation", step 5): it passed every check,
//! so its floor is applied and the refusal is reported, and nothing else changes: not
//! the path's bitmap, `cum` beyond the floor, the `acked` count or the echo (the ACK
//! reporting the refusal echoes the newest packet the path *accepted*), not the stream
//! (a resend of the same packet is new data, not a duplicate).

mod common;

use common::{config, Conn, TestApp};
use metaroce_proto::time::Instant;
use metaroce_proto::wire::{decode, DataHeader, DropReason, Packet, AF_RNR};

/// DATA header of datagram `d`.
fn data(d: &[u8]) -> DataHeader {
    match decode(d) {
        Ok(Packet::Data(h, _)) => h,
        x => panic!("not DATA: {x:?}"),
    }
}

#[test]
fn an_rnr_refusal_applies_the_floor_and_nothing_else() {
    // One path each way, three 100-byte messages from A.
    let (ca, cb) = (config(1, 2, 1), config(2, 1, 1));
    let (mut a, mut b) = (Conn::new(ca), Conn::new(cb));
    let (mut app_a, mut app_b) = (TestApp::keyed(&ca), TestApp::keyed(&cb));
    app_a.msgs[0] = vec![100, 100, 100];
    let mut buf = [0u8; 2048];
    // X, Y, Z: one packet each, sent 1 µs apart (distinct stamps).
    let mut sent = Vec::new();
    for t in 1..=3u64 {
        let tx = a
            .poll_transmit(Instant(t * 1_000), &mut buf, &mut app_a)
            .expect("a DATA packet");
        sent.push(buf[..tx.len].to_vec());
    }
    let (x, y, mut z) = (data(&sent[0]), data(&sent[1]), sent[2].clone());
    assert_eq!(
        (y.psn, data(&z).psn),
        (x.psn.wrapping_add(1), x.psn.wrapping_add(2))
    );
    // X arrives and is accepted.
    assert!(b
        .handle_packet(Instant(10_000), &sent[0], false, &mut app_b)
        .is_ok());
    // Y is lost. Z comes with the sender's word that every PSN below it is resolved
    // (its floor moved past Y: as if Y had been given up and resent elsewhere), and B
    // refuses it: no receive posted.
    let zpsn = data(&z).psn;
    z[28..32].copy_from_slice(&zpsn.to_be_bytes());
    app_b.rnr_left = 1;
    assert_eq!(
        b.handle_packet(Instant(20_000), &z, false, &mut app_b),
        Err(DropReason::ReceiverNotReady)
    );
    assert_eq!(app_b.completed[0], vec![0], "X complete");
    assert!(!app_b.placed.contains_key(&(0, 2)), "nothing of Z placed");
    // The one ACK of the path: the floor applied (cum jumped past the lost Y to Z), Z
    // refused, and nothing of Z taken: not marked, not counted, not echoed.
    let t = b
        .poll_transmit(Instant(20_000), &mut buf, &mut app_b)
        .expect("an ACK");
    let Ok(Packet::Ack(ack)) = decode(&buf[..t.len]) else {
        panic!("not an ACK");
    };
    assert!(b
        .poll_transmit(Instant(20_000), &mut buf, &mut app_b)
        .is_none());
    assert_eq!(ack.flags, AF_RNR);
    assert_eq!(ack.rnr_psn, zpsn);
    assert_eq!(ack.cum, zpsn, "the refused packet's floor is applied");
    assert!(
        ack.sack.highest().is_none(),
        "the refused PSN is not marked"
    );
    assert_eq!(ack.acked, 1, "only X counted");
    assert_eq!(
        ack.echo, x.stamp,
        "the echo is the newest accepted packet's"
    );
    assert_ne!(ack.echo, data(&z).stamp);
    // The stream is as it was: Z again (the sender's resend, here the same bytes) is
    // new data, placed, not a duplicate.
    assert!(matches!(
        b.handle_packet(Instant(30_000), &z, false, &mut app_b),
        Ok(metaroce_proto::conn::RxEvent::Data)
    ));
    assert_eq!(b.stats().dup_rx, 0);
    assert!(app_b.violations.is_empty(), "{:?}", app_b.violations);
}
