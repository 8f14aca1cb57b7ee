// SPDX-License-Identifier: GPL-2.0

//! User contexts (a process that opened the device) and the mapping of
//! their queues (`mmap`, `mmap_free`: see [`crate::ffi::rxe_abi::mmap`]).

use super::{Adapter, Driver};
use crate::ffi::bindings as b;
use kernel::ffi::c_int;

impl<T: Driver> Adapter<T> {
    /// `ib_device_ops.alloc_ucontext`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, with a live device created by
    /// [`Self::newlink`] and pointers valid for the call.
    pub(super) unsafe extern "C" fn alloc_ucontext(
        _uc: *mut b::ib_ucontext,
        _udata: *mut b::ib_udata,
    ) -> c_int {
        0
    }

    /// `ib_device_ops.dealloc_ucontext`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, with a live device created by
    /// [`Self::newlink`] and pointers valid for the call.
    pub(super) unsafe extern "C" fn dealloc_ucontext(_uc: *mut b::ib_ucontext) {}

    /// `ib_device_ops.disassociate_ucontext`: a process still has the device
    /// open while the device goes away (`rdma link delete`, its netdev's
    /// removal, `rmmod`, or a move to another network namespace). Nothing to
    /// do: a user context has no driver state, and by the time this is called
    /// the RDMA core has already destroyed every object of the context.
    ///
    /// That this callback exists is what matters. Without it the RDMA core
    /// (`ib_uverbs_remove_one`) waits, uninterruptibly, until every process
    /// has closed the device, and each open uverbs file pins this module.
    /// With it, `ib_uverbs_free_hw_resources` first makes every later command
    /// and `mmap` of those processes fail with `EIO` (it clears the uverbs
    /// device's `ib_dev` and waits for running ones with
    /// `synchronize_srcu`), then `uverbs_destroy_ufile_hw(...,
    /// RDMA_REMOVE_DRIVER_REMOVE)` destroys the remaining objects through the
    /// usual `destroy_qp`, `destroy_cq`, `destroy_srq`, `dereg_mr`, … (in the
    /// same dependency order as when the process closes the device), then
    /// calls this and `dealloc_ucontext`. So the transport is stopped for
    /// each QP exactly as on a normal close: `destroy_qp` removes the QP from
    /// the QPN table (the receive softirq then finds nothing), shuts its
    /// timer down synchronously and marks it dead before its rings go.
    ///
    /// Rings a process still has mapped stay memory-safe without zapping its
    /// mappings. They are `vmalloc_user()` pages mapped by
    /// `remap_vmalloc_range()`, which inserts each page with
    /// `vm_insert_page()`; that takes a page reference per PTE
    /// (`insert_page_into_pte_locked`: `folio_get`). The mmap entries hold no
    /// reference once `mmap` returns (our VMAs are not tracked with
    /// `rdma_umap_priv`, so `uverbs_user_mmap_disassociate` leaves them
    /// alone), so destroying a queue runs `mmap_free` before
    /// `dealloc_ucontext`, and its `vfree()` only drops vmalloc's own
    /// reference (`__free_page`: `put_page_testzero`). The pages stay
    /// allocated until the process unmaps them or exits; the kernel no longer
    /// reaches them (the queue is gone and `vfree` removed the kernel
    /// mapping), so what the process reads or writes there concerns no one
    /// else. The VMA's operations are ib_uverbs' (`rdma_umap_ops`), so none
    /// of this module's code runs for the mapping after it is unloaded.
    ///
    /// Network namespaces: with this callback set, `rdma dev set DEV netns
    /// NS` is allowed once the RDMA subsystem is in exclusive namespace mode
    /// (`ib_device_set_netns_put` refuses it while `ib_devices_shared_netns`,
    /// the default, is set). The core then disables the device, which
    /// disassociates its processes as above, and re-enables it in `NS`; the
    /// netdev and the transport's UDP socket stay where they are.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, with a live user context of a device
    /// created by [`Self::newlink`].
    pub(super) unsafe extern "C" fn disassociate_ucontext(_uc: *mut b::ib_ucontext) {}
}
