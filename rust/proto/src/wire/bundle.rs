//! ACK bundles: one datagram carrying the ACKs of several paths of one connection
//! (`Documentation/transport.rst`, "ACK bundles"). Each record is a whole 72-byte
//! ACK, exactly as it would travel alone; a bundle only saves the datagrams (on a
//! soft device, a datagram costs far more than its bytes).

use super::{
    decode_ack_packet, field, is_shared, peek_type, AckHeader, DropReason, PacketType, ACK_LEN,
};

/// The most ACKs one datagram carries (1152 bytes). A sender also keeps a bundle
/// within its path MTU's largest DATA packet (MTU + 68 bytes: 15 ACKs at 1024, 4 at
/// 256; `Config::ack_bundle`).
pub const MAX_ACK_BUNDLE: usize = 16;

/// The bytes every record of a bundle repeats from the first: version and type
/// (with `SHARED`; version and type are each record's own checks first, so only the
/// `SHARED` bit can differ here), incarnation and destination, and the token. Only the
/// path, the echoed stamp, the NAK's MSN and the ACK body differ.
const SAME: [field::Field; 3] = [0..2, 3..8, 16..20];

/// The destination (`dst_conn`) bytes a DATA riding after ACKs repeats from them.
const DST: field::Field = field::common::DST_CONN;

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

/// Decodes and validates an ACK datagram that may carry a DATA packet after its ACK
/// records (`Documentation/transport.rst`, "ACKs riding on DATA"): the leading run of
/// 72-byte records whose type is ACK, and what follows them if that is a DATA
/// packet's bytes (its type DATA). The records must make a valid bundle
/// ([`decode_acks`], with its reasons); the DATA must carry the first record's
/// `SHARED` bit and `dst_conn` (`WrongConnection`: a receiver hands the datagram to
/// the QP its first record names). The DATA is returned undecoded: the caller
/// decodes it ([`super::decode_data_pieces`]) before applying anything of the
/// datagram. Anything else after the records is judged as part of the bundle
/// (a torn or foreign record: [`decode_acks`]' reasons).
pub fn decode_ride(buf: &[u8]) -> Result<(AckBundle<'_>, Option<&[u8]>), DropReason> {
    let mut cut = 0;
    // One record past a bundle's most is enough to refuse it (`LengthMismatch`).
    while cut <= MAX_ACK_BUNDLE * ACK_LEN {
        match buf.get(cut..cut + ACK_LEN) {
            Some(rec) if peek_type(rec) == Some(PacketType::Ack) => cut += ACK_LEN,
            _ => break,
        }
    }
    let rest = buf.get(cut..).unwrap_or_default();
    if cut == 0 || peek_type(rest) != Some(PacketType::Data) {
        return decode_acks(buf).map(|b| (b, None));
    }
    let acks = decode_acks(buf.get(..cut).unwrap_or_default())?;
    if is_shared(rest) != is_shared(buf) || rest.get(DST) != buf.get(DST) {
        return Err(DropReason::WrongConnection);
    }
    Ok((acks, Some(rest)))
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

    /// `n` ACKs with a DATA of `payload` bytes after them; its length.
    fn ride(n: usize, payload: usize, buf: &mut [u8]) -> usize {
        use super::super::{DataHeader, DF_FIRST, DF_LAST};
        for i in 0..n {
            ack(i as u8).encode(&mut buf[i * ACK_LEN..]).unwrap();
        }
        let h = DataHeader {
            path: 3,
            inc: 9,
            dst_conn: 0x1234,
            psn: 77,
            token: 0x0bad_cafe,
            op: 0,
            flags: DF_FIRST | DF_LAST,
            payload_len: payload as u16,
            msg_len: payload as u32,
            ..DataHeader::default()
        };
        let hl = h.encode(&mut buf[n * ACK_LEN..]).unwrap();
        n * ACK_LEN + hl + payload
    }

    #[test]
    fn data_rides_after_the_acks() {
        let mut b = [0u8; 2048];
        for n in [1, 2, MAX_ACK_BUNDLE] {
            let len = ride(n, 64, &mut b);
            let (acks, data) = decode_ride(&b[..len]).unwrap();
            assert_eq!(acks.len(), n);
            let data = data.unwrap();
            assert_eq!(data.len(), len - n * ACK_LEN);
            let (h, payload) = super::super::decode_data_packet(data).unwrap();
            assert_eq!((h.psn, h.token, payload.len()), (77, 0x0bad_cafe, 64));
            // `decode` gives the first ACK, and checks the DATA too.
            assert_eq!(decode(&b[..len]), Ok(Packet::Ack(ack(0))));
            // The ACKs need not repeat the DATA's incarnation or token.
            assert_ne!(ack(0).inc, h.inc);
        }
        // A bundle alone has no DATA.
        let (b2, len) = bundle(2);
        assert!(decode_ride(&b2[..len]).unwrap().1.is_none());
    }

    #[test]
    fn malformed_rides_are_refused_whole() {
        let mut b = [0u8; 2048];
        // 17 ACKs before the DATA: too many.
        let len = ride(MAX_ACK_BUNDLE + 1, 8, &mut b);
        assert_eq!(
            decode_ride(&b[..len]).unwrap_err(),
            DropReason::LengthMismatch
        );
        // A DATA of the other mode, or for another connection than the ACKs'.
        for (at, x) in [(1, super::super::TYPE_SHARED), (7, 1)] {
            let len = ride(2, 8, &mut b);
            b[2 * ACK_LEN + at] ^= x;
            assert_eq!(
                decode_ride(&b[..len]).unwrap_err(),
                DropReason::WrongConnection,
                "byte {at}"
            );
        }
        // The ACKs keep a bundle's rules: a later record for another connection.
        let len = ride(2, 8, &mut b);
        b[ACK_LEN + 5] ^= 1;
        assert_eq!(
            decode_ride(&b[..len]).unwrap_err(),
            DropReason::WrongConnection
        );
        // A DATA that fails its own checks: `decode` says why; `decode_ride` leaves
        // it to the caller.
        let len = ride(1, 8, &mut b);
        assert_eq!(
            decode(&b[..len - 1]).unwrap_err(),
            DropReason::LengthMismatch
        );
        // A PROBE after the ACKs does not ride: a record of the bundle.
        let len = ride(1, 8, &mut b);
        b[ACK_LEN + 1] = PacketType::Probe as u8;
        assert_eq!(decode_ride(&b[..len]).unwrap_err(), DropReason::UnknownType);
        // A torn tail after the ACKs too short to have a type: the bundle's.
        assert_eq!(
            decode_ride(&b[..ACK_LEN + 1]).unwrap_err(),
            DropReason::Truncated
        );
        // A DATA first is no ACK datagram.
        let len = ride(0, 8, &mut b);
        assert_eq!(decode_ride(&b[..len]).unwrap_err(), DropReason::UnknownType);
    }
}
