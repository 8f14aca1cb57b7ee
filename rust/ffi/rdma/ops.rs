// SPDX-License-Identifier: GPL-2.0

//! The `ib_device_ops` table of a driver, built once, as a constant, from
//! its [`Driver`] implementation (as `kernel::block::mq` builds its
//! `blk_mq_ops`): every verb the driver does not implement is left NULL, as
//! the RDMA core expects of optional verbs; the mandatory ones
//! (`ib_device_check_mandatory`) are required trait methods.
//!
//! `owner` is the one field not known at compile time; `newlink` merges it
//! in with a second `ib_set_device_ops` call.

use super::ah::AhObject;
use super::cq::CqObject;
use super::mw::MwObject;
use super::qp::QpObject;
use super::srq::SrqObject;
use super::{Adapter, Driver};
use crate::ffi::bindings as b;
use crate::ffi::rxe_abi::mmap;
use core::mem::size_of;

/// All-NULL callbacks, zero sizes.
// SAFETY: `ib_device_ops` is plain data (pointers, `Option`s of function
// pointers, integers): all-zero is a valid value, "no callbacks".
const NONE: b::ib_device_ops = unsafe { core::mem::MaybeUninit::zeroed().assume_init() };

impl<T: Driver> Adapter<T> {
    /// The ops table of driver `T`.
    pub(super) const OPS: b::ib_device_ops = b::ib_device_ops {
        driver_id: T::DRIVER_ID.raw(),
        uverbs_abi_ver: T::UVERBS_ABI_VERSION,

        // The device.
        query_device: Some(Self::query_device),
        query_port: Some(Self::query_port),
        get_port_immutable: Some(Self::get_port_immutable),
        query_pkey: Some(Self::query_pkey),
        get_link_layer: Some(Self::get_link_layer),
        get_netdev: Some(Self::get_netdev),
        dealloc_driver: Some(Self::dealloc_driver),

        // User contexts and their mappings.
        alloc_ucontext: Some(Self::alloc_ucontext),
        dealloc_ucontext: Some(Self::dealloc_ucontext),
        disassociate_ucontext: Some(Self::disassociate_ucontext),
        mmap: Some(mmap::mmap),
        mmap_free: Some(mmap::mmap_free),
        size_ib_ucontext: size_of::<b::ib_ucontext>(),

        // PDs.
        alloc_pd: Some(Self::alloc_pd),
        dealloc_pd: Some(Self::dealloc_pd),
        size_ib_pd: size_of::<b::ib_pd>(),

        // CQs.
        create_cq: Some(Self::create_cq),
        destroy_cq: Some(Self::destroy_cq),
        req_notify_cq: Some(Self::req_notify_cq),
        poll_cq: Some(Self::poll_cq),
        resize_cq: if T::HAS_RESIZE_CQ {
            Some(Self::resize_cq)
        } else {
            None
        },
        size_ib_cq: size_of::<CqObject<T>>(),

        // QPs.
        create_qp: Some(Self::create_qp),
        modify_qp: Some(Self::modify_qp),
        query_qp: Some(Self::query_qp),
        destroy_qp: Some(Self::destroy_qp),
        post_send: Some(Self::post_send),
        post_recv: Some(Self::post_recv),
        size_ib_qp: size_of::<QpObject<T>>(),

        // SRQs.
        create_srq: if T::HAS_CREATE_SRQ {
            Some(Self::create_srq)
        } else {
            None
        },
        modify_srq: if T::HAS_CREATE_SRQ {
            Some(Self::modify_srq)
        } else {
            None
        },
        query_srq: if T::HAS_CREATE_SRQ {
            Some(Self::query_srq)
        } else {
            None
        },
        destroy_srq: if T::HAS_CREATE_SRQ {
            Some(Self::destroy_srq)
        } else {
            None
        },
        post_srq_recv: if T::HAS_CREATE_SRQ {
            Some(Self::post_srq_recv)
        } else {
            None
        },
        size_ib_srq: if T::HAS_CREATE_SRQ {
            size_of::<SrqObject<T>>()
        } else {
            0
        },

        // AHs.
        create_ah: if T::HAS_CREATE_AH {
            Some(Self::create_ah)
        } else {
            None
        },
        create_user_ah: if T::HAS_CREATE_AH {
            Some(Self::create_ah)
        } else {
            None
        },
        destroy_ah: if T::HAS_CREATE_AH {
            Some(Self::destroy_ah)
        } else {
            None
        },
        size_ib_ah: if T::HAS_CREATE_AH {
            size_of::<AhObject<T>>()
        } else {
            0
        },

        // MWs.
        alloc_mw: if T::HAS_ALLOC_MW {
            Some(Self::alloc_mw)
        } else {
            None
        },
        dealloc_mw: if T::HAS_ALLOC_MW {
            Some(Self::dealloc_mw)
        } else {
            None
        },
        size_ib_mw: if T::HAS_ALLOC_MW {
            size_of::<MwObject<T>>()
        } else {
            0
        },

        // MRs.
        get_dma_mr: Some(Self::get_dma_mr),
        reg_user_mr: Some(Self::reg_user_mr),
        dereg_mr: Some(Self::dereg_mr),
        alloc_mr: if T::HAS_ALLOC_MR {
            Some(Self::alloc_mr)
        } else {
            None
        },
        map_mr_sg: if T::HAS_ALLOC_MR {
            Some(Self::map_mr_sg)
        } else {
            None
        },

        // Counters.
        alloc_hw_port_stats: if T::HAS_COUNTERS {
            Some(Self::alloc_hw_port_stats)
        } else {
            None
        },
        get_hw_stats: if T::HAS_COUNTERS {
            Some(Self::get_hw_stats)
        } else {
            None
        },

        // Resource tracking: driver attributes of QPs, CQs and MRs.
        fill_res_qp_entry: if T::HAS_FILL_RES_QP {
            Some(Self::fill_res_qp_entry)
        } else {
            None
        },
        fill_res_cq_entry: if T::HAS_FILL_RES_CQ {
            Some(Self::fill_res_cq_entry)
        } else {
            None
        },
        fill_res_mr_entry: if T::HAS_FILL_RES_MR {
            Some(Self::fill_res_mr_entry)
        } else {
            None
        },

        ..NONE
    };
}
