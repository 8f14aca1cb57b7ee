//! The RC engine's error paths, host-tested on two model QPs: RNR (retry until posted,
//! exhaustion), retry exhaustion, flush of the error state, remote access and invalid
//! request errors (and the responder's side of them), local protection errors.
mod rc_common;
use metaroce_proto::rc::{QpMode, WcOpcode, WcStatus, WrOpcode};
use rc_common::*;
#[test]
fn rnr_retries_until_the_receive_is_posted() {
    let (mut p, a, b) = setup(8, false, clean(), 3);
    assert!(p
        .a
        .host
        .post_send(wqe(WrOpcode::Send, 1, vec![sge(a, 0, 2000, A_MR)])));
    p.run(3_000_000);
    assert!(
        p.a.host.send_cq.is_empty(),
        "completed before a receive was posted"
    );
    assert!(p.b.host.recv_cq.is_empty());
    assert!(p.b.host.post_recv(9, &[sge(b, 0, 4096, B_MR)]));
    assert!(p.run(5_000_000_000));
    send_ok(&p.a.host.send_cq[0], 1, WcOpcode::Send, 2000);
    assert_eq!(p.b.host.recv_cq[0].0.wr_id, 9);
    assert_eq!(p.b.host.recv_cq[0].0.byte_len, 2000);
    let want: Vec<u8> = (0..2000).map(pattern).collect();
    assert_eq!(p.b.host.mr(B_MR).unwrap().bytes[..2000], want[..]);
}

#[test]
fn rnr_retry_exhaustion_fails_then_flushes() {
    let (mut p, a, _) = setup(8, false, clean(), 4);
    p.a.set_retry(14, 7, 2);
    assert!(p
        .a
        .host
        .post_send(wqe(WrOpcode::Send, 1, vec![sge(a, 0, 10, A_MR)])));
    assert!(p
        .a
        .host
        .post_send(wqe(WrOpcode::Send, 2, vec![sge(a, 0, 10, A_MR)])));
    p.run(5_000_000_000);
    assert_eq!(
        statuses(&p.a.host.send_cq),
        vec![(1, WcStatus::RnrRetryExcErr), (2, WcStatus::WrFlushErr)]
    );
    assert_eq!(p.a.host.mode, QpMode::Err);
}

#[test]
fn retry_exhaustion_when_the_peer_is_gone() {
    let mut link = clean();
    link.b_gone = true;
    let (mut p, a, b) = setup(8, false, link, 5);
    // timeout 8 (1 ms, run as 4 ms), retry_cnt 2: gives up after 12 ms without progress.
    p.a.set_retry(8, 2, 7);
    for i in 0..3 {
        let e = rdma(
            wqe(WrOpcode::RdmaWrite, i, vec![sge(a, 0, 100, A_MR)]),
            b,
            B_MR,
        );
        assert!(p.a.host.post_send(e));
    }
    p.run(10_000_000_000);
    assert_eq!(
        statuses(&p.a.host.send_cq),
        vec![
            (0, WcStatus::RetryExcErr),
            (1, WcStatus::WrFlushErr),
            (2, WcStatus::WrFlushErr)
        ]
    );
    assert_eq!(p.a.host.mode, QpMode::Err);
}

#[test]
fn error_state_flushes_everything_posted() {
    let (mut p, a, b) = setup(8, false, clean(), 6);
    assert!(p.b.host.post_recv(1, &[sge(b, 0, 64, B_MR)]));
    assert!(p.b.host.post_recv(2, &[sge(b, 64, 64, B_MR)]));
    p.b.modify_to_error();
    assert_eq!(
        statuses(&p.b.host.recv_cq.iter().map(|x| x.0).collect::<Vec<_>>()),
        vec![(1, WcStatus::WrFlushErr), (2, WcStatus::WrFlushErr)]
    );
    p.a.modify_to_error();
    // Posting in the error state succeeds; the WQEs complete with flush errors.
    assert!(p
        .a
        .host
        .post_send(wqe(WrOpcode::Send, 7, vec![sge(a, 0, 8, A_MR)])));
    p.doorbell(0);
    assert_eq!(statuses(&p.a.host.send_cq), vec![(7, WcStatus::WrFlushErr)]);
    assert_eq!(p.data_sent[0], 0);
}

