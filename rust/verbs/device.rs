// SPDX-License-Identifier: GPL-2.0

//! The metaroce RDMA device: `rdma link add NAME type metaroce netdev DEV`.
//!
//! Limits follow rxe's (`drivers/infiniband/sw/rxe/rxe_param.h`), so that
//! software written against rxe sees the same device shape. Capability flags
//! name what is implemented: memory windows (types 1 and 2B), fast
//! registration, atomics and ATOMIC_WRITE, port events. Devices report
//! rxe's driver id and uverbs ABI so that rdma-core's rxe provider drives
//! them.

use super::ah::{Ah, AhTable};
use super::counters::{self as counter, NUM_COUNTERS};
use super::cq::Cq;
use super::fair::DevFair;
use super::mr::{Mr, MrTable};
use super::mw::{Mw, MwTable};
use super::planes::Planes;
use super::qp::{PeerTable, Qp};
use super::shared::DevShared;
use super::srq::Srq;
use crate::ffi::mem::{MappedPages, Mem, PageList};
use crate::ffi::rdma::{
    device_cap, port_cap, qp_mask, AhCreated, Av, CounterDesc, CqCreated, CqEvents, Device,
    DeviceAttrs, Driver, DriverId, MrCreated, MwCreated, NetDev, PdId, PortAttrs, QpAttr,
    QpCreated, QpEvents, QpHandle, QpInit, SrqAttr, SrqCreated, SrqEvents,
};
use crate::ffi::rxe_abi::{self, MmInfo, Wc};
use crate::ffi::udata::UContext;
use crate::ffi::wr::{RecvWrs, SendWrs};
use crate::net::Transport;
use core::sync::atomic::AtomicU64;
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::Arc;

/// rxe's `DEFAULT_MAX_VALUE`: 2^20 objects of a kind.
const DEFAULT_MAX: u32 = 1 << 20;

/// Deepest SQ, RQ or SRQ a consumer may ask for (`max_qp_wr`, `max_srq_wr`):
/// 2^15 - 1 WQEs, so that a ring of the largest WQEs (32 SGEs or 512 bytes
/// inline: 1 KiB slots) is 32 MiB of `vmalloc` memory and every depth the
/// device reports can be created. rxe reports 2^20, whose largest rings
/// (2 GiB) a small machine cannot allocate.
const MAX_WR: u32 = (1 << 15) - 1;

/// Bytes below the IB payload on the wire: IPv6 (40) + UDP (8) + the
/// MetaRoCE data header and trailer (see Documentation/transport.rst; budgeted
/// at 80). The active MTU is the largest IB MTU that fits after them.
pub(crate) const WIRE_OVERHEAD: u32 = 40 + 8 + 80;

/// The most payload a DATA packet carries (the largest IB MTU, and the most a
/// QP's datagram buffer holds): what every RC and UC QP and shared connection
/// takes, whatever its `path_mtu` (Documentation/transport.rst, C7).
pub(crate) const MAX_PAYLOAD: u16 = 4096;

/// The payload an RC or UC QP cuts its messages at for its `path_mtu` (`enum
/// ib_mtu`) on the link of netdev `ifindex` (Documentation/transport.rst, C7).
///
/// The link's payload is the netdev's MTU less [`WIRE_OVERHEAD`], down to a
/// multiple of 8, at most [`MAX_PAYLOAD`]. Where `path_mtu` is the largest IB
/// MTU within it (the port's active MTU, what perftest and rdma_cm pick) and the
/// `link_payload` module parameter is on, the QP cuts at the link's payload
/// (1368 bytes on a 1500-byte link, where `path_mtu` is 1024); else at
/// `path_mtu`, which then says what the path carries.
pub(crate) fn segment(ifindex: i32, path_mtu: u32) -> u16 {
    let netdev_mtu = crate::ffi::net::netdev_mtu(ifindex).unwrap_or(0);
    cut_at(netdev_mtu, path_mtu, crate::ffi::params::link_payload())
}

/// [`segment`] for a netdev MTU of `netdev_mtu` bytes (0: no netdev) with the
/// `link_payload` parameter `on`.
pub(crate) fn cut_at(netdev_mtu: u32, path_mtu: u32, on: bool) -> u16 {
    let pmtu = 128u16 << path_mtu.clamp(1, 5);
    let link = link_payload(netdev_mtu);
    let fills = link >= pmtu && link < pmtu.saturating_mul(2);
    if fills && on {
        link
    } else {
        pmtu
    }
}

/// The link's payload for a netdev MTU of `netdev_mtu` bytes ([`segment`]):
/// 0 if not even 8 bytes fit.
pub(crate) fn link_payload(netdev_mtu: u32) -> u16 {
    (netdev_mtu
        .saturating_sub(WIRE_OVERHEAD)
        .min(u32::from(MAX_PAYLOAD))
        & !7) as u16
}

