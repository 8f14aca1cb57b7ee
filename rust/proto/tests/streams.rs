//! Streams held by the application, closed and failed one at a time (transport.rst,
//! "Streams and their failures"): a hand-driven pair of connections over any stream
//! ids (`streams_common`), the cases a break-it trial found.
mod streams_common;
use metaroce_proto::conn::{App, ConnError, ConnState, Refuse, TxKind};
use metaroce_proto::ident::Ident;
use metaroce_proto::stream::Stream;
use metaroce_proto::wire::DropReason;
use streams_common::*;

const D: Ident = Ident::DEFAULT;

fn pair(paths: u8, streams: &[u16]) -> (Node, Node) {
    let mut a = Node::new(1, 2, paths);
    let mut b = Node::new(2, 1, paths);
    for s in streams {
        a.app.add_stream(*s, D, D);
        b.app.add_stream(*s, D, D);
    }
    a.app.group = Some(2);
    b.app.group = Some(2);
    (a, b)
}

/// A stream id closed and started again (a new QP in a destroyed QP's slot, both ends)
/// while a packet of the old stream is still in the network. Started over under the new
/// owner's keys, the stream's SSNs begin elsewhere: the stale packet falls outside its
/// window and is dropped, and the new message is placed. (Under the old keys the stale
/// packet was taken as the new message and the new one acknowledged unplaced.)
#[test]
fn a_stream_restarted_under_new_keys_drops_the_old_owners_packets() {
    let (mut a, mut b) = pair(1, &[0, 2]);
    let now = 1_000_000u64;
    a.app.post(2, 500, 0xAA); // old QP's message
    let old = a.drain(now);
    assert_eq!(old.len(), 1);
    // Old QP destroyed on both ends; a new QP takes its streams (same ids, same keys).
    a.c.close_streams(2, 2, &mut a.app);
    b.c.close_streams(2, 2, &mut b.app);
    let new = Ident(0x5eed_0001_0000_0002);
    for n in [&mut a, &mut b] {
        n.app.streams.insert(2, Stream::start(new, new, 2));
        n.app.msgs.insert(2, Vec::new());
    }
    a.app.post(2, 500, 0xBB); // the new QP's first message
                              // The old packet was delayed in the network and arrives first.
    let r = b.recv(now + 5_000, &old[0].1);
    println!(
        "stale packet at the receiver: {r:?}; placed {:?}",
        b.app.placed
    );
    let mut t = now + 5_000;
    run(&mut a, &mut b, &mut t, now + 100_000_000, 5_000, |_, _| {
        false
    });
    println!(
        "receiver placed {:?} completed {:?}; sender acked {:?}",
        b.app.placed, b.app.completed, a.app.acked
    );
    assert_eq!(r, Err(DropReason::SsnOutOfWindow), "stale packet taken");
    assert_eq!(b.app.placed, vec![(2, 0, 0, 0xBB)]);
    assert_eq!(a.app.acked, vec![(2, 0)]);
}

/// An ACK carrying a NAK that names one stream's message also acknowledges (cum, SACK)
/// other streams' packets: with stream scope the connection takes those too (before,
/// the NAK ended the ACK's processing, and the other stream's packet waited 2 ms for a
/// tail-loss probe).
#[test]
fn a_nak_for_one_stream_still_acknowledges_the_others() {
    for bad in [false, true] {
        let (mut a, mut b) = pair(1, &[0, 2]);
        let now = 1_000_000u64;
        a.app.post(0, 100, 1);
        a.app.post(2, 100, 2);
        if bad {
            b.app.refuse.insert((2, 0), Refuse::Access);
        }
        let d = a.drain(now);
        assert_eq!(d.len(), 2);
        // The receiver takes both before it transmits (a NAPI batch).
        for (_, x) in &d {
            let _ = b.recv(now + 5_000, x);
        }
        let acks = b.drain(now + 5_000);
        for (_, x) in &acks {
            let _ = a.recv(now + 10_000, x);
        }
        let after_ack = (a.app.acked.clone(), a.c.inflight());
        let mut t = now + 10_000;
        run(&mut a, &mut b, &mut t, now + 100_000_000, 5_000, |_, _| {
            false
        });
        println!(
            "bad={bad}: {} ACK(s); after it: acked {:?} inflight {}; finally acked {:?} at t+{} ns, retx {}, state {:?}",
            acks.len(),
            after_ack.0,
            after_ack.1,
            a.app.acked,
            t - now,
            a.c.stats().retx,
            a.c.state()
        );
        assert!(
            after_ack.0.contains(&(0, 0)),
            "bad={bad}: stream 0's packet, acknowledged by the NAK's cum, still in flight ({} B)",
            after_ack.1
        );
    }
}

