// SPDX-License-Identifier: GPL-2.0

//! Unreliable connected QPs: the glue between the QP's rings and the UC
//! rules of the protocol core ([`crate::proto::rc::UcLink`],
//! Documentation/transport.rst, "UC: the unreliable connected service").
//! Packets go out as the doorbell rings (no window, no retransmission);
//! received packets are placed and completed by the core.

use super::*;
use crate::proto::rc::UcRx;

/// Packets a UC QP sends per doorbell or timer run before it lets others
/// run (the rest follow from its timer, at once).
const UC_BUDGET: u32 = 256;

impl Qp {
    /// Sends what a UC QP's SQ holds, with the QP lock held (`g`): each
    /// packet once, in order; its send completions follow as the last
    /// packet of each WQE leaves.
    pub(super) fn uc_locked(this: &Arc<Self>, g: &mut BhGuard<'_, Inner>) {
        let Inner {
            uc,
            io,
            rc,
            scratch,
            ..
        } = &mut **g;
        let (Some(src), Some(dst), Some(uc)) = (io.src, io.dst, uc.as_deref_mut()) else {
            return;
        };
        let mut env = Glue { qp: this, io };
        let mut budget = UC_BUDGET;
        while budget > 0 {
            let Some(n) = rc.uc_transmit(&mut env, uc, now_ns() as u32, scratch) else {
                break;
            };
            budget -= 1;
            let bytes = &scratch[..n.min(scratch.len())];
            // A datagram the stack cannot take is lost, as on any UC fabric.
            let sent =
                this.dev
                    .transport
                    .send(&src, &dst, this.dev.ifindex, uc.src_port, true, bytes);
            if sent.is_ok() {
                this.trace_tx_datagram(bytes, uc.src_port);
                this.dev.count(counter::TX_PACKETS, 1);
                this.dev.count(counter::TX_BYTES, bytes.len() as u64);
            }
        }
        rc.settle(&mut env);
        if budget == 0 {
            Timer::arm(this, now_ns());
        }
    }

    /// A datagram for a UC QP: from its peer, in RTR, RTS or SQD, then the
    /// core's checks and placement.
    pub(super) fn uc_receive(this: &Arc<Self>, dg: Bytes<'_>, meta: &RxMeta) {
        let mut g = this.inner.lock();
        let Inner { uc, io, rc, .. } = &mut *g;
        let Some(uc) = uc.as_deref_mut() else {
            return;
        };
        if !this.admits(io, false, dg, meta) {
            return;
        }
        let mut env = Glue { qp: this, io };
        let before = uc.stats().rx_dropped;
        match rc.uc_receive_pieces(&mut env, uc, dg) {
            Err(r) => this.drop_rx(dg, meta, counter::DROP_FIRST + r as usize),
            Ok(r) => this.took(dg, meta, matches!(r, UcRx::Placed | UcRx::Completed)),
        }
        let dropped = uc.stats().rx_dropped.wrapping_sub(before);
        if dropped != 0 {
            this.dev.count(counter::UC_MSG_DROPS, u64::from(dropped));
        }
        rc.settle(&mut env);
    }
}
