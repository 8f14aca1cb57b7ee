// SPDX-License-Identifier: GPL-2.0

//! A map from `u32` keys to `Arc<T>` whose lookups take no lock: they run
//! inside an RCU read-side critical section ([`RcuGuard`]) and borrow the
//! value for as long as the section lasts, without touching its reference
//! count. Inserts and removals take the bucket locks of the kernel's
//! resizable hash table (`include/linux/rhashtable.h`), so they do not
//! serialise on one lock, and the table grows and shrinks with the number
//! of keys (about 64 bytes per key).
//!
//! A removed value's reference is dropped after an RCU grace period, in
//! process context (a work item), never in the remover's context: a reader
//! that found it before the removal may use it until its section ends.
//! Dropping the module's [`Reaper`] waits for those deferred drops, before
//! the module's code goes away.
//!
//! The C side is `metaroce_map_*` in `helpers.c`.

use super::bindings as b;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ptr::NonNull;
use kernel::ffi::c_void;
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};

/// An RCU read-side critical section (`rcu_read_lock`) while this lives.
/// Sections nest; the guard is `!Send` (unlocked on the CPU and in the
/// context that locked). Nothing may sleep while it lives: as with the
/// kernel's own `rcu::Guard` and spinlock guards, that is a rule of atomic
/// context the type system does not check (klint's domain), not a property
/// of this type.
pub(crate) struct RcuGuard(PhantomData<*mut ()>);

impl RcuGuard {
    /// Enters a read-side critical section.
    pub(crate) fn new() -> Self {
        // SAFETY: paired with `rcu_read_unlock` in `drop`, in this context:
        // the guard cannot move to another thread, and is never leaked by
        // this module.
        unsafe { b::metaroce_rcu_read_lock() };
        RcuGuard(PhantomData)
    }
}

impl Drop for RcuGuard {
    fn drop(&mut self) {
        // SAFETY: paired with the `rcu_read_lock` of `new`.
        unsafe { b::metaroce_rcu_read_unlock() };
    }
}

/// A `u32 → Arc<T>` map read under RCU.
///
/// # Invariants
///
/// `map` is a live `struct metaroce_map` created with
/// [`Self::release`] as its release function, owned by this value and freed
/// by its `Drop`; every pointer stored in it is `Arc::<T>::into_raw` of a
/// reference the map owns, which the map gives back to `release` exactly
/// once (when the map is freed, or an RCU grace period after the entry is
/// removed).
pub(crate) struct RcuMap<T: Send + Sync + 'static> {
    map: NonNull<b::metaroce_map>,
    _t: PhantomData<Arc<T>>,
}

// SAFETY: the map's C side takes its own locks for inserts and removals and
// needs none for lookups; it holds `Arc<T>` with `T: Send + Sync`, which may
// be dropped on any thread.
unsafe impl<T: Send + Sync + 'static> Send for RcuMap<T> {}
// SAFETY: see `Send`: every method takes `&self` and is safe to call
// concurrently.
unsafe impl<T: Send + Sync + 'static> Sync for RcuMap<T> {}