/// One stream's RNR timer is long (code 20: 10.24 ms), another's short (code 1: 10 us,
/// refused once). Each stream waits out its own (before, one connection timer extended
/// to the latest: the short one waited 10.2 ms).
#[test]
fn a_long_rnr_timer_on_one_stream_does_not_delay_another() {
    let mut res = Vec::new();
    for with_long in [false, true] {
        let (mut a, mut b) = pair(1, &[0, 2]);
        let now = 1_000_000u64;
        let mut t = now;
        if with_long {
            b.app.rnr.insert(0);
            b.app.rnr_code.insert(0, 20);
            b.app.rnr_left.insert(0, 1);
            a.app.post(0, 100, 1);
            for (_, x) in a.drain(t) {
                let _ = b.recv(t + 5_000, &x);
            }
            for (_, x) in b.drain(t + 5_000) {
                let _ = a.recv(t + 10_000, &x);
            }
            t += 10_000;
        }
        b.app.rnr.insert(2);
        b.app.rnr_code.insert(2, 1);
        b.app.rnr_left.insert(2, 1);
        a.app.post(2, 100, 2);
        let t0 = t;
        run(&mut a, &mut b, &mut t, now + 100_000_000, 5_000, |_, _| {
            false
        });
        let done = b
            .app
            .completed
            .iter()
            .position(|c| *c == (2, 0))
            .map(|i| b.app.completed_at[i] - t0);
        println!(
            "long RNR timer on stream 0: {with_long}; stream 2 (RNR timer 10 us) completed {:?} ns after it was posted",
            done
        );
        res.push(done.unwrap_or(u64::MAX));
    }
    assert!(
        res[1] <= res[0] + 10_000,
        "stream 2 waited {} ns for stream 0's RNR timer (alone: {} ns)",
        res[1],
        res[0]
    );
}

/// Several starved streams (RNR timer 1.28 ms, 8 one-packet messages each): each refused
/// packet is resent about once per RNR period, not in a storm.
#[test]
fn starved_streams_resend_once_per_rnr_period() {
    for starved in [1u16, 2, 4] {
        let streams: Vec<u16> = (0..8).collect();
        let (mut a, mut b) = pair(1, &streams);
        for s in 0..starved {
            b.app.rnr.insert(s * 2);
            b.app.rnr_code.insert(s * 2, 14); // 1.28 ms
            for _ in 0..8 {
                a.app.post(s * 2, 1000, 1);
            }
        }
        let now = 1_000_000u64;
        let mut t = now;
        run(&mut a, &mut b, &mut t, now + 50_000_000, 5_000, |_, _| {
            false
        });
        println!(
            "{starved} starved stream(s): {} data packets ({} resent) in 50 ms, rnr_held {:?}",
            a.c.stats().data_tx,
            a.c.stats().retx,
            (0..starved)
                .map(|s| a.app.streams[&(s * 2)].tx.rnr_held)
                .collect::<Vec<_>>()
        );
        // 50 ms / 1.28 ms = 39 periods, 8 packets per stream, and a period's slack.
        let bound = u32::from(starved) * 8 * 41;
        assert!(
            a.c.stats().data_tx <= bound,
            "{} packets",
            a.c.stats().data_tx
        );
        assert_eq!(a.c.state(), ConnState::Open);
    }
}

