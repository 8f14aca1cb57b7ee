// SPDX-License-Identifier: GPL-2.0

//! Safe abstractions over the kernel RDMA core (`include/rdma/ib_verbs.h`,
//! `include/rdma/rdma_netlink.h`) for a software RDMA device bound to a netdev.
//!
//! The driver implements [`Driver`]: the attributes it reports and the data it
//! keeps per device. [`Registration`] does the rest, the way `rdma_rxe` does in
//! C: it registers a link type so that `rdma link add NAME type TYPE netdev DEV`
//! creates a device, builds the `ib_device_ops` table, registers the device
//! with the RDMA core, follows its netdev (port events on carrier changes,
//! removal on NETDEV_UNREGISTER), and removes every device when dropped.
//!
//! Devices report `driver_id = RDMA_DRIVER_RXE` and the rxe uverbs ABI version
//! so that rdma-core's rxe provider binds to them. Everything in the kernel
//! that selects devices by driver id would then mistake them for rxe's:
//! `ib_unregister_driver()`, and `ib_device_get_by_netdev()`, through which
//! rdma_rxe's netdev notifier and receive path find "their" device and cast it
//! to `struct rxe_dev` (writing past the end of ours). So this module
//! - keeps its own list of devices instead of `ib_unregister_driver()`, and
//! - binds the netdev with the `get_netdev` callback (holding its own
//!   reference) rather than `ib_device_set_netdev()`, which would enter the
//!   device in the RDMA core's netdev hash that `ib_device_get_by_netdev()`
//!   searches. The RDMA core's GID management and `rdma link` reach the netdev
//!   through `ib_device_get_netdev()`, which calls `get_netdev`.
//!
//! # Invariants
//!
//! - Every `ib_device` created here is the first field of a `DeviceBox<T::Data>`
//!   allocated by `_ib_alloc_device()`, and is on the registry's device list
//!   from before `ib_register_device()` until its `dealloc_driver` callback.
//! - At most one [`Registration`] exists at a time (the RDMA core's `newlink`
//!   callback carries no context pointer, so it finds the registry through a
//!   global).

use super::bindings as b;
use super::verbs::{
    self, Av, CqEvents, Mem, MmInfo, QpAttr, QpEvents, QpHandle, QpInit, QpType, RecvWrs, SendWrs,
    SrqEvents, UContext, UData, UMem, Wc,
};
use core::marker::PhantomData;
use core::mem::size_of;
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use kernel::error::{from_result, to_result};
use kernel::ffi::{c_char, c_int, c_ulong, c_void};
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::{Arc, Mutex};
use kernel::types::Opaque;

/// Device attributes (IBTA 11.2.1.2 Query HCA; `struct ib_device_attr`).
/// Only the limits a driver chooses; the rest is filled in by [`Registration`].
#[derive(Clone, Copy)]
pub(crate) struct DeviceAttrs {
    /// Largest MR, in bytes.
    pub(crate) max_mr_size: u64,
    /// Page sizes supported for MRs, as a bit mask.
    pub(crate) page_size_cap: u64,
    /// IEEE OUI of the vendor.
    pub(crate) vendor_id: u32,
    /// `IB_DEVICE_*` capability flags.
    pub(crate) device_cap_flags: u64,
    /// Largest number of QPs.
    pub(crate) max_qp: u32,
    /// Largest number of WRs per SQ or RQ.
    pub(crate) max_qp_wr: u32,
    /// Largest number of SGEs per send WR.
    pub(crate) max_send_sge: u32,
    /// Largest number of SGEs per receive WR.
    pub(crate) max_recv_sge: u32,
    /// Largest number of SGEs per RDMA READ.
    pub(crate) max_sge_rd: u32,
    /// Largest number of CQs.
    pub(crate) max_cq: u32,
    /// Largest number of CQEs per CQ.
    pub(crate) max_cqe: u32,
    /// Largest number of MRs.
    pub(crate) max_mr: u32,
    /// Largest number of MWs.
    pub(crate) max_mw: u32,
    /// Largest number of PDs.
    pub(crate) max_pd: u32,
    /// Outstanding RDMA READ/atomic operations per QP as a responder.
    pub(crate) max_qp_rd_atom: u32,
    /// Outstanding RDMA READ/atomic operations per QP as a requester.
    pub(crate) max_qp_init_rd_atom: u32,
    /// Outstanding RDMA READ/atomic operations per device as a responder.
    pub(crate) max_res_rd_atom: u32,
    /// Largest number of SRQs.
    pub(crate) max_srq: u32,
    /// Largest number of WRs per SRQ.
    pub(crate) max_srq_wr: u32,
    /// Largest number of SGEs per SRQ WR.
    pub(crate) max_srq_sge: u32,
    /// Largest number of AHs.
    pub(crate) max_ah: u32,
    /// Largest page list of a fast-registration WR.
    pub(crate) max_fast_reg_page_list_len: u32,
    /// Number of P_Keys.
    pub(crate) max_pkeys: u16,
    /// Local CA ACK delay (IBTA 4.1.1), as the exponent of 4.096 us.
    pub(crate) local_ca_ack_delay: u8,
    /// Atomic operations are atomic with respect to the whole HCA.
    pub(crate) atomic_hca: bool,
}

/// Number of device counters (`METAROCE_NUM_COUNTERS`).
pub(crate) const NUM_COUNTERS: usize = b::metaroce_counter_METAROCE_NUM_COUNTERS as usize;

/// Indices of the device counters (`enum metaroce_counter`).
pub(crate) mod counter {
    use super::b;
    pub(crate) const TX_PACKETS: usize = b::metaroce_counter_METAROCE_CNT_TX_PACKETS as usize;
    pub(crate) const RX_PACKETS: usize = b::metaroce_counter_METAROCE_CNT_RX_PACKETS as usize;
    pub(crate) const RX_DROPS: usize = b::metaroce_counter_METAROCE_CNT_RX_DROPS as usize;
    pub(crate) const RETRANSMITS: usize = b::metaroce_counter_METAROCE_CNT_RETRANSMITS as usize;
    pub(crate) const TIMEOUTS: usize = b::metaroce_counter_METAROCE_CNT_TIMEOUTS as usize;
    pub(crate) const PATH_MOVES: usize = b::metaroce_counter_METAROCE_CNT_PATH_MOVES as usize;
    pub(crate) const DUPLICATES: usize = b::metaroce_counter_METAROCE_CNT_DUPLICATES as usize;
    pub(crate) const ECN_CE: usize = b::metaroce_counter_METAROCE_CNT_ECN_CE as usize;
    pub(crate) const UNKNOWN_QPN: usize = b::metaroce_counter_METAROCE_CNT_UNKNOWN_QPN as usize;
    pub(crate) const TX_BYTES: usize = b::metaroce_counter_METAROCE_CNT_TX_BYTES as usize;
    pub(crate) const RX_BYTES: usize = b::metaroce_counter_METAROCE_CNT_RX_BYTES as usize;
    pub(crate) const SACK_LOSSES: usize = b::metaroce_counter_METAROCE_CNT_SACK_LOSSES as usize;
    pub(crate) const ECN_ECHOED: usize = b::metaroce_counter_METAROCE_CNT_ECN_ECHOED as usize;
    /// The first drop-by-reason counter: `DROP_FIRST + reason as usize` for
    /// each of the protocol core's `DropReason`s.
    pub(crate) const DROP_FIRST: usize = b::metaroce_counter_METAROCE_CNT_DROP_FIRST as usize;
    /// How many drop reasons the C table names.
    pub(crate) const NUM_DROP_REASONS: usize =
        b::metaroce_counter_METAROCE_NUM_DROP_REASONS as usize;
}

/// SRQ sizes (`struct ib_srq_attr`).
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct SrqAttr {
    pub(crate) max_wr: u32,
    pub(crate) max_sge: u32,
    pub(crate) srq_limit: u32,
}

/// Port attributes chosen by the driver (`struct ib_port_attr`); state, MTU,
/// speed and link layer come from the netdev.
#[derive(Clone, Copy)]
pub(crate) struct PortAttrs {
    /// GID table length (RoCE v2 GIDs are filled in by the RDMA core).
    pub(crate) gid_tbl_len: u32,
    /// `IB_PORT_*` capability mask bits.
    pub(crate) port_cap_flags: u32,
    /// Largest message, in bytes.
    pub(crate) max_msg_sz: u32,
    /// Bytes of headers the transport adds below the IB payload on the wire;
    /// the active MTU is the largest IB MTU that fits the netdev MTU after them.
    pub(crate) wire_overhead: u32,
}

