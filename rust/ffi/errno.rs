// SPDX-License-Identifier: GPL-2.0

//! Errnos that `kernel::error::code` (6.12) does not name.

use super::bindings;
use kernel::error::Error;

/// `EADDRINUSE`: the address (here, a UDP port) is already owned.
pub(crate) fn eaddrinuse() -> Error {
    Error::from_errno(-(bindings::EADDRINUSE as i32))
}
