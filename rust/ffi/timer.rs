// SPDX-License-Identifier: GPL-2.0

//! The monotonic clock and one-shot high-resolution timers (`hrtimer`).
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
//! The timer is an `hrtimer` on `CLOCK_MONOTONIC` in absolute soft mode
//! (`HRTIMER_MODE_ABS_SOFT`): it expires in softirq context, no earlier than
//! its deadline and at most [`SLACK_NS`] later plus the softirq's latency,
//! whatever `HZ` is (a `timer_list` resolves whole jiffies: 4 ms at HZ=250).
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
//! `hrtimer_start` does not say whether it queued an idle timer or moved a
//! queued one, so who holds that reference is recorded under the timer's own
//! spinlock (`lock`, a leaf, taken with interrupts saved: `arm` may run with
//! them off), which serializes `arm`, `cancel`, `shutdown` and the expiry.
//!
//! # Invariants
//!
//! - Every `Timer<T>` is the field of a `T` that [`HasTimer::OFFSET`] names
//!   (the safety contract of [`HasTimer`]); `raw` was initialized by
//!   `hrtimer_init` with `expired::<T>` as its function, `lock` by
//!   `spin_lock_init`.
//! - `holds_ref` is read and written only under `lock`. While it is true the
//!   timer owns exactly one reference to the `Arc<T>` holding it (taken by
//!   [`Timer::arm`] from [`Arc::into_raw`]); it is true whenever the hrtimer
//!   is queued, and stays true from an expiry until `expired` takes `lock`.
//!   Whoever sets it false under `lock` owns that reference: `expired` (when
//!   the hrtimer was not queued again meanwhile), a `cancel` whose
//!   `hrtimer_try_to_cancel` dequeued it, or `shutdown` once no callback runs.
//! - No `arm` queues the hrtimer once `shut` is set (both under `lock`).

use super::bindings as b;
use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

/// How much later than its deadline the kernel may expire a [`Timer`] to
/// batch it with others (`hrtimer_start_range_ns`'s `delta`), ns: the `fq`
/// qdisc's default pacing slack.
pub(crate) const SLACK_NS: u64 = 10_000;

/// `ktime_get_ns()`: CLOCK_MONOTONIC, in nanoseconds.
pub(crate) fn now_ns() -> u64 {
    // SAFETY: `ktime_get` has no preconditions (any context).
    let t = unsafe { b::ktime_get() };
    // CLOCK_MONOTONIC is never negative.
    t as u64
}

/// One timer tick (jiffy, `TICK_NSEC`) in nanoseconds (4 ms at HZ=250, 1 ms
/// at HZ=1000).
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
    /// [`Timer::arm`] that found it inactive (arming a queued timer moves
    /// it). May re-arm with
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
#[pin_data]
pub(crate) struct Timer<T> {
    /// First field: the `hrtimer` pointer is the `Timer` pointer.
    #[pin]
    raw: Opaque<b::hrtimer>,
    /// Serializes arming, cancelling and the expiry (type invariants).
    #[pin]
    lock: Opaque<b::spinlock_t>,
    /// Whether the timer owns a reference to its owner; under `lock`.
    holds_ref: UnsafeCell<bool>,
    /// Set by [`Timer::shutdown`]: no more arming, no more callbacks.
    shut: AtomicBool,
    /// The CLOCK_MONOTONIC deadline of the latest [`Timer::arm`], in ns.
    deadline: AtomicU64,
    _owner: PhantomData<fn(T) -> T>,
}

// SAFETY: an `hrtimer` may be started, cancelled and expire on any CPU; the
// kernel serializes that with the timer base lock, and `holds_ref` is only
// touched under `lock` (type invariants). `T` is only reached through
// `Arc<T>`, and `T: Send + Sync` (`TimerCallback`).
unsafe impl<T: TimerCallback> Send for Timer<T> {}
// SAFETY: see `Send`: every method takes `&self` and one of those locks.
unsafe impl<T: TimerCallback> Sync for Timer<T> {}

