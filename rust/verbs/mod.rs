// SPDX-License-Identifier: GPL-2.0

//! The verbs device: what metaroce reports and does as an RDMA device.
//! Safe Rust on top of [`crate::ffi`]; packets are the protocol core's
//! business ([`crate::proto`]), sockets the transport glue's ([`crate::net`]).

pub(crate) mod ah;
pub(crate) mod counters;
pub(crate) mod cq;
pub(crate) mod device;
pub(crate) mod fair;
pub(crate) mod keys;
pub(crate) mod mr;
pub(crate) mod mw;
pub(crate) mod planes;
pub(crate) mod qp;
pub(crate) mod shared;
pub(crate) mod srq;