/// RNR retries spent on one stream under stream scope: that stream fails and closes,
/// the other finishes, the connection stays open, nothing leaks, and the closed
/// stream's packets are not sent again.
#[test]
fn rnr_retry_exceeded_under_stream_scope() {
    let (mut a, mut b) = pair(2, &[0, 1, 2, 3]);
    a.c.set_retry_limits(7, 2, 0);
    b.app.rnr.insert(2);
    for m in 0..20 {
        a.app.post(0, 3000, 1);
        a.app.post(2, 3000, 2);
        let _ = m;
    }
    let now = 1_000_000u64;
    let mut t = now;
    let mut after_close = 0;
    let errs = std::rc::Rc::new(std::cell::Cell::new(false));
    let e2 = errs.clone();
    run(
        &mut a,
        &mut b,
        &mut t,
        now + 2_000_000_000,
        5_000,
        |from, tx| {
            if from == 0 {
                if let TxKind::Data { stream: 2, .. } = tx.kind {
                    if e2.get() {
                        after_close += 1;
                    }
                }
            }
            false
        },
    );
    let _ = errs;
    println!(
        "stream errors {:?}; conn {:?}; acked on 0: {}; inflight {}; rnr_held(0) {} rnr_held(2) {}; poll_timeout {:?}",
        a.app.stream_errors,
        a.c.state(),
        a.app.acked.iter().filter(|x| x.0 == 0).count(),
        a.c.inflight(),
        a.app.streams[&0].tx.rnr_held,
        a.app.streams[&2].tx.rnr_held,
        a.c.poll_timeout()
    );
    assert_eq!(a.c.state(), ConnState::Open);
    assert_eq!(a.app.stream_errors, vec![(2, ConnError::RnrRetryExceeded)]);
    assert_eq!(a.app.acked.iter().filter(|x| x.0 == 0).count(), 20);
    assert_eq!(a.c.inflight(), 0);
}

/// An application whose ready_stream insists on a stream that may not send (held by
/// RNR): the connection sends nothing new on it and the call ends (a few tries, then
/// nothing), sending only what it may (a retransmission).
#[test]
fn a_ready_stream_that_insists_on_a_held_stream_sends_nothing_new_on_it() {
    let (mut a, mut b) = pair(1, &[0, 2]);
    b.app.rnr.insert(0);
    b.app.rnr_code.insert(0, 20);
    a.app.post(0, 100, 1);
    a.app.post(0, 100, 1);
    a.app.post(2, 100, 2);
    let now = 1_000_000u64;
    let d = a.drain(now);
    for (_, x) in &d {
        let _ = b.recv(now + 5_000, x);
    }
    for (_, x) in b.drain(now + 5_000) {
        let _ = a.recv(now + 10_000, &x);
    }
    println!(
        "sent {} packets; stream 0 rnr_held {}",
        d.len(),
        a.app.streams[&0].tx.rnr_held
    );
    // Now the app insists on stream 0.
    a.app.stubborn = Some(0);
    a.app.post(2, 100, 3);
    let more = a.drain(now + 20_000);
    println!(
        "with a stubborn ready_stream: {:?}",
        more.iter().map(|m| m.0.kind).collect::<Vec<_>>()
    );
    let new_on_0 = more.iter().any(|m| {
        matches!(
            m.0.kind,
            TxKind::Data {
                stream: 0,
                retransmit: false,
                ..
            }
        )
    });
    assert!(!new_on_0, "new data on a stream held by RNR");
}

/// close_streams(65535, 2) stops below 65535: it closes nothing, and never wraps to
/// stream 0 (before: stream 0's packet in flight was forgotten).
#[test]
fn close_streams_never_wraps_past_65535() {
    let (mut a, _b) = pair(1, &[0, 2]);
    a.app.post(0, 100, 1);
    let d = a.drain(1_000_000);
    assert_eq!(d.len(), 1);
    let before = a.c.inflight();
    a.c.close_streams(65535, 2, &mut a.app);
    println!(
        "inflight before {before}, after close_streams(65535, 2): {}",
        a.c.inflight()
    );
    assert_eq!(a.c.inflight(), before);
    assert!(!a.app.streams[&0].tx.closed);
}

