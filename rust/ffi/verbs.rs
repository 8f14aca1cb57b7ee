// SPDX-License-Identifier: GPL-2.0

//! The items the QP code (`rust/verbs/qp/`) imports from `crate::ffi::verbs`,
//! at that path until it moves to the rooms they now live in
//! ([`super::rdma`], [`super::rxe_abi`], [`super::wr`], [`super::udata`],
//! [`super::mem`]). New code imports from those.

pub(crate) use super::rdma::{
    modify_qp_is_ok, qp_mask, QpAttr, QpCaps, QpEvents, QpInit, QpState, QpType,
};
pub(crate) use super::rxe_abi::{
    send_flags, MmInfo, QpHandle, Queue, RecvWqe, SendWqe, Sge, Wc, SGE_SIZE,
};
pub(crate) use super::udata::UContext;
pub(crate) use super::wr::{RecvWrs, SendWrs};
