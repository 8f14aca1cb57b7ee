//! A READ whose response stops coming after its request was acknowledged (the
//! responder's QP moved to the error state or destroyed, or every datagram from the
//! peer lost): the requester's local ACK timer covers a READ or atomic until its response
//! is whole (IBTA 9.7.6.1.3; [`metaroce_proto::conn::App::awaiting`]), so the READ fails
//! with *retry exceeded* after `retry_cnt + 1` timeouts. Until stop 60 the timer ran only
//! while packets were unacknowledged, and such a READ never completed at all. And the
//! other side of the rule: a response that keeps coming, however slowly, is progress,
//! so even `retry_cnt` 0 never fails it (Documentation/transport.rst, "Retries are each
//! stream's").
mod rc_common;
use metaroce_proto::conn::ConnState;
use metaroce_proto::rc::{self, WcStatus, WrOpcode};
use metaroce_proto::testkit::rc::Pair;
use metaroce_proto::testkit::shared::SharedPair;
use metaroce_proto::wire::{decode, Packet};
use rc_common::{
    answers, clean, codes, fetch_add, rdma, read, setup, sge, shared_pair, shared_va as va,
    statuses, wqe, A_MR, B_MR, B_READ, MR_LEN,
};

/// The model's local ACK timeout for `timeout` 8: 4.096 µs × 2^8 (IBTA 9.7.6.1.3),
/// run 4 times as long ([`rc::ACK_TIMEOUT_SCALE`]), about 4.2 ms.
const T8: u64 = 4096 << 8 << 2;

/// A clean link of 100 µs one way: a one-packet window then moves 128 KiB of READ
/// response in about 26 ms, six of those timeouts.
fn slow() -> metaroce_proto::testkit::rc::Link {
    metaroce_proto::testkit::rc::Link {
        delay_ns: 100_000,
        ..clean()
    }
}

/// Runs `p` in 5 µs steps until node 0's send CQ holds a completion, at most `limit_ns`;
/// the time it took.
fn until_completion(p: &mut Pair, limit_ns: u64) -> Option<u64> {
    let start = p.now;
    while p.now - start < limit_ns {
        // `run` leaves the clock at the last event; nothing is due before `next`.
        let next = p.now + 5_000;
        p.run(5_000);
        p.now = p.now.max(next);
        if !p.a.host.send_cq.is_empty() {
            return Some(p.now - start);
        }
    }
    None
}

/// Node 0 of a connection per QP posts a 100,000-byte READ (`retry_cnt` 2, `timeout` 8)
/// on a 20 µs one-way link; `t` ns later, the response under way, `stop` ends it. The
/// READ must fail with *retry exceeded* three local ACK timeouts after the last response
/// packet arrived (within a link delay or two of the stop), three retries counted.
fn read_stopped(seed: u64, t: u64, stop: fn(&mut Pair)) {
    let (mut p, a, b) = setup(8, false, clean(), seed);
    p.a.set_retry(8, 2, 7);
    let e = rdma(
        wqe(WrOpcode::RdmaRead, 1, vec![sge(a, 0, 100_000, A_MR)]),
        b + B_READ as u64,
        B_MR,
    );
    assert!(p.a.host.post_send(e));
    p.doorbell(0);
    p.run(t);
    assert!(p.a.host.send_cq.is_empty(), "t {t}: completed before");
    stop(&mut p);
    let after = until_completion(&mut p, 50 * T8);
    assert_eq!(
        statuses(&p.a.host.send_cq),
        vec![(1, WcStatus::RetryExcErr)],
        "t {t}: after {after:?} ns"
    );
    let after = after.unwrap_or(0);
    assert!(
        (3 * T8 - 50_000..=3 * T8 + 50_000).contains(&after),
        "t {t}: failed {after} ns after the response stopped"
    );
    assert_eq!(p.a.conn.stats().ack_timeouts, 3, "t {t}");
}

/// A connection per QP: node 1's QP enters the error state while its READ response is
/// under way (20 to 160 µs after the READ was posted), and it sends nothing more.
#[test]
fn per_qp_read_fails_when_its_response_stops() {
    for t in [20_000u64, 40_000, 80_000, 160_000] {
        read_stopped(31, t, |p| p.b.modify_to_error());
    }
}

/// The same with the peer gone from the network (every datagram from node 1 lost, its
/// QP still working): the READ fails the same way, after its acknowledged request.
#[test]
fn per_qp_read_fails_when_the_peer_falls_silent() {
    read_stopped(5, 60_000, |p| p.wire.link.b_gone = true);
}