/// Stream 65535 names no stream: nothing is sent on it even when the application lends
/// it, and DATA for it is dropped (before: it was carried, and a refusal of its message
/// became a NAK naming no message, failing the peer's whole connection).
#[test]
fn stream_65535_is_never_carried() {
    let (mut a, mut b) = pair(1, &[0, 65535]);
    b.app.refuse.insert((65535, 0), Refuse::Access);
    a.app.post(0, 100, 1);
    a.app.post(65535, 100, 2);
    let now = 1_000_000u64;
    let mut t = now;
    run(&mut a, &mut b, &mut t, now + 100_000_000, 5_000, |_, _| {
        false
    });
    println!(
        "a: stream errors {:?}, errors {:?}, state {:?}",
        a.app.stream_errors,
        a.app.errors,
        a.c.state()
    );
    assert_eq!(a.c.state(), ConnState::Open);
    assert!(a.app.errors.is_empty() && a.app.stream_errors.is_empty());
    assert_eq!(b.app.completed, vec![(0, 0)]);
    assert!(b.app.placed.iter().all(|p| p.0 != 65535));
}

/// The same NAK twice (the link duplicated it): the stream fails and closes once, and
/// App::refused is called once (before: twice).
#[test]
fn a_duplicated_nak_fails_the_stream_once() {
    let (mut a, mut b) = pair(1, &[0, 2]);
    b.app.refuse.insert((2, 0), Refuse::Access);
    a.app.post(2, 3000, 2); // three packets
    let now = 1_000_000u64;
    let d = a.drain(now);
    for (_, x) in &d {
        let _ = b.recv(now + 5_000, x);
    }
    let acks = b.drain(now + 5_000);
    for (_, x) in acks.iter().chain(acks.iter()) {
        let r = a.recv(now + 10_000, x);
        println!("ACK -> {r:?}");
    }
    println!(
        "refused {:?}; stream_errors {:?}; conn {:?}",
        a.app.refused,
        a.app.stream_errors,
        a.c.state()
    );
    assert_eq!(a.app.stream_errors.len(), 1, "stream failed more than once");
}

/// A stream refused with RNR code 0 (655 ms) is closed and started over under new keys:
/// its new message goes at once, and no RNR timer stays armed for the forgotten packets
/// (before, the connection stayed busy until the 655 ms timer expired for nothing).
#[test]
fn a_stream_closed_in_an_rnr_wait_leaves_no_timer_armed() {
    let (mut a, mut b) = pair(1, &[0, 2]);
    b.app.rnr.insert(2);
    b.app.rnr_code.insert(2, 0);
    a.app.post(2, 100, 1);
    a.app.post(2, 100, 1);
    let now = 1_000_000u64;
    for (_, x) in a.drain(now) {
        let _ = b.recv(now + 5_000, &x);
    }
    for (_, x) in b.drain(now + 5_000) {
        let _ = a.recv(now + 10_000, &x);
    }
    println!(
        "after RNR: rnr_held {} rnr_until-now {} poll_timeout {:?}",
        a.app.streams[&2].tx.rnr_held,
        a.app.streams[&2].tx.rnr_until.saturating_sub(now),
        a.c.poll_timeout()
    );
    a.c.close_streams(2, 2, &mut a.app);
    b.c.close_streams(2, 2, &mut b.app);
    b.app.rnr.clear();
    let new = Ident(0x5eed_0001_0000_0002);
    for n in [&mut a, &mut b] {
        n.app.streams.insert(2, Stream::start(new, new, 2));
        n.app.msgs.insert(2, Vec::new());
    }
    a.app.post(2, 100, 2);
    let t0 = now + 20_000;
    let mut t = t0;
    run(
        &mut a,
        &mut b,
        &mut t,
        now + 5_000_000_000,
        5_000,
        |_, _| false,
    );
    let done = b.app.completed_at.last().map(|x| x - t0);
    println!(
        "new owner's message completed {:?} ns after posting; quiet at t0+{} ns; inflight {}; poll_timeout {:?}; state {:?}",
        done,
        t - t0,
        a.c.inflight(),
        a.c.poll_timeout(),
        a.c.state()
    );
    assert!(done.is_some_and(|d| d < 1_000_000));
    assert!(a.c.poll_timeout().is_none());
    assert!(t - t0 < 1_000_000, "quiet only {} ns after posting", t - t0);
}