/// A software RDMA driver whose devices are created by `rdma link add`.
///
/// Verbs objects: the RDMA core allocates CQs and QPs with room for the
/// driver's `Cq` / `Qp` value (`INIT_RDMA_OBJ_SIZE`); MRs are allocated here.
/// Each `create_*` returns the value to keep, each `destroy_*` is called with
/// it before it is dropped. Verbs come from user space (the rxe ABI's shared
/// rings) and from kernel consumers (ib_mad's GSI QP, ib_cm, rdma_cm …): for
/// those, objects have no user context (`uc` is `None`), rings live in kernel
/// memory and `ib_post_*` / `ib_poll_cq` write and read them.
pub(crate) trait Driver: 'static {
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
    /// Creates the driver data of a new device on `netdev`.
    fn new_device(shared: &Arc<Self::Shared>, netdev: &NetDev) -> Result<Self::Data>;
    /// The device's attributes.
    fn device_attrs(data: &Self::Data) -> DeviceAttrs;
    /// Port 1's attributes.
    fn port_attrs(data: &Self::Data) -> PortAttrs;

    /// `create_cq` (IBTA 11.2.7.1) for user space: a CQ of at least `cqe`
    /// entries; returns it and where its ring is mapped.
    fn create_cq(
        dev: &Self::Data,
        cqe: u32,
        uc: Option<&UContext>,
        events: CqEvents,
    ) -> Result<(Self::Cq, MmInfo)>;
    /// `destroy_cq`: no completion may be written after this returns.
    fn destroy_cq(dev: &Self::Data, cq: &Self::Cq);
    /// `resize_cq` (IBTA 11.2.7.3): at least `cqe` entries, keeping those
    /// waiting; returns where the new ring is mapped.
    fn resize_cq(
        dev: &Self::Data,
        cq: &Self::Cq,
        cqe: u32,
        uc: Option<&UContext>,
    ) -> Result<MmInfo>;
    /// How many completions `cq` holds (its ring may be larger than asked
    /// for): what `ib_cq.cqe`, and so `ibv_create_cq`, reports, as rxe does.
    fn cq_capacity(cq: &Self::Cq) -> u32;
    /// `poll_cq` of a kernel CQ: hands up to `max` completions to `f` as
    /// kernel CQ slots ([`Wc::KERNEL_SIZE`] bytes); returns how many.
    fn poll_cq(cq: &Self::Cq, max: usize, f: &mut dyn FnMut(&[u8; Wc::KERNEL_SIZE])) -> usize;
    /// `create_ah` (IBTA 11.2.2.1) on `pd`; returns it and its number (the
    /// rxe ABI's `ah_num`, by which UD work requests name it).
    /// `sleepable`: the caller may sleep (`RDMA_CREATE_AH_SLEEPABLE`; ib_cm
    /// creates AHs under a spinlock with interrupts off, so allocate with
    /// `GFP_ATOMIC` otherwise).
    fn create_ah(dev: &Self::Data, pd: usize, av: &Av, sleepable: bool) -> Result<(Self::Ah, u32)>;
    /// `destroy_ah`.
    fn destroy_ah(dev: &Self::Data, ah: &Self::Ah);
    /// The number a UD work request names `ah` by.
    fn ah_num(ah: &Self::Ah) -> u32;
    /// `create_srq` (IBTA 11.2.3.1) for user space: `attr` is updated to the
    /// sizes granted; returns the SRQ, its number and where its ring is
    /// mapped.
    fn create_srq(
        dev: &Self::Data,
        pd: usize,
        attr: &mut SrqAttr,
        uc: Option<&UContext>,
        events: SrqEvents,
    ) -> Result<(Self::Srq, u32, MmInfo)>;
    /// Kernel `post_srq_recv`.
    fn post_srq_recv(dev: &Self::Data, srq: &Self::Srq, wrs: &mut RecvWrs) -> Result;
    /// `modify_srq`: `IB_SRQ_MAX_WR` and/or `IB_SRQ_LIMIT` of `mask`.
    fn modify_srq(dev: &Self::Data, srq: &Self::Srq, attr: &SrqAttr, mask: u32) -> Result;
    /// `query_srq`.
    fn query_srq(srq: &Self::Srq) -> SrqAttr;
    /// `destroy_srq`.
    fn destroy_srq(dev: &Self::Data, srq: &Self::Srq);
    /// `alloc_mw` (IBTA 11.2.10.1) of type 1 or 2 on `pd`; returns it and
    /// its initial rkey.
    fn alloc_mw(dev: &Self::Data, pd: usize, mw_type: u32) -> Result<(Self::Mw, u32)>;
    /// `dealloc_mw`.
    fn dealloc_mw(dev: &Self::Data, mw: &Self::Mw);
    /// The device's counters, in `enum metaroce_counter` order
    /// (`rdma statistic show link DEV/1`).
    fn counters(dev: &Self::Data) -> [u64; NUM_COUNTERS];
    /// `req_notify_cq`: arm for the next (or next solicited) completion;
    /// returns whether completions are already waiting (for
    /// `IB_CQ_REPORT_MISSED_EVENTS`).
    fn req_notify_cq(cq: &Self::Cq, solicited_only: bool) -> bool;
    /// `create_qp`: returns the QP, its QPN and where its RQ and SQ rings
    /// are mapped (user QPs); updates `init.caps` to the sizes granted.
    /// `handle` is what the QP's kernel completions name; `events` raises
    /// its asynchronous events.
    #[allow(clippy::too_many_arguments)]
    fn create_qp(
        dev: &Self::Data,
        pd: usize,
        init: &mut QpInit,
        scq: &Self::Cq,
        rcq: &Self::Cq,
        srq: Option<&Self::Srq>,
        uc: Option<&UContext>,
        handle: QpHandle,
        events: QpEvents,
    ) -> Result<(Self::Qp, u32, MmInfo, MmInfo)>;
    /// `modify_qp` (IBTA 11.2.5.2).
    fn modify_qp(dev: &Self::Data, qp: &Self::Qp, attr: &QpAttr) -> Result;
    /// `query_qp` (IBTA 11.2.5.3).
    fn query_qp(qp: &Self::Qp, attr: &mut QpAttr, init: &mut QpInit);
    /// `destroy_qp`: flushes and detaches; no completion for it afterwards.
    fn destroy_qp(dev: &Self::Data, qp: &Self::Qp);
    /// The user SQ doorbell (`post_send` with no work requests).
    fn post_send(dev: &Self::Data, qp: &Self::Qp) -> Result;
    /// Kernel `post_send`: the requests of `wrs`, in order.
    fn post_send_wrs(dev: &Self::Data, qp: &Self::Qp, wrs: &mut SendWrs) -> Result;
    /// Kernel `post_recv`.
    fn post_recv_wrs(dev: &Self::Data, qp: &Self::Qp, wrs: &mut RecvWrs) -> Result;
    /// `alloc_mr` (`IB_MR_TYPE_MEM_REG`): a free fast-registration MR of
    /// kernel PD `pd` for up to `max_pages` pages; returns it with its key.
    fn alloc_mr(dev: &Self::Data, pd: usize, max_pages: u32) -> Result<(Self::Mr, u32)>;
    /// `map_mr_sg`: installs the page list `pages` (kernel virtual
    /// addresses, `page_size` each) of a fast-registration MR, the region
    /// starting at `iova` and `len` bytes long.
    fn map_mr(
        dev: &Self::Data,
        mr: &Self::Mr,
        iova: u64,
        len: u64,
        page_size: u32,
        pages: &[u64],
    ) -> Result;
    /// `get_dma_mr`: the DMA MR of kernel PD `pd` (all kernel memory, by
    /// kernel virtual address); returns it with its lkey and rkey.
    fn get_dma_mr(dev: &Self::Data, pd: usize, access: u32) -> Result<(Self::Mr, u32, u32)>;
    /// `reg_user_mr`: an MR over pinned user memory `mem`, addressed by
    /// remote peers from `iova`; returns it with its lkey and rkey.
    fn reg_user_mr(
        dev: &Self::Data,
        pd: usize,
        mem: Mem,
        iova: u64,
        access: u32,
    ) -> Result<(Self::Mr, u32, u32)>;
    /// `dereg_mr`: after `Ok` the memory is no longer accessed and `mr` is
    /// dropped; after an error (`EINVAL`: a memory window is still bound to
    /// it, IBTA 10.6.7.2.6) the MR stays registered.
    fn dereg_mr(dev: &Self::Data, mr: &Self::Mr) -> Result;
}

/// A network device, borrowed for the duration of a callback.
///
/// # Invariants
///
/// The pointer is valid, and the netdev registered, while the borrow lives.
pub(crate) struct NetDev(*mut b::net_device);

impl NetDev {
    /// The interface name (`eth1`).
    pub(crate) fn name(&self) -> &CStr {
        // SAFETY: by the type invariant the netdev is valid; `name` is a
        // NUL-terminated array that lives as long as the netdev.
        unsafe { CStr::from_char_ptr((*self.0).name.as_ptr()) }
    }

    /// The interface index.
    pub(crate) fn ifindex(&self) -> i32 {
        // SAFETY: by the type invariant the netdev is valid.
        unsafe { (*self.0).ifindex }
    }

    /// The MTU, in bytes.
    pub(crate) fn mtu(&self) -> u32 {
        // SAFETY: by the type invariant the netdev is valid.
        unsafe { (*self.0).mtu }
    }

    /// The 6-byte Ethernet address, or zeros if the netdev has none.
    pub(crate) fn mac(&self) -> [u8; 6] {
        let mut mac = [0u8; 6];
        // SAFETY: by the type invariant the netdev is valid; `dev_addr` points
        // to `addr_len` bytes, and only 6 are read when there are at least 6.
        unsafe {
            let d = &*self.0;
            if !d.dev_addr.is_null() && d.addr_len >= 6 {
                ptr::copy_nonoverlapping(d.dev_addr, mac.as_mut_ptr(), 6);
            }
        }
        mac
    }

    /// Administratively up and with carrier: the port is usable.
    pub(crate) fn is_up(&self) -> bool {
        // SAFETY: by the type invariant the netdev is valid.
        unsafe { b::metaroce_netif_running(self.0) && b::metaroce_netif_carrier_ok(self.0) }
    }
}

