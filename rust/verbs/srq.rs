// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (IBTA 10.2.9, 11.2.3): one ring of receive WQEs,
//! shared with the rxe provider, that several QPs take from.
//!
//! A QP takes an SRQ WQE when the first packet of a receive-consuming
//! message arrives: the WQE (its `wr_id` and SGEs) is copied into the QP and
//! the SRQ's consumer index advances at once, so the slot is free for user
//! space again and messages of different QPs never wait for each other.
//! When fewer WQEs than the armed limit remain, `IB_EVENT_SRQ_LIMIT_REACHED`
//! is raised once (IBTA 11.6.3.1).

use crate::ffi::rdma::{PdId, SrqAttr, SrqEvents};
use crate::ffi::rxe_abi::{MmInfo, Queue, RecvWqe, Sge, SGE_SIZE};
use crate::ffi::sync::BhLock;
use crate::ffi::udata::UContext;
use crate::ffi::wr::RecvWrs;
use kernel::prelude::*;
use kernel::sync::Arc;

/// `IB_SRQ_MAX_WR`, `IB_SRQ_LIMIT` (`enum ib_srq_attr_mask`).
const SRQ_MAX_WR: u32 = 1;
const SRQ_LIMIT: u32 = 2;

struct Inner {
    ring: Option<Queue>,
    /// Our consumer index: the shared copy is written, never read back.
    cons: u32,
    max_wr: u32,
    max_sge: u32,
    /// Armed limit (0: disarmed).
    limit: u32,
}

/// A shared receive queue.
#[pin_data]
pub(crate) struct Srq {
    pub(crate) pd: PdId,
    events: SrqEvents,
    #[pin]
    inner: BhLock<Inner>,
}

impl Srq {
    /// An SRQ of at least `attr.max_wr` WQEs of `attr.max_sge` SGEs, mapped
    /// into `uc` (none: a kernel consumer's, posted to with [`Srq::post`]);
    /// `attr` is updated to what was granted. `EINVAL` for 0 or
    /// more than the device's WRs or SGEs (rxe's `rxe_srq_chk_init`).
    pub(crate) fn new(
        pd: PdId,
        attr: &mut SrqAttr,
        max_srq_wr: u32,
        max_srq_sge: u32,
        uc: Option<&UContext>,
        events: SrqEvents,
    ) -> Result<(Arc<Srq>, MmInfo)> {
        if attr.max_wr == 0 || attr.max_wr > max_srq_wr || attr.max_sge > max_srq_sge {
            return Err(EINVAL);
        }
        if attr.srq_limit > attr.max_wr {
            return Err(EINVAL);
        }
        let max_sge = attr.max_sge.max(1);
        let ring = Queue::new(
            uc,
            attr.max_wr,
            RecvWqe::HEADER + max_sge as usize * SGE_SIZE,
        )?;
        let mi = ring.mminfo();
        attr.max_wr = ring.slots() - 1;
        attr.max_sge = max_sge;
        let inner = Inner {
            ring: Some(ring),
            cons: 0,
            max_wr: attr.max_wr,
            max_sge,
            limit: attr.srq_limit,
        };
        let srq = Arc::pin_init(
            pin_init!(Srq {
                pd,
                events,
                inner <- crate::ffi::sync::new_bh_lock!(inner, "metaroce_srq"),
            }),
            GFP_KERNEL,
        )?;
        Ok((srq, mi))
    }

    /// SGEs per WQE.
    pub(crate) fn max_sge(&self) -> u32 {
        self.inner.lock().max_sge
    }

    /// Takes the oldest posted WQE: its `wr_id` and SGEs (into `sges`, at
    /// most `sges.len()`), and its `num_sge` as written (more than
    /// `sges.len()` for a malformed WQE); `None` if none is posted.
    pub(crate) fn take(&self, sges: &mut [Sge]) -> Option<(u64, u32)> {
        let (taken, fire) = {
            let mut g = self.inner.lock();
            let ring = g.ring.as_ref()?;
            let cons = g.cons;
            if cons == ring.producer() {
                return None;
            }
            let w = RecvWqe::read(ring, cons).ok()?;
            let n = w.num_sge.min(g.max_sge).min(sges.len() as u32);
            for (i, s) in sges.iter_mut().enumerate().take(n as usize) {
                *s = RecvWqe::sge(ring, cons, i as u32).ok()?;
            }
            // More SGEs than the SRQ takes (a malformed WQE from the shared
            // ring) is reported as is: the taker fails that receive.
            let n = w.num_sge;
            let next = ring.advance(cons, 1);
            ring.set_consumer(next);
            let left = ring.distance(next, ring.producer());
            g.cons = next;
            let fire = g.limit != 0 && left < g.limit;
            if fire {
                g.limit = 0;
            }
            ((w.wr_id, n), fire)
        };
        if fire {
            self.events.limit_reached();
        }
        Some(taken)
    }

    /// Kernel `post_srq_recv`: writes the chain into the ring. `EINVAL` for
    /// more SGEs than the SRQ takes, `ENOMEM` when the ring is full (as rxe);
    /// the requests before the failed one are posted.
    pub(crate) fn post(&self, wrs: &mut RecvWrs) -> Result {
        let g = self.inner.lock();
        wrs.post(g.ring.as_ref().ok_or(EINVAL)?, g.max_sge)
    }

    /// `modify_srq`: arms the limit (`IB_SRQ_LIMIT`); resizing
    /// (`IB_SRQ_MAX_WR`) is not offered (no `IB_DEVICE_SRQ_RESIZE`): `EINVAL`.
    pub(crate) fn modify(&self, attr: &SrqAttr, mask: u32) -> Result {
        if mask & !(SRQ_MAX_WR | SRQ_LIMIT) != 0 || mask & SRQ_MAX_WR != 0 {
            return Err(EINVAL);
        }
        let mut g = self.inner.lock();
        if mask & SRQ_LIMIT != 0 {
            if attr.srq_limit > g.max_wr {
                return Err(EINVAL);
            }
            g.limit = attr.srq_limit;
        }
        Ok(())
    }

    /// `query_srq`.
    pub(crate) fn query(&self) -> SrqAttr {
        let g = self.inner.lock();
        SrqAttr {
            max_wr: g.max_wr,
            max_sge: g.max_sge,
            srq_limit: g.limit,
        }
    }

    /// `destroy_srq`: releases the ring (in process context).
    pub(crate) fn kill(&self) {
        let ring = self.inner.lock().ring.take();
        drop(ring);
    }
}
