// SPDX-License-Identifier: GPL-2.0

//! metaroce: an RDMA transport over UDP/IP for lossy, multipath fabrics.
//!
//! The crate is layered, and every arrow points down:
//!
//! - [`ffi`]: the FFI skin — bindgen output for the RDMA core and net headers,
//!   the C shim, and the Rust abstractions on top: the RDMA driver trait and
//!   verbs objects ([`ffi::rdma`]), the rxe user ABI ([`ffi::rxe_abi`]), the
//!   UDP tunnel ([`ffi::net`]), timers. Every `unsafe` block of the module
//!   lives there (its `mod.rs` maps the rooms).
//! - [`proto`]: the sans-I/O protocol core (`rust/proto`), the same source
//!   the host tests, fuzzes and simulates.
//! - [`net`]: the transport glue — the module's UDP tunnel, the softirq
//!   receive path and the QPN table that routes datagrams to QPs.
//! - [`verbs`]: the RDMA device metaroce registers (`rdma link add … type
//!   metaroce`), an [`ffi::rdma::Driver`]; its QPs drive the protocol core
//!   over [`net`].
//! - the module itself (this file): parameters, load and unload.

// `DevShared`'s `pin_init!` (rust/verbs/device.rs) expands past the default 128.
#![recursion_limit = "256"]

use kernel::prelude::*;
use kernel::sync::Arc;

mod ffi;
mod net;
#[path = "proto/src/proto.rs"]
pub mod proto;
mod selftest;
mod verbs;

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

/// Checks a `paths` module parameter value: `EINVAL` outside 1..=64 (the
/// module refuses to load, as for `udp_port`: a read-only parameter that is
/// silently clamped would hide the typo from whoever set it).
pub(crate) fn check_paths(paths: u32) -> Result {
    match paths {
        1..=64 => Ok(()),
        _ => Err(EINVAL),
    }
}

struct Metaroce {
    devices: ffi::rdma::Registration<verbs::device::Metaroce>,
    /// Dropped after `devices` (no receive can queue any more): waits for
    /// the connections queued for the end of a receive batch.
    _batches: ffi::defer::Lists,
    /// Dropped after `devices`: waits for the QP references the QPN table
    /// drops after a grace period (`ffi::rcu_map`).
    _reaper: ffi::rcu_map::Reaper,
}

impl kernel::Module for Metaroce {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let port = ffi::params::udp_port();
        if let Err(e) = check_udp_port(port.into()) {
            pr_err!(
                "udp_port={} refused (errno {}): 1..=65535, not 4791\n",
                port,
                e.to_errno()
            );
            return Err(e);
        }
        let paths = ffi::params::paths();
        if let Err(e) = check_paths(paths) {
            pr_err!("paths={} refused (errno {}): 1..=64\n", paths, e.to_errno());
            return Err(e);
        }
        // SAFETY: once, at load, before the tunnel can receive anything.
        let batches = unsafe { ffi::defer::Lists::new()? };
        let transport = Arc::new(net::Transport::new(port)?, GFP_KERNEL)?;
        let devices = ffi::rdma::Registration::new(module, transport)?;
        pr_info!(
            "metaroce {} loaded: udp_port={} paths={} rx_mbps={} shared={} ack_every={} ack_bundle={} ack_delay_us={} ack_ride={} train={} link_payload={} rx_gro={}\n",
            ffi::version(),
            port,
            paths,
            ffi::params::rx_mbps(),
            u8::from(ffi::params::shared()),
            ffi::params::ack_every(),
            ffi::params::ack_bundle(),
            ffi::params::ack_delay_ns() / 1000,
            u8::from(ffi::params::ack_ride()),
            ffi::params::train(),
            u8::from(ffi::params::link_payload()),
            u8::from(ffi::params::rx_gro())
        );
        Ok(Metaroce {
            devices,
            _batches: batches,
            _reaper: ffi::rcu_map::Reaper::new(),
        })
    }
}

impl Drop for Metaroce {
    fn drop(&mut self) {
        // `devices` is dropped after this: it removes every device.
        pr_info!(
            "metaroce {} unloading, removing {} device(s)\n",
            ffi::version(),
            self.devices.device_count()
        );
    }
}
