// SPDX-License-Identifier: GPL-2.0

//! Errnos that `kernel::error::code` (6.12) does not name.

use super::bindings;
use kernel::error::Error;

/// `EADDRINUSE`: the address (here, a UDP port) is already owned.
pub(crate) fn eaddrinuse() -> Error {
    Error::from_errno(-(bindings::EADDRINUSE as i32))
}

/// `EOPNOTSUPP`: the operation is not supported on this object (rxe's
/// answer to, e.g., unknown create flags).
#[allow(non_snake_case)]
pub(crate) fn EOPNOTSUPP() -> Error {
    Error::from_errno(-(bindings::EOPNOTSUPP as i32))
}
