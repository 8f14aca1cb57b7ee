//! A request refused for good among good ones, on lossy, duplicating, reordering links
//! (IBTA 9.7.5.2.4, 9.9.3.1.2 class C): the responder places out of order but NAKs in
//! order — only once every earlier request is complete, the NAK acknowledging them — so
//! every good request before the refused one completes with success (executed exactly
//! once), the refused one reports the error, and the rest flush.
mod rc_common;
use metaroce_proto::rc::{QpMode, WcOpcode, WcStatus, WrOpcode};
use rc_common::*;

/// Where the atomics land in B's memory.
const ATOMIC_OFF: usize = 0;
/// Where the good RDMA WRITE lands in B's memory.
const WRITE_OFF: usize = 8192;
const WRITE_LEN: usize = 3000;
/// B's receive buffers (1000 bytes each).
const RECV_OFF: usize = 32_768;

/// What the refused request is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Bad {
    /// CMP_SWAP with an R_Key the responder does not have: remote access error.
    Rkey,
    /// CMP_SWAP at an address not 8-byte aligned: invalid request.
    Misaligned,
    /// SEND longer than the receive it consumes: invalid request, and that receive
    /// completes with a local length error.
    TooLong,
}

fn u64_at(m: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(m[off..off + 8].try_into().unwrap())
}

fn run(bad: Bad, seed: u64) {
    let (mut p, a, b) = setup(16, false, lossy(100_000, 100_000, 500_000), seed);
    for i in 0..3u64 {
        let off = RECV_OFF + 1000 * i as usize;
        assert!(p.b.host.post_recv(100 + i, &[sge(b, off, 1000, B_MR)]));
    }
    let before = u64_at(&p.b.host.mr(B_MR).unwrap().bytes, ATOMIC_OFF);
    // 1: FETCH_ADD +5, original into A[0..8].
    let mut e = rdma(
        wqe(WrOpcode::AtomicFetchAndAdd, 1, vec![sge(a, 0, 8, A_MR)]),
        b + ATOMIC_OFF as u64,
        B_MR,
    );
    e.wqe.compare_add = 5;
    let mut w = vec![e];
    // 2: a 3000-byte RDMA WRITE (three packets).
    w.push(rdma(
        wqe(WrOpcode::RdmaWrite, 2, vec![sge(a, 4096, WRITE_LEN, A_MR)]),
        b + WRITE_OFF as u64,
        B_MR,
    ));
    // 3: a 500-byte SEND into receive 100.
    w.push(wqe(WrOpcode::Send, 3, vec![sge(a, 8192, 500, A_MR)]));
    // 4: the refused one.
    w.push(match bad {
        Bad::Rkey | Bad::Misaligned => {
            let (va, key) = if bad == Bad::Rkey {
                (b + ATOMIC_OFF as u64, B_MR + 99)
            } else {
                (b + ATOMIC_OFF as u64 + 4, B_MR)
            };
            let mut e = rdma(
                wqe(WrOpcode::AtomicCmpAndSwp, 4, vec![sge(a, 16, 8, A_MR)]),
                va,
                key,
            );
            // Would swap if executed: compare with the value after WQE 1.
            (e.wqe.compare_add, e.wqe.swap) = (before.wrapping_add(5), 0x1234);
            e
        }
        Bad::TooLong => wqe(WrOpcode::Send, 4, vec![sge(a, 12_288, 2000, A_MR)]),
    });
    // 5: a good RDMA WRITE after it: flushed, never reported done.
    w.push(rdma(
        wqe(WrOpcode::RdmaWrite, 5, vec![sge(a, 20_000, 100, A_MR)]),
        b + 60_000,
        B_MR,
    ));
    for e in w {
        assert!(p.a.host.post_send(e));
    }
    p.doorbell(0);
    p.run(30_000_000_000);
    let err = match bad {
        Bad::Rkey => WcStatus::RemAccessErr,
        Bad::Misaligned | Bad::TooLong => WcStatus::RemInvReqErr,
    };
    let ctx = format!("{bad:?} seed {seed}");
    assert_eq!(
        statuses(&p.a.host.send_cq),
        vec![
            (1, WcStatus::Success),
            (2, WcStatus::Success),
            (3, WcStatus::Success),
            (4, err),
            (5, WcStatus::WrFlushErr)
        ],
        "{ctx}"
    );
    send_ok(&p.a.host.send_cq[0], 1, WcOpcode::FetchAdd, 8);
    let am = &p.a.host.mr(A_MR).unwrap().bytes;
    let bm = &p.b.host.mr(B_MR).unwrap().bytes;
    assert_eq!(u64_at(am, 0), before, "{ctx}: FETCH_ADD's original value");
    assert_eq!(
        u64_at(bm, ATOMIC_OFF),
        before.wrapping_add(5),
        "{ctx}: executed exactly once, the CMP_SWAP never"
    );
    assert_eq!(
        bm[WRITE_OFF..WRITE_OFF + WRITE_LEN],
        am[4096..4096 + WRITE_LEN],
        "{ctx}"
    );
    assert_eq!(bm[RECV_OFF..RECV_OFF + 500], am[8192..8692], "{ctx}");
    let rx = recv_statuses(&p.b.host.recv_cq);
    let second = if bad == Bad::TooLong {
        WcStatus::LocLenErr
    } else {
        WcStatus::WrFlushErr
    };
    assert_eq!(
        rx,
        vec![
            (100, WcStatus::Success),
            (101, second),
            (102, WcStatus::WrFlushErr)
        ],
        "{ctx}"
    );
    assert_eq!(p.b.host.recv_cq[0].0.byte_len, 500, "{ctx}");
    assert_eq!(
        (p.a.host.mode, p.b.host.mode),
        (QpMode::Err, QpMode::Err),
        "{ctx}"
    );
}

#[test]
fn a_refused_atomic_does_not_fail_the_good_requests_before_it() {
    for seed in 0..60 {
        run(Bad::Rkey, seed);
        run(Bad::Misaligned, seed);
    }
}

#[test]
fn a_send_too_long_for_its_receive_does_not_fail_the_good_requests_before_it() {
    for seed in 0..60 {
        run(Bad::TooLong, seed);
    }
}
