//! Connection identity between verbs peers (Documentation/transport.rst, "Identity and
//! threat model"): both ends derive the same keys from what the applications exchanged,
//! including a peer that never reaches RTS.

mod common;

use common::{config, Conn, Net};
use metaroce_proto::conn::Config;
use metaroce_proto::ident::Ident;
use metaroce_proto::wire::DropReason;

const GID_A: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1];
const GID_B: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2];
const QPN_A: u32 = 0x12_3456;
const QPN_B: u32 = 0x65_4321;
/// The starting PSNs each application drew and sent its peer.
const PSN_A: u32 = 0xab_cdef;
const PSN_B: u32 = 0x13_5791;

/// The kernel's keys for QP `me` at RTR (`rts`: and at RTS), as
/// `rust/verbs/qp/control.rs` derives them: at RTR everything from `rq_psn` (the
/// sending key too: a responder that stays in RTR knows no `sq_psn`), at RTS the
/// sending key from `sq_psn` and the alternative receiving key.
fn keys(me: (u32, [u8; 16], u32), peer: (u32, [u8; 16], u32), rts: bool) -> Config {
    let ((qpn, gid, sq_psn), (pqpn, pgid, rq_psn)) = (me, peer);
    let mut c = Config {
        tx_ident: Ident::derive(&gid, &pgid, qpn, pqpn, rq_psn),
        rx_ident: Ident::derive(&pgid, &gid, pqpn, qpn, rq_psn),
        ..config(qpn, pqpn, 8)
    };
    if rts {
        c.tx_ident = Ident::derive(&gid, &pgid, qpn, pqpn, sq_psn);
        c.rx_alt = Ident::derive(&pgid, &gid, pqpn, qpn, sq_psn);
    }
    c
}

fn pair(a_rts: bool, b_rts: bool) -> Net {
    let mut n = Net::new(3, 8, 0.01);
    let a = (QPN_A, GID_A, PSN_A);
    let b = (QPN_B, GID_B, PSN_B);
    n.connect(keys(a, b, a_rts), keys(b, a, b_rts));
    n
}

fn both_ways(n: &mut Net) -> bool {
    for s in 0..2 {
        n.app_a.msgs[s] = vec![5000, 1, 30_000];
        n.app_b.msgs[s] = vec![7000, 0, 20_000];
    }
    let done = |n: &Net| {
        (0..4).all(|s| {
            n.app_a.acked[s].len() == n.app_a.msgs[s].len()
                && n.app_b.acked[s].len() == n.app_b.msgs[s].len()
        })
    };
    for _ in 0..200 {
        n.run(n.now + 10_000_000);
        if done(n) {
            return n.app_a.errors.is_empty() && n.app_b.errors.is_empty();
        }
    }
    false
}

#[test]
fn both_at_rts() {
    let mut n = pair(true, true);
    assert!(both_ways(&mut n));
}

/// B stays in RTR (perftest's server in ib_read_bw): it answers with the key of A's
/// `sq_psn`, which A accepts as its alternative and then keeps.
#[test]
fn a_responder_in_rtr_is_understood() {
    let mut n = pair(true, false);
    assert!(both_ways(&mut n), "a {:?} b {:?}", n.a.stats(), n.b.stats());
}

/// Without the alternative key A drops everything B sends as forged.
#[test]
fn without_the_alternative_the_rtr_responder_is_a_stranger() {
    let mut n = pair(true, false);
    let mut c = *n.a.config();
    c.rx_alt = Ident::DEFAULT;
    n.a = Conn::new(c);
    assert!(!both_ways(&mut n));
    assert!(n.dropped > 0);
}

/// The alternative key is only good until a packet was accepted under the main one.
#[test]
fn the_alternative_closes_after_the_first_packet() {
    let mut n = pair(true, true);
    assert!(both_ways(&mut n));
    let alt = n.a.config().rx_alt;
    let mut buf = [0u8; 128];
    let h = metaroce_proto::wire::ProbeHeader {
        path: 0,
        inc: n.a.peer_incarnation(),
        dst_conn: QPN_A,
        psn: alt.isn(0),
        stamp: 1,
        token: alt.token(),
        floor: alt.isn(0),
    };
    let len = h.encode(&mut buf).unwrap();
    let now = metaroce_proto::time::Instant(n.now);
    assert_eq!(
        n.a.handle_packet(now, &buf[..len], false, &mut n.app_a),
        Err(DropReason::BadToken)
    );
}

/// A packet under the main key that the receiver then refuses (RNR) still passed every
/// check: it settles the key as an accepted one does (Documentation/transport.rst,
/// "Derivation": "this holds even if the verbs layer then refuses that packet"), so the
/// alternative closes. Before, only an accepted packet (or one under the alternative)
/// settled: a PROBE under the alternative then still passed, restarted the receive
/// sequences from that key and made every later packet of the real peer a forgery.
#[test]
fn the_alternative_closes_after_a_refused_packet() {
    let mut n = pair(true, true);
    n.app_b.rnr_left = u32::MAX;
    n.app_a.msgs[0] = vec![100];
    n.run(n.now + 1_000_000);
    assert!(
        n.b.stats().data_tx == 0 && n.app_b.completed[0].is_empty(),
        "B refused everything"
    );
    assert!(n.dropped > 0, "B refused the SEND");
    let alt = keys((QPN_B, GID_B, PSN_B), (QPN_A, GID_A, PSN_A), true).rx_alt;
    assert_eq!(
        n.b.config().rx_alt,
        Ident::DEFAULT,
        "the alternative is closed"
    );
    let mut buf = [0u8; 128];
    let h = metaroce_proto::wire::ProbeHeader {
        path: 0,
        inc: n.b.peer_incarnation(),
        dst_conn: QPN_B,
        psn: alt.isn(0),
        stamp: 1,
        token: alt.token(),
        floor: alt.isn(0),
    };
    let len = h.encode(&mut buf).unwrap();
    let now = metaroce_proto::time::Instant(n.now);
    assert_eq!(
        n.b.handle_packet(now, &buf[..len], false, &mut n.app_b),
        Err(DropReason::BadToken)
    );
    // The real peer is still understood: once B takes it, the SEND completes.
    n.app_b.rnr_left = 0;
    assert!(n.run(n.now + 1_000_000_000));
    assert_eq!(n.app_b.completed[0], vec![0]);
    assert!(n.app_a.errors.is_empty() && n.app_b.errors.is_empty());
}
