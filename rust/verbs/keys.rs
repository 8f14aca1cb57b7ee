// SPDX-License-Identifier: GPL-2.0

//! The key space of memory regions and windows: one owner for how an L_Key
//! or R_Key is built and read (IBTA 10.6.2.1, 10.6.7.2.1).
//!
//! A key is a 24-bit index and an 8-bit key byte that changes while the
//! index stays (a new key for a fast-registration MR with
//! `ib_update_fast_reg_key`; a rebound memory window). MR indices lie in
//! `[1, MW_FIRST)`, window indices in `[MW_FIRST, 2^24)`, so a remote key
//! names one kind or the other without a second lookup. Index 0 is never an
//! MR's: lkey 0 is the local DMA lkey kernel consumers may use.

/// First window index (bit 23 of the index).
const MW_FIRST: u32 = 1 << 23;
/// Number of indices.
const INDICES: u32 = 1 << 24;

/// What a key names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A memory region.
    Mr,
    /// A memory window.
    Mw,
}

impl Kind {
    /// The kind's index range.
    fn range(self) -> core::ops::Range<u32> {
        match self {
            Kind::Mr => 1..MW_FIRST,
            Kind::Mw => MW_FIRST..INDICES,
        }
    }
}

/// The index of `key` (what the tables are keyed by).
pub(crate) fn index(key: u32) -> u32 {
    key >> 8
}

/// What `key` names.
pub(crate) fn kind(key: u32) -> Kind {
    if index(key) >= MW_FIRST {
        Kind::Mw
    } else {
        Kind::Mr
    }
}

/// Whether two keys name the same object (the key byte may differ).
pub(crate) fn same_index(a: u32, b: u32) -> bool {
    index(a) == index(b)
}

/// The key of `index` with key byte `byte`.
pub(crate) fn key(index: u32, byte: u8) -> u32 {
    index << 8 | u32::from(byte)
}

/// The first index of `kind` from `from` on (wrapping inside the kind's
/// range) that `taken` says is free; `None` if every index is taken.
pub(crate) fn next_free(kind: Kind, from: u32, taken: impl Fn(u32) -> bool) -> Option<u32> {
    let r = kind.range();
    let n = r.end - r.start;
    let start = if r.contains(&from) { from } else { r.start };
    (0..n)
        .map(|i| r.start + (start - r.start + i) % n)
        .find(|&i| !taken(i))
}
