//! Property tests of the invariants in the transport issue.
mod common;
use common::*;
use metaroce_proto::sack::Sack;
use metaroce_proto::wire::{
    decode, AckHeader, DataHeader, DropReason, Packet, ProbeHeader, Reth, DF_FIRST, DF_IMM,
    DF_LAST, DF_RETH,
};
use proptest::prelude::*;
use std::collections::BTreeSet;

fn check_delivery(n: &Net) -> Result<(), TestCaseError> {
    prop_assert!(
        n.app_b.violations.is_empty(),
        "receiver: {:?}",
        n.app_b.violations
    );
    prop_assert!(
        n.app_a.violations.is_empty(),
        "sender: {:?}",
        n.app_a.violations
    );
    prop_assert!(n.app_a.errors.is_empty(), "errors: {:?}", n.app_a.errors);
    for s in 0..4u16 {
        let msgs = &n.app_a.msgs[s as usize];
        // Completions in order, every message exactly once.
        prop_assert_eq!(
            &n.app_b.completed[s as usize],
            &(0..msgs.len() as u32).collect::<Vec<_>>()
        );
        prop_assert_eq!(
            &n.app_a.acked[s as usize],
            &(0..msgs.len() as u32).collect::<Vec<_>>()
        );
        for (m, len) in msgs.iter().enumerate() {
            // Every byte placed exactly once (duplicates never placed twice).
            let placed = n
                .app_b
                .placed_count
                .get(&(s, m as u32))
                .copied()
                .unwrap_or(0);
            prop_assert_eq!(placed, *len, "stream {} msg {}", s, m);
        }
    }
    // Windows never negative / nothing left in flight.
    prop_assert_eq!(n.a.inflight(), 0);
    prop_assert!(n.min_pwnd_seen >= n.a.config().cc.min_pwnd);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn sack_roundtrip(w in any::<[u64; 4]>()) {
        let s = Sack::from_words(w);
        let mut b = [0u8; 32];
        s.encode(&mut b);
        prop_assert_eq!(Sack::decode(&b), s);
        for i in 0..256u32 {
            prop_assert_eq!(s.get(i), (w[(i / 64) as usize] >> (i % 64)) & 1 == 1);
            prop_assert_eq!(b[(i / 8) as usize] >> (i % 8) & 1 == 1, s.get(i));
        }
    }

    #[test]
    fn sack_shift_matches_model(w in any::<[u64; 4]>(), n in 0u32..300) {
        let mut s = Sack::from_words(w);
        let orig = s;
        s.shift_down(n);
        for i in 0..256u32 {
            prop_assert_eq!(s.get(i), orig.get(i + n));
        }
    }

    #[test]
    fn data_header_roundtrip(
        path in 0u8..64, conn in 0u32..=0xff_ffff, inc in 1u16.., psn: u32, stamp: u32, token: u32, stream: u16, op in 0u8..11,
        floor_back in 0u32..256, ssn: u32, msn: u32, msg_len in 0u32..100_000, off_pick: u32,
        va: u64, rkey: u32, imm: u32, plen_pick: u16,
    ) {
        let opv = metaroce_proto::wire::Op::from_u8(op).unwrap();
        let offset = if msg_len == 0 { 0 } else { off_pick % msg_len };
        let rem = msg_len - offset;
        let plen = if rem == 0 { 0 } else { 1 + u32::from(plen_pick) % rem.min(4096) } as u16;
        let last = offset + u32::from(plen) == msg_len;
        let mut flags = 0;
        if offset == 0 { flags |= DF_FIRST; }
        if last { flags |= DF_LAST; }
        if opv.needs_reth() { flags |= DF_RETH; }
        if opv.has_imm() && last { flags |= DF_IMM; }
        let h = DataHeader {
            path, inc, dst_conn: conn, psn, stamp, token, stream, op, flags, payload_len: plen, tag: psn as u16,
            floor: psn.wrapping_sub(floor_back), ssn, msn, offset, msg_len,
            reth: if flags & DF_RETH != 0 { Reth { va, rkey, len: msg_len } } else { Reth::default() },
            imm: if flags & DF_IMM != 0 { imm } else { 0 },
        };
        let mut buf = vec![0u8; 200 + plen as usize];
        let hl = h.encode(&mut buf).unwrap();
        for (i, b) in buf[hl..hl + plen as usize].iter_mut().enumerate() { *b = i as u8; }
        let pkt = &buf[..hl + plen as usize];
        match decode(pkt) {
            Ok(Packet::Data(d, p)) => { prop_assert_eq!(d, h); prop_assert_eq!(p.len(), plen as usize); }
            other => prop_assert!(false, "decode failed: {:?}", other),
        }
        // Every strict prefix is rejected, never a panic.
        for cut in 0..pkt.len() {
            prop_assert!(decode(&pkt[..cut]).is_err());
        }
    }

    #[test]
    fn ack_and_probe_roundtrip(path in 0u8..64, conn in 0u32..=0xff_ffff, inc in 1u16.., echo: u32, cum: u32, hint: u32, ce: u16,
                               acked: u16, flags in 0u8..16, t: u8, rp: u32, w in any::<[u64; 4]>(), floor: u32,
                               token: u32, ns: u16, nm: u32) {
        let a = AckHeader { path, inc, dst_conn: conn, echo, token, cum, rate_hint: hint, ce, acked,
            flags, rnr_timer: t, rnr_psn: rp, nak_stream: ns, nak_msn: nm, sack: Sack::from_words(w) };
        let mut buf = [0u8; 128];
        let n = a.encode(&mut buf).unwrap();
        // AF_INV (0x04) and AF_MSG (0x08) qualify a NAK (0x02) and mean nothing alone;
        // the refused message's stream and MSN are zero unless AF_MSG names them.
        let named = flags & 0x08 != 0;
        if flags & 0x0c != 0 && flags & 0x02 == 0 || !named && (ns, nm) != (0, 0) {
            prop_assert_eq!(decode(&buf[..n]), Err(DropReason::BadFlags));
        } else {
            prop_assert_eq!(decode(&buf[..n]), Ok(Packet::Ack(a)));
        }
        let p = ProbeHeader { path, inc, dst_conn: conn, psn: cum, stamp: echo, token, floor };
        let n = p.encode(&mut buf).unwrap();
        prop_assert_eq!(decode(&buf[..n]), Ok(Packet::Probe(p)));
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = decode(&bytes);
        let mut c = Conn::new(config(1, 2, 8));
        let mut app = TestApp::default();
        let _ = c.handle_packet(metaroce_proto::time::Instant(5), &bytes, true, &mut app);
    }

    /// End to end over a lossy, duplicating, reordering, CE-marking network: every byte is
    /// delivered exactly once, completions are in order per stream and never early.
    #[test]
    fn exactly_once_in_order(seed: u64, paths in 1u8..=8, loss in 0.0f64..0.15, dup in 0.0f64..0.05,
                             ce in 0.0f64..0.3, sizes in proptest::collection::vec(0u32..20_000, 1..25)) {
        let mut n = Net::new(seed, paths, loss);
        n.dup = dup;
        n.ce_prob = ce;
        for s in 0..4 {
            n.app_a.msgs[s] = sizes.iter().map(|x| x.wrapping_mul(s as u32 + 1) % 20_000).collect();
        }
        prop_assert!(n.run(60_000_000_000), "transfer did not finish");
        check_delivery(&n)?;
    }

    /// With only data lost (ACKs intact) and no timeout, exactly the lost packets are resent.
    #[test]
    fn only_lost_packets_are_retransmitted(seed: u64, paths in 2u8..=8, loss in 0.0f64..0.08,
                                           sizes in proptest::collection::vec(1u32..30_000, 1..20)) {
        let mut n = Net::new(seed, paths, loss);
        n.lose_acks = false;
        for s in 0..4 {
            n.app_a.msgs[s] = sizes.clone();
        }
        prop_assert!(n.run(60_000_000_000));
        check_delivery(&n)?;
        if n.a.stats().timeouts == 0 {
            let lost: BTreeSet<_> = n.lost_data.iter().copied().collect();
            for (_, _, s, m, o) in &n.retx {
                prop_assert!(lost.contains(&(*s, *m, *o)), "spurious retransmit of {:?}", (s, m, o));
            }
            prop_assert_eq!(n.retx.len(), n.lost_data.len());
        }
    }
}

