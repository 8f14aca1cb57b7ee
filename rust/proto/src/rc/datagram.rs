//! What the host's unreliable datagram QPs share with the RC engine (IBTA 10.2.9.1): the
//! SQ and RQ heads, send completions in order, gathering, and taking the next receive
//! (RQ or SRQ) to scatter a datagram into. UD's own rules (address handles, Q_Keys,
//! GRH) stay with the host.

use super::super::bytes::Bytes;
use super::env::{Env, MemError};
use super::sge::gather;
use super::types::{SendWqe, WcStatus};
use super::{Engine, Tables, Taken};

impl<T: Tables> Engine<T> {
    /// UD: the oldest send WQE not yet completed, and its slot, if one is posted.
    pub fn datagram_next<E: Env<Sge = T::Sge>>(&mut self, env: &mut E) -> Option<(u32, SendWqe)> {
        let slot = self.sq_cons;
        if slot == env.sq_producer()? {
            return None;
        }
        Some((slot, env.sq_wqe(slot)?))
    }

    /// UD: gathers the data of send WQE `w` (slot `slot`) from offset 0 into `dst`.
    pub fn datagram_gather<E: Env<Sge = T::Sge>>(
        env: &mut E,
        w: &SendWqe,
        slot: u32,
        dst: &mut [u8],
    ) -> Result<(), MemError> {
        gather(env, w, slot, 0, dst)
    }

    /// UD: send WQE `w` in slot `slot` (the oldest) is done with `status`: its completion
    /// is written and the slot consumed; a failure moves the QP to the error state.
    /// Returns whether it succeeded.
    pub fn datagram_sent<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        slot: u32,
        w: &SendWqe,
        status: WcStatus,
    ) -> bool {
        self.send_cqe(env, w, status);
        self.sq_cons = env.sq_advance(slot, 1);
        self.scan = self.sq_cons;
        env.sq_set_consumer(self.sq_cons);
        if status != WcStatus::Success {
            self.flush(env);
            return false;
        }
        true
    }

    /// UD: takes the next receive (the RQ's oldest, or an SRQ WQE), scatters each of
    /// `parts` into it one after the other and returns its `wr_id` and whether every part
    /// fit; `None` if no receive is posted (the datagram is dropped, IBTA 10.7.2.2). The
    /// host then writes the completion and calls [`Self::datagram_received`].
    pub fn datagram_receive<E: Env<Sge = T::Sge>>(
        &mut self,
        env: &mut E,
        parts: &[&[u8]],
    ) -> Option<(u64, bool)> {
        let (wr_id, srq) = match env.attrs().srq_sge {
            Some(ms) => {
                let sl = self.t.taken_sges().get_mut(..ms as usize)?;
                let (wr_id, num_sge) = env.srq_take(sl)?;
                let t = self.t.taken().get_mut(0)?;
                *t = Taken {
                    valid: true,
                    wr_id,
                    num_sge,
                };
                (wr_id, true)
            }
            None => {
                if self.rq_cons == env.rq_producer()? {
                    return None;
                }
                (env.rq_wqe(self.rq_cons)?.wr_id, false)
            }
        };
        let mut off = 0u32;
        let mut fits = true;
        for p in parts {
            let r = if srq {
                self.scatter_taken(env, 0, off, Bytes::from(*p))
            } else {
                Self::scatter(env, self.rq_cons, off, Bytes::from(*p))
            };
            fits &= r.is_ok();
            if !fits {
                break;
            }
            off = off.saturating_add(p.len() as u32);
        }
        Some((wr_id, fits))
    }

    /// UD: the receive [`Self::datagram_receive`] took is completed: consume it.
    pub fn datagram_received<E: Env<Sge = T::Sge>>(&mut self, env: &mut E) {
        if let Some(t) = self.t.taken().get_mut(0) {
            t.valid = false;
        }
        if env.attrs().srq_sge.is_none() && env.rq_producer().is_some() {
            self.rq_cons = env.rq_advance(self.rq_cons, 1);
            env.rq_set_consumer(self.rq_cons);
        }
    }
}
