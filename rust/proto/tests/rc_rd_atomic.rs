//! The responder's READ/atomic resources (`max_dest_rd_atomic`, IBTA 10.2.4, 9.7.5.1.4),
//! host-tested on two model QPs: none (every READ, atomic and ATOMIC_WRITE an invalid
//! request, as rxe), READs and atomics at that depth and past it, a response table
//! resized while it holds responses, requests and responses lost and resent (a READ or
//! atomic executes once, its answer is resent intact), and a request naming the wrong
//! response number.
mod rc_common;
use metaroce_proto::rc::{self, QpMode, WcOpcode, WcStatus, WrOpcode};
use metaroce_proto::testkit::rc::Pair;
use rc_common::*;

/// Whether A's bytes `LAND + [off, off + len)` hold what B's READ area has at `off`.
fn read_landed(p: &Pair, off: usize, len: usize) -> bool {
    let got = &p.a.host.mr(A_MR).unwrap().bytes[LAND + off..LAND + off + len];
    got.iter()
        .enumerate()
        .all(|(i, &x)| x == pattern(off + i + 7))
}

/// The value of B's atomic counter.
fn counter(p: &Pair) -> u64 {
    let bm = &p.b.host.mr(B_MR).unwrap().bytes;
    u64::from_ne_bytes(bm[ATOMIC_OFF..ATOMIC_OFF + 8].try_into().unwrap())
}

/// A responder with `max_dest_rd_atomic` 0 takes no READ, CMP_SWAP, FETCH_ADD or
/// ATOMIC_WRITE: each is an invalid request (the requester's WQE completes with
/// `IB_WC_REM_INV_REQ_ERR`, the responder's QP enters the error state), as rxe answers
/// (`RESPST_ERR_TOO_MANY_RDMA_ATM_REQ`); nothing executes. A WRITE before it is served.
#[test]
fn no_responder_resources_makes_reads_and_atomics_invalid_requests() {
    for op in [
        WrOpcode::RdmaRead,
        WrOpcode::AtomicCmpAndSwp,
        WrOpcode::AtomicFetchAndAdd,
        WrOpcode::AtomicWrite,
    ] {
        let (mut p, a, b) = setup(8, false, clean(), 21);
        assert!(p.b.set_max_dest_rd_atomic(0));
        let before = counter(&p);
        let w = rdma(
            wqe(WrOpcode::RdmaWrite, 1, vec![sge(a, 0, 100, A_MR)]),
            b,
            B_MR,
        );
        assert!(p.a.host.post_send(w));
        let mut e = match op {
            WrOpcode::RdmaRead => read(2, a, b, 4096, 100),
            WrOpcode::AtomicWrite => {
                let mut e = rdma(wqe(op, 2, vec![]), b + ATOMIC_OFF as u64, B_MR);
                e.wqe.length = 8;
                e.inline = 0x77u64.to_ne_bytes().to_vec();
                e
            }
            _ => rdma(
                wqe(op, 2, vec![sge(a, 4096, 8, A_MR)]),
                b + ATOMIC_OFF as u64,
                B_MR,
            ),
        };
        (e.wqe.compare_add, e.wqe.swap) = (before, 99);
        assert!(p.a.host.post_send(e));
        p.run(5_000_000_000);
        let cq = &p.a.host.send_cq;
        assert_eq!(
            statuses(cq),
            vec![(1, WcStatus::Success), (2, WcStatus::RemInvReqErr)],
            "{op:?}"
        );
        assert_eq!(p.b.host.mode, QpMode::Err, "{op:?}");
        assert_eq!(counter(&p), before, "{op:?}: executed");
        assert_eq!(p.b.host.mr(B_MR).unwrap().bytes[..100], {
            let v: Vec<u8> = (0..100).map(pattern).collect();
            v
        });
    }
}

