// SPDX-License-Identifier: GPL-2.0

//! The verbs device: what metaroce reports and does as an RDMA device.
//! Safe Rust on top of [`crate::ffi::rdma`]; it knows nothing of packet formats.

pub(crate) mod device;
