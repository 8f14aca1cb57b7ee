// SPDX-License-Identifier: GPL-2.0

//! Driver attributes of resource-tracking dumps: what `rdma resource show
//! qp -dd` prints after the core's own fields (`fill_res_qp_entry`), as
//! name/value pairs the driver chooses (`rdma_nl_put_driver_u32/u64`).

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

    /// Adds `name = value` (64-bit, decimal). `EMSGSIZE` when the message is
    /// full.
    pub(crate) fn u64(&mut self, name: core::fmt::Arguments<'_>, value: u64) -> Result {
        let n = Name::new(name);
        // SAFETY: as in `u32`.
        let r = unsafe { b::rdma_nl_put_driver_u64(self.msg, n.as_cstr().as_char_ptr(), value) };
        kernel::error::to_result(r)
    }
}

impl<T: Driver> Adapter<T> {
    /// `ib_device_ops.fill_res_qp_entry`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, in process context, with the message of
    /// a running dump and a live QP created by `create_qp`.
    pub(super) unsafe extern "C" fn fill_res_qp_entry(
        msg: *mut b::sk_buff,
        ibqp: *mut b::ib_qp,
    ) -> c_int {
        // SAFETY: by the caller's guarantee `ibqp` is a live QP of ours,
        // whose data is set.
        let o = unsafe { QpObject::<T>::from_raw(ibqp) };
        // Driver attributes go in an RDMA_NLDEV_ATTR_DRIVER nest.
        // SAFETY: `msg` is the core's valid dump message for this call.
        let nest = unsafe { b::metaroce_nla_nest_start_driver(msg) };
        if nest.is_null() {
            return -(b::EMSGSIZE as c_int);
        }
        // INVARIANT: the core's dump message, valid for this call.
        let mut w = ResAttrs { msg };
        match T::fill_res_qp(&o.data().qp, &mut w) {
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
}