/// READs and FETCH_ADDs at the responder's depth (`max_rd_atomic` = `max_dest_rd_atomic`
/// = 1, a response table of 2) with WRITEs between them, over a lossy, duplicating,
/// reordering link: every one completes, READs with their bytes, each FETCH_ADD executed
/// once (its original is the sum of those before it).
#[test]
fn reads_and_atomics_at_depth_one_over_a_lossy_link() {
    for seed in 1..6 {
        let (mut p, a, b) = setup(64, false, lossy(50_000, 50_000, 200_000), seed);
        assert!(p.b.set_max_dest_rd_atomic(1));
        p.a.host.attrs.max_rd_atomic = 1;
        let n = 40u64;
        for i in 0..n {
            let e = match i % 3 {
                0 => read(i, a, b, 1024 + 64 * i as usize, 64),
                1 => fetch_add(i, a, b, i),
                _ => rdma(
                    wqe(WrOpcode::RdmaWrite, i, vec![sge(a, 0, 64, A_MR)]),
                    b + 64 * i,
                    B_MR,
                ),
            };
            assert!(p.a.host.post_send(e));
        }
        assert!(p.run(60_000_000_000), "seed {seed}");
        let cq = p.a.host.send_cq.clone();
        assert_eq!(cq.len(), n as usize, "seed {seed}");
        let mut sum = 0u64;
        for i in 0..n {
            let c = &cq[i as usize];
            match i % 3 {
                0 => {
                    send_ok(c, i, WcOpcode::RdmaRead, 64);
                    assert!(
                        read_landed(&p, 1024 + 64 * i as usize, 64),
                        "seed {seed} #{i}"
                    );
                }
                1 => {
                    send_ok(c, i, WcOpcode::FetchAdd, 8);
                    let am = &p.a.host.mr(A_MR).unwrap().bytes;
                    let got = u64::from_ne_bytes(am[8 * i as usize..][..8].try_into().unwrap());
                    assert_eq!(got, sum, "seed {seed}: original of #{i}");
                    sum += i;
                }
                _ => send_ok(c, i, WcOpcode::RdmaWrite, 64),
            }
        }
        assert_eq!(counter(&p), sum, "seed {seed}");
        assert_eq!(p.b.host.mode, QpMode::Rts);
    }
}

/// A requester that keeps more READs and atomics in flight than the responder's
/// resources (`max_rd_atomic` 16 against `max_dest_rd_atomic` 1, the application's error
/// in IBTA 10.2.4) is held back (RNR: the responder's table of 2 is full) but every
/// request still completes, READs with their bytes and each atomic executed once.
#[test]
fn requests_past_the_responders_resources_wait_and_complete() {
    let (mut p, a, b) = setup(64, false, lossy(20_000, 20_000, 100_000), 9);
    assert!(p.b.set_max_dest_rd_atomic(1));
    p.a.host.attrs.max_rd_atomic = 16;
    let n = 32u64;
    for i in 0..n {
        let e = if i % 2 == 0 {
            read(i, a, b, 2048 + 128 * i as usize, 128)
        } else {
            fetch_add(i, a, b, 1)
        };
        assert!(p.a.host.post_send(e));
    }
    assert!(p.run(60_000_000_000));
    let cq = p.a.host.send_cq.clone();
    assert_eq!(cq.len(), n as usize);
    for i in 0..n {
        if i % 2 == 0 {
            send_ok(&cq[i as usize], i, WcOpcode::RdmaRead, 128);
            assert!(read_landed(&p, 2048 + 128 * i as usize, 128), "#{i}");
        } else {
            send_ok(&cq[i as usize], i, WcOpcode::FetchAdd, 8);
        }
    }
    assert_eq!(counter(&p), n / 2);
}

/// Every response lost for a while (the responder's datagrams, ACKs included, all
/// dropped): the requester sends its READ and FETCH_ADD requests again and again, the
/// responder executes each once and keeps its answer until the requester has it; when
/// the link is back every WQE completes with the right bytes and originals.
#[test]
fn duplicate_reads_and_atomics_after_lost_responses_execute_once() {
    let (mut p, a, b) = setup(16, false, clean(), 31);
    assert!(p.b.set_max_dest_rd_atomic(2));
    p.a.host.attrs.max_rd_atomic = 2;
    p.wire.link.b_gone = true;
    for i in 0..4u64 {
        let e = if i % 2 == 0 {
            read(i, a, b, 512 * i as usize, 300)
        } else {
            fetch_add(i, a, b, 10)
        };
        assert!(p.a.host.post_send(e));
    }
    // Long enough for several retransmissions of the requests, not for retry_cnt.
    p.run(60_000_000);
    assert!(p.a.host.send_cq.is_empty());
    assert_eq!(counter(&p), 10, "the FETCH_ADD executed once");
    p.wire.link.b_gone = false;
    assert!(p.run(10_000_000_000));
    let cq = p.a.host.send_cq.clone();
    send_ok(&cq[0], 0, WcOpcode::RdmaRead, 300);
    send_ok(&cq[1], 1, WcOpcode::FetchAdd, 8);
    send_ok(&cq[2], 2, WcOpcode::RdmaRead, 300);
    send_ok(&cq[3], 3, WcOpcode::FetchAdd, 8);
    assert_eq!(cq.len(), 4);
    assert!(read_landed(&p, 0, 300));
    assert!(read_landed(&p, 1024, 300));
    let am = &p.a.host.mr(A_MR).unwrap().bytes;
    let orig = |i: usize| u64::from_ne_bytes(am[8 * i..8 * i + 8].try_into().unwrap());
    assert_eq!((orig(1), orig(3)), (0, 10));
    assert_eq!(counter(&p), 20);
}