/// `lock` held with interrupts saved; unlocks on drop.
struct Locked<'a, T> {
    timer: &'a Timer<T>,
    flags: kernel::ffi::c_ulong,
}

impl<T> Locked<'_, T> {
    /// Sets `holds_ref`, returning the previous value.
    fn set_holds_ref(&mut self, v: bool) -> bool {
        // SAFETY: `lock` is held (type invariants of `Timer`).
        unsafe { core::mem::replace(&mut *self.timer.holds_ref.get(), v) }
    }
}

impl<T> Drop for Locked<'_, T> {
    fn drop(&mut self) {
        // SAFETY: `lock` was taken by `Timer::lock` with these flags.
        unsafe { b::metaroce_spin_unlock_irqrestore(self.timer.lock.get(), self.flags) };
    }
}

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
            // SAFETY: `slot` is the final, pinned address of the `hrtimer`;
            // `hrtimer_init` initializes it with our function.
            raw <- Opaque::ffi_init(|slot| unsafe {
                b::metaroce_hrtimer_setup(slot, Some(expired::<T>))
            }),
            // SAFETY: `slot` is the final, pinned address of the lock.
            lock <- Opaque::ffi_init(|slot| unsafe { b::metaroce_timer_lock_init(slot) }),
            holds_ref: UnsafeCell::new(false),
            shut: AtomicBool::new(false),
            deadline: AtomicU64::new(0),
            _owner: PhantomData,
        })
    }

    /// Takes `lock`, saving and disabling interrupts.
    fn lock(&self) -> Locked<'_, T> {
        // SAFETY: `lock` was initialized by `new` and is pinned; any context.
        let flags = unsafe { b::metaroce_spin_lock_irqsave(self.lock.get()) };
        Locked { timer: self, flags }
    }

    /// The owner of this timer.
    fn owner(&self) -> *const T {
        // By the type invariants `self` is the field at `OFFSET` of a `T`.
        core::ptr::from_ref::<Self>(self)
            .cast::<u8>()
            .wrapping_sub(T::OFFSET)
            .cast::<T>()
    }

    /// Gives back the reference the timer owned.
    ///
    /// # Safety
    ///
    /// The caller set `holds_ref` from true to false under `lock`, so it owns
    /// that reference (type invariants); `lock` is no longer held (the last
    /// reference may free the timer with its owner).
    unsafe fn put_ref(&self) {
        // SAFETY: the reference came from `Arc::into_raw` of the `Arc`
        // holding our owner, whose data pointer is `owner()`.
        drop(unsafe { Arc::from_raw(self.owner()) });
    }

    /// (Re)arms the timer of `owner` to fire at the CLOCK_MONOTONIC time
    /// `deadline_ns` (see [`now_ns`]): never earlier, and at most
    /// [`SLACK_NS`] later plus the softirq's latency. A past deadline fires
    /// at once (in softirq). Like `mod_timer`, an armed timer is moved,
    /// earlier or later. Does nothing after [`Timer::shutdown`]. Any context.
    pub(crate) fn arm(owner: &Arc<T>, deadline_ns: u64) {
        let timer = Self::of(owner);
        let mut g = timer.lock();
        if timer.shut.load(Ordering::Relaxed) {
            return;
        }
        // Already queued for this deadline (the pump re-arms after every
        // datagram, mostly for the same one): nothing to do.
        let same = timer.deadline.load(Ordering::Relaxed) == deadline_ns;
        // SAFETY: `raw` was initialized by `new` and is pinned.
        if same && unsafe { b::metaroce_hrtimer_is_queued(timer.raw.get()) } {
            return;
        }
        timer.deadline.store(deadline_ns, Ordering::Relaxed);
        if !g.set_holds_ref(true) {
            // The timer's reference, given back by whoever clears
            // `holds_ref` (type invariants).
            let _ = Arc::into_raw(owner.clone());
        }
        // SAFETY: `raw` was initialized by `new` and is pinned; `lock` (held)
        // is a leaf, and `hrtimer_start` takes only the timer base lock.
        unsafe { b::metaroce_hrtimer_start(timer.raw.get(), deadline_ns, SLACK_NS) };
    }

    /// Disarms a pending timer; returns whether it was pending. A callback
    /// already running (on another CPU) goes on. Any context.
    pub(crate) fn cancel(&self) -> bool {
        let mut g = self.lock();
        // SAFETY: `raw` was initialized by `new` and is pinned;
        // `hrtimer_try_to_cancel` does not wait (any context).
        let dequeued = unsafe { b::hrtimer_try_to_cancel(self.raw.get()) } == 1;
        // A queued timer always holds the reference (type invariants).
        let put = dequeued && g.set_holds_ref(false);
        drop(g);
        if put {
            // SAFETY: we cleared `holds_ref` under `lock`, which is released.
            unsafe { self.put_ref() };
        }
        dequeued
    }

    /// Disarms the timer for good, like `timer_shutdown_sync`: waits for a
    /// running callback to finish, and afterwards no callback runs and
    /// [`Timer::arm`] does nothing. Process or softirq context, but never
    /// from this timer's own callback (it would wait for itself).
    pub(crate) fn shutdown(&self) {
        {
            let _g = self.lock();
            self.shut.store(true, Ordering::Relaxed);
        }
        // No `arm` queues it from here on. `hrtimer_cancel` dequeues it and
        // waits for a running callback.
        // SAFETY: `raw` was initialized by `new` and is pinned; not called
        // from the timer's own callback (documented contract).
        unsafe { b::hrtimer_cancel(self.raw.get()) };
        let put = self.lock().set_holds_ref(false);
        if put {
            // SAFETY: we cleared `holds_ref` under `lock`, which is released
            // (the temporary guard dropped at the end of the statement above).
            unsafe { self.put_ref() };
        }
    }

    /// The deadline of the latest [`Timer::arm`] (CLOCK_MONOTONIC, ns; 0
    /// before the first): read in [`TimerCallback::fired`], how late the
    /// expiry came.
    pub(crate) fn deadline_ns(&self) -> u64 {
        self.deadline.load(Ordering::Relaxed)
    }

    /// Whether [`Timer::shutdown`] has been called.
    pub(crate) fn is_shut_down(&self) -> bool {
        self.shut.load(Ordering::Acquire)
    }
}

