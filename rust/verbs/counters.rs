// SPDX-License-Identifier: GPL-2.0

//! metaroce's device counters (`rdma statistic show link DEV/1`): their
//! indices, in the order of [`NAMES`], which the device hands the RDMA core
//! (`Driver::COUNTERS`).

use crate::ffi::rdma::CounterDesc;
use kernel::c_str;
use kernel::str::CStr;

/// Datagrams sent (data, ACK, probe, UD).
pub(crate) const TX_PACKETS: usize = 0;
/// Datagrams received for a QP.
pub(crate) const RX_PACKETS: usize = 1;
/// Refused by a QP or the protocol core.
pub(crate) const RX_DROPS: usize = 2;
/// Data packets sent again.
pub(crate) const RETRANSMITS: usize = 3;
/// Path retransmission timeouts.
pub(crate) const TIMEOUTS: usize = 4;
/// Paths moved to a new UDP source port.
pub(crate) const PATH_MOVES: usize = 5;
/// Data packets received twice.
pub(crate) const DUPLICATES: usize = 6;
/// Datagrams received with ECN CE.
pub(crate) const ECN_CE: usize = 7;
/// Datagrams for no QP (module-wide).
pub(crate) const UNKNOWN_QPN: usize = 8;
/// Bytes of the datagrams sent (UDP payload).
pub(crate) const TX_BYTES: usize = 9;
/// Bytes of the datagrams received for a QP.
pub(crate) const RX_BYTES: usize = 10;
/// Data packets a SACK gap declared lost.
pub(crate) const SACK_LOSSES: usize = 11;
/// CE marks echoed back to senders in ACKs.
pub(crate) const ECN_ECHOED: usize = 12;
/// Probes sent on paths being validated after a timeout.
pub(crate) const PROBES: usize = 13;
/// Times the fair-share rate hint a connection returns on its ACKs changed
/// (including its first, from none).
pub(crate) const HINT_CHANGES: usize = 14;
/// Verbs local ACK timeouts (IBTA 9.7.6.1.3): retries counted against a
/// QP's `retry_cnt`; past it the QP fails with `IB_WC_RETRY_EXC_ERR`.
pub(crate) const LOCAL_ACK_TIMEOUTS: usize = 15;
// Drops a QP decides before the protocol core sees the datagram; with the
// core's reasons below, every `rx_drops` has its reason counter.
/// A datagram for an RC QP from an address other than its peer's.
pub(crate) const DROP_BAD_SOURCE: usize = 16;
/// A datagram for a QP not in RTR, RTS or SQD (or an RC QP without its
/// connection yet).
pub(crate) const DROP_QP_STATE: usize = 17;
/// A UD datagram whose Q_Key is not the QP's (IBTA 10.2.5).
pub(crate) const DROP_BAD_QKEY: usize = 18;
/// A UD datagram with no receive posted (IBTA 10.7.2.2: UD drops it).
pub(crate) const DROP_NO_RECEIVE: usize = 19;
/// Messages a UC QP's receiver dropped (a lost packet, no receive posted,
/// a bad R_Key, longer than its receive: IBTA responder class D); their
/// packets are not `rx_drops` (the link took them).
pub(crate) const UC_MSG_DROPS: usize = 20;
/// Data packets declared lost by their path's timeout (with
/// [`SACK_LOSSES`], every `metaroce:loss` event; counted from the core's
/// `Event::Lost`, not from its `Stats`).
pub(crate) const RTO_LOSSES: usize = 21;
/// Tail-loss probes: a path's probe timeout passed and its newest data
/// packet was declared lost and sent again (`metaroce:loss cause=tlp`;
/// counted from the core's `Event::Lost`).
pub(crate) const TAIL_PROBES: usize = 22;
/// READ or atomic responses that cannot be the answer they name (a broken
/// peer: no such request outstanding, another kind, another length): taken
/// by the connection, nothing placed, the WQE failed
/// (`Documentation/transport.rst`, C11); not `rx_drops`.
pub(crate) const BAD_RESPONSES: usize = 23;
/// The first drop-by-reason counter: `DROP_FIRST + reason as usize` for
/// each of the protocol core's `DropReason`s, in its order.
pub(crate) const DROP_FIRST: usize = 24;
/// How many drop reasons [`NAMES`] names.
pub(crate) const NUM_DROP_REASONS: usize = 19;
/// DATA datagrams received in two pieces as the network device left them
/// (an skb's linear part and one page fragment) and placed from there: their
/// payload copied once, never gathered into one buffer first. Counted once
/// placed (not when dropped, or a duplicate); every datagram not taken in
/// pieces is linearized (`Documentation/device.rst`).
pub(crate) const RX_PIECES: usize = DROP_FIRST + NUM_DROP_REASONS;
/// Runs of DATA handed to the network stack as one UDP GSO burst (the
/// `train` parameter, through a netdev that takes UDP GSO bursts; their
/// datagrams are each in `tx_packets`).
pub(crate) const TX_BURSTS: usize = RX_PIECES + 1;
/// Number of device counters.
pub(crate) const NUM_COUNTERS: usize = TX_BURSTS + 1;

