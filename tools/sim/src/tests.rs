//! Tests of the fabric and the engine that need more than one module.

use crate::endpoint::{BaseKind as XKind, BasePkt as XPkt, Endpoint};
use crate::fabric::Fabric;
use crate::net::{flow_key, BaseKind, BasePkt, Body, Pkt, DATA};
use crate::queue::{Ev, Queue};
use crate::sim::{Params, Sim, Transport};
use crate::switch::{Ecn, SwitchConfig};
use crate::topo::FatTree;

const WIRE: u32 = 4096 + 32 + 66;

fn data(src: u32, dst: u32, sport: u16, psn: u32) -> (Pkt, Body) {
    let p = Pkt {
        src,
        dst,
        sport,
        class: DATA,
        ect: true,
        ce: false,
        wire: WIRE,
        key: flow_key(src, dst, sport),
        in_link: 0,
    };
    let kind = BaseKind::Data {
        psn,
        len: 4096,
        ts: 0,
    };
    (p, Body::Toy(BasePkt { conn: 0, kind }))
}

/// Runs the fabric alone; returns (time, host, psn) of every delivered packet.
fn drive(f: &mut Fabric, q: &mut Queue, until: u64) -> Vec<(u64, u32, u32)> {
    let mut out = Vec::new();
    while let Some(t) = q.peek_time() {
        if t > until {
            break;
        }
        let (t, ev) = q.pop().expect("peeked");
        match ev {
            Ev::LinkDone(l) => {
                f.on_link_done(t, q, l as usize);
            }
            Ev::Arrive(pid) => {
                if let Some(h) = f.on_arrive(t, q, pid) {
                    if let Body::Toy(BasePkt {
                        kind: BaseKind::Data { psn, .. },
                        ..
                    }) = f.pool.body(pid)
                    {
                        out.push((t, h, *psn));
                    }
                    f.pool.free(pid);
                }
            }
            Ev::Pause(l, on) => {
                f.on_pause(t, q, l as usize, on);
            }
            Ev::Reconverge(p) => f.reconverge(t, p),
            _ => {}
        }
    }
    out
}

#[test]
fn ecmp_spreads_flows_over_uplinks() {
    for ft in [
        FatTree::two_tier(4, 32, 4),
        FatTree::three_tier(4, 4, 4, 1, 1),
    ] {
        let f = Fabric::new(ft, SwitchConfig::shared(Ecn::step(100_000)), 1);
        let ups = usize::from(ft.tor_uplinks);
        let mut count = vec![0u32; f.topo.links.len()];
        let n = 4000;
        let dst = ft.hosts() - 1;
        for sport in 0..n {
            let l = f.route(0, dst, flow_key(0, dst, sport as u16)).unwrap();
            count[l] += 1;
        }
        let used: Vec<u32> = count.into_iter().filter(|c| *c > 0).collect();
        assert_eq!(used.len(), ups, "every uplink used");
        let mean = n as f64 / ups as f64;
        for c in used {
            assert!((f64::from(c) - mean).abs() < 0.2 * mean, "{c} vs {mean}");
        }
    }
}

/// Hosts 0 and 1 each send 150 packets at once to host 2, all under one ToR with a
/// small buffer: the ToR → host 2 port is overloaded 2:1.
fn two_to_one(cfg: SwitchConfig) -> (Fabric, usize) {
    let mut f = Fabric::new(FatTree::leaf_spine(1, 1, 3, 1), cfg, 1);
    let mut q = Queue::default();
    for psn in 0..150 {
        for src in 0..2 {
            let (p, b) = data(src, 2, 1000 + src as u16, psn);
            f.inject(0, &mut q, p, b);
        }
    }
    let got = drive(&mut f, &mut q, 1_000_000_000).len();
    (f, got)
}

fn small(cfg: SwitchConfig) -> SwitchConfig {
    // 4 ports × 100 Gb/s: a 200 KB buffer; no ECN.
    SwitchConfig {
        buffer_per_tbps: 500_000,
        ecn: Ecn::step(u64::MAX / 2),
        ..cfg
    }
}

