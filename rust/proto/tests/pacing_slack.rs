//! Pacing under a coarse timer (the kernel's `timer_list`, one tick = 4 ms): with
//! `pacing_slack_us` the sender keeps the hinted rate although it is woken only at tick
//! boundaries; without it, about one packet goes out per expiry. The kernel module's
//! timer is an `hrtimer` whose lateness it measures: it sets the slack from that as it
//! runs (`Connection::set_pacing_slack_us`).

mod common;
use common::*;
use metaroce_proto::conn::TxKind;
use metaroce_proto::time::Instant;

const TICK: u64 = 4_000_000;

/// Data packets `a` sends in `ticks` ticks when it only runs at tick boundaries (and on
/// ACKs, which arrive at once), with `b` handing out 1000 kB/s.
fn sent_with_coarse_timer(slack_us: u16, ticks: u64) -> u32 {
    sent_with_slack_from(slack_us, None, ticks)
}

/// As [`sent_with_coarse_timer`], with the slack set to `later.1` at tick `later.0`.
fn sent_with_slack_from(slack_us: u16, later: Option<(u64, u16)>, ticks: u64) -> u32 {
    let mut ca = config(1, 2, 8);
    ca.pacing_slack_us = slack_us;
    let mut a = Conn::new(ca);
    let mut b = Conn::new(config(2, 1, 8));
    let (mut app_a, mut app_b) = (TestApp::default(), TestApp::default());
    app_a.msgs[0] = vec![1024; 4000];
    let mut buf = [0u8; 2048];
    let mut sent = 0;
    for k in 0..ticks {
        let now = Instant(k * TICK);
        if let Some((at, us)) = later {
            if k == at {
                a.set_pacing_slack_us(us);
            }
        }
        loop {
            let mut moved = false;
            while let Some(t) = a.poll_transmit(now, &mut buf, &mut app_a) {
                moved = true;
                if matches!(t.kind, TxKind::Data { .. }) {
                    sent += 1;
                    b.set_rate_hint(1000);
                }
                let _ = b.handle_packet(now, &buf[..t.len], false, &mut app_b);
            }
            while let Some(t) = b.poll_transmit(now, &mut buf, &mut app_b) {
                moved = true;
                let _ = a.handle_packet(now, &buf[..t.len], false, &mut app_a);
            }
            if !moved {
                break;
            }
        }
        a.handle_timeout(now, &mut app_a);
        b.handle_timeout(now, &mut app_b);
    }
    sent
}

#[test]
fn slack_keeps_the_hinted_rate_under_a_coarse_timer() {
    // 1000 kB/s, packets of 1024 + 44 header + 66 wire bytes: ~1.13 ms each, so 100 ticks
    // (400 ms) carry ~350 packets at the hinted rate.
    let strict = sent_with_coarse_timer(0, 100);
    let slack = sent_with_coarse_timer(8_000, 100);
    println!("data packets in 400 ms: strict {strict}, 8 ms slack {slack}");
    assert!(strict <= 150, "strict {strict}");
    assert!((300..=380).contains(&slack), "slack {slack}");
}

#[test]
fn slack_set_while_running_takes_effect() {
    // Strict for the first 10 ticks (about one packet each), then 8 ms of slack: the
    // other 90 ticks carry ~315 packets at the hinted rate.
    let strict = sent_with_coarse_timer(0, 100);
    let later = sent_with_slack_from(0, Some((10, 8_000)), 100);
    println!("data packets in 400 ms: strict {strict}, slack from 40 ms {later}");
    assert!((270..=350).contains(&later), "slack from 40 ms {later}");
}

/// A sender paced at a slow hint whose hint then rises sends its next packet at the new
/// rate, not one slow packet time after the last: the wait already timed shrinks.
#[test]
fn a_raised_hint_shortens_the_wait_timed_at_the_old_one() {
    let mut a = Conn::new(config(1, 2, 8));
    let mut b = Conn::new(config(2, 1, 8));
    let (mut app_a, mut app_b) = (TestApp::default(), TestApp::default());
    app_a.msgs[0] = vec![1024; 100];
    let mut buf = [0u8; 2048];
    let t0 = Instant(1_000_000);
    // 1000 kB/s: a 1024-byte packet every ~1.1 ms.
    b.set_rate_hint(1000);
    let mut held: Option<Vec<u8>> = None;
    let mut data = 0;
    loop {
        let mut moved = false;
        while let Some(t) = a.poll_transmit(t0, &mut buf, &mut app_a) {
            moved = true;
            if matches!(t.kind, TxKind::Data { .. }) {
                data += 1;
                if data >= 2 {
                    // Sent at the slow rate: it reaches the receiver later.
                    held = Some(buf[..t.len].to_vec());
                    continue;
                }
            }
            let _ = b.handle_packet(t0, &buf[..t.len], false, &mut app_b);
        }
        while let Some(t) = b.poll_transmit(t0, &mut buf, &mut app_b) {
            moved = true;
            let _ = a.handle_packet(t0, &buf[..t.len], false, &mut app_a);
        }
        if !moved {
            break;
        }
    }
    // Paced: nothing goes out 100 µs later (a slow packet takes ~1.1 ms).
    let t1 = t0.add_nanos(100_000);
    let sent = a.poll_transmit(t1, &mut buf, &mut app_a);
    assert!(
        !matches!(sent.map(|t| t.kind), Some(TxKind::Data { .. })),
        "paced at 1000 kB/s, yet sent at once"
    );
    // Then the held packet arrives and its ACK carries 1 GB/s.
    b.set_rate_hint(1_000_000);
    let _ = b.handle_packet(t1, &held.expect("a second data packet"), false, &mut app_b);
    while let Some(t) = b.poll_transmit(t1, &mut buf, &mut app_b) {
        let _ = a.handle_packet(t1, &buf[..t.len], false, &mut app_a);
    }
    // The rest of the wait, timed at 1000 kB/s, shrinks 1000-fold: a packet is due
    // within a few µs.
    let t2 = t1.add_nanos(5_000);
    let sent = a.poll_transmit(t2, &mut buf, &mut app_a);
    assert!(
        matches!(sent.map(|t| t.kind), Some(TxKind::Data { .. })),
        "still waiting at the old rate"
    );
}
