// SPDX-License-Identifier: GPL-2.0

//! mmap entries of the rxe user ABI: each queue user space maps is an
//! `rdma_user_mmap_entry` of its user context, and `struct mminfo` tells the
//! provider where to map it.

use crate::ffi::bindings as b;
use kernel::alloc::KBox;
use kernel::ffi::c_void;
use kernel::prelude::*;

/// An `rdma_user_mmap_entry` with the memory it maps.
#[repr(C)]
pub(super) struct MmapEntry {
    pub(super) rdma: b::rdma_user_mmap_entry,
    pub(super) buf: *mut c_void,
}

/// `ib_device_ops.mmap_free`: the last reference to an entry is gone (its
/// queue is destroyed and no mapping is being set up): free the memory.
/// Pages still mapped in a process keep their own reference until unmapped.
///
/// # Safety
///
/// Called by the RDMA core with an entry inserted by `Queue::new`.
pub(in crate::ffi) unsafe extern "C" fn mmap_free(entry: *mut b::rdma_user_mmap_entry) {
    // SAFETY: every entry of ours is the first field of a boxed `MmapEntry`
    // (`repr(C)`, see `Queue::new`), and this is its last reference.
    let e = unsafe { KBox::from_raw(entry.cast::<MmapEntry>()) };
    // SAFETY: the entry owned `buf` (from `vmalloc_user`), freed once here;
    // mappings hold their own page references.
    unsafe { b::metaroce_vfree(e.buf) };
}

/// `ib_device_ops.mmap`: maps a queue into the process.
///
/// # Safety
///
/// Called by the RDMA core with a live user context and VMA.
pub(in crate::ffi) unsafe extern "C" fn mmap(
    uc: *mut b::ib_ucontext,
    vma: *mut b::vm_area_struct,
) -> kernel::ffi::c_int {
    // SAFETY: the core passes a live context and VMA.
    let e = unsafe { b::rdma_user_mmap_entry_get(uc, vma) };
    if e.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: a non-null entry is one of ours (a boxed `MmapEntry`),
    // referenced until the `put` below, so its buffer is alive.
    let ret = unsafe { b::metaroce_remap_vmalloc(vma, (*e.cast::<MmapEntry>()).buf) };
    // SAFETY: drops the reference `rdma_user_mmap_entry_get` took.
    unsafe { b::rdma_user_mmap_entry_put(e) };
    ret
}

/// `struct mminfo` of the rxe ABI: where user space maps a queue.
#[derive(Clone, Copy, Default)]
pub(crate) struct MmInfo {
    /// `mmap()` offset on the uverbs file.
    pub(crate) offset: u64,
    /// Bytes to map.
    pub(crate) size: u32,
}

impl MmInfo {
    /// The 16-byte wire form (`offset`, `size`, `pad`), host endian.
    pub(crate) fn bytes(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.offset.to_ne_bytes());
        out[8..12].copy_from_slice(&self.size.to_ne_bytes());
        out
    }
}
