//! The RC engine, host-tested: two model QPs (engine + connection each, in-memory
//! rings, MRs and CQs) over a seeded link. Every opcode (bytes and completions checked,
//! also at completion time), exactly-once atomics under duplication, SRQ, CQ overrun,
//! local operations, unsignaled WQEs. Error paths: `rc_errors.rs`.
mod rc_common;
use metaroce_proto::rc::{send_flags, QpMode, WcOpcode, WcStatus, WrOpcode};
use metaroce_proto::testkit::rc::{Event, Link, Pair};
use rc_common::*;

const ATOMIC_OFF: usize = 1 << 16;

/// One WQE of every opcode (and zero-length, multi-SGE, inline), posted at once; checks
/// every completion (both sides, in order, exactly once) and every byte placed.
fn every_opcode(link: Link, seed: u64) {
    let (mut p, a, b) = setup(32, false, link, seed);
    // Receives: 0 (SEND 100), 1 (SEND_IMM 3000, two SGEs), 2 (SEND_INV 0), 3 (WRITE_IMM),
    // 4 (zero-length SEND), 5 (inline SEND 40).
    let recvs: Vec<Vec<_>> = vec![
        vec![sge(b, 1000, 100, B_MR)],
        vec![sge(b, 2000, 1500, B_MR), sge(b, 4000, 1500, B_MR)],
        vec![sge(b, 6000, 64, B_MR)],
        vec![],
        vec![],
        vec![sge(b, 7000, 64, B_MR)],
    ];
    for (i, s) in recvs.iter().enumerate() {
        assert!(p.b.host.post_recv(100 + i as u64, s));
    }
    let inv_key = 0x30;
    p.b.host.reg_mr(inv_key, 64, 0);
    let mut w = Vec::new();
    w.push(wqe(WrOpcode::Send, 0, vec![sge(a, 0, 100, A_MR)]));
    let mut e = wqe(
        WrOpcode::SendWithImm,
        1,
        vec![
            sge(a, 200, 1000, A_MR),
            sge(a, 1300, 1000, A_MR),
            sge(a, 2400, 1000, A_MR),
        ],
    );
    e.wqe.ex = 0x1234_5678u32.to_be();
    w.push(e);
    let mut e = wqe(WrOpcode::SendWithInv, 2, vec![]);
    e.wqe.ex = inv_key;
    w.push(e);
    w.push(rdma(
        wqe(WrOpcode::RdmaWrite, 3, vec![sge(a, 4000, 5000, A_MR)]),
        b + 10_000,
        B_MR,
    ));
    let mut e = rdma(
        wqe(WrOpcode::RdmaWriteWithImm, 4, vec![sge(a, 9000, 10, A_MR)]),
        b + 16_000,
        B_MR,
    );
    e.wqe.ex = 0xabcdu32.to_be();
    w.push(e);
    w.push(rdma(
        wqe(WrOpcode::RdmaRead, 5, vec![sge(a, 12_000, 4000, A_MR)]),
        b + B_READ as u64,
        B_MR,
    ));
    let mut e = rdma(
        wqe(WrOpcode::AtomicCmpAndSwp, 6, vec![sge(a, 16_000, 8, A_MR)]),
        b + ATOMIC_OFF as u64,
        B_MR,
    );
    (e.wqe.compare_add, e.wqe.swap) = (0, 77);
    w.push(e);
    let mut e = rdma(
        wqe(
            WrOpcode::AtomicFetchAndAdd,
            7,
            vec![sge(a, 16_008, 8, A_MR)],
        ),
        b + ATOMIC_OFF as u64,
        B_MR,
    );
    e.wqe.compare_add = 5;
    w.push(e);
    let mut e = rdma(
        wqe(WrOpcode::AtomicWrite, 8, vec![]),
        b + ATOMIC_OFF as u64 + 8,
        B_MR,
    );
    e.wqe.length = 8;
    e.inline = 0xdead_beef_0bad_f00du64.to_ne_bytes().to_vec();
    w.push(e);
    w.push(wqe(WrOpcode::Send, 9, vec![]));
    w.push(rdma(wqe(WrOpcode::RdmaWrite, 10, vec![]), b + 20_000, B_MR));
    let mut e = wqe(WrOpcode::Send, 11, vec![]);
    e.wqe.send_flags |= send_flags::INLINE | send_flags::SOLICITED;
    e.wqe.length = 40;
    e.inline = (0..40u8).collect();
    w.push(e);
    for e in w {
        assert!(p.a.host.post_send(e));
    }
    p.a.host.snapshot_key = Some(A_MR);
    assert!(p.run(5_000_000_000), "seed {seed}: did not go quiet");
    // Requester: every WQE once, in order, successful.
    let cq = &p.a.host.send_cq;
    let want = [
        (WcOpcode::Send, 100),
        (WcOpcode::Send, 3000),
        (WcOpcode::Send, 0),
        (WcOpcode::RdmaWrite, 5000),
        (WcOpcode::RdmaWrite, 10),
        (WcOpcode::RdmaRead, 4000),
        (WcOpcode::CompSwap, 8),
        (WcOpcode::FetchAdd, 8),
        (WcOpcode::AtomicWrite, 8),
        (WcOpcode::Send, 0),
        (WcOpcode::RdmaWrite, 0),
        (WcOpcode::Send, 40),
    ];
    assert_eq!(cq.len(), want.len(), "seed {seed}: {cq:?}");
    for (i, (c, (op, len))) in cq.iter().zip(want).enumerate() {
        send_ok(c, i as u64, op, len);
    }
    // Responder: receives in order.
    let rq = &p.b.host.recv_cq;
    let got: Vec<_> = rq
        .iter()
        .map(|(c, s)| (c.wr_id, c.status, c.opcode, c.byte_len, c.flags, c.ex, *s))
        .collect();
    use metaroce_proto::rc::wc_flags::{WITH_IMM, WITH_INVALIDATE};
    assert_eq!(
        got,
        vec![
            (100, WcStatus::Success, WcOpcode::Recv, 100, 0, 0, false),
            (
                101,
                WcStatus::Success,
                WcOpcode::Recv,
                3000,
                WITH_IMM,
                0x1234_5678u32.to_be(),
                false
            ),
            (
                102,
                WcStatus::Success,
                WcOpcode::Recv,
                0,
                WITH_INVALIDATE,
                inv_key,
                false
            ),
            (
                103,
                WcStatus::Success,
                WcOpcode::RecvRdmaWithImm,
                10,
                WITH_IMM,
                0xabcdu32.to_be(),
                false
            ),
            (104, WcStatus::Success, WcOpcode::Recv, 0, 0, 0, false),
            (105, WcStatus::Success, WcOpcode::Recv, 40, 0, 0, true),
        ],
        "seed {seed}"
    );
    // Bytes placed exactly.
    let am = p.a.host.mr(A_MR).unwrap().bytes.clone();
    let bm = &p.b.host.mr(B_MR).unwrap().bytes;
    let src = |o: usize, n: usize| (o..o + n).map(pattern).collect::<Vec<_>>();
    assert_eq!(bm[1000..1100], src(0, 100)[..]);
    let sent: Vec<u8> = [src(200, 1000), src(1300, 1000), src(2400, 1000)].concat();
    assert_eq!(bm[2000..3500], sent[..1500]);
    assert_eq!(bm[4000..5500], sent[1500..]);
    assert_eq!(bm[10_000..15_000], src(4000, 5000)[..]);
    assert_eq!(bm[16_000..16_010], src(9000, 10)[..]);
    assert_eq!(bm[7000..7040], (0..40u8).collect::<Vec<_>>()[..]);
    let read: Vec<u8> = (0..4000).map(|i| pattern(i + 7)).collect();
    assert_eq!(am[12_000..16_000], read[..]);
    let word = |m: &[u8], o: usize| u64::from_ne_bytes(m[o..o + 8].try_into().unwrap());
    // What the requester's memory held when each READ/atomic completed: its data, all
    // of it (a completion is written only once the response is whole and placed).
    let snap = |id: u64| &p.a.host.snapshots.iter().find(|x| x.0 == id).unwrap().1;
    assert!(
        snap(5)[12_000..16_000] == read[..],
        "seed {seed}: READ data not all placed when its completion was written"
    );
    assert_eq!(
        word(snap(6), 16_000),
        0,
        "seed {seed}: CMP_SWAP at completion"
    );
    assert_eq!(
        word(snap(7), 16_008),
        77,
        "seed {seed}: FETCH_ADD at completion"
    );
    assert_eq!(word(&am, 16_000), 0, "CMP_SWAP original");
    assert_eq!(word(&am, 16_008), 77, "FETCH_ADD original");
    assert_eq!(word(bm, ATOMIC_OFF), 82, "atomics exactly once");
    assert_eq!(word(bm, ATOMIC_OFF + 8), 0xdead_beef_0bad_f00d);
    assert!(bm[20_000..20_064].iter().all(|&x| x == 0));
    assert!(
        !p.b.host.mr(inv_key).unwrap().valid,
        "SEND_WITH_INV invalidated"
    );
    assert_eq!(p.a.host.mode, QpMode::Rts);
    assert_eq!(p.b.host.mode, QpMode::Rts);
    assert_eq!(p.a.host.sq_cons, p.a.host.sq_prod, "SQ consumed");
    assert_eq!(p.b.host.rq_cons, p.b.host.rq_prod, "RQ consumed");
}

