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

/// The `paths` module parameter: paths per RC connection (checked at load:
/// 1..=64).
pub(crate) fn paths() -> u32 {
    // SAFETY: `metaroce_param_paths` takes no arguments and only reads a
    // `uint` module parameter that is read-only (0444) after load.
    unsafe { bindings::metaroce_param_paths() }
}

/// The `shared` module parameter: whether RC QPs to one peer share a
/// connection (Documentation/device.rst, "Shared connections").
pub(crate) fn shared() -> bool {
    // SAFETY: `metaroce_param_shared` takes no arguments and reads a `bool`
    // module parameter with `READ_ONCE` (sysfs may write it at any time).
    unsafe { bindings::metaroce_param_shared() }
}

/// The `link_payload` module parameter: whether a QP whose `path_mtu` is the
/// port's active MTU sends the link's full payload per DATA packet
/// (Documentation/transport.rst, C7).
pub(crate) fn link_payload() -> bool {
    // SAFETY: `metaroce_param_link_payload` takes no arguments and reads a
    // `bool` module parameter with `READ_ONCE` (sysfs may write it at any time).
    unsafe { bindings::metaroce_param_link_payload() }
}

/// The `rx_mbps` module parameter: a device's inbound capacity in Mb/s, 0 =
/// the netdev's link speed.
pub(crate) fn rx_mbps() -> u32 {
    // SAFETY: `metaroce_param_rx_mbps` takes no arguments and only reads a
    // `uint` module parameter that is read-only (0444) after load.
    unsafe { bindings::metaroce_param_rx_mbps() }
}

/// The `ack_every` module parameter as taken: DATA packets of a path per
/// acknowledgement, clamped to 1..=64 (0 is 1). Writable at any time; sysfs
/// shows what was written.
pub(crate) fn ack_every() -> u8 {
    // SAFETY: `metaroce_param_ack_every` takes no arguments and reads a
    // `uint` module parameter with `READ_ONCE`.
    let v = unsafe { bindings::metaroce_param_ack_every() };
    v.clamp(1, MAX_ACK_EVERY) as u8
}

/// The `ack_bundle` module parameter as taken: the most path ACKs one
/// datagram carries, clamped to 1..=16 (0 is 1; the wire's most). Writable at
/// any time; sysfs shows what was written.
pub(crate) fn ack_bundle() -> u8 {
    // SAFETY: `metaroce_param_ack_bundle` takes no arguments and reads a
    // `uint` module parameter with `READ_ONCE`.
    let v = unsafe { bindings::metaroce_param_ack_bundle() };
    v.clamp(1, MAX_ACK_BUNDLE) as u8
}

/// The `ack_delay_us` module parameter as taken: the longest an
/// acknowledgement waits, in ns, at most [`MAX_ACK_DELAY_US`] µs (below
/// the kernel's 1 ms RTO floor). Writable at any time; sysfs shows what was
/// written.
pub(crate) fn ack_delay_ns() -> u32 {
    // SAFETY: `metaroce_param_ack_delay_us` takes no arguments and reads a
    // `uint` module parameter with `READ_ONCE`.
    let v = unsafe { bindings::metaroce_param_ack_delay_us() };
    v.min(MAX_ACK_DELAY_US) * 1000
}

/// The `rx_gro` module parameter: whether the tunnel sockets take UDP GRO
/// (`Documentation/device.rst`, "Receive"). Read-only, taken at load.
pub(crate) fn rx_gro() -> bool {
    // SAFETY: `metaroce_param_rx_gro` takes no arguments and reads a `bool`
    // module parameter with `READ_ONCE`.
    unsafe { bindings::metaroce_param_rx_gro() }
}

/// The `ack_ride` module parameter: whether ACKs and a short DATA packet
/// share a datagram (`Documentation/transport.rst`, "ACKs riding on DATA").
/// Writable at any time; a connection takes it when it is set up.
pub(crate) fn ack_ride() -> bool {
    // SAFETY: `metaroce_param_ack_ride` takes no arguments and reads a
    // `bool` module parameter with `READ_ONCE`.
    unsafe { bindings::metaroce_param_ack_ride() }
}

/// The `train` module parameter as taken: the most new DATA packets a path
/// sends in a row, handed to the network stack as one UDP GSO burst where
/// the netdev takes one (`Documentation/device.rst`, "Trains"),
/// 1 ..= `METAROCE_MAX_TRAIN` (0 counts as 1). Writable at any time; a
/// connection takes it when it is set up.
pub(crate) fn train() -> u8 {
    // SAFETY: `metaroce_param_train` takes no arguments and reads a `uint`
    // module parameter with `READ_ONCE`.
    let v = unsafe { bindings::metaroce_param_train() };
    v.clamp(1, bindings::METAROCE_MAX_TRAIN) as u8
}

/// The largest `ack_every` taken.
const MAX_ACK_EVERY: u32 = 64;
/// The largest `ack_bundle` taken (the wire's most, `wire::MAX_ACK_BUNDLE`).
const MAX_ACK_BUNDLE: u32 = 16;
/// The largest `ack_delay_us` taken, µs.
const MAX_ACK_DELAY_US: u32 = 500;
