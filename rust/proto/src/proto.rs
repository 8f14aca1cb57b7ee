//! MetaRoCE transport core: a sans-I/O, `no_std`, allocation-free and `unsafe`-free
//! implementation of the MetaRoCE wire protocol (see `Documentation/transport.rst`).
//!
//! The same source is compiled as a host crate (for `cargo test`, the simulator and the
//! benchmarks; `lib.rs` is only the `no_std` crate root around this file) and, through
//! `#[path = "proto/src/proto.rs"] pub mod proto;`, into the Linux kernel module. It
//! therefore never names `crate::`, never allocates, never panics on any input and only
//! uses `core`.
//!
//! Shape (after quinn-proto and smoltcp): the caller feeds received datagrams and the current
//! time into a [`conn::Connection`], asks it for datagrams to transmit into caller-provided
//! buffers, asks [`conn::Connection::poll_timeout`] for the next deadline and calls
//! [`conn::Connection::handle_timeout`] when it passes. Message payloads stay with the caller
//! (the verbs layer); the core pulls them through the [`conn::App`] trait.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(unreachable_pub)]

pub mod cc;
pub mod conn;
pub mod fair;
pub mod path;
pub mod sack;
pub mod stream;
pub mod time;
pub mod wire;

/// Bytes of state of the connection type used for the 8-path budget (scenario 6).
pub type DefaultConnection = conn::Connection<8, 1, 4>;
