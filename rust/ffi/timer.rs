// SPDX-License-Identifier: GPL-2.0

//! The monotonic clock and one-shot kernel timers (`timer_list`).
//!
//! A [`Timer<T>`] is a field of its owner `T`, which lives in an [`Arc`].
//! `T` implements [`TimerCallback`] and, through [`impl_has_timer!`],
//! [`HasTimer`], which locates the field (as the kernel crate's workqueue
//! locates a `Work` with `HasWork`). On expiry the callback gets the owner:
//!
//! ```ignore
//! #[pin_data]
//! struct Conn { #[pin] timer: Timer<Conn>, /* ... */ }
//! impl_has_timer! { impl HasTimer for Conn { self.timer } }
//! impl TimerCallback for Conn {
//!     fn fired(this: &Arc<Self>) { /* softirq */ }
//! }
//! let conn = Arc::pin_init(pin_init!(Conn { timer <- Timer::new(), /* ... */ }), GFP_KERNEL)?;
//! Timer::arm(&conn, now_ns() + 1_000_000);
//! conn.timer.cancel();
//! ```
//!
//! An armed timer holds a reference to its owner (an [`Arc`] clone), which
//! the expiry hands to the callback and `cancel`/`shutdown` release. So the
//! owner is never freed while its timer is pending or its callback runs, and
//! the last reference may be dropped anywhere: in any context, even inside
//! the callback itself, with no wait. The flip side: an owner dropped while
//! armed lives until the timer fires, so teardown paths (and module unload,
//! which must not leave a pending timer behind) call [`Timer::shutdown`] or
//! [`Timer::cancel`] first.
//!
//! # Invariants
//!
//! - Every `Timer<T>` is the field of a `T` that [`HasTimer::OFFSET`] names
//!   (the safety contract of [`HasTimer`]), initialized by `timer_setup` with
//!   `expired::<T>` as its function.
//! - While the `timer_list` is pending, the timer owns exactly one reference
//!   to the `Arc<T>` holding it: taken by [`Timer::arm`] when `mod_timer`
//!   finds it inactive, and given back by whoever makes it inactive: the
//!   expiry (`expired`), or a `timer_delete*` that returns 1.

use super::bindings as b;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

/// `ktime_get_ns()`: CLOCK_MONOTONIC, in nanoseconds.
pub(crate) fn now_ns() -> u64 {
    // SAFETY: `ktime_get` has no preconditions (any context).
    let t = unsafe { b::ktime_get() };
    // CLOCK_MONOTONIC is never negative.
    t as u64
}

/// One timer tick (jiffy, `TICK_NSEC`) in nanoseconds: the resolution of a
/// [`Timer`] (4 ms at HZ=250, 1 ms at HZ=1000).
pub(crate) fn tick_ns() -> u64 {
    // SAFETY: returns a compile-time constant of the kernel; no preconditions.
    unsafe { b::metaroce_tick_ns() }
}

/// `msleep()`: sleeps at least `ms` milliseconds (process context only).
pub(crate) fn msleep(ms: u32) {
    // SAFETY: `msleep` only sleeps; callers are in process context, as the
    // kernel's `might_sleep` check in it enforces.
    unsafe { b::msleep(ms) };
}

/// The owner of a [`Timer`]: what runs when it fires.
pub(crate) trait TimerCallback: Send + Sync + Sized + 'static {
    /// Called in softirq context when the timer expires, at most once per
    /// [`Timer::arm`] that found it inactive. May re-arm with
    /// `Timer::arm(this, …)`; must not call [`Timer::shutdown`] on its own
    /// timer (that waits for this very callback); must not sleep.
    fn fired(this: &Arc<Self>);
}

/// Locates the [`Timer`] field of `Self`.
///
/// # Safety
///
/// `OFFSET` is the byte offset of a field of type `Timer<Self>` in `Self`.
/// Implement it with [`impl_has_timer!`], which guarantees that.
pub(crate) unsafe trait HasTimer: TimerCallback {
    /// Offset of the `Timer<Self>` field.
    const OFFSET: usize;
}

/// Implements [`HasTimer`] for a type with a `Timer<Self>` field.
macro_rules! impl_has_timer {
    (impl HasTimer for $self:ty { self.$field:ident }) => {
        // The field has type `Timer<Self>`.
        const _: () = {
            #[allow(dead_code)]
            fn check(s: &$self) -> &$crate::ffi::timer::Timer<$self> {
                &s.$field
            }
        };
        // SAFETY: the field has type `Timer<Self>` (checked just above) and
        // `OFFSET` is its offset.
        unsafe impl $crate::ffi::timer::HasTimer for $self {
            const OFFSET: usize = ::core::mem::offset_of!($self, $field);
        }
    };
}
pub(crate) use impl_has_timer;

