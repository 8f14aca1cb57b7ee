// SPDX-License-Identifier: GPL-2.0

//! Rust abstractions over the kernel RDMA core (`include/rdma/ib_verbs.h`,
//! `include/rdma/rdma_netlink.h`) for a software RDMA device bound to a
//! netdev, in the manner of `kernel::net::phy` and `kernel::block::mq`.
//!
//! A driver implements [`Driver`] (a `#[vtable]` trait: the verbs it does not
//! implement are left NULL in the `ib_device_ops` table, which [`ops`] builds
//! once, as a `const`). [`Registration`] does the rest: it registers a link
//! type so that `rdma link add NAME type TYPE netdev DEV` creates a device,
//! registers the device with the RDMA core, follows its netdev (port events
//! on carrier changes, removal on `NETDEV_UNREGISTER`), and removes every
//! device when dropped.
//!
//! A driver may report another driver's id and uverbs ABI version
//! ([`Driver::DRIVER_ID`], [`Driver::UVERBS_ABI_VERSION`]) so that that
//! driver's rdma-core provider binds to its devices. Everything in the kernel
//! that selects devices by driver id would then mistake them for the other
//! driver's: `ib_unregister_driver()`, and `ib_device_get_by_netdev()`, through
//! which e.g. rdma_rxe's netdev notifier and receive path find "their" device
//! and cast it to `struct rxe_dev`. So this layer
//! - keeps its own list of devices instead of `ib_unregister_driver()`, and
//! - binds the netdev with the `get_netdev` callback (holding its own
//!   reference) rather than `ib_device_set_netdev()`, which would enter the
//!   device in the RDMA core's netdev hash that `ib_device_get_by_netdev()`
//!   searches. The RDMA core's GID management and `rdma link` reach the netdev
//!   through `ib_device_get_netdev()`, which calls `get_netdev`.
//!
//! Rooms: [`device`] (attributes, port, [`Device`]), [`registration`],
//! [`netdev`], [`ops`], [`object`] (the core-allocated object wrapper),
//! [`pd`], [`cq`], [`qp`], [`srq`], [`mr`], [`mw`], [`ah`], [`ucontext`],
//! [`event`] (CQ/QP/SRQ events), [`ext`] (the extension API's methods), [`counters`], [`flags`] (enums and flag
//! sets from bindgen's constants).
//!
//! # Invariants
//!
//! - Every `ib_device` created here is the first field of a
//!   `DeviceBox<T::Data>` allocated by `_ib_alloc_device()`, and is on the
//!   registry's device list from before `ib_register_device()` until its
//!   `dealloc_driver` callback.
//! - At most one [`Registration`] exists at a time (the RDMA core's `newlink`
//!   callback carries no context pointer, so it finds the registry through a
//!   global).

use crate::ffi::bindings as b;
use crate::ffi::mem::{MappedPages, Mem};
use crate::ffi::rxe_abi::{MmInfo, Wc};
use crate::ffi::udata::UContext;
use crate::ffi::wr::{RecvWrs, SendWrs};
use core::marker::PhantomData;
use kernel::error::VTABLE_DEFAULT_ERROR;
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::Arc;

pub(crate) mod ah;
pub(crate) mod counters;
pub(crate) mod cq;
pub(crate) mod device;
pub(crate) mod event;
pub(crate) mod ext;
pub(crate) mod flags;
pub(crate) mod mr;
pub(crate) mod mw;
pub(crate) mod netdev;
pub(crate) mod object;
pub(crate) mod ops;
pub(crate) mod pd;
pub(crate) mod qp;
pub(crate) mod registration;
pub(crate) mod res;
pub(crate) mod srq;
pub(crate) mod ucontext;

pub(crate) use crate::ffi::rxe_abi::QpHandle;
pub(crate) use ah::Av;
pub(crate) use counters::CounterDesc;
pub(crate) use device::{Device, DeviceAttrs, PortAttrs};
pub(crate) use event::{CqEvents, QpEvents, SrqEvents};
pub(crate) use flags::{access, device_cap, network_type, port_cap, wc_flags};
pub(crate) use netdev::{eui64_from_mac, ib_mtu_for, NetDev};
pub(crate) use pd::PdId;
pub(crate) use qp::{modify_qp_is_ok, qp_mask, QpAttr, QpCaps, QpInit, QpState, QpType};
pub(crate) use registration::Registration;
pub(crate) use srq::SrqAttr;

