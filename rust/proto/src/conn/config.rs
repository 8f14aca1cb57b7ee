//! The connection's parameters ([`Config`]): identity, paths, windows, timers and
//! congestion control, fixed when the connection is set up.

use super::super::cc::CcConfig;
use super::super::ident::Ident;

/// Connection parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Our connection id (the peer puts it in `dst_conn`).
    pub local_conn: u32,
    /// The peer's connection id.
    pub peer_conn: u32,
    /// The key of the direction this end sends data in ([`Ident`]): the token of its
    /// DATA and PROBE packets (and of the ACKs it accepts) and its paths' first PSNs.
    pub tx_ident: Ident,
    /// The key of the direction the peer sends data in: the token of the DATA and
    /// PROBE packets this end accepts (and of its ACKs) and the first PSN it expects
    /// on each path.
    pub rx_ident: Ident,
    /// A second key the peer may send with, accepted only until the first DATA or
    /// PROBE is (then the connection keeps whichever key that packet carried): a
    /// verbs peer that never reaches RTS (a responder serving READs and atomics
    /// from RTR) knows no `sq_psn` and keys its data with its `rq_psn`, i.e. this
    /// end's `sq_psn` (Documentation/transport.rst, "Identity and threat model").
    /// Key 0 ([`Ident::DEFAULT`]): none.
    pub rx_alt: Ident,
    /// This connection's incarnation, nonzero (Documentation/transport.rst,
    /// "Incarnations"): carried in its DATA and PROBE packets, and the ACKs it
    /// accepts must echo it. The host draws it at random for every new connection.
    pub incarnation: u16,
    /// The connection carries several QP pairs' streams (Documentation/transport.rst,
    /// "Shared connections"): datagrams are addressed to and keyed by the pairs the
    /// application names ([`super::App::member_rx`] ...), not by `local_conn`,
    /// `peer_conn` and the keys above (which then only seed the paths' first PSNs);
    /// the receiver takes its paths' sequences from the sender's floors.
    pub shared: bool,
    /// Number of paths in use, 1..=P (and at most 64).
    pub paths: u8,
    /// Payload bytes per full packet: what this end sends (a shared connection's
    /// members may send less, [`super::MsgInfo::mtu`]).
    pub mtu: u16,
    /// The most payload a DATA packet this end accepts may carry, bytes; 0 (or less
    /// than `mtu`): `mtu`. Larger than `mtu` where the peer may cut its messages
    /// larger than this end does (the kernel sets 4096 on every connection, since a
    /// peer may send its link's full payload: Documentation/transport.rst C7); a DATA
    /// over it is dropped as `bad_offset`.
    pub rx_mtu: u16,
    /// Source port of path 0; path i starts at `base_src_port + i`.
    pub base_src_port: u16,
    /// Bytes each packet costs on the wire below the MetaRoCE header (Ethernet, IP, UDP,
    /// preamble, gap), used for pacing (a u8: IPv6 with a VLAN tag is 90; it keeps
    /// this struct at 104 bytes).
    pub wire_overhead: u8,
    /// RTO before the first RTT sample, ns.
    pub init_rto_ns: u32,
    /// Smallest RTO, ns.
    pub min_rto_ns: u32,
    /// Largest RTO before backoff, ns.
    pub max_rto_ns: u32,
    /// Verbs `retry_cnt`: local ACK timeouts without progress tolerated before the
    /// connection fails with [`super::ConnError::RetryExceeded`] (IBTA 9.7.6.1.3). With
    /// `ack_timeout_ns` 0, path timeouts count instead, `retry_cnt` per path.
    pub retry_cnt: u8,
    /// Verbs local ACK timeout (IBTA 9.7.6.1.3: 4.096 us * 2^`timeout`), ns;
    /// `u64::MAX` never expires (verbs `timeout` 0). The path RTOs retransmit long
    /// before; this timer only measures the application's patience. It runs while
    /// any message is unacknowledged and restarts on progress (an ACK that
    /// acknowledges or reports received data, or an RNR report); each expiry is one
    /// retry, and the next expiry is one timeout
    /// after the previous one was *handled*, so a host that could not run for a
    /// while counts one retry, not all the timeouts its clock skipped. 0: no local
    /// ACK timer (the simulator's model): every path timeout is a retry.
    pub ack_timeout_ns: u64,
    /// Verbs `rnr_retry`: RNR refusals tolerated per packet (7 = unlimited).
    pub rnr_retry: u8,
    /// Consecutive probe timeouts before a path moves to a new source port.
    pub move_after: u8,
    /// Window cap from the peer's rate hint: `hint * min_rtt * headroom / 1024`.
    pub hint_headroom: u16,
    /// Pace data at the peer's hinted rate.
    pub pacing: bool,
    /// Pacing slack, µs (a u16: it fits this struct's padding): how far ahead of the
    /// pacing clock a sender may send, i.e. a burst allowance of that much sending time at
    /// the paced rate. 0 = strict spacing. A host whose timer resolves only ticks sets a
    /// tick or two (the most its timer fires late): with less, every pacing wait would
    /// cost a whole tick; the rate over that span is still the paced one.
    pub pacing_slack_us: u16,
    /// ACK after this many data packets on a path (1 = every packet).
    pub ack_every: u8,
    /// The most ACKs one datagram carries (`Documentation/transport.rst`, "ACK
    /// bundles"): an ACK going out takes with it the ACK of every other path that holds
    /// packets back, up to this many in all, and as many as fit in `mtu` plus a DATA
    /// packet's largest header. 1 (the default) sends each path's ACK alone; 0 counts as
    /// 1; above [`MAX_ACK_BUNDLE`](crate::wire::MAX_ACK_BUNDLE) counts as it.
    pub ack_bundle: u8,
    /// Longest an ACK is delayed, ns.
    pub ack_delay_ns: u32,
    /// The longest datagram in which ACKs and a DATA packet travel together, bytes
    /// (`Documentation/transport.rst`, "ACKs riding on DATA"): an ACK going out takes
    /// the next DATA packet along, and a DATA packet the ACKs held back for the
    /// delayed-ACK timer, where they fit in this, and in `mtu` plus a DATA packet's
    /// largest header. 0 (the default): each goes alone.
    pub ack_ride: u16,
    /// The most new DATA packets a path sends in a row before the round robin moves on to
    /// the next path with room (`Documentation/transport.rst`, "Spraying"); a message's
    /// last packet ends a run. 1 (the default; 0 counts as 1) sprays packet by packet. A host whose network stack sends
    /// same-sized datagrams to one address and port pair as one burst (UDP GSO: one pass
    /// through the stack and one doorbell for the lot) sets more; retransmissions and
    /// probes choose their path as before.
    pub train: u8,
    /// Initial connection window (bytes of window charge); it then grows by the bytes
    /// acknowledged (doubling per round trip) until other limits bind.
    pub init_qwnd: u32,
    /// Congestion control.
    pub cc: CcConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl Config {
    /// The defaults, usable in constants.
    pub const DEFAULT: Config = {
        Config {
            local_conn: 0,
            peer_conn: 0,
            tx_ident: Ident::DEFAULT,
            rx_ident: Ident::DEFAULT,
            rx_alt: Ident::DEFAULT,
            incarnation: 1,
            shared: false,
            paths: 8,
            mtu: 4096,
            rx_mtu: 0,
            base_src_port: 49152,
            wire_overhead: 66,
            init_rto_ns: 1_000_000,
            min_rto_ns: 100_000,
            max_rto_ns: 100_000_000,
            retry_cnt: 7,
            ack_timeout_ns: 0,
            rnr_retry: 7,
            move_after: 1,
            hint_headroom: 1536,
            pacing: true,
            pacing_slack_us: 0,
            init_qwnd: 4160,
            ack_every: 1,
            ack_bundle: 1,
            ack_delay_ns: 2_000,
            ack_ride: 0,
            train: 1,
            cc: CcConfig::DEFAULT,
        }
    };
}
