//! Many RC QPs over one connection (Documentation/transport.rst, "Streams"): each node's
//! QPs share one connection, QP `q`'s requests on stream `2q` and its responses on
//! `2q + 1` ([`metaroce_proto::testkit::shared`]). Integrity of every QP over a lossy
//! link, a QP's failure leaving the others and the connection running, a loss on one
//! QP not delaying the others, and QPs joining and leaving during traffic.
mod rc_common;
use metaroce_proto::conn::{Config, ConnState, Connection};
use metaroce_proto::rc::{access, QpMode, WcStatus, WrOpcode};
use metaroce_proto::testkit::rc::Link;
use metaroce_proto::testkit::shared::SharedPair;
use rc_common::{clean, codes, lossy, pattern, rdma, sge, wqe, A_MR, B_MR, B_READ, MR_LEN};

/// The byte at offset `i` of QP `q`'s memory on node 0 (its READ source on node 1 is the
/// same shifted by 7).
fn byte(q: usize, i: usize) -> u8 {
    pattern(i + q * 13)
}

/// `qps` QP pairs, each with its MRs (node 0: `A_MR`, filled; node 1: `B_MR`, its READ
/// area filled), over `link`.
fn setup(qps: usize, link: Link, seed: u64) -> SharedPair {
    let mut p = SharedPair::new(qps, 32, link, seed);
    for q in 0..qps {
        fill(&mut p, q);
    }
    p
}

fn fill(p: &mut SharedPair, q: usize) {
    let all =
        access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ | access::REMOTE_ATOMIC;
    let a = p.nodes[0]
        .qp(q)
        .host
        .reg_mr(A_MR, MR_LEN, access::LOCAL_WRITE);
    let b = p.nodes[1].qp(q).host.reg_mr(B_MR, MR_LEN, all);
    assert_eq!((a, b), (va(A_MR), va(B_MR)));
    let mr = p.nodes[0].qp(q).host.mr_mut(A_MR).unwrap();
    for (i, x) in mr.bytes.iter_mut().enumerate() {
        *x = byte(q, i);
    }
    let mr = p.nodes[1].qp(q).host.mr_mut(B_MR).unwrap();
    for (i, x) in mr.bytes[B_READ..].iter_mut().enumerate() {
        *x = byte(q, i + 7);
    }
}

/// The address the model host gives region `key`.
fn va(key: u32) -> u64 {
    u64::from(key) << 32 | 0x1000
}

/// QP `q`'s work, `n` rounds: a WRITE, a SEND (into a receive posted on node 1) and a
/// READ, of sizes that differ by QP and round. Returns the wr_ids posted.
fn post_work(p: &mut SharedPair, q: usize, n: usize) -> Vec<u64> {
    let (a, b) = (va(A_MR), va(B_MR));
    let mut ids = Vec::new();
    for r in 0..n {
        let len = 1000 + (q * 37 + r * 501) % 4000;
        let off = r * 8192;
        let id = (r * 3) as u64;
        assert!(p.nodes[1]
            .qp(q)
            .host
            .post_recv(id, &[sge(b, 64 * 1024 + off, 8192, B_MR)]));
        let w = rdma(
            wqe(WrOpcode::RdmaWrite, id, vec![sge(a, off, len, A_MR)]),
            b + off as u64,
            B_MR,
        );
        let s = wqe(WrOpcode::Send, id + 1, vec![sge(a, off + 100, len, A_MR)]);
        let rd = rdma(
            wqe(
                WrOpcode::RdmaRead,
                id + 2,
                vec![sge(a, 128 * 1024 + off, len, A_MR)],
            ),
            b + (B_READ + off) as u64,
            B_MR,
        );
        for e in [w, s, rd] {
            ids.push(e.wqe.wr_id);
            assert!(p.nodes[0].qp(q).host.post_send(e));
        }
    }
    ids
}

