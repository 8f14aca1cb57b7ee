//! The 256-bit selective-acknowledgement bitmap carried in every ACK.
//!
//! Bit `i` (byte `i / 8`, bit `i % 8`, least significant bit first) stands for the packet
//! sequence number `cumulative + 1 + i` of the acknowledged path.

/// Number of PSNs a SACK bitmap covers beyond the cumulative PSN.
pub const SACK_BITS: u32 = 256;
/// Encoded size of a SACK bitmap in bytes.
pub const SACK_BYTES: usize = 32;

/// A fixed 256-bit bitmap (four little-endian 64-bit words).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sack {
    words: [u64; 4],
}

impl Sack {
    /// The empty bitmap.
    pub const EMPTY: Sack = Sack { words: [0; 4] };

    /// Whether bit `i` is set; bits at or beyond 256 read as clear.
    #[inline]
    pub fn get(&self, i: u32) -> bool {
        match self.words.get((i / 64) as usize) {
            Some(w) => (w >> (i % 64)) & 1 == 1,
            None => false,
        }
    }

    /// Sets bit `i`; bits at or beyond 256 are ignored.
    #[inline]
    pub fn set(&mut self, i: u32) {
        if let Some(w) = self.words.get_mut((i / 64) as usize) {
            *w |= 1u64 << (i % 64);
        }
    }

    /// Whether no bit is set.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// Index of the highest set bit, if any.
    pub fn highest(&self) -> Option<u32> {
        let mut i = 4u32;
        for w in self.words.iter().rev() {
            i -= 1;
            if *w != 0 {
                return Some(i * 64 + 63 - w.leading_zeros());
            }
        }
        None
    }

    /// Index of the `n`-th highest set bit (`n` = 1: [`Sack::highest`]), if at least
    /// `n` bits are set.
    pub fn nth_highest(&self, n: u32) -> Option<u32> {
        let mut left = n;
        let mut i = 4u32;
        for w in self.words.iter().rev() {
            i -= 1;
            let mut w = *w;
            while w != 0 {
                let b = 63 - w.leading_zeros();
                left = left.saturating_sub(1);
                if left == 0 {
                    return Some(i * 64 + b);
                }
                w &= !(1u64 << b);
            }
        }
        None
    }

    /// Number of consecutive set bits starting at bit 0.
    pub fn trailing_ones(&self) -> u32 {
        let mut n = 0;
        for w in self.words.iter() {
            let t = w.trailing_ones();
            n += t;
            if t < 64 {
                break;
            }
        }
        n
    }

    /// Shifts the bitmap towards bit 0 by `n` positions (bit `n` becomes bit 0).
    pub fn shift_down(&mut self, n: u32) {
        if n >= SACK_BITS {
            *self = Sack::EMPTY;
            return;
        }
        let words = (n / 64) as usize;
        let bits = n % 64;
        let mut out = [0u64; 4];
        for (i, o) in out.iter_mut().enumerate() {
            let lo = self.words.get(i + words).copied().unwrap_or(0);
            let hi = self.words.get(i + words + 1).copied().unwrap_or(0);
            *o = if bits == 0 {
                lo
            } else {
                (lo >> bits) | (hi << (64 - bits))
            };
        }
        self.words = out;
    }

    /// Encodes into 32 bytes, little-endian words (bit `i` is byte `i / 8`, bit `i % 8`).
    pub fn encode(&self, out: &mut [u8; SACK_BYTES]) {
        for (chunk, w) in out.chunks_exact_mut(8).zip(self.words.iter()) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
    }

    /// Decodes from 32 bytes; the inverse of [`Sack::encode`].
    pub fn decode(b: &[u8; SACK_BYTES]) -> Sack {
        let mut words = [0u64; 4];
        for (w, chunk) in words.iter_mut().zip(b.chunks_exact(8)) {
            let mut a = [0u8; 8];
            a.copy_from_slice(chunk);
            *w = u64::from_le_bytes(a);
        }
        Sack { words }
    }

    /// The raw words, bit `i` in word `i / 64`.
    pub fn words(&self) -> [u64; 4] {
        self.words
    }

    /// Builds a bitmap from raw words.
    pub fn from_words(words: [u64; 4]) -> Sack {
        Sack { words }
    }
}

/// Signed distance `a - b` between two wrapping 32-bit sequence numbers.
#[inline]
pub fn seq_diff(a: u32, b: u32) -> i32 {
    a.wrapping_sub(b) as i32
}

/// Whether sequence number `a` is before `b` (serial-number arithmetic).
#[inline]
pub fn seq_lt(a: u32, b: u32) -> bool {
    seq_diff(a, b) < 0
}

impl Default for Sack {
    fn default() -> Self {
        Self::EMPTY
    }
}
