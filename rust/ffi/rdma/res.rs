// SPDX-License-Identifier: GPL-2.0

//! Driver attributes of resource-tracking dumps: what `rdma resource show
//! qp|cq|mr -dd` prints after the core's own fields (`fill_res_qp_entry`,
//! `fill_res_cq_entry`, `fill_res_mr_entry`), as name/value pairs the driver
//! chooses (`rdma_nl_put_driver_u32/u64/string`). PDs have no driver op in
//! the RDMA core (`ib_device_ops` has no `fill_res_pd_entry`).

use super::cq::CqObject;
use super::device::Device;
use super::mr::mr_data;
use super::qp::QpObject;
use super::{Adapter, Driver};
use crate::ffi::bindings as b;
use core::ffi::c_int;
use core::fmt::Write;
use kernel::prelude::*;
use kernel::str::CStr;

/// The netlink message a driver adds its attributes of one object to.
///
/// # Invariants
///
/// `msg` is the valid, writable message of a running resource dump.
pub(crate) struct ResAttrs {
    msg: *mut b::sk_buff,
}

/// Longest attribute name, bytes (with the NUL).
const NAME_MAX: usize = 32;

/// A NUL-terminated name formatted into a fixed buffer (truncated to fit).
struct Name {
    buf: [u8; NAME_MAX],
    len: usize,
}

impl Write for Name {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        for &c in s.as_bytes() {
            if self.len + 1 < NAME_MAX && c != 0 {
                self.buf[self.len] = c;
                self.len += 1;
            }
        }
        Ok(())
    }
}

impl Name {
    fn new(args: core::fmt::Arguments<'_>) -> Self {
        let mut n = Name {
            buf: [0; NAME_MAX],
            len: 0,
        };
        let _ = n.write_fmt(args);
        n
    }

    fn as_cstr(&self) -> &CStr {
        // `len < NAME_MAX`, the byte at `len` is 0 and none before it is.
        CStr::from_bytes_with_nul(&self.buf[..=self.len]).unwrap_or(kernel::c_str!("?"))
    }
}

impl ResAttrs {
    /// Adds `name = value` (printed in decimal). `EMSGSIZE` when the message
    /// is full.
    pub(crate) fn u32(&mut self, name: core::fmt::Arguments<'_>, value: u32) -> Result {
        let n = Name::new(name);
        // SAFETY: `msg` is valid (type invariant); the name is a
        // NUL-terminated string that outlives the call (netlink copies it).
        let r = unsafe { b::rdma_nl_put_driver_u32(self.msg, n.as_cstr().as_char_ptr(), value) };
        kernel::error::to_result(r)
    }

    /// Adds `name = value` (a string).  `EMSGSIZE` when the message is full.
    pub(crate) fn str(&mut self, name: core::fmt::Arguments<'_>, value: &CStr) -> Result {
        let n = Name::new(name);
        // SAFETY: `msg` is valid (type invariant); both strings are
        // NUL-terminated and outlive the call (netlink copies them).
        let r = unsafe {
            b::rdma_nl_put_driver_string(self.msg, n.as_cstr().as_char_ptr(), value.as_char_ptr())
        };
        kernel::error::to_result(r)
    }

    /// Adds `name = value` (64-bit, decimal). `EMSGSIZE` when the message is
    /// full.
    pub(crate) fn u64(&mut self, name: core::fmt::Arguments<'_>, value: u64) -> Result {
        let n = Name::new(name);
        // SAFETY: as in `u32`.
        let r = unsafe { b::rdma_nl_put_driver_u64(self.msg, n.as_cstr().as_char_ptr(), value) };
        kernel::error::to_result(r)
    }
}

/// Runs `fill` on the driver-attribute nest of `msg`: closes the nest on
/// success, cancels it (trimming what it holds) on error; 0 or the errno.
///
/// # Safety
///
/// `msg` is the valid, writable message of a running resource dump, for the
/// call.
unsafe fn driver_nest(msg: *mut b::sk_buff, fill: impl FnOnce(&mut ResAttrs) -> Result) -> c_int {
    // Driver attributes go in an RDMA_NLDEV_ATTR_DRIVER nest.
    // SAFETY: `msg` is valid (the caller's guarantee).
    let nest = unsafe { b::metaroce_nla_nest_start_driver(msg) };
    if nest.is_null() {
        return -(b::EMSGSIZE as c_int);
    }
    // INVARIANT: the core's dump message, valid for this call.
    let mut w = ResAttrs { msg };
    match fill(&mut w) {
        Ok(()) => {
            // SAFETY: `nest` was opened in `msg` above and not closed.
            unsafe { b::metaroce_nla_nest_end(msg, nest) };
            0
        }
        Err(e) => {
            // SAFETY: as above; cancelling trims what the nest holds.
            unsafe { b::metaroce_nla_nest_cancel(msg, nest) };
            e.to_errno()
        }
    }
}

impl<T: Driver> Adapter<T> {
    /// `ib_device_ops.fill_res_qp_entry`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, in process context, with the message of
    /// a running dump and a live QP created by `create_qp` (the dump holds
    /// its restrack reference, which its destruction waits for).
    pub(super) unsafe extern "C" fn fill_res_qp_entry(
        msg: *mut b::sk_buff,
        ibqp: *mut b::ib_qp,
    ) -> c_int {
        // SAFETY: by the caller's guarantee `ibqp` is a live QP of ours,
        // whose data is set.
        let o = unsafe { QpObject::<T>::from_raw(ibqp) };
        // SAFETY: the core's dump message, valid for this call.
        unsafe { driver_nest(msg, |w| T::fill_res_qp(&o.data().qp, w)) }
    }

    /// `ib_device_ops.fill_res_cq_entry`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, in process context, with the message of
    /// a running dump and a live CQ created by `create_cq` (held as above).
    pub(super) unsafe extern "C" fn fill_res_cq_entry(
        msg: *mut b::sk_buff,
        ibcq: *mut b::ib_cq,
    ) -> c_int {
        // SAFETY: by the caller's guarantee `ibcq` is a live CQ of ours,
        // whose data is set (the core tracks a CQ only once created).
        let o = unsafe { CqObject::<T>::from_raw(ibcq) };
        // SAFETY: the core's dump message, valid for this call.
        unsafe { driver_nest(msg, |w| T::fill_res_cq(&o.data().cq, w)) }
    }

    /// `ib_device_ops.fill_res_mr_entry`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, in process context, with the message of
    /// a running dump and a live MR of ours (held as above, so `dereg_mr`
    /// has not freed it).
    pub(super) unsafe extern "C" fn fill_res_mr_entry(
        msg: *mut b::sk_buff,
        ibmr: *mut b::ib_mr,
    ) -> c_int {
        // SAFETY: a live MR of ours on a live device of ours (the caller's
        // guarantee), for the call.
        let (dev, data) = unsafe { (Device::<T>::from_raw((*ibmr).device), mr_data::<T>(ibmr)) };
        // SAFETY: the core's dump message, valid for this call.
        unsafe { driver_nest(msg, |w| T::fill_res_mr(dev, data, w)) }
    }
}
