//! ACK bundles: one datagram carrying the ACKs of several paths of one connection
//! (`Documentation/transport.rst`, "ACK bundles"). Each record is a whole 72-byte
//! ACK, exactly as it would travel alone; a bundle only saves the datagrams (on a
//! soft device, a datagram costs far more than its bytes).

use super::{decode_ack_packet, field, AckHeader, DropReason, ACK_LEN};

/// The most ACKs one datagram carries (1152 bytes). A sender also keeps a bundle
/// within its path MTU's largest DATA packet (MTU + 68 bytes: 15 ACKs at 1024, 4 at
/// 256; `Config::ack_bundle`).
pub const MAX_ACK_BUNDLE: usize = 16;

/// The bytes every record of a bundle repeats from the first: version and type
/// (with `SHARED`; version and type are each record's own checks first, so only the
/// `SHARED` bit can differ here), incarnation and destination, and the token. Only the
/// path, the echoed stamp, the NAK's MSN and the ACK body differ.
const SAME: [field::Field; 3] = [0..2, 3..8, 16..20];

/// The validated records of an ACK datagram, in order ([`decode_acks`]).
#[derive(Clone, Debug)]
pub struct AckBundle<'a> {
    rest: &'a [u8],
}

impl AckBundle<'_> {
    /// How many records are left.
    pub fn len(&self) -> usize {
        self.rest.len() / ACK_LEN
    }

    /// Whether no record is left.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }
}

impl Iterator for AckBundle<'_> {
    type Item = AckHeader;

    fn next(&mut self) -> Option<AckHeader> {
        let rec = self.rest.get(..ACK_LEN)?;
        self.rest = self.rest.get(ACK_LEN..).unwrap_or_default();
        // Validated by `decode_acks`: cannot fail.
        decode_ack_packet(rec).ok()
    }
}

/// Decodes and validates an ACK datagram of one or more records: every record
/// passes the checks of a lone ACK ([`decode_ack_packet`]; a tail shorter than a
/// record is `Truncated`), there are at most [`MAX_ACK_BUNDLE`]
/// (`LengthMismatch`), and each repeats the first's `SHARED` bit, incarnation,
/// destination and token (`WrongConnection`: a record for another connection).
/// Nothing is returned unless the whole datagram passes.
pub fn decode_acks(buf: &[u8]) -> Result<AckBundle<'_>, DropReason> {
    if buf.len() > MAX_ACK_BUNDLE * ACK_LEN {
        // The first record's own checks still decide a shorter datagram's reason.
        decode_ack_packet(buf.get(..ACK_LEN).unwrap_or(buf))?;
        return Err(DropReason::LengthMismatch);
    }
    let first = buf.get(..ACK_LEN);
    let mut rest = buf;
    while !rest.is_empty() {
        let rec = rest.get(..ACK_LEN).unwrap_or(rest);
        let tail = rest.get(ACK_LEN..).unwrap_or_default();
        decode_ack_packet(rec)?;
        if let Some(first) = first {
            if SAME
                .iter()
                .any(|f| rec.get(f.clone()) != first.get(f.clone()))
            {
                return Err(DropReason::WrongConnection);
            }
        }
        rest = tail;
    }
    if buf.is_empty() {
        return Err(DropReason::Truncated);
    }
    Ok(AckBundle { rest: buf })
}

#[cfg(test)]
mod tests {
    use super::super::{decode, Packet};
    use super::*;
    use crate::sack::Sack;

    fn ack(path: u8) -> AckHeader {
        AckHeader {
            path,
            inc: 7,
            dst_conn: 0x1234,
            echo: 1000 + u32::from(path),
            token: 0xdead_beef,
            cum: 10 * u32::from(path),
            rate_hint: 5,
            ce: 1,
            acked: 2,
            flags: 0,
            rnr_timer: 0,
            rnr_psn: 0,
            nak_stream: 0,
            nak_msn: 0,
            sack: Sack::default(),
        }
    }

    fn bundle(n: usize) -> ([u8; MAX_ACK_BUNDLE * ACK_LEN + ACK_LEN], usize) {
        let mut b = [0u8; MAX_ACK_BUNDLE * ACK_LEN + ACK_LEN];
        for i in 0..n {
            ack(i as u8).encode(&mut b[i * ACK_LEN..]).unwrap();
        }
        (b, n * ACK_LEN)
    }

    #[test]
    fn records_come_back_in_order() {
        for n in 1..=MAX_ACK_BUNDLE {
            let (b, len) = bundle(n);
            let got = decode_acks(&b[..len]).unwrap();
            assert_eq!(got.len(), n);
            for (i, a) in got.enumerate() {
                assert_eq!(a, ack(i as u8));
            }
            // `decode` gives the first record.
            assert_eq!(decode(&b[..len]), Ok(Packet::Ack(ack(0))));
        }
    }

    #[test]
    fn malformed_bundles_are_refused_whole() {
        let (b, len) = bundle(3);
        assert_eq!(decode_acks(&b[..0]).unwrap_err(), DropReason::Truncated);
        // A torn last record.
        assert_eq!(
            decode_acks(&b[..len - 1]).unwrap_err(),
            DropReason::Truncated
        );
        assert_eq!(
            decode_acks(&b[..len + 5]).unwrap_err(),
            DropReason::Truncated
        );
        // One record too many.
        let (b, len) = bundle(MAX_ACK_BUNDLE + 1);
        assert_eq!(
            decode_acks(&b[..len]).unwrap_err(),
            DropReason::LengthMismatch
        );
        assert_eq!(decode(&b[..len]).unwrap_err(), DropReason::LengthMismatch);
        // A later record for another connection, token, incarnation or mode.
        for at in [1usize, 3, 4, 5, 7, 16, 19] {
            let (mut b, len) = bundle(3);
            b[2 * ACK_LEN + at] ^= 0x80;
            assert_eq!(
                decode_acks(&b[..len]).unwrap_err(),
                DropReason::WrongConnection,
                "byte {at}"
            );
        }
        // A later record failing a lone ACK's own checks keeps its reason.
        let (mut b, len) = bundle(3);
        b[ACK_LEN] = 0;
        assert_eq!(decode_acks(&b[..len]).unwrap_err(), DropReason::BadVersion);
        let (mut b, len) = bundle(3);
        b[ACK_LEN + 32] = 0x80;
        assert_eq!(decode_acks(&b[..len]).unwrap_err(), DropReason::BadFlags);
        // Path, stamp and body may differ.
        let (mut b, len) = bundle(2);
        b[ACK_LEN + 2] = 9;
        b[ACK_LEN + 12] ^= 1;
        assert!(decode_acks(&b[..len]).is_ok());
    }
}