#[test]
fn every_opcode_lossless() {
    every_opcode(clean(), 1);
}

#[test]
fn every_opcode_lossy_reordering_duplicating() {
    for seed in 1..25 {
        every_opcode(lossy(50_000, 50_000, 250_000), seed);
    }
}

/// FETCH_ADDs under heavy loss, duplication and reordering: each executes exactly once,
/// in order (the originals are the prefix sums), and the final value is the sum.
#[test]
fn atomics_are_exactly_once_under_duplication() {
    for seed in 1..8 {
        let (mut p, a, b) = setup(64, false, lossy(100_000, 300_000, 300_000), seed);
        p.a.host.attrs.max_rd_atomic = 4;
        let n = 60;
        for i in 0..n {
            let mut e = rdma(
                wqe(
                    WrOpcode::AtomicFetchAndAdd,
                    i,
                    vec![sge(a, 8 * i as usize, 8, A_MR)],
                ),
                b + ATOMIC_OFF as u64,
                B_MR,
            );
            e.wqe.compare_add = i + 1;
            assert!(p.a.host.post_send(e));
        }
        assert!(p.run(20_000_000_000), "seed {seed}");
        let cq = &p.a.host.send_cq;
        assert_eq!(cq.len(), n as usize, "seed {seed}");
        let am = &p.a.host.mr(A_MR).unwrap().bytes;
        let mut sum = 0u64;
        for i in 0..n as usize {
            send_ok(&cq[i], i as u64, WcOpcode::FetchAdd, 8);
            let got = u64::from_ne_bytes(am[8 * i..8 * i + 8].try_into().unwrap());
            assert_eq!(got, sum, "seed {seed}: original of #{i}");
            sum += i as u64 + 1;
        }
        let bm = &p.b.host.mr(B_MR).unwrap().bytes;
        let fin = u64::from_ne_bytes(bm[ATOMIC_OFF..ATOMIC_OFF + 8].try_into().unwrap());
        assert_eq!(fin, sum, "seed {seed}");
    }
}