/// The counter names, by index.
const NAME_STRS: [&CStr; NUM_COUNTERS] = [
    c_str!("tx_packets"),
    c_str!("rx_packets"),
    c_str!("rx_drops"),
    c_str!("retransmits"),
    c_str!("rto_timeouts"),
    c_str!("path_moves"),
    c_str!("duplicates"),
    c_str!("ecn_ce_marked"),
    c_str!("unknown_qpn_drops"),
    c_str!("tx_bytes"),
    c_str!("rx_bytes"),
    c_str!("sack_losses"),
    c_str!("ecn_ce_echoed"),
    c_str!("probes"),
    c_str!("rate_hint_changes"),
    c_str!("local_ack_timeouts"),
    c_str!("rx_drop_bad_source"),
    c_str!("rx_drop_qp_state"),
    c_str!("rx_drop_bad_qkey"),
    c_str!("rx_drop_no_receive"),
    c_str!("uc_msg_drops"),
    c_str!("rto_losses"),
    c_str!("tail_probes"),
    c_str!("bad_responses"),
    // `DropReason::name()` of rust/proto/src/wire.rs, in order.
    c_str!("rx_drop_truncated"),
    c_str!("rx_drop_bad_version"),
    c_str!("rx_drop_unknown_type"),
    c_str!("rx_drop_unknown_op"),
    c_str!("rx_drop_bad_flags"),
    c_str!("rx_drop_length_mismatch"),
    c_str!("rx_drop_bad_offset"),
    c_str!("rx_drop_bad_path"),
    c_str!("rx_drop_wrong_connection"),
    c_str!("rx_drop_psn_out_of_window"),
    c_str!("rx_drop_stream_out_of_range"),
    c_str!("rx_drop_ssn_out_of_window"),
    c_str!("rx_drop_ack_out_of_range"),
    c_str!("rx_drop_closed"),
    c_str!("rx_drop_receiver_not_ready"),
    c_str!("rx_drop_refused"),
    c_str!("rx_drop_bad_token"),
    c_str!("rx_drop_stale_incarnation"),
    c_str!("rx_drop_mode_mismatch"),
    c_str!("rx_pieces"),
    c_str!("tx_gso_bursts"),
];

/// The counter names as the RDMA core takes them, by index.
pub(crate) const NAMES: [CounterDesc; NUM_COUNTERS] = {
    let mut out = [const { CounterDesc::new(c_str!("")) }; NUM_COUNTERS];
    let mut i = 0;
    while i < NUM_COUNTERS {
        out[i] = CounterDesc::new(NAME_STRS[i]);
        i += 1;
    }
    out
};

/// The reason an `rx_drop_*` counter `k` names, without the prefix (`metaroce:rx`'s
/// `drop` field, e.g. `psn_out_of_window`); its whole name for other counters.
pub(crate) fn drop_name(k: usize) -> &'static CStr {
    let Some(name) = NAME_STRS.get(k).copied() else {
        return c_str!("?");
    };
    let bytes = name.as_bytes_with_nul();
    match bytes.strip_prefix(b"rx_drop_") {
        Some(rest) => CStr::from_bytes_with_nul(rest).unwrap_or(name),
        None => name,
    }
}

// One `rx_drop_*` counter per drop reason of the protocol core.
const _: () = assert!(crate::proto::wire::DropReason::COUNT == NUM_DROP_REASONS);