/// `max_dest_rd_atomic` changed while the responder holds answers the requester has not
/// acknowledged (`modify_qp` in SQD, IBTA 10.2.4): a table too small for them is not
/// taken (the old one stays), a large enough one takes them at their numbers, and every
/// READ and atomic completes with its own bytes. Then 0: the next READ is an invalid
/// request.
#[test]
fn response_table_resized_while_it_holds_answers() {
    let (mut p, a, b) = setup(16, false, clean(), 41);
    assert!(p.b.set_max_dest_rd_atomic(2));
    p.a.host.attrs.max_rd_atomic = 4;
    p.wire.link.b_gone = true;
    for i in 0..4u64 {
        let e = if i == 2 {
            fetch_add(i, a, b, 5)
        } else {
            read(i, a, b, 256 * i as usize, 200)
        };
        assert!(p.a.host.post_send(e));
    }
    p.run(20_000_000);
    assert_eq!(counter(&p), 5);
    // Four answers held (numbers 0-3): 2 entries cannot take them, 8 can.
    assert!(!p.b.set_max_dest_rd_atomic(1));
    assert!(p.b.set_max_dest_rd_atomic(4));
    assert_eq!(rc::resp_slots(4), 8);
    p.wire.link.b_gone = false;
    assert!(p.run(10_000_000_000));
    let cq = p.a.host.send_cq.clone();
    assert_eq!(cq.len(), 4);
    for i in [0u64, 1, 3] {
        send_ok(&cq[i as usize], i, WcOpcode::RdmaRead, 200);
        assert!(read_landed(&p, 256 * i as usize, 200), "#{i}");
    }
    send_ok(&cq[2], 2, WcOpcode::FetchAdd, 8);
    // Nothing held now: any table fits, 0 included.
    assert!(p.b.set_max_dest_rd_atomic(1));
    assert!(p.b.set_max_dest_rd_atomic(0));
    assert!(p.a.host.post_send(read(9, a, b, 0, 8)));
    p.run(5_000_000_000);
    assert_eq!(p.a.host.send_cq[4].status, WcStatus::RemInvReqErr);
    assert_eq!(p.b.host.mode, QpMode::Err);
}

/// A READ request names its response number in its tag (Documentation/transport.rst):
/// one that cannot be its own (ahead of the responses the responder will owe by the
/// time it completes) is an invalid request, never served as another request's answer.
#[test]
fn read_naming_the_wrong_response_number_is_an_invalid_request() {
    use metaroce_proto::wire::{decode_data_packet, Op};
    let (mut p, a, b) = setup(8, false, clean(), 51);
    assert!(p.a.host.post_send(read(1, a, b, 0, 64)));
    p.doorbell(0);
    let mut wire = p.take_wire();
    let k = wire
        .iter()
        .position(|(to, d)| {
            *to == 1 && decode_data_packet(d).is_ok_and(|(h, _)| h.op == Op::ReadReq as u8)
        })
        .expect("the READ request on the wire");
    let (to, d) = wire.remove(k);
    let (mut h, _) = decode_data_packet(&d).unwrap();
    assert_eq!(h.tag, 0, "the first READ is response number 0");
    h.tag = 5;
    let mut forged = vec![0u8; h.header_len()];
    h.encode(&mut forged).unwrap();
    p.inject(to, &forged);
    p.run(5_000_000_000);
    assert_eq!(
        statuses(&p.a.host.send_cq),
        vec![(1, WcStatus::RemInvReqErr)]
    );
    assert_eq!(p.b.host.mode, QpMode::Err);
}

/// `resp_slots`: none for no resources, twice the resources as a power of two, at most
/// 256 entries.
#[test]
fn response_table_sizes() {
    let got: Vec<usize> = [0u8, 1, 2, 3, 16, 100, 128]
        .iter()
        .map(|&d| rc::resp_slots(d))
        .collect();
    assert_eq!(got, vec![0, 2, 4, 8, 32, 256, 256]);
}