/// QP `q`'s `n` rounds arrived whole: every send completion a success, in order, every
/// receive, and the bytes where they belong on both sides.
fn check_work(p: &mut SharedPair, q: usize, n: usize) {
    let ids: Vec<u64> = (0..n as u64 * 3).collect();
    let a = &p.nodes[0].qp(q).host;
    let got: Vec<(u64, WcStatus)> = a.send_cq.iter().map(|c| (c.wr_id, c.status)).collect();
    let want: Vec<(u64, WcStatus)> = ids.iter().map(|i| (*i, WcStatus::Success)).collect();
    assert_eq!(got, want, "QP {q}: send completions");
    let b = &p.nodes[1].qp(q).host;
    let recvs: Vec<(u64, WcStatus)> = b.recv_cq.iter().map(|c| (c.0.wr_id, c.0.status)).collect();
    let want: Vec<(u64, WcStatus)> = (0..n)
        .map(|r| ((r * 3) as u64, WcStatus::Success))
        .collect();
    assert_eq!(recvs, want, "QP {q}: receive completions");
    let am = &p.nodes[0].qp(q).host.mr(A_MR).unwrap().bytes.clone();
    let bm = &p.nodes[1].qp(q).host.mr(B_MR).unwrap().bytes.clone();
    for r in 0..n {
        let len = 1000 + (q * 37 + r * 501) % 4000;
        let off = r * 8192;
        assert!(
            (0..len).all(|i| bm[off + i] == byte(q, off + i)),
            "QP {q} round {r}: WRITE bytes"
        );
        assert!(
            (0..len).all(|i| bm[64 * 1024 + off + i] == byte(q, off + 100 + i)),
            "QP {q} round {r}: SEND bytes"
        );
        assert!(
            (0..len).all(|i| am[128 * 1024 + off + i] == byte(q, off + i + 7)),
            "QP {q} round {r}: READ bytes"
        );
    }
}

fn open(p: &SharedPair) -> bool {
    p.nodes.iter().all(|n| n.conn.state() == ConnState::Open)
}

/// 64 QPs on one connection per node, over 1 % loss, 1 % duplication and 5 %
/// reordering: every QP's WRITEs, SENDs and READs complete in order with the right
/// bytes, none delivered twice.
#[test]
fn sixty_four_qps_share_one_connection_over_a_lossy_link() {
    for seed in [1, 2, 3] {
        let mut p = setup(64, lossy(10_000, 10_000, 50_000), seed);
        for q in 0..64 {
            post_work(&mut p, q, 3);
        }
        assert!(p.run(5_000_000_000), "seed {seed}: still busy");
        for q in 0..64 {
            check_work(&mut p, q, 3);
        }
        assert!(open(&p));
        let retx = p.nodes[0].conn.stats().retx;
        println!(
            "seed {seed}: {} data packets, {retx} resent",
            p.nodes[0].conn.stats().data_tx
        );
    }
}

/// One QP's request is refused for good (a WRITE under a wrong rkey: remote access
/// error): that QP fails (the WQE with IB_WC_REM_ACCESS_ERR, the rest flushed), the
/// other QPs' work completes, the connection stays open, and work posted afterwards on
/// another QP still goes through.
/// ACKs riding on DATA (Documentation/transport.rst, "ACKs riding on DATA") over a
/// shared connection: the kernel hands a datagram to the QP its first record names, so a
/// ride's DATA must be for the member its ACKs are addressed to (H18); on a clean link
/// with four QPs' WRITEs, SENDs and READs under way at once, responses ride and nothing
/// is dropped.
#[test]
fn rides_over_a_shared_connection_drop_nothing() {
    let (qps, n) = (4, 8u64);
    let mut p = setup(qps, clean(), 17);
    let (a, b) = (va(A_MR), va(B_MR));
    for q in 0..qps {
        for r in 0..n {
            let off = r as usize * 256;
            let w = rdma(
                wqe(WrOpcode::RdmaWrite, 2 * r, vec![sge(a, off, 200, A_MR)]),
                b + off as u64,
                B_MR,
            );
            let rd = rdma(
                wqe(
                    WrOpcode::RdmaRead,
                    2 * r + 1,
                    vec![sge(a, 128 * 1024 + off, 64, A_MR)],
                ),
                b + (B_READ + off) as u64,
                B_MR,
            );
            for e in [w, rd] {
                assert!(p.nodes[0].qp(q).host.post_send(e));
            }
        }
    }
    assert!(p.run(5_000_000_000));
    assert!(p.rides[1] > 0, "no response rode on an ACK");
    assert_eq!(p.rx_drops, [0, 0], "rides {:?}", p.rides);
    for q in 0..qps {
        let host = &p.nodes[0].qp(q).host;
        let got: Vec<(u64, WcStatus)> = host.send_cq.iter().map(|c| (c.wr_id, c.status)).collect();
        let want: Vec<(u64, WcStatus)> = (0..2 * n).map(|i| (i, WcStatus::Success)).collect();
        assert_eq!(got, want, "QP {q}");
        for r in 0..n as usize {
            let off = r * 256;
            let got = &host.mr(A_MR).unwrap().bytes[128 * 1024 + off..128 * 1024 + off + 64];
            assert!(
                got.iter()
                    .enumerate()
                    .all(|(i, &x)| x == byte(q, off + i + 7)),
                "QP {q} READ {r}"
            );
        }
    }
}

