// SPDX-License-Identifier: GPL-2.0

//! Unreliable datagram QPs (and the GSI QP): each SEND one DATAGRAM packet
//! outside any connection; receives land after the 40-byte GRH area.

use super::*;
use crate::ffi::rdma::{network_type, wc_flags};
use crate::ffi::rxe_abi::{send_flags, Wc};
use crate::proto::rc::{WcOpcode, WcStatus, WrOpcode};

type Rc = Engine<RcTables>;

/// Bytes of the GRH area at the start of every UD receive buffer (IBTA
/// 11.4.1.1: 40 bytes, the IPv4 header in its last 20 for RoCE v2 over IPv4).
const GRH_LEN: usize = 40;

impl Glue<'_> {
    /// UD: sends every new WQE of the SQ as one DATAGRAM packet and
    /// completes it (UD is unreliable: at once).
    pub(super) fn datagrams_out(&mut self, rc: &mut Rc, scratch: &mut [u8]) {
        use crate::proto::wire::{DatagramHeader, DATAGRAM_LEN, GF_IMM, GF_SE};
        loop {
            let Some((slot, ew)) = rc.datagram_next(self) else {
                return;
            };
            let Some(Ok(w)) = self.io.sq.as_ref().map(|q| SendWqe::read(q, slot)) else {
                return;
            };
            let mut status = WcStatus::Success;
            let ah = self.qp.dev.ahs.get(w.ah_num).filter(|a| a.pd == self.qp.pd);
            let len = w.length as usize;
            let room = scratch
                .len()
                .saturating_sub(DATAGRAM_LEN)
                .min(UD_MAX_PAYLOAD)
                .min(port_mtu(self.qp.dev.ifindex));
            let imm = w.opcode == WrOpcode::SendWithImm as u32;
            match ah {
                _ if w.opcode != WrOpcode::Send as u32 && !imm => status = WcStatus::LocQpOpErr,
                _ if w.num_sge > self.io.caps.max_send_sge => status = WcStatus::LocQpOpErr,
                // IBTA C10-93.1.1: a UD message longer than the port's MTU
                // (its active MTU, as `query_port` reports it) emits no
                // packet and generates no error (rxe does the same: its
                // requester compares with `port.mtu_cap`). A longer datagram
                // would not fit the link (IPv4 with DF): lost, never sent.
                _ if len > room => {}
                None => status = WcStatus::LocQpOpErr,
                Some(ah) => {
                    let qkey = if w.ud_qkey & 0x8000_0000 != 0 {
                        self.io.attr.qkey
                    } else {
                        w.ud_qkey
                    };
                    let h = DatagramHeader {
                        dst_qpn: w.ud_qpn & 0x00ff_ffff,
                        src_qpn: self.qp.qpn,
                        qkey,
                        flags: if imm { GF_IMM } else { 0 }
                            | if w.send_flags & send_flags::SOLICITED != 0 {
                                GF_SE
                            } else {
                                0
                            },
                        payload_len: len as u16,
                        imm: u32::from_be(w.ex),
                        stamp: now_ns() as u32,
                    };
                    let ok = h.encode(scratch).is_some()
                        && Rc::datagram_gather(
                            self,
                            &ew,
                            slot,
                            &mut scratch[DATAGRAM_LEN..DATAGRAM_LEN + len],
                        )
                        .is_ok();
                    if !ok {
                        status = WcStatus::LocProtErr;
                    } else {
                        let (src, dst) =
                            (IpAddr::from_gid(&ah.av.sgid), IpAddr::from_gid(&ah.av.dgid));
                        let sport = 49152 + (self.qp.qpn & 0x3fff) as u16;
                        match self.qp.dev.transport.send(
                            &src,
                            &dst,
                            self.qp.dev.ifindex,
                            sport,
                            true,
                            &scratch[..DATAGRAM_LEN + len],
                        ) {
                            Ok(()) => {
                                self.qp
                                    .trace_tx_datagram(&scratch[..DATAGRAM_LEN + len], sport);
                                self.qp.dev.count(counter::TX_PACKETS, 1);
                                self.qp
                                    .dev
                                    .count(counter::TX_BYTES, (DATAGRAM_LEN + len) as u64);
                            }
                            // No route to the AH's address: a local QP
                            // operation error (rxe fails the WQE when it
                            // cannot build the packet); a datagram lost
                            // any other way is UD's to lose.
                            Err(e) if crate::ffi::net::is_unreachable(e) => {
                                status = WcStatus::LocQpOpErr;
                            }
                            Err(_) => {}
                        }
                    }
                }
            }
            if !rc.datagram_sent(self, slot, &ew, status) {
                return;
            }
        }
    }

    /// UD: one received DATAGRAM into the next posted receive, after the
    /// 40-byte GRH area (IBTA 11.4.1.1). A drop returns the index of the
    /// device counter of its reason.
    pub(super) fn datagram_in(
        &mut self,
        rc: &mut Rc,
        pkt: &[u8],
        meta: &RxMeta,
    ) -> core::result::Result<(), usize> {
        let (h, payload) = crate::proto::wire::decode_datagram(pkt)
            .map_err(|r| counter::DROP_FIRST + r.index())?;
        if !matches!(
            self.io.attr.state,
            QpState::Rtr | QpState::Rts | QpState::Sqd
        ) {
            return Err(counter::DROP_QP_STATE);
        }
        if h.qkey != self.io.attr.qkey {
            return Err(counter::DROP_BAD_QKEY);
        }
        let mut grh = [0u8; GRH_LEN];
        match (meta.src, meta.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                // The IPv4 header, as RoCE v2 receivers see it.
                let total = (20 + 8 + pkt.len()) as u16;
                grh[20] = 0x45;
                grh[22..24].copy_from_slice(&total.to_be_bytes());
                grh[28] = 64;
                grh[29] = 17;
                grh[32..36].copy_from_slice(&s);
                grh[36..40].copy_from_slice(&d);
                let sum = ipv4_checksum(&grh[20..40]);
                grh[30..32].copy_from_slice(&sum.to_be_bytes());
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                grh[0] = 0x60;
                grh[4..6].copy_from_slice(&((8 + pkt.len()) as u16).to_be_bytes());
                grh[6] = 17;
                grh[7] = 64;
                grh[8..24].copy_from_slice(&s);
                grh[24..40].copy_from_slice(&d);
            }
            _ => {}
        }
        // The receive: the RQ's next, or the SRQ's. None posted: UD drops
        // (IBTA 10.7.2.2).
        let (wr_id, fits) = rc
            .datagram_receive(self, &[&grh, payload])
            .ok_or(counter::DROP_NO_RECEIVE)?;
        let imm = h.flags & crate::proto::wire::GF_IMM != 0;
        // Kernel consumers (the MAD layer building a reply's AH with
        // `ib_init_ah_attr_from_wc`) learn which IP header the GRH area holds.
        let (net_type, net_flag) = match (self.qp.kernel, meta.src) {
            (false, _) => (0, 0),
            (true, IpAddr::V4(_)) => (network_type::IPV4, wc_flags::WITH_NETWORK_HDR_TYPE),
            (true, IpAddr::V6(_)) => (network_type::IPV6, wc_flags::WITH_NETWORK_HDR_TYPE),
        };
        let wc = Wc {
            wr_id,
            status: if fits {
                WcStatus::Success
            } else {
                WcStatus::LocLenErr
            } as u32,
            opcode: WcOpcode::Recv as u32,
            byte_len: (GRH_LEN + payload.len()) as u32,
            ex: if imm { h.imm.to_be() } else { 0 },
            qp_num: self.qp.qpn,
            src_qp: h.src_qpn,
            wc_flags: wc_flags::GRH | net_flag | if imm { wc_flags::WITH_IMM } else { 0 },
            net_type,
        };
        let solicited = h.flags & crate::proto::wire::GF_SE != 0;
        // A receive completion lost to a full CQ: the QP enters the error
        // state (IBTA 11.4.2.1, class G).
        if !self.qp.rcq.push(&wc, solicited, self.qp.handle) {
            rc.note_cq_lost();
        }
        rc.datagram_received(self);
        Ok(())
    }
}

/// The IPv4 header checksum (RFC 791) of `h`, whose checksum field is zero.
fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}
/// Largest UD payload: one IB MTU of 4096 bytes.
const UD_MAX_PAYLOAD: usize = 4096;

/// The port's active MTU in bytes, as `query_port` reports it now: the
/// largest IB MTU whose datagrams fit the MTU of the netdev `ifindex` after
/// [`WIRE_OVERHEAD`] bytes of headers; 256 if none does (or the netdev is
/// gone), as `active_mtu` says then.
///
/// [`WIRE_OVERHEAD`]: crate::verbs::device::WIRE_OVERHEAD
pub(super) fn port_mtu(ifindex: i32) -> usize {
    crate::ffi::net::netdev_mtu(ifindex)
        .and_then(|m| crate::ffi::rdma::ib_mtu_for(m, crate::verbs::device::WIRE_OVERHEAD))
        .map_or(256, |(_, bytes)| bytes as usize)
}
