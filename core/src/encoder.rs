//! The encoder model: an item becomes a [`Frame`] of owned parts, the
//! payload untouched.

use bytes::{Bytes, BytesMut};

use crate::error::Error;

/// A frame ready to be written: a head, a body and a tail, in that order.
///
/// Encoders put their framing (a length field, a delimiter) in the head or
/// the tail, as small `Bytes` of their own, and leave the body, the
/// caller's payload, exactly as it was given: no copy. Empty parts cost
/// nothing. A [`WriteQueue`](crate::WriteQueue) keeps the parts of a frame
/// together: nothing is written between them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Frame {
    head: Bytes,
    body: Bytes,
    tail: Bytes,
}

impl Frame {
    /// A frame of its three parts.
    pub fn new(head: Bytes, body: Bytes, tail: Bytes) -> Self {
        Self { head, body, tail }
    }

    /// The framing before the body.
    pub fn head(&self) -> &Bytes {
        &self.head
    }

    /// The payload.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// The framing after the body.
    pub fn tail(&self) -> &Bytes {
        &self.tail
    }

    /// Total length on the wire.
    pub fn len(&self) -> usize {
        self.head.len() + self.body.len() + self.tail.len()
    }

    /// Whether the frame has no bytes at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The parts, in wire order.
    pub fn into_parts(self) -> [Bytes; 3] {
        [self.head, self.body, self.tail]
    }

    /// The wire bytes as one `Bytes` (copies unless only one part is
    /// non-empty). For tests and for callers that need one buffer.
    pub fn to_bytes(&self) -> Bytes {
        match (self.head.is_empty(), self.tail.is_empty()) {
            (true, true) => self.body.clone(),
            _ => {
                let mut out = BytesMut::with_capacity(self.len());
                out.extend_from_slice(&self.head);
                out.extend_from_slice(&self.body);
                out.extend_from_slice(&self.tail);
                out.freeze()
            }
        }
    }
}

impl From<Bytes> for Frame {
    /// A frame that is all body.
    fn from(body: Bytes) -> Self {
        Self {
            body,
            ..Self::default()
        }
    }
}

/// Turns items into [`Frame`]s for a [`WriteQueue`](crate::WriteQueue).
///
/// ```
/// use cleave::{Bytes, Decoder, Encoder, LengthPrefixed, RecvBuf};
///
/// let mut codec = LengthPrefixed::new();
/// let frame = codec.encode(Bytes::from_static(b"hello"))?;
/// assert_eq!(&frame.head()[..], b"\0\0\0\x05"); // from a reusable arena
/// assert_eq!(&frame.body()[..], b"hello"); // the payload, not copied
///
/// // Encoding then decoding gives the item back.
/// let mut buf = RecvBuf::new();
/// buf.feed(&frame.to_bytes())?;
/// assert_eq!(codec.decode(&mut buf)?.as_deref(), Some(&b"hello"[..]));
/// # Ok::<(), cleave::Error>(())
/// ```
pub trait Encoder {
    /// What the encoder takes.
    type Item;

    /// Frames `item`.
    ///
    /// # Errors
    ///
    /// [`Misuse::Unencodable`](crate::Misuse::Unencodable) when the item
    /// cannot be framed as it is (too long for the length field, a line
    /// holding its delimiter); [`Misuse::InvalidConfig`](crate::Misuse) when
    /// the configuration describes a layout the encoder cannot write. The
    /// item is dropped; nothing else changes.
    fn encode(&mut self, item: Self::Item) -> Result<Frame, Error>;
}

/// Bytes of one arena block: room for about a thousand 4-byte headers.
const ARENA_BLOCK: usize = 4 * 1024;

/// Small headers cut from one reusable block instead of one allocation
/// each. A header shares the block while it is alive; once the headers of
/// a block have all been written and dropped, the block is reused.
#[derive(Clone, Debug, Default)]
pub(crate) struct Arena {
    block: BytesMut,
}

impl Arena {
    /// `bytes` as an owned `Bytes` cut from the arena.
    #[inline]
    pub(crate) fn header(&mut self, bytes: &[u8]) -> Bytes {
        if self.block.capacity() < bytes.len() {
            self.block.reserve(ARENA_BLOCK.max(bytes.len()));
        }
        self.block.extend_from_slice(bytes);
        self.block.split().freeze()
    }
}

/// Every byte value, so a one-byte delimiter is a `'static` slice.
pub(crate) static BYTE_VALUES: [u8; 256] = {
    let mut all = [0u8; 256];
    let mut b: u8 = 0;
    loop {
        all[b as usize] = b;
        if b == u8::MAX {
            break all;
        }
        b += 1;
    }
};

/// `\r` followed by every byte value, so a CRLF-style ending is `'static`.
pub(crate) static CR_THEN: [[u8; 2]; 256] = {
    let mut all = [[b'\r', 0u8]; 256];
    let mut b: u8 = 0;
    loop {
        all[b as usize][1] = b;
        if b == u8::MAX {
            break all;
        }
        b += 1;
    }
};
