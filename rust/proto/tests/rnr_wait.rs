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

mod rc_common;
use metaroce_proto::conn::Connection;
use metaroce_proto::rc::{WcOpcode, WrOpcode};
use metaroce_proto::testkit::rc::{Link, Pair};
use rc_common::*;

/// Four 3000-byte SENDs (3 packets each) into a responder with no receive for
/// `wait_ns`, over `paths` paths with a one-way delay of `delay_ns`, the kernel's
/// RTO settings (floor 4 ms, initial 20 ms, max 500 ms); then four receives. Returns
/// the requester's path timeouts during the wait and the pair.
fn rnr_wait(delay_ns: u64, paths: u8, wait_ns: u64) -> (u16, Pair) {
    let link = Link {
        delay_ns,
        ..Link::default()
    };
    let (mut p, a, b) = setup(16, false, link, 3);
    let mut c = *p.a.conn.config();
    c.paths = paths;
    c.min_rto_ns = 4_000_000;
    c.init_rto_ns = 20_000_000;
    c.max_rto_ns = 500_000_000;
    p.a.conn = Connection::new(c);
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