/// The metaroce driver.
pub(crate) struct Metaroce;

/// Per-device state.
pub(crate) type DeviceData = Arc<DevShared<Qp>>;

#[vtable]
impl Driver for Metaroce {
    type Shared = Transport<Qp>;
    type Data = DeviceData;
    type Cq = Arc<Cq>;
    type Qp = Arc<Qp>;
    type Mr = Mr;
    type Ah = Ah;
    type Srq = Arc<Srq>;
    type Mw = Mw;
    const LINK_TYPE: &'static CStr = kernel::c_str!("metaroce");
    const NODE_DESC: &'static CStr = kernel::c_str!("metaroce");
    const DRIVER_ID: DriverId = DriverId::RXE;
    const UVERBS_ABI_VERSION: u32 = rxe_abi::UVERBS_ABI_VERSION;
    const COUNTERS: &'static [CounterDesc] = &counter::NAMES;

    fn new_device(shared: &Arc<Transport<Qp>>, netdev: &NetDev) -> Result<DeviceData> {
        if netdev.mac() == [0; 6] {
            pr_err!("{} has no Ethernet address\n", netdev.name());
            return Err(EINVAL);
        }
        let attrs = attrs();
        let mtu = crate::ffi::rdma::ib_mtu_for(netdev.mtu(), WIRE_OVERHEAD).map_or(4096, |m| m.1);
        let link = netdev.speed_mbps();
        let fair = DevFair::new(
            crate::ffi::params::rx_mbps(),
            link,
            mtu,
            crate::ffi::timer::tick_ns(),
        );
        let mrs = MrTable::new(attrs.max_mr)?;
        let dev = Arc::pin_init(
            pin_init!(DevShared {
                attrs,
                mrs <- mrs,
                ahs <- AhTable::new(attrs.max_ah),
                mws <- MwTable::new(attrs.max_mw),
                transport: shared.clone(),
                ifindex: netdev.ifindex(),
                next_srq_num: core::sync::atomic::AtomicU32::new(1),
                counters: [const { AtomicU64::new(0) }; NUM_COUNTERS],
                fair <- fair,
                timer_lag: AtomicU64::new(0),
                shared: crate::ffi::params::shared(),
                mode_warned: core::sync::atomic::AtomicBool::new(false),
                peers <- PeerTable::new(),
                planes <- Planes::new(netdev.ifindex()),
            }),
            GFP_KERNEL,
        )?;
        pr_info!(
            "{}: fair share of {} Mb/s ({}), {} kB/s handed out, {} connections\n",
            netdev.name(),
            dev.fair.mbps,
            dev.fair.source,
            dev.fair.capacity,
            if dev.shared { "shared" } else { "per-QP" }
        );
        Ok(dev)
    }

    fn device_attrs(dev: &Device<Self>) -> DeviceAttrs {
        dev.data().attrs
    }

    fn port_attrs(_dev: &Device<Self>) -> PortAttrs {
        PortAttrs {
            gid_tbl_len: 1024,
            port_cap_flags: port_cap::CM_SUP,
            max_msg_sz: 1 << 31,
            wire_overhead: WIRE_OVERHEAD,
        }
    }

    fn create_cq(
        dev: &Device<Self>,
        cqe: u32,
        uc: Option<&UContext>,
        events: CqEvents,
    ) -> Result<CqCreated<Arc<Cq>>> {
        let dev = dev.data();
        Cq::new(cqe, dev.attrs.max_cqe, uc, events)
    }

    fn destroy_cq(_dev: &Device<Self>, cq: &Arc<Cq>) {
        cq.kill();
    }

    fn resize_cq(
        dev: &Device<Self>,
        cq: &Arc<Cq>,
        cqe: u32,
        uc: Option<&UContext>,
    ) -> Result<MmInfo> {
        let dev = dev.data();
        cq.resize(cqe, dev.attrs.max_cqe, uc)
    }

    fn cq_capacity(cq: &Arc<Cq>) -> u32 {
        cq.capacity()
    }

    fn poll_cq(cq: &Arc<Cq>, max: usize, f: &mut dyn FnMut(&[u8; Wc::KERNEL_SIZE])) -> usize {
        cq.poll(max, f)
    }

    fn req_notify_cq(cq: &Arc<Cq>, solicited_only: bool) -> bool {
        cq.arm(solicited_only)
    }

    fn create_ah(dev: &Device<Self>, pd: PdId, av: &Av, sleepable: bool) -> Result<AhCreated<Ah>> {
        let dev = dev.data();
        let ah = dev
            .ahs
            .insert(pd, *av, if sleepable { GFP_KERNEL } else { GFP_ATOMIC })?;
        let num = ah.num;
        Ok(AhCreated { ah, num })
    }

