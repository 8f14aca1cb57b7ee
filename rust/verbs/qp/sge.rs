// SPDX-License-Identifier: GPL-2.0

//! Scatter/gather: a WQE's bytes mapped onto its SGEs through the MR table
//! (lkey, PD, access and bounds checked per piece), and remote keys (an MR's
//! or a bound window's) resolved to the region they open.

use super::*;

impl Glue<'_> {
    /// Copies `dst.len()` bytes at `offset` of the WQE's data into `dst`.
    pub(super) fn gather(&self, m: &SendMsg, offset: u32, dst: &mut [u8]) -> Result {
        let sq = self.io.sq.as_ref().ok_or(EINVAL)?;
        // ATOMIC_WRITE's 8 bytes are in the WQE (`dma.atomic_wr`, where
        // inline data goes).
        if m.wqe.send_flags & send_flags::INLINE != 0 || m.wqe.opcode == wr::ATOMIC_WRITE {
            return SendWqe::inline_data(sq, m.slot, offset as usize, dst);
        }
        let n = m.wqe.num_sge.min(self.io.caps.max_send_sge);
        self.walk_sges(
            n,
            |i| SendWqe::sge(sq, m.slot, i),
            offset,
            dst.len(),
            |e, off, r| e.read(off, &mut dst[r]),
            0,
        )
    }

    /// Scatters `data` at `offset` of the message into receive WQE `slot`.
    pub(super) fn scatter(&self, slot: u32, offset: u32, data: &[u8]) -> Result {
        let rq = self.io.rq.as_ref().ok_or(EINVAL)?;
        let w = RecvWqe::read(rq, slot)?;
        if w.num_sge > self.io.caps.max_recv_sge {
            // A malformed WQE in the shared ring (the provider never writes
            // one): IBTA 9.9.3.1.1 class A, local QP operation error.
            return Err(E2BIG);
        }
        self.walk_sges(
            w.num_sge,
            |i| RecvWqe::sge(rq, slot, i),
            offset,
            data.len(),
            |e, off, r| e.write(off, &data[r]),
            access::LOCAL_WRITE,
        )
    }

    /// Scatters `data` at `offset` of the message into the SRQ WQE taken
    /// into entry `i`.
    pub(super) fn scatter_taken(&self, i: usize, offset: u32, data: &[u8]) -> Result {
        let t = self.io.taken.get(i).copied().ok_or(EINVAL)?;
        let ms = self.io.srq_sge;
        let sges = self.io.taken_sges.get(i * ms..(i + 1) * ms).ok_or(EINVAL)?;
        if t.num_sge > ms as u32 {
            // A malformed SRQ WQE (see `scatter`).
            return Err(E2BIG);
        }
        self.walk_sges(
            t.num_sge,
            |k| sges.get(k as usize).copied().ok_or(EINVAL),
            offset,
            data.len(),
            |e, off, r| e.write(off, &data[r]),
            access::LOCAL_WRITE,
        )
    }

    /// Scatters response data (READ, atomic) into the SGEs of send WQE `m`.
    pub(super) fn scatter_send(&self, m: &SendMsg, offset: u32, data: &[u8]) -> Result {
        let sq = self.io.sq.as_ref().ok_or(EINVAL)?;
        let n = m.wqe.num_sge.min(self.io.caps.max_send_sge);
        self.walk_sges(
            n,
            |i| SendWqe::sge(sq, m.slot, i),
            offset,
            data.len(),
            |e, off, r| e.write(off, &data[r]),
            access::LOCAL_WRITE,
        )
    }

    /// Maps bytes `[offset, offset + len)` of a WQE's data onto its `n`
    /// SGEs (`sge(i)`), and calls `f(region, offset_in_region, range)` for
    /// each piece under the MR table lock, after checking the lkey, the PD
    /// and `need` access. `EFAULT` if the SGEs are shorter than the data.
    pub(super) fn walk_sges(
        &self,
        n: u32,
        sge: impl Fn(u32) -> Result<Sge>,
        offset: u32,
        len: usize,
        mut f: impl FnMut(&MrEntry, Span, core::ops::Range<usize>) -> Result,
        need: u32,
    ) -> Result {
        let mut skip = offset as usize;
        let mut done = 0;
        for i in 0..n {
            if done == len {
                break;
            }
            let s = sge(i)?;
            let sl = s.length() as usize;
            if skip >= sl {
                skip -= sl;
                continue;
            }
            let take = (sl - skip).min(len - done);
            let pd = self.qp.pd;
            self.qp.dev.mrs.with(s.lkey(), |e| {
                let off = e.check_sge(pd, &s, skip, take, need)?;
                f(e, off, done..done + take)
            })?;
            done += take;
            skip = 0;
        }
        if done == len {
            Ok(())
        } else {
            Err(EFAULT)
        }
    }

    /// Runs `f` on the MR that remote key `rkey` opens for `[va, va + len)`
    /// with `need` access, and the offset of `va` in it: an MR's own rkey,
    /// or a bound memory window's (checked against the window first).
    pub(super) fn remote<R>(
        &self,
        rkey: u32,
        va: u64,
        len: usize,
        need: u32,
        f: impl FnOnce(&MrEntry, Span) -> Result<R>,
    ) -> Result<R> {
        let pd = self.qp.pd;
        if rkey >> 8 >= MW_BASE {
            let b = self
                .qp
                .dev
                .mws
                .resolve(pd, self.qp.qpn, rkey)
                .ok_or(EACCES)?;
            let end = va.checked_add(len as u64).ok_or(EFAULT)?;
            if va < b.va || end > b.va.saturating_add(b.len) || b.access & need != need {
                return Err(EACCES);
            }
            return self.qp.dev.mrs.with(b.mr_key, |e| {
                let off = e.check(pd, va, len, 0)?;
                f(e, off)
            });
        }
        self.qp.dev.mrs.with(rkey, |e| {
            let off = e.check(pd, va, len, need)?;
            f(e, off)
        })
    }
}
