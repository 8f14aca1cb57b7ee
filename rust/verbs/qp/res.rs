// SPDX-License-Identifier: GPL-2.0

//! The QP's view of its connection and paths in `rdma resource show qp -dd`
//! (driver attributes; Documentation/device.rst, "Per-QP view").

use super::*;
use crate::ffi::rdma::res::ResAttrs;
use crate::proto::path::PathState;

/// Paths shown per QP: the first ones. A QP's attributes must fit one dump
/// message, which iproute2's 4 KiB receive buffer sizes (`NLMSG_GOODSIZE`,
/// about 3.7 KB); an attribute takes about 24 bytes, so 8 paths of 9 plus
/// the connection's 12 take about 2 KB. An entry that does not fit ends
/// the dump (the core's `res_get_common_dumpit`).
const RES_PATHS: usize = 8;

impl Qp {
    /// Adds this QP's connection and per-path state to a resource dump: for
    /// an RC QP with a connection, `paths`, the hints (1000 bytes/s), pacing
    /// rate (bytes/s), `min_rtt_ns`, `qwnd`/`inflight` (bytes) and the
    /// connection's counters (`local_ack_timeouts`: verbs retries since the
    /// QP connected); then per path `pN_sport`, `pN_state` (0
    /// unused, 1 active, 2 probing), `pN_pwnd` (bytes), `pN_srtt_ns`,
    /// `pN_sent` (packets sent on the path, retransmissions included: its
    /// next PSN less its first), `pN_retx` (retransmissions sent on it),
    /// `pN_ce` (packets the peer reported CE-marked), `pN_moves`,
    /// `pN_timeouts`. Nothing for other QPs.
    ///
    /// A member of a shared connection dumps that connection, with `shared`
    /// 1 and its number of `members` first.
    pub(crate) fn fill_res(&self, out: &mut ResAttrs) -> Result {
        let g = self.inner.lock();
        if let Some(l) = g.link.clone() {
            drop(g);
            return l.peer.fill_res(out);
        }
        let Some(c) = g.conn.as_deref() else {
            return Ok(());
        };
        fill_conn(c, out)
    }
}

/// A connection's state in a resource dump (see [`Qp::fill_res`]).
pub(super) fn fill_conn<const P: usize, const W: usize, const N: usize>(
    c: &Connection<P, W, N>,
    out: &mut ResAttrs,
) -> Result {
    let st = c.stats();
    let n = usize::from(c.config().paths);
    out.u32(format_args!("paths"), n as u32)?;
    out.u32(format_args!("rate_hint"), c.rate_hint())?;
    out.u32(format_args!("peer_hint"), c.peer_hint())?;
    out.u64(format_args!("pacing_rate"), c.pacing_rate())?;
    out.u32(format_args!("min_rtt_ns"), c.min_rtt())?;
    out.u32(format_args!("qwnd"), c.qwnd())?;
    out.u32(format_args!("inflight"), c.inflight())?;
    out.u32(format_args!("data_tx"), st.data_tx)?;
    out.u32(format_args!("retx"), st.retx)?;
    out.u32(format_args!("timeouts"), u32::from(st.timeouts))?;
    out.u32(format_args!("moves"), u32::from(st.moves))?;
    out.u32(format_args!("local_ack_timeouts"), st.ack_timeouts)?;
    for i in 0..n.min(RES_PATHS) {
        let Some(p) = c.path(i) else { break };
        let state = match p.state {
            PathState::Unused => 0,
            PathState::Active => 1,
            PathState::Probing => 2,
        };
        out.u32(format_args!("p{i}_sport"), u32::from(p.src_port))?;
        out.u32(format_args!("p{i}_state"), state)?;
        out.u32(format_args!("p{i}_pwnd"), p.cc.pwnd)?;
        out.u32(format_args!("p{i}_srtt_ns"), p.srtt)?;
        out.u32(format_args!("p{i}_sent"), c.path_sent(i))?;
        out.u32(format_args!("p{i}_retx"), u32::from(p.retx))?;
        out.u32(format_args!("p{i}_ce"), p.ce)?;
        out.u32(format_args!("p{i}_moves"), u32::from(p.moves))?;
        out.u32(format_args!("p{i}_timeouts"), u32::from(p.timeouts))?;
    }
    Ok(())
}
