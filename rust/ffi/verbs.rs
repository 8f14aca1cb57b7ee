// SPDX-License-Identifier: GPL-2.0

//! Safe building blocks for verbs objects (`include/rdma/ib_verbs.h`,
//! `include/uapi/rdma/rdma_user_rxe.h`): user data of a verb, queues shared
//! with user space in the rxe layout, pinned user memory, completion events,
//! and the attribute records of QPs, converted from and to their C forms.
//!
//! The callbacks that hand these to a [`super::rdma::Driver`] are in
//! `rdma.rs`; the verbs layer above sees only the types defined here.

use super::bindings as b;
use core::ptr;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::alloc::{KBox, KVVec};
use kernel::error::{from_err_ptr, to_result};
use kernel::ffi::c_void;
use kernel::prelude::*;
use kernel::sync::Arc;

/// Page size of the kernel.
const PAGE_SIZE: usize = 4096;

/// The user context (`struct ib_ucontext`) of the process a verb came from.
///
/// # Invariants
///
/// The pointer is a live user context for the lifetime of the borrow.
pub(crate) struct UContext(*mut b::ib_ucontext);

/// The driver-specific user data of a verb (`struct ib_udata`): the provider
/// library's command extension in, its response extension out.
///
/// # Invariants
///
/// The pointer is null (a kernel caller) or valid for the lifetime of the
/// borrow.
pub(crate) struct UData(pub(super) *mut b::ib_udata);

impl UData {
    /// Bytes of response extension user space has room for.
    pub(crate) fn outlen(&self) -> usize {
        if self.0.is_null() {
            return 0;
        }
        // SAFETY: by the type invariant a non-null pointer is valid.
        unsafe { (*self.0).outlen }
    }

    /// Copies `resp` to user space (truncated to `outlen`, as
    /// `ib_copy_to_udata` does). `EFAULT` if user memory is not writable.
    pub(crate) fn write(&mut self, resp: &[u8]) -> Result {
        if self.0.is_null() {
            return Ok(());
        }
        // SAFETY: a valid udata; `resp` is readable for its length.
        to_result(unsafe { b::metaroce_udata_write(self.0, resp.as_ptr().cast(), resp.len()) })
    }

    /// The user context, for queues user space maps.
    pub(crate) fn ucontext(&self) -> Option<UContext> {
        // SAFETY: a null or valid udata of a verb; the helper returns the
        // bundle's context, which outlives the verb.
        let uc = unsafe { b::metaroce_udata_ucontext(self.0) };
        (!uc.is_null()).then_some(UContext(uc))
    }
}

/// An `rdma_user_mmap_entry` with the memory it maps.
#[repr(C)]
struct MmapEntry {
    rdma: b::rdma_user_mmap_entry,
    buf: *mut c_void,
}

/// `ib_device_ops.mmap_free`: the last reference to an entry is gone (its
/// queue is destroyed and no mapping is being set up): free the memory.
/// Pages still mapped in a process keep their own reference until unmapped.
///
/// # Safety
///
/// Called by the RDMA core with an entry inserted by [`Queue::new`].
pub(super) unsafe extern "C" fn mmap_free(entry: *mut b::rdma_user_mmap_entry) {
    // SAFETY: every entry of ours is the first field of a boxed `MmapEntry`
    // (see `Queue::new`); this is the last reference.
    unsafe {
        let e = KBox::from_raw(entry.cast::<MmapEntry>());
        b::metaroce_vfree(e.buf);
    }
}

