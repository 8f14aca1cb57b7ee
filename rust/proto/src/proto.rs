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
//!
//! The verbs layer's RC rules are here too: [`rc`] is the RC engine (requester, responder,
//! completer; IBTA 9.7, 10.8), the connection's [`conn::App`] over small traits the kernel
//! implements on its rings, memory regions and CQs.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(unreachable_pub)]

pub mod bytes;
pub mod cc;
pub mod conn;
pub mod fair;
pub mod ident;
pub mod path;
pub mod plane;
pub mod rc;
pub mod sack;
pub mod stream;
pub mod time;
pub mod wire;

/// The default connection: 8 paths, 64 in-flight packets (256 KiB at a 4 KiB MTU); its
/// streams are the application's ([`conn::App::stream`]).
pub type DefaultConnection = conn::Connection<8, 1, 64>;

/// A dense connection for nodes with very many connections: 8 paths, 32 in-flight
/// packets (128 KiB at a 4 KiB MTU, still above one 100 Gb/s x 10 µs bandwidth-delay
/// product).
pub type DenseConnection = conn::Connection<8, 1, 32>;