/// The `hrtimer` function of every `Timer<T>`.
///
/// # Safety
///
/// Called only by the hrtimer core, for a `Timer<T>` that just expired: it
/// was queued, so `holds_ref` is true and stays so until we take `lock`
/// (type invariants): the owner is alive.
unsafe extern "C" fn expired<T: HasTimer>(t: *mut b::hrtimer) -> b::hrtimer_restart {
    // `raw` is the first field of the `#[repr(C)]` `Timer<T>`.
    // SAFETY: the timer is alive (see above) and lies in its owner.
    let timer = unsafe { &*t.cast::<Timer<T>>() };
    let owner = {
        let mut g = timer.lock();
        // SAFETY: `raw` was initialized by `new` and is pinned.
        if unsafe { b::metaroce_hrtimer_is_queued(timer.raw.get()) } {
            // Armed again since it expired: the queued timer keeps the
            // reference and fires at the new deadline.
            return b::hrtimer_restart_HRTIMER_NORESTART;
        }
        g.set_holds_ref(false);
        // SAFETY: we cleared `holds_ref` under `lock`, so the reference is
        // ours; it came from `Arc::into_raw` of the `Arc` holding the owner.
        unsafe { Arc::from_raw(timer.owner()) }
    };
    if !timer.shut.load(Ordering::Acquire) {
        T::fired(&owner);
    }
    // May be the last reference: drops the owner and the timer with it. The
    // hrtimer core does not touch a timer whose function returned
    // `HRTIMER_NORESTART` (it compares only its address), so that is fine.
    drop(owner);
    b::hrtimer_restart_HRTIMER_NORESTART
}
