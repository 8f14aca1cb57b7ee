// SPDX-License-Identifier: GPL-2.0

//! Device counters (`rdma statistic show link DEV/1`): the driver names them
//! ([`Driver::COUNTERS`]) and fills their values ([`Driver::counters`]).

use super::device::Device;
use super::{Adapter, Driver};
use crate::ffi::bindings as b;
use core::ptr;
use kernel::ffi::{c_int, c_ulong};
use kernel::str::CStr;

/// The name of one counter (`struct rdma_stat_desc`).
#[repr(transparent)]
pub(crate) struct CounterDesc(b::rdma_stat_desc);

impl CounterDesc {
    /// A counter named `name`.
    pub(crate) const fn new(name: &'static CStr) -> Self {
        CounterDesc(b::rdma_stat_desc {
            name: name.as_char_ptr(),
            flags: 0,
            priv_: ptr::null(),
        })
    }
}

impl<T: Driver> Adapter<T> {
    /// `ib_device_ops.alloc_hw_port_stats`: the statistics structure of
    /// [`Driver::COUNTERS`].
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core.
    pub(super) unsafe extern "C" fn alloc_hw_port_stats(
        _ib: *mut b::ib_device,
        _port: u32,
    ) -> *mut b::rdma_hw_stats {
        let descs = T::COUNTERS;
        // SAFETY: `descs` is `'static` (a constant) and `CounterDesc` is a
        // transparent `rdma_stat_desc` whose names are `'static` C strings.
        unsafe {
            b::rdma_alloc_hw_stats_struct(
                descs.as_ptr().cast(),
                descs.len() as c_int,
                b::RDMA_HW_STATS_DEFAULT_LIFESPAN as c_ulong,
            )
        }
    }

    /// `ib_device_ops.get_hw_stats`: fills every counter.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, holding the lock of `stats`, with a live
    /// device of ours and the statistics structure that
    /// [`Self::alloc_hw_port_stats`] returned.
    pub(super) unsafe extern "C" fn get_hw_stats(
        ib: *mut b::ib_device,
        stats: *mut b::rdma_hw_stats,
        _port: u32,
        _index: c_int,
    ) -> c_int {
        // SAFETY: the core passes a live device of ours.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        // SAFETY: `stats` is valid; `num_counters` is immutable.
        let num = unsafe { (*stats).num_counters };
        let n = (num.max(0) as usize).min(T::COUNTERS.len());
        // SAFETY: `stats` was allocated with `num_counters` values (at
        // least `n`), which the core's lock gives us alone for the call.
        let values = unsafe { (*stats).value.as_mut_slice(n) };
        values.fill(0);
        T::counters(dev, values);
        n as c_int
    }
}