/// A late original far behind its stream's window (its resend was taken long ago and
/// the stream moved 300 SSNs on; the fabric's congested spine held such packets for
/// tens of ms) is counted as a duplicate and changes nothing but what its arrival says:
/// not placed again, its CE mark echoed in an ACK at once, and no stale RTT sample (its
/// timestamp is not echoed). (Until stop 60 anything more than 128 SSNs back was dropped
/// as `ssn_out_of_window` before its CE mark counted: the fabric ECN check once saw 72
/// CE marks received and none echoed.) The same SSN with a PSN not behind its path's
/// cumulative PSN is no late original (a forger's, at best): dropped as before; and
/// 2^16 + 1 back it is out of reach.
#[test]
fn a_late_original_far_behind_the_stream_window_is_a_duplicate_and_its_ce_echoed() {
    let (mut a, mut b) = pair(1, &[0]);
    let mut now = 1_000_000u64;
    a.app.post(0, 500, 0x11);
    let first = a.drain(now);
    assert_eq!(first.len(), 1);
    let late = first[0].1.clone();
    assert!(b.recv(now + 5_000, &late).is_ok());
    for i in 0..300u32 {
        a.app.post(0, 100, i as u8);
    }
    let mut t = now + 5_000;
    run(
        &mut a,
        &mut b,
        &mut t,
        now + 1_000_000_000,
        5_000,
        |_, _| false,
    );
    now = t;
    assert_eq!(a.app.acked.len(), 301, "every message acknowledged");
    let placed = b.app.placed.len();
    let (dup0, echoed0) = (b.c.stats().dup_rx, b.c.stats().ce_echoed);
    b.app.now = now;
    let r =
        b.c.handle_packet(metaroce_proto::time::Instant(now), &late, true, &mut b.app);
    assert_eq!(r, Ok(metaroce_proto::conn::RxEvent::Duplicate));
    assert_eq!(b.c.stats().dup_rx, dup0 + 1);
    assert_eq!(b.app.placed.len(), placed, "placed again");
    let acks = b.drain(now);
    assert!(!acks.is_empty(), "no ACK for the late CE-marked packet");
    assert_eq!(b.c.stats().ce_echoed, echoed0 + 1, "its CE mark not echoed");
    let srtt = a.c.path(0).map(|t| t.srtt).unwrap_or(0);
    for (_, ack) in &acks {
        assert!(a.recv(now + 5_000, ack).is_ok());
    }
    let after = a.c.path(0).map(|t| t.srtt).unwrap_or(0);
    assert!(
        after <= srtt * 2,
        "a stale RTT sample: srtt {srtt} -> {after} ns"
    );
    // The same SSN on the path's next PSN (not behind its cumulative PSN).
    let (mut h, payload) = metaroce_proto::wire::decode_data_packet(&late).expect("DATA");
    let ssn = h.ssn;
    h.psn = a.c.path(0).map(|t| t.next_psn).expect("path 0");
    let mut buf = [0u8; 2048];
    let n = h.encode(&mut buf).expect("encoded");
    buf[n..n + payload.len()].copy_from_slice(payload);
    let r = b.recv(now + 10_000, &buf[..n + payload.len()]);
    assert_eq!(r, Err(DropReason::SsnOutOfWindow));
    // The bounds: more than 128 and at most 2^16 SSNs back.
    use metaroce_proto::stream::{RxVerdict, STREAM_LATE, STREAM_WINDOW};
    let mut rx = b.app.stream(0).map(|s| s.rx).expect("stream 0");
    for (back, late, verdict) in [
        (STREAM_WINDOW, false, RxVerdict::Duplicate),
        (STREAM_WINDOW + 1, true, RxVerdict::OutOfWindow),
        (STREAM_LATE, true, RxVerdict::OutOfWindow),
        (STREAM_LATE + 1, false, RxVerdict::OutOfWindow),
    ] {
        rx.cum = ssn.wrapping_add(back);
        assert_eq!(
            (rx.late(ssn), rx.check(ssn)),
            (late, verdict),
            "{back} back"
        );
    }
}
