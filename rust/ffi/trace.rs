// SPDX-License-Identifier: GPL-2.0

//! The module's trace events (`TRACE_SYSTEM metaroce`, defined in
//! `include/metaroce_trace.h`, instantiated in the C shim): what `trace-cmd`,
//! `perf trace -e 'metaroce:*'` and bpftrace see (Documentation/
//! observability.rst). The C macros cannot be called from Rust; the shim's
//! `metaroce_trace_*` wrappers are, and this file makes them safe.
//!
//! Cost when disabled: [`tx_enabled`]/[`rx_enabled`] are one call each (the
//! shim reads the tracepoint's static key), checked per datagram before any
//! field is gathered; the rarer events ([`loss`], [`retransmit`],
//! [`path_state`], [`rto`], [`rate_hint`]) call the wrapper, whose tracepoint
//! is a patched-out jump until enabled. Without `CONFIG_TRACEPOINTS` the
//! checks return false and the wrappers are empty.

use super::bindings as b;
use kernel::str::CStr;

/// One datagram's fields in `metaroce:tx` and `metaroce:rx`.
pub(crate) type Pkt = b::metaroce_trace_pkt;

// Fixed-width fields without padding: the C compiler's layout is bindgen's.
const _: () = assert!(core::mem::size_of::<Pkt>() == 24);

/// Whether `metaroce:tx` is enabled.
#[inline]
pub(crate) fn tx_enabled() -> bool {
    // SAFETY: reads a static key; no preconditions, any context.
    unsafe { b::metaroce_trace_tx_enabled() }
}

/// `metaroce:tx`: a QP sent the datagram `p` describes.
#[inline]
pub(crate) fn tx(p: &Pkt) {
    // SAFETY: `p` is a valid reference for the call; the tracepoint copies
    // its fields and keeps no pointer. Any context.
    unsafe { b::metaroce_trace_tx(p) }
}

/// Whether `metaroce:rx` is enabled.
#[inline]
pub(crate) fn rx_enabled() -> bool {
    // SAFETY: as in `tx_enabled`.
    unsafe { b::metaroce_trace_rx_enabled() }
}

/// `metaroce:rx`: a QP received the datagram `p` describes; `drop`: why it
/// was dropped (`None`: accepted).
#[inline]
pub(crate) fn rx(p: &Pkt, drop: Option<&CStr>) {
    let drop = drop.map_or(core::ptr::null(), |d| d.as_char_ptr());
    // SAFETY: `p` is valid for the call; `drop` is null (the event prints
    // "-") or a NUL-terminated string valid for the call, which the event
    // copies. Any context.
    unsafe { b::metaroce_trace_rx(p, drop) }
}

/// How [`loss`] found the packet lost (printed "sack" / "rto" / "tlp" /
/// "retired").
#[derive(Clone, Copy)]
#[repr(u8)]
pub(crate) enum LossCause {
    /// A SACK gap.
    Sack = 0,
    /// The path's retransmission timeout.
    Rto = 1,
    /// A tail-loss probe: the path's probe timeout, the packet its newest.
    Tlp = 2,
    /// Its path was retired (the extension API lowered the path count).
    Retired = 3,
}

/// `metaroce:loss`: QP `qpn` declared the data packet `psn` on `path` lost.
#[inline]
pub(crate) fn loss(qpn: u32, path: u8, psn: u32, cause: LossCause) {
    // SAFETY: plain values; any context.
    unsafe { b::metaroce_trace_loss(qpn, path, psn, cause as u8) }
}

/// `metaroce:retransmit`: QP `qpn` sent a lost packet (lost on `from_path`)
/// again as `psn` on `path`; its stream and SSN are unchanged.
#[inline]
pub(crate) fn retransmit(qpn: u32, path: u8, psn: u32, from_path: u8, stream: u16, ssn: u32) {
    // SAFETY: plain values; any context.
    unsafe { b::metaroce_trace_retransmit(qpn, path, psn, from_path, stream, ssn) }
}

/// `metaroce:path_state`: a path of QP `qpn` went from state `old` to `new`
/// (0 unused, 1 active, 2 probing) and source port `old_sport` to `new_sport`.
#[inline]
pub(crate) fn path_state(qpn: u32, path: u8, old: u8, new: u8, old_sport: u16, new_sport: u16) {
    // SAFETY: plain values; any context.
    unsafe { b::metaroce_trace_path_state(qpn, path, old, new, old_sport, new_sport) }
}

/// `metaroce:rto`: the retransmission timer of `path` of QP `qpn` expired
/// after `rto_ns`; the path's backoff and consecutive timeouts now.
#[inline]
pub(crate) fn rto(qpn: u32, path: u8, rto_ns: u64, backoff: u8, timeouts: u8) {
    // SAFETY: plain values; any context.
    unsafe { b::metaroce_trace_rto(qpn, path, rto_ns, backoff, timeouts) }
}

/// Whose hint [`rate_hint`] reports.
#[derive(Clone, Copy)]
#[repr(u8)]
pub(crate) enum HintSide {
    /// The hint this receiver returns on its ACKs.
    Local = 0,
    /// The hint the peer returns on its ACKs.
    Peer = 1,
}

/// `metaroce:rate_hint`: a rate hint of QP `qpn` changed from `old` to `new`
/// (1000 bytes/s units).
#[inline]
pub(crate) fn rate_hint(qpn: u32, side: HintSide, old: u32, new: u32) {
    // SAFETY: plain values; any context.
    unsafe { b::metaroce_trace_rate_hint(qpn, side as u8, old, new) }
}
