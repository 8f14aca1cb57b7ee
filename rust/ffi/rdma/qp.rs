// SPDX-License-Identifier: GPL-2.0

//! QPs: attribute records and the `create_qp` … `post_recv` callbacks.

use super::ah::Av;
use super::cq::CqObject;
use super::device::Device;
use super::event::QpEvents;
use super::object::{post_result, Object};
use super::pd::PdId;
use super::srq::SrqObject;
use super::{Adapter, Driver};
use crate::ffi::bindings as b;
use crate::ffi::rxe_abi::wc::qp_handle;
use crate::ffi::udata::UData;
use crate::ffi::wr::{RecvWrs, SendWrs};
use core::mem::size_of;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;

/// QP transport type (IBTA 9.8).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// The general services QP (QP1, IBTA 10.2.4): UD to the MAD layer.
    Gsi,
}

impl QpType {
    /// Datagram service (UD or the GSI QP).
    pub(crate) fn is_datagram(self) -> bool {
        matches!(self, QpType::Ud | QpType::Gsi)
    }
}

/// Work queue sizes of a QP (`struct ib_qp_cap`).
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct QpCaps {
    pub(crate) max_send_wr: u32,
    pub(crate) max_recv_wr: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_inline_data: u32,
}

impl QpCaps {
    pub(crate) fn from_c(c: &b::ib_qp_cap) -> Self {
        QpCaps {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }

    pub(crate) fn to_c(self, c: &mut b::ib_qp_cap) {
        c.max_send_wr = self.max_send_wr;
        c.max_recv_wr = self.max_recv_wr;
        c.max_send_sge = self.max_send_sge;
        c.max_recv_sge = self.max_recv_sge;
        c.max_inline_data = self.max_inline_data;
    }
}

/// A QP's creation attributes (`struct ib_qp_init_attr`), as the driver sees
/// them; `caps` is updated to the sizes granted.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QpInit {
    pub(crate) qp_type: QpType,
    pub(crate) caps: QpCaps,
    /// Every send WR completes with a CQE (`IB_SIGNAL_ALL_WR`).
    pub(crate) sq_sig_all: bool,
}

/// QP states (IBTA 10.3.1; `enum ib_qp_state`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[repr(u32)]
pub(crate) enum QpState {
    #[default]
    Reset = b::ib_qp_state_IB_QPS_RESET,
    Init = b::ib_qp_state_IB_QPS_INIT,
    Rtr = b::ib_qp_state_IB_QPS_RTR,
    Rts = b::ib_qp_state_IB_QPS_RTS,
    Sqd = b::ib_qp_state_IB_QPS_SQD,
    Sqe = b::ib_qp_state_IB_QPS_SQE,
    Err = b::ib_qp_state_IB_QPS_ERR,
}

impl QpState {
    /// From a raw `enum ib_qp_state`; `None` outside the enum.
    pub(crate) fn from_c(v: u32) -> Option<Self> {
        Some(match v {
            b::ib_qp_state_IB_QPS_RESET => Self::Reset,
            b::ib_qp_state_IB_QPS_INIT => Self::Init,
            b::ib_qp_state_IB_QPS_RTR => Self::Rtr,
            b::ib_qp_state_IB_QPS_RTS => Self::Rts,
            b::ib_qp_state_IB_QPS_SQD => Self::Sqd,
            b::ib_qp_state_IB_QPS_SQE => Self::Sqe,
            b::ib_qp_state_IB_QPS_ERR => Self::Err,
            _ => return None,
        })
    }
}

/// Whether `cur → next` with attribute `mask` is a legal QP transition for
/// `qp_type` (IBTA 10.3.1 table; the RDMA core's `ib_modify_qp_is_ok`).
pub(crate) fn modify_qp_is_ok(cur: QpState, next: QpState, qp_type: QpType, mask: u32) -> bool {
    let t = match qp_type {
        QpType::Rc => b::ib_qp_type_IB_QPT_RC,
        QpType::Uc => b::ib_qp_type_IB_QPT_UC,
        QpType::Ud => b::ib_qp_type_IB_QPT_UD,
        QpType::Gsi => b::ib_qp_type_IB_QPT_GSI,
    };
    // SAFETY: pure function of its arguments.
    unsafe { b::ib_modify_qp_is_ok(cur as u32, next as u32, t, mask) }
}

