//! An RC QP's streams carry their own ops only (Documentation/transport.rst, C10):
//! stream 0 the requests, stream 1 READ_RESP and ATOMIC_RESP. A DATA packet with a
//! response op on stream 0 or a request op on stream 1 — well formed, with the right
//! token and inside every window — is dropped (`unknown_op`, the reason for an op the
//! receiving QP does not take) before it changes anything; the real packet behind it
//! is then taken as usual. The same on a shared connection, whose members' wire
//! streams are 0 and 1 alike.
mod rc_common;
use metaroce_proto::rc::{access, WcOpcode, WcStatus, WrOpcode};
use metaroce_proto::testkit::rc::Pair;
use metaroce_proto::testkit::shared::SharedPair;
use metaroce_proto::time::Instant;
use metaroce_proto::wire::{
    decode_data_packet, decode_ride, peek_type, DropReason, Op, PacketType, Reth, DF_IMM, DF_RETH,
};
use rc_common::*;

/// Ops a stream 0 must not carry, then ops a stream 1 must not carry.
const RESPONSE_OPS: [Op; 2] = [Op::ReadResp, Op::AtomicResp];
const REQUEST_OPS: [Op; 7] = [
    Op::Send,
    Op::Write,
    Op::WriteImm,
    Op::ReadReq,
    Op::AtomicCmpSwap,
    Op::AtomicFetchAdd,
    Op::AtomicWrite,
];

/// DATA packet `d` re-encoded with op `op` (the RETH and immediate data as `op` needs
/// them; the rest as it was): well formed.
fn with_op(d: &[u8], op: Op) -> Vec<u8> {
    let (mut h, payload) = decode_data_packet(d).unwrap();
    h.op = op as u8;
    h.flags &= !(DF_RETH | DF_IMM);
    if op.needs_reth() {
        h.flags |= DF_RETH;
        h.reth = Reth {
            va: 0x1000,
            rkey: B_MR,
            len: h.msg_len,
        };
    }
    if op.has_imm() && h.flags & metaroce_proto::wire::DF_LAST != 0 {
        h.flags |= DF_IMM;
        h.imm = 7;
    }
    let mut out = vec![0u8; h.header_len() + payload.len()];
    let n = h.encode(&mut out).unwrap();
    out[n..].copy_from_slice(payload);
    // The sender's mode (a shared connection's bit) as it was.
    metaroce_proto::wire::set_shared(&mut out, metaroce_proto::wire::is_shared(d)).unwrap();
    assert!(decode_data_packet(&out).is_ok(), "well-formed: {op:?}");
    out
}

/// Whether `d` is a DATA packet on stream `s`.
fn on_stream(d: &[u8], s: u16) -> bool {
    decode_data_packet(data_of(d)).is_ok_and(|(h, _)| h.stream == s)
}

/// The DATA packet of datagram `d`: itself, or the one riding after its ACKs
/// (`Documentation/transport.rst`, "ACKs riding on DATA"); empty if none.
fn data_of(d: &[u8]) -> &[u8] {
    match peek_type(d) {
        Some(PacketType::Ack) => decode_ride(d).ok().and_then(|r| r.1).unwrap_or_default(),
        _ => d,
    }
}

/// Hands `d` to node `to` of `p`: the drop reason, with a check that a dropped packet
/// changed nothing (connection, RC engine, verbs objects).
fn deliver(p: &mut Pair, to: u8, d: &[u8]) -> Result<(), DropReason> {
    let n = if to == 0 { &mut p.a } else { &mut p.b };
    let before = format!("{:?}{:?}{:?}", n.conn, n.engine, n.host);
    let r = n
        .conn
        .handle_packet(Instant(p.now), d, false, &mut n.engine.bind(&mut n.host))
        .map(|_| ());
    if r.is_err() {
        let after = format!("{:?}{:?}{:?}", n.conn, n.engine, n.host);
        assert!(
            before == after,
            "a packet dropped as {r:?} changed node {to}"
        );
    }
    r
}

