//! Shared connections without a handshake (Documentation/transport.rst, "Shared
//! connections"): every datagram is addressed to a member, a QP pair, and carries that
//! pair's token; a member's streams are 0 and 1 on the wire; the receiver takes its
//! paths' sequences from the sender's floors, and starts over when a member set up after
//! the peer's connection was renewed brings a new incarnation, while datagrams of the
//! old one are stale.
mod rc_common;
use metaroce_proto::conn::{Config, Connection};
use metaroce_proto::rc::{access, WcStatus, WrOpcode};
use metaroce_proto::testkit::rc::{incarnation_of, model_config};
use metaroce_proto::testkit::shared::SharedPair;
use metaroce_proto::time::Instant;
use metaroce_proto::wire::{decode, DropReason, Packet};
use rc_common::{clean, lossy, pattern, rdma, sge, wqe, MR_LEN};

const MR: u32 = 0x10;

fn va() -> u64 {
    u64::from(MR) << 32 | 0x1000
}

/// QP `q` of both nodes gets a region `MR`, node 0's filled with the pattern.
fn fill(p: &mut SharedPair, q: usize) {
    let all = access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ;
    for n in 0..2 {
        assert_eq!(p.nodes[n].qp(q).host.reg_mr(MR, MR_LEN, all), va());
    }
    let mr = p.nodes[0].qp(q).host.mr_mut(MR).unwrap();
    for (i, x) in mr.bytes.iter_mut().enumerate() {
        *x = pattern(i + q);
    }
}

/// A WRITE of `len` bytes at `off` on node 0's QP `q`, id `id`.
fn write(p: &mut SharedPair, q: usize, id: u64, off: usize, len: usize) {
    let e = rdma(
        wqe(WrOpcode::RdmaWrite, id, vec![sge(va(), off, len, MR)]),
        va() + off as u64,
        MR,
    );
    assert!(p.nodes[0].qp(q).host.post_send(e));
}

fn written(p: &mut SharedPair, q: usize, off: usize, len: usize) -> bool {
    let b = &p.nodes[1].qp(q).host.mr(MR).unwrap().bytes;
    (off..off + len).all(|i| b[i] == pattern(i + q))
}

fn ok(p: &mut SharedPair, q: usize, ids: &[u64]) -> bool {
    let got: Vec<_> = p.nodes[0]
        .qp(q)
        .host
        .send_cq
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    got == ids
        .iter()
        .map(|&i| (i, WcStatus::Success))
        .collect::<Vec<_>>()
}

/// Node 0 starts over: both its QPs destroyed and a new connection of another
/// incarnation (returned); QP 0's pair replaced on both nodes, its region filled.
/// Node 1's QP 1 stays, a zombie of the old pair.
fn renew(p: &mut SharedPair) -> u16 {
    p.nodes[0].destroy_qp(0);
    p.nodes[0].destroy_qp(1);
    p.nodes[1].destroy_qp(0);
    let inc1 = incarnation_of(1) ^ 0x5555;
    p.nodes[0].conn = Connection::new(Config {
        shared: true,
        incarnation: inc1,
        ..model_config(1, 2)
    });
    assert_eq!(p.nodes[0].add_qp(16), 0);
    assert_eq!(p.nodes[1].add_qp(16), 0);
    fill(p, 0);
    inc1
}

