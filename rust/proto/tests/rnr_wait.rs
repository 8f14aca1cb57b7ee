//! RNR waits (IBTA 9.7.5.2.8) are no path failure: while the responder has no receive
//! posted, every SEND packet is refused and resent after the RNR timer, and each
//! refusal comes back in an ACK on the packet's path. The paths stay alive through the
//! whole wait — no path timeout, however long it lasts — and the messages complete
//! once receives are posted.
//!
//! Two faults made such waits time paths out (stop 24): an ACK reporting only an RNR
//! refusal did not restart the path's RTO (the refusal is an answer, as an
//! acknowledgement is), and a refused packet did not apply its floor, so a path whose
//! packets were all refused kept `cum` where the wait began and, once the sender had
//! resent more than 256 PSNs on it, its ACKs fell behind the sender's floor and were
//! dropped (`ack_out_of_range`): 236 path timeouts in a 2 s wait over 8 paths.
//!
//! A packet *lost* during the wait is still resent promptly: an RNR report names a PSN
//! the receiver got, so unresolved packets below it on the path are lost, as below a
//! SACKed one (the last test; a break-it review found that restarting the RTO on RNR
//! reports alone left such a packet waiting for 174-694 ms).

mod rc_common;
use metaroce_proto::conn::Connection;
use metaroce_proto::rc::{WcOpcode, WrOpcode};
use metaroce_proto::testkit::rc::{Link, Pair};
use rc_common::*;

/// A pair (seeded `seed`) over a link with a one-way delay of `delay_ns`, whose
/// requester sends on `paths` paths with the kernel's RTO settings (floor 4 ms,
/// initial 20 ms, max 500 ms); with the requester's and responder's MR addresses.
fn kernel_pair(delay_ns: u64, paths: u8, seed: u64) -> (Pair, u64, u64) {
    let link = Link {
        delay_ns,
        ..Link::default()
    };
    let (mut p, a, b) = setup(16, false, link, seed);
    let mut c = *p.a.conn.config();
    c.paths = paths;
    c.min_rto_ns = 4_000_000;
    c.init_rto_ns = 20_000_000;
    c.max_rto_ns = 500_000_000;
    p.a.conn = Connection::new(c);
    (p, a, b)
}

/// Four 3000-byte SENDs (3 packets each) into a responder with no receive for
/// `wait_ns`, over `paths` paths with a one-way delay of `delay_ns`, the kernel's
/// RTO settings (floor 4 ms, initial 20 ms, max 500 ms); then four receives. Returns
/// the requester's path timeouts during the wait and the pair.
fn rnr_wait(delay_ns: u64, paths: u8, wait_ns: u64) -> (u16, Pair) {
    let (mut p, a, b) = kernel_pair(delay_ns, paths, 3);
    for i in 0..4u64 {
        let e = wqe(
            WrOpcode::Send,
            i,
            vec![sge(a, 100 * i as usize, 3000, A_MR)],
        );
        assert!(p.a.host.post_send(e));
    }
    assert!(!p.run(wait_ns), "the wait ended by itself");
    let timeouts = p.a.conn.stats().timeouts;
    assert!(
        p.a.conn.stats().retx > 100,
        "no RNR resends: the test shows nothing"
    );
    for i in 0..4u64 {
        assert!(p
            .b
            .host
            .post_recv(100 + i, &[sge(b, 5000 * i as usize, 5000, B_MR)]));
    }
    assert!(p.run(20_000_000_000));
    assert_eq!(p.a.host.send_cq.len(), 4);
    for (i, c) in p.a.host.send_cq.iter().enumerate() {
        send_ok(c, i as u64, WcOpcode::Send, 3000);
    }
    assert_eq!(p.b.host.recv_cq.len(), 4);
    (timeouts, p)
}

/// 8 paths, 100 µs round trip: thousands of refusals per path in 2 s.
#[test]
fn a_wait_over_eight_short_paths_times_no_path_out() {
    let (timeouts, _) = rnr_wait(50_000, 8, 2_000_000_000);
    assert_eq!(timeouts, 0);
}

/// One path with a 4 ms round trip, as long as the RTO floor: the refusals' answers
/// come just in time, and must restart the RTO.
#[test]
fn a_wait_over_one_long_path_times_no_path_out() {
    let (timeouts, _) = rnr_wait(2_000_000, 1, 2_000_000_000);
    assert_eq!(timeouts, 0);
}

/// 20 s of refusals (the pair's 4 paths, 40 µs round trip): about 500,000 PSNs per
/// path, far past the receiver's 2^16 floor window, and still no path timeout.
#[test]
fn a_long_wait_keeps_every_path_alive() {
    let (timeouts, p) = rnr_wait(20_000, 4, 20_000_000_000);
    assert_eq!(timeouts, 0);
    assert!(p.a.conn.stats().retx > 1 << 18, "{:?}", p.a.conn.stats());
}

/// SEND 0 and SEND 1 (one packet each) into a responder with no receive
/// (`min_rnr_timer` = `rnr_code`), over `paths` paths with the kernel's RTO settings.
/// SEND 0's first transmission is lost on the wire; SEND 1 is refused and resent every
/// RNR round. After 20 ms one receive (SEND 0's) is posted: SEND 1 stays refused until
/// SEND 0 is in. Returns how long after the receive SEND 0 completed (ns).
fn lost_during_wait(rnr_code: u8, paths: u8) -> u64 {
    let (mut p, a, b) = kernel_pair(20_000, paths, 9);
    p.b.host.attrs.min_rnr_timer = rnr_code;
    assert!(p
        .a
        .host
        .post_send(wqe(WrOpcode::Send, 0, vec![sge(a, 0, 500, A_MR)])));
    p.doorbell(0);
    let before = p.wire.queue.len();
    p.wire.queue.retain(|w| w.2 != 1);
    assert_eq!(
        before - p.wire.queue.len(),
        1,
        "SEND 0's packet not dropped"
    );
    assert!(p
        .a
        .host
        .post_send(wqe(WrOpcode::Send, 1, vec![sge(a, 0, 500, A_MR)])));
    p.doorbell(0);
    assert!(!p.run(20_000_000));
    assert!(p.b.host.post_recv(100, &[sge(b, 0, 1000, B_MR)]));
    let t0 = p.now;
    for _ in 0..3000 {
        let target = p.now + 1_000_000;
        p.run(1_000_000);
        p.now = p.now.max(target);
        if !p.b.host.recv_cq.is_empty() {
            return p.now - t0;
        }
    }
    u64::MAX
}

/// The lost SEND completes within a few milliseconds of its receive (the pair's
/// 1 ms steps): it was resent as soon as a refusal on its path came back.
#[test]
fn a_packet_lost_during_a_wait_is_resent_at_the_next_refusal() {
    for (code, paths) in [(12u8, 1u8), (14, 1), (12, 4)] {
        let dt = lost_during_wait(code, paths);
        assert!(
            dt <= 5_000_000,
            "rnr code {code}, {paths} path(s): SEND 0 completed {} us after its receive",
            dt / 1000
        );
    }
}