#[test]
fn srq_receives_in_order_over_a_lossy_link() {
    for seed in 1..6 {
        let (mut p, a, b) = setup(32, true, lossy(50_000, 50_000, 250_000), seed);
        // Half the receives now, half later (RNR in between).
        for i in 0..6u64 {
            assert!(p
                .b
                .host
                .post_recv(100 + i, &[sge(b, 5000 * i as usize, 5000, B_MR)]));
        }
        for i in 0..12u64 {
            let e = wqe(
                WrOpcode::Send,
                i,
                vec![sge(a, 100 * i as usize, 3000, A_MR)],
            );
            assert!(p.a.host.post_send(e));
        }
        p.run(2_000_000);
        for i in 6..12u64 {
            assert!(p
                .b
                .host
                .post_recv(100 + i, &[sge(b, 5000 * i as usize, 5000, B_MR)]));
        }
        assert!(p.run(20_000_000_000), "seed {seed}");
        assert_eq!(p.a.host.send_cq.len(), 12);
        for (i, c) in p.a.host.send_cq.iter().enumerate() {
            send_ok(c, i as u64, WcOpcode::Send, 3000);
        }
        let bm = &p.b.host.mr(B_MR).unwrap().bytes;
        assert_eq!(p.b.host.recv_cq.len(), 12);
        // Completions in message order; an SRQ WQE goes to whichever message reached
        // the SRQ first (sprayed packets may overtake), so the WQEs are a permutation.
        let mut ids: Vec<u64> = p.b.host.recv_cq.iter().map(|x| x.0.wr_id).collect();
        for (i, (c, _)) in p.b.host.recv_cq.iter().enumerate() {
            assert_eq!((c.status, c.byte_len), (WcStatus::Success, 3000));
            let j = (c.wr_id - 100) as usize;
            let want: Vec<u8> = (0..3000).map(|k| pattern(100 * i + k)).collect();
            assert_eq!(
                bm[5000 * j..5000 * j + 3000],
                want[..],
                "seed {seed} recv {i}"
            );
        }
        ids.sort();
        assert_eq!(ids, (100..112).collect::<Vec<_>>());
    }
}

