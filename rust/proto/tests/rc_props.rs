//! Property test of the RC engine: random work request mixes over a random lossy,
//! duplicating, reordering link; every WQE completes exactly once, in order, with
//! success, and every byte lands where it should.
mod rc_common;
use metaroce_proto::rc::{QpMode, WcOpcode, WcStatus, WrOpcode};
use proptest::prelude::*;
use rc_common::*;

#[derive(Clone, Debug)]
enum Wr {
    Send {
        len: usize,
        imm: bool,
        pieces: usize,
    },
    Write {
        len: usize,
        imm: bool,
        pieces: usize,
    },
    Read {
        len: usize,
    },
    FetchAdd(u64),
    CmpSwap {
        hit: bool,
        swap: u64,
    },
    AtomicWrite(u64),
}

fn wr() -> impl Strategy<Value = Wr> {
    prop_oneof![
        (0usize..3000, any::<bool>(), 1usize..4).prop_map(|(len, imm, pieces)| Wr::Send {
            len,
            imm,
            pieces
        }),
        (0usize..5000, any::<bool>(), 1usize..4).prop_map(|(len, imm, pieces)| Wr::Write {
            len,
            imm,
            pieces
        }),
        (1usize..4000).prop_map(|len| Wr::Read { len }),
        (0u64..1000).prop_map(Wr::FetchAdd),
        (any::<bool>(), any::<u64>()).prop_map(|(hit, swap)| Wr::CmpSwap { hit, swap }),
        any::<u64>().prop_map(Wr::AtomicWrite),
    ]
}