    fn destroy_ah(dev: &Device<Self>, ah: &Ah) {
        let dev = dev.data();
        dev.ahs.remove(ah.num);
    }

    fn ah_num(ah: &Ah) -> u32 {
        ah.num
    }

    fn create_srq(
        dev: &Device<Self>,
        pd: PdId,
        attr: &mut SrqAttr,
        uc: Option<&UContext>,
        events: SrqEvents,
    ) -> Result<SrqCreated<Arc<Srq>>> {
        let dev = dev.data();
        let (srq, ring) = Srq::new(
            pd,
            attr,
            dev.attrs.max_srq_wr,
            dev.attrs.max_srq_sge,
            uc,
            events,
        )?;
        let num = dev
            .next_srq_num
            .fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        Ok(SrqCreated { srq, num, ring })
    }

    fn post_srq_recv(_dev: &Device<Self>, srq: &Arc<Srq>, wrs: &mut RecvWrs) -> Result {
        srq.post(wrs)
    }

    fn modify_srq(_dev: &Device<Self>, srq: &Arc<Srq>, attr: &SrqAttr, mask: u32) -> Result {
        srq.modify(attr, mask)
    }

    fn query_srq(srq: &Arc<Srq>) -> SrqAttr {
        srq.query()
    }

    fn destroy_srq(_dev: &Device<Self>, srq: &Arc<Srq>) {
        srq.kill()
    }

    fn alloc_mw(dev: &Device<Self>, pd: PdId, mw_type: u32) -> Result<MwCreated<Mw>> {
        let dev = dev.data();
        if mw_type != 1 && mw_type != 2 {
            return Err(EINVAL);
        }
        dev.mws.alloc(pd, mw_type)
    }

    fn dealloc_mw(dev: &Device<Self>, mw: &Mw) {
        let dev = dev.data();
        dev.mws.dealloc(mw)
    }

    fn fill_res_qp(qp: &Arc<Qp>, out: &mut crate::ffi::rdma::res::ResAttrs) -> Result {
        qp.fill_res(out)
    }

    fn qp_query_paths(qp: &Arc<Qp>, out: &mut crate::ffi::rdma::ext::PathsOut<'_>) -> Result {
        qp.query_paths(out)
    }

    fn qp_set_paths(qp: &Arc<Qp>, paths: u32) -> Result<u32> {
        Qp::set_paths(qp, paths)
    }

    fn qp_set_stream_class(qp: &Arc<Qp>, class: u32) -> Result {
        qp.set_stream_class(class)
    }

    fn dev_query_planes(
        dev: &Device<Self>,
        out: &mut [crate::ffi::rdma::ext::PlaneInfo; crate::ffi::rdma::ext::MAX_PLANES],
    ) -> usize {
        dev.data().planes.query(out)
    }

    fn dev_set_planes(dev: &Device<Self>, ifindex: &[i32]) -> Result {
        let d = dev.data();
        d.planes.set(d.ifindex, ifindex)
    }

    fn netdev_event(dev: &Device<Self>, ifindex: i32, up: bool, gone: bool) {
        dev.data().planes.netdev_event(ifindex, up, gone);
    }

    fn fill_res_cq(cq: &Arc<Cq>, out: &mut crate::ffi::rdma::res::ResAttrs) -> Result {
        cq.fill_res(out)
    }

    fn fill_res_mr(
        dev: &Device<Self>,
        mr: &Mr,
        out: &mut crate::ffi::rdma::res::ResAttrs,
    ) -> Result {
        dev.data().mrs.fill_res(mr, out)
    }

    fn counters(dev: &Device<Self>, out: &mut [u64]) {
        let dev = dev.data();
        dev.read_counters(out);
        if let Some(u) = out.get_mut(counter::UNKNOWN_QPN) {
            *u = dev.transport.unknown();
        }
    }

    fn create_qp(
        dev: &Device<Self>,
        pd: PdId,
        init: &mut QpInit,
        scq: &Arc<Cq>,
        rcq: &Arc<Cq>,
        srq: Option<&Arc<Srq>>,
        uc: Option<&UContext>,
        handle: QpHandle,
        events: QpEvents,
    ) -> Result<QpCreated<Arc<Qp>>> {
        let dev = dev.data();
        Qp::create(dev, pd, init, scq, rcq, srq, uc, handle, events)
    }

    fn modify_qp(dev: &Device<Self>, qp: &Arc<Qp>, attr: &QpAttr) -> Result {
        let active_mtu = if attr.mask & qp_mask::PATH_MTU != 0 {
            dev.active_mtu()
        } else {
            0
        };
        Qp::modify(qp, attr, active_mtu)
    }

