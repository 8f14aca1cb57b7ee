// SPDX-License-Identifier: GPL-2.0

//! Memory regions (IBTA 10.6, 11.2.8): pinned user memory, or a kernel PD's
//! DMA region, reachable by key.
//!
//! Every MR of a device is in its [`MrTable`], keyed by the upper 24 bits of
//! its lkey/rkey (both the same, as in rxe); the low 8 bits are a rotating
//! key byte, so a stale key from a deregistered MR whose index is reused does
//! not match.
//!
//! Lookups take no table lock: the table is an [`RcuMap`], and the data path
//! copies to and from a region inside the RCU read-side section that found
//! it. A user or DMA region never changes after registration and is read
//! without any lock; a fast-registration region, which REG_MR, LOCAL_INV and
//! `ib_map_mr_sg` change, has a lock of its own, held across each check and
//! copy. Copies into different regions, or into one user region, run on
//! several CPUs at once. `dereg_mr` removes the region and waits for an RCU
//! grace period ([`RcuMap::take`]) before it releases the pages, so no copy
//! into the region is running when it returns (after deregistration the
//! memory is the application's again, IBTA 10.6.3.6).

use super::keys::{self, Kind};
pub(crate) use crate::ffi::mem::Span;
use crate::ffi::mem::{MappedPages, Mem};
use crate::ffi::rcu_map::RcuMap;
use crate::ffi::rdma::res::ResAttrs;
use crate::ffi::rdma::PdId;
use crate::ffi::rxe_abi::Sge;
use crate::ffi::sync::BhLock;
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};

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

/// A region as the table holds it: a user or DMA region's entry, fixed
/// from registration on (`fixed`), or a fast-registration region's, which
/// work requests change, under its own lock (`fast`). Exactly one of the two
/// is `Some`.
#[pin_data]
struct Slot {
    fixed: Option<MrEntry>,
    #[pin]
    fast: BhLock<Option<MrEntry>>,
}

impl Slot {
    /// Runs `f` on the entry (a fast-registration region's under its lock).
    fn read<R>(&self, f: impl FnOnce(&MrEntry) -> R) -> Option<R> {
        match &self.fixed {
            Some(e) => Some(f(e)),
            None => self.fast.lock().as_ref().map(f),
        }
    }

    /// Runs `f` on a fast-registration region's entry, under its lock;
    /// `None` for a user or DMA region.
    fn fast_mut<R>(&self, f: impl FnOnce(&mut MrEntry) -> R) -> Option<R> {
        self.fast.lock().as_mut().map(f)
    }
}

/// How keys are handed out.
struct Alloc {
    next_index: u32,
    key_byte: u8,
    count: u32,
}

/// The MRs of one device.
#[pin_data]
pub(crate) struct MrTable {
    map: RcuMap<Slot>,
    /// Taken by registration and deregistration (process context) only.
    #[pin]
    alloc: Mutex<Alloc>,
    /// Serialises the device's atomic operations (their read, modify and
    /// write), as rxe's `atomic_ops_lock`: copies take no lock, atomics this
    /// one (IBTA 9.4.5: atomic with respect to the device's other atomics).
    #[pin]
    atomics: BhLock<()>,
    max: u32,
}

/// An MR as the ib_mr object keeps it: its key.
pub(crate) struct Mr {
    pub(crate) key: u32,
}

impl MrTable {
    /// A table of at most `max` regions. `ENOMEM`.
    pub(crate) fn new(max: u32) -> Result<impl PinInit<Self>> {
        let map = RcuMap::new()?;
        Ok(pin_init!(MrTable {
            map,
            alloc <- kernel::new_mutex!(
                Alloc { next_index: 1, key_byte: 0, count: 0 },
                "metaroce_mr_alloc"
            ),
            atomics <- crate::ffi::sync::new_bh_lock!((), "metaroce_atomics"),
            max,
        }))
    }

    /// Runs `f` on the slot of index `index` inside a read-side section:
    /// its result, or `EINVAL` when there is no such slot or `f` gives
    /// `None` (not the kind of region asked for).
    fn on_slot<R>(&self, index: u32, f: impl FnOnce(&Slot) -> Option<Result<R>>) -> Result<R> {
        self.map
            .with(index, |s| f(s))
            .flatten()
            .unwrap_or(Err(EINVAL))
    }

    /// Enters a region; returns its key. `ENOMEM` when the table is full.
    /// A fast-registration region ([`Mem::Pages`]) starts free (invalid).
    /// Process context.
    pub(crate) fn insert(&self, pd: PdId, access: u32, iova: u64, mem: Mem) -> Result<Mr> {
        let fast = matches!(mem, Mem::Pages(_));
        let mut a = self.alloc.lock();
        if a.count >= self.max {
            return Err(ENOMEM);
        }
        let index =
            keys::next_free(Kind::Mr, a.next_index, |i| self.map.contains(i)).ok_or(ENOMEM)?;
        let key_byte = a.key_byte.wrapping_add(1);
        let key = keys::key(index, key_byte);
        let e = MrEntry {
            key,
            pd,
            access,
            iova,
            mem,
            valid: !fast,
        };
        let (fixed, fast) = if fast {
            (None, Some(e))
        } else {
            (Some(e), None)
        };
        let slot = Arc::pin_init(
            pin_init!(Slot {
                fixed,
                fast <- crate::ffi::sync::new_bh_lock!(fast, "metaroce_mr"),
            }),
            GFP_KERNEL,
        )?;
        // Registration is serialised by `alloc`: the index is still free.
        self.map.insert(index, slot)?;
        a.count += 1;
        a.next_index = index.wrapping_add(1);
        a.key_byte = key_byte;
        Ok(Mr { key })
    }

