// SPDX-License-Identifier: GPL-2.0

//! Work a received datagram leaves for the end of its receive batch.
//!
//! A NIC's NAPI poll hands the stack up to a budget of datagrams in one
//! `NET_RX` softirq run; under load it is many (a TCG guest's virtio-net
//! delivered 11 per poll during `ib_write_bw`). What a connection sends in
//! answer, its ACKs above all, is worth building once per batch, not once per
//! datagram: one ACK then covers every packet of the batch. A
//! [`Deferred<T>`] field lets the receive path ask for that: [`Deferred::queue`]
//! adds the owner to this CPU's list, at most once until it has run, and
//! [`DeferredCallback::run`] is called for it in softirq context once the
//! batch has been delivered. Each CPU's list has a NAPI context (on a dummy
//! `net_device`), scheduled by the first owner queued: `net_rx_action`
//! polls it once the NAPI contexts already scheduled on this CPU (the NIC's,
//! whose poll delivered the datagram) have had their turn, in the same
//! softirq run (the next one if the NIC's poll used its whole budget). So the
//! wait adds no timer, no other softirq and no context switch. (A BH work
//! item, `system_bh_wq`, does the same from the `TASKLET` softirq, but its
//! bookkeeping cost a TCG guest's `ib_read_lat` 7-8 %:
//! `Documentation/bench-history.rst`, "Data path (stop 54)".)
//!
//! ```ignore
//! #[pin_data]
//! struct Conn { #[pin] defer: Deferred<Conn>, /* ... */ }
//! impl_has_deferred! { impl HasDeferred for Conn { self.defer } }
//! impl DeferredCallback for Conn {
//!     fn run(this: &Arc<Self>) { /* softirq: send what is due */ }
//! }
//! Deferred::queue(&conn); // in the receive path
//! ```
//!
//! A queued owner holds a reference to itself (an [`Arc`] clone), which the
//! run releases; so the owner lives until its run, and a teardown need not
//! wait for it (the run finds whatever the teardown left). If the run holds
//! the last reference, it is dropped in process context (a work item): an
//! owner's drop may sleep. The module's
//! [`Lists`] sets the per-CPU lists up at load and, dropped at unload once
//! nothing can queue any more, waits for every queued run.
//!
//! The C side is `metaroce_defer_*` in `helpers.c`.
//!
//! # Invariants
//!
//! - Every `Deferred<T>` is the field of a `T` that [`HasDeferred::OFFSET`]
//!   names (the safety contract of [`HasDeferred`]); `raw.run` is
//!   `ran::<T>`.
//! - The node is *claimed* from a successful `metaroce_defer_claim` (its
//!   `next` no longer points to itself) until `metaroce_defer_poll` or
//!   `metaroce_defer_reap` releases it, just before it calls `ran`. While
//!   claimed it is on a CPU's list or the list of last references, or about
//!   to be added by its claimer, and it owns exactly one reference to the
//!   `Arc<T>` holding it (taken by [`Deferred::queue`], or by `ran` for the
//!   last reference, from [`Arc::into_raw`]), which `ran` takes back.

use super::bindings as b;
use core::marker::PhantomData;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

/// The owner of a [`Deferred`]: what runs at the end of the batch.
pub(crate) trait DeferredCallback: Send + Sync + Sized + 'static {
    /// Called in softirq context once per [`Deferred::queue`] that found
    /// the owner not queued, after the receive batch of that call. May
    /// queue the owner again; must not sleep.
    fn run(this: &Arc<Self>);
}

/// Locates the [`Deferred`] field of `Self`.
///
/// # Safety
///
/// `OFFSET` is the byte offset of a field of type `Deferred<Self>` in
/// `Self`. Implement it with [`impl_has_deferred!`], which guarantees that.
pub(crate) unsafe trait HasDeferred: DeferredCallback {
    /// Offset of the `Deferred<Self>` field.
    const OFFSET: usize;
}

/// Implements [`HasDeferred`] for a type with a `Deferred<Self>` field.
macro_rules! impl_has_deferred {
    (impl HasDeferred for $self:ty { self.$field:ident }) => {
        // The field has type `Deferred<Self>`.
        const _: () = {
            #[allow(dead_code)]
            fn check(s: &$self) -> &$crate::ffi::defer::Deferred<$self> {
                &s.$field
            }
        };
        // SAFETY: the field has type `Deferred<Self>` (checked just above)
        // and `OFFSET` is its offset.
        unsafe impl $crate::ffi::defer::HasDeferred for $self {
            const OFFSET: usize = ::core::mem::offset_of!($self, $field);
        }
    };
}
pub(crate) use impl_has_deferred;

/// A request to run at the end of the receive batch, in a field of `T`
/// (see the module documentation).
#[repr(C)]
#[pin_data]
pub(crate) struct Deferred<T> {
    /// First field: the `metaroce_defer` pointer is the `Deferred` pointer.
    /// Whether it is queued is its claim (type invariants): no flag of its
    /// own, so that it costs 16 bytes (a QP fits a `kmalloc-1k`).
    #[pin]
    raw: Opaque<b::metaroce_defer>,
    _owner: PhantomData<fn(T) -> T>,
}

