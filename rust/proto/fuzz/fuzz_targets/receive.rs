//! The receive path of a live connection: a sequence of datagrams (length-prefixed in the
//! input) is fed to a connection that has data in flight; every one must be accepted or
//! dropped with a counted reason, and the connection's invariants must hold afterwards.
#![no_main]
use libfuzzer_sys::fuzz_target;
use metaroce_proto::conn::{Config, Connection};
use metaroce_proto::testkit::BulkApp;
use metaroce_proto::time::Instant;
use metaroce_proto::wire::DropCounters;

/// Four 3000-byte WRITEs on each of two streams; the first packet of message 3 is
/// refused with RNR.
fn app() -> BulkApp<'static> {
    BulkApp {
        limit: 4,
        rnr_msn: Some(3),
        ..BulkApp::write(3000, 2)
    }
}

fuzz_target!(|data: &[u8]| {
    let cfg = Config {
        local_conn: 7,
        peer_conn: 9,
        paths: 4,
        mtu: 1024,
        ..Config::default()
    };
    let mut c: Connection<4, 1> = Connection::new(cfg);
    let mut app = app();
    let mut buf = [0u8; 1200];
    let mut now = 1_000u64;
    while c.poll_transmit(Instant(now), &mut buf, &mut app).is_some() {}
    let mut drops = DropCounters::default();
    let mut rest = data;
    while rest.len() >= 2 {
        let n = usize::from(u16::from_le_bytes([rest[0], rest[1]])) % 1200;
        rest = &rest[2..];
        let n = n.min(rest.len());
        let (pkt, tail) = rest.split_at(n);
        rest = tail;
        now += 1_000;
        if let Err(r) = c.handle_packet(Instant(now), pkt, n % 3 == 0, &mut app) {
            drops.count(r);
        }
        while c.poll_transmit(Instant(now), &mut buf, &mut app).is_some() {}
        if let Some(t) = c.poll_timeout() {
            if t.0 <= now + 5_000_000 {
                c.handle_timeout(t, &mut app);
            }
        }
    }
    assert!(c.inflight() <= 1 << 30);
});