#[test]
fn a_qp_in_error_leaves_the_others_and_the_connection_running() {
    let mut p = setup(8, lossy(5_000, 0, 20_000), 7);
    let bad = rdma(
        wqe(WrOpcode::RdmaWrite, 100, vec![sge(va(A_MR), 0, 500, A_MR)]),
        va(B_MR),
        0x99,
    );
    assert!(p.nodes[0].qp(3).host.post_send(bad));
    for q in 0..8 {
        post_work(&mut p, q, 2);
    }
    assert!(p.run(5_000_000_000));
    let failed = codes(&p.nodes[0].qp(3).host.send_cq);
    assert_eq!(failed.first(), Some(&WcStatus::RemAccessErr), "{failed:?}");
    assert!(
        failed[1..].iter().all(|s| *s == WcStatus::WrFlushErr),
        "{failed:?}"
    );
    for q in (0..8).filter(|q| *q != 3) {
        check_work(&mut p, q, 2);
    }
    assert!(open(&p));
    // The connection carries on: more work on QP 5.
    let more = rdma(
        wqe(
            WrOpcode::RdmaWrite,
            50,
            vec![sge(va(A_MR), 200_000, 3000, A_MR)],
        ),
        va(B_MR) + 200_000,
        B_MR,
    );
    assert!(p.nodes[0].qp(5).host.post_send(more));
    assert!(p.run(5_000_000_000));
    let last = p.nodes[0]
        .qp(5)
        .host
        .send_cq
        .last()
        .map(|c| (c.wr_id, c.status));
    assert_eq!(last, Some((50, WcStatus::Success)));
}

/// QP 3's first packet is lost: its SEND completes only after the loss is repaired,
/// while the other QPs' SENDs, posted at the same time, complete as they would
/// without it (no head-of-line blocking across QPs of one connection). The first
/// window holds every packet, so that the shared congestion window's reaction to the
/// loss (which rightly slows every stream that comes after it) does not enter.
#[test]
fn a_loss_on_one_qp_does_not_delay_the_others() {
    let run = |lose: bool| {
        let mut p = setup(8, clean(), 1);
        for n in p.nodes.iter_mut() {
            let cfg = Config {
                init_qwnd: 1 << 20,
                ..*n.conn.config()
            };
            n.conn = Connection::new(cfg);
        }
        for q in 0..8 {
            assert!(p.nodes[1]
                .qp(q)
                .host
                .post_recv(0, &[sge(va(B_MR), 0, 8192, B_MR)]));
            let s = wqe(WrOpcode::Send, 0, vec![sge(va(A_MR), 0, 4000, A_MR)]);
            assert!(p.nodes[0].qp(q).host.post_send(s));
        }
        if lose {
            p.lose_first_on.push(6);
        }
        assert!(p.run(1_000_000_000));
        let mut at = [0u64; 8];
        for (node, s, _, t) in &p.completions {
            if *node == 1 {
                at[usize::from(*s / 2)] = *t;
            }
        }
        assert!(at.iter().all(|t| *t > 0), "{at:?}");
        at
    };
    let (clean_at, lossy_at) = (run(false), run(true));
    let others = |a: &[u64; 8]| (0..8).filter(|q| *q != 3).map(|q| a[q]).max().unwrap();
    println!("completion times (ns): clean {clean_at:?}, QP 3's first packet lost {lossy_at:?}");
    assert!(
        lossy_at[3] > others(&lossy_at),
        "QP 3 completed before the others"
    );
    assert!(
        others(&lossy_at) <= others(&clean_at),
        "the others waited for QP 3's loss: {} ns against {} ns",
        others(&lossy_at),
        others(&clean_at)
    );
}

