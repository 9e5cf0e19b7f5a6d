//! Cutting a payload into pieces without copying it.

use bytes::Bytes;

/// An iterator over the pieces of a payload, each at most `piece` bytes and
/// each a view of the payload's memory (`Bytes::split_to`): no copy, no
/// allocation.
///
/// For datagrams of a path MTU, WebSocket fragments, or anything that needs
/// owned pieces. (A [`WriteQueue`](crate::WriteQueue) needs no owned
/// pieces: it hands large writes out in slices of its `piece_size`.)
///
/// ```
/// use cleave_proto::{fragments, Bytes};
///
/// let payload = Bytes::from(vec![7u8; 3000]);
/// let pieces: Vec<Bytes> = fragments(payload, 1420).collect();
/// assert_eq!(pieces.iter().map(Bytes::len).collect::<Vec<_>>(), [1420, 1420, 160]);
/// ```
///
/// A `piece` of 0 is read as 1.
pub fn fragments(payload: Bytes, piece: usize) -> Fragments {
    Fragments {
        rest: payload,
        piece: piece.max(1),
    }
}

/// Iterator returned by [`fragments`].
#[derive(Clone, Debug)]
pub struct Fragments {
    rest: Bytes,
    piece: usize,
}

impl Iterator for Fragments {
    type Item = Bytes;

    #[inline]
    fn next(&mut self) -> Option<Bytes> {
        if self.rest.is_empty() {
            return None;
        }
        if self.rest.len() <= self.piece {
            return Some(core::mem::take(&mut self.rest));
        }
        Some(self.rest.split_to(self.piece))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.rest.len().div_ceil(self.piece);
        (n, Some(n))
    }
}

impl ExactSizeIterator for Fragments {}

impl core::iter::FusedIterator for Fragments {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_payload_in_order_without_copying() {
        let payload = Bytes::from((0..=255u8).cycle().take(10_000).collect::<Vec<_>>());
        let base = payload.as_ptr() as usize;
        let pieces: Vec<Bytes> = fragments(payload.clone(), 1420).collect();
        assert_eq!(pieces.len(), 8);
        let mut at = 0;
        for piece in &pieces {
            assert!(piece.len() <= 1420);
            assert_eq!(piece.as_ptr() as usize, base + at, "a copy, not a view");
            assert_eq!(&piece[..], &payload[at..at + piece.len()]);
            at += piece.len();
        }
        assert_eq!(at, payload.len());
        assert_eq!(fragments(Bytes::new(), 10).count(), 0);
        assert_eq!(fragments(Bytes::from_static(b"abc"), 0).count(), 3);
    }
}
