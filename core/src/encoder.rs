//! The encoder model: an item becomes a [`Frame`] of owned parts, the
//! payload untouched.

use bytes::{Bytes, BytesMut};

use alloc::boxed::Box;

use crate::error::{Error, Misuse, Unencodable};

/// The most bytes a part of framing keeps inline in a [`Frame`].
pub const INLINE_FRAMING: usize = 16;

/// A piece of framing: a few bytes kept inline (no allocation, no
/// reference count), or a shared `Bytes`.
#[derive(Clone, Debug)]
pub(crate) enum Part {
    Inline {
        bytes: [u8; INLINE_FRAMING],
        len: u8,
    },
    Shared(Bytes),
}

impl Part {
    const EMPTY: Self = Self::Inline {
        bytes: [0; INLINE_FRAMING],
        len: 0,
    };

    /// `bytes` inline if they fit, else copied into a `Bytes` of their own.
    fn copy(bytes: &[u8]) -> Self {
        match u8::try_from(bytes.len()) {
            Ok(len) if bytes.len() <= INLINE_FRAMING => {
                let mut inline = [0; INLINE_FRAMING];
                inline[..bytes.len()].copy_from_slice(bytes);
                Self::Inline { bytes: inline, len }
            }
            _ => Self::Shared(Bytes::copy_from_slice(bytes)),
        }
    }

    /// The first `len` bytes of `bytes`, inline, without a variable-length
    /// copy (which would cost a `memcpy` call and a store-forwarding stall
    /// per frame).
    #[inline]
    pub(crate) fn inline(bytes: [u8; INLINE_FRAMING], len: usize) -> Self {
        Self::Inline {
            bytes,
            len: u8::try_from(len.min(INLINE_FRAMING)).unwrap_or(0),
        }
    }

    #[inline]
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Self::Inline { bytes, len } => &bytes[..usize::from(*len)],
            Self::Shared(bytes) => bytes,
        }
    }
}

impl PartialEq for Part {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Part {}

/// A frame ready to be written: a head, a body and a tail, in that order.
///
/// Encoders put their framing (a length field, a delimiter) in the head or
/// the tail and leave the body, the caller's payload, exactly as it was
/// given: no copy. Framing of up to [`INLINE_FRAMING`] bytes is kept inline
/// in the frame (no allocation, no reference count); a
/// [`WriteQueue`](crate::WriteQueue) copies it into its reusable run
/// buffer, next to small writes and the framing of small frames around it,
/// so a header never costs an allocation, and costs an `iovec` of its own
/// only next to a large body. The queue keeps the parts of a frame
/// together: nothing is written between them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    head: Part,
    body: Bytes,
    tail: Part,
}

impl Default for Frame {
    fn default() -> Self {
        Self::from(Bytes::new())
    }
}

impl Frame {
    /// A frame of three shared parts.
    pub fn new(head: Bytes, body: Bytes, tail: Bytes) -> Self {
        Self {
            head: Part::Shared(head),
            body,
            tail: Part::Shared(tail),
        }
    }

    /// A frame whose head and tail are copied in: inline when they are at
    /// most [`INLINE_FRAMING`] bytes (the encoders' case), else into a
    /// `Bytes` each.
    pub fn with_framing(head: &[u8], body: Bytes, tail: &[u8]) -> Self {
        Self {
            head: Part::copy(head),
            body,
            tail: Part::copy(tail),
        }
    }

    /// The framing before the body.
    #[inline]
    pub fn head(&self) -> &[u8] {
        self.head.as_slice()
    }

    /// The payload.
    #[inline]
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// The framing after the body.
    #[inline]
    pub fn tail(&self) -> &[u8] {
        self.tail.as_slice()
    }

    /// Total length on the wire.
    #[inline]
    pub fn len(&self) -> usize {
        self.head().len() + self.body.len() + self.tail().len()
    }

    /// Whether the frame has no bytes at all.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The payload, dropping the framing.
    #[inline]
    pub fn into_body(self) -> Bytes {
        self.body
    }

    /// The wire bytes as one `Bytes` (a copy, unless the frame is all body).
    /// For tests and for callers that need one buffer.
    pub fn to_bytes(&self) -> Bytes {
        if self.head().is_empty() && self.tail().is_empty() {
            return self.body.clone();
        }
        let mut out = BytesMut::with_capacity(self.len());
        out.extend_from_slice(self.head());
        out.extend_from_slice(&self.body);
        out.extend_from_slice(self.tail());
        out.freeze()
    }

    /// A frame of inline framing made by an encoder.
    #[inline]
    pub(crate) fn from_parts(head: Part, body: Bytes, tail: Part) -> Self {
        Self { head, body, tail }
    }

    #[inline]
    pub(crate) fn into_raw(self) -> (Part, Bytes, Part) {
        (self.head, self.body, self.tail)
    }
}

impl From<Bytes> for Frame {
    /// A frame that is all body.
    fn from(body: Bytes) -> Self {
        Self {
            head: Part::EMPTY,
            body,
            tail: Part::EMPTY,
        }
    }
}

/// Turns items into [`Frame`]s for a [`WriteQueue`](crate::WriteQueue).
///
/// ```
/// use cleave_proto::{Bytes, Decoder, Encoder, LengthPrefixed, RecvBuf};
///
/// let mut codec = LengthPrefixed::new();
/// let frame = codec.encode(Bytes::from_static(b"hello"))?;
/// assert_eq!(frame.head(), b"\0\0\0\x05"); // inline: no allocation
/// assert_eq!(&frame.body()[..], b"hello"); // the payload, not copied
///
/// // Encoding then decoding gives the item back.
/// let mut buf = RecvBuf::new();
/// buf.feed(&frame.to_bytes())?;
/// assert_eq!(codec.decode(&mut buf)?.as_deref(), Some(&b"hello"[..]));
/// # Ok::<(), cleave_proto::Error>(())
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

/// The error for an item an encoder refuses, made out of line and returned
/// through a box, for the same reason as the decoders' errors: a by-value
/// `Error` from a call would put every frame's `Result` through memory.
#[cold]
#[inline(never)]
pub(crate) fn refuse(why: Unencodable) -> Box<Error> {
    Box::new(Error::Misuse(Misuse::Unencodable(why)))
}