#[test]
fn rnr_is_retried_and_completes() {
    let mut n = Net::new(3, 4, 0.0);
    n.app_b.rnr_left = 5;
    for s in 0..4 {
        n.app_a.msgs[s] = vec![5000; 10];
    }
    assert!(n.run(10_000_000_000));
    assert!(n.app_b.violations.is_empty(), "{:?}", n.app_b.violations);
    assert!(n.app_a.errors.is_empty());
    assert_eq!(n.app_b.completed[0].len(), 10);
}

#[test]
fn blackholed_path_moves_and_transfer_completes() {
    let mut n = Net::new(9, 8, 0.0);
    let port = n.a.path(3).unwrap().src_port;
    n.blackhole = Some((3, port));
    for s in 0..4 {
        n.app_a.msgs[s] = vec![64 * 1024; 20];
    }
    assert!(n.run(60_000_000_000));
    assert!(n.app_b.violations.is_empty(), "{:?}", n.app_b.violations);
    assert!(n.app_a.errors.is_empty(), "{:?}", n.app_a.errors);
    let st = n.a.stats();
    assert!(st.timeouts > 0 && st.moves > 0, "{st:?}");
    assert_ne!(n.a.path(3).unwrap().src_port, port);
    for s in 0..4 {
        assert_eq!(n.app_b.completed[s].len(), 20);
    }
}

#[test]
fn dead_peer_ends_in_retry_exceeded() {
    let mut n = Net::new(4, 2, 1.0);
    n.app_a.msgs[0] = vec![10_000];
    n.run(60_000_000_000);
    assert_eq!(
        n.app_a.errors,
        vec![metaroce_proto::conn::ConnError::RetryExceeded]
    );
}
