//! The fields a packet trace shows of a datagram, read without validating it (a
//! datagram the receiver drops is traced as well, with what it claims).

use super::{field, get_u16, get_u24, get_u32, get_u8, PacketType};

/// A datagram's trace fields. Absent fields (a short datagram, a type without them) are 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Type byte without [`super::TYPE_SHARED`] ([`PacketType`] as a number; unknown
    /// types as they are).
    pub ptype: u8,
    /// [`super::TYPE_SHARED`]: the sender's connection is shared.
    pub shared: bool,
    /// Path index.
    pub path: u8,
    /// The incarnation (common header).
    pub inc: u16,
    /// Destination connection id (a DATAGRAM's: the destination QPN).
    pub dst_conn: u32,
    /// DATA and PROBE: the PSN; ACK: the cumulative PSN (the next one expected).
    pub psn: u32,
    /// DATA: the stream sequence number.
    pub ssn: u32,
    /// DATA: the stream.
    pub stream: u16,
    /// DATA: `DF_*`; ACK: `AF_*`; DATAGRAM: `GF_*` flags.
    pub flags: u8,
}

impl Summary {
    /// Reads the trace fields of `buf` (any bytes).
    pub fn of(buf: &[u8]) -> Summary {
        let u8_at = |at| get_u8(buf, at).unwrap_or(0);
        let u16_at = |f| get_u16(buf, f).unwrap_or(0);
        let u32_at = |f| get_u32(buf, f).unwrap_or(0);
        let t = u8_at(field::common::TYPE);
        let ptype = t & !super::TYPE_SHARED;
        let mut s = Summary {
            ptype,
            shared: t & super::TYPE_SHARED != 0,
            path: u8_at(field::common::PATH),
            inc: u16_at(field::common::INC),
            dst_conn: get_u24(buf, field::common::DST_CONN).unwrap_or(0),
            psn: u32_at(field::common::PSN),
            ..Summary::default()
        };
        match PacketType::from_u8(ptype) {
            Some(PacketType::Data) => {
                s.ssn = u32_at(field::data::SSN);
                s.stream = u16_at(field::data::STREAM);
                s.flags = u8_at(field::data::FLAGS);
            }
            Some(PacketType::Ack) => {
                s.psn = u32_at(field::ack::CUM);
                s.flags = u8_at(field::ack::FLAGS);
            }
            Some(PacketType::Datagram) => s.flags = u8_at(field::datagram::FLAGS),
            Some(PacketType::Probe) | None => {}
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::super::{AckHeader, DataHeader, ProbeHeader, ACK_LEN, DF_LAST, DF_RETX};
    use super::*;

    #[test]
    fn data_ack_probe_and_garbage() {
        let mut b = [0u8; 128];
        let h = DataHeader {
            path: 3,
            dst_conn: 0x1234,
            psn: 77,
            stream: 1,
            flags: DF_LAST | DF_RETX,
            ssn: 9,
            ..DataHeader::default()
        };
        let n = h.encode(&mut b).unwrap();
        let s = Summary::of(&b[..n]);
        assert_eq!(
            (s.ptype, s.path, s.dst_conn, s.psn, s.ssn, s.stream, s.flags),
            (1, 3, 0x1234, 77, 9, 1, DF_LAST | DF_RETX)
        );
        let a = AckHeader {
            path: 5,
            cum: 1000,
            flags: 1,
            ..AckHeader::default()
        };
        let mut b = [0u8; ACK_LEN];
        a.encode(&mut b).unwrap();
        let s = Summary::of(&b);
        assert_eq!((s.ptype, s.path, s.psn, s.ssn, s.flags), (2, 5, 1000, 0, 1));
        let p = ProbeHeader {
            path: 2,
            psn: 42,
            ..ProbeHeader::default()
        };
        let mut b = [0u8; 64];
        let n = p.encode(&mut b).unwrap();
        let s = Summary::of(&b[..n]);
        assert_eq!((s.ptype, s.path, s.psn, s.shared), (3, 2, 42, false));
        // A shared connection's PROBE: the same type, the mode apart.
        super::super::set_shared(&mut b[..n], true).unwrap();
        let s = Summary::of(&b[..n]);
        assert_eq!((s.ptype, s.path, s.psn, s.shared), (3, 2, 42, true));
        // Short or empty datagrams: whatever is there, zeros for the rest.
        assert_eq!(Summary::of(&[]), Summary::default());
        assert_eq!(Summary::of(&[2, 1, 7]).path, 7);
        assert_eq!(Summary::of(&[2, 1, 7]).psn, 0);
    }
}
