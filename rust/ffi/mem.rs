// SPDX-License-Identifier: GPL-2.0

//! The memory an MR covers — pinned user pages, all of kernel memory (the
//! DMA MR of a kernel PD), or a fast-registration page list — and the
//! checked [`Span`]s through which the data path reads and writes it.
//!
//! Kernel memory is reached by kernel virtual address, which safe code must
//! not be able to choose: a [`Span`] of kernel memory is made only from an
//! SGE the WR translation wrote into a kernel-owned ring ([`Sge`] carries
//! that origin), or, for a remote peer's address, from a DMA MR whose kernel
//! consumer granted remote access to all of kernel memory.

use super::racy;
use super::rxe_abi::wqe::Sge;
use super::umem::{UMem, PAGE_SIZE};
use kernel::prelude::*;

/// The memory an MR covers.
pub(crate) enum Mem {
    /// Pinned user pages (`reg_user_mr`).
    User(UMem),
    /// Kernel memory addressed by kernel virtual address: the DMA MR of a
    /// kernel PD (`get_dma_mr`, which gives the PD its `local_dma_lkey`).
    /// The device has no `dma_device`, so the RDMA core maps for kernel
    /// consumers with `ib_uses_virt_dma` (`ib_dma_map_*` return kernel
    /// virtual addresses) and those are the addresses in their SGEs.
    Kernel(KernelMem),
    /// A fast-registration MR (`alloc_mr`): kernel pages set by
    /// `ib_map_mr_sg` and made valid by an `IB_WR_REG_MR` work request.
    Pages(PageList),
}

/// All of kernel memory, as the DMA MR of a kernel PD opens it. Made only by
/// this layer's `get_dma_mr` callback.
pub(crate) struct KernelMem {
    /// The consumer granted remote access (`IB_ACCESS_REMOTE_*`, as
    /// `ib_alloc_pd(IB_PD_UNSAFE_GLOBAL_RKEY)` asks for): peers may name any
    /// kernel address through the rkey.
    remote: bool,
}

impl KernelMem {
    /// The DMA MR of a kernel PD, with access `access` (`IB_ACCESS_*`).
    ///
    /// # Safety
    ///
    /// Called for the DMA MR a kernel consumer asked for (`get_dma_mr`) with
    /// `access`: remote bits in it grant peers all of kernel memory.
    pub(super) unsafe fn new(access: u32) -> Self {
        KernelMem {
            remote: access & super::rdma::access::REMOTE != 0,
        }
    }
}

/// A checked range of an MR's memory: an offset into user or page-list
/// memory, or a kernel virtual address range.
///
/// # Invariants
///
/// If `kernel`, `[at, at + len)` is a kernel virtual address range that a
/// kernel consumer handed the device — from an SGE of one of its work
/// requests, or named by a peer through the rkey of a DMA MR to which the
/// consumer granted remote access — and that does not wrap.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    at: usize,
    len: usize,
    kernel: bool,
}

impl Span {
    /// The span's bytes from `n` on (`EFAULT` if it has fewer than `n`).
    pub(crate) fn after(self, n: usize) -> Result<Span> {
        let len = self.len.checked_sub(n).ok_or(EFAULT)?;
        // A kernel range's tail is inside it: the invariant holds.
        Ok(Span {
            at: self.at + n,
            len,
            kernel: self.kernel,
        })
    }
}

/// Pages of a fast-registration MR, as `ib_sg_to_pages` found them in a
/// scatterlist the consumer mapped for the device (`ib_map_mr_sg`). Made
/// only by this layer's `map_mr_sg` callback.
pub(crate) struct MappedPages<'a>(&'a [u64]);

impl<'a> MappedPages<'a> {
    /// # Safety
    ///
    /// `pages` are kernel virtual addresses of pages a kernel consumer mapped
    /// for the device (`ib_map_mr_sg`), usable until it invalidates the MR.
    pub(super) unsafe fn new(pages: &'a [u64]) -> Self {
        MappedPages(pages)
    }
}

