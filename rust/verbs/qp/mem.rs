// SPDX-License-Identifier: GPL-2.0

//! The RC engine's [`Memory`] on the device's MR and MW tables: local keys
//! (lkey, PD, access and bounds checked in the same RCU read-side section
//! as the copy, per piece: [`super::super::mr`]), remote keys (an MR's own
//! rkey, or a memory window bound to this QP, checked against the window
//! first), atomics under the device's atomics lock, and SEND_WITH_INV's
//! invalidation.

use super::super::keys::{self, Kind};
use super::super::mr::{access, MrEntry, Span};
use super::*;
use crate::ffi::rxe_abi::Sge;
use crate::proto::bytes::Bytes;
use crate::proto::rc::{AtomicOp, MemError, Memory};

/// The engine's name for a failed access: `EFAULT` (outside the region) is
/// a length error where lengths matter; anything else is a denial.
fn mem_err(e: Error) -> MemError {
    if e == EFAULT {
        MemError::Fault
    } else {
        MemError::Denied
    }
}

/// Writes `src`'s pieces back to back into span `at` of region `e` (checked
/// for all of `src` by the caller, in the same hold of the region).
fn write_pieces(e: &MrEntry, at: Span, src: Bytes<'_>) -> Result {
    let [head, tail] = src.pieces();
    e.write(at, head)?;
    if !tail.is_empty() {
        e.write(at.after(head.len())?, tail)?;
    }
    Ok(())
}

impl Glue<'_> {
    /// Runs `f` on the region local SGE `sge` names and the span of the `len`
    /// bytes at `skip` into the SGE, after checking the PD, `need` access and
    /// that the bytes lie inside the SGE and the region.
    fn local<R>(
        &self,
        sge: &Sge,
        skip: usize,
        len: usize,
        need: u32,
        f: impl FnOnce(&MrEntry, Span) -> Result<R>,
    ) -> core::result::Result<R, MemError> {
        let pd = self.qp.pd;
        self.qp
            .dev
            .mrs
            .with(sge.lkey(), |e| {
                let at = e.check_sge(pd, sge, skip, len, need)?;
                f(e, at)
            })
            .map_err(mem_err)
    }

    /// Runs `f` on the MR that remote key `rkey` opens for `[va, va + len)`
    /// with `need` access, and the offset of `va` in it.
    fn remote<R>(
        &self,
        rkey: u32,
        va: u64,
        len: usize,
        need: u32,
        f: impl FnOnce(&MrEntry, Span) -> Result<R>,
    ) -> core::result::Result<R, MemError> {
        let pd = self.qp.pd;
        if keys::kind(rkey) == Kind::Mw {
            let b = self
                .qp
                .dev
                .mws
                .resolve(pd, self.qp.qpn, rkey)
                .ok_or(MemError::Denied)?;
            let end = va.checked_add(len as u64).ok_or(MemError::Fault)?;
            if va < b.va || end > b.va.saturating_add(b.len) || b.access & need != need {
                return Err(MemError::Denied);
            }
            return self
                .qp
                .dev
                .mrs
                .with(b.mr_key, |e| {
                    let off = e.check(pd, va, len, 0)?;
                    f(e, off)
                })
                .map_err(mem_err);
        }
        self.qp
            .dev
            .mrs
            .with(rkey, |e| {
                let off = e.check(pd, va, len, need)?;
                f(e, off)
            })
            .map_err(mem_err)
    }
}

impl Memory for Glue<'_> {
    fn local_check(
        &mut self,
        sge: &Sge,
        skip: usize,
        len: usize,
    ) -> core::result::Result<(), MemError> {
        self.local(sge, skip, len, 0, |_, _| Ok(()))
    }
    fn local_read(
        &mut self,
        sge: &Sge,
        skip: usize,
        dst: &mut [u8],
    ) -> core::result::Result<(), MemError> {
        self.local(sge, skip, dst.len(), 0, |e, at| e.read(at, dst))
    }
    fn local_write(
        &mut self,
        sge: &Sge,
        skip: usize,
        src: Bytes<'_>,
    ) -> core::result::Result<(), MemError> {
        self.local(sge, skip, src.len(), access::LOCAL_WRITE, |e, at| {
            write_pieces(e, at, src)
        })
    }
    fn remote_check(
        &mut self,
        rkey: u32,
        va: u64,
        len: usize,
        need: u32,
    ) -> core::result::Result<(), MemError> {
        self.remote(rkey, va, len, need, |_, _| Ok(()))
    }
    fn remote_read(
        &mut self,
        rkey: u32,
        va: u64,
        dst: &mut [u8],
    ) -> core::result::Result<(), MemError> {
        self.remote(rkey, va, dst.len(), access::REMOTE_READ, |e, off| {
            e.read(off, dst)
        })
    }
    fn remote_write(
        &mut self,
        rkey: u32,
        va: u64,
        src: Bytes<'_>,
    ) -> core::result::Result<(), MemError> {
        let write = || {
            self.remote(rkey, va, src.len(), access::REMOTE_WRITE, |e, off| {
                write_pieces(e, off, src)
            })
        };
        // ATOMIC_WRITE's 8 aligned bytes must not land between an atomic's
        // read and write: an 8-byte aligned write (an ATOMIC_WRITE, or an RDMA
        // WRITE of that shape, for which the lock costs nothing it needs)
        // takes the device's atomics lock too.
        if src.len() == 8 && va & 7 == 0 {
            self.qp.dev.mrs.atomically(write)
        } else {
            write()
        }
    }
    fn remote_atomic(
        &mut self,
        rkey: u32,
        va: u64,
        op: AtomicOp,
    ) -> core::result::Result<u64, MemError> {
        // Checked and executed in one read-side section (the region cannot
        // go away in between), under the device's atomics lock (no other
        // atomic of the device reads or writes between the read and the
        // write).
        self.qp.dev.mrs.atomically(|| {
            self.remote(rkey, va, 8, access::REMOTE_ATOMIC, |e, off| {
                let mut cur = [0u8; 8];
                e.read(off, &mut cur)?;
                let old = u64::from_ne_bytes(cur);
                e.write(off, &op.apply(old).to_ne_bytes())?;
                Ok(old)
            })
        })
    }
    fn invalidate(&mut self, key: u32) -> bool {
        let pd = self.qp.pd;
        if keys::kind(key) == Kind::Mw {
            self.qp.dev.mws.invalidate(pd, key).is_ok()
        } else {
            self.qp.dev.mrs.invalidate(pd, key).is_ok()
        }
    }
}
