//! Unreliable connected QPs over the MetaRoCE wire (`rc::uc`; Documentation/transport.rst,
//! "UC: the unreliable connected service"): messages arrive whole or not at all, a lost
//! packet drops its message and only it, no retransmission, the receive a dropped message
//! would have used takes the next one, forged packets change nothing.

mod rc_common;

use metaroce_proto::ident::Ident;
use metaroce_proto::rc::{access, Engine, QpMode, WcOpcode, WcStatus, WrOpcode};
use metaroce_proto::rc::{UcLink, UcRx};
use metaroce_proto::testkit::rc::{tables, Host, VecTables};
use metaroce_proto::wire::{decode_data_packet, DropReason, MAX_DATA_HEADER};
use rc_common::{pattern, rdma, sge, wqe, A_MR, B_MR, MR_LEN};

const A_QPN: u32 = 0x11;
const B_QPN: u32 = 0x22;
const MTU: u16 = 256;

/// One UC QP: its host objects, engine and link.
struct Side {
    host: Host,
    rc: Engine<VecTables>,
    link: UcLink,
}

/// A connected pair: A sends to B (B -> A is opened too, unused).
struct Uc {
    a: Side,
    b: Side,
    a_va: u64,
    b_va: u64,
}

fn side(srq: bool) -> Side {
    Side {
        host: Host::new(64, srq),
        rc: Engine::new(tables(64, srq.then_some(4))),
        link: UcLink::default(),
    }
}

fn pair(srq: bool) -> Uc {
    let (mut a, mut b) = (side(false), side(srq));
    let (ga, gb) = ([1u8; 16], [2u8; 16]);
    let ab = Ident::derive(&ga, &gb, A_QPN, B_QPN, 0x1234);
    let ba = Ident::derive(&gb, &ga, B_QPN, A_QPN, 0x4321);
    a.link.open_rx(A_QPN, MTU, ba);
    a.link.open_tx(B_QPN, ab);
    b.link.open_rx(B_QPN, MTU, ab);
    b.link.open_tx(A_QPN, ba);
    let a_va = a.host.reg_mr(A_MR, MR_LEN, access::LOCAL_WRITE);
    for (i, x) in a.host.mr_mut(A_MR).unwrap().bytes.iter_mut().enumerate() {
        *x = pattern(i);
    }
    let b_va = b
        .host
        .reg_mr(B_MR, MR_LEN, access::LOCAL_WRITE | access::REMOTE_WRITE);
    Uc { a, b, a_va, b_va }
}

impl Uc {
    /// Everything A's SQ turns into packets now.
    fn packets(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            let mut buf = vec![0u8; usize::from(self.a.link.mtu) + MAX_DATA_HEADER];
            let a = &mut self.a;
            let Some(n) = a.rc.uc_transmit(&mut a.host, &mut a.link, 7, &mut buf) else {
                return out;
            };
            buf.truncate(n);
            out.push(buf);
        }
    }

    /// Delivers `p` to B in pieces, as the kernel may (`testkit::as_received`).
    fn deliver(&mut self, p: &[u8]) -> Result<UcRx, DropReason> {
        let b = &mut self.b;
        let dg = metaroce_proto::testkit::as_received(p);
        b.rc.uc_receive_pieces(&mut b.host, &mut b.link, dg)
    }

    fn send(&mut self, op: WrOpcode, wr_id: u64, off: usize, len: usize, imm: u32) {
        let mut e = wqe(op, wr_id, vec![sge(self.a_va, off, len, A_MR)]);
        e.wqe.ex = imm.to_be();
        assert!(self.a.host.post_send(e));
    }

    fn write(&mut self, op: WrOpcode, wr_id: u64, off: usize, len: usize, dst: usize, imm: u32) {
        let mut e = rdma(
            wqe(op, wr_id, vec![sge(self.a_va, off, len, A_MR)]),
            self.b_va + dst as u64,
            B_MR,
        );
        e.wqe.ex = imm.to_be();
        assert!(self.a.host.post_send(e));
    }

    fn recv(&mut self, wr_id: u64, off: usize, len: usize) {
        assert!(self
            .b
            .host
            .post_recv(wr_id, &[sge(self.b_va, off, len, B_MR)]));
    }

    fn b_bytes(&self, off: usize, len: usize) -> &[u8] {
        &self.b.host.mr(B_MR).unwrap().bytes[off..off + len]
    }
}

