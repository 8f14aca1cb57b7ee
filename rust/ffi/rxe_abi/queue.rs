// SPDX-License-Identifier: GPL-2.0

//! The rxe queue layout (`struct rxe_queue_buf`), shared with user space.

use super::mmap::{MmInfo, MmapEntry};
use crate::ffi::bindings as b;
use crate::ffi::racy;
use crate::ffi::udata::UContext;
use core::ptr;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::alloc::KBox;
use kernel::prelude::*;

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
/// (freed by `mmap_free`) and is inserted in a user context's mmap table.
/// User space never maps a queue with a null `entry`, so the WQEs of a
/// kernel work queue (`kernel_wq`) are written only by this crate's `ffi`
/// (the WR translation: [`Self::write`] is private to `ffi`).
pub(crate) struct Queue {
    buf: *mut u8,
    entry: *mut MmapEntry,
    log2_elem: u32,
    mask: u32,
    mminfo: MmInfo,
    /// A work queue (SQ, RQ, SRQ), not a CQ.
    wq: bool,
}

// SAFETY: the buffer is plain memory; concurrent access from user space and
// the kernel goes through atomics (indices) and bounded byte copies (slots).
unsafe impl Send for Queue {}
// SAFETY: see `Send`: shared references only read and copy bytes.
unsafe impl Sync for Queue {}

impl Queue {
    /// A work queue (SQ, RQ or SRQ) holding at least `entries` WQEs of at
    /// least `elem_size` bytes, mappable by `uc` if given. `ENOMEM` when too
    /// large.
    pub(crate) fn new(uc: Option<&UContext>, entries: u32, elem_size: usize) -> Result<Self> {
        Self::alloc(uc, entries, elem_size, true)
    }

    /// A completion queue ring, as [`Self::new`]; its slots are written with
    /// [`Self::write_cqe`].
    pub(crate) fn new_cq(uc: Option<&UContext>, entries: u32, elem_size: usize) -> Result<Self> {
        Self::alloc(uc, entries, elem_size, false)
    }

    fn alloc(uc: Option<&UContext>, entries: u32, elem_size: usize, wq: bool) -> Result<Self> {
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
        // SAFETY: plain allocation (zeroed, page-aligned, mappable), no
        // precondition.
        let buf = unsafe { b::metaroce_vmalloc_user(bytes as _) }.cast::<u8>();
        if buf.is_null() {
            return Err(ENOMEM);
        }
        let log2_elem = elem.trailing_zeros();
        let mask = slots - 1;
        // SAFETY: the header's first two words are inside the fresh,
        // page-aligned buffer, which no one else sees yet.
        unsafe { ptr::write(buf.cast::<u32>(), log2_elem) };
        // SAFETY: as above.
        unsafe { ptr::write(buf.cast::<u32>().add(1), mask) };
        let mut q = Queue {
            buf,
            entry: ptr::null_mut(),
            log2_elem,
            mask,
            mminfo: MmInfo {
                offset: 0,
                size: bytes as u32,
            },
            wq,
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
            // SAFETY: `uc` is a live user context (its type invariant), `e`
            // a fresh, zeroed entry that the table owns once inserted.
            let ret = unsafe {
                b::rdma_user_mmap_entry_insert(uc.as_ptr(), ptr::addr_of_mut!((*e).rdma), bytes)
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
        // 4-aligned in a page-aligned buffer that lives as long as `self`;
        // every access to the indices, ours and user space's, is atomic.
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
        // SAFETY: `src..src+len` is inside the buffer (`slot_range`), which
        // lives as long as `self`; user space may write it concurrently, so
        // the bytes are copied with a racy copy, never referenced.
        unsafe { racy::read(src, out) };
        Ok(())
    }

    /// Copies `data` to byte `off` of slot `index`. `EINVAL` if it would
    /// leave the slot. Private to `ffi`: WQEs of a kernel work queue are
    /// written only by the WR translation (see the type invariants).
    pub(in crate::ffi) fn write(&self, index: u32, off: usize, data: &[u8]) -> Result {
        let dst = self.slot_range(index, off, data.len())?;
        // SAFETY: `dst..dst+len` is inside the buffer (`slot_range`), which
        // no Rust reference covers; user space may access it concurrently.
        unsafe { racy::write(dst, data) };
        Ok(())
    }

    /// Writes a completion into slot `index` of a CQ ring ([`Self::new_cq`]).
    /// `EINVAL` on a work queue or if `cqe` does not fit the slot.
    pub(crate) fn write_cqe(&self, index: u32, cqe: &[u8]) -> Result {
        if self.wq {
            return Err(EINVAL);
        }
        self.write(index, 0, cqe)
    }

    /// A work queue user space cannot map: its WQEs are those the WR
    /// translation wrote.
    pub(in crate::ffi) fn is_kernel_wq(&self) -> bool {
        self.wq && self.entry.is_null()
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