/// A WRITE's packet (stream 0) carrying a response op instead, then a READ response
/// (stream 1) carrying a request op: each dropped as `unknown_op` with nothing changed;
/// the real packets then complete the WRITE and the READ with their bytes.
#[test]
fn an_op_of_the_other_stream_is_dropped_unchanged() {
    let (mut p, a, b) = setup(8, false, clean(), 91);
    let w = rdma(
        wqe(WrOpcode::RdmaWrite, 1, vec![sge(a, 0, 100, A_MR)]),
        b,
        B_MR,
    );
    assert!(p.a.host.post_send(w));
    p.doorbell(0);
    let reqs = p.take_wire();
    let (_, write) = reqs
        .iter()
        .find(|(to, d)| *to == 1 && on_stream(d, 0))
        .unwrap();
    for op in RESPONSE_OPS {
        let forged = with_op(data_of(write), op);
        assert_eq!(
            deliver(&mut p, 1, &forged),
            Err(DropReason::UnknownOp),
            "{op:?} on stream 0"
        );
    }
    for (to, d) in &reqs {
        p.inject(*to, d);
    }
    assert!(p.run(1_000_000_000));
    send_ok(&p.a.host.send_cq[0], 1, WcOpcode::RdmaWrite, 100);
    let bm = &p.b.host.mr(B_MR).unwrap().bytes;
    assert!((0..100).all(|i| bm[i] == pattern(i)), "the WRITE placed");

    let r = rdma(
        wqe(WrOpcode::RdmaRead, 2, vec![sge(a, 4096, 300, A_MR)]),
        b + B_READ as u64,
        B_MR,
    );
    assert!(p.a.host.post_send(r));
    p.doorbell(0);
    for (to, d) in p.take_wire() {
        p.inject(to, &d);
    }
    let answers = p.take_wire();
    let (_, resp) = answers
        .iter()
        .find(|(to, d)| *to == 0 && on_stream(d, 1))
        .unwrap();
    for op in REQUEST_OPS {
        let forged = with_op(data_of(resp), op);
        assert_eq!(
            deliver(&mut p, 0, &forged),
            Err(DropReason::UnknownOp),
            "{op:?} on stream 1"
        );
    }
    for (to, d) in &answers {
        p.inject(*to, d);
    }
    assert!(p.run(1_000_000_000));
    send_ok(&p.a.host.send_cq[1], 2, WcOpcode::RdmaRead, 300);
    let am = &p.a.host.mr(A_MR).unwrap().bytes;
    assert!(
        (0..300).all(|i| am[4096 + i] == pattern(i + 7)),
        "the READ placed"
    );
    assert_eq!(p.a.host.bad_responses, 0);
}

/// The same on a shared connection: a member's wire stream 0 takes no response op, its
/// wire stream 1 no request op.
#[test]
fn an_op_of_the_other_stream_is_dropped_on_a_shared_connection() {
    const MR: u32 = 0x10;
    let va = u64::from(MR) << 32 | 0x1000;
    let mut p = SharedPair::new(2, 16, clean(), 92);
    let all = access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ;
    for n in 0..2 {
        for q in 0..2 {
            assert_eq!(p.nodes[n].qp(q).host.reg_mr(MR, MR_LEN, all), va);
        }
    }
    for (i, x) in p.nodes[1].qp(1).host.mr_mut(MR).unwrap().bytes[..300]
        .iter_mut()
        .enumerate()
    {
        *x = pattern(i);
    }
    // QP 1 of node 0: a WRITE, then a READ.
    let w = rdma(
        wqe(WrOpcode::RdmaWrite, 1, vec![sge(va, 0, 100, MR)]),
        va + 8192,
        MR,
    );
    let r = rdma(
        wqe(WrOpcode::RdmaRead, 2, vec![sge(va, 4096, 300, MR)]),
        va,
        MR,
    );
    assert!(p.nodes[0].qp(1).host.post_send(w));
    assert!(p.nodes[0].qp(1).host.post_send(r));
    p.doorbell();
    let now = Instant(p.now);
    let sent: Vec<_> = p.wire.queue.drain(..).map(|w| (w.2, w.3)).collect();
    let (_, write) = sent
        .iter()
        .find(|(to, d)| *to == 1 && on_stream(d, 0))
        .unwrap();
    for op in RESPONSE_OPS {
        let before = format!("{:?}", p.nodes[1].conn);
        assert_eq!(
            p.nodes[1].deliver(now, &with_op(data_of(write), op)),
            Err(DropReason::UnknownOp),
            "{op:?} on wire stream 0"
        );
        assert_eq!(before, format!("{:?}", p.nodes[1].conn));
    }
    for (to, d) in &sent {
        let _ = p.nodes[usize::from(*to)].deliver(now, d);
    }
    p.doorbell();
    let answers: Vec<_> = p.wire.queue.drain(..).map(|w| (w.2, w.3)).collect();
    let (_, resp) = answers
        .iter()
        .find(|(to, d)| *to == 0 && on_stream(d, 1))
        .unwrap();
    for op in REQUEST_OPS {
        let before = format!("{:?}", p.nodes[0].conn);
        assert_eq!(
            p.nodes[0].deliver(now, &with_op(data_of(resp), op)),
            Err(DropReason::UnknownOp),
            "{op:?} on wire stream 1"
        );
        assert_eq!(before, format!("{:?}", p.nodes[0].conn));
    }
    for (to, d) in &answers {
        let _ = p.nodes[usize::from(*to)].deliver(now, d);
    }
    assert!(p.run(1_000_000_000));
    let cq = statuses(&p.nodes[0].qp(1).host.send_cq);
    assert_eq!(cq, vec![(1, WcStatus::Success), (2, WcStatus::Success)]);
    let got = &p.nodes[0].qp(1).host.mr(MR).unwrap().bytes;
    assert!(
        (0..300).all(|i| got[4096 + i] == pattern(i)),
        "the READ placed"
    );
}