/// `ib_device_ops.mmap`: maps a queue into the process.
///
/// # Safety
///
/// Called by the RDMA core with a live user context and VMA.
pub(super) unsafe extern "C" fn mmap(
    uc: *mut b::ib_ucontext,
    vma: *mut b::vm_area_struct,
) -> kernel::ffi::c_int {
    // SAFETY: the core passes a live context and VMA; the entry returned (if
    // any) is ours and referenced until `rdma_user_mmap_entry_put`.
    unsafe {
        let e = b::rdma_user_mmap_entry_get(uc, vma);
        if e.is_null() {
            return EINVAL.to_errno();
        }
        let ret = b::metaroce_remap_vmalloc(vma, (*e.cast::<MmapEntry>()).buf);
        b::rdma_user_mmap_entry_put(e);
        ret
    }
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

/// Offset of `data[]` in `struct rxe_queue_buf`.
const QUEUE_HDR: usize = 384;
/// Offset of `producer_index`.
const QUEUE_PROD: usize = 128;
/// Offset of `consumer_index`.
const QUEUE_CONS: usize = 256;
/// Largest queue buffer (bytes).
const QUEUE_MAX_BYTES: usize = 64 << 20;

/// A circular queue in the rxe layout (`struct rxe_queue_buf`), shared with
/// user space when created for a user context: a 384-byte header with the
/// producer and consumer indices on their own cache lines, then `2^n` slots
/// of `2^m` bytes. Indices are slot numbers in `0..slots` (always masked);
/// the queue is empty when they are equal, so it holds `slots - 1` entries.
///
/// User space can write anything into the shared page at any time: the
/// element size and index mask are kept here and never read back, every
/// index read from the page is masked, and every slot access is bounded.
///
/// # Invariants
///
/// `buf` points to `QUEUE_HDR + (mask + 1) << log2_elem` bytes from
/// `vmalloc_user()`, valid until drop; if `entry` is non-null it owns `buf`
/// (freed by [`mmap_free`]) and is inserted in a user context's mmap table.
pub(crate) struct Queue {
    buf: *mut u8,
    entry: *mut MmapEntry,
    log2_elem: u32,
    mask: u32,
    mminfo: MmInfo,
}

// SAFETY: the buffer is plain memory; concurrent access from user space and
// the kernel goes through atomics (indices) and bounded byte copies (slots).
unsafe impl Send for Queue {}
// SAFETY: see `Send`: shared references only read and copy bytes.
unsafe impl Sync for Queue {}

impl Queue {
    /// A queue holding at least `entries` elements of at least `elem_size`
    /// bytes, mappable by `uc` if given. `ENOMEM` when too large.
    pub(crate) fn new(uc: Option<&UContext>, entries: u32, elem_size: usize) -> Result<Self> {
        let slots = entries
            .checked_add(1)
            .and_then(u32::checked_next_power_of_two)
            .ok_or(EINVAL)?;
        let elem = elem_size
            .max(16)
            .checked_next_power_of_two()
            .ok_or(EINVAL)?;
        let bytes = (slots as usize)
            .checked_mul(elem)
            .and_then(|d| d.checked_add(QUEUE_HDR))
            .filter(|&n| n <= QUEUE_MAX_BYTES)
            .ok_or(ENOMEM)?;
        // SAFETY: plain allocation; zeroed, page-aligned, mappable.
        let buf = unsafe { b::metaroce_vmalloc_user(bytes as _) }.cast::<u8>();
        if buf.is_null() {
            return Err(ENOMEM);
        }
        let log2_elem = elem.trailing_zeros();
        let mask = slots - 1;
        // SAFETY: the header's first two words are inside the buffer.
        unsafe {
            ptr::write(buf.cast::<u32>(), log2_elem);
            ptr::write(buf.cast::<u32>().add(1), mask);
        }
        let mut q = Queue {
            buf,
            entry: ptr::null_mut(),
            log2_elem,
            mask,
            mminfo: MmInfo {
                offset: 0,
                size: bytes as u32,
            },
        };
        if let Some(uc) = uc {
            let e = KBox::new(
                MmapEntry {
                    // SAFETY: all-zero is the expected initial entry.
                    rdma: unsafe { core::mem::zeroed() },
                    buf: buf.cast(),
                },
                GFP_KERNEL,
            )?;
            let e = KBox::into_raw(e);
            // SAFETY: `uc` is live (type invariant), `e` is a fresh entry.
            let ret = unsafe {
                b::rdma_user_mmap_entry_insert(uc.0, ptr::addr_of_mut!((*e).rdma), bytes)
            };
            if ret != 0 {
                // SAFETY: not inserted: still ours alone. `q` frees `buf`.
                drop(unsafe { KBox::from_raw(e) });
                return Err(Error::from_errno(ret));
            }
            q.entry = e;
            // SAFETY: `e` is inserted and ours until `Drop` removes it.
            q.mminfo.offset = unsafe { b::metaroce_mmap_offset(ptr::addr_of_mut!((*e).rdma)) };
        }
        Ok(q)
    }

    /// Where user space maps this queue (offset 0 for kernel queues).
    pub(crate) fn mminfo(&self) -> MmInfo {
        self.mminfo
    }

    /// Number of slots; the queue holds one fewer.
    pub(crate) fn slots(&self) -> u32 {
        self.mask + 1
    }

    /// Bytes per slot.
    pub(crate) fn elem_size(&self) -> usize {
        1 << self.log2_elem
    }

    fn index(&self, at: usize) -> &AtomicU32 {
        // SAFETY: `at` is one of the two index offsets, inside the header,
        // 4-aligned in a page-aligned buffer that lives as long as `self`.
        unsafe { AtomicU32::from_ptr(self.buf.add(at).cast()) }
    }

    /// The producer index (masked), with acquire ordering.
    pub(crate) fn producer(&self) -> u32 {
        self.index(QUEUE_PROD).load(Ordering::Acquire) & self.mask
    }

    /// The consumer index (masked), with acquire ordering.
    pub(crate) fn consumer(&self) -> u32 {
        self.index(QUEUE_CONS).load(Ordering::Acquire) & self.mask
    }

    /// Publishes a new producer index (release: slot contents first).
    pub(crate) fn set_producer(&self, v: u32) {
        self.index(QUEUE_PROD)
            .store(v & self.mask, Ordering::Release)
    }

    /// Publishes a new consumer index.
    pub(crate) fn set_consumer(&self, v: u32) {
        self.index(QUEUE_CONS)
            .store(v & self.mask, Ordering::Release)
    }

    /// Entries between `from` and `to` (both slot numbers).
    pub(crate) fn distance(&self, from: u32, to: u32) -> u32 {
        to.wrapping_sub(from) & self.mask
    }

    /// The slot after `n` slots from `i`.
    pub(crate) fn advance(&self, i: u32, n: u32) -> u32 {
        i.wrapping_add(n) & self.mask
    }

    fn slot_range(&self, index: u32, off: usize, len: usize) -> Result<*mut u8> {
        let end = off.checked_add(len).ok_or(EINVAL)?;
        if end > self.elem_size() {
            return Err(EINVAL);
        }
        let slot = ((index & self.mask) as usize) << self.log2_elem;
        // SAFETY: slot + end <= slots * elem, inside the buffer (invariant).
        Ok(unsafe { self.buf.add(QUEUE_HDR + slot + off) })
    }

    /// Copies `out.len()` bytes at byte `off` of slot `index` into `out`.
    /// `EINVAL` if the range leaves the slot.
    pub(crate) fn read(&self, index: u32, off: usize, out: &mut [u8]) -> Result {
        let src = self.slot_range(index, off, out.len())?;
        // SAFETY: `src..src+len` is inside the buffer; user space may write
        // it concurrently, so bytes are copied, never referenced.
        unsafe { ptr::copy_nonoverlapping(src, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Copies `data` to byte `off` of slot `index`. `EINVAL` if it would
    /// leave the slot.
    pub(crate) fn write(&self, index: u32, off: usize, data: &[u8]) -> Result {
        let dst = self.slot_range(index, off, data.len())?;
        // SAFETY: `dst..dst+len` is inside the buffer.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
        Ok(())
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        if self.entry.is_null() {
            // SAFETY: a kernel queue owns its buffer alone.
            unsafe { b::metaroce_vfree(self.buf.cast()) };
        } else {
            // SAFETY: inserted in `new`; removal drops the table's reference
            // and `mmap_free` frees the buffer once no mapping is in progress.
            unsafe { b::rdma_user_mmap_entry_remove(ptr::addr_of_mut!((*self.entry).rdma)) };
        }
    }
}

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
// through `kmap_local_page` copies.
unsafe impl Send for UMem {}
// SAFETY: see `Send`.
unsafe impl Sync for UMem {}

impl UMem {
    /// Pins `[start, start + len)` of the calling process (`ib_umem_get`;
    /// may sleep).
    pub(super) fn get(ib: *mut b::ib_device, start: u64, len: u64, access: i32) -> Result<Self> {
        let len_us = usize::try_from(len).map_err(|_| EINVAL)?;
        let first = (start as usize) & (PAGE_SIZE - 1);
        let npages = first
            .checked_add(len_us)
            .map(|e| e.div_ceil(PAGE_SIZE))
            .ok_or(EINVAL)?;
        // Pin first: `ib_umem_get` checks RLIMIT_MEMLOCK and that the range is
        // mapped, so no user-chosen size reaches an allocation before that.
        // SAFETY: `ib` is a live device; errors come back as ERR_PTR.
        let umem = from_err_ptr(unsafe { b::ib_umem_get(ib, start as _, len_us, access) })?;
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

/// The memory an MR covers.
pub(crate) enum Mem {
    /// Pinned user pages (`reg_user_mr`).
    User(UMem),
    /// Kernel memory addressed by kernel virtual address: the DMA MR of a
    /// kernel PD (`get_dma_mr`, which gives the PD its `local_dma_lkey`).
    /// The device has no `dma_device`, so the RDMA core maps for kernel
    /// consumers with `ib_uses_virt_dma` (`ib_dma_map_*` return kernel
    /// virtual addresses) and those are the addresses in their SGEs.
    Kernel,
    /// A fast-registration MR (`alloc_mr`): kernel pages set by
    /// `ib_map_mr_sg` and made valid by an `IB_WR_REG_MR` work request.
    Pages(PageList),
}

/// The page list of a fast-registration MR: up to `max` page addresses
/// (kernel virtual, `page_size`-aligned, from `ib_sg_to_pages`), the region
/// starting `first` bytes into the first page, `len` bytes long.
pub(crate) struct PageList {
    pages: KVec<u64>,
    n: usize,
    page_size: usize,
    first: usize,
    len: usize,
}

impl PageList {
    /// An empty list with room for `max` pages (allocated here, so that
    /// mapping never allocates).
    pub(crate) fn new(max: u32) -> Result<Self> {
        let mut pages = KVec::new();
        pages.extend_with(max as usize, 0u64, GFP_KERNEL)?;
        Ok(PageList {
            pages,
            n: 0,
            page_size: PAGE_SIZE,
            first: 0,
            len: 0,
        })
    }

    /// Installs a mapping: `pages` (at most the list's room, each aligned to
    /// `page_size`, a power of two of at least 4 KiB), the region starting
    /// at `iova` (inside the first page) and `len` bytes long, which must
    /// fit in the pages. `EINVAL` otherwise.
    pub(crate) fn set(&mut self, iova: u64, len: u64, page_size: u32, pages: &[u64]) -> Result {
        let ps = page_size as usize;
        if !ps.is_power_of_two() || ps < PAGE_SIZE || pages.len() > self.pages.len() {
            return Err(EINVAL);
        }
        let first = (iova as usize) & (ps - 1);
        let len = usize::try_from(len).map_err(|_| EINVAL)?;
        let room = pages.len().checked_mul(ps).ok_or(EINVAL)?;
        if first.checked_add(len).map_or(true, |e| e > room)
            || pages.iter().any(|&p| p as usize & (ps - 1) != 0)
        {
            return Err(EINVAL);
        }
        self.pages[..pages.len()].copy_from_slice(pages);
        self.n = pages.len();
        self.page_size = ps;
        self.first = first;
        self.len = len;
        Ok(())
    }

    /// Calls `f(kernel_address, range_in_buf)` for each page piece of
    /// `[off, off + n)`. `EFAULT` if the range leaves the region.
    fn pieces(
        &self,
        off: usize,
        n: usize,
        mut f: impl FnMut(usize, core::ops::Range<usize>) -> Result,
    ) -> Result {
        let end = off.checked_add(n).ok_or(EFAULT)?;
        if end > self.len {
            return Err(EFAULT);
        }
        let mut pos = self.first + off;
        let mut done = 0;
        while done < n {
            let page = *self.pages[..self.n]
                .get(pos / self.page_size)
                .ok_or(EFAULT)? as usize;
            let in_page = pos % self.page_size;
            let take = (self.page_size - in_page).min(n - done);
            f(page + in_page, done..done + take)?;
            done += take;
            pos += take;
        }
        Ok(())
    }
}

impl Mem {
    /// Length in bytes (all of the address space for [`Mem::Kernel`]).
    pub(crate) fn len(&self) -> usize {
        match self {
            Mem::User(u) => u.len(),
            Mem::Kernel => usize::MAX,
            Mem::Pages(p) => p.len,
        }
    }

    /// Whether bytes `[off, off + n)` are in the region (for [`Mem::Kernel`]:
    /// a kernel virtual address range, see [`Self::kernel_range`]), so that
    /// an access check refuses what a copy would.
    pub(crate) fn covers(&self, off: usize, n: usize) -> bool {
        match self {
            Mem::Kernel => Self::kernel_range(off, n).is_ok(),
            _ => off.checked_add(n).is_some_and(|end| end <= self.len()),
        }
    }

    /// Checks a kernel address range: non-null, no wrap, in the kernel half.
    fn kernel_range(off: usize, n: usize) -> Result<*mut u8> {
        let end = off.checked_add(n).ok_or(EFAULT)?;
        // Kernel virtual addresses are the upper half on every 64-bit arch
        // Linux supports; a user address here is a consumer bug, not memory
        // to touch.
        if off < (1usize << 63) || end < off {
            return Err(EFAULT);
        }
        Ok(off as *mut u8)
    }

    /// Copies `data` into the region at byte `off`.
    pub(crate) fn write(&self, off: usize, data: &[u8]) -> Result {
        match self {
            Mem::User(u) => u.write(off, data),
            Mem::Kernel => {
                let dst = Self::kernel_range(off, data.len())?;
                // SAFETY: a DMA MR's lkey is known only to kernel consumers
                // of its PD (the rkey only to peers they chose to tell, with
                // the remote access they asked for); with virtual DMA they
                // hand the device kernel virtual addresses of memory they
                // mapped for it (`ib_dma_map_*`) and own until its completion
                // — the contract of every `ib_post_send`/`ib_post_recv` user.
                unsafe { ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
                Ok(())
            }
            Mem::Pages(p) => p.pieces(off, data.len(), |at, r| Mem::Kernel.write(at, &data[r])),
        }
    }

    /// Copies bytes at `off` of the region into `out`.
    pub(crate) fn read(&self, off: usize, out: &mut [u8]) -> Result {
        match self {
            Mem::User(u) => u.read(off, out),
            Mem::Kernel => {
                let src = Self::kernel_range(off, out.len())?;
                // SAFETY: as in `write`.
                unsafe { ptr::copy_nonoverlapping(src.cast_const(), out.as_mut_ptr(), out.len()) };
                Ok(())
            }
            Mem::Pages(p) => p.pieces(off, out.len(), |at, r| Mem::Kernel.read(at, &mut out[r])),
        }
    }
}

impl Drop for UMem {
    fn drop(&mut self) {
        // SAFETY: from `ib_umem_get`, released once.
        unsafe { b::ib_umem_release(self.umem) };
    }
}

/// A CQ's raw pointer, cleared when the CQ is destroyed.
struct RawCq(*mut b::ib_cq);
// SAFETY: only used under the `CqEvents` lock, and only while non-null.
unsafe impl Send for RawCq {}

/// Raises completion events on a CQ (its `comp_handler`: the uverbs event
/// channel for user CQs, the consumer's handler for kernel CQs). Outlives the
/// CQ safely: after the CQ is destroyed, [`CqEvents::fire`] does nothing.
#[derive(Clone)]
pub(crate) struct CqEvents(Arc<crate::ffi::sync::BhLock<RawCq>>);

impl CqEvents {
    pub(super) fn new(cq: *mut b::ib_cq) -> Result<Self> {
        Ok(CqEvents(Arc::pin_init(
            crate::ffi::sync::new_bh_lock!(RawCq(cq), "metaroce_cq_events"),
            GFP_KERNEL,
        )?))
    }

    /// Raises a completion event. Call without holding locks the consumer's
    /// handler may take (it may re-arm the CQ).
    pub(crate) fn fire(&self) {
        let cq = self.0.lock();
        if !cq.0.is_null() {
            // SAFETY: non-null means the CQ is not yet destroyed: `detach`
            // clears it under this lock before the core frees it.
            unsafe { b::metaroce_cq_event(cq.0) };
        }
    }

    /// Raises `IB_EVENT_CQ_ERR` (IBTA 11.6.3.1: a completion was lost to a
    /// full CQ) through the CQ's `event_handler`, as rxe does on overrun.
    pub(crate) fn overrun(&self) {
        let cq = self.0.lock();
        if cq.0.is_null() {
            return;
        }
        // SAFETY: non-null means the CQ is not yet destroyed (`detach`
        // clears it under this lock first); the event lives for the call.
        unsafe {
            let c = cq.0;
            if let Some(h) = (*c).event_handler {
                let mut ev: b::ib_event = core::mem::zeroed();
                ev.device = (*c).device;
                ev.element.cq = c;
                ev.event = b::ib_event_type_IB_EVENT_CQ_ERR;
                h(&mut ev, (*c).cq_context);
            }
        }
    }

    pub(super) fn detach(&self) {
        self.0.lock().0 = ptr::null_mut();
    }
}

/// An SRQ's raw pointer, cleared when the SRQ is destroyed.
struct RawSrq(*mut b::ib_srq);
// SAFETY: only used under the `SrqEvents` lock, and only while non-null.
unsafe impl Send for RawSrq {}

/// Raises an SRQ's asynchronous events (`IB_EVENT_SRQ_LIMIT_REACHED`,
/// IBTA 11.6.3.1) through its `event_handler`; does nothing once the SRQ is
/// destroyed.
#[derive(Clone)]
pub(crate) struct SrqEvents(Arc<super::sync::BhLock<RawSrq>>);

impl SrqEvents {
    pub(super) fn new(srq: *mut b::ib_srq) -> Result<Self> {
        Ok(SrqEvents(Arc::pin_init(
            super::sync::new_bh_lock!(RawSrq(srq), "metaroce_srq_events"),
            GFP_KERNEL,
        )?))
    }

    /// Raises `IB_EVENT_SRQ_LIMIT_REACHED`.
    pub(crate) fn limit_reached(&self) {
        let srq = self.0.lock();
        if srq.0.is_null() {
            return;
        }
        // SAFETY: non-null means the SRQ is not yet destroyed (`detach`
        // clears it under this lock first); the event lives for the call.
        unsafe {
            let s = srq.0;
            if let Some(h) = (*s).event_handler {
                let mut ev: b::ib_event = core::mem::zeroed();
                ev.device = (*s).device;
                ev.element.srq = s;
                ev.event = b::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED;
                h(&mut ev, (*s).srq_context);
            }
        }
    }

    pub(super) fn detach(&self) {
        self.0.lock().0 = ptr::null_mut();
    }
}

/// A QP's raw pointer, cleared when the QP is destroyed.
struct RawQp(*mut b::ib_qp);
// SAFETY: only used under the `QpEvents` lock, and only while non-null.
unsafe impl Send for RawQp {}

/// Raises a QP's asynchronous events through its `event_handler` (the uverbs
/// async event file for user QPs, the consumer's handler for kernel QPs);
/// does nothing once the QP is destroyed.
#[derive(Clone)]
pub(crate) struct QpEvents(Arc<super::sync::BhLock<RawQp>>);

impl QpEvents {
    pub(super) fn new(qp: *mut b::ib_qp) -> Result<Self> {
        Ok(QpEvents(Arc::pin_init(
            super::sync::new_bh_lock!(RawQp(qp), "metaroce_qp_events"),
            GFP_KERNEL,
        )?))
    }

    /// Raises `IB_EVENT_QP_LAST_WQE_REACHED` (IBTA 11.6.3.1): a QP on an SRQ
    /// entered the error state and takes no more WQEs from it
    /// (`ib_drain_qp` of such a QP waits for it).
    pub(crate) fn last_wqe_reached(&self) {
        self.raise(b::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED);
    }

    /// Raises `IB_EVENT_SQ_DRAINED` (IBTA 10.3.1.2, 11.6.3.1): a QP moved to
    /// SQD with asynchronous notification has no send WQE in progress left.
    pub(crate) fn sq_drained(&self) {
        self.raise(b::ib_event_type_IB_EVENT_SQ_DRAINED);
    }

    fn raise(&self, event: b::ib_event_type) {
        let qp = self.0.lock();
        if qp.0.is_null() {
            return;
        }
        // SAFETY: non-null means the QP is not yet destroyed (`detach`
        // clears it under this lock first); the event lives for the call.
        unsafe {
            let q = qp.0;
            if let Some(h) = (*q).event_handler {
                let mut ev: b::ib_event = core::mem::zeroed();
                ev.device = (*q).device;
                ev.element.qp = q;
                ev.event = event;
                h(&mut ev, (*q).qp_context);
            }
        }
    }

    pub(super) fn detach(&self) {
        self.0.lock().0 = ptr::null_mut();
    }
}

/// QP transport type (IBTA 9.8).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable datagram.
    Ud,
    /// The general services QP (QP1, IBTA 10.2.4): UD to the MAD layer.
    Gsi,
}

impl QpType {
    /// Datagram service (UD or the GSI QP).
    pub(crate) fn is_datagram(self) -> bool {
        matches!(self, QpType::Ud | QpType::Gsi)
    }
}

/// Work queue sizes of a QP (`struct ib_qp_cap`).
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct QpCaps {
    pub(crate) max_send_wr: u32,
    pub(crate) max_recv_wr: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_inline_data: u32,
}

impl QpCaps {
    pub(super) fn from_c(c: &b::ib_qp_cap) -> Self {
        QpCaps {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }

    pub(super) fn to_c(self, c: &mut b::ib_qp_cap) {
        c.max_send_wr = self.max_send_wr;
        c.max_recv_wr = self.max_recv_wr;
        c.max_send_sge = self.max_send_sge;
        c.max_recv_sge = self.max_recv_sge;
        c.max_inline_data = self.max_inline_data;
    }
}

/// A QP's creation attributes (`struct ib_qp_init_attr`), as the driver sees
/// them; `caps` is updated to the sizes granted.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QpInit {
    pub(crate) qp_type: QpType,
    pub(crate) caps: QpCaps,
    /// Every send WR completes with a CQE (`IB_SIGNAL_ALL_WR`).
    pub(crate) sq_sig_all: bool,
}

/// QP states (IBTA 10.3.1; `enum ib_qp_state`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[repr(u32)]
pub(crate) enum QpState {
    #[default]
    Reset = 0,
    Init = 1,
    Rtr = 2,
    Rts = 3,
    Sqd = 4,
    Sqe = 5,
    Err = 6,
}

impl QpState {
    pub(super) fn from_c(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::Reset,
            1 => Self::Init,
            2 => Self::Rtr,
            3 => Self::Rts,
            4 => Self::Sqd,
            5 => Self::Sqe,
            6 => Self::Err,
            _ => return None,
        })
    }
}

/// Whether `cur → next` with attribute `mask` is a legal QP transition for
/// `qp_type` (IBTA 10.3.1 table; the RDMA core's `ib_modify_qp_is_ok`).
pub(crate) fn modify_qp_is_ok(cur: QpState, next: QpState, qp_type: QpType, mask: u32) -> bool {
    let t = match qp_type {
        QpType::Rc => b::ib_qp_type_IB_QPT_RC,
        QpType::Ud => b::ib_qp_type_IB_QPT_UD,
        QpType::Gsi => b::ib_qp_type_IB_QPT_GSI,
    };
    // SAFETY: pure function of its arguments.
    unsafe { b::ib_modify_qp_is_ok(cur as u32, next as u32, t, mask) }
}

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
    pub(super) fn from_c(a: &b::rdma_ah_attr) -> Result<Self> {
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

    pub(super) fn to_c(self, a: &mut b::rdma_ah_attr) {
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

/// `IB_QP_*` attribute mask bits (`enum ib_qp_attr_mask`).
pub(crate) mod qp_mask {
    use super::b;
    pub(crate) const STATE: u32 = b::ib_qp_attr_mask_IB_QP_STATE;
    pub(crate) const CUR_STATE: u32 = b::ib_qp_attr_mask_IB_QP_CUR_STATE;
    pub(crate) const EN_SQD_ASYNC_NOTIFY: u32 = b::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY;
    pub(crate) const ACCESS_FLAGS: u32 = b::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS;
    pub(crate) const PKEY_INDEX: u32 = b::ib_qp_attr_mask_IB_QP_PKEY_INDEX;
    pub(crate) const PORT: u32 = b::ib_qp_attr_mask_IB_QP_PORT;
    pub(crate) const QKEY: u32 = b::ib_qp_attr_mask_IB_QP_QKEY;
    pub(crate) const AV: u32 = b::ib_qp_attr_mask_IB_QP_AV;
    pub(crate) const PATH_MTU: u32 = b::ib_qp_attr_mask_IB_QP_PATH_MTU;
    pub(crate) const TIMEOUT: u32 = b::ib_qp_attr_mask_IB_QP_TIMEOUT;
    pub(crate) const RETRY_CNT: u32 = b::ib_qp_attr_mask_IB_QP_RETRY_CNT;
    pub(crate) const RNR_RETRY: u32 = b::ib_qp_attr_mask_IB_QP_RNR_RETRY;
    pub(crate) const RQ_PSN: u32 = b::ib_qp_attr_mask_IB_QP_RQ_PSN;
    pub(crate) const MAX_QP_RD_ATOMIC: u32 = b::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC;
    pub(crate) const MIN_RNR_TIMER: u32 = b::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER;
    pub(crate) const SQ_PSN: u32 = b::ib_qp_attr_mask_IB_QP_SQ_PSN;
    pub(crate) const MAX_DEST_RD_ATOMIC: u32 = b::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC;
    pub(crate) const CAP: u32 = b::ib_qp_attr_mask_IB_QP_CAP;
    pub(crate) const DEST_QPN: u32 = b::ib_qp_attr_mask_IB_QP_DEST_QPN;
    /// Every bit `ib_modify_qp` may pass to a driver.
    pub(crate) const STANDARD: u32 = (b::ib_qp_attr_mask_IB_QP_RATE_LIMIT << 1) - 1;
}

/// QP attributes (`struct ib_qp_attr`): what `modify_qp` sets (the fields
/// named by `mask`) and `query_qp` reports.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct QpAttr {
    pub(crate) mask: u32,
    pub(crate) state: QpState,
    pub(crate) cur_state: QpState,
    /// `enum ib_mtu` (1 = 256 … 5 = 4096).
    pub(crate) path_mtu: u32,
    pub(crate) qkey: u32,
    pub(crate) rq_psn: u32,
    pub(crate) sq_psn: u32,
    pub(crate) dest_qpn: u32,
    pub(crate) access: u32,
    pub(crate) caps: QpCaps,
    pub(crate) av: Option<Av>,
    pub(crate) pkey_index: u16,
    pub(crate) en_sqd_async_notify: bool,
    pub(crate) sq_draining: bool,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) port: u32,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
}

impl QpAttr {
    /// From a `modify_qp` call. A raw state outside the enum is `EINVAL`;
    /// an AV without a GRH is `EINVAL` (checked only if `IB_QP_AV` is set).
    pub(super) fn from_c(a: &b::ib_qp_attr, mask: u32) -> Result<Self> {
        let st = |v: u32| QpState::from_c(v).ok_or(EINVAL);
        Ok(QpAttr {
            mask,
            state: if mask & qp_mask::STATE != 0 {
                st(a.qp_state)?
            } else {
                QpState::Reset
            },
            cur_state: if mask & qp_mask::CUR_STATE != 0 {
                st(a.cur_qp_state)?
            } else {
                QpState::Reset
            },
            path_mtu: a.path_mtu,
            qkey: a.qkey,
            rq_psn: a.rq_psn,
            sq_psn: a.sq_psn,
            dest_qpn: a.dest_qp_num,
            access: a.qp_access_flags as u32,
            caps: QpCaps::from_c(&a.cap),
            av: if mask & qp_mask::AV != 0 {
                Some(Av::from_c(&a.ah_attr)?)
            } else {
                None
            },
            pkey_index: a.pkey_index,
            en_sqd_async_notify: a.en_sqd_async_notify != 0,
            sq_draining: false,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            min_rnr_timer: a.min_rnr_timer,
            port: a.port_num,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
        })
    }

    pub(super) fn to_c(self, a: &mut b::ib_qp_attr) {
        a.qp_state = self.state as u32;
        a.cur_qp_state = self.state as u32;
        a.path_mtu = self.path_mtu;
        a.path_mig_state = b::ib_mig_state_IB_MIG_MIGRATED;
        a.qkey = self.qkey;
        a.rq_psn = self.rq_psn;
        a.sq_psn = self.sq_psn;
        a.dest_qp_num = self.dest_qpn;
        a.qp_access_flags = self.access as i32;
        self.caps.to_c(&mut a.cap);
        if let Some(av) = &self.av {
            av.to_c(&mut a.ah_attr);
        }
        a.pkey_index = self.pkey_index;
        a.en_sqd_async_notify = self.en_sqd_async_notify as u8;
        a.sq_draining = self.sq_draining as u8;
        a.max_rd_atomic = self.max_rd_atomic;
        a.max_dest_rd_atomic = self.max_dest_rd_atomic;
        a.min_rnr_timer = self.min_rnr_timer;
        a.port_num = self.port;
        a.timeout = self.timeout;
        a.retry_cnt = self.retry_cnt;
        a.rnr_retry = self.rnr_retry;
    }
}

/// A work completion in the user ABI layout (`struct ib_uverbs_wc`, 48
/// bytes): what user CQ rings hold.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct Wc {
    pub(crate) wr_id: u64,
    /// `IB_WC_*` status.
    pub(crate) status: u32,
    /// `IB_UVERBS_WC_*` opcode.
    pub(crate) opcode: u32,
    pub(crate) byte_len: u32,
    /// Immediate data (network order as carried) or invalidated rkey.
    pub(crate) ex: u32,
    pub(crate) qp_num: u32,
    pub(crate) src_qp: u32,
    /// `IB_WC_*` flags (`IB_WC_WITH_IMM` …).
    pub(crate) wc_flags: u32,
    /// Kernel CQs: `enum rdma_network_type` of a datagram's IP header
    /// (with `IB_WC_WITH_NETWORK_HDR_TYPE`), 0 otherwise.
    pub(crate) net_type: u8,
}

/// The `struct ib_qp` a kernel completion names (`ib_wc.qp`). Opaque to the
/// verbs layer, which only carries it from a QP to its CQ; never written to
/// memory user space can see.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct QpHandle(usize);

impl Wc {
    /// Size of `struct ib_uverbs_wc`.
    pub(crate) const SIZE: usize = 48;
    /// Slot size of a kernel CQ: the user ABI bytes, then the QP handle at
    /// 48 and the network header type at 56.
    pub(crate) const KERNEL_SIZE: usize = 64;

    /// The slot bytes of a kernel CQ (see [`Self::KERNEL_SIZE`]).
    pub(crate) fn kernel_bytes(&self, qp: QpHandle) -> [u8; Self::KERNEL_SIZE] {
        let mut o = [0u8; Self::KERNEL_SIZE];
        o[..Self::SIZE].copy_from_slice(&self.bytes());
        o[48..56].copy_from_slice(&qp.0.to_ne_bytes());
        o[56] = self.net_type;
        o
    }

    /// The user ABI bytes.
    pub(crate) fn bytes(&self) -> [u8; Self::SIZE] {
        let mut o = [0u8; Self::SIZE];
        o[0..8].copy_from_slice(&self.wr_id.to_ne_bytes());
        o[8..12].copy_from_slice(&self.status.to_ne_bytes());
        o[12..16].copy_from_slice(&self.opcode.to_ne_bytes());
        // 16..20 vendor_err = 0
        o[20..24].copy_from_slice(&self.byte_len.to_ne_bytes());
        o[24..28].copy_from_slice(&self.ex.to_ne_bytes());
        o[28..32].copy_from_slice(&self.qp_num.to_ne_bytes());
        o[32..36].copy_from_slice(&self.src_qp.to_ne_bytes());
        o[36..40].copy_from_slice(&self.wc_flags.to_ne_bytes());
        // pkey_index, slid 0; sl 0; dlid_path_bits 0; port_num 1
        o[46] = 1;
        o
    }
}

/// One scatter/gather element of a WQE (`struct rxe_sge`).
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Sge {
    pub(crate) addr: u64,
    pub(crate) length: u32,
    pub(crate) lkey: u32,
}

/// `IB_SEND_*` flags.
pub(crate) mod send_flags {
    pub(crate) const FENCE: u32 = 1;
    pub(crate) const SIGNALED: u32 = 2;
    pub(crate) const SOLICITED: u32 = 4;
    pub(crate) const INLINE: u32 = 8;
}

fn rd_u32(q: &Queue, i: u32, off: usize) -> Result<u32> {
    let mut w = [0u8; 4];
    q.read(i, off, &mut w)?;
    Ok(u32::from_ne_bytes(w))
}

fn rd_u64(q: &Queue, i: u32, off: usize) -> Result<u64> {
    let mut w = [0u8; 8];
    q.read(i, off, &mut w)?;
    Ok(u64::from_ne_bytes(w))
}

/// A send WQE as user space wrote it into the SQ ring
/// (`struct rxe_send_wqe`), read once into kernel memory. Nothing in it is
/// trusted: lengths and keys are checked where they are used.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct SendWqe {
    pub(crate) wr_id: u64,
    /// `IB_WR_*` opcode.
    pub(crate) opcode: u32,
    pub(crate) send_flags: u32,
    /// Immediate data (as stored: network order) or rkey to invalidate.
    pub(crate) ex: u32,
    pub(crate) remote_addr: u64,
    pub(crate) rkey: u32,
    /// Total length (`dma.length`).
    pub(crate) length: u32,
    pub(crate) num_sge: u32,
    /// Atomics: `wr.atomic.compare_add`, `swap` and `rkey` (the remote
    /// address is `remote_addr`, shared with `wr.rdma`).
    pub(crate) compare_add: u64,
    pub(crate) swap: u64,
    pub(crate) atomic_rkey: u32,
    /// UD: `wr.ud.remote_qpn`, `remote_qkey` and `ah_num`.
    pub(crate) ud_qpn: u32,
    pub(crate) ud_qkey: u32,
    pub(crate) ah_num: u32,
    /// BIND_MW: `wr.mw` (`addr` is `remote_addr`).
    pub(crate) mw_length: u64,
    pub(crate) mw_mr_lkey: u32,
    pub(crate) mw_rkey: u32,
    pub(crate) mw_new_rkey: u32,
    pub(crate) mw_access: u32,
    /// REG_MR (kernel QPs): the MR's current key, its new key and access
    /// (`wr.reg`, with our key in place of the `ib_mr` pointer).
    pub(crate) reg_mr_key: u32,
    pub(crate) reg_key: u32,
    pub(crate) reg_access: u32,
}

const WR: usize = core::mem::offset_of!(b::rxe_send_wqe, wr);
const SDMA: usize = core::mem::offset_of!(b::rxe_send_wqe, dma);
const RDMA_OFF: usize = core::mem::offset_of!(b::rxe_send_wr, wr);
const DMA_LEN: usize = core::mem::offset_of!(b::rxe_dma_info, length);
const DMA_NSGE: usize = core::mem::offset_of!(b::rxe_dma_info, num_sge);
/// `rxe_dma_info.sge[]` / `inline_data[]`: the flexible array after the fixed fields.
const DMA_DATA: usize = core::mem::offset_of!(b::rxe_dma_info, __bindgen_anon_1);
const RDMA_DMA: usize = core::mem::offset_of!(b::rxe_recv_wqe, dma);

impl SendWqe {
    /// Bytes of a send WQE before its SGEs / inline data.
    pub(crate) const HEADER: usize = SDMA + DMA_DATA;

    /// Reads the WQE in slot `i`.
    pub(crate) fn read(q: &Queue, i: u32) -> Result<Self> {
        Ok(SendWqe {
            wr_id: rd_u64(q, i, WR + core::mem::offset_of!(b::rxe_send_wr, wr_id))?,
            opcode: rd_u32(q, i, WR + core::mem::offset_of!(b::rxe_send_wr, opcode))?,
            send_flags: rd_u32(q, i, WR + core::mem::offset_of!(b::rxe_send_wr, send_flags))?,
            ex: rd_u32(q, i, WR + core::mem::offset_of!(b::rxe_send_wr, ex))?,
            // `wr.rdma.remote_addr` / `rkey` (`wr.rdma` starts the union).
            remote_addr: rd_u64(q, i, WR + RDMA_OFF)?,
            rkey: rd_u32(q, i, WR + RDMA_OFF + 8)?,
            length: rd_u32(q, i, SDMA + DMA_LEN)?,
            num_sge: rd_u32(q, i, SDMA + DMA_NSGE)?,
            compare_add: rd_u64(q, i, WR + RDMA_OFF + 8)?,
            swap: rd_u64(q, i, WR + RDMA_OFF + 16)?,
            atomic_rkey: rd_u32(q, i, WR + RDMA_OFF + 24)?,
            ud_qpn: rd_u32(q, i, WR + RDMA_OFF)?,
            ud_qkey: rd_u32(q, i, WR + RDMA_OFF + 4)?,
            ah_num: rd_u32(q, i, WR + RDMA_OFF + 12)?,
            mw_length: rd_u64(q, i, WR + RDMA_OFF + 8)?,
            mw_mr_lkey: rd_u32(q, i, WR + RDMA_OFF + 16)?,
            mw_rkey: rd_u32(q, i, WR + RDMA_OFF + 20)?,
            mw_new_rkey: rd_u32(q, i, WR + RDMA_OFF + 24)?,
            mw_access: rd_u32(q, i, WR + RDMA_OFF + 28)?,
            reg_mr_key: rd_u32(q, i, WR + RDMA_OFF)?,
            reg_key: rd_u32(q, i, WR + RDMA_OFF + 8)?,
            reg_access: rd_u32(q, i, WR + RDMA_OFF + 12)?,
        })
    }

    /// SGE `n` of the send WQE in slot `i`.
    pub(crate) fn sge(q: &Queue, i: u32, n: u32) -> Result<Sge> {
        sge_at(q, i, SDMA + DMA_DATA, n)
    }

    /// Writes this WQE's fixed fields into slot `i` (kernel `post_send`),
    /// at the offsets [`Self::read`] reads; the SGEs or inline data follow
    /// ([`Self::write_sge`], [`Queue::write`] at [`Self::HEADER`]). `ud`:
    /// the QP is a datagram QP (the union holds `wr.ud`).
    pub(super) fn write(&self, q: &Queue, i: u32, ud: bool) -> Result {
        let w32 = |off: usize, v: u32| q.write(i, off, &v.to_ne_bytes());
        let w64 = |off: usize, v: u64| q.write(i, off, &v.to_ne_bytes());
        let u = WR + RDMA_OFF;
        // Slots are reused: clear the union before filling one member.
        q.write(i, u, &[0u8; 64])?;
        w64(
            WR + core::mem::offset_of!(b::rxe_send_wr, wr_id),
            self.wr_id,
        )?;
        w32(
            WR + core::mem::offset_of!(b::rxe_send_wr, opcode),
            self.opcode,
        )?;
        w32(
            WR + core::mem::offset_of!(b::rxe_send_wr, send_flags),
            self.send_flags,
        )?;
        w32(WR + core::mem::offset_of!(b::rxe_send_wr, ex), self.ex)?;
        w32(SDMA + DMA_LEN, self.length)?;
        w32(SDMA + DMA_NSGE, self.num_sge)?;
        match self.opcode {
            // UD sends carry no remote address: remote_qpn, qkey, ah_num.
            _ if ud => {
                w32(u, self.ud_qpn)?;
                w32(u + 4, self.ud_qkey)?;
                w32(u + 12, self.ah_num)
            }
            b::ib_wr_opcode_IB_WR_REG_MR => {
                w64(u, u64::from(self.reg_mr_key))?;
                w32(u + 8, self.reg_key)?;
                w32(u + 12, self.reg_access)
            }
            // Atomics: remote_addr, compare_add, swap, rkey.
            b::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
            | b::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
                w64(u, self.remote_addr)?;
                w64(u + 8, self.compare_add)?;
                w64(u + 16, self.swap)?;
                w32(u + 24, self.atomic_rkey)
            }
            _ => {
                w64(u, self.remote_addr)?;
                w32(u + 8, self.rkey)
            }
        }
    }

    /// Writes SGE `n` of the send WQE in slot `i`.
    pub(super) fn write_sge(q: &Queue, i: u32, n: u32, s: &Sge) -> Result {
        sge_put(q, i, SDMA + DMA_DATA, n, s)
    }

    /// Copies inline data bytes `[off, off + out.len())` of the WQE in slot `i`.
    pub(crate) fn inline_data(q: &Queue, i: u32, off: usize, out: &mut [u8]) -> Result {
        q.read(i, SDMA + DMA_DATA + off, out)
    }
}

fn sge_put(q: &Queue, i: u32, base: usize, n: u32, s: &Sge) -> Result {
    let at = base + (n as usize) * core::mem::size_of::<b::rxe_sge>();
    q.write(i, at, &s.addr.to_ne_bytes())?;
    q.write(i, at + 8, &s.length.to_ne_bytes())?;
    q.write(i, at + 12, &s.lkey.to_ne_bytes())
}

fn sge_at(q: &Queue, i: u32, base: usize, n: u32) -> Result<Sge> {
    let at = base + (n as usize) * core::mem::size_of::<b::rxe_sge>();
    Ok(Sge {
        addr: rd_u64(q, i, at)?,
        length: rd_u32(q, i, at + 8)?,
        lkey: rd_u32(q, i, at + 12)?,
    })
}

/// A receive WQE (`struct rxe_recv_wqe`).
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct RecvWqe {
    pub(crate) wr_id: u64,
    pub(crate) num_sge: u32,
}

impl RecvWqe {
    /// Bytes of a receive WQE before its SGEs.
    pub(crate) const HEADER: usize = RDMA_DMA + DMA_DATA;

    /// Reads the WQE in slot `i`.
    pub(crate) fn read(q: &Queue, i: u32) -> Result<Self> {
        Ok(RecvWqe {
            wr_id: rd_u64(q, i, core::mem::offset_of!(b::rxe_recv_wqe, wr_id))?,
            num_sge: rd_u32(q, i, RDMA_DMA + DMA_NSGE)?,
        })
    }

    /// SGE `n` of the receive WQE in slot `i`.
    pub(crate) fn sge(q: &Queue, i: u32, n: u32) -> Result<Sge> {
        sge_at(q, i, RDMA_DMA + DMA_DATA, n)
    }

    /// Writes a receive WQE of `sges` into slot `i` (kernel `post_recv`).
    pub(super) fn write(q: &Queue, i: u32, wr_id: u64, sges: &[Sge]) -> Result {
        let mut total = 0u32;
        for (n, s) in sges.iter().enumerate() {
            sge_put(q, i, RDMA_DMA + DMA_DATA, n as u32, s)?;
            total = total.saturating_add(s.length);
        }
        q.write(
            i,
            core::mem::offset_of!(b::rxe_recv_wqe, wr_id),
            &wr_id.to_ne_bytes(),
        )?;
        q.write(i, RDMA_DMA + DMA_LEN, &total.to_ne_bytes())?;
        q.write(i, RDMA_DMA + DMA_NSGE, &(sges.len() as u32).to_ne_bytes())
    }
}

/// Bytes per SGE in a WQE.
pub(crate) const SGE_SIZE: usize = core::mem::size_of::<b::rxe_sge>();

/// The handle of a core QP object, for its kernel completions.
pub(super) fn qp_handle(qp: *mut b::ib_qp) -> QpHandle {
    QpHandle(qp as usize)
}

/// A kernel CQ slot ([`Wc::kernel_bytes`]) as the `struct ib_wc` kernel
/// consumers poll.
pub(super) fn kernel_wc(slot: &[u8; Wc::KERNEL_SIZE]) -> b::ib_wc {
    let u32_at = |o: usize| u32::from_ne_bytes([slot[o], slot[o + 1], slot[o + 2], slot[o + 3]]);
    let mut h = [0u8; 8];
    h.copy_from_slice(&slot[48..56]);
    let mut id = [0u8; 8];
    id.copy_from_slice(&slot[0..8]);
    let mut wc = b::ib_wc::default();
    wc.__bindgen_anon_1.wr_id = u64::from_ne_bytes(id);
    wc.status = u32_at(8);
    wc.opcode = u32_at(12);
    wc.vendor_err = u32_at(16);
    wc.byte_len = u32_at(20);
    wc.ex.invalidate_rkey = u32_at(24);
    wc.qp = usize::from_ne_bytes(h) as *mut b::ib_qp;
    wc.src_qp = u32_at(32);
    wc.wc_flags = u32_at(36) as i32;
    wc.port_num = 1;
    wc.network_hdr_type = slot[56];
    wc
}

/// The chain of work requests of a kernel `ib_post_send`, written into the
/// SQ ring one at a time. After a failure [`SendWrs::bad`] is the request
/// that failed (`bad_wr`).
///
/// # Invariants
///
/// `cur` is null or a valid `ib_send_wr` (of the container type its opcode
/// and the QP type imply) whose `next` chain stays valid for the call.
pub(crate) struct SendWrs {
    cur: *const b::ib_send_wr,
    ah_num: fn(*mut b::ib_ah) -> u32,
}

/// The IB_WR_* opcodes a kernel consumer may post, per QP type (rxe's
/// `rxe_wr_opcode_info` masks for what the data path implements).
fn send_opcode_ok(op: u32, ud: bool) -> bool {
    match op {
        b::ib_wr_opcode_IB_WR_SEND | b::ib_wr_opcode_IB_WR_SEND_WITH_IMM => true,
        b::ib_wr_opcode_IB_WR_SEND_WITH_INV => !ud,
        b::ib_wr_opcode_IB_WR_RDMA_WRITE
        | b::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
        | b::ib_wr_opcode_IB_WR_RDMA_READ
        | b::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
        | b::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD
        | b::ib_wr_opcode_IB_WR_LOCAL_INV
        | b::ib_wr_opcode_IB_WR_REG_MR => !ud,
        _ => false,
    }
}

impl SendWrs {
    /// # Safety
    ///
    /// `wr` is null or the head of a valid chain, as the RDMA core passes to
    /// `ib_device_ops.post_send`, live for the life of the value.
    pub(super) unsafe fn new(wr: *const b::ib_send_wr, ah_num: fn(*mut b::ib_ah) -> u32) -> Self {
        SendWrs { cur: wr, ah_num }
    }

    /// The request not (yet) posted: the failed one after an error.
    pub(super) fn bad(&self) -> *const b::ib_send_wr {
        self.cur
    }

    /// Whether requests remain.
    pub(crate) fn pending(&self) -> bool {
        !self.cur.is_null()
    }

    /// Writes the requests into `q` from its producer index on, publishing
    /// each: `ENOMEM` when the ring is full, or [`Self::write_next`]'s error;
    /// the requests before the failed one stay posted.
    pub(crate) fn post(&mut self, q: &Queue, ud: bool, caps: &QpCaps) -> Result {
        while self.pending() {
            let prod = q.producer();
            let next = q.advance(prod, 1);
            if next == q.consumer() {
                return Err(ENOMEM);
            }
            self.write_next(q, prod, ud, caps)?;
            q.set_producer(next);
        }
        Ok(())
    }

    /// Validates the next request against `caps` and writes it into slot `i`
    /// of `q` (`ud`: a datagram QP). `EINVAL` for an opcode the QP type does
    /// not take, too many SGEs, inline data over `max_inline_data`, or
    /// lengths that overflow (rxe's `validate_send_wr`).
    pub(crate) fn write_next(&mut self, q: &Queue, i: u32, ud: bool, caps: &QpCaps) -> Result {
        if self.cur.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: by the invariant `cur` is a valid request.
        let wr = unsafe { &*self.cur };
        let op = wr.opcode;
        if !send_opcode_ok(op, ud) || wr.num_sge < 0 || wr.num_sge as u32 > caps.max_send_sge {
            return Err(EINVAL);
        }
        let n = wr.num_sge as usize;
        let sgl: &[b::ib_sge] = if n == 0 || wr.sg_list.is_null() {
            &[]
        } else {
            // SAFETY: the consumer's `sg_list` holds `num_sge` entries.
            unsafe { core::slice::from_raw_parts(wr.sg_list, n) }
        };
        let mut length = 0u32;
        for s in sgl {
            length = length.checked_add(s.length).ok_or(EINVAL)?;
        }
        let flags = wr.send_flags as u32;
        let inline = flags & send_flags::INLINE != 0
            && matches!(
                op,
                b::ib_wr_opcode_IB_WR_SEND
                    | b::ib_wr_opcode_IB_WR_SEND_WITH_IMM
                    | b::ib_wr_opcode_IB_WR_SEND_WITH_INV
                    | b::ib_wr_opcode_IB_WR_RDMA_WRITE
                    | b::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
            );
        if inline && length > caps.max_inline_data {
            return Err(EINVAL);
        }
        let mut w = SendWqe {
            // SAFETY: plain data either way (`wr_id` or the `wr_cqe` pointer
            // in the same 8 bytes, handed back unchanged in `ib_wc`).
            wr_id: unsafe { wr.__bindgen_anon_1.wr_id },
            opcode: op,
            // IB_SEND_INLINE on an opcode that carries no inline data (READ,
            // atomics, local operations) is ignored, as in rxe: the WQE then
            // holds SGEs, never to be read as data.
            send_flags: if inline {
                flags
            } else {
                flags & !send_flags::INLINE
            },
            // SAFETY: a 32-bit union; the raw bits are carried.
            ex: unsafe { wr.ex.invalidate_rkey },
            length,
            num_sge: if inline { 0 } else { n as u32 },
            ..SendWqe::default()
        };
        let cur = self.cur;
        if ud {
            // SAFETY: a datagram QP's requests are `ib_ud_wr`s.
            let u = unsafe { &*cur.cast::<b::ib_ud_wr>() };
            if u.ah.is_null() {
                return Err(EINVAL);
            }
            w.ud_qpn = u.remote_qpn;
            w.ud_qkey = u.remote_qkey;
            w.ah_num = (self.ah_num)(u.ah);
        } else {
            match op {
                b::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
                | b::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
                    // SAFETY: atomic requests are `ib_atomic_wr`s.
                    let a = unsafe { &*cur.cast::<b::ib_atomic_wr>() };
                    w.remote_addr = a.remote_addr;
                    w.compare_add = a.compare_add;
                    w.swap = a.swap;
                    w.atomic_rkey = a.rkey;
                }
                b::ib_wr_opcode_IB_WR_REG_MR => {
                    // SAFETY: REG_MR requests are `ib_reg_wr`s naming a live
                    // MR of the consumer's.
                    let r = unsafe { &*cur.cast::<b::ib_reg_wr>() };
                    if r.mr.is_null() {
                        return Err(EINVAL);
                    }
                    // SAFETY: as above.
                    w.reg_mr_key = unsafe { (*r.mr).lkey };
                    w.reg_key = r.key;
                    w.reg_access = r.access as u32;
                }
                b::ib_wr_opcode_IB_WR_RDMA_WRITE
                | b::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
                | b::ib_wr_opcode_IB_WR_RDMA_READ => {
                    // SAFETY: RDMA requests are `ib_rdma_wr`s.
                    let r = unsafe { &*cur.cast::<b::ib_rdma_wr>() };
                    w.remote_addr = r.remote_addr;
                    w.rkey = r.rkey;
                }
                _ => {}
            }
        }
        w.write(q, i, ud)?;
        if inline {
            let mut at = SendWqe::HEADER;
            let mut chunk = [0u8; 64];
            for s in sgl {
                let mut done = 0usize;
                while done < s.length as usize {
                    let k = (s.length as usize - done).min(chunk.len());
                    let addr = usize::try_from(s.addr).map_err(|_| EFAULT)?;
                    Mem::Kernel.read(addr.checked_add(done).ok_or(EFAULT)?, &mut chunk[..k])?;
                    q.write(i, at, &chunk[..k])?;
                    at += k;
                    done += k;
                }
            }
        } else {
            for (k, s) in sgl.iter().enumerate() {
                let sge = Sge {
                    addr: s.addr,
                    length: s.length,
                    lkey: s.lkey,
                };
                SendWqe::write_sge(q, i, k as u32, &sge)?;
            }
        }
        // SAFETY: `cur` is valid; its `next` is null or valid (invariant).
        self.cur = unsafe { (*cur).next };
        Ok(())
    }
}

