// SPDX-License-Identifier: GPL-2.0

//! Address handles: the RoCE v2 address vector and the AH callbacks.

use super::device::Device;
use super::object::Object;
use super::pd::PdId;
use super::{Adapter, Driver};
use crate::ffi::bindings as b;
use crate::ffi::udata::UData;
use core::mem::size_of;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;

/// A RoCE v2 address vector: source and destination GIDs and IP header fields.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct Av {
    pub(crate) sgid_index: u8,
    /// Source GID (from the GID table entry `sgid_index`).
    pub(crate) sgid: [u8; 16],
    pub(crate) dgid: [u8; 16],
    pub(crate) flow_label: u32,
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
    pub(crate) sl: u8,
    pub(crate) dmac: [u8; 6],
}

impl Av {
    /// From an `rdma_ah_attr` with a GRH whose source GID attribute the core
    /// has resolved. `EINVAL` without one (RoCE needs a GRH).
    pub(crate) fn from_c(a: &b::rdma_ah_attr) -> Result<Self> {
        if u32::from(a.ah_flags) & b::ib_ah_flags_IB_AH_GRH == 0 || a.grh.sgid_attr.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: a non-null `sgid_attr` is held by the core for the verb.
        let sgid = unsafe { (*a.grh.sgid_attr).gid.raw };
        // SAFETY: for RoCE the `roce` member of the union is the live one.
        let dmac = unsafe { a.__bindgen_anon_1.roce.dmac };
        // SAFETY: GIDs are plain 16-byte unions.
        let dgid = unsafe { a.grh.dgid.raw };
        Ok(Av {
            sgid_index: a.grh.sgid_index,
            sgid,
            dgid,
            flow_label: a.grh.flow_label,
            hop_limit: a.grh.hop_limit,
            traffic_class: a.grh.traffic_class,
            sl: a.sl,
            dmac,
        })
    }

    pub(crate) fn to_c(self, a: &mut b::rdma_ah_attr) {
        a.type_ = b::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        a.ah_flags = b::ib_ah_flags_IB_AH_GRH as u8;
        a.port_num = 1;
        a.sl = self.sl;
        a.grh.dgid.raw = self.dgid;
        a.grh.sgid_index = self.sgid_index;
        a.grh.flow_label = self.flow_label;
        a.grh.hop_limit = self.hop_limit;
        a.grh.traffic_class = self.traffic_class;
        a.__bindgen_anon_1.roce.dmac = self.dmac;
    }
}

/// An AH of driver `T` as the RDMA core allocated it.
pub(super) type AhObject<T> = Object<b::ib_ah, <T as Driver>::Ah>;

impl<T: Driver> Adapter<T> {
    /// `ib_device_ops.create_ah` and `create_user_ah`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a zeroed AH object of our size whose
    /// `device` and `pd` are set, valid attributes, and a null or valid udata.
    pub(super) unsafe extern "C" fn create_ah(
        ibah: *mut b::ib_ah,
        init: *mut b::rdma_ah_init_attr,
        udata: *mut b::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: the core passes a null or valid udata.
            let udata = unsafe { UData::from_raw(udata) };
            // SAFETY: the core passes valid attributes whose `ah_attr` is
            // valid for the call.
            let (attr, flags) = unsafe { (&*(*init).ah_attr, (*init).flags) };
            let av = Av::from_c(attr)?;
            // SAFETY: the core set the AH's `device` (ours) and `pd`.
            let (dev, pd) = unsafe { (Device::<T>::from_raw((*ibah).device), (*ibah).pd) };
            let sleepable = flags & b::rdma_create_ah_flags_RDMA_CREATE_AH_SLEEPABLE != 0;
            let c = T::create_ah(dev, PdId::of(pd), &av, sleepable)?;
            if udata.outlen() >= size_of::<b::rxe_create_ah_resp>() {
                let mut resp = [0u8; 8];
                resp[..4].copy_from_slice(&c.num.to_ne_bytes());
                if let Err(e) = udata.write(&resp) {
                    T::destroy_ah(dev, &c.ah);
                    return Err(e);
                }
            }
            // SAFETY: the core's AH object, not yet visible to anyone else.
            unsafe { AhObject::<T>::init(ibah, c.ah) };
            Ok(0)
        })
    }

    /// `ib_device_ops.destroy_ah`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with an AH created by [`Self::create_ah`].
    pub(super) unsafe extern "C" fn destroy_ah(ibah: *mut b::ib_ah, _flags: u32) -> c_int {
        {
            // SAFETY: a live AH of ours on a device of ours.
            let (dev, o) = unsafe {
                (
                    Device::<T>::from_raw((*ibah).device),
                    AhObject::<T>::from_raw(ibah),
                )
            };
            T::destroy_ah(dev, o.data());
        }
        // SAFETY: the borrows have ended; nothing uses the AH after this call.
        unsafe { AhObject::<T>::drop_data(ibah) };
        0
    }

    /// The `ah_num` of an AH of ours, for kernel UD work requests.
    ///
    /// # Safety
    ///
    /// `ah` is a live AH created by [`Self::create_ah`] (a kernel consumer's
    /// UD request names one of the QP's device).
    pub(super) unsafe fn ah_num(ah: *mut b::ib_ah) -> u32 {
        // SAFETY: by the caller's guarantee.
        T::ah_num(unsafe { AhObject::<T>::from_raw(ah) }.data())
    }
}