/// The responder tracks a receive-consuming message by its RSN in a table no larger than
/// its RQ (here 4 slots, 3 receives posted at most): 40 SENDs and SEND_WITH_IMMs of
/// several packets over a lossy, reordering link, the receives posted as earlier ones
/// complete, each completes its own receive with its length and immediate data.
#[test]
fn sends_through_a_small_rq_over_a_lossy_link() {
    let (mut p, a, b) = setup(4, false, lossy(30_000, 30_000, 300_000), 61);
    let n = 40u64;
    let len = |i: u64| 500 + 700 * (i as usize % 4);
    let mut posted = 0u64;
    let mut post = |p: &mut Pair| {
        while posted < n
            && p.b
                .host
                .post_recv(1000 + posted, &[sge(b, 4096 * posted as usize, 4096, B_MR)])
        {
            posted += 1;
        }
    };
    for i in 0..n {
        let mut e = wqe(
            if i % 2 == 0 {
                WrOpcode::Send
            } else {
                WrOpcode::SendWithImm
            },
            i,
            vec![sge(a, 100 * i as usize, len(i), A_MR)],
        );
        e.wqe.ex = (0x1000 + i as u32).to_be();
        post(&mut p);
        while !p.a.host.post_send(e.clone()) {
            p.run(2_000_000);
            post(&mut p);
        }
        p.doorbell(0);
    }
    for _ in 0..10_000 {
        if p.b.host.recv_cq.len() == n as usize {
            break;
        }
        p.run(2_000_000);
        post(&mut p);
    }
    assert!(p.run(10_000_000_000));
    let rcq = &p.b.host.recv_cq;
    assert_eq!(rcq.len(), n as usize);
    for (i, (c, _)) in rcq.iter().enumerate() {
        let i = i as u64;
        assert_eq!(
            (c.wr_id, c.status, c.byte_len),
            (1000 + i, WcStatus::Success, len(i) as u32),
            "#{i}"
        );
        if i % 2 == 1 {
            assert_eq!(c.ex, (0x1000 + i as u32).to_be(), "#{i}");
        }
    }
    assert_eq!(p.a.host.send_cq.len(), n as usize);
}

/// The per-QP table entries are the sizes Documentation/testing.rst ("Many QPs") counts:
/// 64 bytes per SQ slot, 1 per tracked message, 12 per tracked receive, 40 per response.
#[test]
fn table_entry_sizes() {
    use core::mem::size_of;
    assert_eq!(size_of::<rc::SendMsg>(), 64);
    assert_eq!(size_of::<rc::RxMsg>(), 1);
    assert_eq!(size_of::<rc::RxRecv>(), 12);
    assert_eq!(size_of::<rc::Resp>(), 40);
}

/// Re-encodes DATA packet `d` after `f` changed its header and payload (the header's
/// `payload_len` follows the payload).
fn reshape(
    d: &[u8],
    f: impl FnOnce(&mut metaroce_proto::wire::DataHeader, &mut Vec<u8>),
) -> Vec<u8> {
    use metaroce_proto::wire::decode_data_packet;
    let (mut h, payload) = decode_data_packet(d).unwrap();
    let mut payload = payload.to_vec();
    f(&mut h, &mut payload);
    h.payload_len = payload.len() as u16;
    let mut out = vec![0u8; h.header_len() + payload.len()];
    let n = h.encode(&mut out).unwrap();
    out[n..].copy_from_slice(&payload);
    assert!(decode_data_packet(&out).is_ok(), "well-formed: {h:?}");
    out
}

/// Whether `d` is a DATA packet of `op`.
fn is_op(d: &[u8], op: metaroce_proto::wire::Op) -> bool {
    metaroce_proto::wire::decode_data_packet(d).is_ok_and(|(h, _)| h.op == op as u8)
}

