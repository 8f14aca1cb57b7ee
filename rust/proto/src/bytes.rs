//! A received payload in two pieces, back to back: how a host's network stack hands over
//! a datagram whose start it copied into one buffer and whose rest it left where the
//! device put it (Linux: an skb's linear head and one page fragment), so that the data is
//! copied once, into its final memory, and never gathered into one buffer first.
//!
//! [`Bytes`] is what a DATA packet's payload is to the core from the receive path down to
//! [`crate::rc::env::Memory`]: taken apart by offset ([`Bytes::get`]) and written piece
//! by piece.

/// Up to two byte slices that are, in order, one run of bytes ([`Bytes::len`] of them).
/// A whole slice is `Bytes::from(slice)`; either piece may be empty.
#[derive(Clone, Copy, Debug, Default)]
pub struct Bytes<'a> {
    head: &'a [u8],
    tail: &'a [u8],
}

/// Equal when the bytes are, however either is cut.
impl PartialEq for Bytes<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.bytes().eq(other.bytes())
    }
}

impl Eq for Bytes<'_> {}

impl<'a> From<&'a [u8]> for Bytes<'a> {
    fn from(s: &'a [u8]) -> Self {
        Bytes { head: s, tail: &[] }
    }
}

impl<'a> Bytes<'a> {
    /// The bytes of `head`, then those of `tail`.
    pub const fn new(head: &'a [u8], tail: &'a [u8]) -> Self {
        Bytes { head, tail }
    }

    /// How many bytes.
    pub const fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// Whether there are none.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The two pieces, in order (either may be empty).
    pub const fn pieces(&self) -> [&'a [u8]; 2] {
        [self.head, self.tail]
    }

    /// The first piece (a datagram's headers, when a host hands it in pieces).
    pub const fn head(&self) -> &'a [u8] {
        self.head
    }

    /// Bytes `from..to`; `None` unless `from <= to <= len`.
    pub fn get(&self, from: usize, to: usize) -> Option<Bytes<'a>> {
        if from > to || to > self.len() {
            return None;
        }
        let h = self.head.len();
        let head = self.head.get(from.min(h)..to.min(h))?;
        let tail = self
            .tail
            .get(from.saturating_sub(h)..to.saturating_sub(h))?;
        Some(Bytes { head, tail })
    }

    /// Bytes `from..` (`None` if `from` exceeds the length).
    pub fn skip(&self, from: usize) -> Option<Bytes<'a>> {
        self.get(from, self.len())
    }

    /// Copies every byte into `dst`, which must be exactly as long; `false` (and `dst`
    /// unchanged) otherwise.
    pub fn copy_to(&self, dst: &mut [u8]) -> bool {
        if dst.len() != self.len() {
            return false;
        }
        let (a, b) = dst.split_at_mut(self.head.len());
        a.copy_from_slice(self.head);
        b.copy_from_slice(self.tail);
        true
    }

    /// The bytes one by one, in order.
    pub fn bytes(&self) -> impl Iterator<Item = u8> + 'a {
        self.head.iter().chain(self.tail).copied()
    }

    /// Whether these are the same bytes as `other` (however either is cut).
    pub fn eq_bytes(&self, other: &[u8]) -> bool {
        other.len() == self.len()
            && other.get(..self.head.len()) == Some(self.head)
            && other.get(self.head.len()..) == Some(self.tail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cut_gives_the_same_bytes() {
        let all: [u8; 9] = core::array::from_fn(|i| i as u8);
        for cut in 0..=all.len() {
            let (h, t) = all.split_at(cut);
            let b = Bytes::new(h, t);
            assert_eq!(b.len(), 9);
            assert!(b.eq_bytes(&all));
            assert_eq!(b, Bytes::from(&all[..]));
            assert_ne!(b, Bytes::from(&all[1..]));
            for from in 0..=9 {
                for to in from..=9 {
                    let g = b.get(from, to).unwrap();
                    assert!(g.eq_bytes(&all[from..to]), "cut {cut} {from}..{to}");
                    let mut d = [0u8; 9];
                    assert!(g.copy_to(&mut d[..to - from]));
                    assert_eq!(&d[..to - from], &all[from..to]);
                }
            }
            assert!(b.get(3, 2).is_none());
            assert!(b.get(0, 10).is_none());
            assert!(b.skip(10).is_none());
            assert!(b.skip(9).unwrap().is_empty());
            let mut short = [0u8; 8];
            assert!(!b.copy_to(&mut short));
            assert_eq!(short, [0; 8]);
        }
    }
}
