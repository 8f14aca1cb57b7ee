//! Host crate root of the MetaRoCE transport core; the core itself is `proto.rs`, which the
//! kernel module includes as a module of its own crate.
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[path = "proto.rs"]
mod proto;
pub use proto::*;

// The test kit's RC model keeps its rings, memory and CQs in `Vec`s (host only: the
// kernel module never includes `testkit`).
#[cfg(any(test, feature = "testkit"))]
extern crate alloc;

#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