/// A READ response whose length is not the READ's (C11: `msg_len` = the READ's
/// `dma_len`) — longer (one packet, or its last packet of two), shorter (likewise) — is
/// the peer's error: the READ completes with `IB_WC_LOC_LEN_ERR` (as siw's requester
/// does for a Read Response longer than its READ; rxe fails it with
/// `IB_WC_LOC_PROT_ERR` when the bytes do not fit), never with success, and nothing of
/// the response lands past the READ's buffer. An atomic's response of another length
/// than 8 bytes likewise.
#[test]
fn a_response_of_another_length_than_its_request_fails_the_wqe() {
    use metaroce_proto::wire::{Op, DF_LAST};
    // (READ length or 0 for a FETCH_ADD, the new msg_len, cut the last packet to it)
    for (len, forged) in [
        (100usize, 200u32),
        (100, 60),
        (2000, 2040),
        (2000, 1500),
        (0, 16),
        (0, 4),
    ] {
        let (mut p, a, b) = setup(8, false, clean(), 71);
        let e = if len == 0 {
            fetch_add(1, a, b, 5)
        } else {
            read(1, a, b, 0, len)
        };
        let landing = p.a.host.mr(A_MR).unwrap().bytes.clone();
        let wire = answers(&mut p, vec![e]);
        let resp = if len == 0 {
            Op::AtomicResp
        } else {
            Op::ReadResp
        };
        let last = wire
            .iter()
            .rposition(|d| is_op(d, resp))
            .expect("a response");
        for (i, d) in wire.iter().enumerate() {
            if !is_op(d, resp) {
                p.inject(0, d);
                continue;
            }
            let d = if i == last {
                reshape(d, |h, pl| {
                    pl.resize(forged as usize - h.offset as usize, 0xee);
                    h.msg_len = forged;
                    h.flags |= DF_LAST;
                })
            } else {
                reshape(d, |h, _| h.msg_len = forged)
            };
            p.inject(0, &d);
        }
        p.run(5_000_000_000);
        let what = format!("{len}-byte request answered with {forged}");
        assert_eq!(
            statuses(&p.a.host.send_cq),
            vec![(1, WcStatus::LocLenErr)],
            "{what}"
        );
        assert_eq!(p.a.host.mode, QpMode::Err, "{what}");
        assert!(p.a.host.bad_responses > 0, "{what}: counted");
        let now = &p.a.host.mr(A_MR).unwrap().bytes;
        let end = if len == 0 { 16 } else { LAND + len };
        assert_eq!(now[end..], landing[end..], "{what}: placed past the WQE");
    }
}

/// A response that answers no READ or atomic outstanding under its number (C11: response
/// MSN `k` answers the `k`-th READ/atomic), or the wrong kind of request (an ATOMIC_RESP
/// for a READ, a READ_RESP for an atomic), is placed nowhere — not into another WQE's
/// buffer — and completes nothing with success: the QP fails with
/// `IB_WC_BAD_RESP_ERR` (IBTA: an unexpected response from the responder).
#[test]
fn a_response_to_no_such_request_fails_the_qp_and_lands_nowhere() {
    use metaroce_proto::wire::Op;
    for case in 0..3 {
        let (mut p, a, b) = setup(8, false, clean(), 81);
        let before = p.a.host.mr(A_MR).unwrap().bytes.clone();
        // A WRITE (MSN 0, its source A's bytes 0..100), then the request answered.
        let w = rdma(
            wqe(WrOpcode::RdmaWrite, 0, vec![sge(a, 0, 100, A_MR)]),
            b,
            B_MR,
        );
        let (r, resp) = match case {
            // The READ is response number 0; the forgery says 1.
            0 => (read(1, a, b, 0, 100), Op::ReadResp),
            // A READ of 8 bytes answered by an ATOMIC_RESP.
            1 => (read(1, a, b, 0, 8), Op::ReadResp),
            // A FETCH_ADD answered by a READ_RESP.
            _ => (fetch_add(1, a, b, 5), Op::AtomicResp),
        };
        let wire = answers(&mut p, vec![w, r]);
        for d in &wire {
            if !is_op(d, resp) {
                p.inject(0, d);
            }
        }
        assert_eq!(statuses(&p.a.host.send_cq), vec![(0, WcStatus::Success)]);
        for d in &wire {
            if is_op(d, resp) {
                let forged = reshape(d, |h, _| match case {
                    0 => h.msn = 1,
                    1 => h.op = Op::AtomicResp as u8,
                    _ => h.op = Op::ReadResp as u8,
                });
                p.inject(0, &forged);
            }
        }
        p.run(5_000_000_000);
        assert_eq!(
            statuses(&p.a.host.send_cq),
            vec![(0, WcStatus::Success), (1, WcStatus::BadRespErr)],
            "case {case}"
        );
        assert_eq!(p.a.host.mode, QpMode::Err, "case {case}");
        let now = &p.a.host.mr(A_MR).unwrap().bytes;
        assert_eq!(now[..], before[..], "case {case}: response placed");
    }
}
