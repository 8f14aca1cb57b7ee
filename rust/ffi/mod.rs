// SPDX-License-Identifier: GPL-2.0

//! The FFI skin: the only place in metaroce that touches C.
//!
//! - [`bindings`]: bindgen's output for `include/metaroce_bindings.h`
//!   (RDMA core, net, UDP tunnel, the rxe user ABI, the C shim), generated at
//!   build time by `Kbuild` with the kernel's own bindgen flags.
//! - `helpers.c` beside this file: module parameters, static-inline and macro
//!   shims, the KUnit suite declaration.
//! - safe wrappers over both, in the modules below. Every `unsafe` block opens
//!   with a `// SAFETY:` comment naming what makes it sound.

/// Raw bindings: never used outside `ffi`.
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

pub(crate) mod errno;
pub(crate) mod layout;
pub(crate) mod net;
pub(crate) mod params;
pub(crate) mod rdma;
pub(crate) mod sync;
pub(crate) mod timer;
pub(crate) mod verbs;

use kernel::str::CStr;

/// The module's version, `METAROCE_VERSION` in `include/metaroce.h`.
pub(crate) fn version() -> &'static CStr {
    match CStr::from_bytes_with_nul(bindings::METAROCE_VERSION) {
        Ok(v) => v,
        Err(_) => kernel::c_str!("?"),
    }
}