impl<T: Send + Sync + 'static> RcuMap<T> {
    /// An empty map. `ENOMEM` if it cannot be allocated. Process context.
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: `release` has the C signature the map expects and may be
        // called from process context.
        let m = unsafe { b::metaroce_map_new(Some(Self::release)) };
        let map = NonNull::new(m).ok_or(ENOMEM)?;
        // INVARIANT: a new map, with `release` as its release function.
        Ok(RcuMap {
            map,
            _t: PhantomData,
        })
    }

    /// Gives back a reference the map owned.
    ///
    /// # Safety
    ///
    /// `ptr` is `Arc::<T>::into_raw` of a reference no one else gives back.
    unsafe extern "C" fn release(ptr: *const c_void) {
        // SAFETY: by the function's requirements.
        drop(unsafe { Arc::<T>::from_raw(ptr.cast()) });
    }

    /// The raw value stored under `key`, or null: `Arc::into_raw` of the
    /// map's reference, which lives at least as long as `_g` (see `get`).
    fn lookup(&self, key: u32, _g: &RcuGuard) -> *const T {
        // SAFETY: `map` is live (type invariant); the caller is inside a
        // read-side section (`_g`).
        unsafe { b::metaroce_map_lookup(self.map.as_ptr(), key) }.cast()
    }

    /// The value stored under `key`, borrowed for the read-side section `g`
    /// (and no longer than the map).
    pub(crate) fn get<'a>(&'a self, key: u32, g: &'a RcuGuard) -> Option<ArcBorrow<'a, T>> {
        let p = self.lookup(key, g);
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` came from `Arc::into_raw` (type invariant) and the
        // map's reference is dropped no earlier than a grace period after
        // the entry left the map, which cannot end while `g` lives; nor
        // while `self` is borrowed, since only `Drop` frees the map's
        // entries at once. No `UniqueArc` of a shared value exists.
        Some(unsafe { ArcBorrow::from_raw(p) })
    }

    /// Runs `f` on the value stored under `key`, lent for the call without
    /// a reference count change (inside a read-side section): `None` if
    /// there is none. `f` must not sleep.
    pub(crate) fn with<R>(&self, key: u32, f: impl FnOnce(&Arc<T>) -> R) -> Option<R> {
        let g = RcuGuard::new();
        let p = self.lookup(key, &g);
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` is `Arc::into_raw` of the map's reference, which lives
        // until `g` ends (see `get`); `ManuallyDrop` keeps this `Arc` from
        // giving that reference back, and `f` only borrows it, so the count
        // is never decremented on the map's behalf.
        let a = ManuallyDrop::new(unsafe { Arc::from_raw(p) });
        let r = f(&a);
        drop(g);
        Some(r)
    }

    /// Whether `key` is stored.
    pub(crate) fn contains(&self, key: u32) -> bool {
        let g = RcuGuard::new();
        self.get(key, &g).is_some()
    }

    /// Stores `value` under `key`. `EEXIST` if the key is taken, `ENOMEM`;
    /// then `value` is dropped. Process context.
    pub(crate) fn insert(&self, key: u32, value: Arc<T>) -> Result {
        let p = Arc::into_raw(value);
        // SAFETY: `map` is live; on success the map owns the reference `p`
        // (as the type invariant requires), on failure it does not.
        let r = unsafe { b::metaroce_map_insert(self.map.as_ptr(), key, p.cast()) };
        if r != 0 {
            // SAFETY: the map refused `p`: the reference is still ours.
            drop(unsafe { Arc::from_raw(p) });
            return Err(Error::from_errno(r));
        }
        Ok(())
    }

    /// Removes `key`: true if this call removed it. The map's reference is
    /// dropped an RCU grace period later, in process context. Process or
    /// softirq context.
    pub(crate) fn remove(&self, key: u32) -> bool {
        // SAFETY: `map` is live.
        unsafe { b::metaroce_map_remove(self.map.as_ptr(), key) }
    }

    /// Removes `key` and waits for an RCU grace period: no reader that found
    /// the value is still using it when it is returned (the map's reference,
    /// now the caller's). `None` if `key` is not stored. Sleeps
    /// (`synchronize_rcu_expedited`: tens of microseconds, not the
    /// milliseconds of a normal grace period).
    ///
    /// # Safety
    ///
    /// Process context, and this thread holds no [`RcuGuard`] (hence no
    /// value borrowed from one): a grace period waited for inside a
    /// read-side section could end early where the kernel's RCU is not
    /// preemptible (the wait schedules), and a value borrowed by that
    /// section would then be freed under it.
    pub(crate) unsafe fn take(&self, key: u32) -> Option<Arc<T>> {
        // SAFETY: `map` is live; the caller is in process context and
        // outside any read-side section (this function's requirements).
        let p = unsafe { b::metaroce_map_take(self.map.as_ptr(), key) };
        if p.is_null() {
            return None;
        }
        // SAFETY: the map stored `Arc::into_raw` of a reference it owned
        // (type invariant) and handed it over on removal: it is ours now,
        // and no reader borrows it any longer (a grace period has passed).
        Some(unsafe { Arc::from_raw(p.cast()) })
    }
}

impl<T: Send + Sync + 'static> Drop for RcuMap<T> {
    fn drop(&mut self) {
        // SAFETY: `map` is live and ours; no borrow of `self` (hence no value
        // returned by `get`) outlives this call, so the references still in
        // the map may be dropped now.
        unsafe { b::metaroce_map_free(self.map.as_ptr()) };
    }
}

/// Held by the module after everything that owns an [`RcuMap`]: dropping it
/// waits until the reference of every value removed from any map has been
/// dropped (those drops run the module's code). Process context; may sleep
/// for several grace periods.
pub(crate) struct Reaper(());

impl Reaper {
    /// The module's one reaper.
    pub(crate) fn new() -> Self {
        Reaper(())
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        // SAFETY: module teardown runs in process context.
        unsafe { b::metaroce_map_drain() };
    }
}
