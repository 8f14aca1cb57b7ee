// SPDX-License-Identifier: GPL-2.0

//! Events of CQs, QPs and SRQs: one generic source, [`Events`], over the
//! three object types.
//!
//! An event source is handed to the driver at creation and may outlive the
//! object (the driver may keep it in timers or work): the object's
//! `destroy_*` callback detaches it under its lock before the core frees the
//! object, and a detached source raises nothing.

use crate::ffi::bindings as b;
use crate::ffi::sync::BhLock;
use core::ptr;
use kernel::prelude::*;
use kernel::sync::Arc;

/// An object's `event_handler`.
pub(crate) type Handler =
    Option<unsafe extern "C" fn(ev: *mut b::ib_event, ctx: *mut kernel::ffi::c_void)>;

/// A core object type that raises asynchronous events through its
/// `event_handler` (`struct ib_event`).
pub(crate) trait EventObject {
    /// Fills in `ev` for `obj` and returns its handler and context.
    ///
    /// # Safety
    ///
    /// `obj` is a live object of this type.
    unsafe fn prepare(obj: *mut Self, ev: &mut b::ib_event) -> (Handler, *mut kernel::ffi::c_void);

    /// The lock of an event source for `raw`, with a lock class of its own
    /// per object type.
    fn new_lock(raw: Raw<Self>) -> impl PinInit<BhLock<Raw<Self>>>
    where
        Self: Sized;
}

/// `ib_event.element` and the handler of an object, as the three `impl`s
/// below differ only in field names.
macro_rules! event_object {
    ($ty:ty, $elem:ident, $ctx:ident, $lock:literal) => {
        impl EventObject for $ty {
            fn new_lock(raw: Raw<Self>) -> impl PinInit<BhLock<Raw<Self>>> {
                crate::ffi::sync::new_bh_lock!(raw, $lock)
            }

            unsafe fn prepare(
                obj: *mut Self,
                ev: &mut b::ib_event,
            ) -> (Handler, *mut kernel::ffi::c_void) {
                let (device, handler, ctx) =
                    // SAFETY: by the caller's guarantee `obj` is live.
                    unsafe { ((*obj).device, (*obj).event_handler, (*obj).$ctx) };
                ev.device = device;
                ev.element.$elem = obj;
                (handler, ctx)
            }
        }
    };
}

event_object!(b::ib_cq, cq, cq_context, "rdma_cq_events");
event_object!(b::ib_qp, qp, qp_context, "rdma_qp_events");
event_object!(b::ib_srq, srq, srq_context, "rdma_srq_events");

/// An object pointer, null once the object is destroyed.
pub(crate) struct Raw<O>(*mut O);

// SAFETY: the pointer is only dereferenced under the `Events` lock while
// non-null, when the object is alive whatever thread holds it.
unsafe impl<O> Send for Raw<O> {}

/// Raises events on a CQ, QP or SRQ; does nothing once it is destroyed.
///
/// # Invariants
///
/// The pointer under the lock is null or a live object: the object's
/// `destroy_*` callback clears it ([`Events::detach`]) before the core frees
/// the object.
pub(crate) struct Events<O: EventObject>(Arc<BhLock<Raw<O>>>);

impl<O: EventObject> Clone for Events<O> {
    fn clone(&self) -> Self {
        Events(self.0.clone())
    }
}

impl<O: EventObject> Events<O> {
    /// A source for `obj`.
    ///
    /// # Safety
    ///
    /// `obj` stays live until [`Self::detach`] is called.
    pub(super) unsafe fn new(obj: *mut O) -> Result<Self> {
        Ok(Events(Arc::pin_init(O::new_lock(Raw(obj)), GFP_KERNEL)?))
    }

    /// Runs `f` on the object while it lives, under the lock.
    fn with(&self, f: impl FnOnce(*mut O)) {
        let raw = self.0.lock();
        if !raw.0.is_null() {
            f(raw.0);
        }
    }

    /// Raises asynchronous event `event` through the object's
    /// `event_handler`, if it has one. Call without holding locks the
    /// handler may take.
    fn raise(&self, event: b::ib_event_type) {
        self.with(|obj| {
            let mut ev = b::ib_event {
                event,
                ..Default::default()
            };
            // SAFETY: non-null under the lock means live (type invariant).
            let (handler, ctx) = unsafe { O::prepare(obj, &mut ev) };
            if let Some(h) = handler {
                // SAFETY: the object's handler, called as the core does, with
                // an event that lives for the call.
                unsafe { h(&mut ev, ctx) };
            }
        })
    }

    /// Detaches the source: nothing is raised afterwards.
    pub(super) fn detach(&self) {
        self.0.lock().0 = ptr::null_mut();
    }
}

/// A CQ's events.
pub(crate) type CqEvents = Events<b::ib_cq>;
/// A QP's events.
pub(crate) type QpEvents = Events<b::ib_qp>;
/// An SRQ's events.
pub(crate) type SrqEvents = Events<b::ib_srq>;

impl Events<b::ib_cq> {
    /// Raises a completion event (the CQ's `comp_handler`: the uverbs event
    /// channel for user CQs, the consumer's handler for kernel CQs). Call
    /// without holding locks the handler may take (it may re-arm the CQ).
    pub(crate) fn fire(&self) {
        self.with(|cq| {
            // SAFETY: non-null under the lock means live (type invariant).
            unsafe { b::metaroce_cq_event(cq) }
        })
    }

    /// Raises `IB_EVENT_CQ_ERR` (IBTA 11.6.3.1: a completion was lost to a
    /// full CQ), as rxe does on overrun.
    pub(crate) fn overrun(&self) {
        self.raise(b::ib_event_type_IB_EVENT_CQ_ERR);
    }
}

impl Events<b::ib_qp> {
    /// Raises `IB_EVENT_QP_LAST_WQE_REACHED` (IBTA 11.6.3.1): a QP on an SRQ
    /// entered the error state and takes no more WQEs from it
    /// (`ib_drain_qp` of such a QP waits for it).
    pub(crate) fn last_wqe_reached(&self) {
        self.raise(b::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED);
    }

    /// Raises `IB_EVENT_SQ_DRAINED` (IBTA 10.3.1.2, 11.6.3.1): a QP moved to
    /// SQD with asynchronous notification has no send WQE in progress left.
    pub(crate) fn sq_drained(&self) {
        self.raise(b::ib_event_type_IB_EVENT_SQ_DRAINED);
    }
}

impl Events<b::ib_srq> {
    /// Raises `IB_EVENT_SRQ_LIMIT_REACHED` (IBTA 11.6.3.1).
    pub(crate) fn limit_reached(&self) {
        self.raise(b::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED);
    }
}
