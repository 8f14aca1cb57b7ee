//! Incarnations (Documentation/transport.rst, "Incarnations") on a connection of one
//! pair: DATA and PROBE carry the sender's, ACKs echo it, 0 is malformed; such a
//! connection takes any (a shared one drops the past: `shared_members.rs`).
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

/// A connection of one pair carries the incarnation but takes any (it cannot tell a
/// renewed peer from a stray of an earlier connection under the same keys:
/// transport.rst, "Incarnations"; the threat model leaves freshness out). A stray of
/// another incarnation that arrives first must not fix the peer's incarnation and
/// starve the real one (a break-it trial's case: A ended in retry exceeded).
#[test]
fn a_connection_of_one_pair_takes_any_incarnation() {
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
    let stray = with_inc(&data[0].1, ia ^ 0x0100);
    let now = Instant(p.now);
    let r =
        p.b.conn
            .handle_packet(now, &stray, false, &mut p.b.engine.bind(&mut p.b.host));
    assert!(r.is_ok(), "{r:?}");
    for (_, d) in &data {
        p.inject(1, d);
    }
    assert!(p.run(1_000_000_000));
    assert_eq!(
        statuses(&p.a.host.send_cq),
        vec![(0, WcStatus::Success), (1, WcStatus::Success)]
    );
    assert_eq!(p.b.conn.peer_incarnation(), ia, "the newest packet's");
    assert_eq!(p.a.conn.state(), metaroce_proto::conn::ConnState::Open);
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
