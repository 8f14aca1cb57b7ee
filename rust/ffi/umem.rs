// SPDX-License-Identifier: GPL-2.0

//! User memory pinned for an MR (`ib_umem_get`).

use super::bindings as b;
use super::rdma::{Device, Driver};
use kernel::alloc::KVVec;
use kernel::error::from_err_ptr;
use kernel::prelude::*;

/// Page size of the kernel.
pub(crate) const PAGE_SIZE: usize = 4096;

/// User memory pinned for an MR (`ib_umem_get`), with its page list.
///
/// # Invariants
///
/// `umem` is a pinned region of `len` bytes starting `first` bytes into
/// `pages[0]`; `pages` are its pages in order; released on drop.
pub(crate) struct UMem {
    umem: *mut b::ib_umem,
    pages: KVVec<*mut b::page>,
    first: usize,
    len: usize,
}

// SAFETY: the pages are pinned for the object's lifetime and only accessed
// through `kmap_local_page` copies done in C (`metaroce_page_read/write`):
// no Rust reference ever covers them, so a process writing its pages while
// we copy makes the bytes unspecified but is no data race on Rust memory
// (the stance of `copy_from_user` for `kernel::uaccess::UserSlice`).
unsafe impl Send for UMem {}
// SAFETY: see `Send`.
unsafe impl Sync for UMem {}

impl UMem {
    /// Pins `[start, start + len)` of the calling process (`ib_umem_get`;
    /// may sleep).
    pub(in crate::ffi) fn get<T: Driver>(
        dev: &Device<T>,
        start: u64,
        len: u64,
        access: i32,
    ) -> Result<Self> {
        let len_us = usize::try_from(len).map_err(|_| EINVAL)?;
        let first = (start as usize) & (PAGE_SIZE - 1);
        let npages = first
            .checked_add(len_us)
            .map(|e| e.div_ceil(PAGE_SIZE))
            .ok_or(EINVAL)?;
        // Pin first: `ib_umem_get` checks RLIMIT_MEMLOCK and that the range is
        // mapped, so no user-chosen size reaches an allocation before that.
        // SAFETY: `dev` is a live device; the range is only a request (the
        // core checks it); errors come back as ERR_PTR.
        let umem =
            from_err_ptr(unsafe { b::ib_umem_get(dev.as_ptr(), start as _, len_us, access) })?;
        let mut pages = match KVVec::with_capacity(npages, GFP_KERNEL) {
            Ok(p) => p,
            Err(e) => {
                // SAFETY: `umem` came from `ib_umem_get`, released once.
                unsafe { b::ib_umem_release(umem) };
                return Err(e.into());
            }
        };
        // SAFETY: `umem` is pinned; `pages` has room for `npages` entries.
        let n = unsafe { b::metaroce_umem_pages(umem, pages.as_mut_ptr(), npages as _) as usize };
        if n != npages {
            // SAFETY: `umem` came from `ib_umem_get`.
            unsafe { b::ib_umem_release(umem) };
            return Err(EFAULT);
        }
        // SAFETY: the helper initialised the first `n` entries.
        unsafe { pages.set_len(n) };
        Ok(UMem {
            umem,
            pages,
            first,
            len: len_us,
        })
    }

    /// Pages pinned.
    pub(crate) fn npages(&self) -> usize {
        self.pages.len()
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Calls `f(page, offset_in_page, range_in_buf)` for each page piece of
    /// `[off, off + n)`. `EFAULT` if the range leaves the region.
    fn pieces(
        &self,
        off: usize,
        n: usize,
        mut f: impl FnMut(*mut b::page, usize, core::ops::Range<usize>),
    ) -> Result {
        let end = off.checked_add(n).ok_or(EFAULT)?;
        if end > self.len {
            return Err(EFAULT);
        }
        let mut pos = self.first + off;
        let mut done = 0;
        while done < n {
            let page = *self.pages.get(pos / PAGE_SIZE).ok_or(EFAULT)?;
            let in_page = pos % PAGE_SIZE;
            let take = (PAGE_SIZE - in_page).min(n - done);
            f(page, in_page, done..done + take);
            done += take;
            pos += take;
        }
        Ok(())
    }

    /// Copies `data` into the region at byte `off`.
    pub(crate) fn write(&self, off: usize, data: &[u8]) -> Result {
        self.pieces(off, data.len(), |page, at, r| {
            // SAFETY: `page` is pinned (invariant), `at + r.len() <= PAGE_SIZE`.
            unsafe {
                b::metaroce_page_write(
                    page,
                    at as u32,
                    data[r.clone()].as_ptr().cast(),
                    r.len() as u32,
                )
            }
        })
    }

    /// Copies bytes at `off` of the region into `out`.
    pub(crate) fn read(&self, off: usize, out: &mut [u8]) -> Result {
        let p = out.as_mut_ptr();
        self.pieces(off, out.len(), |page, at, r| {
            // SAFETY: as in `write`; `r` is inside `out`.
            unsafe { b::metaroce_page_read(page, at as u32, p.add(r.start).cast(), r.len() as u32) }
        })
    }
}

impl Drop for UMem {
    fn drop(&mut self) {
        // SAFETY: from `ib_umem_get`, released once.
        unsafe { b::ib_umem_release(self.umem) };
    }
}
