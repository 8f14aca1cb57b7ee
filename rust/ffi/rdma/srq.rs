// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: `create_srq`, `modify_srq`, `query_srq`,
//! `destroy_srq`, `post_srq_recv`.

use super::device::Device;
use super::event::SrqEvents;
use super::object::{post_result, Object};
use super::pd::PdId;
use super::{Adapter, Driver};
use crate::ffi::bindings as b;
use crate::ffi::udata::UData;
use crate::ffi::wr::RecvWrs;
use core::mem::size_of;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;

/// SRQ sizes (`struct ib_srq_attr`).
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct SrqAttr {
    pub(crate) max_wr: u32,
    pub(crate) max_sge: u32,
    pub(crate) srq_limit: u32,
}

/// What an SRQ keeps: the driver's SRQ and its event source.
pub(super) struct SrqData<S> {
    pub(super) events: SrqEvents,
    pub(super) srq: S,
}

/// An SRQ of driver `T` as the RDMA core allocated it.
pub(super) type SrqObject<T> = Object<b::ib_srq, SrqData<<T as Driver>::Srq>>;

impl<T: Driver> Adapter<T> {
    /// The device and object of a live SRQ of ours.
    ///
    /// # Safety
    ///
    /// `ibsrq` is a live SRQ created by [`Self::create_srq`], for `'a`.
    unsafe fn srq<'a>(ibsrq: *mut b::ib_srq) -> (&'a Device<T>, &'a SrqObject<T>) {
        // SAFETY: by the caller's guarantee the SRQ and its device are ours
        // and live, and its data is set.
        unsafe {
            (
                Device::from_raw((*ibsrq).device),
                SrqObject::<T>::from_raw(ibsrq),
            )
        }
    }

    /// `ib_device_ops.create_srq`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a zeroed SRQ object of our size whose
    /// `device` and `pd` are set, valid attributes, and a null or valid udata.
    pub(super) unsafe extern "C" fn create_srq(
        ibsrq: *mut b::ib_srq,
        init: *mut b::ib_srq_init_attr,
        udata: *mut b::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: the core passes a null or valid udata.
            let udata = unsafe { UData::from_raw(udata) };
            let uc = udata.ucontext();
            // SAFETY: the core passes valid attributes, ours for the call.
            let ia = unsafe { &mut *init };
            // SAFETY: the core set the SRQ's `device` (ours) and `pd`.
            let (dev, pd) = unsafe { (Device::<T>::from_raw((*ibsrq).device), (*ibsrq).pd) };
            if ia.srq_type != b::ib_srq_type_IB_SRQT_BASIC {
                return Err(crate::ffi::errno::EOPNOTSUPP());
            }
            if uc.is_some() && udata.outlen() < size_of::<b::rxe_create_srq_resp>() {
                return Err(EINVAL);
            }
            let mut a = SrqAttr {
                max_wr: ia.attr.max_wr,
                max_sge: ia.attr.max_sge,
                srq_limit: ia.attr.srq_limit,
            };
            // SAFETY: the SRQ lives until `destroy_srq`, which detaches the
            // event source first.
            let events = unsafe { SrqEvents::new(ibsrq) }?;
            let c = T::create_srq(dev, PdId::of(pd), &mut a, uc, events.clone())?;
            let mut resp = [0u8; 24];
            resp[..16].copy_from_slice(&c.ring.bytes());
            resp[16..20].copy_from_slice(&c.num.to_ne_bytes());
            if let Err(e) = udata.write(&resp) {
                T::destroy_srq(dev, &c.srq);
                events.detach();
                return Err(e);
            }
            ia.attr.max_wr = a.max_wr;
            ia.attr.max_sge = a.max_sge;
            let data = SrqData { events, srq: c.srq };
            // SAFETY: the core's SRQ object, not yet visible to anyone else.
            unsafe { SrqObject::<T>::init(ibsrq, data) };
            Ok(0)
        })
    }

    /// `ib_device_ops.modify_srq`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with an SRQ created by [`Self::create_srq`].
    pub(super) unsafe extern "C" fn modify_srq(
        ibsrq: *mut b::ib_srq,
        attr: *mut b::ib_srq_attr,
        mask: b::ib_srq_attr_mask,
        _udata: *mut b::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: the core passes valid attributes.
            let c = unsafe { &*attr };
            let a = SrqAttr {
                max_wr: c.max_wr,
                max_sge: c.max_sge,
                srq_limit: c.srq_limit,
            };
            // SAFETY: a live SRQ of ours.
            let (dev, o) = unsafe { Self::srq(ibsrq) };
            T::modify_srq(dev, &o.data().srq, &a, mask)?;
            Ok(0)
        })
    }

    /// `ib_device_ops.query_srq`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with an SRQ created by [`Self::create_srq`].
    pub(super) unsafe extern "C" fn query_srq(
        ibsrq: *mut b::ib_srq,
        attr: *mut b::ib_srq_attr,
    ) -> c_int {
        // SAFETY: a live SRQ of ours.
        let (_, o) = unsafe { Self::srq(ibsrq) };
        let a = T::query_srq(&o.data().srq);
        // SAFETY: the core passes a buffer to fill, ours for the call.
        let out = unsafe { &mut *attr };
        out.max_wr = a.max_wr;
        out.max_sge = a.max_sge;
        out.srq_limit = a.srq_limit;
        0
    }

    /// `ib_device_ops.destroy_srq`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with an SRQ created by [`Self::create_srq`]
    /// and no QP using it.
    pub(super) unsafe extern "C" fn destroy_srq(
        ibsrq: *mut b::ib_srq,
        _udata: *mut b::ib_udata,
    ) -> c_int {
        {
            // SAFETY: a live SRQ of ours.
            let (dev, o) = unsafe { Self::srq(ibsrq) };
            T::destroy_srq(dev, &o.data().srq);
            o.data().events.detach();
        }
        // SAFETY: the borrows have ended; nothing uses the SRQ after this.
        unsafe { SrqObject::<T>::drop_data(ibsrq) };
        0
    }

    /// `ib_device_ops.post_srq_recv`: kernel consumers only.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with an SRQ created by
    /// [`Self::create_srq`], a valid chain and a valid `bad` pointer.
    pub(super) unsafe extern "C" fn post_srq_recv(
        ibsrq: *mut b::ib_srq,
        wr: *const b::ib_recv_wr,
        bad: *mut *const b::ib_recv_wr,
    ) -> c_int {
        // SAFETY: the core passes a valid chain, live for the call.
        let mut wrs = unsafe { RecvWrs::new(wr) };
        // SAFETY: a live SRQ of ours.
        let (dev, o) = unsafe { Self::srq(ibsrq) };
        let r = T::post_srq_recv(dev, &o.data().srq, &mut wrs);
        // SAFETY: the core passes a valid `bad` pointer.
        unsafe { post_result(r, bad, wrs.bad()) }
    }
}