/// The other side of the rule: a READ response that keeps coming, one packet per round
/// trip (node 1 sends on one path with a one-packet window over a 100 µs link, so
/// 128 KiB take about six local ACK timeouts), is progress however long it lasts:
/// `retry_cnt` 0 does not fail it, every byte lands, and no timeout is counted.
#[test]
fn per_qp_slow_read_response_is_progress() {
    let (mut p, a, b) = setup(8, false, slow(), 9);
    let mut c = *p.b.conn.config();
    c.paths = 1;
    c.cc.init_pwnd = 1024;
    c.cc.min_pwnd = 1024;
    c.cc.max_pwnd = 1024;
    p.b.connect(c);
    p.a.set_retry(8, 0, 7);
    p.b.set_retry(8, 0, 7);
    let len = MR_LEN - B_READ;
    assert!(p.a.host.post_send(read(3, a, b, 0, len)));
    p.doorbell(0);
    let took = until_completion(&mut p, 100 * T8);
    assert_eq!(
        statuses(&p.a.host.send_cq),
        vec![(3, WcStatus::Success)],
        "after {took:?} ns"
    );
    let took = took.unwrap_or(0);
    assert!(
        took > 4 * T8,
        "the response took {took} ns: not slow enough"
    );
    assert_eq!(p.a.conn.stats().ack_timeouts, 0);
    let landed = &p.a.host.mr(A_MR).unwrap().bytes[rc_common::LAND..][..len];
    assert!(landed
        .iter()
        .enumerate()
        .all(|(i, x)| *x == rc_common::pattern(i + 7)));
}

/// Node 0's QP 2 posts a READ of `len` bytes of node 1's READ area.
fn post_read(p: &mut SharedPair, wr_id: u64, len: usize) {
    let e = rdma(
        wqe(WrOpcode::RdmaRead, wr_id, vec![sge(va(A_MR), 0, len, A_MR)]),
        va(B_MR) + B_READ as u64,
        B_MR,
    );
    assert!(p.nodes[0].qp(2).host.post_send(e));
}

/// Runs `p` in `step` ns steps until node 0's QP 2 has a send completion, at most
/// `limit` ns; the time it took.
fn until_qp2_completes(p: &mut SharedPair, step: u64, limit: u64) -> u64 {
    let start = p.now;
    while p.nodes[0].qp(2).host.send_cq.is_empty() && p.now - start < limit {
        // Nothing is due before `next` (`run` stops early once nothing is).
        let next = p.now + step;
        p.run(step);
        p.now = p.now.max(next);
    }
    p.now - start
}

/// A shared connection: node 1's QP 2 is destroyed while its READ response to node 0's
/// QP 2 is under way. Node 0's QP 2 fails alone with *retry exceeded*, by its own
/// `retry_cnt` (2: between three and four of the model's 268 ms local ACK timeouts after
/// the response stopped, three retries counted), while both connections stay open and
/// QP 0 works afterwards.
#[test]
fn shared_read_fails_alone_when_its_response_stops() {
    let period = rc::ack_timeout_ns(14);
    for t_us in [30u64, 60] {
        let mut p = shared_pair(4, clean());
        p.nodes[0].qp(2).retry = Some((2, 7));
        post_read(&mut p, 1, 100_000);
        p.run(t_us * 1000);
        assert!(p.nodes[0].qp(2).host.send_cq.is_empty(), "t {t_us} µs");
        p.nodes[1].destroy_qp(2);
        let after = until_qp2_completes(&mut p, 1_000_000, 20 * period);
        assert_eq!(
            codes(&p.nodes[0].qp(2).host.send_cq),
            vec![WcStatus::RetryExcErr],
            "t {t_us} µs, after {after} ns"
        );
        assert!(
            (3 * period..=4 * period + 2_000_000).contains(&after),
            "t {t_us} µs: failed {after} ns after the response stopped"
        );
        assert_eq!(p.nodes[0].conn.stats().ack_timeouts, 3, "t {t_us} µs");
        assert_eq!(p.nodes[0].conn.state(), ConnState::Open);
        assert_eq!(p.nodes[1].conn.state(), ConnState::Open);
        let w = rdma(
            wqe(WrOpcode::RdmaWrite, 9, vec![sge(va(A_MR), 0, 1000, A_MR)]),
            va(B_MR),
            B_MR,
        );
        assert!(p.nodes[0].qp(0).host.post_send(w));
        assert!(p.run(1_000_000_000));
        assert_eq!(
            statuses(&p.nodes[0].qp(0).host.send_cq),
            vec![(9, WcStatus::Success)]
        );
    }
}