/// The chain of a kernel `ib_post_recv` / `ib_post_srq_recv`, written into
/// an RQ or SRQ ring one at a time; after a failure [`RecvWrs::bad`] is the
/// request that failed.
///
/// # Invariants
///
/// `cur` is null or a valid `ib_recv_wr` whose `next` chain stays valid.
pub(crate) struct RecvWrs {
    cur: *const b::ib_recv_wr,
}

impl RecvWrs {
    /// # Safety
    ///
    /// `wr` is null or the head of a valid chain, as the RDMA core passes to
    /// `post_recv` / `post_srq_recv`, live for the life of the value.
    pub(super) unsafe fn new(wr: *const b::ib_recv_wr) -> Self {
        RecvWrs { cur: wr }
    }

    /// The request not (yet) posted: the failed one after an error.
    pub(super) fn bad(&self) -> *const b::ib_recv_wr {
        self.cur
    }

    /// Whether requests remain.
    pub(crate) fn pending(&self) -> bool {
        !self.cur.is_null()
    }

    /// Writes the requests into RQ or SRQ ring `q` from its producer index
    /// on (see [`SendWrs::post`]).
    pub(crate) fn post(&mut self, q: &Queue, max_sge: u32) -> Result {
        while self.pending() {
            let prod = q.producer();
            let next = q.advance(prod, 1);
            if next == q.consumer() {
                return Err(ENOMEM);
            }
            self.write_next(q, prod, max_sge)?;
            q.set_producer(next);
        }
        Ok(())
    }

