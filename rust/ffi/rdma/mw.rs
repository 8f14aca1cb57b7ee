// SPDX-License-Identifier: GPL-2.0

//! Memory windows: `alloc_mw`, `dealloc_mw`.

use super::device::Device;
use super::object::Object;
use super::pd::PdId;
use super::{Adapter, Driver};
use crate::ffi::bindings as b;
use kernel::error::from_result;
use kernel::ffi::c_int;

/// An MW of driver `T` as the RDMA core allocated it.
pub(super) type MwObject<T> = Object<b::ib_mw, <T as Driver>::Mw>;

impl<T: Driver> Adapter<T> {
    /// `ib_device_ops.alloc_mw`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a zeroed MW object of our size whose
    /// `device`, `pd` and `type` are set.
    pub(super) unsafe extern "C" fn alloc_mw(
        ibmw: *mut b::ib_mw,
        _udata: *mut b::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: the core set the MW's `device` (ours), `pd` and `type`.
            let (dev, pd, t) = unsafe {
                (
                    Device::<T>::from_raw((*ibmw).device),
                    (*ibmw).pd,
                    (*ibmw).type_,
                )
            };
            let c = T::alloc_mw(dev, PdId::of(pd), t)?;
            // SAFETY: the core's MW object, not yet visible to anyone else.
            unsafe { (*ibmw).rkey = c.rkey };
            // SAFETY: as above: live, of our size, its data not yet set.
            unsafe { MwObject::<T>::init(ibmw, c.mw) };
            Ok(0)
        })
    }

    /// `ib_device_ops.dealloc_mw`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with an MW from [`Self::alloc_mw`].
    pub(super) unsafe extern "C" fn dealloc_mw(ibmw: *mut b::ib_mw) -> c_int {
        {
            // SAFETY: a live MW of ours on a device of ours.
            let (dev, o) = unsafe {
                (
                    Device::<T>::from_raw((*ibmw).device),
                    MwObject::<T>::from_raw(ibmw),
                )
            };
            T::dealloc_mw(dev, o.data());
        }
        // SAFETY: the borrows have ended; nothing uses the MW after this call.
        unsafe { MwObject::<T>::drop_data(ibmw) };
        0
    }
}