    /// Adds region `mr` to a resource dump (`rdma resource show mr -dd`):
    /// `kind` (`user`, `dma`, `fast`), `pages`, `len` (bytes), `access`
    /// (`IB_ACCESS_*` bits), `valid` (0: a fast-registration MR not
    /// registered now), `key` (its current lkey/rkey, whose low byte a
    /// REG_MR changes).
    pub(crate) fn fill_res(&self, mr: &Mr, out: &mut ResAttrs) -> Result {
        // Read inside the read-side section, written after it.
        let Some((view, access, valid, key)) = self
            .map
            .with(keys::index(mr.key), |s| {
                s.read(|e| (e.mem.view(), e.access, e.valid, e.key))
            })
            .flatten()
        else {
            return Ok(());
        };
        out.str(format_args!("kind"), view.kind)?;
        out.u64(format_args!("pages"), view.pages)?;
        out.u64(format_args!("len"), view.len)?;
        out.u32(format_args!("access"), access)?;
        out.u32(format_args!("valid"), u32::from(valid))?;
        out.u32(format_args!("key"), key)
    }

    /// Removes the region of `mr` (whatever its key byte is now, after
    /// REG_MRs), waits until no copy into it is running (an RCU grace
    /// period) and releases it: its pages are unpinned before this returns.
    ///
    /// # Safety
    ///
    /// Process context (it sleeps), with no RCU read-side guard held by this
    /// thread (see [`RcuMap::take`]): `dereg_mr`.
    pub(crate) unsafe fn remove(&self, mr: &Mr) {
        // Not under `alloc`: registrations do not wait for the grace period
        // (the index may be handed out again at once, under another key
        // byte; a reader still holding the old region checks the old key).
        // SAFETY: by this function's requirements.
        if let Some(slot) = unsafe { self.map.take(keys::index(mr.key)) } {
            self.alloc.lock().count -= 1;
            // Lookups lend the map's reference without taking one, so this
            // is the last: the region is released here, in process context.
            drop(slot);
        }
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
        self.on_slot(keys::index(mr.key), |s| {
            s.fast_mut(|e| match &mut e.mem {
                Mem::Pages(p) if !e.valid => {
                    p.set(iova, len, page_size, pages)?;
                    e.iova = iova;
                    Ok(())
                }
                _ => Err(EINVAL),
            })
        })
    }

    /// The REG_MR work request (IBTA 10.6.3.3, fast registration): the
    /// free fast-registration MR `mr` names (by its index: consumers give
    /// the `ib_mr` its new key with `ib_update_fast_reg_key` before posting)
    /// of `pd` becomes valid under `new` (same index, a new key byte) with
    /// `access`. `EINVAL` otherwise.
    pub(crate) fn register(&self, pd: PdId, mr: u32, new: u32, access: u32) -> Result {
        self.on_slot(keys::index(mr), |s| {
            s.fast_mut(|e| {
                if !keys::same_index(new, mr) || e.pd != pd || e.valid {
                    return Err(EINVAL);
                }
                e.key = new;
                e.access = access;
                e.valid = true;
                Ok(())
            })
        })
    }

    /// LOCAL_INV or SEND_WITH_INV of a fast-registration MR's key: the MR
    /// becomes free. `EINVAL` for a key that names no valid
    /// fast-registration MR of `pd`.
    pub(crate) fn invalidate(&self, pd: PdId, key: u32) -> Result {
        self.on_slot(keys::index(key), |s| {
            s.fast_mut(|e| {
                if e.key != key || e.pd != pd || !e.valid {
                    return Err(EINVAL);
                }
                e.valid = false;
                Ok(())
            })
        })
    }

    /// Runs `f` (an atomic operation's check, read, modify and write) under
    /// the device's atomics lock; `f` must not sleep.
    pub(crate) fn atomically<R>(&self, f: impl FnOnce() -> R) -> R {
        let _g = self.atomics.lock();
        f()
    }

    /// Runs `f` on the region with key `key`, or returns `EINVAL` if there
    /// is none (or it is not valid): inside an RCU read-side section, and
    /// for a fast-registration region under its lock; `f` must not sleep.
    pub(crate) fn with<R>(&self, key: u32, f: impl FnOnce(&MrEntry) -> Result<R>) -> Result<R> {
        self.on_slot(keys::index(key), |s| {
            s.read(|e| {
                if e.key == key && e.valid {
                    f(e)
                } else {
                    Err(EINVAL)
                }
            })
        })
    }
}
