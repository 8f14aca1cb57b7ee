//! Scatter/gather (IBTA 10.7.2.1): a message's bytes mapped onto a WQE's SGEs, each
//! piece checked and accessed through [`Memory`] (lkey, PD, access and bounds).

use super::super::bytes::Bytes;
use super::env::{Env, MemError, Memory};
use super::types::{send_flags, ScatterGather, SendWqe, WrOpcode};
use super::{Engine, SendMsg, Tables};

/// Why bytes could not be placed into (or taken from) a WQE's buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SgeError {
    /// The SGEs are shorter than the data, or an SGE leaves its region: a length error.
    Len,
    /// A bad lkey, another PD, a missing access right, an unreadable SGE: protection.
    Prot,
    /// A malformed WQE (more SGEs than the QP allows): a local QP operation error.
    QpOp,
}

impl From<MemError> for SgeError {
    fn from(e: MemError) -> Self {
        match e {
            MemError::Fault => SgeError::Len,
            MemError::Denied => SgeError::Prot,
        }
    }
}

/// What a walk does with each piece.
pub(super) enum Dir<'a> {
    /// Checks the piece is readable.
    Check,
    /// Reads the pieces into this buffer.
    Read(&'a mut [u8]),
    /// Writes these bytes into the pieces (needs local write access).
    Write(Bytes<'a>),
}

/// Maps bytes `[offset, offset + len)` of a WQE's data onto its `n` SGEs (`sge(env, i)`)
/// and does `dir` on each piece (`len` is the buffer's length for reads and writes).
/// [`SgeError::Len`] if the SGEs hold fewer bytes.
pub(super) fn walk<M: Memory + ?Sized>(
    env: &mut M,
    n: u32,
    sge: impl Fn(&M, u32) -> Option<M::Sge>,
    offset: u32,
    len: usize,
    mut dir: Dir<'_>,
) -> Result<(), SgeError> {
    let mut skip = offset as usize;
    let mut done = 0usize;
    for i in 0..n {
        if done == len {
            break;
        }
        let s = sge(env, i).ok_or(SgeError::Prot)?;
        let sl = s.length() as usize;
        if skip >= sl {
            skip -= sl;
            continue;
        }
        let take = (sl - skip).min(len - done);
        let end = done + take;
        match &mut dir {
            Dir::Check => env.local_check(&s, skip, take)?,
            Dir::Read(d) => {
                let d = d.get_mut(done..end).ok_or(SgeError::Len)?;
                env.local_read(&s, skip, d)?
            }
            Dir::Write(src) => {
                let src = src.get(done, end).ok_or(SgeError::Len)?;
                env.local_write(&s, skip, src)?
            }
        }
        done = end;
        skip = 0;
    }
    if done == len {
        Ok(())
    } else {
        Err(SgeError::Len)
    }
}

/// Copies `dst.len()` bytes at `offset` of send WQE `w`'s data (in SQ slot `slot`) into
/// `dst`: from its inline data (and ATOMIC_WRITE's 8 bytes, kept there) or its SGEs (at
/// most `max_send_sge` of them).
pub(super) fn gather<E: Env + ?Sized>(
    env: &mut E,
    w: &SendWqe,
    slot: u32,
    offset: u32,
    dst: &mut [u8],
) -> Result<(), MemError> {
    if w.send_flags & send_flags::INLINE != 0 || w.opcode == WrOpcode::AtomicWrite as u32 {
        return if env.sq_inline(slot, offset, dst) {
            Ok(())
        } else {
            Err(MemError::Denied)
        };
    }
    let n = w.num_sge.min(env.attrs().max_send_sge);
    let len = dst.len();
    walk(
        env,
        n,
        |e, i| e.sq_sge(slot, i),
        offset,
        len,
        Dir::Read(dst),
    )
    .map_err(|e| match e {
        SgeError::Len => MemError::Fault,
        _ => MemError::Denied,
    })
}

impl<T: Tables> Engine<T> {
    /// Whether every byte send WQE `w` (in slot `slot`) gathers lies in a region the QP
    /// may read.
    pub(super) fn check_gather<E: Env<Sge = T::Sge>>(env: &mut E, w: &SendWqe, slot: u32) -> bool {
        let len = w.length as usize;
        walk(env, w.num_sge, |e, i| e.sq_sge(slot, i), 0, len, Dir::Check).is_ok()
    }

    /// Scatters `data` at `offset` of the message into receive WQE `slot` of the RQ.
    pub(super) fn scatter<E: Env<Sge = T::Sge>>(
        env: &mut E,
        slot: u32,
        offset: u32,
        data: Bytes<'_>,
    ) -> Result<(), SgeError> {
        let w = env.rq_wqe(slot).ok_or(SgeError::Prot)?;
        if w.num_sge > env.attrs().max_recv_sge {
            // A malformed WQE in the shared ring (the provider never writes one): IBTA
            // 9.9.3.1.1 class A, local QP operation error.
            return Err(SgeError::QpOp);
        }
        let len = data.len();
        walk(
            env,
            w.num_sge,
            |e, i| e.rq_sge(slot, i),
            offset,
            len,
            Dir::Write(data),
        )
    }

    /// Scatters `data` at `offset` of the message into the SRQ WQE taken into entry `i`.
    pub(super) fn scatter_taken<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        i: usize,
        offset: u32,
        data: Bytes<'_>,
    ) -> Result<(), SgeError> {
        let ms = env.attrs().srq_sge.unwrap_or(0) as usize;
        let t = self.t.taken().get(i).copied().ok_or(SgeError::Prot)?;
        let from = i.checked_mul(ms).ok_or(SgeError::Prot)?;
        let sges = self
            .t
            .taken_sges()
            .get(from..from.saturating_add(ms))
            .ok_or(SgeError::Prot)?;
        if t.num_sge as usize > ms {
            // A malformed SRQ WQE (see `scatter`).
            return Err(SgeError::QpOp);
        }
        let len = data.len();
        walk(
            env,
            t.num_sge,
            |_, k| sges.get(k as usize).copied(),
            offset,
            len,
            Dir::Write(data),
        )
    }

    /// Scatters response data (READ, atomic) at `offset` into the SGEs of send message
    /// `m`.
    pub(super) fn scatter_send<E: Env<Sge = T::Sge>>(
        env: &mut E,
        m: &SendMsg,
        offset: u32,
        data: Bytes<'_>,
    ) -> Result<(), SgeError> {
        let n = m.num_sge.min(env.attrs().max_send_sge);
        let slot = m.slot;
        let len = data.len();
        walk(
            env,
            n,
            |e, i| e.sq_sge(slot, i),
            offset,
            len,
            Dir::Write(data),
        )
    }
}