/// The node GUID of a device on an Ethernet netdev: the EUI-64 made from its
/// MAC address (RFC 4291 appendix A), as rxe derives it, in network order.
pub(crate) fn eui64_from_mac(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

/// The largest IB MTU (IBTA 9.4: 256 … 4096 bytes) whose payload fits a
/// netdev MTU after `overhead` bytes of headers; `None` if not even 256 fits.
pub(crate) fn ib_mtu_for(netdev_mtu: u32, overhead: u32) -> Option<(u32, u32)> {
    let room = netdev_mtu.checked_sub(overhead)?;
    // (enum ib_mtu value, bytes)
    [(5, 4096), (4, 2048), (3, 1024), (2, 512), (1, 256)]
        .into_iter()
        .find(|&(_, bytes)| bytes <= room)
}

/// A driver device: the RDMA core's `ib_device` with the driver's data.
#[repr(C)]
struct DeviceBox<D> {
    ib: b::ib_device,
    /// The netdev of port 1, held (`dev_hold`) from `newlink` to
    /// `dealloc_driver`.
    netdev: *mut b::net_device,
    data: D,
}

/// One device on the registry's list.
#[derive(Clone, Copy, PartialEq)]
struct Entry {
    ib: *mut b::ib_device,
    netdev: *mut b::net_device,
}

// SAFETY: `Entry` holds addresses only; they are dereferenced under the rules
// of the RDMA core (a reference taken with `ib_device_try_get`), never because
// the entry moved between threads.
unsafe impl Send for Entry {}

/// Most devices one module instance runs at once.
pub(crate) const MAX_DEVICES: usize = 64;

/// The state behind a [`Registration`], at a fixed address.
#[pin_data]
struct Registry {
    #[pin]
    devices: Mutex<[Option<Entry>; MAX_DEVICES]>,
    #[pin]
    link_ops: Opaque<b::rdma_link_ops>,
    #[pin]
    notifier: Opaque<b::notifier_block>,
    /// `Adapter::<T>::newlink`, so the non-generic C callback can reach `T`.
    newlink: fn(&Registry, &CStr, &NetDev) -> Result,
    /// `Arc::into_raw` of the driver's `Arc<T::Shared>`, released by `Drop`.
    shared: *const c_void,
    owner: *mut b::module,
    /// Set by `Drop` before it unregisters the netdev notifier.
    unloading: AtomicBool,
}

// SAFETY: the raw pointers are the C registration records, which the RDMA core
// and the netdev notifier chain access under their own locks, and the module
// pointer, which is immutable.
unsafe impl Send for Registry {}
// SAFETY: see `Send`; the device list is behind a mutex.
unsafe impl Sync for Registry {}

/// The one live registry, for the `newlink` callback (see the invariants).
static REGISTRY: AtomicPtr<Registry> = AtomicPtr::new(ptr::null_mut());

/// Registration of a software RDMA driver: link type, netdev notifier, and the
/// devices it creates. Dropping it removes every device.
pub(crate) struct Registration<T: Driver> {
    registry: Pin<KBox<Registry>>,
    _t: PhantomData<T>,
}

impl<T: Driver> Registration<T> {
    /// Registers the link type `T::LINK_TYPE` and starts following netdevs.
    ///
    /// Returns `EBUSY` if another registration is live.
    pub(crate) fn new(module: &'static ThisModule, shared: Arc<T::Shared>) -> Result<Self> {
        let registry = KBox::pin_init(
            pin_init!(Registry {
                devices <- kernel::new_mutex!([None; MAX_DEVICES]),
                link_ops: Opaque::uninit(),
                notifier: Opaque::uninit(),
                newlink: Adapter::<T>::newlink,
                shared: Arc::into_raw(shared).cast(),
                owner: module.as_ptr().cast(),
                unloading: AtomicBool::new(false),
            }),
            GFP_KERNEL,
        )?;
        let reg_ptr = ptr::from_ref::<Registry>(&registry).cast_mut();
        if REGISTRY
            .compare_exchange(
                ptr::null_mut(),
                reg_ptr,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            return Err(EBUSY);
        }
        // SAFETY: `link_ops` and `notifier` are pinned in `registry` and live
        // until `Drop`, which unregisters both before freeing them. The zeroed
        // records are valid initial states for both C structures.
        unsafe {
            let ops = registry.link_ops.get();
            ptr::write(ops, core::mem::zeroed());
            (*ops).type_ = T::LINK_TYPE.as_char_ptr();
            (*ops).newlink = Some(newlink_callback);
            b::rdma_link_register(ops);

            let nb = registry.notifier.get();
            ptr::write(nb, core::mem::zeroed());
            (*nb).notifier_call = Some(netdev_event_callback);
            let ret = b::register_netdevice_notifier(nb);
            if ret != 0 {
                b::rdma_link_unregister(ops);
                REGISTRY.store(ptr::null_mut(), Ordering::Release);
                return Err(Error::from_errno(ret));
            }
        }
        Ok(Self {
            registry,
            _t: PhantomData,
        })
    }

    /// Number of devices currently on the list.
    pub(crate) fn device_count(&self) -> usize {
        self.registry.devices.lock().iter().flatten().count()
    }
}

impl<T: Driver> Drop for Registration<T> {
    fn drop(&mut self) {
        let reg = &*self.registry;
        // Unregistering the notifier replays DOWN/UNREGISTER for every netdev:
        // ignore them, the devices are removed below.
        reg.unloading.store(true, Ordering::Release);
        // SAFETY: both records were registered in `new`. After these return no
        // `newlink` runs (the core holds its link-ops lock across the call) and
        // no netdev event is delivered.
        unsafe {
            b::rdma_link_unregister(reg.link_ops.get());
            b::unregister_netdevice_notifier(reg.notifier.get());
        }
        // Remove every device. `ib_unregister_device` takes the core's
        // per-device unregistration lock, so for a device someone else is
        // already removing (rdma link delete, NETDEV_UNREGISTER work) it waits
        // until that removal, our `dealloc_driver` included, has returned. The
        // `struct device` reference keeps the memory alive across the call.
        loop {
            let next = {
                let devices = reg.devices.lock();
                devices.iter().flatten().next().map(|e| {
                    // SAFETY: listed devices are alive until `dealloc_driver`
                    // unlists them, which needs the lock we hold.
                    unsafe { b::get_device(ptr::addr_of_mut!((*e.ib).__bindgen_anon_1.dev)) };
                    e.ib
                })
            };
            let Some(ib) = next else { break };
            // (`__bindgen_anon_1.dev` is the `struct device` of the C union
            // `{ struct device dev; struct ib_core_device coredev; }`.)
            // SAFETY: `ib` is a registered device (no `newlink` can run any
            // more) whose memory our `get_device` reference keeps.
            unsafe {
                b::ib_unregister_device(ib);
                b::put_device(ptr::addr_of_mut!((*ib).__bindgen_anon_1.dev));
            }
        }
        REGISTRY.store(ptr::null_mut(), Ordering::Release);
        // SAFETY: from `Arc::into_raw` in `new`; every device is gone, and
        // with them every borrow of it.
        drop(unsafe { Arc::from_raw(reg.shared.cast::<T::Shared>()) });
    }
}

/// `rdma_link_ops.newlink`: `rdma link add NAME type TYPE netdev DEV`.
///
/// # Safety
///
/// Called by the RDMA core with a valid name and a held netdev reference.
unsafe extern "C" fn newlink_callback(name: *const c_char, ndev: *mut b::net_device) -> c_int {
    from_result(|| {
        let reg = REGISTRY.load(Ordering::Acquire);
        if reg.is_null() {
            return Err(ENODEV);
        }
        // SAFETY: `REGISTRY` is only non-null while the registry lives, and
        // `Drop` unregisters the link ops (waiting for this call) first.
        let reg = unsafe { &*reg };
        // SAFETY: the core passes a NUL-terminated name and a netdev it holds
        // for the duration of the call.
        let (name, netdev) = unsafe { (CStr::from_char_ptr(name), NetDev(ndev)) };
        (reg.newlink)(reg, name, &netdev)?;
        Ok(0)
    })
}

/// The netdev notifier: ports follow their netdev.
///
/// # Safety
///
/// Called by the netdev notifier chain with our `notifier_block` and a
/// `netdev_notifier_info`.
unsafe extern "C" fn netdev_event_callback(
    nb: *mut b::notifier_block,
    event: c_ulong,
    ptr: *mut c_void,
) -> c_int {
    // SAFETY: `nb` is the `notifier` field of a pinned `Registry`, which
    // unregisters it before it is freed; `Opaque` is `repr(transparent)`.
    let reg = unsafe {
        &*kernel::container_of!(nb.cast::<Opaque<b::notifier_block>>(), Registry, notifier)
    };
    if reg.unloading.load(Ordering::Acquire) {
        return b::NOTIFY_DONE as c_int;
    }
    // SAFETY: the chain passes a `netdev_notifier_info` for netdev events.
    let ndev = unsafe { b::metaroce_netdev_notifier_info_to_dev(ptr) };
    let event = event as u32;

    // Find our device on this netdev and take a reference to it.
    let mut found = None;
    for e in reg.devices.lock().iter().flatten() {
        // SAFETY: listed devices are alive while we hold the list lock.
        if e.netdev == ndev && unsafe { b::metaroce_ib_device_try_get(e.ib) } {
            found = Some(e.ib);
            break;
        }
    }
    let Some(ib) = found else {
        return b::NOTIFY_DONE as c_int;
    };

    // SAFETY: we hold a reference on `ib` until the `ib_device_put` below.
    unsafe {
        match event {
            b::netdev_cmd_NETDEV_UNREGISTER => b::ib_unregister_device_queued(ib),
            b::netdev_cmd_NETDEV_UP | b::netdev_cmd_NETDEV_DOWN | b::netdev_cmd_NETDEV_CHANGE => {
                let up = NetDev(ndev).is_up();
                let mut ev: b::ib_event = core::mem::zeroed();
                ev.device = ib;
                ev.element.port_num = 1;
                ev.event = if up {
                    b::ib_event_type_IB_EVENT_PORT_ACTIVE
                } else {
                    b::ib_event_type_IB_EVENT_PORT_ERR
                };
                b::ib_dispatch_event(&ev);
            }
            _ => {}
        }
        b::ib_device_put(ib);
    }
    b::NOTIFY_DONE as c_int
}

/// The `ib_device_ops` callbacks of driver `T`.
struct Adapter<T: Driver>(PhantomData<T>);

impl<T: Driver> Adapter<T> {
    /// Creates, lists and registers a device named `name` on `netdev`.
    fn newlink(reg: &Registry, name: &CStr, netdev: &NetDev) -> Result {
        // SAFETY: `reg.shared` came from `Arc::<T::Shared>::into_raw` and is
        // released only after every device is gone. `ManuallyDrop`: this
        // borrows the registry's reference.
        let shared =
            core::mem::ManuallyDrop::new(unsafe { Arc::from_raw(reg.shared.cast::<T::Shared>()) });
        let data = T::new_device(&shared, netdev)?;

        // SAFETY: `_ib_alloc_device` returns a zeroed, initialised `ib_device`
        // at the start of an allocation of the size asked for, or null.
        let ib = unsafe { b::_ib_alloc_device(size_of::<DeviceBox<T::Data>>()) };
        if ib.is_null() {
            return Err(ENOMEM);
        }
        let dbox = ib.cast::<DeviceBox<T::Data>>();
        // SAFETY: `ib` is a fresh allocation large enough for a `DeviceBox`,
        // with `ib_device` at offset 0 (`repr(C)`); nobody else sees it yet.
        unsafe {
            ptr::write(ptr::addr_of_mut!((*dbox).data), data);
            b::metaroce_dev_hold(netdev.0);
            ptr::write(ptr::addr_of_mut!((*dbox).netdev), netdev.0);
            let dev = &mut *ib;
            dev.node_type = b::RDMA_NODE_IB_CA as u8;
            dev.phys_port_cnt = 1;
            dev.num_comp_vectors = b::metaroce_num_possible_cpus() as c_int;
            dev.local_dma_lkey = 0;
            dev.node_guid = u64::from_ne_bytes(eui64_from_mac(netdev.mac()));
            // The user-space SQ doorbell and CQ arming are plain commands
            // (the core enables the rest by default), as for rxe.
            dev.uverbs_cmd_mask |= 1u64 << b::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND
                | 1u64 << b::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ;
            let desc = T::NODE_DESC.as_bytes_with_nul();
            let n = desc.len().min(dev.node_desc.len());
            ptr::copy_nonoverlapping(
                desc.as_ptr().cast::<c_char>(),
                dev.node_desc.as_mut_ptr(),
                n,
            );
        }
        let ops = Self::ops(reg.owner);
        // SAFETY: `ib` is valid; `ib_set_device_ops` copies the table.
        unsafe { b::ib_set_device_ops(ib, &ops) };

        // Check for a device on this netdev and take a slot in one critical
        // section: concurrent `rdma link add`s must not both succeed.
        let listed = {
            let mut devices = reg.devices.lock();
            if devices.iter().flatten().any(|e| e.netdev == netdev.0) {
                Err(EEXIST)
            } else if let Some(slot) = devices.iter_mut().find(|slot| slot.is_none()) {
                *slot = Some(Entry {
                    ib,
                    netdev: netdev.0,
                });
                Ok(())
            } else {
                Err(ENOSPC)
            }
        };
        if let Err(e) = listed {
            if e == EEXIST {
                pr_err!(
                    "a {} device already runs on {}\n",
                    T::LINK_TYPE,
                    netdev.name()
                );
            } else {
                pr_err!("{}: no room: {} devices at most\n", name, MAX_DEVICES);
            }
            // SAFETY: not registered: the error unwind is ours; it calls our
            // `dealloc_driver`, which drops the data and the netdev reference.
            unsafe { b::ib_dealloc_device(ib) };
            return Err(e);
        }
        // SAFETY: `ib` is valid and not yet registered; `name` is a C string.
        // The netdev is reached through `get_netdev` (see the module docs).
        let ret = unsafe { b::ib_register_device(ib, name.as_char_ptr(), ptr::null_mut()) };
        if ret != 0 {
            pr_err!(
                "registering {} on {} failed: {}\n",
                name,
                netdev.name(),
                ret
            );
            // SAFETY: registration failed: the driver deallocates; our
            // `dealloc_driver` drops the data and unlists the device.
            unsafe { b::ib_dealloc_device(ib) };
            return to_result(ret);
        }
        // A netdev that began to unregister before the device was registered
        // sent its NETDEV_UNREGISTER while the device could not be found: undo.
        // SAFETY: the netdev is held by the caller.
        if !unsafe { b::metaroce_netdev_is_registered(netdev.0) } {
            // SAFETY: `ib` is registered and nobody else removes it: a
            // NETDEV_UNREGISTER for this netdev has already been delivered.
            unsafe { b::ib_unregister_device(ib) };
            return Err(ENODEV);
        }
        pr_info!(
            "{}: added on {} (mtu {})\n",
            name,
            netdev.name(),
            netdev.mtu()
        );
        Ok(())
    }

    /// The callback table, copied into each device by `ib_set_device_ops`.
    fn ops(owner: *mut b::module) -> b::ib_device_ops {
        // SAFETY: `ib_device_ops` is plain data: all-zero is "no callbacks".
        let mut ops: b::ib_device_ops = unsafe { core::mem::zeroed() };
        ops.owner = owner;
        ops.driver_id = b::rdma_driver_id_RDMA_DRIVER_RXE;
        ops.uverbs_abi_ver = b::METAROCE_UVERBS_ABI_VERSION;
        ops.query_device = Some(Self::query_device);
        ops.query_port = Some(Self::query_port);
        ops.get_port_immutable = Some(Self::get_port_immutable);
        ops.query_pkey = Some(Self::query_pkey);
        ops.get_link_layer = Some(Self::get_link_layer);
        ops.get_netdev = Some(Self::get_netdev);
        ops.alloc_ucontext = Some(Self::alloc_ucontext);
        ops.dealloc_ucontext = Some(Self::dealloc_ucontext);
        ops.disassociate_ucontext = Some(Self::disassociate_ucontext);
        ops.alloc_pd = Some(Self::alloc_pd);
        ops.dealloc_pd = Some(Self::dealloc_pd);
        ops.dealloc_driver = Some(Self::dealloc_driver);
        ops.mmap = Some(verbs::mmap);
        ops.mmap_free = Some(verbs::mmap_free);
        ops.create_cq = Some(Self::create_cq);
        ops.destroy_cq = Some(Self::destroy_cq);
        ops.req_notify_cq = Some(Self::req_notify_cq);
        ops.resize_cq = Some(Self::resize_cq);
        ops.create_ah = Some(Self::create_ah);
        ops.create_user_ah = Some(Self::create_ah);
        ops.destroy_ah = Some(Self::destroy_ah);
        ops.size_ib_ah = size_of::<Obj<b::ib_ah, T::Ah>>();
        ops.alloc_hw_port_stats = Some(b::metaroce_alloc_hw_port_stats);
        ops.alloc_mw = Some(Self::alloc_mw);
        ops.dealloc_mw = Some(Self::dealloc_mw);
        ops.size_ib_mw = size_of::<Obj<b::ib_mw, T::Mw>>();
        ops.get_hw_stats = Some(Self::get_hw_stats);
        ops.create_srq = Some(Self::create_srq);
        ops.modify_srq = Some(Self::modify_srq);
        ops.query_srq = Some(Self::query_srq);
        ops.destroy_srq = Some(Self::destroy_srq);
        ops.post_srq_recv = Some(Self::post_srq_recv);
        ops.size_ib_srq = size_of::<Obj<b::ib_srq, SrqData<T::Srq>>>();
        ops.poll_cq = Some(Self::poll_cq);
        ops.create_qp = Some(Self::create_qp);
        ops.modify_qp = Some(Self::modify_qp);
        ops.query_qp = Some(Self::query_qp);
        ops.destroy_qp = Some(Self::destroy_qp);
        ops.post_send = Some(Self::post_send);
        ops.post_recv = Some(Self::post_recv);
        ops.reg_user_mr = Some(Self::reg_user_mr);
        ops.get_dma_mr = Some(Self::get_dma_mr);
        ops.alloc_mr = Some(Self::alloc_mr);
        ops.map_mr_sg = Some(Self::map_mr_sg);
        ops.dereg_mr = Some(Self::dereg_mr);
        ops.size_ib_pd = size_of::<b::ib_pd>();
        ops.size_ib_ucontext = size_of::<b::ib_ucontext>();
        ops.size_ib_cq = size_of::<Obj<b::ib_cq, CqData<T::Cq>>>();
        ops.size_ib_qp = size_of::<Obj<b::ib_qp, QpData<T::Qp>>>();
        ops
    }

    /// The driver data of a device created by `newlink`.
    ///
    /// # Safety
    ///
    /// `ib` is a live device created by [`Self::newlink`].
    unsafe fn data<'a>(ib: *mut b::ib_device) -> &'a T::Data {
        // SAFETY: by the caller's guarantee `ib` starts a `DeviceBox`.
        unsafe { &(*ib.cast::<DeviceBox<T::Data>>()).data }
    }

    /// The device's netdev, held for as long as the returned guard lives.
    ///
    /// # Safety
    ///
    /// `ib` is a live device.
    unsafe fn netdev(ib: *mut b::ib_device) -> Option<HeldNetDev> {
        // SAFETY: `ib` is live; the core returns a held netdev or null.
        let nd = unsafe { b::ib_device_get_netdev(ib, 1) };
        (!nd.is_null()).then_some(HeldNetDev(NetDev(nd)))
    }

    /// `ib_device_ops.query_device`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, with a live device created by
    /// [`Self::newlink`] and pointers valid for the call.
    unsafe extern "C" fn query_device(
        ib: *mut b::ib_device,
        attr: *mut b::ib_device_attr,
        udata: *mut b::ib_udata,
    ) -> c_int {
        // SAFETY: the core passes a live device, an attribute buffer, and a
        // udata that is either null (kernel caller) or valid.
        unsafe {
            if !udata.is_null() && ((*udata).inlen != 0 || (*udata).outlen != 0) {
                return EINVAL.to_errno();
            }
            let a = T::device_attrs(Self::data(ib));
            let out = &mut *attr;
            *out = core::mem::zeroed();
            out.fw_ver = 0;
            out.sys_image_guid = (*ib).node_guid;
            out.max_mr_size = a.max_mr_size;
            out.page_size_cap = a.page_size_cap;
            out.vendor_id = a.vendor_id;
            out.device_cap_flags = a.device_cap_flags;
            out.kernel_cap_flags = b::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG as u64;
            out.max_qp = a.max_qp as c_int;
            out.max_qp_wr = a.max_qp_wr as c_int;
            out.max_send_sge = a.max_send_sge as c_int;
            out.max_recv_sge = a.max_recv_sge as c_int;
            out.max_sge_rd = a.max_sge_rd as c_int;
            out.max_cq = a.max_cq as c_int;
            out.max_cqe = a.max_cqe as c_int;
            out.max_mr = a.max_mr as c_int;
            out.max_mw = a.max_mw as c_int;
            out.max_pd = a.max_pd as c_int;
            out.max_qp_rd_atom = a.max_qp_rd_atom as c_int;
            out.max_qp_init_rd_atom = a.max_qp_init_rd_atom as c_int;
            out.max_res_rd_atom = a.max_res_rd_atom as c_int;
            out.max_srq = a.max_srq as c_int;
            out.max_srq_wr = a.max_srq_wr as c_int;
            out.max_srq_sge = a.max_srq_sge as c_int;
            out.max_ah = a.max_ah as c_int;
            out.max_fast_reg_page_list_len = a.max_fast_reg_page_list_len;
            out.max_pkeys = a.max_pkeys;
            out.local_ca_ack_delay = a.local_ca_ack_delay;
            out.atomic_cap = if a.atomic_hca {
                b::ib_atomic_cap_IB_ATOMIC_HCA
            } else {
                b::ib_atomic_cap_IB_ATOMIC_NONE
            };
        }
        0
    }

    /// `ib_device_ops.query_port`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, with a live device created by
    /// [`Self::newlink`] and pointers valid for the call.
    unsafe extern "C" fn query_port(
        ib: *mut b::ib_device,
        port: u32,
        attr: *mut b::ib_port_attr,
    ) -> c_int {
        if port != 1 {
            return EINVAL.to_errno();
        }
        // SAFETY: the core passes a live device and an attribute buffer.
        unsafe {
            let p = T::port_attrs(Self::data(ib));
            let out = &mut *attr;
            *out = core::mem::zeroed();
            out.gid_tbl_len = p.gid_tbl_len as c_int;
            out.port_cap_flags = p.port_cap_flags;
            out.max_msg_sz = p.max_msg_sz;
            out.pkey_tbl_len = 1;
            out.max_vl_num = 1;
            out.max_mtu = b::ib_mtu_IB_MTU_4096;
            out.active_mtu = b::ib_mtu_IB_MTU_256;
            out.state = b::ib_port_state_IB_PORT_DOWN;
            out.phys_state = b::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED as u8;
            if let Some(nd) = Self::netdev(ib) {
                out.phys_mtu = nd.0.mtu();
                if let Some((mtu, _)) = ib_mtu_for(nd.0.mtu(), p.wire_overhead) {
                    out.active_mtu = mtu;
                }
                if nd.0.is_up() {
                    out.state = b::ib_port_state_IB_PORT_ACTIVE;
                    out.phys_state = b::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP as u8;
                }
            }
            // A netdev on its way out answers ethtool with ENODEV: report the
            // slowest link (SDR, 1X) for the port, which is DOWN by then,
            // rather than failing the whole query (and the core's cache update).
            if b::ib_get_eth_speed(ib, port, &mut out.active_speed, &mut out.active_width) != 0 {
                out.active_speed = b::ib_port_speed_IB_SPEED_SDR as u16;
                out.active_width = b::ib_port_width_IB_WIDTH_1X as u8;
            }
        }
        0
    }

    /// `ib_device_ops.get_port_immutable`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, with a live device created by
    /// [`Self::newlink`] and pointers valid for the call.
    unsafe extern "C" fn get_port_immutable(
        ib: *mut b::ib_device,
        port: u32,
        imm: *mut b::ib_port_immutable,
    ) -> c_int {
        if port != 1 {
            return EINVAL.to_errno();
        }
        // SAFETY: the core passes a live device and a buffer to fill.
        unsafe {
            let p = T::port_attrs(Self::data(ib));
            let out = &mut *imm;
            out.core_cap_flags = b::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
            out.pkey_tbl_len = 1;
            out.gid_tbl_len = p.gid_tbl_len as c_int;
            out.max_mad_size = b::IB_MGMT_MAD_SIZE;
        }
        0
    }

    /// `ib_device_ops.query_pkey`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, with a live device created by
    /// [`Self::newlink`] and pointers valid for the call.
    unsafe extern "C" fn query_pkey(
        _ib: *mut b::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> c_int {
        if port != 1 || index != 0 {
            return EINVAL.to_errno();
        }
        // SAFETY: the core passes a valid output pointer.
        unsafe { *pkey = b::IB_DEFAULT_PKEY_FULL as u16 };
        0
    }

    /// `ib_device_ops.get_netdev`: the port's netdev, with a reference for
    /// the caller.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, with a live device created by
    /// [`Self::newlink`].
    unsafe extern "C" fn get_netdev(ib: *mut b::ib_device, port: u32) -> *mut b::net_device {
        if port != 1 {
            return ptr::null_mut();
        }
        // SAFETY: `ib` starts a `DeviceBox` whose `netdev` we hold until
        // `dealloc_driver`; the caller gets its own reference.
        unsafe {
            let nd = (*ib.cast::<DeviceBox<T::Data>>()).netdev;
            b::metaroce_dev_hold(nd);
            nd
        }
    }

    /// `ib_device_ops.get_link_layer`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, with a live device created by
    /// [`Self::newlink`] and pointers valid for the call.
    unsafe extern "C" fn get_link_layer(_ib: *mut b::ib_device, _port: u32) -> b::rdma_link_layer {
        b::rdma_link_layer_IB_LINK_LAYER_ETHERNET
    }

    /// `ib_device_ops.alloc_ucontext`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, with a live device created by
    /// [`Self::newlink`] and pointers valid for the call.
    unsafe extern "C" fn alloc_ucontext(
        _uc: *mut b::ib_ucontext,
        _udata: *mut b::ib_udata,
    ) -> c_int {
        0
    }

    /// `ib_device_ops.dealloc_ucontext`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, with a live device created by
    /// [`Self::newlink`] and pointers valid for the call.
    unsafe extern "C" fn dealloc_ucontext(_uc: *mut b::ib_ucontext) {}

    /// `ib_device_ops.disassociate_ucontext`: a process still has the device
    /// open while the device goes away (`rdma link delete`, its netdev's
    /// removal, `rmmod`, or a move to another network namespace). Nothing to
    /// do: a user context has no driver state, and by the time this is called
    /// the RDMA core has already destroyed every object of the context.
    ///
    /// That this callback exists is what matters. Without it the RDMA core
    /// (`ib_uverbs_remove_one`) waits, uninterruptibly, until every process
    /// has closed the device, and each open uverbs file pins this module.
    /// With it, `ib_uverbs_free_hw_resources` first makes every later command
    /// and `mmap` of those processes fail with `EIO` (it clears the uverbs
    /// device's `ib_dev` and waits for running ones with
    /// `synchronize_srcu`), then `uverbs_destroy_ufile_hw(...,
    /// RDMA_REMOVE_DRIVER_REMOVE)` destroys the remaining objects through the
    /// usual `destroy_qp`, `destroy_cq`, `destroy_srq`, `dereg_mr`, … (in the
    /// same dependency order as when the process closes the device), then
    /// calls this and `dealloc_ucontext`. So the transport is stopped for
    /// each QP exactly as on a normal close: `destroy_qp` removes the QP from
    /// the QPN table (the receive softirq then finds nothing), shuts its
    /// timer down synchronously and marks it dead before its rings go.
    ///
    /// Rings a process still has mapped stay memory-safe without zapping its
    /// mappings. They are `vmalloc_user()` pages mapped by
    /// `remap_vmalloc_range()`, which inserts each page with
    /// `vm_insert_page()`; that takes a page reference per PTE
    /// (`insert_page_into_pte_locked`: `folio_get`). The mmap entries hold no
    /// reference once [`verbs::mmap`] returns (our VMAs are not tracked with
    /// `rdma_umap_priv`, so `uverbs_user_mmap_disassociate` leaves them
    /// alone), so destroying a queue runs [`verbs::mmap_free`] before
    /// `dealloc_ucontext`, and its `vfree()` only drops vmalloc's own
    /// reference (`__free_page`: `put_page_testzero`). The pages stay
    /// allocated until the process unmaps them or exits; the kernel no longer
    /// reaches them (the queue is gone and `vfree` removed the kernel
    /// mapping), so what the process reads or writes there concerns no one
    /// else. The VMA's operations are ib_uverbs' (`rdma_umap_ops`), so none
    /// of this module's code runs for the mapping after it is unloaded.
    ///
    /// Network namespaces: with this callback set, `rdma dev set DEV netns
    /// NS` is allowed once the RDMA subsystem is in exclusive namespace mode
    /// (`ib_device_set_netns_put` refuses it while `ib_devices_shared_netns`,
    /// the default, is set). The core then disables the device, which
    /// disassociates its processes as above, and re-enables it in `NS`; the
    /// netdev and the transport's UDP socket stay where they are.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, with a live user context of a device
    /// created by [`Self::newlink`].
    unsafe extern "C" fn disassociate_ucontext(_uc: *mut b::ib_ucontext) {}

    /// `ib_device_ops.alloc_pd`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, with a live device created by
    /// [`Self::newlink`] and pointers valid for the call.
    unsafe extern "C" fn alloc_pd(_pd: *mut b::ib_pd, _udata: *mut b::ib_udata) -> c_int {
        0
    }

    /// `ib_device_ops.dealloc_pd`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, with a live device created by
    /// [`Self::newlink`] and pointers valid for the call.
    unsafe extern "C" fn dealloc_pd(_pd: *mut b::ib_pd, _udata: *mut b::ib_udata) -> c_int {
        0
    }

    /// Last call for a device: drop the driver data and unlist it. The RDMA
    /// core frees the memory afterwards.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, with a live device created by
    /// [`Self::newlink`].
    unsafe extern "C" fn dealloc_driver(ib: *mut b::ib_device) {
        // SAFETY: `ib` starts a `DeviceBox` whose data and netdev reference
        // were set in `newlink` before any path that reaches
        // `ib_dealloc_device`; nothing uses either after this call.
        unsafe {
            let dbox = ib.cast::<DeviceBox<T::Data>>();
            ptr::drop_in_place(ptr::addr_of_mut!((*dbox).data));
            b::metaroce_dev_put((*dbox).netdev);
        }
        // Unlist last: module exit returns once the list is empty, so nothing
        // of ours may run after this but the return itself.
        let reg = REGISTRY.load(Ordering::Acquire);
        if !reg.is_null() {
            // SAFETY: the registry outlives all its devices (`Drop` waits
            // for the list to empty before clearing `REGISTRY`).
            let reg = unsafe { &*reg };
            for slot in reg.devices.lock().iter_mut() {
                if slot.is_some_and(|e| e.ib == ib) {
                    *slot = None;
                }
            }
        }
    }
}

/// A netdev reference from `ib_device_get_netdev`, released on drop.
struct HeldNetDev(NetDev);

impl Drop for HeldNetDev {
    fn drop(&mut self) {
        // SAFETY: the reference was taken by `ib_device_get_netdev`.
        unsafe { b::metaroce_dev_put(self.0 .0) };
    }
}

/// A verbs object allocated by the RDMA core with room for driver data
/// (`INIT_RDMA_OBJ_SIZE`): the core's structure first, then ours, which is
/// valid once `init` is set (the memory comes zeroed).
#[repr(C)]
struct Obj<I, D> {
    ib: I,
    init: bool,
    data: core::mem::MaybeUninit<D>,
}

impl<I, D> Obj<I, D> {
    /// The driver data of an initialised object.
    ///
    /// # Safety
    ///
    /// `ib` starts a live `Obj<I, D>` whose `init` is set.
    unsafe fn data<'a>(ib: *mut I) -> &'a D {
        // SAFETY: by the caller's guarantee.
        unsafe { (*ib.cast::<Self>()).data.assume_init_ref() }
    }

    /// Stores the driver data of a new object.
    ///
    /// # Safety
    ///
    /// `ib` starts a live, uninitialised `Obj<I, D>`.
    unsafe fn set(ib: *mut I, d: D) {
        // SAFETY: by the caller's guarantee.
        unsafe {
            let o = ib.cast::<Self>();
            (*o).data.write(d);
            (*o).init = true;
        }
    }

    /// Drops the driver data.
    ///
    /// # Safety
    ///
    /// `ib` starts a live `Obj<I, D>` nobody uses any more.
    unsafe fn drop_data(ib: *mut I) {
        // SAFETY: by the caller's guarantee.
        unsafe {
            let o = ib.cast::<Self>();
            if (*o).init {
                (*o).init = false;
                (*o).data.assume_init_drop();
            }
        }
    }
}

/// What a CQ keeps: the driver's CQ and its event source.
struct CqData<C> {
    events: CqEvents,
    cq: C,
}

/// What a QP keeps: the driver's QP and its event source.
struct QpData<Q> {
    events: QpEvents,
    qp: Q,
}

/// What an SRQ keeps: the driver's SRQ and its event source.
struct SrqData<S> {
    events: SrqEvents,
    srq: S,
}

/// An MR: allocated by the driver (the core only frees what it allocates).
/// `pages[..npages]` collects a fast-registration MR's pages during
/// `map_mr_sg` (`max_num_sg` entries; none for other MRs).
#[repr(C)]
struct MrBox<D> {
    ib: b::ib_mr,
    data: D,
    pages: KVec<u64>,
    npages: usize,
}

/// The return of a `post_*` callback: 0, or the errno with `*bad` set to the
/// request that failed.
///
/// # Safety
///
/// `bad` is valid for a write.
unsafe fn post_result<W>(r: Result, bad: *mut *const W, failed: *const W) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            // SAFETY: by the caller's guarantee.
            unsafe { *bad = failed };
            e.to_errno()
        }
    }
}