fn sent_pattern(off: usize, len: usize) -> Vec<u8> {
    (off..off + len).map(pattern).collect()
}

#[test]
fn every_operation_arrives_whole_and_completes_on_both_sides() {
    let mut u = pair(false);
    u.recv(100, 0, 4096);
    u.recv(101, 4096, 4096);
    u.recv(102, 8192, 64);
    u.send(WrOpcode::Send, 1, 0, 1000, 0);
    u.send(WrOpcode::SendWithImm, 2, 1000, 300, 0xdead_beef);
    u.write(WrOpcode::RdmaWrite, 3, 2000, 700, 16384, 0);
    u.write(WrOpcode::RdmaWriteWithImm, 4, 3000, 513, 20000, 0x0102_0304);
    u.write(WrOpcode::RdmaWriteWithImm, 5, 0, 0, 0, 77);
    let pk = u.packets();
    // 4 + 2 + 3 + 3 + 1 packets, one PSN each, in order.
    assert_eq!(pk.len(), 13);
    let psn0 = decode_data_packet(&pk[0]).unwrap().0.psn;
    for (i, p) in pk.iter().enumerate() {
        let (h, _) = decode_data_packet(p).unwrap();
        assert_eq!(
            (h.path, h.dst_conn, h.psn),
            (0, B_QPN, psn0.wrapping_add(i as u32))
        );
    }
    // A UC send completes once handed to the network.
    let sc: Vec<_> =
        u.a.host
            .send_cq
            .iter()
            .map(|c| (c.wr_id, c.status, c.opcode))
            .collect();
    assert_eq!(
        sc,
        [
            (1, WcStatus::Success, WcOpcode::Send),
            (2, WcStatus::Success, WcOpcode::Send),
            (3, WcStatus::Success, WcOpcode::RdmaWrite),
            (4, WcStatus::Success, WcOpcode::RdmaWrite),
            (5, WcStatus::Success, WcOpcode::RdmaWrite),
        ]
    );
    let mut done = 0;
    for p in &pk {
        // The same packet marked as a shared connection's: not a UC QP's (C22).
        let mut shared = p.clone();
        metaroce_proto::wire::set_shared(&mut shared, true).unwrap();
        assert_eq!(u.deliver(&shared), Err(DropReason::ModeMismatch));
        if u.deliver(p).unwrap() == UcRx::Completed {
            done += 1;
        }
    }
    assert_eq!(done, 4);
    assert_eq!(u.b_bytes(0, 1000), sent_pattern(0, 1000));
    assert_eq!(u.b_bytes(4096, 300), sent_pattern(1000, 300));
    assert_eq!(u.b_bytes(16384, 700), sent_pattern(2000, 700));
    assert_eq!(u.b_bytes(20000, 513), sent_pattern(3000, 513));
    let rc: Vec<_> =
        u.b.host
            .recv_cq
            .iter()
            .map(|(c, _)| (c.wr_id, c.status, c.opcode, c.byte_len, u32::from_be(c.ex)))
            .collect();
    assert_eq!(
        rc,
        [
            (100, WcStatus::Success, WcOpcode::Recv, 1000, 0),
            (101, WcStatus::Success, WcOpcode::Recv, 300, 0xdead_beef),
            (
                102,
                WcStatus::Success,
                WcOpcode::RecvRdmaWithImm,
                513,
                0x0102_0304
            ),
        ]
    );
    // The zero-length WRITE_WITH_IMM found no receive left: dropped, not an error.
    assert_eq!(u.b.link.stats().rx_dropped, 1);
    assert_eq!(u.b.host.mode, QpMode::Rts);
}

#[test]
fn a_lost_packet_drops_its_message_only_and_the_receive_takes_the_next() {
    for lost in 0..4 {
        let mut u = pair(false);
        u.recv(100, 0, 4096);
        u.recv(101, 4096, 4096);
        u.send(WrOpcode::Send, 1, 0, 1000, 0); // packets 0..4
        u.send(WrOpcode::Send, 2, 1000, 600, 0); // packets 4..7
        let pk = u.packets();
        assert_eq!(pk.len(), 7);
        let mut rx = Vec::new();
        for (i, p) in pk.iter().enumerate() {
            if i != lost {
                rx.push(u.deliver(p).unwrap());
            }
        }
        assert_eq!(
            rx.iter().filter(|r| **r == UcRx::Completed).count(),
            1,
            "lost {lost}"
        );
        // The first message is gone; the second landed in the receive it would have used.
        assert_eq!(u.b.host.recv_cq.len(), 1);
        let (c, _) = &u.b.host.recv_cq[0];
        assert_eq!(
            (c.wr_id, c.status, c.byte_len),
            (100, WcStatus::Success, 600)
        );
        assert_eq!(u.b_bytes(0, 600), sent_pattern(1000, 600));
        // A message whose first packet was lost never started: its other packets are
        // skipped; one that started and lost a packet is dropped, the rest skipped.
        let st = u.b.link.stats();
        let skipped = if lost == 0 { 3 } else { 3 - lost as u32 };
        assert_eq!(
            (st.rx_dropped, st.rx_skipped),
            (u32::from(lost > 0), skipped),
            "lost {lost}"
        );
        // Nothing is sent again.
        assert!(u.packets().is_empty());
    }
}

