// SPDX-License-Identifier: GPL-2.0

//! The FFI skin: the only place in metaroce that touches C, and the only
//! place with `unsafe` code. Every `unsafe` block opens with a `// SAFETY:`
//! comment proving it from the invariants its room states.
//!
//! The rooms:
//!
//! - [`bindings`]: bindgen's output for `include/metaroce_bindings.h`
//!   (RDMA core, net, UDP tunnel, the rxe user ABI, the C shim), generated at
//!   build time by `Kbuild` with the kernel's own bindgen flags; the single
//!   source of every C constant used here. `helpers.c` beside this file:
//!   module parameters, static-inline and macro shims, the KUnit suite.
//! - [`rdma`]: the RDMA abstractions — the `#[vtable]` [`rdma::Driver`]
//!   trait, [`rdma::Registration`], the device and its ops table, the typed
//!   verbs objects (`rdma/{device,registration,netdev,ops,object,pd,cq,qp,
//!   srq,mr,mw,ah,ucontext,event,counters}.rs`). Nothing metaroce-specific.
//! - [`rxe_abi`]: the rxe user ABI — shared rings ([`rxe_abi::queue`]), WQE
//!   and CQE formats ([`rxe_abi::wqe`], [`rxe_abi::wc`]), mmap entries
//!   ([`rxe_abi::mmap`]).
//! - [`wr`]: kernel work requests (`ib_post_send`/`ib_post_recv`)
//!   translated into rings.
//! - [`udata`]: the user context and user data of a verb; [`umem`]: pinned
//!   user memory; [`mem`]: the memory an MR covers and the checked spans
//!   the data path copies through; [`racy`]: copies of memory others may
//!   write concurrently.
//! - [`net`]: the UDP tunnel; [`random`]: the kernel CRNG; [`timer`], [`sync`]: timers and the
//!   softirq-safe lock; [`defer`]: work left for the end of a receive batch; [`rcu_map`]: a `u32 → Arc` map read under RCU; [`errno`], [`params`], [`layout`], [`boxed`]: small
//!   helpers ([`boxed`]: a large value copied to the heap without a stack
//!   temporary).
//! - [`trace`]: the module's trace events (`metaroce:*`), through the shim.

/// Raw bindings: used outside `ffi` only by the compile-time checks that the
/// RC engine's opcode, status and flag values are the kernel's
/// (`rust/verbs/qp/env.rs`).
#[allow(
    dead_code,
    improper_ctypes,
    missing_docs,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::undocumented_unsafe_blocks
)]
pub(crate) mod bindings {
    // `rust/bindgen_parameters` blocklists these so that they map to the Rust
    // pointer-sized types, as in the kernel's own `bindings` crate.
    pub type __kernel_size_t = usize;
    pub type __kernel_ssize_t = isize;
    pub type __kernel_ptrdiff_t = isize;

    include!("bindings_generated.rs");
}

pub(crate) mod boxed;
pub(crate) mod defer;
pub(crate) mod errno;
pub(crate) mod layout;
pub(crate) mod mem;
pub(crate) mod net;
pub(crate) mod params;
pub(crate) mod racy;
pub(crate) mod random;
pub(crate) mod rcu_map;
pub(crate) mod rdma;
pub(crate) mod rxe_abi;
pub(crate) mod sync;
pub(crate) mod timer;
pub(crate) mod trace;
pub(crate) mod udata;
pub(crate) mod umem;
pub(crate) mod wr;

use kernel::str::CStr;

/// The module's version, `METAROCE_VERSION` in `include/metaroce.h`.
pub(crate) fn version() -> &'static CStr {
    match CStr::from_bytes_with_nul(bindings::METAROCE_VERSION) {
        Ok(v) => v,
        Err(_) => kernel::c_str!("?"),
    }
}