/// Every datagram on the wire names a QP of its receiver and carries that pair's token;
/// DATA streams are 0 or 1. Checked on a lossy run of 8 QPs, which completes.
#[test]
fn every_datagram_names_a_member_and_carries_its_token() {
    let mut p = SharedPair::new(8, 16, lossy(20_000, 10_000, 50_000), 61);
    for q in 0..8 {
        fill(&mut p, q);
        for r in 0..4 {
            write(&mut p, q, r, r as usize * 5000, 3000 + q * 100);
        }
    }
    let (mut data, mut acks, mut end) = (0, 0, p.now + 10_000_000_000);
    while p.now < end {
        p.run(10_000);
        for (_, _, to, d) in &p.wire.queue {
            let to = usize::from(*to);
            let (dst, token, stream) = match decode(d).unwrap() {
                Packet::Data(h, _) => {
                    data += 1;
                    (h.dst_conn, h.token, Some(h.stream))
                }
                Packet::Ack(a) => {
                    acks += 1;
                    (a.dst_conn, a.token, None)
                }
                Packet::Probe(h) => (h.dst_conn, h.token, None),
            };
            let member = p.nodes[to].qps.iter().flatten().find(|qp| qp.qpn == dst);
            let member = member.expect("addressed to a QP of the receiver");
            // DATA and PROBE carry the sender's direction's token (the receiver's rx
            // key); an ACK the acknowledged data's (the receiver's tx key).
            let want = match stream {
                Some(_) => member.rx.token(),
                None if matches!(decode(d), Ok(Packet::Ack(_))) => member.tx.token(),
                None => member.rx.token(),
            };
            assert_eq!(token, want);
            assert!(
                stream.is_none_or(|s| s < 2),
                "stream {stream:?} on the wire"
            );
        }
        if (0..8).all(|q| p.nodes[0].qp(q).host.send_cq.len() == 4) {
            end = p.now;
        }
    }
    assert!(data >= 16 && acks > 0, "{data} DATA, {acks} ACKs seen");
    for q in 0..8 {
        assert!(ok(&mut p, q, &[0, 1, 2, 3]), "QP {q}");
        for r in 0..4 {
            assert!(
                written(&mut p, q, r * 5000, 3000 + q * 100),
                "QP {q} round {r}"
            );
        }
    }
}

/// A datagram addressed to one member with another pair's token, or to no member, is
/// dropped without a change (the token is each pair's own secret).
#[test]
fn another_pairs_token_or_an_unknown_qpn_is_dropped() {
    let mut p = SharedPair::new(2, 16, clean(), 62);
    for q in 0..2 {
        fill(&mut p, q);
    }
    write(&mut p, 0, 1, 0, 500);
    p.doorbell();
    let (_, _, to, d) = p.wire.queue.remove(0);
    assert_eq!(to, 1);
    let Ok(Packet::Data(h, _)) = decode(&d) else {
        panic!("DATA first")
    };
    let other = p.nodes[1].qp(1).qpn;
    let mut moved = d.clone();
    moved[5..8].copy_from_slice(&other.to_be_bytes()[1..]);
    let mut unknown = d.clone();
    unknown[5..8].copy_from_slice(&(h.dst_conn ^ 0x400).to_be_bytes()[1..]);
    let now = Instant(p.now);
    for (bytes, want) in [
        (moved, DropReason::BadToken),
        (unknown, DropReason::WrongConnection),
    ] {
        let before = format!("{:?}", p.nodes[1].conn);
        assert_eq!(p.nodes[1].deliver(now, &bytes), Err(want));
        assert_eq!(before, format!("{:?}", p.nodes[1].conn));
    }
    assert_eq!(p.nodes[1].deliver(now, &d), Ok(()));
    assert!(p.run(1_000_000_000));
    assert!(ok(&mut p, 0, &[1]));
    assert!(written(&mut p, 0, 0, 500));
}