#[test]
fn a_message_missing_its_last_packet_is_dropped_when_the_next_one_starts() {
    let mut u = pair(false);
    u.recv(100, 0, 4096);
    u.send(WrOpcode::Send, 1, 0, 600, 0);
    u.send(WrOpcode::Send, 2, 1000, 100, 0);
    let pk = u.packets();
    assert_eq!(pk.len(), 4);
    u.deliver(&pk[0]).unwrap();
    u.deliver(&pk[1]).unwrap();
    // pk[2] (LAST of the first message) is lost; the next message starts.
    assert_eq!(u.deliver(&pk[3]).unwrap(), UcRx::Completed);
    let (c, _) = &u.b.host.recv_cq[0];
    assert_eq!((c.wr_id, c.byte_len), (100, 100));
    assert_eq!(u.b_bytes(0, 100), sent_pattern(1000, 100));
}

#[test]
fn reordered_packets_drop_the_message_and_the_late_one_is_refused() {
    let mut u = pair(false);
    u.recv(100, 0, 4096);
    u.recv(101, 4096, 4096);
    u.send(WrOpcode::Send, 1, 0, 600, 0);
    u.send(WrOpcode::Send, 2, 1000, 200, 0);
    let pk = u.packets();
    u.deliver(&pk[0]).unwrap();
    assert_eq!(u.deliver(&pk[2]).unwrap(), UcRx::Discarded);
    let before = u.b.link;
    assert_eq!(u.deliver(&pk[1]), Err(DropReason::PsnOutOfWindow));
    assert_eq!(u.b.link, before);
    assert_eq!(u.deliver(&pk[3]).unwrap(), UcRx::Completed);
    assert_eq!(u.b.host.recv_cq.len(), 1);
    assert_eq!(u.b.host.recv_cq[0].0.byte_len, 200);
}

#[test]
fn class_d_errors_drop_the_message_and_the_qp_stays_usable() {
    let mut u = pair(false);
    // No receive posted: the SEND is dropped.
    u.send(WrOpcode::Send, 1, 0, 100, 0);
    // A WRITE through a wrong key byte, and past the region's end: dropped, memory kept.
    u.write(WrOpcode::RdmaWrite, 2, 0, 100, 0, 0);
    u.a.host.sq[1].wqe.rkey = B_MR + 1;
    u.write(WrOpcode::RdmaWrite, 3, 0, 300, MR_LEN - 200, 0);
    for p in u.packets() {
        let _ = u.deliver(&p).unwrap();
    }
    assert!(u.b.host.recv_cq.is_empty());
    assert!(u.b_bytes(0, 100).iter().all(|&x| x == 0));
    assert!(u.b_bytes(MR_LEN - 200, 200).iter().all(|&x| x == 0));
    // A SEND longer than its receive: dropped; the receive takes the next SEND.
    u.recv(100, 0, 64);
    u.send(WrOpcode::Send, 4, 0, 200, 0);
    u.send(WrOpcode::Send, 5, 500, 50, 0);
    for p in u.packets() {
        let _ = u.deliver(&p).unwrap();
    }
    assert_eq!(u.b.link.stats().rx_dropped, 4);
    assert_eq!(u.b.host.mode, QpMode::Rts);
    assert_eq!(u.b.host.recv_cq.len(), 1);
    let (c, _) = &u.b.host.recv_cq[0];
    assert_eq!(
        (c.wr_id, c.status, c.byte_len),
        (100, WcStatus::Success, 50)
    );
    assert_eq!(u.b_bytes(0, 50), sent_pattern(500, 50));
    // The requester saw success for all of them: UC has no acknowledgements.
    assert!(u
        .a
        .host
        .send_cq
        .iter()
        .all(|c| c.status == WcStatus::Success));
}

