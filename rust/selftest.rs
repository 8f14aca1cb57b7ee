// SPDX-License-Identifier: GPL-2.0

//! Entry points of the module's KUnit suite (declared in `rust/ffi/helpers.c`,
//! because 6.12 has no Rust macro for declaring a suite). Each function is a
//! C-ABI wrapper around the Rust code under test; the assertions are KUnit's.

use kernel::ffi::{c_int, c_uint};

/// `sizeof` of a probed C type as the Rust bindings lay it out; 0 for an
/// unknown probe. Compared against the C compiler's answer by the suite.
#[no_mangle]
pub(crate) extern "C" fn metaroce_rust_sizeof(probe: c_uint) -> usize {
    crate::ffi::layout::rust_sizeof(probe)
}

/// Runs [`crate::check_udp_port`] and returns 0 or a negative errno.
#[no_mangle]
pub(crate) extern "C" fn metaroce_rust_check_param(port: u32) -> c_int {
    match crate::check_udp_port(port) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}