/// On a shared connection too, a slow response is progress for its READ alone: node 1
/// sends on one path with a one-packet window over a 100 µs link, and node 0's timer
/// runs at about 4.2 ms with QP 2's `retry_cnt` 0. Its 128 KiB READ takes several
/// timeouts and succeeds, no retry counted.
#[test]
fn shared_slow_read_response_is_progress() {
    let mut p = shared_pair(4, slow());
    let mut c = *p.nodes[1].conn.config();
    c.paths = 1;
    c.cc.init_pwnd = 1024;
    c.cc.min_pwnd = 1024;
    c.cc.max_pwnd = 1024;
    p.nodes[1].conn = metaroce_proto::conn::Connection::new(c);
    p.nodes[0].conn.set_retry_limits(0, 7, T8);
    p.nodes[0].qp(2).retry = Some((0, 7));
    post_read(&mut p, 4, MR_LEN - B_READ);
    let took = until_qp2_completes(&mut p, 10_000, 100 * T8);
    assert_eq!(
        statuses(&p.nodes[0].qp(2).host.send_cq),
        vec![(4, WcStatus::Success)],
        "after {took} ns"
    );
    assert!(
        took > 4 * T8,
        "the response took {took} ns: not slow enough"
    );
    assert_eq!(p.nodes[0].conn.stats().ack_timeouts, 0);
}

/// A READ failed by its own one-packet response (its local buffer has no LOCAL_WRITE:
/// a local protection error, the QP entering the error state) awaits nothing more: the
/// flush counted its response, and the packet that completes the response does not
/// count it again. (A first version of stop 60 counted it twice, so the READ stayed
/// awaited for ever and the local ACK timer ran on: on a connection per QP it failed
/// the connection with *retry exceeded* 8 timeouts later; on a shared one it ticked for
/// as long as the QP existed.)
#[test]
fn a_read_failed_by_its_own_response_awaits_nothing() {
    let no_write = 0x30;
    let (mut p, _, b) = setup(8, false, clean(), 3);
    let local = p.a.host.reg_mr(no_write, 4096, 0);
    let e = rdma(
        wqe(WrOpcode::RdmaRead, 1, vec![sge(local, 0, 512, no_write)]),
        b + B_READ as u64,
        B_MR,
    );
    assert!(p.a.host.post_send(e));
    p.doorbell(0);
    p.run(5_000_000_000);
    assert_eq!(statuses(&p.a.host.send_cq), vec![(1, WcStatus::LocProtErr)]);
    assert_eq!(p.a.conn.stats().ack_timeouts, 0, "per QP");
    assert!(!p.a.engine.awaiting(), "per QP: a response still awaited");

    let mut p = shared_pair(4, clean());
    let local = p.nodes[0].qp(2).host.reg_mr(no_write, 4096, 0);
    let e = rdma(
        wqe(WrOpcode::RdmaRead, 2, vec![sge(local, 0, 512, no_write)]),
        va(B_MR) + B_READ as u64,
        B_MR,
    );
    assert!(p.nodes[0].qp(2).host.post_send(e));
    p.run(5_000_000_000);
    assert_eq!(
        statuses(&p.nodes[0].qp(2).host.send_cq),
        vec![(2, WcStatus::LocProtErr)]
    );
    assert!(
        !p.nodes[0].qp(2).engine.awaiting(),
        "shared: a response still awaited"
    );
    assert_eq!(
        p.nodes[0].conn.poll_timeout(),
        None,
        "shared: the local ACK timer still runs"
    );
}

/// An atomic whose request is acknowledged but whose response is lost, its responder
/// then in the error state (it resends nothing): the atomic awaits its response as a
/// READ does and fails with *retry exceeded* after `retry_cnt + 1` timeouts. (Its
/// response is one packet sent with the ACK, so the model keeps the ACK and drops the
/// response.)
#[test]
fn per_qp_atomic_fails_when_its_response_is_lost_after_its_ack() {
    let (mut p, a, b) = setup(8, false, clean(), 17);
    p.a.set_retry(8, 2, 7);
    // The responder's answer: its ACK with the response riding after it (transport.rst,
    // "ACKs riding on DATA"), split in two. Only the ACK arrives.
    let wire = answers(&mut p, vec![fetch_add(1, a, b, 5)]);
    assert_eq!(wire.len(), 2, "the ACK and the response riding on it");
    assert!(matches!(decode(&wire[0]), Ok(Packet::Ack(_))));
    assert!(
        matches!(decode(&wire[1]), Ok(Packet::Data(..))),
        "no response rides on the ACK"
    );
    p.b.modify_to_error();
    p.inject(0, &wire[0]);
    assert!(p.a.host.send_cq.is_empty());
    let after = until_completion(&mut p, 50 * T8);
    assert_eq!(
        statuses(&p.a.host.send_cq),
        vec![(1, WcStatus::RetryExcErr)],
        "after {after:?} ns"
    );
    assert_eq!(p.a.conn.stats().ack_timeouts, 3);
    assert_eq!(
        p.a.conn.stats().retx,
        0,
        "the request was resent: it was not acknowledged"
    );
}