/// QPs join and leave while others carry traffic over a lossy link: a QP pair destroyed
/// with messages in flight takes only its own packets with it (forgotten by its
/// connection, dropped at the peer), and a new QP pair created in its slot mid-transfer
/// (streams 2 and 3 again, under the new pair's keys) carries its own work: none of the
/// old pair's packets still in the network enters it.
#[test]
fn qps_join_and_leave_during_traffic() {
    for seed in [5, 6, 7, 8] {
        let mut p = setup(4, lossy(10_000, 0, 20_000), seed);
        for q in 0..4 {
            post_work(&mut p, q, 4);
        }
        // Part of the way: then QP 1 goes on both nodes, and a new QP takes its slot.
        assert!(!p.run(150_000), "the work should still be in flight");
        p.nodes[0].destroy_qp(1);
        p.nodes[1].destroy_qp(1);
        let drops_before = p.rx_drops;
        for n in p.nodes.iter_mut() {
            assert_eq!(n.add_qp(32), 1);
        }
        fill(&mut p, 1);
        post_work(&mut p, 1, 4);
        assert!(p.run(5_000_000_000));
        for q in 0..4 {
            check_work(&mut p, q, 4);
        }
        assert!(open(&p));
        println!(
            "seed {seed}: drops after QP 1 was replaced: {:?} (before {drops_before:?})",
            p.rx_drops
        );
    }
}

/// Node 0's QP `q` posts WRITE_IMM `r` (immediate 7) of `len` bytes from slot `r` of
/// its MR into slot `r` of node 1's (8 KiB slots); each consumes a receive there.
fn post_write_imm(p: &mut SharedPair, q: usize, r: u64, len: usize) {
    let off = (r as usize) * 8192;
    let mut e = rdma(
        wqe(
            WrOpcode::RdmaWriteWithImm,
            r,
            vec![sge(va(A_MR), off, len, A_MR)],
        ),
        va(B_MR) + off as u64,
        B_MR,
    );
    e.wqe.ex = 7;
    assert!(p.nodes[0].qp(q).host.post_send(e));
}

/// Eight QPs carry WRITE_IMMs (each consumes a receive); QP 2's receiver posts only one
/// receive, so its later messages are refused with RNR again and again. The other seven
/// QPs' work completes as fast as with every receiver ready, and QP 2's completes once
/// its receives are posted.
#[test]
fn a_receiver_not_ready_on_one_qp_does_not_slow_the_others() {
    let run = |starve: bool| {
        let mut p = setup(8, lossy(2_000, 0, 0), 3);
        for q in 0..8 {
            let rounds = 16;
            for r in 0..rounds {
                if !starve || q != 2 || r == 0 {
                    assert!(p.nodes[1].qp(q).host.post_recv(r, &[]));
                }
                post_write_imm(&mut p, q, r, 8000);
            }
        }
        let start = p.now;
        // Until the seven others are done (QP 2 may still wait for receives).
        let mut done_at = None;
        for _ in 0..20_000 {
            p.run(10_000);
            let others_done = (0..8)
                .filter(|q| *q != 2)
                .all(|q| p.nodes[0].qp(q).host.send_cq.len() == 16);
            if others_done {
                done_at = Some(p.now - start);
                break;
            }
        }
        let lens: Vec<usize> = (0..8)
            .map(|q| p.nodes[0].qp(q).host.send_cq.len())
            .collect();
        let st: Vec<_> = (0..8)
            .map(|q| p.nodes[0].qp(q).host.send_cq.first().map(|c| c.status))
            .collect();
        let t = done_at.unwrap_or_else(|| {
            panic!(
                "starve {starve}: the other QPs finish: {lens:?} {st:?} {:?} {:?}",
                p.nodes[0].conn.state(),
                p.nodes[0].conn.stats()
            )
        });
        if starve {
            let waiting = p.nodes[0].qp(2).host.send_cq.len();
            assert!(waiting < 16, "QP 2 finished without receives");
            for r in 1..16 {
                assert!(p.nodes[1].qp(2).host.post_recv(r, &[]));
            }
        }
        assert!(p.run(10_000_000_000));
        for q in 0..8 {
            let st = codes(&p.nodes[0].qp(q).host.send_cq);
            assert!(
                st.len() == 16 && st.iter().all(|s| *s == WcStatus::Success),
                "QP {q}: {st:?}"
            );
        }
        assert!(open(&p));
        (t, p.nodes[0].conn.stats().retx)
    };
    let (ready, starved) = (run(false), run(true));
    println!("others done after {} ns with every receiver ready, {} ns with QP 2 starved (resent {} / {})", ready.0, starved.0, ready.1, starved.1);
    assert!(
        starved.0 <= ready.0 + ready.0 / 10,
        "QP 2's RNR waits slowed the others: {} ns against {} ns",
        starved.0,
        ready.0
    );
}

