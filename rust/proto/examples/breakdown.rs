//! Quick per-packet loop without criterion: `ACK_EVERY=1|2|4 cargo run --release -p
//! metaroce-proto --example breakdown` (run under `perf record` to profile).
use metaroce_proto::conn::{Config, Connection};
use metaroce_proto::testkit::BulkApp;
use metaroce_proto::time::Instant;
use std::time::Instant as W;

fn main() {
    type C = Connection<8, 1>;
    let every: u8 = std::env::var("ACK_EVERY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let cfg = |l, p| Config {
        local_conn: l,
        peer_conn: p,
        ack_every: every,
        ..Config::default()
    };
    let (mut a, mut b) = (C::new(cfg(1, 2)), C::new(cfg(2, 1)));
    // One endless stream of 1 MiB WRITEs each way, payload not copied.
    let (mut aa, mut ba) = (BulkApp::write(1 << 20, 1), BulkApp::write(1 << 20, 1));
    let mut buf = vec![0u8; 4200];
    let mut ab = vec![0u8; 128];
    let n = 2_000_000u64;
    let mut now = 1000u64;
    let (mut datas, mut acks, mut reqs) = (0u64, 0u64, 0u64);
    let w = W::now();
    for _ in 0..n {
        now += 400;
        let t = Instant(now);
        if let Some(tx) = a.poll_transmit(t, &mut buf, &mut aa) {
            datas += 1;
            reqs += u64::from(buf[19] & 0x20 != 0);
            let _ = b.handle_packet(t, &buf[..tx.len], false, &mut ba);
        }
        if let Some(ack) = b.poll_transmit(t, &mut ab, &mut ba) {
            acks += 1;
            let _ = a.handle_packet(t, &ab[..ack.len], false, &mut aa);
        }
    }
    println!(
        "ack_every {every}: {:.1} ns per iteration; {datas} data, {acks} acks, {reqs} with ACKREQ",
        w.elapsed().as_nanos() as f64 / n as f64
    );
}
