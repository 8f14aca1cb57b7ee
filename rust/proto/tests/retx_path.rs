//! Where a retransmission goes (Documentation/transport.rst, "Transmission order"): on
//! a path other than the one the packet was lost on, unless no other has room, also
//! while no path has an RTT sample yet (the path that lost it may be failing, and
//! without samples nothing says otherwise).

mod common;

use common::{config, Conn, TestApp};
use metaroce_proto::conn::{Transmit, TxKind};
use metaroce_proto::time::Instant;

/// A 2-path pair at a standstill (every datagram answered at the same instant, so no
/// ACK gives an RTT sample); A sends one 8-packet message and the network loses the
/// first packet of path `lost_path`. Returns the path A resent it on.
fn resend_path(lost_path: u8) -> u8 {
    let mtu = |mut c: metaroce_proto::conn::Config| {
        c.mtu = 256;
        c
    };
    let (ca, cb) = (mtu(config(1, 2, 2)), mtu(config(2, 1, 2)));
    let (mut a, mut b) = (Conn::new(ca), Conn::new(cb));
    let (mut app_a, mut app_b) = (TestApp::keyed(&ca), TestApp::keyed(&cb));
    app_a.msgs[0] = vec![8 * 256];
    let now = Instant(1_000_000);
    let mut buf = [0u8; 2048];
    let mut data: Vec<(Transmit, Vec<u8>)> = Vec::new();
    while let Some(t) = a.poll_transmit(now, &mut buf, &mut app_a) {
        data.push((t, buf[..t.len].to_vec()));
    }
    assert_eq!(data.len(), 8);
    let lost = data
        .iter()
        .position(|(t, _)| t.path == lost_path)
        .expect("a packet on the path");
    for (i, (_, d)) in data.iter().enumerate() {
        if i != lost {
            let _ = b.handle_packet(now, d, false, &mut app_b);
        }
    }
    let mut acks = Vec::new();
    while let Some(t) = b.poll_transmit(now, &mut buf, &mut app_b) {
        acks.push(buf[..t.len].to_vec());
    }
    for d in &acks {
        assert!(a.handle_packet(now, d, false, &mut app_a).is_ok());
    }
    let t = a
        .poll_transmit(now, &mut buf, &mut app_a)
        .expect("the lost packet, resent");
    assert!(matches!(
        t.kind,
        TxKind::Data {
            retransmit: true,
            ..
        }
    ));
    t.path
}

#[test]
fn a_loss_is_resent_on_another_path_before_any_rtt_sample() {
    for lost in 0..2u8 {
        assert_ne!(resend_path(lost), lost, "lost on path {lost}");
    }
}