    fn query_qp(qp: &Arc<Qp>, attr: &mut QpAttr, init: &mut QpInit) {
        qp.query(attr, init)
    }

    fn destroy_qp(_dev: &Device<Self>, qp: &Arc<Qp>) {
        Qp::destroy(qp)
    }

    fn post_send(_dev: &Device<Self>, qp: &Arc<Qp>) -> Result {
        Qp::doorbell(qp)
    }

    fn post_send_wrs(_dev: &Device<Self>, qp: &Arc<Qp>, wrs: &mut SendWrs) -> Result {
        Qp::post_kernel_send(qp, wrs)
    }

    fn post_recv_wrs(_dev: &Device<Self>, qp: &Arc<Qp>, wrs: &mut RecvWrs) -> Result {
        Qp::post_kernel_recv(qp, wrs)
    }

    fn alloc_mr(dev: &Device<Self>, pd: PdId, max_pages: u32) -> Result<MrCreated<Mr>> {
        let dev = dev.data();
        if max_pages > dev.attrs.max_fast_reg_page_list_len {
            return Err(EINVAL);
        }
        let mr = dev
            .mrs
            .insert(pd, 0, 0, Mem::Pages(PageList::new(max_pages)?))?;
        let key = mr.key;
        Ok(MrCreated {
            mr,
            lkey: key,
            rkey: key,
        })
    }

    fn map_mr(
        dev: &Device<Self>,
        mr: &Mr,
        iova: u64,
        len: u64,
        page_size: u32,
        pages: &MappedPages<'_>,
    ) -> Result {
        let dev = dev.data();
        dev.mrs.map(mr, iova, len, page_size, pages)
    }

    fn get_dma_mr(dev: &Device<Self>, pd: PdId, mem: Mem, access: u32) -> Result<MrCreated<Mr>> {
        let dev = dev.data();
        let mr = dev.mrs.insert(pd, access, 0, mem)?;
        let key = mr.key;
        Ok(MrCreated {
            mr,
            lkey: key,
            rkey: key,
        })
    }

    fn reg_user_mr(
        dev: &Device<Self>,
        pd: PdId,
        mem: Mem,
        iova: u64,
        access: u32,
    ) -> Result<MrCreated<Mr>> {
        let dev = dev.data();
        let mr = dev.mrs.insert(pd, access, iova, mem)?;
        let key = mr.key;
        Ok(MrCreated {
            mr,
            lkey: key,
            rkey: key,
        })
    }

    fn dereg_mr(dev: &Device<Self>, mr: &Mr) -> Result {
        let dev = dev.data();
        // rxe_dereg_mr: not while a memory window is bound to it.
        if dev.mws.bound_to(mr.key) {
            return Err(EINVAL);
        }
        // SAFETY: `Driver::dereg_mr`'s contract: process context, no RCU
        // read-side section of ours held (the RDMA core calls it through the
        // vtable only, from `ib_dereg_mr_user`).
        unsafe { dev.mrs.remove(mr) };
        Ok(())
    }
}

/// The device's attributes: rxe's limits.
fn attrs() -> DeviceAttrs {
    DeviceAttrs {
        max_mr_size: u64::MAX,
        page_size_cap: 0xffff_f000,
        vendor_id: 0xff_ffff,
        device_cap_flags: device_cap::PORT_ACTIVE_EVENT
            | device_cap::SYS_IMAGE_GUID
            | device_cap::MEM_WINDOW
            | device_cap::MEM_WINDOW_TYPE_2B
            | device_cap::MEM_MGT_EXTENSIONS
            | device_cap::ATOMIC_WRITE,
        max_qp: DEFAULT_MAX - 16,
        max_qp_wr: MAX_WR,
        max_send_sge: 32,
        max_recv_sge: 32,
        max_sge_rd: 32,
        max_cq: DEFAULT_MAX,
        max_cqe: (1 << 15) - 1,
        max_mr: (DEFAULT_MAX >> 1) - 1,
        max_mw: DEFAULT_MAX - ((DEFAULT_MAX >> 1) + 1),
        max_pd: DEFAULT_MAX,
        max_qp_rd_atom: 128,
        max_qp_init_rd_atom: 128,
        max_res_rd_atom: 0x3f000,
        max_srq: DEFAULT_MAX - 0x0002_0001,
        max_srq_wr: MAX_WR,
        max_srq_sge: 27,
        max_ah: (1 << 15) - 1,
        max_fast_reg_page_list_len: 512,
        max_pkeys: 64,
        local_ca_ack_delay: 15,
        atomic_hca: true,
    }
}
