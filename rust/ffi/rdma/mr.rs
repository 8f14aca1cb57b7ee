// SPDX-License-Identifier: GPL-2.0

//! Memory regions: `get_dma_mr`, `reg_user_mr`, `alloc_mr`, `map_mr_sg`,
//! `dereg_mr`. Unlike the other objects the driver allocates MRs (the core
//! only frees what it allocates), as [`MrBox`]es.

use super::device::Device;
use super::object::err_ptr;
use super::pd::PdId;
use super::{Adapter, Driver, MrCreated};
use crate::ffi::bindings as b;
use crate::ffi::mem::{KernelMem, MappedPages, Mem};
use crate::ffi::umem::UMem;
use core::ptr;
use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::types::Opaque;

/// An MR: the core's `ib_mr` first, then the driver's value.
/// `pages[..npages]` collects a fast-registration MR's pages during
/// `map_mr_sg` (`max_num_sg` entries; none for other MRs).
///
/// # Invariants
///
/// Every `ib_mr` this module hands the core starts a `KBox<MrBox<T::Mr>>`,
/// freed only by a successful `dereg_mr`.
#[repr(C)]
pub(super) struct MrBox<D> {
    ib: Opaque<b::ib_mr>,
    data: D,
    pages: KVec<u64>,
    npages: usize,
}

/// The driver value of MR `ibmr`, for `'a`.
///
/// # Safety
///
/// `ibmr` is a live MR of ours (so a boxed `MrBox<T::Mr>`, type invariant)
/// that `dereg_mr` does not free during `'a`.
pub(super) unsafe fn mr_data<'a, T: Driver>(ibmr: *mut b::ib_mr) -> &'a T::Mr {
    // SAFETY: by the caller's guarantee the box is live for `'a`.
    unsafe { &(*ibmr.cast::<MrBox<T::Mr>>()).data }
}

impl<T: Driver> Adapter<T> {
    /// The device of a live PD of ours.
    ///
    /// # Safety
    ///
    /// `pd` is a live PD of a device of ours, for `'a`.
    unsafe fn pd_device<'a>(pd: *mut b::ib_pd) -> &'a Device<T> {
        // SAFETY: by the caller's guarantee.
        unsafe { Device::from_raw((*pd).device) }
    }

    /// Hands a new MR to the core, or the error.
    fn mr_result(r: Result<KBox<MrBox<T::Mr>>>) -> *mut b::ib_mr {
        match r {
            // The invariant: a boxed `MrBox`, `ib` first.
            Ok(m) => KBox::into_raw(m).cast::<b::ib_mr>(),
            Err(e) => err_ptr(e),
        }
    }

    /// `ib_device_ops.get_dma_mr`: the DMA MR of a kernel PD (the core asks
    /// for it in `ib_alloc_pd` to give the PD its `local_dma_lkey`).
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a live kernel PD of ours.
    pub(super) unsafe extern "C" fn get_dma_mr(pd: *mut b::ib_pd, access: c_int) -> *mut b::ib_mr {
        // SAFETY: a live PD of ours.
        let dev = unsafe { Self::pd_device(pd) };
        Self::mr_result((|| {
            let slot = KBox::new_uninit(GFP_KERNEL)?;
            // SAFETY: the DMA MR of a kernel PD, with the access its consumer
            // asked for (`ib_alloc_pd`).
            let mem = Mem::Kernel(unsafe { KernelMem::new(access as u32) });
            let c = T::get_dma_mr(dev, PdId::of(pd), mem, access as u32)?;
            Ok(Self::mr_box(slot, c, 0, u64::MAX))
        })())
    }

    /// The `MrBox` in `slot` (allocated before the MR, so that nothing can
    /// fail after it exists), holding the driver's value.
    fn mr_box(
        slot: KBox<core::mem::MaybeUninit<MrBox<T::Mr>>>,
        c: MrCreated<T::Mr>,
        iova: u64,
        length: u64,
    ) -> KBox<MrBox<T::Mr>> {
        let ib = b::ib_mr {
            lkey: c.lkey,
            rkey: c.rkey,
            iova,
            length,
            ..Default::default()
        };
        KBox::write(
            slot,
            MrBox {
                ib: Opaque::new(ib),
                data: c.mr,
                pages: KVec::new(),
                npages: 0,
            },
        )
    }

    /// `ib_device_ops.alloc_mr`: a fast-registration MR (`IB_MR_TYPE_MEM_REG`
    /// only, as rxe: `EINVAL` otherwise or above `max_fast_reg_page_list_len`).
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a live kernel PD of ours.
    pub(super) unsafe extern "C" fn alloc_mr(
        pd: *mut b::ib_pd,
        mr_type: b::ib_mr_type,
        max_num_sg: u32,
    ) -> *mut b::ib_mr {
        // SAFETY: a live PD of ours.
        let dev = unsafe { Self::pd_device(pd) };
        Self::mr_result((|| {
            if mr_type != b::ib_mr_type_IB_MR_TYPE_MEM_REG {
                return Err(EINVAL);
            }
            let slot = KBox::new_uninit(GFP_KERNEL)?;
            // The driver checks `max_num_sg` against its limit before any
            // allocation is sized by it.
            let c = T::alloc_mr(dev, PdId::of(pd), max_num_sg)?;
            let mut m = Self::mr_box(slot, c, 0, 0);
            match KVec::from_elem(0u64, max_num_sg as usize, GFP_KERNEL) {
                Ok(pages) => m.pages = pages,
                Err(e) => {
                    let _ = T::dereg_mr(dev, &m.data);
                    return Err(e.into());
                }
            }
            Ok(m)
        })())
    }

