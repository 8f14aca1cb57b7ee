// SPDX-License-Identifier: GPL-2.0

//! The user context and user data of a verb (`struct ib_ucontext`,
//! `struct ib_udata`).

use super::bindings as b;
use kernel::error::to_result;
use kernel::prelude::*;
use kernel::types::Opaque;

/// The user context (`struct ib_ucontext`) of the process a verb came from.
///
/// # Invariants
///
/// A `&UContext` is a live user context: it is only handed out borrowed
/// from the [`UData`] of a verb, whose context outlives the verb.
#[repr(transparent)]
pub(crate) struct UContext(Opaque<b::ib_ucontext>);

impl UContext {
    /// The raw user context.
    pub(in crate::ffi) fn as_ptr(&self) -> *mut b::ib_ucontext {
        self.0.get()
    }
}

/// The driver-specific user data of a verb (`struct ib_udata`): the provider
/// library's command extension in, its response extension out.
///
/// # Invariants
///
/// The pointer is null (a kernel caller) or a valid udata for as long as
/// the value lives.
pub(crate) struct UData(*mut b::ib_udata);

impl UData {
    /// Wraps the udata of a verb.
    ///
    /// # Safety
    ///
    /// `udata` is null or valid for as long as the value lives.
    pub(in crate::ffi) unsafe fn from_raw(udata: *mut b::ib_udata) -> Self {
        UData(udata)
    }

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
    pub(crate) fn write(&self, resp: &[u8]) -> Result {
        if self.0.is_null() {
            return Ok(());
        }
        // SAFETY: a non-null udata is valid (type invariant); `resp` is
        // readable for its length.
        to_result(unsafe { b::metaroce_udata_write(self.0, resp.as_ptr().cast(), resp.len()) })
    }

    /// The user context, for queues user space maps; `None` for a kernel
    /// caller.
    pub(crate) fn ucontext(&self) -> Option<&UContext> {
        // SAFETY: a null or valid udata (type invariant); the helper returns
        // the bundle's context or null.
        let uc = unsafe { b::metaroce_udata_ucontext(self.0) };
        // SAFETY: a non-null context is live for the verb, which outlives
        // this borrow of its udata; `UContext` is a transparent `Opaque`.
        (!uc.is_null()).then(|| unsafe { &*uc.cast::<UContext>() })
    }
}
