//! Incarnations (Documentation/transport.rst, "Incarnations"): the first DATA or PROBE
//! that passes every check settles the peer's incarnation; afterwards a DATA or PROBE
//! of another, and any ACK that does not echo this end's own, is a datagram of an
//! earlier connection: dropped as `stale_incarnation`, nothing changed.
mod rc_common;
use metaroce_proto::rc::{WcStatus, WrOpcode};
use metaroce_proto::testkit::rc::incarnation_of;
use metaroce_proto::time::Instant;
use metaroce_proto::wire::{decode, DropReason, Packet};
use rc_common::*;

/// Datagram `d` with its incarnation (common header bytes 3-4) set to `inc`.
fn with_inc(d: &[u8], inc: u16) -> Vec<u8> {
    let mut v = d.to_vec();
    v[3..5].copy_from_slice(&inc.to_be_bytes());
    v
}

fn inc_of(d: &[u8]) -> u16 {
    match decode(d).unwrap() {
        Packet::Data(h, _) => h.inc,
        Packet::Ack(a) => a.inc,
        Packet::Probe(p) => p.inc,
    }
}

#[test]
fn data_carries_the_senders_incarnation_and_acks_echo_it() {
    let (mut p, a, b) = setup(8, false, clean(), 41);
    let (ia, ib) = (p.a.conn.config().incarnation, p.b.conn.config().incarnation);
    assert_eq!((ia, ib), (incarnation_of(1), incarnation_of(2)));
    assert_ne!(ia, ib);
    assert_eq!(p.b.conn.peer_incarnation(), 0, "nothing accepted yet");
    assert!(p.b.host.post_recv(1, &[sge(b, 0, 4096, B_MR)]));
    assert!(p
        .a
        .host
        .post_send(wqe(WrOpcode::Send, 1, vec![sge(a, 0, 3000, A_MR)])));
    p.doorbell(0);
    let data = p.take_wire();
    assert!(data.len() >= 3);
    for (to, d) in &data {
        assert_eq!((*to, inc_of(d)), (1, ia));
        p.inject(1, d);
    }
    assert_eq!(p.b.conn.peer_incarnation(), ia);
    let acks = p.take_wire();
    assert!(!acks.is_empty());
    for (to, d) in &acks {
        assert!(matches!(decode(d), Ok(Packet::Ack(_))));
        assert_eq!(
            (*to, inc_of(d)),
            (0, ia),
            "an ACK echoes the data's incarnation"
        );
        p.inject(0, d);
    }
    assert!(p.run(1_000_000_000));
    assert_eq!(statuses(&p.a.host.send_cq), vec![(1, WcStatus::Success)]);
}

/// Once settled, a DATA of another incarnation (an earlier connection's, still in the
/// network) is dropped before it can change anything, even with the right token and
/// in the windows; so is an ACK that does not echo the receiver's own incarnation.
#[test]
fn datagrams_of_another_incarnation_are_stale() {
    let (mut p, a, b) = setup(8, false, clean(), 42);
    let ia = p.a.conn.config().incarnation;
    for i in 0..2 {
        assert!(p.b.host.post_recv(i, &[sge(b, 0, 4096, B_MR)]));
    }
    for i in 0..2 {
        let e = wqe(WrOpcode::Send, i, vec![sge(a, 0, 1000, A_MR)]);
        assert!(p.a.host.post_send(e));
    }
    p.doorbell(0);
    let data = p.take_wire();
    assert_eq!(data.len(), 2);
    // The first settles the incarnation.
    p.inject(1, &data[0].1);
    assert_eq!(p.b.conn.peer_incarnation(), ia);
    let acks = p.take_wire();
    // The second, from an earlier incarnation: dropped, nothing changed.
    let stale = with_inc(&data[1].1, ia ^ 0x0100);
    let before = format!("{:?}", p.b.conn);
    let now = Instant(p.now);
    let r =
        p.b.conn
            .handle_packet(now, &stale, false, &mut p.b.engine.bind(&mut p.b.host));
    assert_eq!(r, Err(DropReason::StaleIncarnation));
    assert_eq!(before, format!("{:?}", p.b.conn));
    assert_eq!(p.b.host.recv_cq.len(), 1);
    // An ACK that does not echo A's incarnation: dropped at A, nothing changed.
    let ack = acks
        .iter()
        .find(|(to, _)| *to == 0)
        .expect("an ACK")
        .1
        .clone();
    let before = format!("{:?}", p.a.conn);
    let r = p.a.conn.handle_packet(
        now,
        &with_inc(&ack, ia ^ 1),
        false,
        &mut p.a.engine.bind(&mut p.a.host),
    );
    assert_eq!(r, Err(DropReason::StaleIncarnation));
    assert_eq!(before, format!("{:?}", p.a.conn));
    // The genuine datagrams still do their work.
    p.inject(1, &data[1].1);
    p.inject(0, &ack);
    assert!(p.run(1_000_000_000));
    assert_eq!(
        statuses(&p.a.host.send_cq),
        vec![(0, WcStatus::Success), (1, WcStatus::Success)]
    );
    assert_eq!(p.b.host.recv_cq.len(), 2);
}

/// Incarnation 0 is no connection's: a DATA, ACK or PROBE carrying it is malformed.
#[test]
fn incarnation_zero_is_malformed() {
    let (mut p, a, _) = setup(8, false, clean(), 43);
    let e = rdma(
        wqe(WrOpcode::RdmaWrite, 1, vec![sge(a, 0, 100, A_MR)]),
        0,
        B_MR,
    );
    assert!(p.a.host.post_send(e));
    p.doorbell(0);
    let d = p.take_wire().remove(0).1;
    assert_eq!(decode(&with_inc(&d, 0)), Err(DropReason::BadFlags));
}
