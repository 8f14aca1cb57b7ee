//! Delayed acknowledgement (Documentation/transport.rst, "Receiving", step 9;
//! `Config::ack_every`, `Config::ack_delay_ns`): a receiver that acknowledges a path
//! every `ack_every` packets still answers at once at a message's last packet and at a
//! sender's ACKREQ, and then for every path that holds packets back, so the sender
//! never waits for the delayed-ACK timer at the end of a message (nor probes the tail
//! it would otherwise think lost).

mod common;
use common::*;

/// A pair with 8 paths whose receiver `b` acknowledges every `every` packets of a
/// path, or after `delay_ns`; the sender `a` knows that delay (its probe timeouts
/// allow for it, as two kernel peers with the same module parameters do).
fn net(every: u8, delay_ns: u32) -> Net {
    let mut n = Net::new(11, 8, 0.0);
    let (mut a, mut b) = (config(1, 2, 8), config(2, 1, 8));
    b.ack_every = every;
    (a.ack_delay_ns, b.ack_delay_ns) = (delay_ns, delay_ns);
    n.connect(a, b);
    n
}

#[test]
fn a_last_packet_flushes_every_path() {
    // ack_every 8 and a 20 ms delay: neither fires for a 16-packet message sprayed
    // over 8 paths (2 a path); only the last packet's flush acknowledges the others.
    let mut n = net(8, 20_000_000);
    send_all(&mut n, 4, 16 * 1024); // warm: RTT samples on every path
    let acks0 = n.sent[1];
    let took = send_all(&mut n, 1, 16 * 1024);
    assert!(
        took < 1_000_000,
        "the message took {took} ns: it waited for the timer"
    );
    assert_eq!(tail_probe_count(&n), 0, "{:?}", n.app_a.events);
    assert_eq!(n.a.stats().retx, 0, "spurious retransmissions");
    let acks = n.sent[1] - acks0;
    assert!(
        (1..=8).contains(&acks),
        "{acks} ACKs for one 16-packet message over 8 paths"
    );
}

#[test]
fn ack_every_coalesces_without_spurious_resends() {
    // Immediate ACKs (ack_every 1) against every 4th packet of a path: a quarter of
    // the ACKs (and a few more: each message's last packet, window-full ACKREQs),
    // the same data, nothing resent.
    let mut per = Vec::new();
    for every in [1u8, 4] {
        let mut n = net(every, 200_000);
        send_all(&mut n, 8, 64 * 1024); // warm
        let (acks0, data0) = (n.sent[1], n.sent[0]);
        send_all(&mut n, 32, 64 * 1024);
        let (acks, data) = (n.sent[1] - acks0, n.sent[0] - data0);
        assert_eq!(data, 32 * 64, "ack_every {every}: data packets sent");
        assert_eq!(
            n.a.stats().retx,
            0,
            "ack_every {every}: spurious retransmissions"
        );
        assert_eq!(tail_probe_count(&n), 0, "ack_every {every}: tail probes");
        per.push(acks as f64 / data as f64);
    }
    assert!(per[0] >= 0.99, "ack_every 1: {} ACKs per packet", per[0]);
    assert!(per[1] <= 0.5, "ack_every 4: {} ACKs per packet", per[1]);
}

#[test]
fn a_window_limited_sender_does_not_ask_for_each_ack() {
    // Every path's window held at 6 KiB (five packets): the sender is window-limited
    // throughout, with some 40 packets in flight. The receiver's every-2nd-packet ACKs
    // keep it going; ACKREQ on every packet (as before stop 48: 2016 of 2048) had each
    // acknowledged alone.
    let mut n = net(2, 100_000);
    let (mut a, mut b) = (config(1, 2, 8), config(2, 1, 8));
    (a.cc.init_pwnd, a.cc.max_pwnd) = (6 * 1024, 6 * 1024);
    (b.ack_every, b.ack_bundle) = (2, 16);
    (a.ack_delay_ns, b.ack_delay_ns) = (100_000, 100_000);
    n.connect(a, b);
    n.keep_trace = true;
    send_all(&mut n, 4, 64 * 1024); // warm: the start-up ramp
    let t0 = n.trace.len();
    send_all(&mut n, 32, 64 * 1024);
    let (req, data, acks) = ackreqs(&n, t0);
    assert_eq!(data, 32 * 64);
    assert_eq!(n.a.stats().retx, 0, "spurious retransmissions");
    assert_eq!(tail_probe_count(&n), 0, "tail probes");
    eprintln!("{req} ACKREQ, {acks} ACK datagrams for {data} DATA packets");
    assert!(
        req * 20 <= data,
        "{req} of {data} DATA packets asked for an ACK at once"
    );
    // A path's every 2nd packet (ACK-clocked, the others rarely hold one to bundle):
    // about half as many ACK datagrams as DATA packets, against one each when every
    // packet asks.
    assert!(
        acks * 10 <= data * 6,
        "{acks} ACK datagrams for {data} DATA packets"
    );
}

#[test]
fn a_sender_with_a_packet_a_path_still_asks() {
    // Windows of one packet a path and a 20 ms delayed-ACK timer: with at most one
    // packet a path in flight, every path holds its packet back; the sender's ACKREQ
    // is all that has it acknowledged before the timer.
    let mut n = net(2, 20_000_000);
    let (mut a, mut b) = (config(1, 2, 8), config(2, 1, 8));
    (a.cc.init_pwnd, a.cc.min_pwnd, a.cc.max_pwnd) = (1088, 1088, 1088);
    b.ack_every = 2;
    (a.ack_delay_ns, b.ack_delay_ns) = (20_000_000, 20_000_000);
    n.connect(a, b);
    n.keep_trace = true;
    send_all(&mut n, 2, 16 * 1024); // warm
    let t0 = n.trace.len();
    let took = send_all(&mut n, 4, 16 * 1024);
    let (req, data, _) = ackreqs(&n, t0);
    assert_eq!(data, 64);
    assert!(req > 0, "no ACKREQ with one packet a path");
    assert!(
        took < 20_000_000,
        "4 messages took {took} ns: the sender waited for the delayed-ACK timer"
    );
    assert_eq!(tail_probe_count(&n), 0, "tail probes");
}
