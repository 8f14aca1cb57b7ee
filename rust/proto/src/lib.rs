//! Host crate root of the MetaRoCE transport core; the core itself is `proto.rs`, which the
//! kernel module includes as a module of its own crate.
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[path = "proto.rs"]
mod proto;
pub use proto::*;

#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
