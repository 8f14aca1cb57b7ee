//! Connection identity (Documentation/transport.rst, "Identity and threat model"): the
//! per-direction key both ends derive from what verbs applications already exchange at
//! set-up, and what it yields — the 32-bit token every datagram of the direction carries
//! and the initial PSN of every path.
//!
//! A direction is the data flowing from one QP (the sender) to its peer (the receiver),
//! together with the ACKs that flow back for it. Its key is
//! `SipHash-2-4(K, sgid ‖ dgid ‖ BE32(sqpn) ‖ BE32(dqpn) ‖ BE32(psn))` where `K` is the
//! 16 ASCII bytes `MetaRoCE-ident-1`, the GIDs are the sender's and the receiver's
//! (16 bytes each), `sqpn`/`dqpn` the sender's and the receiver's QPN and `psn` the
//! sender's starting PSN (verbs `sq_psn` at the sender, `rq_psn` at the receiver; 24
//! bits). The token is the key's high 32 bits; path `i`'s initial PSN is the low 32 bits
//! of `SipHash-2-4(K, BE64(key) ‖ u8(i))` and stream `s`'s initial SSN the same with
//! `u8(64 + s)`.
//!
//! SipHash is used as a public pseudo-random function: the unpredictability comes from
//! its inputs (the randomly allocated QPNs and the random starting PSN applications and
//! rdma_cm choose), which a blind attacker does not see.

/// The SipHash key of every derivation: `MetaRoCE-ident-1`.
pub const IDENT_KEY: [u8; 16] = *b"MetaRoCE-ident-1";

/// SipHash-2-4 (Aumasson and Bernstein, 2012) of `msg` under the 16-byte `key`.
pub fn siphash24(key: &[u8; 16], msg: &[u8]) -> u64 {
    let mut k0 = [0u8; 8];
    let mut k1 = [0u8; 8];
    k0.copy_from_slice(&key[..8]);
    k1.copy_from_slice(&key[8..]);
    let (k0, k1) = (u64::from_le_bytes(k0), u64::from_le_bytes(k1));
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    let mut chunks = msg.chunks_exact(8);
    for c in chunks.by_ref() {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let m = u64::from_le_bytes(w);
        v[3] ^= m;
        round(&mut v);
        round(&mut v);
        v[0] ^= m;
    }
    // The last word: the remaining bytes, the message length in the top byte.
    let mut w = [0u8; 8];
    let rest = chunks.remainder();
    w[..rest.len()].copy_from_slice(rest);
    w[7] = msg.len() as u8;
    let m = u64::from_le_bytes(w);
    v[3] ^= m;
    round(&mut v);
    round(&mut v);
    v[0] ^= m;
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

#[inline]
fn round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

/// The key of one direction (see the module notes); [`Ident::DEFAULT`] (key 0) serves
/// hosts and tests that do not derive one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ident(pub u64);

impl Ident {
    /// Key 0: token 0 and the initial PSNs of key 0 (still not 0).
    pub const DEFAULT: Ident = Ident(0);

    /// The key of the direction from (`sgid`, `sqpn`) to (`dgid`, `dqpn`) whose first
    /// PSN is `psn` (24 bits; higher bits ignored).
    pub fn derive(sgid: &[u8; 16], dgid: &[u8; 16], sqpn: u32, dqpn: u32, psn: u32) -> Ident {
        let mut m = [0u8; 44];
        m[..16].copy_from_slice(sgid);
        m[16..32].copy_from_slice(dgid);
        m[32..36].copy_from_slice(&sqpn.to_be_bytes());
        m[36..40].copy_from_slice(&dqpn.to_be_bytes());
        m[40..44].copy_from_slice(&(psn & 0x00ff_ffff).to_be_bytes());
        Ident(siphash24(&IDENT_KEY, &m))
    }

    /// The token every datagram of the direction carries (the key's high half).
    pub fn token(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The first SSN of stream `stream`: the low 32 bits of
    /// `SipHash-2-4(K, BE64(key) ‖ u8(64 + stream))` for streams below 192 (the same
    /// derivation as a path's, [`Ident::isn`]), of `SipHash-2-4(K, BE64(key) ‖ 0xff ‖
    /// BE16(stream))` above (a longer message: never equal to a path's or a low
    /// stream's input).
    pub fn first_ssn(self, stream: u16) -> u32 {
        if let Ok(low) = u8::try_from(stream) {
            if low < 192 {
                return self.isn(64 + low);
            }
        }
        let mut m = [0u8; 11];
        m[..8].copy_from_slice(&self.0.to_be_bytes());
        m[8] = 0xff;
        m[9..].copy_from_slice(&stream.to_be_bytes());
        siphash24(&IDENT_KEY, &m) as u32
    }

    /// The first PSN of path `path` (< 64).
    pub fn isn(self, path: u8) -> u32 {
        let mut m = [0u8; 9];
        m[..8].copy_from_slice(&self.0.to_be_bytes());
        m[8] = path;
        siphash24(&IDENT_KEY, &m) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference vectors of the SipHash paper (appendix A and the reference
    /// implementation's `vectors.h`): key 00..0f, message 00..(n-1).
    #[test]
    fn siphash_reference_vectors() {
        let mut key = [0u8; 16];
        for (i, k) in key.iter_mut().enumerate() {
            *k = i as u8;
        }
        let msg: [u8; 64] = core::array::from_fn(|i| i as u8);
        assert_eq!(siphash24(&key, &msg[..0]), 0x726f_db47_dd0e_0e31);
        assert_eq!(siphash24(&key, &msg[..1]), 0x74f8_39c5_93dc_67fd);
        assert_eq!(siphash24(&key, &msg[..8]), 0x93f5_f579_9a93_2462);
        assert_eq!(siphash24(&key, &msg[..15]), 0xa129_ca61_49be_45e5);
        assert_eq!(siphash24(&key, &msg[..63]), 0x958a_324c_eb06_4572);
    }

    /// The worked example of Documentation/transport.rst ("Derivation"), computed
    /// independently from the spec's text by an outside implementer.
    #[test]
    fn worked_example() {
        let mut a = [0u8; 16];
        let mut b = [0u8; 16];
        a[10..].copy_from_slice(&[0xff, 0xff, 10, 0, 0, 1]);
        b[10..].copy_from_slice(&[0xff, 0xff, 10, 0, 0, 2]);
        let k = Ident::derive(&a, &b, 0x12_3456, 0x65_4321, 0xab_cdef);
        assert_eq!(k.0, 0x270e_e837_6391_366f);
        assert_eq!(k.token(), 0x270e_e837);
        assert_eq!(k.isn(0), 0x01e9_45bb);
        assert_eq!(k.isn(63), 0x4f4e_6192);
        assert_eq!(k.first_ssn(0), 0xf8ea_ba23);
    }

    #[test]
    fn directions_differ() {
        let a = [1u8; 16];
        let b = [2u8; 16];
        let ab = Ident::derive(&a, &b, 17, 18, 0x123456);
        let ba = Ident::derive(&b, &a, 18, 17, 0x123456);
        assert_ne!(ab, ba);
        assert_ne!(ab, Ident::derive(&a, &b, 17, 18, 0x123457));
        assert_eq!(ab, Ident::derive(&a, &b, 17, 18, 0xff12_3456));
        assert_ne!(ab.isn(0), ab.isn(1));
    }
}
