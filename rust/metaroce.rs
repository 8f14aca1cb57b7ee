// SPDX-License-Identifier: GPL-2.0

//! metaroce: an RDMA transport over UDP/IP for lossy, multipath fabrics.
//!
//! The crate is layered, and every arrow points down:
//!
//! - [`ffi`]: the FFI skin — bindgen output for the RDMA core and net headers,
//!   the C shim's entry points, and the safe wrappers on top. Every `unsafe`
//!   block of the module lives there.
//! - the module itself (this file): parameters, load and unload.
//!
//! The protocol core (`rust/proto`), the transport glue and the verbs device
//! join as their issues land; see `Documentation/`.

use kernel::prelude::*;

mod ffi;
mod selftest;

module! {
    type: Metaroce,
    name: "metaroce",
    author: "metaroce developers",
    description: "MetaRoCE: multipath RDMA transport over UDP/IP",
    license: "GPL",
}

/// RoCEv2's well-known UDP port (IBTA Annex A17): rxe and real RoCE NICs own it.
const ROCE_V2_UDP_PORT: u32 = 4791;

/// Checks a `udp_port` module parameter value.
///
/// Returns `EINVAL` for a value that is not a UDP port (0 or above 65535) and
/// `EADDRINUSE` for RoCEv2's port 4791, so that metaroce never takes traffic
/// meant for rxe on the same netdev.
pub(crate) fn check_udp_port(port: u32) -> Result {
    match port {
        0 | 65536.. => Err(EINVAL),
        ROCE_V2_UDP_PORT => Err(ffi::errno::eaddrinuse()),
        _ => Ok(()),
    }
}

struct Metaroce;

impl kernel::Module for Metaroce {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let port = ffi::params::udp_port();
        if let Err(e) = check_udp_port(port.into()) {
            pr_err!("udp_port={} refused (errno {}): 1..=65535, not 4791\n", port, e.to_errno());
            return Err(e);
        }
        pr_info!("metaroce {} loaded: udp_port={}\n", ffi::version(), port);
        Ok(Metaroce)
    }
}

impl Drop for Metaroce {
    fn drop(&mut self) {
        pr_info!("metaroce {} unloaded\n", ffi::version());
    }
}