#[test]
fn operations_uc_does_not_carry_and_unreadable_sges_fail_before_sending() {
    for (op, want) in [
        (WrOpcode::RdmaRead, WcStatus::LocQpOpErr),
        (WrOpcode::AtomicFetchAndAdd, WcStatus::LocQpOpErr),
        (WrOpcode::Send, WcStatus::LocProtErr),
    ] {
        let mut u = pair(false);
        let lkey = if op == WrOpcode::Send { A_MR + 1 } else { A_MR };
        let e = rdma(wqe(op, 9, vec![sge(u.a_va, 0, 8, lkey)]), u.b_va, B_MR);
        assert!(u.a.host.post_send(e));
        u.send(WrOpcode::Send, 10, 0, 8, 0);
        assert!(u.packets().is_empty(), "{op:?}");
        let sc: Vec<_> =
            u.a.host
                .send_cq
                .iter()
                .map(|c| (c.wr_id, c.status))
                .collect();
        assert_eq!(sc, [(9, want), (10, WcStatus::WrFlushErr)], "{op:?}");
        assert_eq!(u.a.host.mode, QpMode::Err);
    }
}

#[test]
fn forged_and_misdirected_packets_change_nothing() {
    let mut u = pair(false);
    u.recv(100, 0, 4096);
    u.send(WrOpcode::Send, 1, 0, 600, 0);
    let pk = u.packets();
    u.deliver(&pk[0]).unwrap();
    let (link, rcq) = (u.b.link, u.b.host.recv_cq.len());
    let mut cases: Vec<(Vec<u8>, DropReason)> = Vec::new();
    let edit = |p: &[u8], at: usize, v: &[u8]| {
        let mut q = p.to_vec();
        q[at..at + v.len()].copy_from_slice(v);
        q
    };
    let p = &pk[1];
    cases.push((edit(p, 16, &[0, 0, 0, 1]), DropReason::BadToken));
    cases.push((
        edit(p, 5, &A_QPN.to_be_bytes()[1..]),
        DropReason::WrongConnection,
    ));
    cases.push((edit(p, 2, &[1]), DropReason::BadPath));
    let h = decode_data_packet(p).unwrap().0;
    cases.push((
        edit(p, 8, &h.psn.wrapping_add(1 << 16).to_be_bytes()),
        DropReason::PsnOutOfWindow,
    ));
    cases.push((
        edit(p, 8, &h.psn.wrapping_sub(1).to_be_bytes()),
        DropReason::PsnOutOfWindow,
    ));
    cases.push((p[..30].to_vec(), DropReason::LengthMismatch));
    for (q, want) in &cases {
        let got = u.deliver(q);
        assert!(got.is_err(), "{want:?}: {got:?}");
        if *want != DropReason::LengthMismatch {
            assert_eq!(got, Err(*want));
        }
        assert_eq!(u.b.link, link, "{want:?}");
    }
    assert_eq!(u.b.host.recv_cq.len(), rcq);
    for p in &pk[1..] {
        u.deliver(p).unwrap();
    }
    assert_eq!(u.b.host.recv_cq.len(), 1);
    assert_eq!(u.b_bytes(0, 600), sent_pattern(0, 600));
}

#[test]
fn srq_receives_are_kept_across_dropped_messages() {
    let mut u = pair(true);
    u.recv(200, 0, 4096);
    u.recv(201, 4096, 4096);
    u.send(WrOpcode::Send, 1, 0, 700, 0);
    u.send(WrOpcode::SendWithImm, 2, 1000, 300, 5);
    u.send(WrOpcode::Send, 3, 2000, 10, 0);
    let pk = u.packets();
    assert_eq!(pk.len(), 6);
    for (i, p) in pk.iter().enumerate() {
        if i != 1 {
            u.deliver(p).unwrap();
        }
    }
    let rc: Vec<_> =
        u.b.host
            .recv_cq
            .iter()
            .map(|(c, _)| (c.wr_id, c.byte_len))
            .collect();
    assert_eq!(rc, [(200, 300), (201, 10)]);
    assert_eq!(u.b_bytes(0, 300), sent_pattern(1000, 300));
    assert_eq!(u.b_bytes(4096, 10), sent_pattern(2000, 10));
}