/// `ERR_PTR(e)`.
fn err_ptr<P>(e: Error) -> *mut P {
    e.to_errno() as isize as *mut P
}

impl<T: Driver> Adapter<T> {
    /// `ib_device_ops.create_cq`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a zeroed CQ object of our size on a
    /// live device, valid attributes and a null or valid attribute bundle.
    unsafe extern "C" fn create_cq(
        ibcq: *mut b::ib_cq,
        attr: *const b::ib_cq_init_attr,
        attrs: *mut b::uverbs_attr_bundle,
    ) -> c_int {
        from_result(|| {
            // `driver_udata` is the first field of the bundle (null for a
            // kernel consumer's CQ).
            let mut udata = UData(if attrs.is_null() {
                ptr::null_mut()
            } else {
                attrs.cast()
            });
            let uc = udata.ucontext();
            // SAFETY: the core passes valid attributes.
            let (cqe, flags) = unsafe { ((*attr).cqe, (*attr).flags) };
            if uc.is_some() && udata.outlen() < size_of::<b::rxe_create_cq_resp>() {
                return Err(EINVAL);
            }
            if flags != 0 {
                return Err(super::errno::EOPNOTSUPP());
            }
            // SAFETY: a live CQ on a device created by `newlink`.
            let dev = unsafe { Self::data((*ibcq).device) };
            let events = CqEvents::new(ibcq)?;
            let (cq, mi) = T::create_cq(dev, cqe, uc.as_ref(), events.clone())?;
            if let Err(e) = udata.write(&mi.bytes()) {
                T::destroy_cq(dev, &cq);
                events.detach();
                return Err(e);
            }
            let held = T::cq_capacity(&cq);
            // SAFETY: the core's CQ object, not yet visible to anyone else.
            unsafe {
                (*ibcq).cqe = held as c_int;
                Obj::<b::ib_cq, CqData<T::Cq>>::set(ibcq, CqData { events, cq });
            }
            Ok(0)
        })
    }

