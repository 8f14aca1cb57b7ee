// SPDX-License-Identifier: GPL-2.0

//! Heap copies of large values without a stack temporary: `KBox::new(v)`
//! builds `v` on the stack first, which a 9 KB protocol connection must not
//! be (kernel stacks are 16 KiB).

use core::mem::MaybeUninit;
use kernel::alloc::Flags;
use kernel::prelude::*;

/// A heap copy of `*src`, copied from `src` straight into the allocation.
///
/// Give it a reference to a constant (`&T::BLANK`, promoted to a static) to
/// build a large value in place: then nothing of `T`'s size is on the stack.
pub(crate) fn copy_to_heap<T: Copy>(src: &T, flags: Flags) -> Result<KBox<T>> {
    let mut b: KBox<MaybeUninit<T>> = KBox::new_uninit(flags)?;
    // SAFETY: `b` is a fresh allocation of one `T` (properly aligned, not
    // overlapping `src`, which is a live shared reference); `src` is valid
    // for a read of one `T`.
    unsafe { core::ptr::copy_nonoverlapping(src, b.as_mut_ptr(), 1) };
    // SAFETY: the copy above initialised `*b` with a bitwise copy of a valid
    // `T`, and `T: Copy` (no `Drop`, no ownership) makes that copy a valid `T`
    // too.
    Ok(unsafe { b.assume_init() })
}