/// A one-shot timer in a field of `T` (see the module documentation).
#[repr(C)]
#[pin_data(PinnedDrop)]
pub(crate) struct Timer<T> {
    /// First field: the `timer_list` pointer is the `Timer` pointer.
    #[pin]
    raw: Opaque<b::timer_list>,
    /// Set by [`Timer::shutdown`]: no more arming, no more callbacks.
    shut: AtomicBool,
    /// The CLOCK_MONOTONIC deadline of the latest [`Timer::arm`], in ns: an
    /// expiry before it is not a firing (see `expired`).
    deadline: AtomicU64,
    _owner: PhantomData<fn(T) -> T>,
}

// SAFETY: a `timer_list` may be armed, deleted and fired on any CPU; the
// kernel serializes that with the timer base lock. `T` is only reached
// through `Arc<T>`, and `T: Send + Sync` (`TimerCallback`).
unsafe impl<T: TimerCallback> Send for Timer<T> {}
// SAFETY: see `Send`: every method takes `&self` and the kernel's locking.
unsafe impl<T: TimerCallback> Sync for Timer<T> {}

impl<T: HasTimer> Timer<T> {
    /// The timer field of `owner`.
    fn of(owner: &T) -> &Self {
        let owner = core::ptr::from_ref::<T>(owner).cast::<u8>();
        // SAFETY: by the safety contract of `HasTimer` a `Timer<T>` lives at
        // `OFFSET` inside `*owner`, borrowed as long as `owner`.
        unsafe { &*owner.add(T::OFFSET).cast::<Self>() }
    }

    /// An inactive timer, to be placed in a field of `T` (in an `Arc<T>`).
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is the final, pinned address of the
            // `timer_list`; `timer_setup` initializes it with our callback.
            raw <- Opaque::ffi_init(|slot| unsafe {
                b::metaroce_timer_setup(slot, Some(expired::<T>))
            }),
            shut: AtomicBool::new(false),
            deadline: AtomicU64::new(0),
            _owner: PhantomData,
        })
    }

    /// The owner of this timer.
    fn owner(&self) -> *const T {
        // By the type invariants `self` is the field at `OFFSET` of a `T`.
        core::ptr::from_ref::<Self>(self)
            .cast::<u8>()
            .wrapping_sub(T::OFFSET)
            .cast::<T>()
    }

    /// Gives back the reference held by a pending timer that was just made
    /// inactive by a `timer_delete*` returning 1.
    ///
    /// # Safety
    ///
    /// The caller made the timer inactive from pending, so it owns the
    /// reference the pending timer held (type invariants).
    unsafe fn put_pending_ref(&self) {
        // SAFETY: the pending timer's reference came from `Arc::into_raw` of
        // the `Arc` holding our owner, whose data pointer is `owner()`.
        drop(unsafe { Arc::from_raw(self.owner()) });
    }

    /// (Re)arms the timer of `owner` to fire at the CLOCK_MONOTONIC time
    /// `deadline_ns` (see [`now_ns`]): never earlier (an expiry before it,
    /// from jiffies lagging the clock, waits out the rest), and about one
    /// jiffy later at most (plus the timer wheel's slack for far
    /// deadlines). A past deadline fires at the next tick. Like `mod_timer`, an armed timer is
    /// moved, earlier or later. Does nothing after [`Timer::shutdown`].
    /// Any context.
    pub(crate) fn arm(owner: &Arc<T>, deadline_ns: u64) {
        let timer = Self::of(owner);
        if timer.shut.load(Ordering::Acquire) {
            return;
        }
        timer.deadline.store(deadline_ns, Ordering::Release);
        Self::set(owner, deadline_ns, false);
    }

    /// Points the timer of `owner` at `deadline_ns` with `mod_timer`, or
    /// with `timer_reduce` if `reduce` (which only moves a pending timer
    /// earlier), taking a reference if that armed it.
    fn set(owner: &Arc<T>, deadline_ns: u64, reduce: bool) {
        let timer = Self::of(owner);
        // SAFETY: no preconditions (any context).
        let expires = unsafe { b::metaroce_expires_after_ns(deadline_ns.saturating_sub(now_ns())) };
        let held = Arc::into_raw(owner.clone());
        // SAFETY: the timer was set up by `new` and is pinned in `owner`.
        // Either call returns 1 if the timer was pending (and stays so), 0
        // if it armed an inactive one (`shutdown` never shuts the
        // `timer_list` itself down, so an inactive timer always arms).
        let was_pending = unsafe {
            if reduce {
                b::timer_reduce(timer.raw.get(), expires)
            } else {
                b::mod_timer(timer.raw.get(), expires)
            }
        } != 0;
        if was_pending {
            // The pending timer already holds its reference: drop ours
            // (never the last one: the caller holds `owner`).
            // SAFETY: `held` came from `Arc::into_raw` just above.
            drop(unsafe { Arc::from_raw(held) });
        }
        // Raced with `shutdown`: undo what `mod_timer` may have armed after
        // its `timer_delete_sync`. `expired` skips the callback meanwhile.
        if timer.shut.load(Ordering::SeqCst) {
            timer.cancel();
        }
    }

    /// `timer_delete`: disarms a pending timer; returns whether it was
    /// pending. A callback already running on another CPU goes on. Any
    /// context.
    pub(crate) fn cancel(&self) -> bool {
        // SAFETY: the timer was set up by `new` and is pinned.
        let was_pending = unsafe { b::timer_delete(self.raw.get()) } != 0;
        if was_pending {
            // SAFETY: we made it inactive from pending.
            unsafe { self.put_pending_ref() };
        }
        was_pending
    }

    /// Disarms the timer for good, like `timer_shutdown_sync`: waits for a
    /// running callback to finish, and afterwards no callback runs and
    /// [`Timer::arm`] does nothing. Process or softirq context, but never
    /// from this timer's own callback (it would wait for itself).
    pub(crate) fn shutdown(&self) {
        self.shut.store(true, Ordering::SeqCst);
        // Not `timer_shutdown_sync`: a concurrent `arm` must see whether its
        // `mod_timer` armed the timer (a shut-down `timer_list` ignores
        // `mod_timer` and returns 0), to keep the reference count right.
        // SAFETY: the timer was set up by `new` and is pinned; not called
        // from the timer's own callback (documented contract).
        let was_pending = unsafe { b::timer_delete_sync(self.raw.get()) } != 0;
        if was_pending {
            // SAFETY: we made it inactive from pending.
            unsafe { self.put_pending_ref() };
        }
    }

    /// Whether [`Timer::shutdown`] has been called.
    pub(crate) fn is_shut_down(&self) -> bool {
        self.shut.load(Ordering::Acquire)
    }
}