    /// `ib_device_ops.destroy_cq`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a CQ created by [`Self::create_cq`]
    /// and no QP using it.
    unsafe extern "C" fn destroy_cq(ibcq: *mut b::ib_cq, _udata: *mut b::ib_udata) -> c_int {
        // SAFETY: a live CQ of ours; nothing uses it after this call.
        unsafe {
            let d = Obj::<b::ib_cq, CqData<T::Cq>>::data(ibcq);
            T::destroy_cq(Self::data((*ibcq).device), &d.cq);
            d.events.detach();
            Obj::<b::ib_cq, CqData<T::Cq>>::drop_data(ibcq);
        }
        0
    }

    /// `ib_device_ops.resize_cq`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a CQ created by [`Self::create_cq`].
    unsafe extern "C" fn resize_cq(
        ibcq: *mut b::ib_cq,
        cqe: c_int,
        udata: *mut b::ib_udata,
    ) -> c_int {
        from_result(|| {
            let mut udata = UData(udata);
            let uc = udata.ucontext();
            if uc.is_some() && udata.outlen() < size_of::<b::rxe_resize_cq_resp>() {
                return Err(EINVAL);
            }
            let cqe = u32::try_from(cqe).map_err(|_| EINVAL)?;
            // SAFETY: a live CQ of ours on a live device.
            let (dev, d) = unsafe {
                (
                    Self::data((*ibcq).device),
                    Obj::<b::ib_cq, CqData<T::Cq>>::data(ibcq),
                )
            };
            let mi = T::resize_cq(dev, &d.cq, cqe, uc.as_ref())?;
            udata.write(&mi.bytes())?;
            let held = T::cq_capacity(&d.cq);
            // SAFETY: the core serialises verbs on one CQ object.
            unsafe { (*ibcq).cqe = held as c_int };
            Ok(0)
        })
    }