/// SGEs covering `len` bytes from A offset `src`, in `pieces` pieces.
fn split(a: u64, src: usize, len: usize, pieces: usize) -> Vec<metaroce_proto::rc::Sge> {
    if len == 0 {
        return vec![];
    }
    let pieces = pieces.min(len);
    let step = len / pieces;
    (0..pieces)
        .map(|k| {
            let from = k * step;
            let to = if k + 1 == pieces { len } else { from + step };
            sge(a, src + from, to - from, A_MR)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn random_mixes_over_a_lossy_link_keep_integrity(
        wrs in prop::collection::vec(wr(), 1..24),
        loss in 0u32..100_000,
        dup in 0u32..100_000,
        reorder in 0u32..400_000,
        seed in any::<u64>(),
        rd_atomic in 1u8..5,
    ) {
        let (mut p, a, b) = setup(32, false, lossy(loss, dup, reorder), seed);
        p.a.host.attrs.max_rd_atomic = rd_atomic;
        let atomic_va = b + (1u64 << 16);
        let mut b_next = 0usize; // B's landing area, [0, 64 KiB)
        let mut a_next = 1usize << 17; // A's landing area for READs and atomics
        let mut counter = 0u64; // the atomic word's value, executed in order
        // (wr_id, opcode, length) of each send completion; (opcode, len, imm) of each
        // receive; (B offset, A source offset, len) of each placement; (A offset,
        // expected bytes) of each READ/atomic result.
        let mut want_send = Vec::new();
        let mut want_recv = Vec::new();
        let mut placed = Vec::new();
        let mut landed: Vec<(u64, usize, Vec<u8>)> = Vec::new();
        let mut written: Vec<(usize, Vec<u8>)> = Vec::new();
        for (i, w) in wrs.iter().enumerate() {
            let id = i as u64;
            let src = (i * 1237) % 60_000;
            let e = match *w {
                Wr::Send { len, imm, pieces } => {
                    let op = if imm { WrOpcode::SendWithImm } else { WrOpcode::Send };
                    let mut e = wqe(op, id, split(a, src, len, pieces));
                    e.wqe.ex = (i as u32).to_be();
                    prop_assert!(p.b.host.post_recv(1000 + id, &[sge(b, b_next, len.max(1), B_MR)]));
                    want_recv.push((1000 + id, WcOpcode::Recv, len as u32));
                    placed.push((b_next, src, len));
                    b_next += len.max(1);
                    want_send.push((id, WcOpcode::Send, len as u32));
                    e
                }
                Wr::Write { len, imm, pieces } => {
                    let op = if imm { WrOpcode::RdmaWriteWithImm } else { WrOpcode::RdmaWrite };
                    let mut e = rdma(wqe(op, id, split(a, src, len, pieces)), b + b_next as u64, B_MR);
                    e.wqe.ex = (i as u32).to_be();
                    if imm {
                        prop_assert!(p.b.host.post_recv(1000 + id, &[]));
                        want_recv.push((1000 + id, WcOpcode::RecvRdmaWithImm, len as u32));
                    }
                    placed.push((b_next, src, len));
                    b_next += len;
                    want_send.push((id, WcOpcode::RdmaWrite, len as u32));
                    e
                }
                Wr::Read { len } => {
                    let off = (i * 331) % 60_000;
                    let e = rdma(
                        wqe(WrOpcode::RdmaRead, id, vec![sge(a, a_next, len, A_MR)]),
                        b + (B_READ + off) as u64,
                        B_MR,
                    );
                    landed.push((id, a_next, (0..len).map(|k| pattern(off + k + 7)).collect()));
                    a_next += len;
                    want_send.push((id, WcOpcode::RdmaRead, len as u32));
                    e
                }
                Wr::FetchAdd(add) => {
                    let mut e = rdma(
                        wqe(WrOpcode::AtomicFetchAndAdd, id, vec![sge(a, a_next, 8, A_MR)]),
                        atomic_va,
                        B_MR,
                    );
                    e.wqe.compare_add = add;
                    landed.push((id, a_next, counter.to_ne_bytes().to_vec()));
                    counter = counter.wrapping_add(add);
                    a_next += 8;
                    want_send.push((id, WcOpcode::FetchAdd, 8));
                    e
                }
                Wr::CmpSwap { hit, swap } => {
                    let mut e = rdma(
                        wqe(WrOpcode::AtomicCmpAndSwp, id, vec![sge(a, a_next, 8, A_MR)]),
                        atomic_va,
                        B_MR,
                    );
                    e.wqe.compare_add = if hit { counter } else { counter ^ 1 };
                    e.wqe.swap = swap;
                    landed.push((id, a_next, counter.to_ne_bytes().to_vec()));
                    if hit {
                        counter = swap;
                    }
                    a_next += 8;
                    want_send.push((id, WcOpcode::CompSwap, 8));
                    e
                }
                Wr::AtomicWrite(v) => {
                    // Its own aligned word: writes of different messages are placed as
                    // their packets arrive, so two writes to one address may land in
                    // either order (only atomics are executed in order).
                    let at = (b_next + 7) & !7;
                    let mut e = rdma(wqe(WrOpcode::AtomicWrite, id, vec![]), b + at as u64, B_MR);
                    e.wqe.length = 8;
                    e.inline = v.to_ne_bytes().to_vec();
                    written.push((at, v.to_ne_bytes().to_vec()));
                    b_next = at + 8;
                    want_send.push((id, WcOpcode::AtomicWrite, 8));
                    e
                }
            };
            prop_assert!(p.a.host.post_send(e));
        }
        p.a.host.snapshot_key = Some(A_MR);
        prop_assert!(p.run(60_000_000_000), "did not go quiet");
        prop_assert_eq!(p.a.host.mode, QpMode::Rts);
        prop_assert_eq!(p.b.host.mode, QpMode::Rts);
        // Every WQE once, in order, successful.
        let got: Vec<_> = p.a.host.send_cq.iter().map(|c| (c.wr_id, c.opcode, c.byte_len, c.status)).collect();
        let want: Vec<_> = want_send.iter().map(|&(i, o, l)| (i, o, l, WcStatus::Success)).collect();
        prop_assert_eq!(got, want);
        let got: Vec<_> = p.b.host.recv_cq.iter().map(|(c, _)| (c.wr_id, c.opcode, c.byte_len, c.status)).collect();
        let want: Vec<_> = want_recv.iter().map(|&(i, o, l)| (i, o, l, WcStatus::Success)).collect();
        prop_assert_eq!(got, want);
        // Bytes placed exactly.
        let am = &p.a.host.mr(A_MR).unwrap().bytes;
        let bm = &p.b.host.mr(B_MR).unwrap().bytes;
        for &(to, from, len) in &placed {
            let want: Vec<u8> = (from..from + len).map(pattern).collect();
            prop_assert_eq!(&bm[to..to + len], &want[..]);
        }
        for (id, at, want) in &landed {
            prop_assert_eq!(&am[*at..*at + want.len()], &want[..]);
            // Already there when the completion was written.
            let snap = &p.a.host.snapshots.iter().find(|x| x.0 == *id).unwrap().1;
            prop_assert!(snap[*at..*at + want.len()] == want[..], "#{} incomplete at its completion", id);
        }
        for (at, want) in &written {
            prop_assert_eq!(&bm[*at..*at + 8], &want[..]);
        }
        let fin = u64::from_ne_bytes(bm[1 << 16..(1 << 16) + 8].try_into().unwrap());
        prop_assert_eq!(fin, counter);
    }
}
