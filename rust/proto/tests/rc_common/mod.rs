//! Shared pieces of the RC engine tests: a workload builder over two model QPs
//! ([`metaroce_proto::testkit::rc::Pair`]) and its integrity checks.
#![allow(dead_code)]

use metaroce_proto::rc::{access, Cqe, Sge, WcOpcode, WcStatus, WrOpcode};
use metaroce_proto::testkit::rc::{Link, Pair, SqEntry};
use metaroce_proto::testkit::shared::SharedPair;

/// Requester's memory: source and landing buffers.
pub const A_MR: u32 = 0x10;
/// Responder's memory: RDMA target, READ source, atomics, receive buffers.
pub const B_MR: u32 = 0x20;
pub const MR_LEN: usize = 1 << 18;

pub fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(131) ^ (i >> 7) ^ 0x5a) as u8
}

/// A pair with both MRs registered, A's filled with `pattern`, B's READ source area
/// (`B_READ..`) filled with the pattern shifted.
pub fn setup(slots: usize, srq: bool, link: Link, seed: u64) -> (Pair, u64, u64) {
    let mut p = Pair::new(slots, srq, link, seed);
    let all =
        access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ | access::REMOTE_ATOMIC;
    let a = p.a.host.reg_mr(A_MR, MR_LEN, access::LOCAL_WRITE);
    let b = p.b.host.reg_mr(B_MR, MR_LEN, all);
    for (i, x) in p.a.host.mr_mut(A_MR).unwrap().bytes.iter_mut().enumerate() {
        *x = pattern(i);
    }
    for (i, x) in p.b.host.mr_mut(B_MR).unwrap().bytes[B_READ..]
        .iter_mut()
        .enumerate()
    {
        *x = pattern(i + 7);
    }
    (p, a, b)
}

/// Offset of B's READ source area.
pub const B_READ: usize = 1 << 17;

/// Where READs land in A's memory (past the atomics' originals, `8 * wr_id`).
pub const LAND: usize = 1 << 15;

/// READ `len` bytes of B's READ area at `off` into A's memory at `LAND + off`.
pub fn read(wr_id: u64, a: u64, b: u64, off: usize, len: usize) -> SqEntry {
    rdma(
        wqe(
            WrOpcode::RdmaRead,
            wr_id,
            vec![sge(a, LAND + off, len, A_MR)],
        ),
        b + (B_READ + off) as u64,
        B_MR,
    )
}

pub use metaroce_proto::testkit::rc::sge;

/// A signaled WQE of `op` with `sges` (its length their sum).
pub fn wqe(op: WrOpcode, wr_id: u64, sges: Vec<Sge>) -> SqEntry {
    SqEntry::signaled(op, wr_id, sges)
}

/// The same with a remote address and key.
pub fn rdma(e: SqEntry, va: u64, rkey: u32) -> SqEntry {
    e.at(va, rkey)
}

/// What a send completion should say.
pub fn send_ok(c: &Cqe, wr_id: u64, opcode: WcOpcode, len: u32) {
    assert_eq!(
        (c.wr_id, c.status, c.opcode, c.byte_len),
        (wr_id, WcStatus::Success, opcode, len),
        "{c:?}"
    );
}

/// Every WQE completed exactly once, in order, with the status listed.
pub fn statuses(cq: &[Cqe]) -> Vec<(u64, WcStatus)> {
    cq.iter().map(|c| (c.wr_id, c.status)).collect()
}

/// The statuses alone, in order.
pub fn codes(cq: &[Cqe]) -> Vec<WcStatus> {
    cq.iter().map(|c| c.status).collect()
}

/// The same for a receive CQ (completions with their solicited flag).
pub fn recv_statuses(cq: &[(Cqe, bool)]) -> Vec<(u64, WcStatus)> {
    cq.iter().map(|c| (c.0.wr_id, c.0.status)).collect()
}

/// The impaired links the lossy tests use: loss, duplication, reordering.
pub fn lossy(loss_ppm: u32, dup_ppm: u32, reorder_ppm: u32) -> Link {
    Link {
        loss_ppm,
        dup_ppm,
        reorder_ppm,
        delay_ns: 20_000,
        reorder_ns: 200_000,
        b_gone: false,
    }
}

pub fn clean() -> Link {
    lossy(0, 0, 0)
}

/// `qps` QP pairs sharing one connection per node over `link` (32 slots each): node 0's
/// QPs with [`A_MR`] (local write), node 1's with [`B_MR`] (every remote right).
pub fn shared_pair(qps: usize, link: Link) -> SharedPair {
    let mut p = SharedPair::new(qps, 32, link, 1);
    let all =
        access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ | access::REMOTE_ATOMIC;
    for q in 0..qps {
        p.nodes[0]
            .qp(q)
            .host
            .reg_mr(A_MR, MR_LEN, access::LOCAL_WRITE);
        p.nodes[1].qp(q).host.reg_mr(B_MR, MR_LEN, all);
    }
    p
}

/// The address a shared pair's region `key` starts at (the model's registration).
pub fn shared_va(key: u32) -> u64 {
    u64::from(key) << 32 | 0x1000
}

/// Offset of B's atomic counter.
pub const ATOMIC_OFF: usize = 1 << 16;

/// FETCH_ADD of `add` on B's counter, the original value landing at A's `8 * wr_id`.
pub fn fetch_add(wr_id: u64, a: u64, b: u64, add: u64) -> metaroce_proto::testkit::rc::SqEntry {
    let mut e = rdma(
        wqe(
            WrOpcode::AtomicFetchAndAdd,
            wr_id,
            vec![sge(a, 8 * wr_id as usize, 8, A_MR)],
        ),
        b + ATOMIC_OFF as u64,
        B_MR,
    );
    e.wqe.compare_add = add;
    e
}

/// Posts `wqes` on A, delivers A's requests to B and returns what B answers (to A):
/// its ACKs and, for a READ or atomic, the response packets, oldest first.
pub fn answers(p: &mut Pair, wqes: Vec<metaroce_proto::testkit::rc::SqEntry>) -> Vec<Vec<u8>> {
    for e in wqes {
        assert!(p.a.host.post_send(e));
    }
    p.doorbell(0);
    let reqs = p.take_wire();
    assert!(!reqs.is_empty() && reqs.iter().all(|(to, _)| *to == 1));
    for (_, d) in &reqs {
        p.inject(1, d);
    }
    let out = p.take_wire();
    assert!(out.iter().all(|(to, _)| *to == 0));
    // A response riding on an ACK (Documentation/transport.rst, "ACKs riding on DATA")
    // is split off: the ACKs and the DATA each make a datagram of their own.
    let mut split = Vec::new();
    for (_, d) in out {
        match metaroce_proto::wire::decode_ride(&d) {
            Ok((_, Some(data))) => {
                let at = d.len() - data.len();
                split.push(d[..at].to_vec());
                split.push(d[at..].to_vec());
            }
            _ => split.push(d),
        }
    }
    split
}
