// SPDX-License-Identifier: GPL-2.0

//! Memory regions (IBTA 10.6, 11.2.8): pinned user memory, or a kernel PD's
//! DMA region, reachable by key.
//!
//! Every MR of a device is in its [`MrTable`], keyed by the upper 24 bits of
//! its lkey/rkey (both the same, as in rxe); the low 8 bits are a rotating
//! key byte, so a stale key from a deregistered MR whose index is reused does
//! not match. The data path copies to and from MR memory under the table
//! lock, so `dereg_mr` (which removes the entry under that lock and releases
//! the pages after it) can never race a copy.

use super::keys::{self, Kind};
pub(crate) use crate::ffi::mem::Span;
use crate::ffi::mem::{MappedPages, Mem};
use crate::ffi::rdma::res::ResAttrs;
use crate::ffi::rdma::PdId;
use crate::ffi::rxe_abi::Sge;
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};

/// `IB_ACCESS_*` bits (`enum ib_access_flags`).
pub(crate) use crate::ffi::rdma::access;

/// One registered region.
pub(crate) struct MrEntry {
    key: u32,
    pd: PdId,
    access: u32,
    iova: u64,
    mem: Mem,
    /// Reachable by its key. A fast-registration MR is valid between its
    /// REG_MR and its invalidation (IBTA 10.6.2.3 "free" and "valid").
    valid: bool,
}

impl MrEntry {
    /// Checks that `[va, va + len)`, named by a remote peer (or a memory
    /// window bind), is inside the region, that the region belongs to `pd`
    /// and grants `need` (`access::*` bits); returns the span to copy
    /// through.
    pub(crate) fn check(&self, pd: PdId, va: u64, len: usize, need: u32) -> Result<Span> {
        self.allowed(pd, need)?;
        self.mem.span_remote(self.iova, va, len)
    }

    /// Checks that `len` bytes at `skip` into local SGE `sge` are inside the
    /// region, that the region belongs to `pd` and grants `need` (local
    /// read needs none); returns the span to copy through.
    pub(crate) fn check_sge(
        &self,
        pd: PdId,
        sge: &Sge,
        skip: usize,
        len: usize,
        need: u32,
    ) -> Result<Span> {
        self.allowed(pd, need)?;
        self.mem.span_local(self.iova, sge, skip, len)
    }

    fn allowed(&self, pd: PdId, need: u32) -> Result {
        if !self.valid || self.pd != pd || self.access & need != need {
            return Err(EACCES);
        }
        Ok(())
    }

    /// Copies `data` to span `at` of the region.
    pub(crate) fn write(&self, at: Span, data: &[u8]) -> Result {
        self.mem.write(at, data)
    }

    /// Copies span `at` of the region into `out`.
    pub(crate) fn read(&self, at: Span, out: &mut [u8]) -> Result {
        self.mem.read(at, out)
    }
}

struct Table {
    tree: RBTree<u32, MrEntry>,
    next_index: u32,
    key_byte: u8,
    count: u32,
}

/// The MRs of one device.
#[pin_data]
pub(crate) struct MrTable {
    #[pin]
    inner: crate::ffi::sync::BhLock<Table>,
    max: u32,
}

/// An MR as the ib_mr object keeps it: its key.
pub(crate) struct Mr {
    pub(crate) key: u32,
}

impl MrTable {
    /// A table of at most `max` regions.
    pub(crate) fn new(max: u32) -> impl PinInit<Self> {
        pin_init!(MrTable {
            inner <- crate::ffi::sync::new_bh_lock!(
                Table { tree: RBTree::new(), next_index: 1, key_byte: 0, count: 0 },
                "metaroce_mrs"
            ),
            max,
        })
    }

    /// Enters a region; returns its key. `ENOMEM` when the table is full.
    /// A fast-registration region ([`Mem::Pages`]) starts free (invalid).
    pub(crate) fn insert(&self, pd: PdId, access: u32, iova: u64, mem: Mem) -> Result<Mr> {
        let valid = !matches!(mem, Mem::Pages(_));
        let res = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut t = self.inner.lock();
        if t.count >= self.max {
            return Err(ENOMEM);
        }
        let index =
            keys::next_free(Kind::Mr, t.next_index, |i| t.tree.get(&i).is_some()).ok_or(ENOMEM)?;
        t.count += 1;
        t.next_index = index.wrapping_add(1);
        t.key_byte = t.key_byte.wrapping_add(1);
        let key = keys::key(index, t.key_byte);
        t.tree.insert(res.into_node(
            index,
            MrEntry {
                key,
                pd,
                access,
                iova,
                mem,
                valid,
            },
        ));
        Ok(Mr { key })
    }