/// Each QP segments its messages at its own path MTU (a member of a shared connection
/// keeps the MTU verbs gave it, IBTA 9.7.5.1.3), whatever the connection's: QP 0 at 256
/// bytes, QP 1 at the connection's 1024, QP 2 at 512; every QP's work still arrives
/// whole over a lossy link.
#[test]
fn each_qp_segments_at_its_own_path_mtu() {
    let mut p = setup(3, lossy(10_000, 10_000, 50_000), 11);
    for n in &mut p.nodes {
        n.qp(0).mtu = 256;
        n.qp(2).mtu = 512;
    }
    for q in 0..3 {
        post_work(&mut p, q, 3);
    }
    assert!(p.run(5_000_000_000), "still busy");
    for q in 0..3 {
        check_work(&mut p, q, 3);
    }
    let largest = |node: u8, s: u16| {
        p.largest
            .iter()
            .find(|e| (e.0, e.1) == (node, s))
            .map(|e| e.2)
    };
    // Requests on node 0 (streams 0, 2, 4), READ responses on node 1 (1, 3, 5).
    for (q, mtu) in [(0u16, 256), (1, 1024), (2, 512)] {
        assert_eq!(largest(0, 2 * q), Some(mtu), "QP {q}: requests");
        assert_eq!(largest(1, 2 * q + 1), Some(mtu), "QP {q}: READ responses");
    }
}

/// A receive completion lost to a full CQ on one QP of a shared connection (IBTA
/// 11.4.2.1 class G): that QP's responder enters the error state and its requester's
/// SEND whose completion was lost fails (retry exceeded, never a success), the later
/// one too; the SEND before completes; the other QPs' work completes and the connection
/// stays open. (A connection of one pair stops acknowledging instead: rc.rs,
/// `cq_overrun_moves_the_responder_to_error`.)
#[test]
fn a_lost_receive_completion_fails_its_send_and_that_qp_alone() {
    let mut p = setup(4, lossy(5_000, 0, 20_000), 21);
    p.nodes[1].qp(0).host.cq_cap = 1;
    let (a, b) = (va(A_MR), va(B_MR));
    for i in 0..3u64 {
        let off = 64 * 1024 + 100 * i as usize;
        assert!(p.nodes[1]
            .qp(0)
            .host
            .post_recv(i, &[sge(b, off, 100, B_MR)]));
        let w = wqe(WrOpcode::Send, 100 + i, vec![sge(a, 0, 10, A_MR)]);
        assert!(p.nodes[0].qp(0).host.post_send(w));
    }
    for q in 1..4 {
        post_work(&mut p, q, 2);
    }
    assert!(p.run(10_000_000_000), "still busy");
    assert_eq!(p.nodes[1].qp(0).host.mode, QpMode::Err);
    assert_eq!(p.nodes[1].qp(0).host.recv_cq.len(), 1);
    let got: Vec<(u64, WcStatus)> = p.nodes[0]
        .qp(0)
        .host
        .send_cq
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect();
    assert_eq!(
        got,
        vec![
            (100, WcStatus::Success),
            (101, WcStatus::RetryExcErr),
            (102, WcStatus::WrFlushErr)
        ],
        "QP 0's SENDs"
    );
    for q in 1..4 {
        check_work(&mut p, q, 2);
    }
    assert!(open(&p));
}

/// Each stream gives up on RNR by its own QP's `rnr_retry` (IBTA 9.7.5.2.8): QP 2
/// asked for 1 while the connection allows any number (7). Its receiver never posts:
/// its first WRITE_IMM ends with *RNR retry exceeded* and the rest are flushed, while
/// QP 0 and QP 1, on the same connection and as starved of nothing, complete all
/// theirs, and both connections stay open.
#[test]
fn a_stream_gives_up_on_rnr_by_its_own_qps_rnr_retry() {
    let mut p = setup(3, lossy(2_000, 0, 0), 5);
    p.nodes[0].qp(2).retry = Some((7, 1));
    for q in 0..3 {
        for r in 0..4u64 {
            if q != 2 {
                assert!(p.nodes[1].qp(q).host.post_recv(r, &[]));
            }
            post_write_imm(&mut p, q, r, 4000);
        }
    }
    assert!(p.run(10_000_000_000), "still busy");
    for q in 0..2 {
        let st = codes(&p.nodes[0].qp(q).host.send_cq);
        assert!(
            st.len() == 4 && st.iter().all(|s| *s == WcStatus::Success),
            "QP {q}: {st:?}"
        );
    }
    let st = codes(&p.nodes[0].qp(2).host.send_cq);
    assert_eq!(st.first(), Some(&WcStatus::RnrRetryExcErr), "QP 2: {st:?}");
    assert!(
        st[1..].iter().all(|s| *s == WcStatus::WrFlushErr),
        "QP 2: {st:?}"
    );
    assert!(open(&p));
}