/// Checks a kernel address range: non-null, no wrap, in the kernel half.
fn kernel_range(at: usize, n: usize) -> Result<usize> {
    let end = at.checked_add(n).ok_or(EFAULT)?;
    // Kernel virtual addresses are the upper half on every 64-bit arch
    // Linux supports; a user address here is a consumer bug, not memory
    // to touch.
    if at < (1usize << 63) || end < at {
        return Err(EFAULT);
    }
    Ok(at)
}

/// Copies `data` to kernel span `s`.
fn kernel_write(s: Span, data: &[u8]) -> Result {
    if !s.kernel || data.len() > s.len {
        return Err(EFAULT);
    }
    // SAFETY: by the `Span` invariant the range is memory a kernel consumer
    // handed the device and owns until the completion of its request (the
    // contract of every `ib_post_send`/`ib_post_recv` user); it is not
    // referenced by Rust, and others may access it: a racy copy.
    unsafe { racy::write(s.at as *mut u8, data) };
    Ok(())
}

/// Copies `out.len()` bytes at `addr` into `out` (inline data of a kernel
/// send request). `EFAULT` for an address range outside the kernel half.
///
/// # Safety
///
/// `addr..addr + out.len()` is inside an SGE of a kernel work request being
/// posted.
pub(in crate::ffi) unsafe fn read_posted(addr: u64, out: &mut [u8]) -> Result {
    let at = kernel_range(usize::try_from(addr).map_err(|_| EFAULT)?, out.len())?;
    // The `Span` invariant: by the caller's guarantee.
    let s = Span {
        at,
        len: out.len(),
        kernel: true,
    };
    kernel_read(s, out)
}

/// Copies kernel span `s` into `out`.
fn kernel_read(s: Span, out: &mut [u8]) -> Result {
    if !s.kernel || out.len() > s.len {
        return Err(EFAULT);
    }
    // SAFETY: as in `kernel_write`.
    unsafe { racy::read(s.at as *const u8, out) };
    Ok(())
}

