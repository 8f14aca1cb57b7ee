// SPDX-License-Identifier: GPL-2.0

//! Completion queues (IBTA 11.2.7, 11.4.2): a ring of `struct ib_uverbs_wc`
//! shared with the rxe provider, which polls it without a system call.
//! The kernel is the only producer; user space owns the consumer index.
//! A kernel consumer's CQ is the same ring in kernel memory, with room in
//! each slot for the QP the completion names (`ib_wc.qp`), polled through
//! `ib_poll_cq` ([`Cq::poll`]).

use crate::ffi::rdma::res::ResAttrs;
use crate::ffi::rdma::{CqCreated, CqEvents};
use crate::ffi::rxe_abi::{MmInfo, QpHandle, Queue, Wc};
use crate::ffi::udata::UContext;
use kernel::prelude::*;
use kernel::sync::Arc;

/// Which completions raise the next event (`ib_req_notify_cq`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arm {
    Off,
    Next,
    Solicited,
}

struct Inner {
    /// `None` once destroyed ([`Cq::kill`]).
    ring: Option<Queue>,
    /// Our producer index: the shared copy is written, never read back.
    prod: u32,
    arm: Arm,
    /// The last completion was lost to a full ring (a CQ overrun, IBTA
    /// 11.4.2.1); cleared by the next one written.
    overrun: bool,
    /// Completions lost to a full ring, ever (`rdma resource show cq -dd`).
    overruns: u32,
    dead: bool,
}

fn slot_size(kernel: bool) -> usize {
    if kernel {
        Wc::KERNEL_SIZE
    } else {
        Wc::SIZE
    }
}

/// A completion queue.
#[pin_data]
pub(crate) struct Cq {
    events: CqEvents,
    /// A kernel consumer's CQ (no user context).
    kernel: bool,
    #[pin]
    inner: crate::ffi::sync::BhLock<Inner>,
}

impl Cq {
    /// A CQ of at least `cqe` entries mapped into `uc` (none: a kernel
    /// consumer's). `EINVAL` for 0 or more than `max_cqe` (rxe's
    /// `rxe_cq_chk_attr`).
    pub(crate) fn new(
        cqe: u32,
        max_cqe: u32,
        uc: Option<&UContext>,
        events: CqEvents,
    ) -> Result<CqCreated<Arc<Cq>>> {
        if cqe == 0 || cqe > max_cqe {
            return Err(EINVAL);
        }
        let kernel = uc.is_none();
        let ring = Queue::new_cq(uc, cqe, slot_size(kernel))?;
        let mi = ring.mminfo();
        let cq = Arc::pin_init(
            pin_init!(Cq {
                events,
                kernel,
                inner <- crate::ffi::sync::new_bh_lock!(
                    Inner {
                        ring: Some(ring),
                        prod: 0,
                        arm: Arm::Off,
                        overrun: false,
                        overruns: 0,
                        dead: false,
                    },
                    "metaroce_cq"
                ),
            }),
            GFP_KERNEL,
        )?;
        Ok(CqCreated { cq, ring: mi })
    }

    /// Appends a completion of QP `qp`; raises the CQ event if armed for it.
    /// Returns `false` if the ring is full: the completion is lost and
    /// `IB_EVENT_CQ_ERR` raised (once per run of lost completions); the
    /// caller decides what the loss means for its QP.
    pub(crate) fn push(&self, wc: &Wc, solicited: bool, qp: QpHandle) -> bool {
        let fire = {
            let mut g = self.inner.lock();
            let Some(ring) = g.ring.as_ref().filter(|_| !g.dead) else {
                return false;
            };
            let next = ring.advance(g.prod, 1);
            if next == ring.consumer() {
                // Overrun: the completion is lost. The consumer hears of it
                // once per overrun (IB_EVENT_CQ_ERR, as rxe_cq_post raises).
                let first = !g.overrun;
                g.overrun = true;
                g.overruns = g.overruns.saturating_add(1);
                drop(g);
                if first {
                    self.events.overrun();
                }
                return false;
            }
            let written = if self.kernel {
                ring.write_cqe(g.prod, &wc.kernel_bytes(qp))
            } else {
                ring.write_cqe(g.prod, &wc.bytes())
            };
            if written.is_err() {
                return false;
            }
            ring.set_producer(next);
            g.prod = next;
            g.overrun = false;
            let fire =
                g.arm == Arm::Next || (g.arm == Arm::Solicited && (solicited || wc.status != 0));
            if fire {
                g.arm = Arm::Off;
            }
            fire
        };
        if fire {
            self.events.fire();
        }
        true
    }

