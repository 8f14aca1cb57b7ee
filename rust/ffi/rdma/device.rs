// SPDX-License-Identifier: GPL-2.0

//! The device: attributes, port, the [`Device`] handle and the device-wide
//! callbacks (`query_device`, `query_port`, `get_port_immutable`,
//! `query_pkey`, `get_netdev`, `get_link_layer`).

use super::netdev::{ib_mtu_for, HeldNetDev};
use super::{Adapter, Driver};
use crate::ffi::bindings as b;
use core::marker::PhantomData;
use core::ptr;
use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::types::Opaque;

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

/// A driver device in memory: the RDMA core's `ib_device` with the driver's
/// data.
#[repr(C)]
pub(super) struct DeviceBox<D> {
    pub(super) ib: Opaque<b::ib_device>,
    /// The extension ops (`struct metaroce_dev_head`'s `ext`, which the C
    /// uverbs handlers read: [`super::ext`]); set before registration.
    pub(super) ext: *const b::metaroce_ext_ops,
    /// The netdev of port 1, held (`dev_hold`) from `newlink` to
    /// `dealloc_driver`.
    pub(super) netdev: *mut b::net_device,
    pub(super) data: D,
}

/// Where [`DeviceBox`]'s `ext` lies: `offsetof(struct metaroce_dev_head,
/// ext)` in C (the KUnit layout test compares them).
pub(crate) const EXT_OFFSET: usize = core::mem::offset_of!(DeviceBox<u8>, ext);

/// A device of driver `T`, borrowed from the RDMA core for a callback.
///
/// # Invariants
///
/// `self.0` is the `ib_device` at the start of a live `DeviceBox<T::Data>`
/// created by [`super::registration`], whose data and netdev reference are
/// set, and stays so for the lifetime of the borrow.
#[repr(transparent)]
pub(crate) struct Device<T: Driver>(Opaque<b::ib_device>, PhantomData<T>);

impl<T: Driver> Device<T> {
    /// Borrows a device for `'a`.
    ///
    /// # Safety
    ///
    /// `ib` is a device of driver `T` created by [`super::registration`],
    /// whose `dealloc_driver` has not run and will not run during `'a`.
    pub(super) unsafe fn from_raw<'a>(ib: *mut b::ib_device) -> &'a Self {
        // SAFETY: `Device` is a transparent wrapper of `Opaque<ib_device>`,
        // itself transparent over `ib_device`; the caller guarantees that the
        // device lives for `'a`.
        unsafe { &*ib.cast::<Self>() }
    }

    /// The raw `ib_device`.
    pub(in crate::ffi) fn as_ptr(&self) -> *mut b::ib_device {
        self.0.get()
    }

    fn dbox(&self) -> *mut DeviceBox<T::Data> {
        self.as_ptr().cast()
    }

    /// The driver data, for as long as the device is borrowed.
    pub(crate) fn data(&self) -> &T::Data {
        // SAFETY: by the type invariant `self` starts a live `DeviceBox`
        // whose `data` is initialised and not dropped before `dealloc_driver`,
        // which cannot run while `self` is borrowed.
        unsafe { &(*self.dbox()).data }
    }

    /// The netdev of port 1, without a new reference: held by the device.
    pub(super) fn raw_netdev(&self) -> *mut b::net_device {
        // SAFETY: by the type invariant `netdev` was set in `newlink`.
        unsafe { (*self.dbox()).netdev }
    }

    /// The node GUID (set in `newlink`, immutable afterwards).
    pub(super) fn node_guid(&self) -> u64 {
        // SAFETY: the device is live (type invariant); `node_guid` is only
        // written in `newlink`, before the device is registered.
        unsafe { (*self.as_ptr()).node_guid }
    }

    /// The port's active MTU as an `enum ib_mtu` value (1 = 256 .. 5 = 4096):
    /// the largest IBTA MTU whose datagrams, with the driver's
    /// [`PortAttrs::wire_overhead`], fit the netdev's MTU now; `IB_MTU_256`
    /// without a netdev. What `query_port` reports as `active_mtu`.
    pub(crate) fn active_mtu(&self) -> u32 {
        let overhead = T::port_attrs(self).wire_overhead;
        self.netdev()
            .and_then(|nd| ib_mtu_for(nd.mtu(), overhead))
            .map_or(b::ib_mtu_IB_MTU_256, |(mtu, _)| mtu)
    }

    /// The port's netdev through the RDMA core (`ib_device_get_netdev`),
    /// held for as long as the returned guard lives.
    pub(super) fn netdev(&self) -> Option<HeldNetDev> {
        // SAFETY: the device is live (type invariant); the core returns a
        // netdev with a reference for us, or null.
        let nd = unsafe { b::ib_device_get_netdev(self.as_ptr(), 1) };
        // SAFETY: a non-null netdev with a reference that `HeldNetDev` owns.
        (!nd.is_null()).then(|| unsafe { HeldNetDev::from_raw(nd) })
    }
}

