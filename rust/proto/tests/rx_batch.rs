//! Receive batches (Documentation/device.rst, "Data path"; transport.rst, "Receiving",
//! step 9: what "at once" allows): the kernel answers the datagrams one NAPI poll
//! delivered with one pump after the last of them, or after `RX_BATCH` of them
//! (`Connection::batch_full`), so the core takes several datagrams before it is asked
//! what to send. The receiver then sends one ACK datagram for them (bundling every path
//! that holds packets back); the sender sends the same data, resends only what was
//! lost and probes no more tails, and the transfer takes about as long. `Net::rx_window`
//! models the batches: a datagram's end takes every datagram due to it within the
//! window (each at its arrival time) before it transmits, unless its batch is full.

mod common;
use common::*;
use metaroce_proto::conn::RX_BATCH;
use metaroce_proto::time::Instant;

/// A pair of kernel-configured ends (8 paths, 1 KiB MTU, `ack_every` 2, 100 µs delayed
/// ACK, bundles of 16) whose receives come in batches of `window` ns.
fn net(seed: u64, window: u64, loss: f64) -> Net {
    let mut n = Net::new(seed, 8, loss);
    // Sprayed packet by packet: the subject is the receive batch; runs of packets on a
    // path (`train`) under batches and loss are tests/train.rs's.
    let (mut a, mut b) = (kernel_like_config(1, 2), kernel_like_config(2, 1));
    (a.train, b.train) = (1, 1);
    n.connect(a, b);
    n.rx_window = window;
    n
}

/// Sums over four seeds of what 32 x 64 KiB cost after a warm-up: data packets, ACK
/// datagrams, resends, data packets lost, tail probes, ns.
fn transfers(window: u64, loss: f64) -> [u64; 7] {
    let mut sum = [0u64; 7];
    for seed in [3, 5, 7, 9] {
        let mut n = net(seed, window, loss);
        send_all(&mut n, 8, 64 * 1024); // warm: RTT samples on every path
        let (data0, acks0, retx0) = (n.sent[0], n.sent[1], n.a.stats().retx);
        let (lost0, probes0) = (n.lost_psns.len(), tail_probe_count(&n));
        let took = send_all(&mut n, 32, 64 * 1024);
        assert!(n.app_b.violations.is_empty(), "{:?}", n.app_b.violations);
        assert_eq!(n.app_b.completed[0].len(), 40, "seed {seed}");
        let got = [
            n.sent[0] - data0,
            n.sent[1] - acks0,
            u64::from(n.a.stats().retx - retx0),
            (n.lost_psns.len() - lost0) as u64,
            (tail_probe_count(&n) - probes0) as u64,
            took,
            // Resends (of the whole run) of a packet the network never dropped.
            n.retx
                .iter()
                .filter(|&&(_, _, s, m, o)| !n.lost_data.contains(&(s, m, o)))
                .count() as u64,
        ];
        for (s, g) in sum.iter_mut().zip(got) {
            *s += g;
        }
    }
    eprintln!(
        "window {window} ns, loss {loss}: {} data, {} ACK datagrams, {} resent, {} lost, {} tail probes, {} us",
        sum[0],
        sum[1],
        sum[2],
        sum[3],
        sum[4],
        sum[5] / 1000
    );
    sum
}

/// A batched transfer `b` against the same one answered datagram by datagram: at most
/// half the ACK datagrams, at most a quarter slower. (Path delays are 2-10 µs: a 2 µs
/// window holds a few packets, a 20 µs one more than a round trip's, cut at
/// `RX_BATCH`. The batch's first packets wait for its last: a little slower in this
/// model, whose only cost is time in flight.)
fn fewer_acks_as_fast(window: u64, b: &[u64; 7], alone: &[u64; 7]) {
    assert!(
        b[1] * 2 <= alone[1],
        "window {window}: {} ACK datagrams, one at a time {}",
        b[1],
        alone[1]
    );
    assert!(
        b[5] * 4 <= alone[5] * 5,
        "window {window}: {} ns, one at a time {} ns",
        b[5],
        alone[5]
    );
}

#[test]
fn batches_cut_ack_datagrams_not_speed() {
    let alone = transfers(0, 0.0);
    for window in [2_000, 6_000, 20_000] {
        let b = transfers(window, 0.0);
        assert_eq!(b[0], 4 * 32 * 64, "window {window}: data packets");
        assert_eq!(b[2], 0, "window {window}: spurious resends");
        assert_eq!(b[4], 0, "window {window}: tail probes");
        fewer_acks_as_fast(window, &b, &alone);
    }
}

#[test]
fn batches_under_loss_resend_only_what_was_lost() {
    let alone = transfers(0, 0.01);
    for window in [2_000, 6_000] {
        let b = transfers(window, 0.01);
        assert!(b[3] > 0, "window {window}: nothing lost");
        // Every resend repairs a loss (a resend may be lost in its turn; a packet
        // lost before the measured transfer may be resent in it), and the held-back
        // ACKs cost no more tail probes than ACKs sent one at a time.
        assert_eq!(b[6], 0, "window {window}: resends of packets never lost");
        assert!(
            b[2] <= b[3] + 2,
            "window {window}: {} resends, {} lost",
            b[2],
            b[3]
        );
        assert!(
            b[4] <= alone[4].max(2),
            "window {window}: {} tail probes, one at a time {}",
            b[4],
            alone[4]
        );
        fewer_acks_as_fast(window, &b, &alone);
    }
}

#[test]
fn a_full_batch_is_answered_at_once() {
    // A window far longer than the transfer: every answer comes from a full batch
    // (or a timer), so the receiver sends an ACK datagram at least every RX_BATCH
    // DATA packets, and the transfer still completes without resends.
    let b = transfers(10_000_000, 0.0);
    assert_eq!(b[2], 0, "spurious resends");
    assert!(
        b[1] * u64::from(RX_BATCH) >= b[0],
        "{} ACK datagrams for {} DATA packets",
        b[1],
        b[0]
    );
}

#[test]
fn batch_full_counts_datagrams_taken_since_the_last_poll() {
    // The sender's DATA (unpaced, its window open from the start), handed to the
    // receiver without a poll in between.
    let mut n = Net::new(11, 8, 0.0);
    let mut a = kernel_like_config(1, 2);
    (a.pacing, a.init_qwnd) = (false, 1 << 20);
    n.connect(a, kernel_like_config(2, 1));
    n.app_a.msgs[0].push(64 * 1024);
    let mut buf = [0u8; 2048];
    let mut dgs = Vec::new();
    while let Some(t) = n.a.poll_transmit(Instant(0), &mut buf, &mut n.app_a) {
        dgs.push(buf[..t.len].to_vec());
    }
    assert!(dgs.len() > usize::from(RX_BATCH), "{} datagrams", dgs.len());
    for (i, dg) in dgs.iter().enumerate() {
        assert_eq!(n.b.batch_full(), i >= usize::from(RX_BATCH), "after {i}");
        // A malformed copy (cut inside its header) is dropped and not counted.
        assert!(n
            .b
            .handle_packet(Instant(1_000), &dg[..12], false, &mut n.app_b)
            .is_err());
        n.b.handle_packet(Instant(1_000), dg, false, &mut n.app_b)
            .expect("the sender's DATA is taken");
    }
    assert!(n.b.batch_full());
    assert!(n
        .b
        .poll_transmit(Instant(1_000), &mut buf, &mut n.app_b)
        .is_some());
    assert!(!n.b.batch_full(), "a poll starts a new batch");
}
