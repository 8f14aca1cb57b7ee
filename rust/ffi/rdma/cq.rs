// SPDX-License-Identifier: GPL-2.0

//! Completion queues: `create_cq`, `destroy_cq`, `resize_cq`,
//! `req_notify_cq`, `poll_cq`.

use super::device::Device;
use super::event::CqEvents;
use super::object::Object;
use super::{Adapter, Driver};
use crate::ffi::bindings as b;
use crate::ffi::rxe_abi::wc::kernel_wc;
use crate::ffi::udata::UData;
use core::mem::size_of;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;

/// What a CQ keeps: the driver's CQ and its event source.
pub(super) struct CqData<C> {
    pub(super) events: CqEvents,
    pub(super) cq: C,
}

/// A CQ of driver `T` as the RDMA core allocated it.
pub(super) type CqObject<T> = Object<b::ib_cq, CqData<<T as Driver>::Cq>>;

impl<T: Driver> Adapter<T> {
    /// The device of a CQ.
    ///
    /// # Safety
    ///
    /// `ibcq` is a live CQ of a live device of driver `T`, for `'a`.
    unsafe fn cq_device<'a>(ibcq: *mut b::ib_cq) -> &'a Device<T> {
        // SAFETY: by the caller's guarantee `ibcq` is live and its `device`
        // is a live device of ours.
        unsafe { Device::from_raw((*ibcq).device) }
    }

    /// `ib_device_ops.create_cq`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a zeroed CQ object of our size on a
    /// live device, valid attributes and a null or valid attribute bundle.
    pub(super) unsafe extern "C" fn create_cq(
        ibcq: *mut b::ib_cq,
        attr: *const b::ib_cq_init_attr,
        attrs: *mut b::uverbs_attr_bundle,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `driver_udata` is the first field of the bundle, which
            // is null for a kernel consumer's CQ or valid for the call.
            let udata = unsafe { UData::from_raw(attrs.cast()) };
            let uc = udata.ucontext();
            // SAFETY: the core passes valid attributes.
            let (cqe, flags) = unsafe { ((*attr).cqe, (*attr).flags) };
            if uc.is_some() && udata.outlen() < size_of::<b::rxe_create_cq_resp>() {
                return Err(EINVAL);
            }
            if flags != 0 {
                return Err(crate::ffi::errno::EOPNOTSUPP());
            }
            // SAFETY: a live CQ on a device of ours.
            let dev = unsafe { Self::cq_device(ibcq) };
            // SAFETY: the CQ lives until `destroy_cq`, which detaches the
            // event source first.
            let events = unsafe { CqEvents::new(ibcq) }?;
            let c = T::create_cq(dev, cqe, uc, events.clone())?;
            if let Err(e) = udata.write(&c.ring.bytes()) {
                T::destroy_cq(dev, &c.cq);
                events.detach();
                return Err(e);
            }
            let held = T::cq_capacity(&c.cq);
            // SAFETY: the core's CQ object, not yet visible to anyone else.
            unsafe { (*ibcq).cqe = held as c_int };
            // SAFETY: as above: live, of our size, its data not yet set.
            unsafe { CqObject::<T>::init(ibcq, CqData { events, cq: c.cq }) };
            Ok(0)
        })
    }

    /// `ib_device_ops.destroy_cq`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a CQ created by [`Self::create_cq`]
    /// and no QP using it.
    pub(super) unsafe extern "C" fn destroy_cq(
        ibcq: *mut b::ib_cq,
        _udata: *mut b::ib_udata,
    ) -> c_int {
        {
            // SAFETY: a live CQ of ours on a device of ours.
            let (dev, o) = unsafe { (Self::cq_device(ibcq), CqObject::<T>::from_raw(ibcq)) };
            T::destroy_cq(dev, &o.data().cq);
            o.data().events.detach();
        }
        // SAFETY: the borrows above have ended; nothing uses the CQ after
        // this call.
        unsafe { CqObject::<T>::drop_data(ibcq) };
        0
    }

    /// `ib_device_ops.resize_cq`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a CQ created by [`Self::create_cq`].
    pub(super) unsafe extern "C" fn resize_cq(
        ibcq: *mut b::ib_cq,
        cqe: c_int,
        udata: *mut b::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: the core passes a null or valid udata.
            let udata = unsafe { UData::from_raw(udata) };
            let uc = udata.ucontext();
            if uc.is_some() && udata.outlen() < size_of::<b::rxe_resize_cq_resp>() {
                return Err(EINVAL);
            }
            let cqe = u32::try_from(cqe).map_err(|_| EINVAL)?;
            // SAFETY: a live CQ of ours on a device of ours.
            let (dev, o) = unsafe { (Self::cq_device(ibcq), CqObject::<T>::from_raw(ibcq)) };
            let mi = T::resize_cq(dev, &o.data().cq, cqe, uc)?;
            udata.write(&mi.bytes())?;
            let held = T::cq_capacity(&o.data().cq);
            // SAFETY: the core serialises verbs on one CQ object.
            unsafe { (*o.as_ptr()).cqe = held as c_int };
            Ok(0)
        })
    }

    /// `ib_device_ops.req_notify_cq`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a CQ created by [`Self::create_cq`].
    pub(super) unsafe extern "C" fn req_notify_cq(
        ibcq: *mut b::ib_cq,
        flags: b::ib_cq_notify_flags,
    ) -> c_int {
        let solicited = flags & b::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
            == b::ib_cq_notify_flags_IB_CQ_SOLICITED;
        // SAFETY: a live CQ of ours.
        let o = unsafe { CqObject::<T>::from_raw(ibcq) };
        let waiting = T::req_notify_cq(&o.data().cq, solicited);
        c_int::from(waiting && flags & b::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0)
    }

    /// `ib_device_ops.poll_cq`: kernel CQs (user space polls its ring).
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a CQ created by [`Self::create_cq`]
    /// and room for `n` completions at `wc`.
    pub(super) unsafe extern "C" fn poll_cq(
        ibcq: *mut b::ib_cq,
        n: c_int,
        wc: *mut b::ib_wc,
    ) -> c_int {
        let max = usize::try_from(n).unwrap_or(0);
        // SAFETY: a live CQ of ours.
        let o = unsafe { CqObject::<T>::from_raw(ibcq) };
        let mut k = 0usize;
        let got = T::poll_cq(&o.data().cq, max, &mut |slot| {
            if k < max {
                // SAFETY: `k < n`: inside the consumer's array.
                unsafe { wc.add(k).write(kernel_wc(slot)) };
                k += 1;
            }
        });
        got.min(k) as c_int
    }
}