impl<T: Driver> Adapter<T> {
    /// `ib_device_ops.query_device`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, with a live device created by
    /// [`Self::newlink`] and pointers valid for the call.
    pub(super) unsafe extern "C" fn query_device(
        ib: *mut b::ib_device,
        attr: *mut b::ib_device_attr,
        udata: *mut b::ib_udata,
    ) -> c_int {
        // SAFETY: the core passes a null (kernel caller) or valid udata.
        if let Some(u) = unsafe { udata.as_ref() } {
            if u.inlen != 0 || u.outlen != 0 {
                return EINVAL.to_errno();
            }
        }
        // SAFETY: the core passes a live device of ours.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        let a = T::device_attrs(dev);
        let out = b::ib_device_attr {
            fw_ver: 0,
            sys_image_guid: dev.node_guid(),
            max_mr_size: a.max_mr_size,
            page_size_cap: a.page_size_cap,
            vendor_id: a.vendor_id,
            device_cap_flags: a.device_cap_flags,
            kernel_cap_flags: b::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG as u64,
            max_qp: a.max_qp as c_int,
            max_qp_wr: a.max_qp_wr as c_int,
            max_send_sge: a.max_send_sge as c_int,
            max_recv_sge: a.max_recv_sge as c_int,
            max_sge_rd: a.max_sge_rd as c_int,
            max_cq: a.max_cq as c_int,
            max_cqe: a.max_cqe as c_int,
            max_mr: a.max_mr as c_int,
            max_mw: a.max_mw as c_int,
            max_pd: a.max_pd as c_int,
            max_qp_rd_atom: a.max_qp_rd_atom as c_int,
            max_qp_init_rd_atom: a.max_qp_init_rd_atom as c_int,
            max_res_rd_atom: a.max_res_rd_atom as c_int,
            max_srq: a.max_srq as c_int,
            max_srq_wr: a.max_srq_wr as c_int,
            max_srq_sge: a.max_srq_sge as c_int,
            max_ah: a.max_ah as c_int,
            max_fast_reg_page_list_len: a.max_fast_reg_page_list_len,
            max_pkeys: a.max_pkeys,
            local_ca_ack_delay: a.local_ca_ack_delay,
            atomic_cap: if a.atomic_hca {
                b::ib_atomic_cap_IB_ATOMIC_HCA
            } else {
                b::ib_atomic_cap_IB_ATOMIC_NONE
            },
            ..Default::default()
        };
        // SAFETY: the core passes an attribute buffer to fill.
        unsafe { attr.write(out) };
        0
    }

    /// `ib_device_ops.query_port`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, with a live device created by
    /// [`Self::newlink`] and pointers valid for the call.
    pub(super) unsafe extern "C" fn query_port(
        ib: *mut b::ib_device,
        port: u32,
        attr: *mut b::ib_port_attr,
    ) -> c_int {
        if port != 1 {
            return EINVAL.to_errno();
        }
        // SAFETY: the core passes a live device of ours.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        let p = T::port_attrs(dev);
        let mut out = b::ib_port_attr {
            gid_tbl_len: p.gid_tbl_len as c_int,
            port_cap_flags: p.port_cap_flags,
            max_msg_sz: p.max_msg_sz,
            pkey_tbl_len: 1,
            max_vl_num: 1,
            max_mtu: b::ib_mtu_IB_MTU_4096,
            active_mtu: b::ib_mtu_IB_MTU_256,
            state: b::ib_port_state_IB_PORT_DOWN,
            phys_state: b::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED as u8,
            ..Default::default()
        };
        if let Some(nd) = dev.netdev() {
            out.phys_mtu = nd.mtu();
            out.active_mtu = dev.active_mtu();
            if nd.is_up() {
                out.state = b::ib_port_state_IB_PORT_ACTIVE;
                out.phys_state = b::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP as u8;
            }
        }
        // A netdev on its way out answers ethtool with ENODEV: report the
        // slowest link (SDR, 1X) for the port, which is DOWN by then,
        // rather than failing the whole query (and the core's cache update).
        // SAFETY: a live device; the two outputs are fields of `out`.
        let r =
            unsafe { b::ib_get_eth_speed(ib, port, &mut out.active_speed, &mut out.active_width) };
        if r != 0 {
            out.active_speed = b::ib_port_speed_IB_SPEED_SDR as u16;
            out.active_width = b::ib_port_width_IB_WIDTH_1X as u8;
        }
        // SAFETY: the core passes an attribute buffer to fill.
        unsafe { attr.write(out) };
        0
    }

    /// `ib_device_ops.get_port_immutable`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, with a live device created by
    /// [`Self::newlink`] and pointers valid for the call.
    pub(super) unsafe extern "C" fn get_port_immutable(
        ib: *mut b::ib_device,
        port: u32,
        imm: *mut b::ib_port_immutable,
    ) -> c_int {
        if port != 1 {
            return EINVAL.to_errno();
        }
        // SAFETY: the core passes a live device of ours.
        let dev = unsafe { Device::<T>::from_raw(ib) };
        let p = T::port_attrs(dev);
        // SAFETY: the core passes a buffer to fill, not otherwise referenced
        // during the call.
        let out = unsafe { &mut *imm };
        out.core_cap_flags = b::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
        out.pkey_tbl_len = 1;
        out.gid_tbl_len = p.gid_tbl_len as c_int;
        out.max_mad_size = b::IB_MGMT_MAD_SIZE;
        0
    }

    /// `ib_device_ops.query_pkey`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, with pointers valid for the call.
    pub(super) unsafe extern "C" fn query_pkey(
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
    pub(super) unsafe extern "C" fn get_netdev(
        ib: *mut b::ib_device,
        port: u32,
    ) -> *mut b::net_device {
        if port != 1 {
            return ptr::null_mut();
        }
        // SAFETY: the core passes a live device of ours.
        let nd = unsafe { Device::<T>::from_raw(ib) }.raw_netdev();
        // SAFETY: the device holds `nd` until `dealloc_driver`; the caller
        // gets a reference of its own.
        unsafe { b::metaroce_dev_hold(nd) };
        nd
    }

    /// `ib_device_ops.get_link_layer`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core.
    pub(super) unsafe extern "C" fn get_link_layer(
        _ib: *mut b::ib_device,
        _port: u32,
    ) -> b::rdma_link_layer {
        b::rdma_link_layer_IB_LINK_LAYER_ETHERNET
    }
}