/// An RDMA driver id (`enum rdma_driver_id`): which rdma-core provider
/// binds to the device.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct DriverId(b::rdma_driver_id);

impl DriverId {
    /// `RDMA_DRIVER_RXE`: rdma-core's rxe provider.
    pub(crate) const RXE: DriverId = DriverId(b::rdma_driver_id_RDMA_DRIVER_RXE);

    /// The C value.
    pub(crate) const fn raw(self) -> b::rdma_driver_id {
        self.0
    }
}

/// What `create_cq` returns: the CQ and where user space maps its ring.
pub(crate) struct CqCreated<C> {
    pub(crate) cq: C,
    pub(crate) ring: MmInfo,
}

/// What `create_ah` returns: the AH and the number UD WQEs name it by.
pub(crate) struct AhCreated<A> {
    pub(crate) ah: A,
    pub(crate) num: u32,
}

/// What `create_srq` returns: the SRQ, its number (`srq_num`) and where
/// user space maps its ring.
pub(crate) struct SrqCreated<S> {
    pub(crate) srq: S,
    pub(crate) num: u32,
    pub(crate) ring: MmInfo,
}

/// What `create_qp` returns: the QP, its number and where user space maps
/// its receive and send rings.
pub(crate) struct QpCreated<Q> {
    pub(crate) qp: Q,
    pub(crate) qpn: u32,
    pub(crate) rq: MmInfo,
    pub(crate) sq: MmInfo,
}

/// What an MR verb returns: the MR and its keys.
pub(crate) struct MrCreated<M> {
    pub(crate) mr: M,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
}

/// What `alloc_mw` returns: the MW and its initial rkey.
pub(crate) struct MwCreated<W> {
    pub(crate) mw: W,
    pub(crate) rkey: u32,
}