#[test]
fn pfc_two_to_one_lossless_pauses_and_drops_nothing() {
    let (f, got) = two_to_one(small(SwitchConfig::lossless(Ecn::step(0), u64::from(WIRE))));
    let drops: u64 = f.ports.iter().map(|p| p.stats.drops()).sum();
    let xoff: u64 = f.ports.iter().map(|p| p.stats.xoff_frames).sum();
    let xon: u64 = f.ports.iter().map(|p| p.stats.xon_frames).sum();
    assert_eq!(drops, 0);
    assert_eq!(got, 300);
    assert!(xoff > 0 && xon == xoff, "xoff {xoff} xon {xon}");
    // The senders' NIC ports were paused.
    for h in 0..2 {
        assert!(f.ports[f.host_up(0, h)].stats.paused_ns > 0);
    }
    // Headroom absorbed what was in flight; the shared pool stayed within its size.
    assert!(f.bufs[0].peak <= f.bufs[0].size);
}

#[test]
fn same_overload_on_a_lossy_fabric_drops() {
    let (f, got) = two_to_one(small(SwitchConfig::shared(Ecn::step(0))));
    let drops: u64 = f.ports.iter().map(|p| p.stats.drop_buffer).sum();
    let xoff: u64 = f.ports.iter().map(|p| p.stats.xoff_frames).sum();
    assert!(drops > 0 && xoff == 0);
    assert_eq!(got as u64 + drops, 300);
    // One congested queue holds at most alpha/(1 + alpha) of the buffer (+ a packet).
    let port = &f.ports[f.host_down(0, 2)];
    let cap = f.bufs[0].size as f64 * f.cfg.alpha / (1.0 + f.cfg.alpha);
    assert!(
        port.stats.peak_q as f64 <= cap + f64::from(WIRE),
        "{}",
        port.stats.peak_q
    );
    assert!(
        port.stats.peak_q as f64 >= cap - f64::from(WIRE),
        "{}",
        port.stats.peak_q
    );
}

#[test]
fn reordering_knob_changes_arrival_order() {
    for (p, reordered) in [(0.0, false), (0.3, true)] {
        let mut f = Fabric::new(
            FatTree::leaf_spine(1, 1, 2, 1),
            SwitchConfig::legacy(1 << 30, 1 << 30),
            1,
        );
        let l = f.host_up(0, 0);
        f.ports[l].reorder_p = p;
        f.ports[l].reorder_ns = 2_000;
        let mut q = Queue::default();
        for psn in 0..100 {
            let (pk, b) = data(0, 1, 7, psn);
            f.inject(0, &mut q, pk, b);
        }
        let got = drive(&mut f, &mut q, 1_000_000_000);
        assert_eq!(got.len(), 100);
        let inversions = got.windows(2).filter(|w| w[1].2 < w[0].2).count();
        assert_eq!(inversions > 0, reordered, "{inversions}");
    }
}

#[test]
fn gray_loss_drops_without_routing_reacting() {
    let mut f = Fabric::new(
        FatTree::leaf_spine(1, 1, 2, 1),
        SwitchConfig::legacy(1 << 30, 1 << 30),
        1,
    );
    f.reconverge_ns = Some(1000);
    let l = f.host_down(0, 1);
    f.ports[l].loss = 0.2;
    let mut q = Queue::default();
    for psn in 0..1000 {
        let (pk, b) = data(0, 1, 7, psn);
        f.inject(0, &mut q, pk, b);
    }
    let got = drive(&mut f, &mut q, 1_000_000_000).len() as u64;
    let lost = f.ports[l].stats.drop_gray;
    assert!(lost > 120 && lost < 280, "{lost}");
    assert_eq!(got + lost, 1000);
    assert!(f.ports[l].up && f.ports[l].stats.drop_failure == 0);
}

pub(crate) fn meta_params() -> Params {
    Params {
        transport: Transport::Meta,
        paths: 8,
        streams: 4,
        msg_len: 64 * 1024,
        min_rto_ns: 200_000,
        init_rto_ns: 200_000,
        max_rto_ns: metaroce_proto::conn::Config::DEFAULT.max_rto_ns,
        pacing_slack_us: 0,
        ack_timeout_ns: 0,
        ack_every: metaroce_proto::conn::Config::DEFAULT.ack_every,
        ack_delay_ns: metaroce_proto::conn::Config::DEFAULT.ack_delay_ns,
        ack_bundle: metaroce_proto::conn::Config::DEFAULT.ack_bundle,
        ack_ride: metaroce_proto::conn::Config::DEFAULT.ack_ride,
        train: metaroce_proto::conn::Config::DEFAULT.train,
        base_window: 128 * 1024,
        sample_ns: 0,
        seed: 1,
    }
}

