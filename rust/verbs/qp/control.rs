// SPDX-License-Identifier: GPL-2.0

//! The QP as a verbs object: `create_qp` (ring sizing as rxe), `modify_qp`
//! (the IBTA state machine and attribute checks), `query_qp` and
//! `destroy_qp`.

use super::*;
use crate::ffi::rdma::QpCreated;
use crate::proto::conn::MAX_PATHS;
use crate::proto::ident::Ident;
use crate::proto::rc;
use crate::verbs::device::{segment, MAX_PAYLOAD};
use kernel::alloc::KVec;

impl Qp {
    /// Creates an RC, UD or GSI QP with its rings mapped into `uc` (none: a
    /// kernel consumer's QP, posted to with `ib_post_send`/`ib_post_recv`);
    /// `handle` is the core's `ib_qp` its kernel completions name. The GSI
    /// QP is QPN 1 of its device; there is one per device (`EBUSY`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn create(
        dev: &Arc<DevShared<Qp>>,
        pd: PdId,
        init: &mut QpInit,
        scq: &Arc<Cq>,
        rcq: &Arc<Cq>,
        srq: Option<&Arc<Srq>>,
        uc: Option<&UContext>,
        handle: QpHandle,
        events: QpEvents,
    ) -> Result<QpCreated<Arc<Qp>>> {
        if init.qp_type == QpType::Gsi && uc.is_some() {
            return Err(EINVAL);
        }
        let a = dev.attrs;
        let c = &mut init.caps;
        // rxe_qp_chk_cap: every size within the device limits.
        if c.max_send_wr > a.max_qp_wr
            || c.max_send_sge > a.max_send_sge
            || c.max_recv_wr > a.max_qp_wr
            || c.max_recv_sge > a.max_recv_sge
            || c.max_inline_data > MAX_INLINE
        {
            return Err(EINVAL);
        }
        c.max_send_wr = c.max_send_wr.max(1);
        c.max_recv_wr = c.max_recv_wr.max(1);
        c.max_send_sge = c.max_send_sge.max(1);
        c.max_recv_sge = c.max_recv_sge.max(1);
        // Inline room is what the SGE array occupies, as rxe reports it.
        let room = (c.max_send_sge as usize * SGE_SIZE).max(c.max_inline_data as usize);
        c.max_inline_data = room as u32;
        c.max_send_sge = (room / SGE_SIZE) as u32;
        let sq = Queue::new(uc, c.max_send_wr, sq_elem(c))?;
        // With an SRQ the QP has no RQ of its own (nothing to map).
        let rq = match srq {
            Some(_) => None,
            None => Some(Queue::new(
                uc,
                c.max_recv_wr,
                RecvWqe::HEADER + c.max_recv_sge as usize * SGE_SIZE,
            )?),
        };
        // rxe reports the ring capacity back as the granted depth.
        c.max_send_wr = sq.slots() - 1;
        c.max_recv_wr = rq.as_ref().map_or(0, |q| q.slots() - 1);
        if srq.is_some() {
            c.max_recv_sge = 0;
        }
        let (sq_mi, rq_mi) = (
            sq.mminfo(),
            rq.as_ref().map(|q| q.mminfo()).unwrap_or_default(),
        );
        let srq_sge = srq.map_or(0, |s| s.max_sge() as usize);
        let rq_slots = rq.as_ref().map_or(0, |q| q.slots() as usize);
        let tables = env::tables(init.qp_type, sq.slots() as usize, rq_slots, srq_sge)?;
        let rc = Engine::new(tables);
        let uc_link = if init.qp_type == QpType::Uc {
            Some(KBox::new(UcLink::default(), GFP_KERNEL)?)
        } else {
            None
        };
        // One datagram being built: an RC QP of a device that shares
        // connections builds none (its connection does).
        let mut scratch = KVec::new();
        let own = !(init.qp_type == QpType::Rc && dev.shared);
        scratch.extend_with(if own { 4096 + 256 } else { 0 }, 0u8, GFP_KERNEL)?;
        let io = Io {
            attr: QpAttr {
                port: 1,
                ..QpAttr::default()
            },
            caps: *c,
            sq: Some(sq),
            rq,
            srq_sge,
            src: None,
            dst: None,
            last_stats: Stats::default(),
            dead: false,
            class: 0,
        };
        let mut rc = Some(rc);
        let mut io = Some(io);
        let mut scratch = Some(scratch);
        let mut uc_link = Some(uc_link);
        let (qp_type, sq_sig_all) = (init.qp_type, init.sq_sig_all);
        let make = |qpn| {
            let io = io.take().ok_or(EINVAL)?;
            let rc = rc.take().ok_or(EINVAL)?;
            let scratch = scratch.take().ok_or(EINVAL)?;
            let uc = uc_link.take().ok_or(EINVAL)?;
            Arc::pin_init(
                pin_init!(Qp {
                    qpn,
                    qp_type,
                    handle,
                    kernel: uc.is_none(),
                    events: events.clone(),
                    pd,
                    sq_sig_all,
                    dev: dev.clone(),
                    scq: scq.clone(),
                    rcq: rcq.clone(),
                    srq: srq.cloned(),
                    timer <- Timer::new(),
                    batch <- Deferred::new(),
                    inner <- crate::ffi::sync::new_bh_lock!(Inner { conn: None, link: None, uc, io, rc, scratch, tx: None }, "metaroce_qp"),
                }),
                GFP_KERNEL,
            )
        };
        let (qpn, qp) = if qp_type == QpType::Gsi {
            dev.transport.insert_gsi(dev.ifindex, make)?
        } else {
            dev.transport.insert(make)?
        };
        Ok(QpCreated {
            qp,
            qpn,
            rq: rq_mi,
            sq: sq_mi,
        })
    }

    /// `modify_qp`: validates like rxe (`rxe_qp_chk_attr`) and applies.
    /// `active_mtu` is the port's active MTU (`enum ib_mtu`) when the mask
    /// carries `IB_QP_PATH_MTU`.
    ///
    /// One check rxe does not make: a `path_mtu` above the port's active MTU
    /// is `EINVAL`. rxe accepts up to its `max_mtu` (4096) and then sends
    /// datagrams the netdev cannot carry: IP drops them (DF set), and the QP
    /// ends in retry exceeded with nothing said to the application
    /// (`ibv_rc_pingpong -m 4096` over a 1500-byte link). perftest clamps to the
    /// active MTU; rdma_cm asks for more on a few netdev MTUs and between links of
    /// different MTUs (Documentation/device.rst), which fail at `rdma_accept`.
    pub(crate) fn modify(this: &Arc<Self>, a: &QpAttr, active_mtu: u32) -> Result {
        let m = a.mask;
        // A move to RTR may need a connection: allocate it before taking the
        // QP lock (softirqs take that lock; an allocation may sleep).
        let to_rtr = m & qp_mask::STATE != 0 && a.state == QpState::Rtr;
        let mut spare = if to_rtr && this.qp_type == QpType::Rc && !this.dev.shared {
            // A copy of the blank connection, reset in place at RTR: the
            // 9 KB connection is never on the stack.
            Some(crate::ffi::boxed::copy_to_heap(&Conn::BLANK, GFP_KERNEL)?)
        } else {
            None
        };
        // `max_dest_rd_atomic` sizes an RC QP's response table: the new one
        // is allocated here (it replaces the old under the lock, and the old
        // is freed when the lock is released).
        let mut resps = match m & qp_mask::MAX_DEST_RD_ATOMIC {
            0 => None,
            _ if this.qp_type != QpType::Rc
                || u32::from(a.max_dest_rd_atomic) > this.dev.attrs.max_qp_rd_atom =>
            {
                None
            }
            _ => Some(env::resp_table(a.max_dest_rd_atomic)?),
        };
        // What a member of a shared connection does once the QP lock is
        // released (the connection's lock comes first).
        let mut then = Then::Nothing;
        {
            let mut g = this.inner.lock();
            let Inner {
                conn,
                io,
                rc,
                uc,
                link,
                ..
            } = &mut *g;
            if io.dead {
                return Err(EINVAL);
            }
            let cur = if m & qp_mask::CUR_STATE != 0 {
                a.cur_state
            } else {
                io.attr.state
            };
            let new = if m & qp_mask::STATE != 0 {
                a.state
            } else {
                cur
            };
            if !modify_qp_is_ok(cur, new, this.qp_type, m) {
                return Err(EINVAL);
            }
            if m & qp_mask::PORT != 0 && a.port != 1 {
                return Err(EINVAL);
            }
            if m & qp_mask::PKEY_INDEX != 0 && a.pkey_index != 0 {
                return Err(EINVAL);
            }
            if m & qp_mask::PATH_MTU != 0
                && (!(1..=5).contains(&a.path_mtu) || a.path_mtu > active_mtu)
            {
                return Err(EINVAL);
            }
            let max_rd = this.dev.attrs.max_qp_rd_atom;
            if (m & qp_mask::MAX_QP_RD_ATOMIC != 0 && u32::from(a.max_rd_atomic) > max_rd)
                || (m & qp_mask::MAX_DEST_RD_ATOMIC != 0
                    && u32::from(a.max_dest_rd_atomic) > max_rd)
            {
                return Err(EINVAL);
            }
            if m & qp_mask::TIMEOUT != 0 && a.timeout > 31 {
                return Err(EINVAL);
            }
            // Field widths of IBTA 9.7.5.2.8-9 and 10.2.4 (rxe does not check
            // these; the exerciser holds metaroce to IBTA).
            if (m & qp_mask::DEST_QPN != 0 && a.dest_qpn > 0x00ff_ffff)
                || (m & qp_mask::RETRY_CNT != 0 && a.retry_cnt > 7)
                || (m & qp_mask::RNR_RETRY != 0 && a.rnr_retry > 7)
                || (m & qp_mask::MIN_RNR_TIMER != 0 && a.min_rnr_timer > 31)
            {
                return Err(EINVAL);
            }
            // Access bits: the standard ones and the optional range
            // (IB_ACCESS_OPTIONAL, bits 20-29), as rxe_qp_chk_attr allows.
            if m & qp_mask::ACCESS_FLAGS != 0 && a.access & !(0xff | 0x3ff0_0000) != 0 {
                return Err(EINVAL);
            }
            if m & qp_mask::CAP != 0
                && (a.caps.max_send_wr > io.caps.max_send_wr
                    || a.caps.max_recv_wr > io.caps.max_recv_wr
                    || a.caps.max_send_sge > io.caps.max_send_sge
                    || a.caps.max_recv_sge > io.caps.max_recv_sge)
            {
                return Err(EINVAL);
            }
            let t = &mut io.attr;
            macro_rules! take {
                ($bit:expr, $($f:ident),+) => { if m & $bit != 0 { $( t.$f = a.$f; )+ } };
            }
            take!(qp_mask::ACCESS_FLAGS, access);
            take!(qp_mask::QKEY, qkey);
            take!(qp_mask::PATH_MTU, path_mtu);
            take!(qp_mask::RQ_PSN, rq_psn);
            take!(qp_mask::SQ_PSN, sq_psn);
            take!(qp_mask::DEST_QPN, dest_qpn);
            take!(qp_mask::MIN_RNR_TIMER, min_rnr_timer);
            take!(qp_mask::TIMEOUT, timeout);
            take!(qp_mask::RETRY_CNT, retry_cnt);
            take!(qp_mask::RNR_RETRY, rnr_retry);
            take!(qp_mask::MAX_QP_RD_ATOMIC, max_rd_atomic);
            take!(qp_mask::MAX_DEST_RD_ATOMIC, max_dest_rd_atomic);
            // The requests and responses the responder holds move to the new
            // table; if more are held than it has room for, the old one stays
            // until the next change (Engine::move_resps).
            if let Some(new) = resps.as_mut() {
                if rc.move_resps(new.as_mut()) {
                    core::mem::swap(&mut rc.tables_mut().resps, new);
                }
            }
            take!(qp_mask::EN_SQD_ASYNC_NOTIFY, en_sqd_async_notify);
            if m & qp_mask::AV != 0 {
                t.av = a.av;
                if let Some(av) = a.av {
                    io.src = Some(IpAddr::from_gid(&av.sgid));
                    io.dst = Some(IpAddr::from_gid(&av.dgid));
                }
            }
            if new != cur || m & qp_mask::STATE != 0 {
                io.attr.state = new;
                match new {
                    QpState::Reset => {
                        *conn = None;
                        if let Some(l) = link.take() {
                            then = Then::Leave(l);
                        }
                        if let Some(u) = uc {
                            u.reset();
                        }
                        io.reset();
                        rc.reset();
                    }
                    // UC: packets from the peer carry the key of its `sq_psn`,
                    // which is this QP's `rq_psn` (transport.rst, "UC").
                    QpState::Rtr if this.qp_type == QpType::Uc => {
                        let t = &io.attr;
                        let (_, rx) = this.idents(t, t.rq_psn);
                        if let Some(u) = uc {
                            u.open_rx(this.qpn, segment(this.dev.ifindex, t.path_mtu), rx);
                            u.rx_mtu = MAX_PAYLOAD;
                        }
                    }
                    QpState::Rtr
                        if this.qp_type == QpType::Rc && this.dev.shared && link.is_none() =>
                    {
                        let t = &io.attr;
                        // As a connection of one pair: both keys from
                        // `rq_psn` until RTS (`config`).
                        let (tx, rx) = this.idents(t, t.rq_psn);
                        rc.start_streams(tx, rx);
                        if let (Some(src), Some(dst)) = (io.src, io.dst) {
                            let j = peer::Join {
                                qpn: this.qpn,
                                dest_qpn: t.dest_qpn,
                                tx,
                                rx,
                                mtu: segment(this.dev.ifindex, t.path_mtu),
                                class: io.class,
                            };
                            then = Then::Join(j, src, dst, cur);
                        }
                    }
                    QpState::Rts if link.is_some() => {
                        let t = &io.attr;
                        let keys = (cur == QpState::Rtr).then(|| this.idents(t, t.sq_psn));
                        if let Some(l) = link.clone() {
                            then = Then::Rts(l, keys, Self::retry_limits(t));
                        }
                    }
                    QpState::Rtr if this.qp_type == QpType::Rc && conn.is_none() => {
                        if let Some(mut c) = spare.take() {
                            let cfg = this.config(io);
                            c.reset(cfg);
                            rc.start_streams(cfg.tx_ident, cfg.rx_ident);
                            *conn = Some(c);
                        }
                    }
                    QpState::Rts if this.qp_type == QpType::Uc => {
                        if let (QpState::Rtr, Some(u)) = (cur, uc) {
                            let t = &io.attr;
                            let (tx, _) = this.idents(t, t.sq_psn);
                            u.open_tx(t.dest_qpn, tx);
                            u.src_port = base_src_port(crate::ffi::random::random_u32(), 1);
                        }
                    }
                    QpState::Rts => {
                        if let Some(c) = conn.as_mut() {
                            let t = &io.attr;
                            let (cnt, rnr, timeout) = Self::retry_limits(t);
                            c.set_retry_limits(cnt, rnr, timeout);
                            // `sq_psn` is final now: the sending key (unless
                            // data went out under the RTR one), and the
                            // receiving key of a peer that stays in RTR. Only
                            // on RTR -> RTS: a later RTS (RTS -> RTS, SQD ->
                            // RTS) keeps the keys, so it cannot reopen the
                            // second receiving key.
                            if cur == QpState::Rtr {
                                let (sq, rq) = this.idents(t, t.sq_psn);
                                // The streams start over with the paths (only
                                // while nothing was sent: then the key moves).
                                if c.config().tx_ident != sq && c.set_tx_ident(sq) {
                                    rc.restart_tx(sq);
                                }
                                c.set_rx_alt(rq);
                            }
                        }
                    }
                    QpState::Err => {
                        rc.flush(&mut Glue { qp: this, io });
                    }
                    QpState::Sqd => {
                        let notify = io.attr.en_sqd_async_notify;
                        rc.enter_sqd(&mut Glue { qp: this, io }, notify);
                    }
                    _ => {}
                }
            }
        }
        match then {
            Then::Nothing => {}
            Then::Leave(l) => Peer::leave(&this.dev, l),
            Then::Rts(l, keys, retry) => {
                if let Some((sq, rq)) = keys {
                    l.peer.rts(l.id, sq, rq, retry);
                } else {
                    l.peer.retry_limits(l.id, retry);
                }
            }
            Then::Join(j, src, dst, was) => {
                let joined = Peer::join(this, &j, src, dst);
                let mut g = this.inner.lock();
                let ok = !g.io.dead && g.io.attr.state != QpState::Reset && g.link.is_none();
                match joined {
                    Ok(l) if ok => g.link = Some(l),
                    Ok(l) => {
                        drop(g);
                        Peer::leave(&this.dev, l);
                    }
                    Err(e) => {
                        // Not connected: the QP stays where it was.
                        if g.io.attr.state == QpState::Rtr {
                            g.io.attr.state = was;
                        }
                        return Err(e);
                    }
                }
            }
        }
        Self::pump(this);
        Ok(())
    }

    /// The connection's configuration (Documentation/device.rst, "Paths",
    /// "Pacing and fair share", "Retransmission timeouts").
    pub(super) fn config(&self, io: &Io) -> Config {
        let t = &io.attr;
        let mtu = segment(self.dev.ifindex, t.path_mtu);
        // Until RTS names `sq_psn`, both keys come from `rq_psn`: a QP that
        // stays in RTR (a responder serving READs and atomics) still answers.
        let (tx_ident, rx_ident) = self.idents(t, t.rq_psn);
        let mut c = Config {
            local_conn: self.qpn,
            peer_conn: t.dest_qpn,
            tx_ident,
            rx_ident,
            mtu,
            rx_mtu: MAX_PAYLOAD,
            ..transport_config(&self.dev)
        };
        rc::retry_config(&mut c, t.timeout, t.retry_cnt, t.rnr_retry);
        c
    }

    /// The verbs retry limits of the QP's attributes: (`retry_cnt`,
    /// `rnr_retry`, local ACK timeout ns) as the connection takes them.
    fn retry_limits(t: &QpAttr) -> (u8, u8, u64) {
        let mut r = Config::default();
        rc::retry_config(&mut r, t.timeout, t.retry_cnt, t.rnr_retry);
        (r.retry_cnt, r.rnr_retry, r.ack_timeout_ns)
    }

    /// The keys of the two directions keyed by the starting PSN `psn`
    /// (Documentation/transport.rst, "Identity and threat model"): from this
    /// QP's and the peer's GID and QPN; (sending, receiving).
    fn idents(&self, t: &QpAttr, psn: u32) -> (Ident, Ident) {
        let (sgid, dgid) = t.av.map_or(([0; 16], [0; 16]), |av| (av.sgid, av.dgid));
        (
            Ident::derive(&sgid, &dgid, self.qpn, t.dest_qpn, psn),
            Ident::derive(&dgid, &sgid, t.dest_qpn, self.qpn, psn),
        )
    }

    /// `query_qp`.
    pub(crate) fn query(&self, a: &mut QpAttr, init: &mut QpInit) {
        let g = self.inner.lock();
        *a = g.io.attr;
        a.caps = g.io.caps;
        init.caps = g.io.caps;
        init.qp_type = self.qp_type;
        init.sq_sig_all = self.sq_sig_all;
    }

    /// `destroy_qp`: unlists the QP, stops its timer, flushes its WQEs and
    /// releases its rings (in process context, before the user context can
    /// go away).
    pub(crate) fn destroy(this: &Arc<Self>) {
        // No new datagram reaches the QP; the table's reference goes an RCU
        // grace period later.
        if this.qp_type == QpType::Gsi {
            this.dev.transport.remove_gsi(this.dev.ifindex);
        } else {
            this.dev.transport.remove(this.qpn);
        }
        this.timer.shutdown();
        let (sq, rq, conn, link) = {
            let mut g = this.inner.lock();
            let Inner {
                conn,
                io,
                rc,
                scratch,
                link,
                ..
            } = &mut *g;
            // No asynchronous event from a QP being destroyed.
            rc.quiet();
            let mut env = Glue { qp: this, io };
            // A receive completion lost to a full CQ whose pump has not run
            // yet (it runs at the end of the receive batch, `Qp::receive`):
            // what it received is not acknowledged, as the pump would have
            // decided.
            if rc.settle(&mut env) {
                if let Some(c) = conn.as_mut() {
                    c.abort();
                }
            }
            rc.flush(&mut env);
            // The peer may still wait for the ACK of what this QP received
            // last (applications often destroy right after their last
            // completion): repeat the ACKs once, in case the first was lost.
            if let (Some(c), Some(src), Some(dst)) = (conn.as_mut(), env.io.src, env.io.dst) {
                let mut app = rc.bind(&mut env);
                c.ack_all();
                for _ in 0..crate::proto::conn::MAX_PATHS {
                    let now = Instant(now_ns());
                    let Some(t) = c.poll_transmit(now, scratch, &mut app) else {
                        break;
                    };
                    let len = t.len.min(scratch.len());
                    this.send_counted(&src, &dst, &t, &scratch[..len]);
                }
                this.fold_stats(c, env.io);
            }
            io.dead = true;
            (io.sq.take(), io.rq.take(), conn.take(), link.take())
        };
        // A member leaves its connection (which repeats its ACKs).
        if let Some(l) = link {
            Peer::leave(&this.dev, l);
        }
        drop((sq, rq, conn));
    }
}