#[test]
fn bad_rkey_is_a_remote_access_error() {
    let (mut p, a, b) = setup(8, false, clean(), 7);
    let bad = rdma(
        wqe(WrOpcode::RdmaWrite, 1, vec![sge(a, 0, 100, A_MR)]),
        b,
        0x99,
    );
    assert!(p.a.host.post_send(bad));
    let good = rdma(
        wqe(WrOpcode::RdmaWrite, 2, vec![sge(a, 0, 100, A_MR)]),
        b,
        B_MR,
    );
    assert!(p.a.host.post_send(good));
    p.run(5_000_000_000);
    assert_eq!(
        statuses(&p.a.host.send_cq),
        vec![(1, WcStatus::RemAccessErr), (2, WcStatus::WrFlushErr)]
    );
    // Class C: the responder enters the error state too.
    assert_eq!(p.b.host.mode, QpMode::Err);
    assert!(p.b.host.mr(B_MR).unwrap().bytes[..100]
        .iter()
        .all(|&x| x == 0));
}

#[test]
fn read_beyond_the_region_is_a_remote_access_error() {
    let (mut p, a, b) = setup(8, false, clean(), 8);
    let e = rdma(
        wqe(WrOpcode::RdmaRead, 1, vec![sge(a, 0, 4096, A_MR)]),
        b + MR_LEN as u64 - 100,
        B_MR,
    );
    assert!(p.a.host.post_send(e));
    p.run(5_000_000_000);
    assert_eq!(
        statuses(&p.a.host.send_cq),
        vec![(1, WcStatus::RemAccessErr)]
    );
}

#[test]
fn send_longer_than_the_receive_is_an_invalid_request() {
    let (mut p, a, b) = setup(8, false, clean(), 9);
    assert!(p.b.host.post_recv(5, &[sge(b, 0, 50, B_MR)]));
    assert!(p
        .a
        .host
        .post_send(wqe(WrOpcode::Send, 1, vec![sge(a, 0, 100, A_MR)])));
    p.run(5_000_000_000);
    assert_eq!(
        statuses(&p.a.host.send_cq),
        vec![(1, WcStatus::RemInvReqErr)]
    );
    // The responder's receive reports the length error; the QP is in error.
    let r: Vec<_> = p.b.host.recv_cq.iter().map(|x| x.0).collect();
    assert_eq!(statuses(&r), vec![(5, WcStatus::LocLenErr)]);
    assert_eq!(p.b.host.mode, QpMode::Err);
}

#[test]
fn bad_lkey_is_a_local_protection_error_and_sends_nothing() {
    let (mut p, a, b) = setup(8, false, clean(), 10);
    let e = rdma(
        wqe(WrOpcode::RdmaWrite, 1, vec![sge(a, 0, 100, 0x77)]),
        b,
        B_MR,
    );
    assert!(p.a.host.post_send(e));
    let e = rdma(
        wqe(WrOpcode::RdmaWrite, 2, vec![sge(a, 0, 100, A_MR)]),
        b,
        B_MR,
    );
    assert!(p.a.host.post_send(e));
    p.run(5_000_000_000);
    assert_eq!(
        statuses(&p.a.host.send_cq),
        vec![(1, WcStatus::LocProtErr), (2, WcStatus::WrFlushErr)]
    );
    assert_eq!(p.data_sent[0], 0, "nothing sent");
    assert_eq!(p.b.host.mode, QpMode::Rts);
}

#[test]
fn sge_past_the_region_is_a_local_protection_error() {
    let (mut p, a, _) = setup(8, false, clean(), 11);
    let e = wqe(WrOpcode::Send, 1, vec![sge(a, MR_LEN - 10, 100, A_MR)]);
    assert!(p.a.host.post_send(e));
    p.run(5_000_000_000);
    assert_eq!(statuses(&p.a.host.send_cq), vec![(1, WcStatus::LocProtErr)]);
    assert_eq!(p.data_sent[0], 0);
}