/// 8 MetaRoCE flows leaf 0 → leaf 1 over 4 spines; leaf 0's uplink to spine 0 fails at
/// 100 µs. Returns the dead link's failure drops at 100 µs + 60 µs and at the end.
fn failover(reconverge: Option<u64>) -> (u64, u64) {
    let ft = FatTree::leaf_spine(1, 2, 8, 4);
    let mut s: Sim<8, 1, 64> =
        Sim::new(ft, SwitchConfig::shared(Ecn::step(100_000)), meta_params());
    s.fabric.reconverge_ns = reconverge;
    for i in 0..8 {
        s.add_flow(i, 8 + i, u32::MAX);
    }
    let dead = s.fabric.up(0, 0, 0);
    s.fail_at(100_000, vec![dead]);
    s.run(160_000);
    let mid = s.fabric.ports[dead].stats.drop_failure;
    s.run(1_000_000);
    (mid, s.fabric.ports[dead].stats.drop_failure)
}

#[test]
fn after_reconvergence_nothing_is_sent_to_a_dead_link() {
    let (mid, end) = failover(Some(50_000));
    assert!(
        mid > 0,
        "packets hashed to the dead link before reconvergence are lost"
    );
    assert_eq!(
        mid, end,
        "after reconvergence no packet goes to the dead link"
    );
    // Without reconvergence the link black-holes for ever (MetaRoCE keeps probing it).
    let (mid, end) = failover(None);
    assert!(end > mid, "{mid} {end}");
}

/// A minimal [`Endpoint`]: the sender blasts `n` packets, the receiver counts them.
struct Blast {
    peer: u32,
    left: u32,
    got: u32,
    n: u32,
}

impl Endpoint for Blast {
    fn on_packet(&mut self, _: u64, p: &XPkt, _: bool) {
        if let XKind::Data { .. } = p.kind {
            self.got += 1;
        }
    }
    fn poll_transmit(&mut self, now: u64) -> Option<XPkt> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        Some(XPkt {
            conn: self.peer,
            kind: XKind::Data {
                psn: self.n - self.left - 1,
                len: 4096,
                ts: now,
                msg: 0,
                last: self.left == 0,
            },
            sport: 4000,
            wire: WIRE,
            ect: true,
            lossless: true,
        })
    }
    fn next_timer(&self) -> Option<u64> {
        None
    }
    fn on_timer(&mut self, _: u64) {}
    fn delivered(&self) -> u64 {
        u64::from(self.got) * 4096
    }
    fn completed_msgs(&self) -> u64 {
        u64::from(self.got == self.n)
    }
    fn errors(&self) -> u32 {
        0
    }
}

#[test]
fn engine_hosts_endpoint_trait_objects_and_times_flows() {
    let ft = FatTree::leaf_spine(2, 2, 2, 2);
    let mut s: Sim<8, 1, 64> = Sim::new(
        ft,
        SwitchConfig::lossless(Ecn::dcqcn(), u64::from(WIRE)),
        meta_params(),
    );
    let f = s.add_flow_dyn(0, 3, 5_000, Some(1), |a, b| {
        let mk = |peer, left| {
            Box::new(Blast {
                peer,
                left,
                got: 0,
                n: 100,
            }) as Box<dyn Endpoint>
        };
        (mk(b, 100), mk(a, 0))
    });
    s.run(1_000_000);
    assert_eq!(s.delivered(f), 100 * 4096);
    let fl = s.flow_info[f];
    let fct = fl.finish.expect("finished") - fl.start;
    // 100 packets at 100 Gb/s on one plane (sport 4000 is even) plus 3 hops.
    let ser = 100.0 * f64::from(WIRE) * 8.0 / 100.0;
    assert!(fct as f64 > ser && (fct as f64) < ser + 10_000.0, "{fct}");
    let plane1: u64 = s
        .fabric
        .topo
        .plane_links(1)
        .iter()
        .map(|&l| s.fabric.ports[l].stats.tx_pkts)
        .sum();
    assert_eq!(plane1, 0);
}

