// SPDX-License-Identifier: GPL-2.0

//! Verbs objects the RDMA core allocates with room for driver data
//! (`INIT_RDMA_OBJ_SIZE`), and the helpers every callback shares.

use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::types::Opaque;

/// A verbs object the RDMA core allocated with room for driver data: the
/// core's structure `I` (`ib_cq`, `ib_qp`, `ib_srq`, `ib_ah`, `ib_mw`) first,
/// then the driver's `D`, which is valid once `init` is set (the core zeroes
/// the memory). `size_of::<Object<I, D>>()` is the `size_ib_*` of the ops
/// table.
///
/// # Invariants
///
/// A shared reference to an `Object` exists only while the object is live
/// and its data initialised: `init` is true and `data` is a valid `D`.
#[repr(C)]
pub(crate) struct Object<I, D> {
    ib: Opaque<I>,
    init: bool,
    data: core::mem::MaybeUninit<D>,
}

impl<I, D> Object<I, D> {
    /// Borrows an object whose data is set, for `'a`.
    ///
    /// # Safety
    ///
    /// `ib` starts a live `Object<I, D>` on which [`Self::init`] has run and
    /// [`Self::drop_data`] will not run during `'a`.
    pub(super) unsafe fn from_raw<'a>(ib: *mut I) -> &'a Self {
        // SAFETY: `Opaque<I>` is transparent over `I`, the first field of the
        // `repr(C)` object; the caller guarantees that it is live and set.
        unsafe { &*ib.cast::<Self>() }
    }

    /// The core's structure.
    pub(super) fn as_ptr(&self) -> *mut I {
        self.ib.get()
    }

    /// The driver data, for as long as the object is borrowed.
    pub(super) fn data(&self) -> &D {
        // SAFETY: by the type invariant the data is initialised while a
        // reference to the object exists.
        unsafe { self.data.assume_init_ref() }
    }

    /// Stores the driver data of a new object.
    ///
    /// # Safety
    ///
    /// `ib` starts a live `Object<I, D>` whose data is not set and that no
    /// one else references yet.
    pub(super) unsafe fn init(ib: *mut I, d: D) {
        let o = ib.cast::<Self>();
        // SAFETY: by the caller's guarantee `o` is live and ours alone.
        unsafe {
            (*o).data.write(d);
            (*o).init = true;
        }
    }

    /// Drops the driver data (if set).
    ///
    /// # Safety
    ///
    /// `ib` starts a live `Object<I, D>` that nobody references any more.
    pub(super) unsafe fn drop_data(ib: *mut I) {
        let o = ib.cast::<Self>();
        // SAFETY: by the caller's guarantee `o` is live and ours alone; the
        // data is valid when `init` is set (type invariant).
        unsafe {
            if (*o).init {
                (*o).init = false;
                (*o).data.assume_init_drop();
            }
        }
    }
}

/// The return of a `post_*` callback: 0, or the errno with `*bad` set to the
/// request that failed.
///
/// # Safety
///
/// `bad` is valid for a write.
pub(super) unsafe fn post_result<W>(r: Result, bad: *mut *const W, failed: *const W) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            // SAFETY: by the caller's guarantee.
            unsafe { *bad = failed };
            e.to_errno()
        }
    }
}

/// `ERR_PTR(e)`.
pub(super) fn err_ptr<P>(e: Error) -> *mut P {
    e.to_errno() as isize as *mut P
}
