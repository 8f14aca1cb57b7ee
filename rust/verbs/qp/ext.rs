// SPDX-License-Identifier: GPL-2.0

//! The extension API on a QP (Documentation/extension.rst): its
//! connection's state and paths read, and the number of paths it sends on
//! changed, while it carries traffic. On a device that shares connections
//! both act on the connection the QP is a member of, so on every member.

use super::*;
use crate::ffi::bindings;
use crate::ffi::rdma::ext::{ConnInfo, PathInfo, PathsOut};
use crate::proto::path::PathState;

impl Qp {
    /// Reports this QP's connection and its paths (the first ones while
    /// `out` has room). `EINVAL` for a QP without a connection: an RC QP
    /// before RTR (or after a reset), and UC and UD QPs.
    pub(crate) fn query_paths(&self, out: &mut PathsOut<'_>) -> Result {
        let g = self.inner.lock();
        if let Some(l) = g.link.clone() {
            drop(g);
            return l.peer.query_paths(out);
        }
        let c = g.conn.as_deref().ok_or(EINVAL)?;
        report(c, 1, false, g.io.class, out);
        Ok(())
    }

    /// Pins this QP to stream class `class` (0 to
    /// `METAROCE_MAX_STREAM_CLASS`): on a device that shares connections,
    /// the RC QPs to one peer ride one connection per class, each with its
    /// own paths, congestion control and fair share, and both ends of a QP
    /// pair must pin the same class (the grouping must be symmetric:
    /// Documentation/transport.rst, "Shared connections"). A QP on a device
    /// without sharing keeps its connection of its own whatever its class.
    /// `EINVAL`: above the limit, or the QP is past INIT (it joins its
    /// connection at RTR).
    pub(crate) fn set_stream_class(&self, class: u32) -> Result {
        let class = u8::try_from(class)
            .ok()
            .filter(|c| u32::from(*c) <= bindings::METAROCE_MAX_STREAM_CLASS)
            .ok_or(EINVAL)?;
        let mut g = self.inner.lock();
        if !matches!(g.io.attr.state, QpState::Reset | QpState::Init) {
            return Err(EINVAL);
        }
        g.io.class = class;
        Ok(())
    }

    /// Has this QP's connection send on `paths` paths (1 to 64) from now on
    /// ([`Connection::set_paths`]: nothing in flight is lost), and sends at
    /// once what the change allows; returns the count it sends on. A member
    /// of a shared connection asks for `paths`: the connection sends on the
    /// largest count its members ask for (each asks for the `paths` module
    /// parameter until it sets one). `EINVAL`: out of range, or no
    /// connection (as [`Self::query_paths`]).
    pub(crate) fn set_paths(this: &Arc<Self>, paths: u32) -> Result<u32> {
        let n = u8::try_from(paths)
            .ok()
            .filter(|n| (1..=Conn::max_paths()).contains(n))
            .ok_or(EINVAL)?;
        let mut g = this.inner.lock();
        if let Some(l) = g.link.clone() {
            drop(g);
            return Ok(u32::from(Peer::set_paths(&l.peer, l.id, n)));
        }
        let set = {
            let Inner { conn, io, rc, .. } = &mut *g;
            let c = conn.as_mut().ok_or(EINVAL)?;
            let mut env = Glue { qp: this, io };
            c.set_paths(n, &mut rc.bind(&mut env))
        };
        Qp::pump_locked(this, g);
        Ok(u32::from(set))
    }
}

/// Writes connection `c` (`members` QPs on it, `shared` or not, of stream
/// class `class`) and its paths to `out`.
pub(super) fn report<const P: usize, const W: usize, const N: usize>(
    c: &Connection<P, W, N>,
    members: u32,
    shared: bool,
    class: u8,
    out: &mut PathsOut<'_>,
) {
    let st = c.stats();
    let paths = c.config().paths;
    out.conn(&ConnInfo {
        shared,
        members,
        paths,
        max_paths: Connection::<P, W, N>::max_paths(),
        stream_class: class,
        qwnd: c.qwnd(),
        inflight: c.inflight(),
        rate_hint: c.rate_hint(),
        peer_hint: c.peer_hint(),
        min_rtt_ns: c.min_rtt(),
        pacing_rate: c.pacing_rate(),
        data_tx: st.data_tx,
        retx: st.retx,
        timeouts: u32::from(st.timeouts),
        moves: u32::from(st.moves),
        local_ack_timeouts: st.ack_timeouts,
    });
    for i in 0..usize::from(paths) {
        let Some(p) = c.path(i) else { break };
        let info = PathInfo {
            src_port: p.src_port,
            state: match p.state {
                PathState::Unused => 0,
                PathState::Active => 1,
                PathState::Probing => 2,
            },
            timeouts: p.timeouts,
            pwnd: p.cc.pwnd,
            srtt_ns: p.srtt,
            inflight: p.inflight,
            sent: c.path_sent(i),
            ce: p.ce,
            retx: p.retx,
            moves: p.moves,
            plane: c.path_plane(i),
        };
        if !out.path(&info) {
            break;
        }
    }
}