/// Random loss and reordering, many seeds: every receive completion is one whole message
/// (its bytes exactly the ones sent), completions keep the sending order, a message
/// completes only if every packet of it arrived, and the receiver's state moves only
/// on packets it accepted.
#[test]
fn random_loss_never_delivers_a_partial_or_misordered_message() {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut total = (0, 0);
    for _seed in 0..300 {
        let mut u = pair(false);
        let n = 1 + (next() % 12) as usize;
        let loss = next() % 30; // percent
        let mut msgs = Vec::new();
        for i in 0..n {
            let len = (next() % 1200) as usize;
            let off = (next() % 4096) as usize;
            u.recv(1000 + i as u64, i * 2048, 2048);
            u.send(WrOpcode::Send, i as u64, off, len, 0);
            msgs.push((off, len));
        }
        let pk = u.packets();
        let mut arrived = vec![true; pk.len()];
        let mut order: Vec<usize> = (0..pk.len()).collect();
        let np = pk.len();
        for (i, a) in arrived.iter_mut().enumerate() {
            if next() % 100 < loss {
                *a = false;
            }
            if i + 1 < np && next() % 20 == 0 {
                order.swap(i, i + 1);
            }
        }
        for &i in &order {
            if arrived[i] {
                let _ = u.deliver(&pk[i]);
            }
        }
        // Which message each packet belongs to, and which messages were whole and in
        // sequence.
        let mut first_pk = 0;
        let mut whole = Vec::new();
        for (m, &(_, len)) in msgs.iter().enumerate() {
            let np = len.div_ceil(usize::from(MTU)).max(1);
            let idx: Vec<usize> = (first_pk..first_pk + np).collect();
            let pos: Vec<usize> = idx
                .iter()
                .map(|i| order.iter().position(|o| o == i).unwrap())
                .collect();
            let in_seq = pos.windows(2).all(|w| w[0] < w[1]);
            if idx.iter().all(|&i| arrived[i]) && in_seq {
                whole.push(m);
            }
            first_pk += np;
        }
        let got = &u.b.host.recv_cq;
        // Each completion: the k-th receive, holding a message sent, whole.
        let mut last = None;
        for (k, (c, _)) in got.iter().enumerate() {
            assert_eq!(c.wr_id, 1000 + k as u64);
            assert_eq!(c.status, WcStatus::Success);
            let m = msgs.iter().enumerate().position(|(i, &(_, len))| {
                len as u32 == c.byte_len
                    && last.is_none_or(|l| i > l)
                    && u.b_bytes(k * 2048, len) == sent_pattern(msgs[i].0, len)
            });
            let m = m.expect("a completion that is no whole message sent");
            assert!(
                whole.contains(&m),
                "message {m} completed without all its packets in order"
            );
            last = Some(m);
        }
        total.0 += got.len();
        total.1 += n;
    }
    // Some but not all messages made it across the runs.
    assert!(total.0 > 0 && total.0 < total.1, "{total:?}");
}

/// A sender cutting larger than the receiver (C7: the kernel sends the link's payload
/// where `path_mtu` is the port's active MTU): dropped as `bad_offset` at the receiver's
/// own MTU, the message then lost whole; taken whole up to its `rx_mtu`.
#[test]
fn a_receiver_takes_packets_up_to_its_rx_mtu() {
    for (rx_mtu, whole) in [
        (0u16, false),
        (MTU + 127, false),
        (MTU + 128, true),
        (4096, true),
    ] {
        let mut u = pair(false);
        u.a.link.mtu = MTU + 128;
        u.b.link.rx_mtu = rx_mtu;
        u.write(WrOpcode::RdmaWrite, 1, 0, 1000, 0, 0);
        let pk = u.packets();
        assert_eq!(pk.len(), 3, "1000 bytes at {}", MTU + 128);
        let r: Vec<_> = pk.iter().map(|p| u.deliver(p)).collect();
        if whole {
            assert_eq!(
                r.last(),
                Some(&Ok(UcRx::Completed)),
                "rx_mtu {rx_mtu}: {r:?}"
            );
            assert_eq!(u.b_bytes(0, 1000), sent_pattern(0, 1000));
        } else {
            assert_eq!(r[0], Err(DropReason::BadOffset), "rx_mtu {rx_mtu}");
            assert!(r.iter().all(|x| *x != Ok(UcRx::Completed)), "{r:?}");
            assert!(u.b_bytes(0, 1000).iter().all(|&x| x == 0));
        }
    }
}
