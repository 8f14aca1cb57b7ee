// SPDX-License-Identifier: GPL-2.0

//! Memory windows (IBTA 10.6.7, 11.2.10): remote access to part of an MR
//! through a key of its own, bound and invalidated by work requests on a
//! QP's SQ (type 1: `ibv_bind_mw`; type 2: `IBV_WR_BIND_MW` and
//! `IBV_WR_LOCAL_INV`).
//!
//! Window keys share the index space with MR keys ([`super::keys`]).

use super::keys::{self, Kind};
use crate::ffi::rdma::{MwCreated, PdId};
use crate::ffi::sync::BhLock;
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};

/// Where a bound MW points.
#[derive(Clone, Copy)]
pub(crate) struct Binding {
    /// lkey of the MR it lies in.
    pub(crate) mr_key: u32,
    /// Start and length of the window (IOVA of the MR).
    pub(crate) va: u64,
    pub(crate) len: u64,
    /// `IB_ACCESS_*` granted through the window.
    pub(crate) access: u32,
}

#[derive(Clone, Copy)]
struct MwEntry {
    /// The key the window answers to now.
    rkey: u32,
    pd: PdId,
    mw_type: u32,
    bound: Option<Binding>,
    /// Type 2: the QP whose BIND_MW bound it; only requests arriving on that
    /// QP may use it (IBTA 10.6.7.2.2, rxe's `mw->qp` check).
    qpn: u32,
}

struct Table {
    tree: RBTree<u32, MwEntry>,
    next: u32,
    count: u32,
}

/// The MWs of one device.
#[pin_data]
pub(crate) struct MwTable {
    #[pin]
    inner: BhLock<Table>,
    max: u32,
}

/// An MW as the ib_mw object keeps it: its key index.
pub(crate) struct Mw {
    pub(crate) index: u32,
}

/// Why a bind or an invalidation failed.
pub(crate) enum MwError {
    /// No such window, or not this PD's / this QP's to change.
    Invalid,
}

impl MwTable {
    /// A table of at most `max` MWs.
    pub(crate) fn new(max: u32) -> impl PinInit<Self> {
        pin_init!(MwTable {
            inner <- crate::ffi::sync::new_bh_lock!(
                Table { tree: RBTree::new(), next: 0, count: 0 },
                "metaroce_mws"
            ),
            max,
        })
    }

    /// `alloc_mw`: a new, unbound window; returns it and its initial rkey.
    pub(crate) fn alloc(&self, pd: PdId, mw_type: u32) -> Result<MwCreated<Mw>> {
        let res = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let mut t = self.inner.lock();
        if t.count >= self.max {
            return Err(ENOMEM);
        }
        let index =
            keys::next_free(Kind::Mw, t.next, |i| t.tree.get(&i).is_some()).ok_or(ENOMEM)?;
        t.next = index.wrapping_add(1);
        t.count += 1;
        let rkey = keys::key(index, 0);
        t.tree.insert(res.into_node(
            index,
            MwEntry {
                rkey,
                pd,
                mw_type,
                bound: None,
                qpn: 0,
            },
        ));
        Ok(MwCreated {
            mw: Mw { index },
            rkey,
        })
    }

    /// `dealloc_mw`.
    pub(crate) fn dealloc(&self, mw: &Mw) {
        let node = {
            let mut t = self.inner.lock();
            let n = t.tree.remove_node(&mw.index);
            if n.is_some() {
                t.count -= 1;
            }
            n
        };
        drop(node);
    }

    /// Binds the window `mw_rkey` names to `b`, under the new key `new_rkey`
    /// (same index, IBTA 10.6.7.2.1), for QP `qpn` of `pd`.
    pub(crate) fn bind(
        &self,
        pd: PdId,
        qpn: u32,
        mw_rkey: u32,
        new_rkey: u32,
        b: Binding,
    ) -> core::result::Result<(), MwError> {
        let mut t = self.inner.lock();
        let e = t
            .tree
            .get_mut(&keys::index(mw_rkey))
            .ok_or(MwError::Invalid)?;
        if e.pd != pd || !keys::same_index(new_rkey, mw_rkey) {
            return Err(MwError::Invalid);
        }
        // Type 1 is named by its current key; a type 2 window by its key
        // too, and only while unbound.
        if e.rkey != mw_rkey && e.mw_type == 1 {
            return Err(MwError::Invalid);
        }
        if e.mw_type == 2 && e.bound.is_some() {
            return Err(MwError::Invalid);
        }
        e.rkey = new_rkey;
        e.bound = (b.len != 0 || e.mw_type == 2).then_some(b);
        e.qpn = qpn;
        Ok(())
    }

    /// `LOCAL_INV` of a type 2 window's key: unbinds it.
    pub(crate) fn invalidate(&self, pd: PdId, rkey: u32) -> core::result::Result<(), MwError> {
        let mut t = self.inner.lock();
        let e = t.tree.get_mut(&keys::index(rkey)).ok_or(MwError::Invalid)?;
        if e.pd != pd || e.rkey != rkey || e.mw_type != 2 || e.bound.is_none() {
            return Err(MwError::Invalid);
        }
        e.bound = None;
        Ok(())
    }

    /// The binding remote key `rkey` names, if it is a bound window of `pd`
    /// that a request arriving on QP `qpn` may use (a type 2 window only on
    /// the QP that bound it).
    pub(crate) fn resolve(&self, pd: PdId, qpn: u32, rkey: u32) -> Option<Binding> {
        let t = self.inner.lock();
        let e = t.tree.get(&keys::index(rkey))?;
        let qp_ok = e.mw_type != 2 || e.qpn == qpn;
        (e.rkey == rkey && e.pd == pd && qp_ok)
            .then_some(e.bound)
            .flatten()
    }

    /// Whether a window is bound to the MR with key `mr_key` (which then
    /// cannot be deregistered, IBTA 10.6.7.2.6). Walks every window: for
    /// `dereg_mr` only.
    pub(crate) fn bound_to(&self, mr_key: u32) -> bool {
        let t = self.inner.lock();
        let found = t
            .tree
            .values()
            .any(|e| e.bound.is_some_and(|b| keys::same_index(b.mr_key, mr_key)));
        found
    }
}
