// SPDX-License-Identifier: GPL-2.0

//! The rxe user ABI (`include/uapi/rdma/rdma_user_rxe.h`), which rdma-core's
//! rxe provider speaks: rings shared with user space ([`queue`]), the WQE
//! formats in them ([`wqe`]), completions ([`wc`]), and the mmap entries
//! through which user space maps the rings ([`mmap`]).

/// The uverbs ABI version of rdma-core's rxe provider
/// (`RXE_UVERBS_ABI_VERSION`, as `METAROCE_UVERBS_ABI_VERSION`).
pub(crate) const UVERBS_ABI_VERSION: u32 = crate::ffi::bindings::METAROCE_UVERBS_ABI_VERSION;

pub(crate) mod mmap;
pub(crate) mod queue;
pub(crate) mod wc;
pub(crate) mod wqe;

pub(crate) use mmap::MmInfo;
pub(crate) use queue::Queue;
pub(crate) use wc::{QpHandle, Wc};
pub(crate) use wqe::{send_flags, RecvWqe, SendWqe, Sge, SGE_SIZE};