/// Node 0's connection is set up anew (its QPs all gone, a new incarnation) while node 1
/// keeps its own: new pairs carry the new incarnation, node 1 takes it from a fresh
/// member and starts its paths over from the new floors; the old incarnation's
/// datagrams, even of a member still there, are stale.
#[test]
fn a_renewed_peer_connection_resynchronises_the_receiver() {
    let mut p = SharedPair::new(2, 16, clean(), 63);
    for q in 0..2 {
        fill(&mut p, q);
    }
    for r in 0..3 {
        write(&mut p, 0, r, r as usize * 1000, 1000);
        write(&mut p, 1, r, r as usize * 1000, 1000);
    }
    assert!(p.run(1_000_000_000));
    assert!(ok(&mut p, 0, &[0, 1, 2]) && ok(&mut p, 1, &[0, 1, 2]));
    // One more WRITE on QP 1, captured in flight: the old incarnation's.
    write(&mut p, 1, 9, 9000, 800);
    p.doorbell();
    let old: Vec<Vec<u8>> = p.wire.queue.drain(..).map(|x| x.3).collect();
    assert!(!old.is_empty());
    let inc0 = p.nodes[0].conn.config().incarnation;
    assert_eq!(p.nodes[1].conn.peer_incarnation(), inc0);
    let inc1 = renew(&mut p);
    for r in 0..3 {
        write(&mut p, 0, 10 + r, 20_000 + r as usize * 1000, 1000);
    }
    assert!(p.run(1_000_000_000));
    assert!(ok(&mut p, 0, &[10, 11, 12]), "the new pair's WRITEs");
    for r in 0..3 {
        assert!(written(&mut p, 0, 20_000 + r * 1000, 1000));
    }
    assert_eq!(p.nodes[1].conn.peer_incarnation(), inc1);
    assert_eq!(
        p.nodes[1].conn.stats().resyncs,
        2,
        "the first and the renewal"
    );
    // The old incarnation's datagram for node 1's remaining QP 1: stale.
    let now = Instant(p.now);
    let before = format!("{:?}", p.nodes[1].conn);
    for d in &old {
        assert_eq!(
            p.nodes[1].deliver(now, d),
            Err(DropReason::StaleIncarnation)
        );
    }
    assert_eq!(before, format!("{:?}", p.nodes[1].conn));
    assert!(!written(&mut p, 1, 9000, 800));
}

/// A member that joined before the renewal and never had a packet accepted (its only
/// WRITE of the old incarnation held in the network) is not proof of a renewal: that
/// datagram, arriving after the receiver took the new incarnation, is stale and must
/// not bring the old one back (a break-it trial's case: it did, the old WRITE was
/// placed, and the new pair's WRITEs then failed as stale).
#[test]
fn an_old_members_first_datagram_does_not_revive_the_past() {
    let mut p = SharedPair::new(2, 16, clean(), 63);
    for q in 0..2 {
        fill(&mut p, q);
    }
    for r in 0..3 {
        write(&mut p, 0, r, r as usize * 1000, 1000);
    }
    assert!(p.run(1_000_000_000));
    assert!(ok(&mut p, 0, &[0, 1, 2]));
    write(&mut p, 1, 9, 9000, 800);
    p.doorbell();
    let old: Vec<Vec<u8>> = p.wire.queue.drain(..).map(|x| x.3).collect();
    assert!(!old.is_empty());
    assert!(p.nodes[1].qp(1).fresh, "node 1's QP 1 has accepted nothing");
    let inc1 = renew(&mut p);
    write(&mut p, 0, 10, 20_000, 1000);
    assert!(p.run(1_000_000_000));
    assert!(ok(&mut p, 0, &[10]));
    assert_eq!(p.nodes[1].conn.peer_incarnation(), inc1);
    let now = Instant(p.now);
    for d in &old {
        assert_eq!(
            p.nodes[1].deliver(now, d),
            Err(DropReason::StaleIncarnation)
        );
    }
    assert_eq!(p.nodes[1].conn.peer_incarnation(), inc1);
    assert!(!written(&mut p, 1, 9000, 800), "the old WRITE placed");
    for r in 0..3 {
        write(&mut p, 0, 11 + r, 21_000 + r as usize * 1000, 1000);
    }
    assert!(p.run(5_000_000_000));
    assert!(
        ok(&mut p, 0, &[10, 11, 12, 13]),
        "the new pair's later WRITEs"
    );
}
