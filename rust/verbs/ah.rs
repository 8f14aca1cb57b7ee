// SPDX-License-Identifier: GPL-2.0

//! Address handles (IBTA 10.5, 11.2.2): a RoCE v2 address vector, numbered
//! so that UD work requests in the user SQ ring can name it (`ah_num` of the
//! rxe ABI, never 0).

use crate::ffi::rdma::{Av, PdId};
use crate::ffi::sync::BhLock;
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};

/// One address handle as the table keeps it.
#[derive(Clone, Copy)]
pub(crate) struct AhEntry {
    pub(crate) pd: PdId,
    pub(crate) av: Av,
}

struct Table {
    tree: RBTree<u32, AhEntry>,
    next: u32,
    count: u32,
}

/// The AHs of one device.
#[pin_data]
pub(crate) struct AhTable {
    #[pin]
    inner: BhLock<Table>,
    max: u32,
}

/// An AH as the ib_ah object keeps it: its number.
pub(crate) struct Ah {
    pub(crate) num: u32,
}

impl AhTable {
    /// A table of at most `max` AHs.
    pub(crate) fn new(max: u32) -> impl PinInit<Self> {
        pin_init!(AhTable {
            inner <- crate::ffi::sync::new_bh_lock!(
                Table { tree: RBTree::new(), next: 1, count: 0 },
                "metaroce_ahs"
            ),
            max,
        })
    }

    /// Enters an AH, allocating with `flags`; `ENOMEM` when `max` exist
    /// (rxe's pool limit).
    pub(crate) fn insert(&self, pd: PdId, av: Av, flags: kernel::alloc::Flags) -> Result<Ah> {
        let res = RBTreeNodeReservation::new(flags)?;
        let mut t = self.inner.lock();
        if t.count >= self.max {
            return Err(ENOMEM);
        }
        let mut num = t.next;
        while num == 0 || t.tree.get(&num).is_some() {
            num = num.wrapping_add(1);
        }
        t.next = num.wrapping_add(1);
        t.count += 1;
        t.tree.insert(res.into_node(num, AhEntry { pd, av }));
        Ok(Ah { num })
    }

    /// Removes an AH.
    pub(crate) fn remove(&self, num: u32) {
        let node = {
            let mut t = self.inner.lock();
            let n = t.tree.remove_node(&num);
            if n.is_some() {
                t.count -= 1;
            }
            n
        };
        drop(node);
    }

    /// The AH numbered `num`, if it exists.
    pub(crate) fn get(&self, num: u32) -> Option<AhEntry> {
        self.inner.lock().tree.get(&num).copied()
    }
}
