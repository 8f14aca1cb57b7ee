// SPDX-License-Identifier: GPL-2.0

//! A spinlock safe against the network softirq (`spin_lock_bh`): the
//! receive path takes QP, CQ and MR locks in softirq context, so process
//! context must hold them with bottom halves disabled, or a softirq that runs
//! on the same CPU while the lock is held (e.g. when a transmit re-enables
//! bottom halves) spins on it forever.
//!
//! Kernel verbs consumers may call in with hard interrupts disabled (ib_mad
//! posts under `spin_lock_irqsave`, ib_cm creates AHs under one). Then no
//! softirq can run on this CPU, and `local_bh_enable` must not be called
//! (it would run softirqs with interrupts off): the lock is taken plainly.
//! Code that transmits must not run then (see [`irqs_disabled`]).

use super::bindings as b;
use core::ops::{Deref, DerefMut};
use kernel::prelude::*;
use kernel::sync::lock::{spinlock::SpinLockBackend, Guard};
use kernel::sync::SpinLock;

/// Whether hard interrupts are disabled on this CPU (`irqs_disabled()`):
/// nothing may be transmitted then (the network stack re-enables bottom
/// halves); defer it to a timer or softirq.
///
/// On x86-64 without `CONFIG_PARAVIRT_XXL` (where `arch_local_save_flags`
/// is the `pushf` it is here) the flag is read inline, as the kernel's own
/// `irqs_disabled()` does: this runs on every lock of a QP. Elsewhere, a
/// call to the C macro.
#[cfg(all(target_arch = "x86_64", not(CONFIG_PARAVIRT_XXL)))]
#[inline(always)]
pub(crate) fn irqs_disabled() -> bool {
    /// X86_EFLAGS_IF.
    const IF: u64 = 1 << 9;
    let flags: u64;
    // SAFETY: pushes RFLAGS and pops it into a register: touches only the
    // stack below the stack pointer (no `nostack`), no memory Rust sees,
    // and no flags.
    unsafe {
        core::arch::asm!("pushfq", "pop {}", out(reg) flags, options(nomem, preserves_flags));
    }
    flags & IF == 0
}

/// Whether hard interrupts are disabled on this CPU (`irqs_disabled()`): see
/// above.
#[cfg(not(all(target_arch = "x86_64", not(CONFIG_PARAVIRT_XXL))))]
pub(crate) fn irqs_disabled() -> bool {
    // SAFETY: reads this CPU's interrupt flag.
    unsafe { b::metaroce_irqs_disabled() }
}

/// Bottom halves disabled (`local_bh_disable`) while this lives.
pub(crate) struct BhDisabled(core::marker::PhantomData<*mut ()>);

impl BhDisabled {
    /// Disables bottom halves on this CPU (nests).
    pub(crate) fn new() -> Self {
        // SAFETY: paired with `local_bh_enable` in `drop`, on this CPU and
        // in this context: the guard is `!Send` and never leaked by us.
        unsafe { b::metaroce_local_bh_disable() };
        BhDisabled(core::marker::PhantomData)
    }
}

impl Drop for BhDisabled {
    fn drop(&mut self) {
        // SAFETY: paired with the `local_bh_disable` of `new`.
        unsafe { b::metaroce_local_bh_enable() };
    }
}

/// A spinlock taken with bottom halves disabled. Create it with
/// [`new_bh_lock!`].
#[pin_data]
pub(crate) struct BhLock<T> {
    #[pin]
    inner: SpinLock<T>,
}

/// The guard of a [`BhLock`]: unlocks, then re-enables bottom halves (if
/// it disabled them).
pub(crate) struct BhGuard<'a, T> {
    // Field order is drop order: unlock before enabling bottom halves.
    guard: Guard<'a, T, SpinLockBackend>,
    _bh: Option<BhDisabled>,
}

impl<T> BhLock<T> {
    /// Wraps a spinlock initialiser (from `kernel::new_spinlock!`, which
    /// gives it its lockdep class).
    pub(crate) fn new(inner: impl PinInit<SpinLock<T>>) -> impl PinInit<Self> {
        pin_init!(BhLock { inner <- inner })
    }

    /// Disables bottom halves, then locks. With hard interrupts already
    /// disabled only locks: no softirq can interrupt the holder on this CPU,
    /// and bottom halves must not be re-enabled with interrupts off.
    pub(crate) fn lock(&self) -> BhGuard<'_, T> {
        let bh = (!irqs_disabled()).then(BhDisabled::new);
        BhGuard {
            guard: self.inner.lock(),
            _bh: bh,
        }
    }
}

impl<T> Deref for BhGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for BhGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

/// `new_bh_lock!(value, "name")`: a [`BhLock`] initialiser.
macro_rules! new_bh_lock {
    ($t:expr, $name:literal) => {
        $crate::ffi::sync::BhLock::new(kernel::new_spinlock!($t, $name))
    };
}
pub(crate) use new_bh_lock;