#[test]
fn a_restored_link_carries_traffic_again() {
    let ft = FatTree::leaf_spine(1, 2, 8, 4);
    let mut s: Sim<8, 1, 64> =
        Sim::new(ft, SwitchConfig::shared(Ecn::step(100_000)), meta_params());
    s.fabric.reconverge_ns = Some(20_000);
    for i in 0..8 {
        s.add_flow(i, 8 + i, u32::MAX);
    }
    let l = s.fabric.up(0, 0, 1);
    s.fail_at(50_000, vec![l]);
    s.restore_at(300_000, vec![l]);
    s.run(290_000);
    let before = s.fabric.ports[l].stats.tx_pkts;
    s.run(600_000);
    assert!(s.fabric.ports[l].up);
    assert!(s.fabric.ports[l].stats.tx_pkts > before + 100);
}

/// Baseline packets go to the switch class by kind: data in the data class (lossless
/// under PFC), ACK/NAK/CNP in the strict-priority control class, whatever fabric the QP
/// runs on. (The engine used the QP's `lossless` flag: lossy QPs' data rode the
/// control queue ahead of ACKs, and PFC QPs' CNPs and ACKs queued behind paused data.)
#[test]
fn baseline_packets_are_classed_by_kind() {
    use crate::endpoint::{BaseKind, BasePkt};
    use crate::net::{CTRL, DATA};
    let pkt = |kind, lossless| BasePkt {
        conn: 0,
        kind,
        sport: 49152,
        wire: 100,
        ect: true,
        lossless,
    };
    let data = BaseKind::Data {
        psn: 0,
        len: 4096,
        ts: 0,
        msg: 0,
        last: false,
    };
    let ack = BaseKind::Ack {
        epsn: 1,
        ce: false,
        echo: 0,
    };
    for lossless in [false, true] {
        assert_eq!(crate::sim::ext_class(&pkt(data, lossless)), DATA);
        assert_eq!(crate::sim::ext_class(&pkt(ack, lossless)), CTRL);
        assert_eq!(crate::sim::ext_class(&pkt(BaseKind::Cnp, lossless)), CTRL);
        let nak = BaseKind::Nak {
            epsn: 0,
            got: 2,
            echo: 0,
        };
        assert_eq!(crate::sim::ext_class(&pkt(nak, lossless)), CTRL);
    }
}

/// The kernel-configuration column runs the module's delayed ACK: the defaults of its
/// `ack_every`, `ack_delay_us` and `ack_bundle` parameters in include/metaroce.h.
#[test]
fn kernel_column_acks_as_the_module() {
    let h = include_str!("../../../include/metaroce.h");
    let define = |name: &str| -> u32 {
        h.lines()
            .find_map(|l| {
                l.strip_prefix("#define ")?
                    .strip_prefix(name)?
                    .trim()
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| panic!("{name} not in include/metaroce.h"))
    };
    assert_eq!(
        u32::from(crate::scenarios::KERNEL_ACK_EVERY),
        define("METAROCE_DEFAULT_ACK_EVERY")
    );
    assert_eq!(
        crate::scenarios::KERNEL_ACK_DELAY_NS,
        define("METAROCE_DEFAULT_ACK_DELAY_US") * 1000
    );
    assert_eq!(
        u32::from(crate::scenarios::KERNEL_ACK_BUNDLE),
        define("METAROCE_DEFAULT_ACK_BUNDLE")
    );
    let p = crate::scenarios::params(true, 8, 1, 0);
    assert_eq!(
        (p.ack_every, p.ack_delay_ns, p.ack_bundle),
        (2, 100_000, 16)
    );
    // The `ack_ride` parameter is on by default (rust/ffi/helpers.c).
    assert!(include_str!("../../../rust/ffi/helpers.c").contains("static bool ack_ride = true;"));
    assert_eq!(p.ack_ride, u16::MAX);
    assert_eq!(
        u32::from(crate::scenarios::KERNEL_TRAIN),
        define("METAROCE_DEFAULT_TRAIN")
    );
    assert_eq!(p.train, crate::scenarios::KERNEL_TRAIN);
}
