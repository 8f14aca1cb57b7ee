//! The connection mode on the wire (Documentation/transport.rst, C22 and V0): every
//! DATA, ACK and PROBE says in its type byte whether its sender's connection is shared
//! by several QP pairs (`TYPE_SHARED`). A receiver of the other mode drops it as
//! `mode_mismatch` before it looks anything up, so two ends that disagree see a counted
//! reason, not packets that seem to fall outside every window; nothing changes. The
//! test: real datagrams of a run, each delivered first with its mode bit flipped
//! (dropped, nothing changed) and then as it was (taken), on a connection of one pair
//! and on a shared one; the run's WRITEs then complete with their bytes.
mod rc_common;
use metaroce_proto::rc::{access, WcOpcode, WrOpcode};
use metaroce_proto::testkit::shared::{SharedNode, SharedPair};
use metaroce_proto::time::Instant;
use metaroce_proto::wire::{is_shared, peek_type, set_shared, DropReason, PacketType};
use rc_common::*;

/// `d` with its mode bit flipped.
fn flipped(d: &[u8]) -> Vec<u8> {
    let mut out = d.to_vec();
    set_shared(&mut out, !is_shared(d)).unwrap();
    out
}

/// A shared node's state: its connection, and every member's engine and verbs objects.
fn state(n: &SharedNode) -> String {
    let mut s = format!("{:?}", n.conn);
    for q in n.qps.iter().flatten() {
        s += &format!("{:?}{:?}{}", q.engine, q.host, q.fresh);
    }
    s
}

/// Connection of one pair: its datagrams say "not shared"; each one with the bit set
/// is dropped with nothing changed, and the run then completes as usual.
#[test]
fn a_connection_of_one_pair_drops_shared_datagrams_unchanged() {
    let (mut p, a, b) = setup(8, false, clean(), 31);
    let w = rdma(
        wqe(WrOpcode::RdmaWrite, 1, vec![sge(a, 0, 5000, A_MR)]),
        b,
        B_MR,
    );
    assert!(p.a.host.post_send(w));
    p.doorbell(0);
    let mut seen = [0u32; 4];
    for _ in 0..1000 {
        let wire = p.take_wire();
        if wire.is_empty() {
            if !p.a.host.send_cq.is_empty() {
                break;
            }
            // An ACK waits for its timer.
            p.tick(10_000);
            continue;
        }
        for (to, d) in &wire {
            assert!(!is_shared(d), "a connection of one pair marks nothing");
            let t = peek_type(d).unwrap();
            seen[t as usize - 1] += 1;
            let n = if *to == 0 { &mut p.a } else { &mut p.b };
            let before = format!("{:?}{:?}{:?}", n.conn, n.engine, n.host);
            let r = n.conn.handle_packet(
                Instant(p.now),
                &flipped(d),
                false,
                &mut n.engine.bind(&mut n.host),
            );
            assert_eq!(r.err(), Some(DropReason::ModeMismatch), "{t:?}");
            assert_eq!(
                before,
                format!("{:?}{:?}{:?}", n.conn, n.engine, n.host),
                "a {t:?} of the other mode changed node {to}"
            );
            p.inject(*to, d);
        }
    }
    assert!(
        seen[PacketType::Data as usize - 1] >= 4 && seen[PacketType::Ack as usize - 1] >= 1,
        "DATA and ACKs were tried: {seen:?}"
    );
    send_ok(&p.a.host.send_cq[0], 1, WcOpcode::RdmaWrite, 5000);
    let bm = &p.b.host.mr(B_MR).unwrap().bytes;
    assert!((0..5000).all(|i| bm[i] == pattern(i)), "the WRITE placed");
}

/// Shared connection: its datagrams say "shared"; each one with the bit cleared is
/// dropped with nothing changed (the connection and every member), and the run then
/// completes.
#[test]
fn a_shared_connection_drops_datagrams_of_one_pair_unchanged() {
    const MR: u32 = 0x10;
    let va = u64::from(MR) << 32 | 0x1000;
    let mut p = SharedPair::new(2, 16, clean(), 32);
    let all = access::LOCAL_WRITE | access::REMOTE_WRITE;
    for n in 0..2 {
        for q in 0..2 {
            assert_eq!(p.nodes[n].qp(q).host.reg_mr(MR, MR_LEN, all), va);
        }
    }
    for q in 0..2 {
        for (i, x) in p.nodes[0].qp(q).host.mr_mut(MR).unwrap().bytes[..3000]
            .iter_mut()
            .enumerate()
        {
            *x = pattern(i + q);
        }
        let w = rdma(
            wqe(WrOpcode::RdmaWrite, 1, vec![sge(va, 0, 3000, MR)]),
            va + 8192,
            MR,
        );
        assert!(p.nodes[0].qp(q).host.post_send(w));
    }
    let mut seen = [0u32; 4];
    for _ in 0..50 {
        p.doorbell();
        let now = Instant(p.now);
        let sent: Vec<_> = p.wire.queue.drain(..).map(|w| (w.2, w.3)).collect();
        if sent.is_empty() {
            break;
        }
        for (to, d) in &sent {
            assert!(is_shared(d), "a shared connection marks every datagram");
            let t = peek_type(d).unwrap();
            seen[t as usize - 1] += 1;
            let n = &mut p.nodes[usize::from(*to)];
            let before = state(n);
            assert_eq!(
                n.deliver(now, &flipped(d)),
                Err(DropReason::ModeMismatch),
                "{t:?}"
            );
            assert_eq!(before, state(n), "a {t:?} of the other mode");
            assert_eq!(n.deliver(now, d), Ok(()), "the real {t:?}");
        }
    }
    assert!(p.run(1_000_000_000));
    assert!(
        seen[PacketType::Data as usize - 1] >= 6 && seen[PacketType::Ack as usize - 1] >= 1,
        "DATA and ACKs were tried: {seen:?}"
    );
    for q in 0..2 {
        let c = p.nodes[0].qp(q).host.send_cq[0];
        send_ok(&c, 1, WcOpcode::RdmaWrite, 3000);
        let bm = &p.nodes[1].qp(q).host.mr(MR).unwrap().bytes;
        assert!((0..3000).all(|i| bm[8192 + i] == pattern(i + q)), "QP {q}");
    }
}