// SAFETY: the node is queued and run on any CPU; its claim serializes who
// owns it (type invariants). `T` is only reached through `Arc<T>`, and
// `T: Send + Sync` (`DeferredCallback`).
unsafe impl<T: DeferredCallback> Send for Deferred<T> {}
// SAFETY: see `Send`: every method takes `&self` and the claim decides.
unsafe impl<T: DeferredCallback> Sync for Deferred<T> {}

impl<T: HasDeferred> Deferred<T> {
    /// The field of `owner`.
    fn of(owner: &T) -> &Self {
        let owner = core::ptr::from_ref::<T>(owner).cast::<u8>();
        // SAFETY: by the safety contract of `HasDeferred` a `Deferred<T>`
        // lives at `OFFSET` inside `*owner`, borrowed as long as `owner`.
        unsafe { &*owner.add(T::OFFSET).cast::<Self>() }
    }

    /// A request not queued, to be placed in a field of `T` (in an `Arc<T>`).
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is the final, pinned address of the node, not
            // yet shared; the C side writes both its fields.
            raw <- Opaque::ffi_init(|slot| unsafe {
                b::metaroce_defer_node_init(slot, Some(ran::<T>))
            }),
            _owner: PhantomData,
        })
    }

    /// Has [`DeferredCallback::run`] called for `owner` at the end of this
    /// CPU's receive batch, unless it is queued already (then that run
    /// serves this call too: it comes after it). Any context but NMI; in
    /// the receive path (softirq) the run comes once `NET_RX` is done, in
    /// process context at this CPU's next softirq run.
    pub(crate) fn queue(owner: &Arc<T>) {
        let d = Self::of(owner);
        // SAFETY: `raw` was initialized by `new` and is pinned in `owner`,
        // alive while borrowed.
        if !unsafe { b::metaroce_defer_claim(d.raw.get()) } {
            return;
        }
        // The node's reference (type invariants), given back by `ran`: taken
        // before the node is added, as the run may come at once.
        let _ = Arc::into_raw(owner.clone());
        // SAFETY: we claimed the node, so we alone add it, and the reference
        // just taken keeps it alive until `ran`; the module's `Lists` set
        // the lists up before any QP or connection could exist.
        unsafe { b::metaroce_defer_add(d.raw.get()) };
    }

    /// The owner of this node.
    fn owner(&self) -> *const T {
        // By the type invariants `self` is the field at `OFFSET` of a `T`.
        core::ptr::from_ref::<Self>(self)
            .cast::<u8>()
            .wrapping_sub(T::OFFSET)
            .cast::<T>()
    }
}

/// The `run` function of every `Deferred<T>`'s node.
///
/// # Safety
///
/// Called only by `metaroce_defer_poll` (`put` false) or `metaroce_defer_reap`
/// (`put` true), for a node it took off its list and released: the reference
/// the claim owned is now ours (type invariants), so the owner is alive.
unsafe extern "C" fn ran<T: HasDeferred>(d: *mut b::metaroce_defer, put: bool) {
    // `raw` is the first field of the `#[repr(C)]` `Deferred<T>`.
    // SAFETY: the owner is alive (see above) and the node lies in it.
    let defer = unsafe { &*d.cast::<Deferred<T>>() };
    // SAFETY: the claim's reference (type invariants), from `Arc::into_raw`
    // of the `Arc` holding our owner, whose data pointer is `owner()`.
    let owner = unsafe { Arc::from_raw(defer.owner()) };
    if put {
        // Process context: the last reference, handed over below. Drops the
        // owner and the node with it; the C side does not touch the node
        // after this call.
        drop(owner);
        return;
    }
    T::run(&owner);
    // The last reference (its other holders let go while the run was
    // queued) is not dropped here, in softirq: an owner's drop may sleep
    // (a QP's last reference may hold the device's, and with it the UDP
    // tunnel's). It goes to process context, through the same node.
    let Some(unique) = owner.into_unique_or_drop() else {
        return;
    };
    // We hold the only reference, and the node was released before this
    // call: no one else can claim it.
    // SAFETY: `raw` was initialized by `new` and is pinned in the owner.
    if !unsafe { b::metaroce_defer_claim(defer.raw.get()) } {
        // Not reachable (see above); dropping here beats a leak.
        drop(unique);
        return;
    }
    // The claim's reference again (type invariants), given back by the
    // `put` call above.
    let _ = Arc::into_raw(Arc::from(unique));
    // SAFETY: we claimed the node and the reference keeps it alive until
    // that call; any context.
    unsafe { b::metaroce_defer_put(d) };
}

/// The per-CPU lists and NAPI contexts: set up at module load, drained and
/// torn down at unload. The module holds the one instance; dropping it
/// waits until every queued owner has run, so it is dropped once nothing can
/// queue any more (the devices, and with them the UDP tunnel, are gone).
/// Process context.
pub(crate) struct Lists(());

impl Lists {
    /// Sets up every CPU's list and NAPI context; `ENOMEM` if the dummy
    /// `net_device` cannot be had.
    ///
    /// # Safety
    ///
    /// Called once, at module load, before any [`Deferred::queue`].
    pub(crate) unsafe fn new() -> Result<Self> {
        // SAFETY: once, before any queue (the caller's contract).
        kernel::error::to_result(unsafe { b::metaroce_defer_init() })?;
        Ok(Lists(()))
    }
}

impl Drop for Lists {
    fn drop(&mut self) {
        // SAFETY: module teardown runs in process context.
        unsafe { b::metaroce_defer_drain() };
    }
}