#[test]
fn srq_qp_in_error_raises_last_wqe_reached_once() {
    let (mut p, _, _) = setup(8, true, clean(), 12);
    p.b.modify_to_error();
    p.b.modify_to_error();
    let n =
        p.b.host
            .events
            .iter()
            .filter(|e| **e == Event::LastWqeReached)
            .count();
    assert_eq!(n, 1);
}

/// A receive completion lost to a full CQ: the responder enters the error state and its
/// connection stops (IBTA 11.4.2.1 class G), so the requester's later WQE fails.
#[test]
fn cq_overrun_moves_the_responder_to_error() {
    let (mut p, a, b) = setup(8, false, clean(), 13);
    p.a.set_retry(8, 1, 7);
    p.b.host.cq_cap = 1;
    for i in 0..3u64 {
        assert!(p
            .b
            .host
            .post_recv(i, &[sge(b, 100 * i as usize, 100, B_MR)]));
        assert!(p
            .a
            .host
            .post_send(wqe(WrOpcode::Send, i, vec![sge(a, 0, 10, A_MR)])));
    }
    p.run(10_000_000_000);
    assert_eq!(p.b.host.mode, QpMode::Err);
    assert_eq!(p.b.host.recv_cq.len(), 1);
    assert_eq!(p.a.host.mode, QpMode::Err);
    assert_eq!(p.a.host.send_cq[0].status, WcStatus::Success);
    assert!(p
        .a
        .host
        .send_cq
        .iter()
        .skip(1)
        .all(|c| c.status != WcStatus::Success));
}

#[test]
fn unsupported_opcode_is_a_local_qp_operation_error() {
    let (mut p, a, _) = setup(8, false, clean(), 14);
    let mut e = wqe(WrOpcode::Send, 1, vec![sge(a, 0, 10, A_MR)]);
    e.wqe.opcode = 14; // IB_WR_FLUSH
    assert!(p.a.host.post_send(e));
    p.run(1_000_000_000);
    assert_eq!(statuses(&p.a.host.send_cq), vec![(1, WcStatus::LocQpOpErr)]);
    assert_eq!(p.data_sent[0], 0);
}

#[test]
fn local_invalidate_completes_in_order() {
    let (mut p, a, b) = setup(8, false, clean(), 15);
    p.a.host.reg_mr(0x40, 64, 0);
    let e = rdma(
        wqe(WrOpcode::RdmaWrite, 1, vec![sge(a, 0, 10, A_MR)]),
        b,
        B_MR,
    );
    assert!(p.a.host.post_send(e));
    let mut e = wqe(WrOpcode::LocalInv, 2, vec![]);
    e.wqe.ex = 0x40;
    assert!(p.a.host.post_send(e));
    assert!(p.run(1_000_000_000));
    send_ok(&p.a.host.send_cq[0], 1, WcOpcode::RdmaWrite, 10);
    send_ok(&p.a.host.send_cq[1], 2, WcOpcode::LocalInv, 0);
    assert!(!p.a.host.mr(0x40).unwrap().valid);
}

