// SPDX-License-Identifier: GPL-2.0

//! The QP's trace events (`metaroce:*`, [`crate::ffi::trace`]): the datagrams
//! it sends and receives, and what its connection reports as it runs
//! ([`crate::proto::conn::Event`], passed through the RC engine's
//! [`Observe`]). Documentation/observability.rst.

use super::*;
use crate::ffi::trace::{self, HintSide, LossCause};
use crate::proto::conn::{Event, LossCause as CoreCause, TxKind};
use crate::proto::rc::Observe;
use crate::proto::wire::Summary;

/// A datagram's trace fields: what its header says, on path `path` (the
/// header's own path byte otherwise), from UDP source port `sport`.
fn pkt(qpn: u32, bytes: &[u8], path: Option<u8>, sport: u16, retx: bool) -> trace::Pkt {
    let s = Summary::of(bytes);
    trace::Pkt {
        qpn,
        psn: s.psn,
        ssn: s.ssn,
        len: u32::try_from(bytes.len()).unwrap_or(u32::MAX),
        sport,
        stream: s.stream,
        path: path.unwrap_or(s.path),
        type_: s.ptype,
        flags: s.flags,
        retx: u8::from(retx),
    }
}

impl Qp {
    /// `metaroce:tx` for a UD or UC datagram sent from `sport`.
    pub(super) fn trace_tx_datagram(&self, bytes: &[u8], sport: u16) {
        if trace::tx_enabled() {
            trace::tx(&pkt(self.qpn, bytes, None, sport, false));
        }
    }

    /// `metaroce:rx` for datagram `bytes` received from `meta`; `drop`: the
    /// device counter of the reason it was dropped (`None`: accepted).
    pub(super) fn trace_rx(&self, dg: Bytes<'_>, meta: &RxMeta, drop: Option<usize>) {
        if trace::rx_enabled() {
            let mut p = pkt(self.qpn, dg.head(), None, meta.src_port, false);
            p.len = u32::try_from(dg.len()).unwrap_or(u32::MAX);
            trace::rx(&p, drop.map(counter::drop_name));
        }
    }

    /// `metaroce:rate_hint` (local side): the hint this QP returns changed.
    pub(super) fn trace_local_hint(&self, old: u32, new: u32) {
        trace::rate_hint(self.qpn, HintSide::Local, old, new);
    }
}

/// `metaroce:tx` for datagram `bytes` of QP `qpn`, which the connection
/// described in `t`, if the event is enabled.
pub(super) fn trace_tx(qpn: u32, t: &Transmit, bytes: &[u8]) {
    if trace::tx_enabled() {
        let retx = matches!(
            t.kind,
            TxKind::Data {
                retransmit: true,
                ..
            }
        );
        trace::tx(&pkt(qpn, bytes, Some(t.path), t.src_port, retx));
    }
}

impl Observe for Glue<'_> {
    fn conn_event(&mut self, e: Event) {
        conn_event(&self.qp.dev, self.qp.qpn, e);
    }
}

/// Counts and traces what the connection of QP `qpn` (on device `dev`)
/// reports ([`Event`]).
pub(super) fn conn_event(dev: &DevShared<Qp>, qpn: u32, e: Event) {
    match e {
        Event::Lost { path, psn, cause } => {
            let cause = match cause {
                CoreCause::SackGap => LossCause::Sack,
                CoreCause::Timeout => {
                    // The core keeps no counter of these (its `Stats`
                    // stay small): the device counts its events.
                    dev.count(counter::RTO_LOSSES, 1);
                    LossCause::Rto
                }
                CoreCause::TailProbe => {
                    dev.count(counter::TAIL_PROBES, 1);
                    LossCause::Tlp
                }
                CoreCause::Retired => LossCause::Retired,
            };
            trace::loss(qpn, path, psn, cause);
        }
        Event::Retransmit {
            path,
            psn,
            from_path,
            stream,
            ssn,
        } => trace::retransmit(qpn, path, psn, from_path, stream, ssn),
        Event::PathState {
            path,
            from,
            to,
            old_port,
            new_port,
        } => trace::path_state(qpn, path, from as u8, to as u8, old_port, new_port),
        Event::Timeout {
            path,
            rto_ns,
            backoff,
            timeouts,
        } => trace::rto(qpn, path, rto_ns, backoff, timeouts),
        Event::PeerHint { old, new } => trace::rate_hint(qpn, HintSide::Peer, old, new),
    }
}