/// What `modify_qp` does for a member of a shared connection after the QP
/// lock is released.
enum Then {
    Nothing,
    /// Join the connection to the peer (RTR), from state `.3`.
    Join(peer::Join, IpAddr, IpAddr, QpState),
    /// RTS: the keys of `sq_psn` (sending, receiving) on RTR -> RTS, and the
    /// retry limits.
    Rts(Link, Option<(Ident, Ident)>, (u8, u8, u64)),
    /// RESET: leave the connection.
    Leave(Link),
}

/// What every connection of device `dev` starts with, whether one QP's or
/// shared (Documentation/device.rst, "Paths", "Pacing and fair share",
/// "Retransmission timeouts"): a new incarnation, the `paths` module
/// parameter's paths from a random base port, the RTO bounds, pacing.
pub(super) fn transport_config(dev: &DevShared<Qp>) -> Config {
    // Checked at load (1..=64).
    let paths = crate::ffi::params::paths().clamp(1, MAX_PATHS as u32) as u16;
    Config {
        // A new connection at every RTR: datagrams of an earlier one (this QP
        // before a reset, or a QP that had its QPN) still in the network are
        // stale to the peer (Documentation/transport.rst, "Incarnations").
        incarnation: (crate::ffi::random::random_u32() as u16).max(1),
        paths: paths as u8,
        base_src_port: base_src_port(crate::ffi::random::random_u32(), paths),
        wire_overhead: 66,
        // Before the first RTT sample: from the device's base RTT (16x,
        // room for a loaded host), within [2 min_rto, 20 ms]; 20 ms until
        // some connection of the device measured one.
        init_rto_ns: dev
            .fair
            .base_rtt()
            .map_or(INIT_RTO_NS, |r| r.saturating_mul(16))
            .clamp(2 * MIN_RTO_NS, INIT_RTO_NS),
        // Above it, srtt + 4 rttvar (RFC 6298, per path, measured)
        // decides.
        min_rto_ns: MIN_RTO_NS,
        max_rto_ns: 500_000_000,
        // Module parameters, read now (Documentation/device.rst,
        // "Acknowledgements").
        ack_every: crate::ffi::params::ack_every(),
        ack_bundle: crate::ffi::params::ack_bundle(),
        ack_delay_ns: crate::ffi::params::ack_delay_ns(),
        // Bounded by the connection's MTU (the core's own limit).
        ack_ride: if crate::ffi::params::ack_ride() {
            u16::MAX
        } else {
            0
        },
        // Runs of DATA on a path, each handed to the network stack as one
        // UDP GSO burst where the netdev takes one (`tx.rs`, `Train`;
        // Documentation/device.rst, "Trains").
        train: crate::ffi::params::train(),
        pacing: true,
        // Twice how late the device's QP timers fire, and 20 µs more
        // (the sender catches up on that much sending time after a late
        // expiry); updated as the QP runs (`pump_locked`).
        pacing_slack_us: dev.pacing_slack_us(),
        ..Config::default()
    }
}

/// RTO before a connection's first RTT sample when the device has measured
/// none yet, ns.
const INIT_RTO_NS: u32 = 20_000_000;

/// The RTO floor, ns (Documentation/device.rst, "Retransmission timeouts"):
/// an RTT sample includes the peer's softirq and its ACK's, which a loaded
/// host delays by up to milliseconds (ksoftirqd), while the QP's `hrtimer`
/// fires within microseconds of a deadline.
const MIN_RTO_NS: u32 = 1_000_000;

/// The source port of path 0 with `paths` paths, from 32 random bits: a
/// per-connection base in the dynamic range 49152-65535 (ECMP entropy, and
/// not derivable from the QPN), aligned to `paths` rounded up to a power of
/// two so that `base + i` stays in the range for every path `i`.
fn base_src_port(random: u32, paths: u16) -> u16 {
    let align = paths.clamp(1, 64).next_power_of_two();
    49152 + ((random >> 16) as u16 & 0x3fff & !(align - 1))
}
