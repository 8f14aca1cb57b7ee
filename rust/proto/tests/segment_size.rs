//! Segment size against receive limit (Documentation/transport.rst, C7): a sender
//! cuts messages at its `Config::mtu`; a receiver takes DATA up to its `rx_mtu`
//! (0: its `mtu`) and drops more as `bad_offset` without touching its state. The
//! kernel sends the link's full payload (1368 bytes on a 1500-byte link) where the
//! QP's `path_mtu` is the port's active MTU (1024), and takes it whatever its own
//! `path_mtu`, so ends whose QPs agree on `path_mtu` 1024 but cut differently still
//! carry every byte.

mod common;

use common::{config, Conn, Net, TestApp};
use metaroce_proto::conn::{Config, TxKind};
use metaroce_proto::time::Instant;
use metaroce_proto::wire::DropReason;

/// The link's payload on a 1500-byte link (1500 - 128, down to a multiple of 8).
const LINK: u16 = 1368;

fn cut(mut c: Config, mtu: u16, rx_mtu: u16) -> Config {
    c.mtu = mtu;
    c.rx_mtu = rx_mtu;
    c
}

/// One message of `len` bytes from a connection cutting at `mtu` : the DATA
/// datagrams and their payload lengths.
fn datagrams(mtu: u16, len: u32) -> Vec<(Vec<u8>, u16)> {
    let ca = cut(config(1, 2, 2), mtu, 0);
    let mut a = Conn::new(ca);
    let mut app = TestApp::keyed(&ca);
    app.msgs[0] = vec![len];
    let mut buf = [0u8; 2048];
    let mut out = Vec::new();
    while let Some(t) = a.poll_transmit(Instant(1_000_000), &mut buf, &mut app) {
        if let TxKind::Data { len, .. } = t.kind {
            out.push((buf[..t.len].to_vec(), len));
        }
    }
    out
}

#[test]
fn a_sender_cuts_at_its_mtu() {
    // The first flight: as many as the start-up window (4160 bytes) lets go.
    let lens = |mtu| {
        datagrams(mtu, 8000)
            .iter()
            .map(|x| x.1)
            .collect::<Vec<u16>>()
    };
    assert_eq!(lens(LINK), [LINK; 3]);
    assert_eq!(lens(1024), [1024; 4]);
    // The last packet carries the rest.
    let d = datagrams(LINK, u32::from(LINK) + 5);
    assert_eq!(d.iter().map(|x| x.1).collect::<Vec<_>>(), [LINK, 5]);
}

/// The receiver's limit is `mtu` unless `rx_mtu` is larger: one byte over is dropped as
/// `bad_offset`, leaves nothing placed, and the same packet is taken once the limit
/// allows it.
#[test]
fn a_receiver_takes_up_to_its_limit() {
    let d = datagrams(LINK, 8000);
    let first = &d[0].0;
    for (mtu, rx_mtu, takes) in [
        (1024u16, 0u16, false),
        (1024, 512, false),
        (1024, LINK - 1, false),
        (1024, LINK, true),
        (LINK, 0, true),
        (512, 4096, true),
    ] {
        let cb = cut(config(2, 1, 2), mtu, rx_mtu);
        let mut b = Conn::new(cb);
        let mut app = TestApp::keyed(&cb);
        let r = b.handle_packet(Instant(1_000_000), first, false, &mut app);
        if takes {
            assert!(r.is_ok(), "mtu {mtu} rx_mtu {rx_mtu}: {r:?}");
            assert_eq!(app.placed_count.values().sum::<u32>(), u32::from(LINK));
        } else {
            assert_eq!(r, Err(DropReason::BadOffset), "mtu {mtu} rx_mtu {rx_mtu}");
            assert!(app.placed.is_empty() && app.placed_count.is_empty());
            let mut buf = [0u8; 2048];
            assert!(
                b.poll_transmit(Instant(1_000_000), &mut buf, &mut app)
                    .is_none(),
                "mtu {mtu} rx_mtu {rx_mtu}: a dropped packet is acknowledged"
            );
        }
    }
}

/// Two ends that cut differently (A at the link's payload, B at 1024) and take up to the
/// link's payload carry 4 streams of 16 x 64 KiB each way, every byte checked; with B
/// taking only its own 1024, A's data never arrives.
#[test]
fn ends_cutting_differently_carry_every_byte() {
    for seed in 1..=4 {
        let mut n = Net::new(seed, 4, 0.02);
        let (ca, cb) = (
            cut(config(1, 2, 4), LINK, LINK),
            cut(config(2, 1, 4), 1024, LINK),
        );
        n.connect(ca, cb);
        n.bulk();
        for s in 0..2 {
            n.app_b.msgs[s] = vec![20_000; 8];
        }
        for _ in 0..1000 {
            n.run(n.now + 10_000_000);
        }
        assert!(n.app_a.violations.is_empty(), "{:?}", n.app_a.violations);
        assert!(n.done());
        let acked: Vec<usize> = (0..2).map(|s| n.app_b.acked[s].len()).collect();
        assert_eq!(acked, [8; 2], "seed {seed}: B's acknowledged");
    }
    let mut n = Net::new(1, 4, 0.0);
    n.connect(cut(config(1, 2, 4), LINK, 0), cut(config(2, 1, 4), 1024, 0));
    n.app_a.msgs[0] = vec![8000];
    n.run(2_000_000_000);
    assert!(!n.done(), "a receiver at 1024 took packets of {LINK}");
    assert!(n.app_b.placed_count.is_empty());
}