/// The page list of a fast-registration MR: up to `max` page addresses
/// (kernel virtual, `page_size`-aligned, from `ib_sg_to_pages`), the region
/// starting `first` bytes into the first page, `len` bytes long.
///
/// # Invariants
///
/// `pages[..n]` came from a [`MappedPages`]: pages a kernel consumer mapped
/// for the device (`ib_map_mr_sg`).
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
    pub(crate) fn set(
        &mut self,
        iova: u64,
        len: u64,
        page_size: u32,
        pages: &MappedPages<'_>,
    ) -> Result {
        let pages = pages.0;
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

/// What a resource dump shows of an MR's memory ([`Mem::view`]).
pub(crate) struct MemView {
    /// `user`, `dma` (a kernel PD's DMA MR) or `fast` (fast registration).
    pub(crate) kind: &'static kernel::str::CStr,
    /// Pages the region holds (0 for a DMA MR: all of kernel memory).
    pub(crate) pages: u64,
    /// Bytes the region covers (0 for a DMA MR).
    pub(crate) len: u64,
}

impl Mem {
    /// The kind, pages and length of the memory (`rdma resource show mr -dd`).
    pub(crate) fn view(&self) -> MemView {
        use kernel::c_str;
        match self {
            Mem::User(u) => MemView {
                kind: c_str!("user"),
                pages: u.npages() as u64,
                len: u.len() as u64,
            },
            Mem::Kernel(_) => MemView {
                kind: c_str!("dma"),
                pages: 0,
                len: 0,
            },
            Mem::Pages(p) => MemView {
                kind: c_str!("fast"),
                pages: p.n as u64,
                len: p.len as u64,
            },
        }
    }

    /// The span of `len` bytes at `skip` into local SGE `sge`, in a region
    /// starting at `iova`. `EFAULT` if it leaves the region or the SGE, or,
    /// for kernel memory, unless `sge` came from a kernel work request.
    pub(crate) fn span_local(&self, iova: u64, sge: &Sge, skip: usize, len: usize) -> Result<Span> {
        let end = skip.checked_add(len).ok_or(EFAULT)?;
        if end > sge.length() as usize {
            return Err(EFAULT);
        }
        let va = sge.addr().checked_add(skip as u64).ok_or(EFAULT)?;
        match self {
            Mem::Kernel(_) if !sge.is_kernel() => Err(EFAULT),
            // The `Span` invariant: a kernel consumer's SGE (its origin) and
            // inside it (checked above).
            Mem::Kernel(_) => Ok(Span {
                at: kernel_range(usize::try_from(va).map_err(|_| EFAULT)?, len)?,
                len,
                kernel: true,
            }),
            _ => self.offset_span(iova, va, len),
        }
    }

    /// The span of `[va, va + len)` named by a remote peer (or a memory
    /// window bind), in a region starting at `iova`. `EFAULT` if it leaves
    /// the region; `EACCES` for kernel memory its consumer did not open to
    /// peers.
    pub(crate) fn span_remote(&self, iova: u64, va: u64, len: usize) -> Result<Span> {
        match self {
            Mem::Kernel(k) if !k.remote => Err(EACCES),
            // The `Span` invariant: the consumer granted remote access to
            // all of kernel memory through this MR's rkey.
            Mem::Kernel(_) => {
                let off = va.checked_sub(iova).ok_or(EFAULT)?;
                let at = usize::try_from(off).map_err(|_| EFAULT)?;
                Ok(Span {
                    at: kernel_range(at, len)?,
                    len,
                    kernel: true,
                })
            }
            _ => self.offset_span(iova, va, len),
        }
    }

    fn offset_span(&self, iova: u64, va: u64, len: usize) -> Result<Span> {
        let off = va.checked_sub(iova).ok_or(EFAULT)?;
        let at = usize::try_from(off).map_err(|_| EFAULT)?;
        let size = match self {
            Mem::User(u) => u.len(),
            Mem::Pages(p) => p.len,
            Mem::Kernel(_) => return Err(EFAULT),
        };
        if at.checked_add(len).map_or(true, |e| e > size) {
            return Err(EFAULT);
        }
        Ok(Span {
            at,
            len,
            kernel: false,
        })
    }

    /// Copies `data` into span `s` of the region (at most its length).
    pub(crate) fn write(&self, s: Span, data: &[u8]) -> Result {
        if data.len() > s.len {
            return Err(EFAULT);
        }
        match self {
            Mem::Kernel(_) => kernel_write(s, data),
            _ if s.kernel => Err(EFAULT),
            Mem::User(u) => u.write(s.at, data),
            // The `Span` invariant holds for each piece: pages the consumer
            // mapped for the device (`PageList` invariant), inside the region.
            Mem::Pages(p) => p.pieces(s.at, data.len(), |at, r| {
                let piece = Span {
                    at: kernel_range(at, r.len())?,
                    len: r.len(),
                    kernel: true,
                };
                kernel_write(piece, &data[r])
            }),
        }
    }

    /// Copies span `s` of the region (at most its length) into `out`.
    pub(crate) fn read(&self, s: Span, out: &mut [u8]) -> Result {
        if out.len() > s.len {
            return Err(EFAULT);
        }
        match self {
            Mem::Kernel(_) => kernel_read(s, out),
            _ if s.kernel => Err(EFAULT),
            Mem::User(u) => u.read(s.at, out),
            // As in `write`.
            Mem::Pages(p) => p.pieces(s.at, out.len(), |at, r| {
                let piece = Span {
                    at: kernel_range(at, r.len())?,
                    len: r.len(),
                    kernel: true,
                };
                kernel_read(piece, &mut out[r])
            }),
        }
    }
}