    /// `ib_device_ops.create_ah` and `create_user_ah`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a zeroed AH object of our size whose
    /// `device` and `pd` are set, valid attributes, and a null or valid udata.
    unsafe extern "C" fn create_ah(
        ibah: *mut b::ib_ah,
        init: *mut b::rdma_ah_init_attr,
        udata: *mut b::ib_udata,
    ) -> c_int {
        from_result(|| {
            let mut udata = UData(udata);
            // SAFETY: the core passes valid attributes and a live AH object.
            let (av, dev, pd) = unsafe {
                (
                    Av::from_c(&*(*init).ah_attr)?,
                    Self::data((*ibah).device),
                    (*ibah).pd,
                )
            };
            // SAFETY: as above.
            let sleepable =
                unsafe { (*init).flags } & b::rdma_create_ah_flags_RDMA_CREATE_AH_SLEEPABLE != 0;
            let (ah, num) = T::create_ah(dev, pd as usize, &av, sleepable)?;
            if udata.outlen() >= size_of::<b::rxe_create_ah_resp>() {
                let mut resp = [0u8; 8];
                resp[..4].copy_from_slice(&num.to_ne_bytes());
                if let Err(e) = udata.write(&resp) {
                    T::destroy_ah(dev, &ah);
                    return Err(e);
                }
            }
            // SAFETY: the core's AH object, not yet visible to anyone else.
            unsafe { Obj::<b::ib_ah, T::Ah>::set(ibah, ah) };
            Ok(0)
        })
    }

    /// `ib_device_ops.destroy_ah`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with an AH created by [`Self::create_ah`].
    unsafe extern "C" fn destroy_ah(ibah: *mut b::ib_ah, _flags: u32) -> c_int {
        // SAFETY: a live AH of ours; nothing uses it after this call.
        unsafe {
            T::destroy_ah(
                Self::data((*ibah).device),
                Obj::<b::ib_ah, T::Ah>::data(ibah),
            );
            Obj::<b::ib_ah, T::Ah>::drop_data(ibah);
        }
        0
    }

    /// `ib_device_ops.create_srq`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a zeroed SRQ object of our size whose
    /// `device` and `pd` are set, valid attributes, and a null or valid udata.
    unsafe extern "C" fn create_srq(
        ibsrq: *mut b::ib_srq,
        init: *mut b::ib_srq_init_attr,
        udata: *mut b::ib_udata,
    ) -> c_int {
        from_result(|| {
            let mut udata = UData(udata);
            let uc = udata.ucontext();
            // SAFETY: the core passes valid attributes and a live SRQ object.
            let (ia, dev, pd) = unsafe { (&mut *init, Self::data((*ibsrq).device), (*ibsrq).pd) };
            if ia.srq_type != b::ib_srq_type_IB_SRQT_BASIC {
                return Err(super::errno::EOPNOTSUPP());
            }
            if uc.is_some() && udata.outlen() < size_of::<b::rxe_create_srq_resp>() {
                return Err(EINVAL);
            }
            let mut a = SrqAttr {
                max_wr: ia.attr.max_wr,
                max_sge: ia.attr.max_sge,
                srq_limit: ia.attr.srq_limit,
            };
            let events = SrqEvents::new(ibsrq)?;
            let (srq, num, mi) =
                T::create_srq(dev, pd as usize, &mut a, uc.as_ref(), events.clone())?;
            let mut resp = [0u8; 24];
            resp[..16].copy_from_slice(&mi.bytes());
            resp[16..20].copy_from_slice(&num.to_ne_bytes());
            if let Err(e) = udata.write(&resp) {
                T::destroy_srq(dev, &srq);
                events.detach();
                return Err(e);
            }
            ia.attr.max_wr = a.max_wr;
            ia.attr.max_sge = a.max_sge;
            // SAFETY: the core's SRQ object, not yet visible to anyone else.
            unsafe { Obj::<b::ib_srq, SrqData<T::Srq>>::set(ibsrq, SrqData { events, srq }) };
            Ok(0)
        })
    }