/// `IB_QP_*` attribute mask bits (`enum ib_qp_attr_mask`).
pub(crate) mod qp_mask {
    use super::b;
    pub(crate) const STATE: u32 = b::ib_qp_attr_mask_IB_QP_STATE;
    pub(crate) const CUR_STATE: u32 = b::ib_qp_attr_mask_IB_QP_CUR_STATE;
    pub(crate) const EN_SQD_ASYNC_NOTIFY: u32 = b::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY;
    pub(crate) const ACCESS_FLAGS: u32 = b::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS;
    pub(crate) const PKEY_INDEX: u32 = b::ib_qp_attr_mask_IB_QP_PKEY_INDEX;
    pub(crate) const PORT: u32 = b::ib_qp_attr_mask_IB_QP_PORT;
    pub(crate) const QKEY: u32 = b::ib_qp_attr_mask_IB_QP_QKEY;
    pub(crate) const AV: u32 = b::ib_qp_attr_mask_IB_QP_AV;
    pub(crate) const PATH_MTU: u32 = b::ib_qp_attr_mask_IB_QP_PATH_MTU;
    pub(crate) const TIMEOUT: u32 = b::ib_qp_attr_mask_IB_QP_TIMEOUT;
    pub(crate) const RETRY_CNT: u32 = b::ib_qp_attr_mask_IB_QP_RETRY_CNT;
    pub(crate) const RNR_RETRY: u32 = b::ib_qp_attr_mask_IB_QP_RNR_RETRY;
    pub(crate) const RQ_PSN: u32 = b::ib_qp_attr_mask_IB_QP_RQ_PSN;
    pub(crate) const MAX_QP_RD_ATOMIC: u32 = b::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC;
    pub(crate) const MIN_RNR_TIMER: u32 = b::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER;
    pub(crate) const SQ_PSN: u32 = b::ib_qp_attr_mask_IB_QP_SQ_PSN;
    pub(crate) const MAX_DEST_RD_ATOMIC: u32 = b::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC;
    pub(crate) const CAP: u32 = b::ib_qp_attr_mask_IB_QP_CAP;
    pub(crate) const DEST_QPN: u32 = b::ib_qp_attr_mask_IB_QP_DEST_QPN;
    /// Every bit `ib_modify_qp` may pass to a driver.
    pub(crate) const STANDARD: u32 = (b::ib_qp_attr_mask_IB_QP_RATE_LIMIT << 1) - 1;
}

/// QP attributes (`struct ib_qp_attr`): what `modify_qp` sets (the fields
/// named by `mask`) and `query_qp` reports.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct QpAttr {
    pub(crate) mask: u32,
    pub(crate) state: QpState,
    pub(crate) cur_state: QpState,
    /// `enum ib_mtu` (1 = 256 … 5 = 4096).
    pub(crate) path_mtu: u32,
    pub(crate) qkey: u32,
    pub(crate) rq_psn: u32,
    pub(crate) sq_psn: u32,
    pub(crate) dest_qpn: u32,
    pub(crate) access: u32,
    pub(crate) caps: QpCaps,
    pub(crate) av: Option<Av>,
    pub(crate) pkey_index: u16,
    pub(crate) en_sqd_async_notify: bool,
    pub(crate) sq_draining: bool,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) port: u32,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
}