    /// `set_page` of `ib_sg_to_pages`: appends one page address.
    ///
    /// # Safety
    ///
    /// Called by `ib_sg_to_pages` from [`Self::map_mr_sg`] with its MR.
    unsafe extern "C" fn set_page(ibmr: *mut b::ib_mr, addr: u64) -> c_int {
        let m = ibmr.cast::<MrBox<T::Mr>>();
        // SAFETY: an MR of ours (type invariant); during the consumer's
        // `ib_map_mr_sg` nothing else touches `pages` and `npages` (the core
        // only writes the `ib_mr`, which these references do not cover).
        let (pages, npages) = unsafe {
            (
                &mut *ptr::addr_of_mut!((*m).pages),
                &mut *ptr::addr_of_mut!((*m).npages),
            )
        };
        match pages.get_mut(*npages) {
            Some(p) => {
                *p = addr;
                *npages += 1;
                0
            }
            None => ENOMEM.to_errno(),
        }
    }

    /// `ib_device_ops.map_mr_sg`: the pages of a DMA-mapped scatterlist
    /// (kernel virtual addresses: the device uses virtual DMA) into a
    /// fast-registration MR; returns how many entries were mapped.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core (`ib_map_mr_sg`) with an MR from
    /// [`Self::alloc_mr`] whose `page_size` is set and a mapped scatterlist.
    pub(super) unsafe extern "C" fn map_mr_sg(
        ibmr: *mut b::ib_mr,
        sg: *mut b::scatterlist,
        sg_nents: c_int,
        sg_offset: *mut kernel::ffi::c_uint,
    ) -> c_int {
        let m = ibmr.cast::<MrBox<T::Mr>>();
        // SAFETY: an MR of ours; nothing else uses `npages` during the call.
        unsafe { (*m).npages = 0 };
        // SAFETY: the core's arguments; `set_page` is called with `ibmr`.
        let n = unsafe { b::ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, Some(Self::set_page)) };
        if n < 0 {
            return n;
        }
        // SAFETY: `ib_sg_to_pages` has returned and set `iova` and `length`;
        // the MR and its device are live and ours.
        let (dev, ib, m) = unsafe { (Device::<T>::from_raw((*ibmr).device), &*ibmr, &*m) };
        let pages = &m.pages[..m.npages.min(m.pages.len())];
        // SAFETY: the addresses `ib_sg_to_pages` found in the consumer's
        // scatterlist, mapped for the device by `ib_map_mr_sg`.
        let pages = unsafe { MappedPages::new(pages) };
        match T::map_mr(dev, &m.data, ib.iova, ib.length, ib.page_size, &pages) {
            Ok(()) => n,
            Err(e) => e.to_errno(),
        }
    }

    /// `ib_device_ops.reg_user_mr`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a live PD of ours, in the context of
    /// the process whose memory is registered.
    pub(super) unsafe extern "C" fn reg_user_mr(
        pd: *mut b::ib_pd,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        _udata: *mut b::ib_udata,
    ) -> *mut b::ib_mr {
        // SAFETY: a live PD of ours.
        let dev = unsafe { Self::pd_device(pd) };
        Self::mr_result((|| {
            let slot = KBox::new_uninit(GFP_KERNEL)?;
            let mem = Mem::User(UMem::get(dev, start, length, access)?);
            let c = T::reg_user_mr(dev, PdId::of(pd), mem, iova, access as u32)?;
            Ok(Self::mr_box(slot, c, iova, length))
        })())
    }

    /// `ib_device_ops.dereg_mr`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with an MR from [`Self::reg_user_mr`],
    /// [`Self::get_dma_mr`] or [`Self::alloc_mr`].
    pub(super) unsafe extern "C" fn dereg_mr(mr: *mut b::ib_mr, _udata: *mut b::ib_udata) -> c_int {
        let m = mr.cast::<MrBox<T::Mr>>();
        // SAFETY: a live MR of ours (a boxed `MrBox`, type invariant) on a
        // live device of ours.
        let (dev, data) = unsafe { (Device::<T>::from_raw((*mr).device), &(*m).data) };
        if let Err(e) = T::dereg_mr(dev, data) {
            // The core keeps the MR (and calls again later).
            return e.to_errno();
        }
        // SAFETY: the box of the type invariant, freed once, on success only;
        // the core forgets the MR after this returns 0.
        drop(unsafe { KBox::from_raw(m) });
        0
    }
}
