//! Per-packet cost: build a data packet, process it at the receiver, build its ACK and
//! process the ACK at the sender. `payload()` is a no-op in the "core" case (copying the
//! bytes is the verbs layer's job); the "copy" case adds a 4 KiB memcpy into the datagram.
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use metaroce_proto::conn::{Config, Connection};
use metaroce_proto::testkit::BulkApp;
use metaroce_proto::time::Instant;

/// One endless stream of 1 MiB WRITEs; `src` is copied into every packet (empty: no copy).
fn app(src: &[u8]) -> BulkApp<'_> {
    BulkApp {
        src,
        ..BulkApp::write(1 << 20, 1).with_reth(0x1000, 1)
    }
}

type C = Connection<8, 1>;

fn pair(ack_every: u8) -> (C, C) {
    let cfg = |l, p| Config {
        local_conn: l,
        peer_conn: p,
        paths: 8,
        mtu: 4096,
        ack_every,
        ..Config::default()
    };
    (C::new(cfg(1, 2)), C::new(cfg(2, 1)))
}

fn one_packet(
    a: &mut C,
    b: &mut C,
    aa: &mut BulkApp<'_>,
    ba: &mut BulkApp<'_>,
    now: &mut u64,
    buf: &mut [u8],
) {
    *now += 400;
    let t = Instant(*now);
    if let Some(tx) = a.poll_transmit(t, buf, aa) {
        let _ = b.handle_packet(t, &buf[..tx.len], false, ba);
    }
    // With ack_every = 1 there is an ACK for every packet; with 2, for every other one
    // (the delayed-ACK timer is far away at this packet rate).
    if let Some(ack) = b.poll_transmit(t, buf, ba) {
        let _ = a.handle_packet(t, &buf[..ack.len], false, aa);
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("per_packet");
    g.throughput(Throughput::Elements(1));
    for (copy, ack_every) in [(false, 1u8), (false, 2), (true, 2)] {
        let (mut a, mut b) = pair(ack_every);
        let src = vec![7u8; 4096];
        let mut aa = app(if copy { &src } else { &[] });
        let mut ba = app(&[]);
        let mut buf = vec![0u8; 4200];
        let mut now = 1_000u64;
        let name = match (copy, ack_every) {
            (false, 1) => "core only, one ACK per packet (default)",
            (false, _) => "core only, ACK every 2nd packet (ack_every = 2)",
            _ => "4 KiB payload copied, ACK every 2nd packet",
        };
        g.bench_function(name, |bch| {
            bch.iter(|| {
                one_packet(
                    &mut a,
                    &mut b,
                    &mut aa,
                    &mut ba,
                    &mut now,
                    black_box(&mut buf),
                )
            })
        });
        assert!(ba.placed > 0);
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