/// An atomic whose payload is not exactly its operands (CMP_SWAP 16 bytes, FETCH_ADD and
/// ATOMIC_WRITE 8) is NAKed as an invalid request and never executed: the responder does
/// not run it on zero padding or ignore surplus bytes. The packet is the requester's own
/// atomic, re-encoded with a shorter or longer payload before it reaches the responder.
#[test]
fn atomic_of_the_wrong_length_is_an_invalid_request_and_not_executed() {
    use metaroce_proto::wire::{decode_data_packet, Op};
    for (op, wire_op, bad) in [
        (WrOpcode::AtomicCmpAndSwp, Op::AtomicCmpSwap, 8usize),
        (WrOpcode::AtomicCmpAndSwp, Op::AtomicCmpSwap, 24),
        (WrOpcode::AtomicFetchAndAdd, Op::AtomicFetchAdd, 4),
        (WrOpcode::AtomicFetchAndAdd, Op::AtomicFetchAdd, 16),
        (WrOpcode::AtomicWrite, Op::AtomicWrite, 16),
    ] {
        let (mut p, a, b) = setup(8, false, clean(), 12);
        let before = p.b.host.mr(B_MR).unwrap().bytes[..8].to_vec();
        let sges = if op == WrOpcode::AtomicWrite {
            vec![]
        } else {
            vec![sge(a, 0, 8, A_MR)]
        };
        let mut e = rdma(wqe(op, 1, sges), b, B_MR);
        // CMP_SWAP: compare with what is there, so that an execution would swap.
        let cur = u64::from_ne_bytes(before[..].try_into().unwrap());
        (e.wqe.compare_add, e.wqe.swap) = if op == WrOpcode::AtomicCmpAndSwp {
            (cur, !cur)
        } else {
            (1, 0)
        };
        if op == WrOpcode::AtomicWrite {
            e.wqe.length = 8;
            e.inline = (!cur).to_ne_bytes().to_vec();
        }
        assert!(p.a.host.post_send(e));
        p.doorbell(0);
        let mut wire = p.take_wire();
        let k = wire
            .iter()
            .position(|(to, d)| {
                *to == 1 && decode_data_packet(d).is_ok_and(|(h, _)| h.op == wire_op as u8)
            })
            .expect("the atomic request on the wire");
        let (to, d) = wire.remove(k);
        let (mut h, payload) = decode_data_packet(&d).unwrap();
        let mut ops = payload.to_vec();
        ops.resize(bad, 0xa5);
        h.payload_len = bad as u16;
        h.msg_len = bad as u32;
        let mut forged = vec![0u8; h.header_len() + bad];
        let n = h.encode(&mut forged).unwrap();
        forged[n..].copy_from_slice(&ops);
        assert!(
            decode_data_packet(&forged).is_ok(),
            "{op:?} {bad}: well-formed"
        );
        p.inject(to, &forged);
        // The requester's original (right length) retransmissions must not get it
        // executed either: the responder's QP is in error after the NAK.
        p.run(5_000_000_000);
        assert_eq!(
            statuses(&p.a.host.send_cq),
            vec![(1, WcStatus::RemInvReqErr)],
            "{op:?} with {bad} operand bytes"
        );
        assert_eq!(p.b.host.mode, QpMode::Err, "{op:?} {bad}");
        assert_eq!(
            p.b.host.mr(B_MR).unwrap().bytes[..8],
            before[..],
            "{op:?} with {bad} operand bytes was executed"
        );
    }
}

/// A SEND too long for its receive: the receive completes LOC_LEN_ERR and the QP
/// enters the error state. A receive posted afterwards must flush (WR_FLUSH_ERR).
#[test]
fn receive_posted_after_len_error_flushes() {
    let (mut p, a, b) = setup(16, false, clean(), 1);
    assert!(p.b.host.post_recv(100, &[sge(b, 0, 100, B_MR)]));
    assert!(p
        .a
        .host
        .post_send(wqe(WrOpcode::Send, 1, vec![sge(a, 0, 500, A_MR)])));
    p.doorbell(0);
    p.run(1_000_000_000);
    assert_eq!(p.b.host.mode, QpMode::Err);
    assert!(p.b.host.post_recv(101, &[sge(b, 4096, 100, B_MR)]));
    p.b.doorbell(); // as the kernel's post_recv in the error state: flush
    let rx = recv_statuses(&p.b.host.recv_cq);
    assert_eq!(
        rx,
        vec![(100, WcStatus::LocLenErr), (101, WcStatus::WrFlushErr)]
    );
}

/// IBTA 10.3.1 (the error state: no packet is sent): a responder moved to the error
/// state sends no READ response any more, not even a retransmission of one it had sent
/// before (its bytes would be read from memory the application may already reuse). The
/// requester's READ then fails on its own retry count, as with rxe, whose responder in
/// the error state answers nothing.
#[test]
fn a_responder_in_the_error_state_sends_no_read_response() {
    let (mut p, a, b) = setup(8, false, clean(), 31);
    p.a.set_retry(8, 2, 7);
    let e = rdma(
        wqe(WrOpcode::RdmaRead, 1, vec![sge(a, 0, 1000, A_MR)]),
        b + B_READ as u64,
        B_MR,
    );
    // The request reaches the responder, which answers at once; the answer is lost.
    let lost = answers(&mut p, vec![e]);
    let sent = p.data_sent[1];
    assert!(sent > 0 && !lost.is_empty(), "the responder answered");
    p.b.modify_to_error();
    p.run(10_000_000_000);
    assert_eq!(p.data_sent[1], sent, "DATA sent after the error state");
    assert_eq!(
        statuses(&p.a.host.send_cq),
        vec![(1, WcStatus::RetryExcErr)]
    );
    assert!(p.a.host.mr(A_MR).unwrap().bytes[..1000]
        .iter()
        .enumerate()
        .all(|(i, &x)| x == pattern(i)));
}