impl QpAttr {
    /// From a `modify_qp` call. A raw state outside the enum is `EINVAL`;
    /// an AV without a GRH is `EINVAL` (checked only if `IB_QP_AV` is set).
    pub(crate) fn from_c(a: &b::ib_qp_attr, mask: u32) -> Result<Self> {
        let st = |v: u32| QpState::from_c(v).ok_or(EINVAL);
        Ok(QpAttr {
            mask,
            state: if mask & qp_mask::STATE != 0 {
                st(a.qp_state)?
            } else {
                QpState::Reset
            },
            cur_state: if mask & qp_mask::CUR_STATE != 0 {
                st(a.cur_qp_state)?
            } else {
                QpState::Reset
            },
            path_mtu: a.path_mtu,
            qkey: a.qkey,
            rq_psn: a.rq_psn,
            sq_psn: a.sq_psn,
            dest_qpn: a.dest_qp_num,
            access: a.qp_access_flags as u32,
            caps: QpCaps::from_c(&a.cap),
            av: if mask & qp_mask::AV != 0 {
                Some(Av::from_c(&a.ah_attr)?)
            } else {
                None
            },
            pkey_index: a.pkey_index,
            en_sqd_async_notify: a.en_sqd_async_notify != 0,
            sq_draining: false,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            min_rnr_timer: a.min_rnr_timer,
            port: a.port_num,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
        })
    }

    pub(crate) fn to_c(self, a: &mut b::ib_qp_attr) {
        a.qp_state = self.state as u32;
        a.cur_qp_state = self.state as u32;
        a.path_mtu = self.path_mtu;
        a.path_mig_state = b::ib_mig_state_IB_MIG_MIGRATED;
        a.qkey = self.qkey;
        a.rq_psn = self.rq_psn;
        a.sq_psn = self.sq_psn;
        a.dest_qp_num = self.dest_qpn;
        a.qp_access_flags = self.access as i32;
        self.caps.to_c(&mut a.cap);
        if let Some(av) = &self.av {
            av.to_c(&mut a.ah_attr);
        }
        a.pkey_index = self.pkey_index;
        a.en_sqd_async_notify = self.en_sqd_async_notify as u8;
        a.sq_draining = self.sq_draining as u8;
        a.max_rd_atomic = self.max_rd_atomic;
        a.max_dest_rd_atomic = self.max_dest_rd_atomic;
        a.min_rnr_timer = self.min_rnr_timer;
        a.port_num = self.port;
        a.timeout = self.timeout;
        a.retry_cnt = self.retry_cnt;
        a.rnr_retry = self.rnr_retry;
    }
}

/// What a QP keeps: the driver's QP and its event source.
pub(super) struct QpData<Q> {
    pub(super) events: QpEvents,
    pub(super) qp: Q,
}

/// A QP of driver `T` as the RDMA core allocated it.
pub(super) type QpObject<T> = Object<b::ib_qp, QpData<<T as Driver>::Qp>>;