    /// Writes the next request into slot `i` of `q`. `EINVAL` for more than
    /// `max_sge` SGEs or a total length that overflows.
    pub(crate) fn write_next(&mut self, q: &Queue, i: u32, max_sge: u32) -> Result {
        if self.cur.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: by the invariant `cur` is a valid request.
        let wr = unsafe { &*self.cur };
        if wr.num_sge < 0 || wr.num_sge as u32 > max_sge {
            return Err(EINVAL);
        }
        let n = wr.num_sge as usize;
        let sgl: &[b::ib_sge] = if n == 0 || wr.sg_list.is_null() {
            &[]
        } else {
            // SAFETY: the consumer's `sg_list` holds `num_sge` entries.
            unsafe { core::slice::from_raw_parts(wr.sg_list, n) }
        };
        let mut sges = [Sge::default(); 32];
        let mut total = 0u32;
        for (d, s) in sges.iter_mut().zip(sgl) {
            total = total.checked_add(s.length).ok_or(EINVAL)?;
            *d = Sge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            };
        }
        let sges = sges.get(..n).ok_or(EINVAL)?;
        // SAFETY: `wr_id` or the `wr_cqe` pointer, carried as 8 bytes.
        let wr_id = unsafe { wr.__bindgen_anon_1.wr_id };
        RecvWqe::write(q, i, wr_id, sges)?;
        self.cur = wr.next;
        Ok(())
    }
}