#[test]
fn unsignaled_successes_complete_silently() {
    let (mut p, a, b) = setup(8, false, clean(), 16);
    let mut e = rdma(
        wqe(WrOpcode::RdmaWrite, 1, vec![sge(a, 0, 10, A_MR)]),
        b,
        B_MR,
    );
    e.wqe.send_flags = 0;
    assert!(p.a.host.post_send(e));
    let e = rdma(
        wqe(WrOpcode::RdmaWrite, 2, vec![sge(a, 0, 10, A_MR)]),
        b,
        B_MR,
    );
    assert!(p.a.host.post_send(e));
    assert!(p.run(1_000_000_000));
    assert_eq!(statuses(&p.a.host.send_cq), vec![(2, WcStatus::Success)]);
    assert_eq!(p.a.host.sq_cons, p.a.host.sq_prod);
}

#[test]
fn retry_config_follows_ibta_timeouts() {
    use metaroce_proto::rc::{ack_timeout_ns, ACK_TIMEOUT_SCALE};
    assert_eq!(ACK_TIMEOUT_SCALE, 4);
    assert_eq!(ack_timeout_ns(0), u64::MAX);
    assert_eq!(ack_timeout_ns(18), 4 * (4096 << 18));
    assert_eq!(ack_timeout_ns(14), 4 * (4096 << 14));
    assert_eq!(ack_timeout_ns(200), 4 * (4096u64 << 31));
}

#[test]
fn wire_values_are_the_ib_ones() {
    assert_eq!(WrOpcode::from_raw(0x20), Some(WrOpcode::RegMr));
    assert_eq!(WrOpcode::from_raw(14), None);
    assert_eq!(WcStatus::RnrRetryExcErr as u32, 13);
    assert_eq!(WcOpcode::RecvRdmaWithImm as u32, 129);
}

#[test]
fn link_model_is_deterministic() {
    let run = |seed| {
        let (mut p, a, b) = setup(8, false, lossy(100_000, 100_000, 300_000), seed);
        let e = rdma(
            wqe(WrOpcode::RdmaWrite, 1, vec![sge(a, 0, 20_000, A_MR)]),
            b,
            B_MR,
        );
        assert!(p.a.host.post_send(e));
        assert!(p.run(10_000_000_000));
        (p.now, p.data_sent)
    };
    assert_eq!(run(3), run(3));
    let _ = Pair::new(2, false, Link::default(), 0);
}

/// IBV_SEND_FENCE: a WRITE fenced behind a READ of the same bytes starts only once the
/// READ's response is whole, so the READ returns the bytes from before the WRITE
/// (IBTA 10.8.3.3), whatever the link does.
#[test]
fn fence_holds_a_write_behind_an_earlier_read() {
    for seed in 1..10 {
        let (mut p, a, b) = setup(8, false, lossy(50_000, 50_000, 300_000), seed);
        let src = b + B_READ as u64;
        let read = rdma(
            wqe(WrOpcode::RdmaRead, 1, vec![sge(a, 1 << 17, 3000, A_MR)]),
            src,
            B_MR,
        );
        assert!(p.a.host.post_send(read));
        let mut w = rdma(
            wqe(WrOpcode::RdmaWrite, 2, vec![sge(a, 0, 3000, A_MR)]),
            src,
            B_MR,
        );
        w.wqe.send_flags |= send_flags::FENCE;
        assert!(p.a.host.post_send(w));
        assert!(p.run(10_000_000_000), "seed {seed}");
        assert_eq!(
            statuses(&p.a.host.send_cq),
            vec![(1, WcStatus::Success), (2, WcStatus::Success)]
        );
        let am = &p.a.host.mr(A_MR).unwrap().bytes;
        let before: Vec<u8> = (0..3000).map(|k| pattern(k + 7)).collect();
        assert!(am[1 << 17..(1 << 17) + 3000] == before[..], "seed {seed}");
        let bm = &p.b.host.mr(B_MR).unwrap().bytes;
        let after: Vec<u8> = (0..3000).map(pattern).collect();
        assert!(bm[B_READ..B_READ + 3000] == after[..], "seed {seed}");
    }
}
