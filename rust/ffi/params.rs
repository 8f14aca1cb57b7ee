// SPDX-License-Identifier: GPL-2.0

//! Module parameters. They are declared in `helpers.c` because `module_param()`
//! is a C macro; Rust reads them through these accessors.

use super::bindings;

/// The `udp_port` module parameter: the UDP destination port of the transport.
pub(crate) fn udp_port() -> u16 {
    // SAFETY: `metaroce_param_udp_port` takes no arguments and only reads a
    // `ushort` module parameter that is read-only (0444) after load.
    unsafe { bindings::metaroce_param_udp_port() }
}
