//! The original toy baseline: RoCEv2-style go-back-N on one path, cumulative ACK / NAK,
//! no SACK, with MetaRoCE's own DCTCP-style window (the same AIMD code as its per-path
//! controller). Kept for the original six scenarios; the baselines an operator would
//! recognise (DCQCN, IRN) are [`crate::endpoint::Endpoint`]s.

use crate::net::BaseKind;
use metaroce_proto::cc::{CcConfig, PathCc};
use metaroce_proto::time::Instant;

pub const MTU: u32 = 4096;
/// Baseline header (BTH + RETH + ICRC, as RoCEv2).
pub const BASE_HDR: u32 = 12 + 16 + 4;
pub const NEVER: u64 = u64::MAX;
/// Largest baseline window (bytes).
pub const BASE_MAX_WINDOW: u32 = 512 * 1024;

#[derive(Debug)]
pub struct BaseEnd {
    pub una: u32,
    pub nxt: u32,
    pub limit: u32,
    pub cc: PathCc,
    pub srtt: u64,
    pub rto_at: u64,
    pub backoff: u32,
    pub epsn: u32,
    pub nak_sent: bool,
    pub delivered: u64,
    pub sport: u16,
    pub errors: u32,
    /// ACK/NAK waiting for the NIC (cumulative: a newer one replaces it).
    pub pending: Option<BaseKind>,
}

impl BaseEnd {
    /// `limit`: packets to send (0 for a receiver).
    pub fn new(limit: u32, window: u32, sport: u16) -> BaseEnd {
        BaseEnd {
            una: 0,
            nxt: 0,
            limit,
            cc: PathCc::new(&base_cc(window)),
            srtt: 0,
            rto_at: NEVER,
            backoff: 0,
            epsn: 0,
            nak_sent: false,
            delivered: 0,
            errors: 0,
            pending: None,
            sport,
        }
    }

    pub fn next_timer(&self) -> u64 {
        if self.una != self.nxt {
            self.rto_at
        } else {
            NEVER
        }
    }

    pub fn timeout(&mut self, now: u64, window: u32) {
        if self.rto_at <= now && self.una != self.nxt {
            if self.backoff >= 7 {
                // retry_cnt (7) exhausted: the QP goes to the error state.
                self.errors += 1;
                self.limit = 0;
                self.nxt = self.una;
                self.rto_at = NEVER;
                return;
            }
            self.nxt = self.una;
            self.backoff += 1;
            self.cc
                .on_loss(&base_cc(window), Instant(now), self.srtt.max(1));
            self.rto_at = NEVER;
        }
    }

    /// The next packet: a pending ACK/NAK, else data if the window is open.
    /// Returns (kind, is data).
    pub fn poll(&mut self, now: u64, min_rto: u32) -> Option<(BaseKind, bool)> {
        if let Some(k) = self.pending.take() {
            return Some((k, false));
        }
        let open = self.nxt < self.limit
            && u64::from(self.nxt.wrapping_sub(self.una)) * u64::from(MTU + BASE_HDR)
                < u64::from(self.cc.pwnd).max(u64::from(MTU));
        if !open {
            return None;
        }
        let psn = self.nxt;
        self.nxt += 1;
        if self.rto_at == NEVER {
            let rto = base_rto(self.srtt, min_rto) << self.backoff.min(6);
            self.rto_at = now + rto;
        }
        Some((
            BaseKind::Data {
                psn,
                len: MTU,
                ts: now,
            },
            true,
        ))
    }

    /// Receive: sets the packet to send back, if any.
    pub fn rx(&mut self, now: u64, k: BaseKind, ce: bool, min_rto: u32) {
        if let Some(out) = base_rx(self, now, k, ce, min_rto) {
            self.pending = Some(out);
        }
    }
}

pub fn base_cc(window: u32) -> CcConfig {
    CcConfig {
        init_pwnd: window,
        min_pwnd: MTU + BASE_HDR,
        max_pwnd: BASE_MAX_WINDOW,
        ai: MTU,
        g_shift: 4,
        loss_keep: 512,
    }
}

fn base_rto(srtt: u64, min: u32) -> u64 {
    (srtt * 2).max(u64::from(min))
}
/// Baseline receive: returns the packet to send back, if any.
fn base_rx(e: &mut BaseEnd, now: u64, k: BaseKind, ce: bool, min_rto: u32) -> Option<BaseKind> {
    match k {
        BaseKind::Data { psn, len, ts } => {
            let now = ts;
            if psn == e.epsn {
                e.epsn += 1;
                e.delivered += u64::from(len);
                e.nak_sent = false;
                Some(BaseKind::Ack {
                    epsn: e.epsn,
                    ce,
                    echo: now,
                })
            } else if psn > e.epsn {
                if e.nak_sent {
                    None
                } else {
                    e.nak_sent = true;
                    Some(BaseKind::Nak { epsn: e.epsn })
                }
            } else {
                Some(BaseKind::Ack {
                    epsn: e.epsn,
                    ce,
                    echo: now,
                })
            }
        }
        BaseKind::Ack { epsn, ce, echo } => {
            let sample = now.saturating_sub(echo).max(1);
            e.srtt = if e.srtt == 0 {
                sample
            } else {
                (e.srtt * 7 + sample) / 8
            };
            if epsn > e.una && epsn <= e.nxt {
                let n = epsn - e.una;
                e.una = epsn;
                e.backoff = 0;
                let rtt = e.srtt.max(1);
                e.cc.on_ack(
                    &base_cc_static(),
                    Instant(now),
                    rtt,
                    n * (MTU + BASE_HDR),
                    n as u16,
                    if ce { n as u16 } else { 0 },
                    0,
                );
                e.rto_at = if e.una == e.nxt {
                    NEVER
                } else {
                    now + base_rto(e.srtt, min_rto)
                };
            }
            None
        }
        BaseKind::Nak { epsn, .. } => {
            if epsn >= e.una && epsn <= e.nxt {
                e.una = epsn;
                e.nxt = epsn;
                e.cc.on_loss(&base_cc_static(), Instant(now), e.srtt.max(1));
                e.rto_at = NEVER;
            }
            None
        }
    }
}

fn base_cc_static() -> CcConfig {
    base_cc(BASE_MAX_WINDOW)
}
