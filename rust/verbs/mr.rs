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

use crate::ffi::verbs::Mem;
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};

/// `IB_ACCESS_*` bits (`enum ib_access_flags`).
pub(crate) mod access {
    pub(crate) const LOCAL_WRITE: u32 = 1;
    pub(crate) const REMOTE_WRITE: u32 = 1 << 1;
    pub(crate) const REMOTE_READ: u32 = 1 << 2;
    pub(crate) const REMOTE_ATOMIC: u32 = 1 << 3;
    pub(crate) const MW_BIND: u32 = 1 << 4;
}

/// One registered region.
pub(crate) struct MrEntry {
    key: u32,
    pd: usize,
    access: u32,
    iova: u64,
    mem: Mem,
}

impl MrEntry {
    /// Checks that `[va, va + len)` is inside the region, that the region
    /// belongs to `pd` and grants `need` (`access::*` bits; local read needs
    /// none); returns the byte offset of `va` in the region.
    pub(crate) fn check(&self, pd: usize, va: u64, len: usize, need: u32) -> Result<usize> {
        if self.pd != pd || self.access & need != need {
            return Err(EACCES);
        }
        let off = va.checked_sub(self.iova).ok_or(EFAULT)?;
        let off = usize::try_from(off).map_err(|_| EFAULT)?;
        let end = off.checked_add(len).ok_or(EFAULT)?;
        if end > self.mem.len() {
            return Err(EFAULT);
        }
        Ok(off)
    }

    /// Copies `data` to byte `off` of the region.
    pub(crate) fn write(&self, off: usize, data: &[u8]) -> Result {
        self.mem.write(off, data)
    }

    /// Copies bytes at `off` of the region into `out`.
    pub(crate) fn read(&self, off: usize, out: &mut [u8]) -> Result {
        self.mem.read(off, out)
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
    pub(crate) fn insert(&self, pd: usize, access: u32, iova: u64, mem: Mem) -> Result<Mr> {
        let res = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut t = self.inner.lock();
        if t.count >= self.max {
            return Err(ENOMEM);
        }
        t.count += 1;
        // Index 0 is never used (lkey 0 is the local DMA lkey of kernel verbs).
        let mut index = t.next_index;
        // MR indices stay below the MWs' (`mw::MW_BASE`).
        while index == 0 || t.tree.get(&index).is_some() {
            index = (index + 1) % super::mw::MW_BASE;
        }
        t.next_index = (index + 1) % super::mw::MW_BASE;
        t.key_byte = t.key_byte.wrapping_add(1);
        let key = index << 8 | u32::from(t.key_byte);
        t.tree.insert(res.into_node(
            index,
            MrEntry {
                key,
                pd,
                access,
                iova,
                mem,
            },
        ));
        Ok(Mr { key })
    }

    /// Removes a region; the caller drops it (unpinning may sleep).
    pub(crate) fn remove(&self, key: u32) -> Option<MrEntry> {
        let mut t = self.inner.lock();
        if t.tree.get(&(key >> 8)).is_some_and(|e| e.key == key) {
            t.count -= 1;
            t.tree.remove(&(key >> 8))
        } else {
            None
        }
    }

    /// Runs `f` on the region with key `key` under the table lock, or
    /// returns `EINVAL` if there is none.
    pub(crate) fn with<R>(&self, key: u32, f: impl FnOnce(&MrEntry) -> Result<R>) -> Result<R> {
        let t = self.inner.lock();
        match t.tree.get(&(key >> 8)) {
            Some(e) if e.key == key => f(e),
            _ => Err(EINVAL),
        }
    }
}