    /// `ib_device_ops.modify_srq`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with an SRQ created by [`Self::create_srq`].
    unsafe extern "C" fn modify_srq(
        ibsrq: *mut b::ib_srq,
        attr: *mut b::ib_srq_attr,
        mask: b::ib_srq_attr_mask,
        _udata: *mut b::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: valid attributes; a live SRQ of ours on a live device.
            let (a, dev, d) = unsafe {
                (
                    SrqAttr {
                        max_wr: (*attr).max_wr,
                        max_sge: (*attr).max_sge,
                        srq_limit: (*attr).srq_limit,
                    },
                    Self::data((*ibsrq).device),
                    Obj::<b::ib_srq, SrqData<T::Srq>>::data(ibsrq),
                )
            };
            T::modify_srq(dev, &d.srq, &a, mask)?;
            Ok(0)
        })
    }

    /// `ib_device_ops.query_srq`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with an SRQ created by [`Self::create_srq`].
    unsafe extern "C" fn query_srq(ibsrq: *mut b::ib_srq, attr: *mut b::ib_srq_attr) -> c_int {
        // SAFETY: a live SRQ of ours and a buffer to fill.
        unsafe {
            let a = T::query_srq(&Obj::<b::ib_srq, SrqData<T::Srq>>::data(ibsrq).srq);
            (*attr).max_wr = a.max_wr;
            (*attr).max_sge = a.max_sge;
            (*attr).srq_limit = a.srq_limit;
        }
        0
    }

    /// `ib_device_ops.destroy_srq`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with an SRQ created by [`Self::create_srq`]
    /// and no QP using it.
    unsafe extern "C" fn destroy_srq(ibsrq: *mut b::ib_srq, _udata: *mut b::ib_udata) -> c_int {
        // SAFETY: a live SRQ of ours; nothing uses it after this call.
        unsafe {
            let d = Obj::<b::ib_srq, SrqData<T::Srq>>::data(ibsrq);
            T::destroy_srq(Self::data((*ibsrq).device), &d.srq);
            d.events.detach();
            Obj::<b::ib_srq, SrqData<T::Srq>>::drop_data(ibsrq);
        }
        0
    }

    /// `ib_device_ops.post_srq_recv`: kernel consumers only.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core.
    unsafe extern "C" fn post_srq_recv(
        ibsrq: *mut b::ib_srq,
        wr: *const b::ib_recv_wr,
        bad: *mut *const b::ib_recv_wr,
    ) -> c_int {
        // SAFETY: the core passes a valid chain, live for the call.
        let mut wrs = unsafe { RecvWrs::new(wr) };
        // SAFETY: a live SRQ of ours on a live device.
        let r = unsafe {
            T::post_srq_recv(
                Self::data((*ibsrq).device),
                &Obj::<b::ib_srq, SrqData<T::Srq>>::data(ibsrq).srq,
                &mut wrs,
            )
        };
        // SAFETY: the core passes a valid `bad` pointer.
        unsafe { post_result(r, bad, wrs.bad()) }
    }

    /// `ib_device_ops.alloc_mw`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a zeroed MW object of our size whose
    /// `device`, `pd` and `type` are set.
    unsafe extern "C" fn alloc_mw(ibmw: *mut b::ib_mw, _udata: *mut b::ib_udata) -> c_int {
        from_result(|| {
            // SAFETY: a live MW object of a live device.
            let (dev, pd, t) = unsafe { (Self::data((*ibmw).device), (*ibmw).pd, (*ibmw).type_) };
            let (mw, rkey) = T::alloc_mw(dev, pd as usize, t)?;
            // SAFETY: the core's MW object, not yet visible to anyone else.
            unsafe {
                (*ibmw).rkey = rkey;
                Obj::<b::ib_mw, T::Mw>::set(ibmw, mw);
            }
            Ok(0)
        })
    }

    /// `ib_device_ops.dealloc_mw`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with an MW from [`Self::alloc_mw`].
    unsafe extern "C" fn dealloc_mw(ibmw: *mut b::ib_mw) -> c_int {
        // SAFETY: a live MW of ours; nothing uses it after this call.
        unsafe {
            T::dealloc_mw(
                Self::data((*ibmw).device),
                Obj::<b::ib_mw, T::Mw>::data(ibmw),
            );
            Obj::<b::ib_mw, T::Mw>::drop_data(ibmw);
        }
        0
    }

    /// `ib_device_ops.get_hw_stats`: fills every counter.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a live device of ours and the stats
    /// structure `alloc_hw_port_stats` returned (`NUM_COUNTERS` values).
    unsafe extern "C" fn get_hw_stats(
        ib: *mut b::ib_device,
        stats: *mut b::rdma_hw_stats,
        _port: u32,
        _index: c_int,
    ) -> c_int {
        // SAFETY: a live device; `stats` was allocated with `NUM_COUNTERS`
        // values by `metaroce_alloc_hw_port_stats`, checked against
        // `num_counters` before writing.
        unsafe {
            let c = T::counters(Self::data(ib));
            let n = ((*stats).num_counters.max(0) as usize).min(NUM_COUNTERS);
            let v = (*stats).value.as_mut_ptr();
            for (i, x) in c.iter().enumerate().take(n) {
                *v.add(i) = *x;
            }
            n as c_int
        }
    }

    /// `ib_device_ops.req_notify_cq`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a CQ created by [`Self::create_cq`].
    unsafe extern "C" fn req_notify_cq(ibcq: *mut b::ib_cq, flags: b::ib_cq_notify_flags) -> c_int {
        let solicited = flags & b::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
            == b::ib_cq_notify_flags_IB_CQ_SOLICITED;
        // SAFETY: a live CQ of ours.
        let d = unsafe { Obj::<b::ib_cq, CqData<T::Cq>>::data(ibcq) };
        let waiting = T::req_notify_cq(&d.cq, solicited);
        c_int::from(waiting && flags & b::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0)
    }

    /// `ib_device_ops.poll_cq`: kernel CQs (user space polls its ring).
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a CQ created by [`Self::create_cq`]
    /// and room for `n` completions at `wc`.
    unsafe extern "C" fn poll_cq(ibcq: *mut b::ib_cq, n: c_int, wc: *mut b::ib_wc) -> c_int {
        let max = usize::try_from(n).unwrap_or(0);
        // SAFETY: a live CQ of ours.
        let d = unsafe { Obj::<b::ib_cq, CqData<T::Cq>>::data(ibcq) };
        let mut k = 0usize;
        let got = T::poll_cq(&d.cq, max, &mut |slot| {
            if k < max {
                // SAFETY: `k < n`: inside the consumer's array.
                unsafe { wc.add(k).write(verbs::kernel_wc(slot)) };
                k += 1;
            }
        });
        got.min(k) as c_int
    }

    /// `ib_device_ops.create_qp`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a zeroed QP object of our size whose
    /// `device` and `pd` are set, valid attributes with CQs of ours, and a
    /// null or valid udata.
    unsafe extern "C" fn create_qp(
        ibqp: *mut b::ib_qp,
        init: *mut b::ib_qp_init_attr,
        udata: *mut b::ib_udata,
    ) -> c_int {
        from_result(|| {
            let mut udata = UData(udata);
            let uc = udata.ucontext();
            // SAFETY: the core passes valid attributes and a QP whose device
            // and PD are set.
            let (ia, dev, pd) = unsafe { (&mut *init, Self::data((*ibqp).device), (*ibqp).pd) };
            let qp_type = match ia.qp_type {
                b::ib_qp_type_IB_QPT_RC => QpType::Rc,
                b::ib_qp_type_IB_QPT_UD => QpType::Ud,
                b::ib_qp_type_IB_QPT_GSI if uc.is_none() => QpType::Gsi,
                _ => return Err(super::errno::EOPNOTSUPP()),
            };
            if ia.create_flags != 0 {
                return Err(super::errno::EOPNOTSUPP());
            }
            if uc.is_some() && udata.outlen() < size_of::<b::rxe_create_qp_resp>() {
                return Err(EINVAL);
            }
            if ia.send_cq.is_null() || ia.recv_cq.is_null() {
                return Err(EINVAL);
            }
            let mut qi = QpInit {
                qp_type,
                caps: verbs::QpCaps::from_c(&ia.cap),
                sq_sig_all: ia.sq_sig_type == b::ib_sig_type_IB_SIGNAL_ALL_WR,
            };
            // SAFETY: CQs of this device (the core checked the uobjects), live
            // while the QP holds them.
            let (scq, rcq) = unsafe {
                (
                    &Obj::<b::ib_cq, CqData<T::Cq>>::data(ia.send_cq).cq,
                    &Obj::<b::ib_cq, CqData<T::Cq>>::data(ia.recv_cq).cq,
                )
            };
            // SAFETY: an SRQ of this device (checked by the core), live while
            // the QP holds it.
            let srq = (!ia.srq.is_null())
                .then(|| unsafe { &Obj::<b::ib_srq, SrqData<T::Srq>>::data(ia.srq).srq });
            let events = QpEvents::new(ibqp)?;
            let (qp, qpn, rq_mi, sq_mi) = T::create_qp(
                dev,
                pd as usize,
                &mut qi,
                scq,
                rcq,
                srq,
                uc.as_ref(),
                verbs::qp_handle(ibqp),
                events.clone(),
            )?;
            let mut resp = [0u8; 32];
            resp[..16].copy_from_slice(&rq_mi.bytes());
            resp[16..].copy_from_slice(&sq_mi.bytes());
            if let Err(e) = udata.write(&resp) {
                T::destroy_qp(dev, &qp);
                events.detach();
                return Err(e);
            }
            qi.caps.to_c(&mut ia.cap);
            // SAFETY: the core's QP object, not yet visible to anyone else.
            unsafe {
                (*ibqp).qp_num = qpn;
                Obj::<b::ib_qp, QpData<T::Qp>>::set(ibqp, QpData { events, qp });
            }
            Ok(0)
        })
    }

    /// `ib_device_ops.modify_qp`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a QP created by [`Self::create_qp`]
    /// and valid attributes.
    unsafe extern "C" fn modify_qp(
        ibqp: *mut b::ib_qp,
        attr: *mut b::ib_qp_attr,
        mask: c_int,
        _udata: *mut b::ib_udata,
    ) -> c_int {
        from_result(|| {
            let mask = mask as u32;
            if mask & !verbs::qp_mask::STANDARD != 0 {
                return Err(super::errno::EOPNOTSUPP());
            }
            // SAFETY: valid attributes; a live QP of ours on a live device.
            let (a, dev, qp) = unsafe {
                (
                    QpAttr::from_c(&*attr, mask)?,
                    Self::data((*ibqp).device),
                    &Obj::<b::ib_qp, QpData<T::Qp>>::data(ibqp).qp,
                )
            };
            T::modify_qp(dev, qp, &a)?;
            Ok(0)
        })
    }

    /// `ib_device_ops.query_qp`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a QP created by [`Self::create_qp`]
    /// and buffers to fill.
    unsafe extern "C" fn query_qp(
        ibqp: *mut b::ib_qp,
        attr: *mut b::ib_qp_attr,
        _mask: c_int,
        init: *mut b::ib_qp_init_attr,
    ) -> c_int {
        // SAFETY: a live QP of ours and two buffers from the core.
        unsafe {
            let qp = &Obj::<b::ib_qp, QpData<T::Qp>>::data(ibqp).qp;
            let mut a = QpAttr::default();
            let mut qi = QpInit {
                qp_type: QpType::Rc,
                caps: verbs::QpCaps::default(),
                sq_sig_all: false,
            };
            T::query_qp(qp, &mut a, &mut qi);
            *attr = core::mem::zeroed();
            a.to_c(&mut *attr);
            *init = core::mem::zeroed();
            qi.caps.to_c(&mut (*init).cap);
            (*init).qp_type = (*ibqp).qp_type;
            (*init).send_cq = (*ibqp).send_cq;
            (*init).recv_cq = (*ibqp).recv_cq;
            (*init).sq_sig_type = if qi.sq_sig_all {
                b::ib_sig_type_IB_SIGNAL_ALL_WR
            } else {
                b::ib_sig_type_IB_SIGNAL_REQ_WR
            };
        }
        0
    }

    /// `ib_device_ops.destroy_qp`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a QP created by [`Self::create_qp`].
    unsafe extern "C" fn destroy_qp(ibqp: *mut b::ib_qp, _udata: *mut b::ib_udata) -> c_int {
        // SAFETY: a live QP of ours; nothing uses it after this call.
        unsafe {
            let d = Obj::<b::ib_qp, QpData<T::Qp>>::data(ibqp);
            T::destroy_qp(Self::data((*ibqp).device), &d.qp);
            d.events.detach();
            Obj::<b::ib_qp, QpData<T::Qp>>::drop_data(ibqp);
        }
        0
    }

    /// `ib_device_ops.post_send`: from user space this is the SQ doorbell
    /// (no work requests: they are in the shared ring).
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a QP created by [`Self::create_qp`].
    unsafe extern "C" fn post_send(
        ibqp: *mut b::ib_qp,
        wr: *const b::ib_send_wr,
        bad: *mut *const b::ib_send_wr,
    ) -> c_int {
        if !wr.is_null() {
            // SAFETY: a kernel consumer's valid chain, live for the call.
            let mut wrs = unsafe { SendWrs::new(wr, Self::ah_num) };
            // SAFETY: a live QP of ours on a live device.
            let r = unsafe {
                T::post_send_wrs(
                    Self::data((*ibqp).device),
                    &Obj::<b::ib_qp, QpData<T::Qp>>::data(ibqp).qp,
                    &mut wrs,
                )
            };
            // SAFETY: the core passes a valid `bad` pointer.
            return unsafe { post_result(r, bad, wrs.bad()) };
        }
        // SAFETY: a live QP of ours on a live device.
        let r = unsafe {
            T::post_send(
                Self::data((*ibqp).device),
                &Obj::<b::ib_qp, QpData<T::Qp>>::data(ibqp).qp,
            )
        };
        match r {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// The `ah_num` of an AH of ours (for kernel UD requests).
    fn ah_num(ah: *mut b::ib_ah) -> u32 {
        // SAFETY: a kernel consumer's UD request names a live AH of this
        // device (the core created it through `create_ah`).
        T::ah_num(unsafe { Obj::<b::ib_ah, T::Ah>::data(ah) })
    }

    /// `ib_device_ops.post_recv`: kernel consumers (user space posts in the
    /// shared ring).
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a QP created by [`Self::create_qp`]
    /// and a valid chain.
    unsafe extern "C" fn post_recv(
        ibqp: *mut b::ib_qp,
        wr: *const b::ib_recv_wr,
        bad: *mut *const b::ib_recv_wr,
    ) -> c_int {
        // SAFETY: the core passes a valid chain, live for the call.
        let mut wrs = unsafe { RecvWrs::new(wr) };
        // SAFETY: a live QP of ours on a live device.
        let r = unsafe {
            T::post_recv_wrs(
                Self::data((*ibqp).device),
                &Obj::<b::ib_qp, QpData<T::Qp>>::data(ibqp).qp,
                &mut wrs,
            )
        };
        // SAFETY: the core passes a valid `bad` pointer.
        unsafe { post_result(r, bad, wrs.bad()) }
    }

    /// `ib_device_ops.get_dma_mr`: the DMA MR of a kernel PD (the core asks
    /// for it in `ib_alloc_pd` to give the PD its `local_dma_lkey`).
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a live kernel PD of ours.
    unsafe extern "C" fn get_dma_mr(pd: *mut b::ib_pd, access: c_int) -> *mut b::ib_mr {
        // SAFETY: a live PD on a live device of ours.
        let dev = unsafe { Self::data((*pd).device) };
        let r = (|| {
            let slot = KBox::new_uninit(GFP_KERNEL)?;
            let (d, lkey, rkey) = T::get_dma_mr(dev, pd as usize, access as u32)?;
            Ok(Self::mr_box(slot, d, lkey, rkey, 0, u64::MAX))
        })();
        match r {
            Ok(m) => KBox::into_raw(m).cast::<b::ib_mr>(),
            Err(e) => err_ptr(e),
        }
    }

    /// The `ib_mr` for the core in `slot` (allocated before the MR, so
    /// that nothing can fail after it exists), holding the driver's value.
    fn mr_box(
        slot: KBox<core::mem::MaybeUninit<MrBox<T::Mr>>>,
        d: T::Mr,
        lkey: u32,
        rkey: u32,
        iova: u64,
        length: u64,
    ) -> KBox<MrBox<T::Mr>> {
        // SAFETY: all-zero is a valid `ib_mr` for the core to fill in.
        let mut ib: b::ib_mr = unsafe { core::mem::zeroed() };
        ib.lkey = lkey;
        ib.rkey = rkey;
        ib.iova = iova;
        ib.length = length;
        KBox::write(
            slot,
            MrBox {
                ib,
                data: d,
                pages: KVec::new(),
                npages: 0,
            },
        )
    }

    /// `ib_device_ops.alloc_mr`: a fast-registration MR (`IB_MR_TYPE_MEM_REG`
    /// only, as rxe: `EINVAL` otherwise or above `max_fast_reg_page_list_len`).
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a live kernel PD of ours.
    unsafe extern "C" fn alloc_mr(
        pd: *mut b::ib_pd,
        mr_type: b::ib_mr_type,
        max_num_sg: u32,
    ) -> *mut b::ib_mr {
        // SAFETY: a live PD on a live device of ours.
        let dev = unsafe { Self::data((*pd).device) };
        let r = (|| {
            if mr_type != b::ib_mr_type_IB_MR_TYPE_MEM_REG {
                return Err(EINVAL);
            }
            let slot = KBox::new_uninit(GFP_KERNEL)?;
            // The driver checks `max_num_sg` against its limit before any
            // allocation is sized by it.
            let (d, key) = T::alloc_mr(dev, pd as usize, max_num_sg)?;
            let mut m = Self::mr_box(slot, d, key, key, 0, 0);
            match KVec::from_elem(0u64, max_num_sg as usize, GFP_KERNEL) {
                Ok(pages) => m.pages = pages,
                Err(e) => {
                    let _ = T::dereg_mr(dev, &m.data);
                    return Err(e.into());
                }
            }
            Ok(m)
        })();
        match r {
            Ok(m) => KBox::into_raw(m).cast::<b::ib_mr>(),
            Err(e) => err_ptr(e),
        }
    }

    /// `set_page` of `ib_sg_to_pages`: appends one page address.
    ///
    /// # Safety
    ///
    /// Called by `ib_sg_to_pages` from [`Self::map_mr_sg`] with its MR.
    unsafe extern "C" fn set_page(ibmr: *mut b::ib_mr, addr: u64) -> c_int {
        // SAFETY: an MR of ours, borrowed by `map_mr_sg` for this call only.
        let m = unsafe { &mut *ibmr.cast::<MrBox<T::Mr>>() };
        match m.pages.get_mut(m.npages) {
            Some(p) => {
                *p = addr;
                m.npages += 1;
                0
            }
            None => ENOMEM.to_errno(),
        }
    }

    /// `ib_device_ops.map_mr_sg`: the pages of a DMA-mapped scatterlist
    /// (kernel virtual addresses: the device uses virtual DMA) into a
    /// fast-registration MR; returns how many entries were mapped.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core (`ib_map_mr_sg`) with an MR from
    /// [`Self::alloc_mr`] whose `page_size` is set and a mapped scatterlist.
    unsafe extern "C" fn map_mr_sg(
        ibmr: *mut b::ib_mr,
        sg: *mut b::scatterlist,
        sg_nents: c_int,
        sg_offset: *mut kernel::ffi::c_uint,
    ) -> c_int {
        // SAFETY: an MR of ours; no other reference to it is live during
        // the consumer's `ib_map_mr_sg` call.
        unsafe { (*ibmr.cast::<MrBox<T::Mr>>()).npages = 0 };
        // SAFETY: the core's arguments; `set_page` is called with `ibmr`.
        let n = unsafe { b::ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, Some(Self::set_page)) };
        if n < 0 {
            return n;
        }
        // SAFETY: as above; `ib_sg_to_pages` set `iova` and `length`.
        let r = unsafe {
            let m = &*ibmr.cast::<MrBox<T::Mr>>();
            T::map_mr(
                Self::data((*ibmr).device),
                &m.data,
                m.ib.iova,
                m.ib.length,
                m.ib.page_size,
                &m.pages[..m.npages.min(m.pages.len())],
            )
        };
        match r {
            Ok(()) => n,
            Err(e) => e.to_errno(),
        }
    }

    /// `ib_device_ops.reg_user_mr`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a live PD of ours, in the context of
    /// the process whose memory is registered.
    unsafe extern "C" fn reg_user_mr(
        pd: *mut b::ib_pd,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        _udata: *mut b::ib_udata,
    ) -> *mut b::ib_mr {
        // SAFETY: a live PD on a live device of ours.
        let (ib, dev) = unsafe { ((*pd).device, Self::data((*pd).device)) };
        let r = (|| {
            let slot = KBox::new_uninit(GFP_KERNEL)?;
            let mem = UMem::get(ib, start, length, access)?;
            let (d, lkey, rkey) =
                T::reg_user_mr(dev, pd as usize, Mem::User(mem), iova, access as u32)?;
            Ok(Self::mr_box(slot, d, lkey, rkey, iova, length))
        })();
        match r {
            Ok(m) => KBox::into_raw(m).cast::<b::ib_mr>(),
            Err(e) => err_ptr(e),
        }
    }

    /// `ib_device_ops.dereg_mr`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with an MR from [`Self::reg_user_mr`],
    /// [`Self::get_dma_mr`] or [`Self::alloc_mr`].
    unsafe extern "C" fn dereg_mr(mr: *mut b::ib_mr, _udata: *mut b::ib_udata) -> c_int {
        let m = mr.cast::<MrBox<T::Mr>>();
        // SAFETY: `mr` is a live MR of ours on a live device: it starts a
        // boxed `MrBox`, which the core hands back here until we free it.
        let r = unsafe { T::dereg_mr(Self::data((*mr).device), &(*m).data) };
        if let Err(e) = r {
            // The core keeps the MR (and calls again later).
            return e.to_errno();
        }
        // SAFETY: as above; freed once, on success only.
        drop(unsafe { KBox::from_raw(m) });
        0
    }
}