    /// Completions the ring holds (one slot stays free).
    pub(crate) fn capacity(&self) -> u32 {
        self.inner
            .lock()
            .ring
            .as_ref()
            .map_or(0, |r| r.slots().saturating_sub(1))
    }

    /// Adds this CQ to a resource dump (`rdma resource show cq -dd`):
    /// `slots` (completions the ring holds), `used` (completions waiting
    /// for the consumer), `overruns` (completions lost to a full ring),
    /// `armed` (0 no, 1 next completion, 2 solicited only), `kernel` (1: a
    /// kernel consumer's CQ).
    pub(crate) fn fill_res(&self, out: &mut ResAttrs) -> Result {
        // Read under the lock, written after it.
        let (slots, used, overruns, armed) = {
            let g = self.inner.lock();
            let (slots, used) = g.ring.as_ref().map_or((0, 0), |r| {
                (
                    r.slots().saturating_sub(1),
                    r.distance(r.consumer(), g.prod),
                )
            });
            let armed = match g.arm {
                Arm::Off => 0,
                Arm::Next => 1,
                Arm::Solicited => 2,
            };
            (slots, used, g.overruns, armed)
        };
        out.u32(format_args!("slots"), slots)?;
        out.u32(format_args!("used"), used)?;
        out.u32(format_args!("overruns"), overruns)?;
        out.u32(format_args!("armed"), armed)?;
        out.u32(format_args!("kernel"), u32::from(self.kernel))
    }

    /// Arms the CQ; returns whether completions are waiting.
    pub(crate) fn arm(&self, solicited_only: bool) -> bool {
        let mut g = self.inner.lock();
        if g.arm != Arm::Next {
            g.arm = if solicited_only {
                Arm::Solicited
            } else {
                Arm::Next
            };
        }
        g.ring.as_ref().is_some_and(|r| r.consumer() != g.prod)
    }

    /// Kernel CQs (`ib_poll_cq`): hands up to `max` waiting completions,
    /// oldest first, to `f` as slot bytes (see [`Wc::KERNEL_SIZE`]); returns
    /// how many. User CQs are polled by user space: 0.
    pub(crate) fn poll(&self, max: usize, mut f: impl FnMut(&[u8; Wc::KERNEL_SIZE])) -> usize {
        if !self.kernel {
            return 0;
        }
        let g = self.inner.lock();
        let mut n = 0;
        let mut slot = [0u8; Wc::KERNEL_SIZE];
        while n < max {
            let Some(ring) = g.ring.as_ref() else {
                break;
            };
            let cons = ring.consumer();
            if cons == g.prod || ring.read(cons, 0, &mut slot).is_err() {
                break;
            }
            f(&slot);
            ring.set_consumer(ring.advance(cons, 1));
            n += 1;
        }
        n
    }

    /// Replaces the ring by one of at least `cqe` entries mapped into `uc`
    /// (none for a kernel CQ), moving the completions waiting in it
    /// (rxe_cq_resize_queue). `EINVAL` for 0, more than `max_cqe`, or fewer
    /// than are waiting.
    pub(crate) fn resize(&self, cqe: u32, max_cqe: u32, uc: Option<&UContext>) -> Result<MmInfo> {
        if cqe == 0 || cqe > max_cqe || uc.is_none() != self.kernel {
            return Err(EINVAL);
        }
        let new = Queue::new_cq(uc, cqe, slot_size(self.kernel))?;
        let old = {
            let mut g = self.inner.lock();
            let ring = g.ring.as_ref().ok_or(EINVAL)?;
            let cons = ring.consumer();
            let waiting = ring.distance(cons, g.prod);
            if waiting > new.slots() - 1 {
                return Err(EINVAL);
            }
            let mut wc = [0u8; Wc::KERNEL_SIZE];
            let wc = &mut wc[..slot_size(self.kernel)];
            for i in 0..waiting {
                ring.read(ring.advance(cons, i), 0, wc)?;
                new.write_cqe(i, wc)?;
            }
            new.set_consumer(0);
            new.set_producer(waiting);
            g.prod = waiting;
            g.ring.replace(new)
        };
        let mi = self.inner.lock().ring.as_ref().ok_or(EINVAL)?.mminfo();
        // The old ring leaves the mmap table here; pages user space still
        // maps stay until it unmaps them.
        drop(old);
        Ok(mi)
    }

    /// No completion is written after this. Releases the ring here, in
    /// `destroy_cq`: a QP kept alive briefly by
    /// a receive in flight may hold the CQ past the user context, which the
    /// ring's mmap entry must not outlive.
    pub(crate) fn kill(&self) {
        let ring = {
            let mut g = self.inner.lock();
            g.dead = true;
            g.ring.take()
        };
        drop(ring);
    }
}