impl<T: Driver> Adapter<T> {
    /// The device and object of a live QP of ours.
    ///
    /// # Safety
    ///
    /// `ibqp` is a live QP created by [`Self::create_qp`], for `'a`.
    unsafe fn qp<'a>(ibqp: *mut b::ib_qp) -> (&'a Device<T>, &'a QpObject<T>) {
        // SAFETY: by the caller's guarantee the QP and its device are ours
        // and live, and its data is set.
        unsafe {
            (
                Device::from_raw((*ibqp).device),
                QpObject::<T>::from_raw(ibqp),
            )
        }
    }

    /// `ib_device_ops.create_qp`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a zeroed QP object of our size whose
    /// `device` and `pd` are set, valid attributes with CQs (and SRQ) of
    /// ours that the QP holds while it lives, and a null or valid udata.
    pub(super) unsafe extern "C" fn create_qp(
        ibqp: *mut b::ib_qp,
        init: *mut b::ib_qp_init_attr,
        udata: *mut b::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: the core passes a null or valid udata.
            let udata = unsafe { UData::from_raw(udata) };
            let uc = udata.ucontext();
            // SAFETY: the core passes valid attributes, ours for the call.
            let ia = unsafe { &mut *init };
            // SAFETY: the core set the QP's `device` (ours) and `pd`.
            let (dev, pd) = unsafe { (Device::<T>::from_raw((*ibqp).device), (*ibqp).pd) };
            let qp_type = match ia.qp_type {
                b::ib_qp_type_IB_QPT_RC => QpType::Rc,
                b::ib_qp_type_IB_QPT_UC => QpType::Uc,
                b::ib_qp_type_IB_QPT_UD => QpType::Ud,
                b::ib_qp_type_IB_QPT_GSI if uc.is_none() => QpType::Gsi,
                _ => return Err(crate::ffi::errno::EOPNOTSUPP()),
            };
            if ia.create_flags != 0 {
                return Err(crate::ffi::errno::EOPNOTSUPP());
            }
            if uc.is_some() && udata.outlen() < size_of::<b::rxe_create_qp_resp>() {
                return Err(EINVAL);
            }
            if ia.send_cq.is_null() || ia.recv_cq.is_null() {
                return Err(EINVAL);
            }
            let mut qi = QpInit {
                qp_type,
                caps: QpCaps::from_c(&ia.cap),
                sq_sig_all: ia.sq_sig_type == b::ib_sig_type_IB_SIGNAL_ALL_WR,
            };
            // SAFETY: CQs of this device (the core checked the uobjects),
            // live and set while the QP holds them.
            let (scq, rcq) = unsafe {
                (
                    CqObject::<T>::from_raw(ia.send_cq),
                    CqObject::<T>::from_raw(ia.recv_cq),
                )
            };
            let srq = if ia.srq.is_null() {
                None
            } else {
                // SAFETY: an SRQ of this device (checked by the core), live
                // and set while the QP holds it.
                Some(unsafe { SrqObject::<T>::from_raw(ia.srq) })
            };
            // SAFETY: the QP lives until `destroy_qp`, which detaches the
            // event source first.
            let events = unsafe { QpEvents::new(ibqp) }?;
            let c = T::create_qp(
                dev,
                PdId::of(pd),
                &mut qi,
                &scq.data().cq,
                &rcq.data().cq,
                srq.map(|s| &s.data().srq),
                uc,
                qp_handle(ibqp),
                events.clone(),
            )?;
            let mut resp = [0u8; 32];
            resp[..16].copy_from_slice(&c.rq.bytes());
            resp[16..].copy_from_slice(&c.sq.bytes());
            if let Err(e) = udata.write(&resp) {
                T::destroy_qp(dev, &c.qp);
                events.detach();
                return Err(e);
            }
            qi.caps.to_c(&mut ia.cap);
            // SAFETY: the core's QP object, not yet visible to anyone else.
            unsafe { (*ibqp).qp_num = c.qpn };
            // SAFETY: as above: live, of our size, its data not yet set.
            unsafe { QpObject::<T>::init(ibqp, QpData { events, qp: c.qp }) };
            Ok(0)
        })
    }

    /// `ib_device_ops.modify_qp`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a QP created by [`Self::create_qp`]
    /// and valid attributes.
    pub(super) unsafe extern "C" fn modify_qp(
        ibqp: *mut b::ib_qp,
        attr: *mut b::ib_qp_attr,
        mask: c_int,
        _udata: *mut b::ib_udata,
    ) -> c_int {
        from_result(|| {
            let mask = mask as u32;
            if mask & !qp_mask::STANDARD != 0 {
                return Err(crate::ffi::errno::EOPNOTSUPP());
            }
            // SAFETY: the core passes valid attributes.
            let a = QpAttr::from_c(unsafe { &*attr }, mask)?;
            // SAFETY: a live QP of ours.
            let (dev, o) = unsafe { Self::qp(ibqp) };
            T::modify_qp(dev, &o.data().qp, &a)?;
            Ok(0)
        })
    }

    /// `ib_device_ops.query_qp`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a QP created by [`Self::create_qp`]
    /// and buffers to fill.
    pub(super) unsafe extern "C" fn query_qp(
        ibqp: *mut b::ib_qp,
        attr: *mut b::ib_qp_attr,
        _mask: c_int,
        init: *mut b::ib_qp_init_attr,
    ) -> c_int {
        // SAFETY: a live QP of ours.
        let (_, o) = unsafe { Self::qp(ibqp) };
        let mut a = QpAttr::default();
        let mut qi = QpInit {
            qp_type: QpType::Rc,
            caps: QpCaps::default(),
            sq_sig_all: false,
        };
        T::query_qp(&o.data().qp, &mut a, &mut qi);
        let mut ca = b::ib_qp_attr::default();
        a.to_c(&mut ca);
        let mut ci = b::ib_qp_init_attr::default();
        qi.caps.to_c(&mut ci.cap);
        // SAFETY: the QP is live; these fields are set at creation and
        // immutable afterwards.
        unsafe {
            let q = o.as_ptr();
            ci.qp_type = (*q).qp_type;
            ci.send_cq = (*q).send_cq;
            ci.recv_cq = (*q).recv_cq;
        }
        ci.sq_sig_type = if qi.sq_sig_all {
            b::ib_sig_type_IB_SIGNAL_ALL_WR
        } else {
            b::ib_sig_type_IB_SIGNAL_REQ_WR
        };
        // SAFETY: the core passes two buffers to fill.
        unsafe {
            attr.write(ca);
            init.write(ci);
        }
        0
    }

    /// `ib_device_ops.destroy_qp`.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a QP created by [`Self::create_qp`].
    pub(super) unsafe extern "C" fn destroy_qp(
        ibqp: *mut b::ib_qp,
        _udata: *mut b::ib_udata,
    ) -> c_int {
        {
            // SAFETY: a live QP of ours.
            let (dev, o) = unsafe { Self::qp(ibqp) };
            T::destroy_qp(dev, &o.data().qp);
            o.data().events.detach();
        }
        // SAFETY: the borrows have ended; nothing uses the QP after this.
        unsafe { QpObject::<T>::drop_data(ibqp) };
        0
    }

    /// `ib_device_ops.post_send`: from user space this is the SQ doorbell
    /// (no work requests: they are in the shared ring).
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a QP created by [`Self::create_qp`],
    /// a null or valid chain and a valid `bad` pointer.
    pub(super) unsafe extern "C" fn post_send(
        ibqp: *mut b::ib_qp,
        wr: *const b::ib_send_wr,
        bad: *mut *const b::ib_send_wr,
    ) -> c_int {
        // SAFETY: a live QP of ours.
        let (dev, o) = unsafe { Self::qp(ibqp) };
        if !wr.is_null() {
            // SAFETY: a kernel consumer's valid chain, live for the call,
            // whose UD requests name AHs of this device (created by
            // `create_ah`, as `ah_num` requires).
            let mut wrs = unsafe { SendWrs::new(wr, Self::ah_num) };
            let r = T::post_send_wrs(dev, &o.data().qp, &mut wrs);
            // SAFETY: the core passes a valid `bad` pointer.
            return unsafe { post_result(r, bad, wrs.bad()) };
        }
        match T::post_send(dev, &o.data().qp) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// `ib_device_ops.post_recv`: kernel consumers (user space posts in the
    /// shared ring).
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core with a QP created by [`Self::create_qp`],
    /// a valid chain and a valid `bad` pointer.
    pub(super) unsafe extern "C" fn post_recv(
        ibqp: *mut b::ib_qp,
        wr: *const b::ib_recv_wr,
        bad: *mut *const b::ib_recv_wr,
    ) -> c_int {
        // SAFETY: the core passes a valid chain, live for the call.
        let mut wrs = unsafe { RecvWrs::new(wr) };
        // SAFETY: a live QP of ours.
        let (dev, o) = unsafe { Self::qp(ibqp) };
        let r = T::post_recv_wrs(dev, &o.data().qp, &mut wrs);
        // SAFETY: the core passes a valid `bad` pointer.
        unsafe { post_result(r, bad, wrs.bad()) }
    }
}
