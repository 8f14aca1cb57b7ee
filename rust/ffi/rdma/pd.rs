// SPDX-License-Identifier: GPL-2.0

//! Protection domains: the RDMA core allocates them (`size_ib_pd`); a driver
//! only needs to tell them apart.

use super::{Adapter, Driver};
use crate::ffi::bindings as b;
use kernel::ffi::c_int;

/// The identity of a protection domain (IBTA 10.2.3): objects of one PD may
/// be used together, objects of different PDs may not. Only this layer
/// creates one, from the `ib_pd` the RDMA core names; it is never
/// dereferenced, only compared.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) struct PdId(usize);

impl PdId {
    /// The identity of `pd`.
    pub(super) fn of(pd: *mut b::ib_pd) -> Self {
        PdId(pd as usize)
    }
}

impl<T: Driver> Adapter<T> {
    /// `ib_device_ops.alloc_pd`: nothing to do, the core's object is the PD.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core.
    pub(super) unsafe extern "C" fn alloc_pd(
        _pd: *mut b::ib_pd,
        _udata: *mut b::ib_udata,
    ) -> c_int {
        0
    }

    /// `ib_device_ops.dealloc_pd`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core.
    pub(super) unsafe extern "C" fn dealloc_pd(
        _pd: *mut b::ib_pd,
        _udata: *mut b::ib_udata,
    ) -> c_int {
        0
    }
}