    /// Adds region `mr` to a resource dump (`rdma resource show mr -dd`):
    /// `kind` (`user`, `dma`, `fast`), `pages`, `len` (bytes), `access`
    /// (`IB_ACCESS_*` bits), `valid` (0: a fast-registration MR not
    /// registered now), `key` (its current lkey/rkey, whose low byte a
    /// REG_MR changes).
    pub(crate) fn fill_res(&self, mr: &Mr, out: &mut ResAttrs) -> Result {
        // Read under the lock, written after it.
        let (view, access, valid, key) = {
            let t = self.inner.lock();
            let Some(e) = t.tree.get(&keys::index(mr.key)) else {
                return Ok(());
            };
            (e.mem.view(), e.access, e.valid, e.key)
        };
        out.str(format_args!("kind"), view.kind)?;
        out.u64(format_args!("pages"), view.pages)?;
        out.u64(format_args!("len"), view.len)?;
        out.u32(format_args!("access"), access)?;
        out.u32(format_args!("valid"), u32::from(valid))?;
        out.u32(format_args!("key"), key)
    }

    /// Removes the region of `mr` (whatever its key byte is now, after
    /// REG_MRs); the caller drops it (unpinning may sleep).
    pub(crate) fn remove(&self, mr: &Mr) -> Option<MrEntry> {
        let mut t = self.inner.lock();
        let e = t.tree.remove(&keys::index(mr.key));
        if e.is_some() {
            t.count -= 1;
        }
        e
    }

    /// `ib_map_mr_sg` on a fast-registration MR: installs its page list
    /// (see [`crate::ffi::mem::PageList::set`]) and start address. `EINVAL` for another kind
    /// of MR or one that is valid (mapping needs the free state).
    pub(crate) fn map(
        &self,
        mr: &Mr,
        iova: u64,
        len: u64,
        page_size: u32,
        pages: &MappedPages<'_>,
    ) -> Result {
        let mut t = self.inner.lock();
        let e = t.tree.get_mut(&keys::index(mr.key)).ok_or(EINVAL)?;
        match &mut e.mem {
            Mem::Pages(p) if !e.valid => {
                p.set(iova, len, page_size, pages)?;
                e.iova = iova;
                Ok(())
            }
            _ => Err(EINVAL),
        }
    }

    /// The REG_MR work request (IBTA 10.6.3.3, fast registration): the
    /// free fast-registration MR `mr` names (by its index: consumers give
    /// the `ib_mr` its new key with `ib_update_fast_reg_key` before posting)
    /// of `pd` becomes valid under `new` (same index, a new key byte) with
    /// `access`. `EINVAL` otherwise.
    pub(crate) fn register(&self, pd: PdId, mr: u32, new: u32, access: u32) -> Result {
        let mut t = self.inner.lock();
        let e = t.tree.get_mut(&keys::index(mr)).ok_or(EINVAL)?;
        if !keys::same_index(new, mr) || e.pd != pd || e.valid {
            return Err(EINVAL);
        }
        if !matches!(e.mem, Mem::Pages(_)) {
            return Err(EINVAL);
        }
        e.key = new;
        e.access = access;
        e.valid = true;
        Ok(())
    }

    /// LOCAL_INV or SEND_WITH_INV of a fast-registration MR's key: the MR
    /// becomes free. `EINVAL` for a key that names no valid
    /// fast-registration MR of `pd`.
    pub(crate) fn invalidate(&self, pd: PdId, key: u32) -> Result {
        let mut t = self.inner.lock();
        let e = t.tree.get_mut(&keys::index(key)).ok_or(EINVAL)?;
        if e.key != key || e.pd != pd || !e.valid || !matches!(e.mem, Mem::Pages(_)) {
            return Err(EINVAL);
        }
        e.valid = false;
        Ok(())
    }

    /// Runs `f` on the region with key `key` under the table lock, or
    /// returns `EINVAL` if there is none.
    pub(crate) fn with<R>(&self, key: u32, f: impl FnOnce(&MrEntry) -> Result<R>) -> Result<R> {
        let t = self.inner.lock();
        match t.tree.get(&keys::index(key)) {
            Some(e) if e.key == key && e.valid => f(e),
            _ => Err(EINVAL),
        }
    }
}
