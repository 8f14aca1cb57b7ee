//! Scenario 7: connection state. 16,000 MetaRoCE connections from one node (8 paths,
//! the dense configuration: 32 in-flight packets), one message each, to 16 hosts of
//! another leaf; the per-connection state (`size_of` the protocol crate's
//! `DenseConnection` / `DefaultConnection`) and whether every message completes. The
//! baseline column gives the simulator's RoCEv2 QP model's struct sizes (sender +
//! receiver, heap-held message queues not counted), for scale only: a real RC QP's
//! NIC context is not modelled.

use super::*;
use crate::sim::Ep;
use std::time::Instant as WallClock;

fn many(sc: Scale) -> (f64, u64, u64, u32) {
    let v = Variant::Meta;
    let t = leaf_spine(1, 2, 16, 8);
    let n = 16_000u32;
    let mut p = v.params(8, sc.seed, 0);
    p.msg_len = if sc.quick { 4096 } else { 16 * 1024 };
    p.streams = 1;
    let wall = WallClock::now();
    let mut s: Sim<8, 1, 32> = Sim::new(t, v.switch(), p);
    for i in 0..n {
        s.add_flow(0, 16 + i % 16, 1);
    }
    s.run(sc.t(50_000_000, 200_000_000));
    let done = s
        .flows
        .iter()
        .filter(|(_, b)| match &s.slots[*b as usize].ep {
            Ep::Meta(_, app) => app.completed_msgs == 1,
            _ => false,
        })
        .count() as u64;
    (
        wall.elapsed().as_secs_f64(),
        done,
        s.events,
        total_errors(&s),
    )
}

/// Lossless single-flow goodput (bytes/s) of the dense configuration.
fn dense_single_flow(sc: Scale) -> f64 {
    let v = Variant::Meta;
    let dur = sc.t(3_000_000, 20_000_000);
    let mut s: Sim<8, 1, 32> = Sim::new(
        leaf_spine(1, 2, 1, 8),
        v.switch(),
        v.params(8, sc.seed, 50_000),
    );
    s.add_flow(0, 1, u32::MAX);
    s.run(dur);
    delivered_between(&s, dur / 5, dur)[0] / ((dur - dur / 5) as f64 * 1e-9)
}

pub fn run(sc: Scale) -> Section {
    // A connection's transport state: the connection and the streams it carries, which
    // the application holds (`App::stream`): here the one stream each connection uses
    // (and, for comparison with the connections that held 4 streams inline, 4).
    let per_stream = std::mem::size_of::<metaroce_proto::stream::Stream>();
    let dense_conn = std::mem::size_of::<metaroce_proto::DenseConnection>();
    let meta_bytes = dense_conn + per_stream;
    let four = dense_conn + 4 * per_stream;
    let default_bytes = std::mem::size_of::<metaroce_proto::DefaultConnection>() + per_stream;
    let roce = std::mem::size_of::<crate::roce::RoceSender>()
        + std::mem::size_of::<crate::roce::RoceReceiver>();
    let dense = dense_single_flow(sc);
    let (w, done, ev, err) = many(sc);
    let mut sec = Section {
        num: 7,
        title: "Connection state: 16,000 connections on one node".into(),
        setup: "2 leaves × 16 hosts, 8 spines; host 0 opens 16,000 connections (8 paths, \
                dense configuration) with one message each, round-robin to the 16 hosts of \
                the other leaf; one seed (deterministic)."
            .into(),
        cols: vec![
            "MetaRoCE (sim config)".into(),
            "RoCEv2 QP model (sim structs, for scale)".into(),
        ],
        rows: Vec::new(),
    };
    sec.rows.push(Row {
        scenario: "16 000 connections, 8 paths, dense config".into(),
        metric: "state bytes/conn; completion; sim wall time".into(),
        cells: vec![
            format!(
                "{meta_bytes} B with its 1 stream ({dense_conn} B + {per_stream} B per \
                 stream; 4 streams {four} B; default config {default_bytes} B); \
                 {done}/16000 done, \
                 {err} errors, {ev} events, {w:.1} s; dense single flow {:.1} Gb/s",
                dense * 8e-9
            ),
            format!("{roce} B (sender + receiver structs)"),
        ],
        target: "≤ 2048 B, all done".into(),
        met: Some(meta_bytes <= 2048 && done == 16_000 && err == 0),
        guard: Some(meta_bytes <= 2048 && default_bytes <= 2600 && done == 16_000 && err == 0),
    });
    sec
}