/// A software RDMA driver whose devices are created by `rdma link add`.
///
/// Device verbs get the [`Device`] they run on, borrowed for the call;
/// [`Device::data`] is the driver's per-device data ([`Self::Data`]).
///
/// Verbs objects: the RDMA core allocates CQs, QPs, SRQs, AHs and MWs with
/// room for the driver's value (`INIT_RDMA_OBJ_SIZE`); MRs are allocated
/// here. Each `create_*` returns the value to keep, each `destroy_*` is
/// called with it before it is dropped. Verbs come from user space (the rxe
/// ABI's shared rings) and from kernel consumers (ib_mad's GSI QP, ib_cm,
/// rdma_cm …): for those, objects have no user context (`uc` is `None`),
/// rings live in kernel memory and `ib_post_*` / `ib_poll_cq` write and read
/// them.
///
/// The verbs the RDMA core requires (`ib_device_check_mandatory`) are
/// required methods; the others are optional and left NULL in the ops table
/// when not implemented: `resize_cq`; the AH verbs (`create_ah`,
/// `destroy_ah`); the SRQ verbs (`create_srq` … `post_srq_recv`); the MW
/// verbs (`alloc_mw`, `dealloc_mw`); fast registration (`alloc_mr`,
/// `map_mr`); `counters`; and resource attributes (`fill_res_qp`,
/// `fill_res_cq`, `fill_res_mr`, each on its own); the extension API
/// (`qp_query_paths`, `qp_set_paths`, `qp_set_stream_class`: [`ext`]). A
/// group is enabled by implementing its first method (`HAS_CREATE_AH`,
/// `HAS_CREATE_SRQ`, `HAS_ALLOC_MW`, `HAS_ALLOC_MR`, `HAS_COUNTERS`,
/// `HAS_RESIZE_CQ`, `HAS_FILL_RES_*`, `HAS_QP_QUERY_PATHS`); the others of the group
/// must then be implemented too (a missing one fails the build).
#[vtable]
pub(crate) trait Driver: 'static + Sized {
    /// State shared by all devices (the transport), given to [`Registration::new`].
    type Shared: Send + Sync;
    /// Per-device driver data.
    type Data: Send + Sync;
    /// A completion queue.
    type Cq: Send + Sync;
    /// A queue pair.
    type Qp: Send + Sync;
    /// A memory region.
    type Mr: Send + Sync;
    /// An address handle.
    type Ah: Send + Sync;
    /// A shared receive queue.
    type Srq: Send + Sync;
    /// A memory window.
    type Mw: Send + Sync;
    /// The link type: `rdma link add NAME type LINK_TYPE netdev DEV`.
    const LINK_TYPE: &'static CStr;
    /// The node description reported to consumers (`ibv_devinfo`).
    const NODE_DESC: &'static CStr;
    /// The driver id the device reports (`ib_device_ops.driver_id`).
    const DRIVER_ID: DriverId;
    /// The uverbs ABI version of the driver's user provider.
    const UVERBS_ABI_VERSION: u32;
    /// The names of the device counters, in the order of
    /// [`Self::counters`] (`rdma statistic show link DEV/1`).
    const COUNTERS: &'static [CounterDesc] = &[];

    /// Creates the driver data of a new device on `netdev`.
    fn new_device(shared: &Arc<Self::Shared>, netdev: &NetDev) -> Result<Self::Data>;
    /// The device's attributes.
    fn device_attrs(dev: &Device<Self>) -> DeviceAttrs;
    /// Port 1's attributes.
    fn port_attrs(dev: &Device<Self>) -> PortAttrs;

    /// `create_cq` (IBTA 11.2.7.1): a CQ of at least `cqe` entries.
    fn create_cq(
        dev: &Device<Self>,
        cqe: u32,
        uc: Option<&UContext>,
        events: CqEvents,
    ) -> Result<CqCreated<Self::Cq>>;
    /// `destroy_cq`: no completion may be written after this returns.
    fn destroy_cq(dev: &Device<Self>, cq: &Self::Cq);
    /// `resize_cq` (IBTA 11.2.7.3): at least `cqe` entries, keeping those
    /// waiting; returns where the new ring is mapped.
    fn resize_cq(
        _dev: &Device<Self>,
        _cq: &Self::Cq,
        _cqe: u32,
        _uc: Option<&UContext>,
    ) -> Result<MmInfo> {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// How many completions `cq` holds (its ring may be larger than asked
    /// for): what `ib_cq.cqe`, and so `ibv_create_cq`, reports, as rxe does.
    fn cq_capacity(cq: &Self::Cq) -> u32;
    /// `poll_cq` of a kernel CQ: hands up to `max` completions to `f` as
    /// kernel CQ slots ([`Wc::KERNEL_SIZE`] bytes); returns how many.
    fn poll_cq(cq: &Self::Cq, max: usize, f: &mut dyn FnMut(&[u8; Wc::KERNEL_SIZE])) -> usize;
    /// `req_notify_cq`: arm for the next (or next solicited) completion;
    /// returns whether completions are already waiting (for
    /// `IB_CQ_REPORT_MISSED_EVENTS`).
    fn req_notify_cq(cq: &Self::Cq, solicited_only: bool) -> bool;

    /// `create_ah` (IBTA 11.2.2.1) on `pd`. `sleepable`: the caller may
    /// sleep (`RDMA_CREATE_AH_SLEEPABLE`; ib_cm creates AHs under a spinlock
    /// with interrupts off, so allocate with `GFP_ATOMIC` otherwise).
    fn create_ah(
        _dev: &Device<Self>,
        _pd: PdId,
        _av: &Av,
        _sleepable: bool,
    ) -> Result<AhCreated<Self::Ah>> {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// `destroy_ah`.
    fn destroy_ah(_dev: &Device<Self>, _ah: &Self::Ah) {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// The number a UD work request names `ah` by (the rxe ABI's `ah_num`).
    fn ah_num(ah: &Self::Ah) -> u32;

    /// `create_srq` (IBTA 11.2.3.1): `attr` is updated to the sizes granted.
    fn create_srq(
        _dev: &Device<Self>,
        _pd: PdId,
        _attr: &mut SrqAttr,
        _uc: Option<&UContext>,
        _events: SrqEvents,
    ) -> Result<SrqCreated<Self::Srq>> {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// Kernel `post_srq_recv`.
    fn post_srq_recv(_dev: &Device<Self>, _srq: &Self::Srq, _wrs: &mut RecvWrs) -> Result {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// `modify_srq`: `IB_SRQ_MAX_WR` and/or `IB_SRQ_LIMIT` of `mask`.
    fn modify_srq(_dev: &Device<Self>, _srq: &Self::Srq, _attr: &SrqAttr, _mask: u32) -> Result {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// `query_srq`.
    fn query_srq(_srq: &Self::Srq) -> SrqAttr {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// `destroy_srq`.
    fn destroy_srq(_dev: &Device<Self>, _srq: &Self::Srq) {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// `alloc_mw` (IBTA 11.2.10.1) of type 1 or 2 on `pd`.
    fn alloc_mw(_dev: &Device<Self>, _pd: PdId, _mw_type: u32) -> Result<MwCreated<Self::Mw>> {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// `dealloc_mw`.
    fn dealloc_mw(_dev: &Device<Self>, _mw: &Self::Mw) {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// The device's counters, in the order of [`Self::COUNTERS`]: fills
    /// `out` (`COUNTERS.len()` values).
    fn counters(_dev: &Device<Self>, _out: &mut [u64]) {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// Driver attributes of QP `qp` in a resource dump (`rdma resource show
    /// qp -dd`): adds them to `out`; an error (`EMSGSIZE`: the message is
    /// full) ends the entry.
    fn fill_res_qp(_qp: &Self::Qp, _out: &mut res::ResAttrs) -> Result {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// Driver attributes of CQ `cq` in a resource dump (`rdma resource show
    /// cq -dd`), as [`Self::fill_res_qp`].
    fn fill_res_cq(_cq: &Self::Cq, _out: &mut res::ResAttrs) -> Result {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// Driver attributes of MR `mr` of `dev` in a resource dump (`rdma
    /// resource show mr -dd`), as [`Self::fill_res_qp`].
    fn fill_res_mr(_dev: &Device<Self>, _mr: &Self::Mr, _out: &mut res::ResAttrs) -> Result {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// The extension API's query (`METAROCE_IB_METHOD_QP_QUERY_PATHS`,
    /// `metaroce_qp_query_paths()`): QP `qp`'s connection and its paths into
    /// `out`. `EINVAL`: the QP has no connection (before RTR, or UD).
    fn qp_query_paths(_qp: &Self::Qp, _out: &mut ext::PathsOut<'_>) -> Result {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// The extension API's `METAROCE_IB_METHOD_QP_SET_PATHS`
    /// (`metaroce_qp_set_paths()`): QP `qp`'s connection sends on `paths`
    /// paths from now on; returns the count set. `EINVAL`: `paths` outside
    /// `1..=max_paths`, or no connection.
    fn qp_set_paths(_qp: &Self::Qp, _paths: u32) -> Result<u32> {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// The extension API's `METAROCE_IB_METHOD_QP_SET_STREAM_CLASS`
    /// (`metaroce_qp_set_stream_class()`): pins QP `qp` to stream `class`
    /// before it connects. `EINVAL`: `class` above
    /// `METAROCE_MAX_STREAM_CLASS`, or the QP is past INIT.
    fn qp_set_stream_class(_qp: &Self::Qp, _class: u32) -> Result {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// The extension API's "query planes" (`METAROCE_IB_METHOD_DEVICE_QUERY_PLANES`,
    /// `metaroce_device_query_planes()`): fills `out` with the device's planes, in
    /// order; returns how many it has. Implement it with [`Self::dev_set_planes`].
    fn dev_query_planes(
        _dev: &Device<Self>,
        _out: &mut [ext::PlaneInfo; ext::MAX_PLANES],
    ) -> usize {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// The extension API's "set planes" (`METAROCE_IB_METHOD_DEVICE_SET_PLANES`,
    /// `metaroce_device_set_planes()`; user space needs `CAP_NET_ADMIN`): binds the
    /// device to the netdevs `ifindex` (1 to [`ext::MAX_PLANES`] of them, the first
    /// the device's own). `EINVAL`: the first is not the device's netdev, one is
    /// repeated or a loopback device; `ENODEV`: one names no netdev. A refused call
    /// changes nothing.
    fn dev_set_planes(_dev: &Device<Self>, _ifindex: &[i32]) -> Result {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }

    /// A netdev changed: netdev `ifindex` is now up with carrier (`up`) or not, or
    /// went away (`gone`). Called for every device of the driver on every netdev's
    /// `NETDEV_UP`, `_DOWN`, `_CHANGE` and `_UNREGISTER` in the initial network
    /// namespace (process context, RTNL held): a device with planes follows its
    /// planes' netdevs.
    fn netdev_event(_dev: &Device<Self>, _ifindex: i32, _up: bool, _gone: bool) {}

    /// `create_qp`: updates `init.caps` to the sizes granted. `handle` is
    /// what the QP's kernel completions name; `events` raises its
    /// asynchronous events.
    #[allow(clippy::too_many_arguments)]
    fn create_qp(
        dev: &Device<Self>,
        pd: PdId,
        init: &mut QpInit,
        scq: &Self::Cq,
        rcq: &Self::Cq,
        srq: Option<&Self::Srq>,
        uc: Option<&UContext>,
        handle: QpHandle,
        events: QpEvents,
    ) -> Result<QpCreated<Self::Qp>>;
    /// `modify_qp` (IBTA 11.2.5.2).
    fn modify_qp(dev: &Device<Self>, qp: &Self::Qp, attr: &QpAttr) -> Result;
    /// `query_qp` (IBTA 11.2.5.3).
    fn query_qp(qp: &Self::Qp, attr: &mut QpAttr, init: &mut QpInit);
    /// `destroy_qp`: flushes and detaches; no completion for it afterwards.
    fn destroy_qp(dev: &Device<Self>, qp: &Self::Qp);
    /// The user SQ doorbell (`post_send` with no work requests).
    fn post_send(dev: &Device<Self>, qp: &Self::Qp) -> Result;
    /// Kernel `post_send`: the requests of `wrs`, in order.
    fn post_send_wrs(dev: &Device<Self>, qp: &Self::Qp, wrs: &mut SendWrs) -> Result;
    /// Kernel `post_recv`.
    fn post_recv_wrs(dev: &Device<Self>, qp: &Self::Qp, wrs: &mut RecvWrs) -> Result;

    /// `alloc_mr` (`IB_MR_TYPE_MEM_REG`): a free fast-registration MR of
    /// kernel PD `pd` for up to `max_pages` pages (lkey = rkey).
    fn alloc_mr(_dev: &Device<Self>, _pd: PdId, _max_pages: u32) -> Result<MrCreated<Self::Mr>> {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// `map_mr_sg`: installs the page list `pages` (kernel virtual
    /// addresses, `page_size` each) of a fast-registration MR, the region
    /// starting at `iova` and `len` bytes long.
    fn map_mr(
        _dev: &Device<Self>,
        _mr: &Self::Mr,
        _iova: u64,
        _len: u64,
        _page_size: u32,
        _pages: &MappedPages<'_>,
    ) -> Result {
        kernel::build_error(VTABLE_DEFAULT_ERROR)
    }
    /// `get_dma_mr`: the DMA MR of kernel PD `pd`; `mem` is all kernel
    /// memory, by kernel virtual address.
    fn get_dma_mr(
        dev: &Device<Self>,
        pd: PdId,
        mem: Mem,
        access: u32,
    ) -> Result<MrCreated<Self::Mr>>;
    /// `reg_user_mr`: an MR over pinned user memory `mem`, addressed by
    /// remote peers from `iova`.
    fn reg_user_mr(
        dev: &Device<Self>,
        pd: PdId,
        mem: Mem,
        iova: u64,
        access: u32,
    ) -> Result<MrCreated<Self::Mr>>;
    /// `dereg_mr`: after `Ok` the memory is no longer accessed and `mr` is
    /// dropped; after an error (`EINVAL`: a memory window is still bound to
    /// it, IBTA 10.6.7.2.6) the MR stays registered. Called by the RDMA core
    /// (`ib_dereg_mr_user`, through this layer's vtable only) in process
    /// context, with none of this driver's locks or RCU read-side sections
    /// held: it may sleep.
    fn dereg_mr(dev: &Device<Self>, mr: &Self::Mr) -> Result;
}

/// The `ib_device_ops` callbacks of driver `T`, in one `impl` per room.
pub(crate) struct Adapter<T: Driver>(PhantomData<T>);
