// SPDX-License-Identifier: GPL-2.0

//! Local operations of the send queue (IBTA 10.6.7, 11.4.1.2), which change
//! the device's MR and MW tables and so stay kernel-side: BIND_MW,
//! LOCAL_INV, REG_MR. The RC engine runs them in SQ order
//! ([`crate::proto::rc::LocalOps`]).

use super::super::keys::{self, Kind};
use super::super::mr::access;
use super::super::mw::Binding;
use super::*;
use crate::proto::rc::{WcStatus, WrOpcode};

impl Glue<'_> {
    /// Runs a local operation; returns its status (rxe's:
    /// `IB_WC_LOC_QP_OP_ERR` for a failed REG_MR or MR invalidation,
    /// `IB_WC_MW_BIND_ERR` for a window).
    pub(super) fn run_local_op(&self, w: &SendWqe) -> WcStatus {
        let pd = self.qp.pd;
        let ok = |r: Result| r.is_ok();
        match WrOpcode::from_raw(w.opcode) {
            Some(WrOpcode::RegMr) => {
                // Fast registration is for kernel consumers (rxe's provider
                // never emits it; a user WQE naming a kernel MR fails the PD
                // check).
                let r = self
                    .qp
                    .dev
                    .mrs
                    .register(pd, w.reg_mr_key, w.reg_key, w.reg_access);
                return if ok(r) {
                    WcStatus::Success
                } else {
                    WcStatus::LocQpOpErr
                };
            }
            Some(WrOpcode::LocalInv) => {
                // `ex` is `invalidate_rkey` for LOCAL_INV: a window's or a
                // fast-registration MR's key.
                return if keys::kind(w.ex) == Kind::Mw {
                    match self.qp.dev.mws.invalidate(pd, w.ex) {
                        Ok(()) => WcStatus::Success,
                        Err(_) => WcStatus::MwBindErr,
                    }
                } else if ok(self.qp.dev.mrs.invalidate(pd, w.ex)) {
                    WcStatus::Success
                } else {
                    WcStatus::LocQpOpErr
                };
            }
            _ => {}
        }
        let (va, len) = (w.remote_addr, w.mw_length);
        // C10-74: remote write or atomic access through a window needs local
        // write access to its MR.
        let mut need = access::MW_BIND;
        if w.mw_access & (access::REMOTE_WRITE | access::REMOTE_ATOMIC) != 0 {
            need |= access::LOCAL_WRITE;
        }
        let in_mr = self.qp.dev.mrs.with(w.mw_mr_lkey, |e| {
            let l = usize::try_from(len).map_err(|_| EINVAL)?;
            e.check(pd, va, l, need).map(|_| ())
        });
        if in_mr.is_err() {
            return WcStatus::MwBindErr;
        }
        let b = Binding {
            mr_key: w.mw_mr_lkey,
            va,
            len,
            access: w.mw_access,
        };
        match self
            .qp
            .dev
            .mws
            .bind(pd, self.qp.qpn, w.mw_rkey, w.mw_new_rkey, b)
        {
            Ok(()) => WcStatus::Success,
            Err(_) => WcStatus::MwBindErr,
        }
    }
}
