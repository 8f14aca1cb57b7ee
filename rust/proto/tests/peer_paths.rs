//! Path indices across ends configured differently: a receiver takes data and
//! probes on any path it has room for, and checks ACKs against the paths it sends on.

mod common;
use common::*;
use metaroce_proto::conn::{Config, Connection};
use metaroce_proto::time::Instant;

fn cfg(local: u32, peer: u32) -> Config {
    config(local, peer, 8)
}

/// A sender with 16 paths and a receiver configured with 8 (but room for 64): the
/// receiver takes data on all 16 and acknowledges each on its own path; the
/// receiver's ACK check stays on the paths it sends on.
#[test]
fn a_peer_with_more_paths_is_understood() {
    type Big = Connection<64, 1>;
    let mut a = Big::new(Config {
        paths: 16,
        ..cfg(1, 2)
    });
    let mut b = Big::new(cfg(2, 1));
    let (mut app_a, mut app_b) = (TestApp::default(), TestApp::default());
    app_a.msgs[0].extend([16 * 1024, 16 * 1024]);
    let mut buf = [0u8; 2048];
    let mut paths_seen = 0u64;
    let mut ack_ports = std::collections::BTreeSet::new();
    let mut now = 0u64;
    for _ in 0..1000 {
        now += 10_000;
        while let Some(t) = a.poll_transmit(Instant(now), &mut buf, &mut app_a) {
            paths_seen |= 1 << t.path;
            let r = b.handle_packet(Instant(now), &buf[..t.len], false, &mut app_b);
            assert!(r.is_ok(), "path {}: {r:?}", t.path);
        }
        while let Some(t) = b.poll_transmit(Instant(now), &mut buf, &mut app_b) {
            // Every ACK leaves from a real source port (0 is not one), also for the
            // paths beyond the receiver's own 8.
            ack_ports.insert((t.path, t.src_port));
            let r = a.handle_packet(Instant(now), &buf[..t.len], false, &mut app_a);
            assert!(r.is_ok(), "ack path {}: {r:?}", t.path);
        }
        a.handle_timeout(Instant(now), &mut app_a);
        b.handle_timeout(Instant(now), &mut app_b);
        if app_a.acked[0].len() == 2 {
            break;
        }
    }
    assert_eq!(
        ack_ports
            .iter()
            .map(|&(p, _)| p)
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        16,
        "ACKs on every path"
    );
    for &(p, port) in &ack_ports {
        assert!(port >= 49152, "the ACK of path {p} from source port {port}");
    }
    assert_eq!(app_a.acked[0], vec![0, 1]);
    assert_eq!(app_b.completed[0], vec![0, 1]);
    assert_eq!(paths_seen.count_ones(), 16);
    assert!(app_a.errors.is_empty() && app_b.errors.is_empty());
}