#[pinned_drop]
impl<T> PinnedDrop for Timer<T> {
    fn drop(self: Pin<&mut Self>) {
        // The owner is being dropped, so no reference to it is left: the
        // timer is not pending (a pending timer holds one), and no callback
        // is using it (a callback holds one until it returns). This may run
        // inside the timer's own callback, after `fired` dropped the last
        // reference; the timer core no longer touches the `timer_list` after
        // the callback returns. So no waiting: just make sure it stays off.
        // SAFETY: the timer was set up by `new` (pin-init) and is pinned;
        // `timer_shutdown` does not wait, and works in any context.
        unsafe { b::timer_shutdown(self.raw.get()) };
    }
}

/// The `timer_list` function of every `Timer<T>`.
///
/// # Safety
///
/// Called only by the timer core, for a pending `Timer<T>` it just made
/// inactive (so the pending reference is ours: type invariants).
unsafe extern "C" fn expired<T: HasTimer>(t: *mut b::timer_list) {
    // `raw` is the first field of the `#[repr(C)]` `Timer<T>`.
    let timer = t.cast::<Timer<T>>();
    // SAFETY: the timer lies at `OFFSET` in its owner, which is alive: we
    // hold the reference the pending timer owned, taken by `arm` from
    // `Arc::into_raw` of the `Arc` holding this owner.
    let owner = unsafe { Arc::from_raw(timer.cast::<u8>().sub(T::OFFSET).cast::<T>()) };
    let timer = Timer::of(&*owner);
    if !timer.shut.load(Ordering::SeqCst) {
        // jiffies can lag CLOCK_MONOTONIC: a (virtual) CPU that stalled has
        // not yet counted the ticks it missed when `arm` reads jiffies, and
        // the jiffy it picked then comes before the deadline. Such an early
        // expiry waits out the rest; `timer_reduce` keeps an earlier
        // deadline that an `arm` elsewhere set meanwhile.
        let deadline = timer.deadline.load(Ordering::Acquire);
        if now_ns() < deadline {
            Timer::set(&owner, deadline, true);
        } else {
            T::fired(&owner);
        }
    }
    // May be the last reference: drops the owner and the timer with it,
    // which is fine here (see `PinnedDrop`).
    drop(owner);
}
