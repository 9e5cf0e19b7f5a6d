//! Frames with a fixed-width length field.
//!
//! ```text
//!   ├─ field_offset ─┤├─ field_width ─┤├──── length + adjustment ────┤
//!   ┌────────────────┬────────────────┬──────────────────────────────┐
//!   │ other header   │  length field  │ body                         │
//!   └────────────────┴────────────────┴──────────────────────────────┘
//!   ├──── skip (default: the whole header) ───┤├── emitted frame ────┤
//! ```
//!
//! - The field is 1 to 8 bytes wide, big or little endian, and may sit
//!   `field_offset` bytes into the frame (after a magic number, a type byte).
//! - The body is `field + adjustment` bytes, counted from the end of the
//!   field. A field that counts itself takes `adjustment(-width)`; one that
//!   counts the whole header takes `-(offset + width)`.
//! - The emitted frame leaves out the first `skip` bytes: the whole header by
//!   default, nothing with [`keep_header`](LengthConfig::keep_header).
//!
//! This covers the knobs of tokio-util's `LengthDelimitedCodec` builder; the
//! default is its default (4-byte big-endian length, header stripped), and
//! [`LengthConfig::flatstream`] is a 4-byte little-endian length. A header
//! may also begin with a fixed [`magic`](LengthConfig::magic) marker, which
//! the decoder checks and the encoder writes:
//! [`LengthConfig::messagepack`] is MessagePack's `0xce` (uint32) marker and a
//! big-endian length, the framing of protosocket-messagepack.
//!
//! Coming from tokio-util, two differences: its `length_adjustment` counts
//! from the skip point, ours from the end of the field, so that changing what
//! is skipped never changes how a length is read (tokio-util's
//! `length_adjustment(a)` with `num_skip(s)` is our `adjustment(a - header +
//! s)` with `skip(s)`; the tests check the two agree); and the frame limit
//! applies to the adjusted body length, not to the raw field.

use alloc::boxed::Box;
use alloc::vec::Vec;
use bytes::Bytes;

use crate::decoder::{complete, Decoder, Latch, Step};
use crate::encoder::{refuse, Encoder, Frame, Part, INLINE_FRAMING};
use crate::error::{Error, InvalidInput, Limit, Unencodable};
use crate::recv_buf::RecvBuf;

/// Default [`LengthConfig::max_frame_length`]: 8 MiB, bytes.
///
/// tokio-util's `LengthDelimitedCodec` default, so a switch keeps behaviour.
pub const DEFAULT_MAX_FRAME_LENGTH: u64 = 8 * 1024 * 1024;

/// Byte order of a length field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endian {
    /// Most significant byte first (network order).
    Big,
    /// Least significant byte first.
    Little,
}

/// Configuration of [`LengthPrefixed`].
///
/// ```
/// use cleave_proto::{Endian, LengthConfig, LengthPrefixed};
///
/// // A 2-byte magic, then a 3-byte little-endian length that counts the
/// // whole 5-byte header; keep the header in the frame.
/// let config = LengthConfig::default()
///     .field_offset(2)
///     .field_width(3)?
///     .endian(Endian::Little)
///     .adjustment(-5)
///     .keep_header();
/// let decoder = LengthPrefixed::with_config(config)?;
/// # let _ = decoder;
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LengthConfig {
    offset: usize,
    width: usize,
    endian: Endian,
    adjustment: i64,
    skip: Option<usize>,
    max_frame: u64,
    magic: &'static [u8],
}

impl Default for LengthConfig {
    /// A 4-byte big-endian length at offset 0 that counts the body; the
    /// header is stripped; bodies up to 8 MiB.
    fn default() -> Self {
        Self {
            offset: 0,
            width: 4,
            endian: Endian::Big,
            adjustment: 0,
            skip: None,
            max_frame: DEFAULT_MAX_FRAME_LENGTH,
            magic: &[],
        }
    }
}

impl LengthConfig {
    /// The default: a 4-byte big-endian length, header stripped.
    #[must_use]
    pub fn u32_be() -> Self {
        Self::default()
    }

    /// flatstream's layout: a 4-byte little-endian length, header stripped.
    #[must_use]
    pub fn flatstream() -> Self {
        Self::default().endian(Endian::Little)
    }

    /// MessagePack's framing as protosocket-messagepack writes it: the
    /// marker `0xce` (a MessagePack uint32), the payload length as a
    /// big-endian `u32`, the payload (itself a MessagePack value); the
    /// 5-byte header stripped.
    ///
    /// ```
    /// use cleave_proto::{Decoder, LengthConfig, LengthPrefixed, RecvBuf};
    ///
    /// let mut frames = LengthPrefixed::with_config(LengthConfig::messagepack())?;
    /// let mut buf = RecvBuf::new();
    /// buf.feed(b"\xce\0\0\0\x01\xc3")?; // the value `true`
    /// assert_eq!(frames.decode(&mut buf)?.as_deref(), Some(&b"\xc3"[..]));
    /// buf.feed(b"\xcf")?; // not the marker
    /// assert!(frames.decode(&mut buf).is_err());
    /// # Ok::<(), cleave_proto::Error>(())
    /// ```
    #[must_use]
    pub fn messagepack() -> Self {
        Self::default().magic(&[0xce])
    }

    /// Bytes every header starts with, checked by the decoder as they
    /// arrive (a frame that starts otherwise is an
    /// [`InvalidInput::Magic`] at the first byte that differs) and written
    /// by the encoder. They sit before the length field: this raises the
    /// [`field_offset`](Self::field_offset) to their length if it is
    /// shorter, and never lowers it (a later, shorter `field_offset` is
    /// refused when the decoder is made; a later, shorter magic leaves the
    /// offset where it was). Default: none.
    #[must_use]
    pub fn magic(mut self, magic: &'static [u8]) -> Self {
        self.magic = magic;
        self.offset = self.offset.max(magic.len());
        self
    }

    /// See [`magic`](Self::magic).
    #[must_use]
    pub fn get_magic(&self) -> &'static [u8] {
        self.magic
    }

    /// Bytes before the length field. Default 0.
    #[must_use]
    pub fn field_offset(mut self, offset: usize) -> Self {
        self.offset = offset;
        self
    }

    /// Width of the length field in bytes. Default 4.
    ///
    /// # Errors
    ///
    /// [`Misuse::InvalidConfig`](crate::Misuse::InvalidConfig) unless
    /// `1 <= width <= 8`.
    pub fn field_width(mut self, width: usize) -> Result<Self, Error> {
        if !(1..=8).contains(&width) {
            return Err(Error::invalid_config(
                "field_width",
                width as u64,
                "1 to 8 bytes",
            ));
        }
        self.width = width;
        Ok(self)
    }

    /// Byte order of the length field. Default [`Endian::Big`].
    #[must_use]
    pub fn endian(mut self, endian: Endian) -> Self {
        self.endian = endian;
        self
    }

    /// Added to the field's value to get the number of bytes after the
    /// field. Default 0.
    #[must_use]
    pub fn adjustment(mut self, adjustment: i64) -> Self {
        self.adjustment = adjustment;
        self
    }

    /// Bytes left out at the start of each emitted frame; at most the header
    /// (`field_offset + field_width`). Default: the whole header.
    #[must_use]
    pub fn skip(mut self, skip: usize) -> Self {
        self.skip = Some(skip);
        self
    }

    /// Emit the header as part of each frame (`skip(0)`).
    #[must_use]
    pub fn keep_header(self) -> Self {
        self.skip(0)
    }

    /// The largest body (`field + adjustment`) accepted, in bytes. A larger
    /// one is an [`Error::LimitExceeded`] with [`Limit::FrameLength`] as soon
    /// as its header arrives. Default 8 MiB.
    #[must_use]
    pub fn max_frame_length(mut self, max: u64) -> Self {
        self.max_frame = max;
        self
    }

    /// Header length: offset plus field width.
    #[must_use]
    pub fn header_len(&self) -> usize {
        self.offset.saturating_add(self.width)
    }

    /// See [`max_frame_length`](Self::max_frame_length).
    #[must_use]
    pub fn get_max_frame_length(&self) -> u64 {
        self.max_frame
    }
}

/// Decoder of length-prefixed frames into `Bytes`.
///
/// The body is never reserved ahead: a header that declares 4 GiB makes the
/// decoder wait (or fail on its limit), not allocate.
///
/// ```
/// use cleave_proto::{Decoder, LengthPrefixed, RecvBuf};
///
/// let mut buf = RecvBuf::new();
/// let mut frames = LengthPrefixed::new();
/// buf.feed(b"\0\0\0\x05hello\0\0\0\x03b")?;
/// assert_eq!(frames.decode(&mut buf)?.as_deref(), Some(&b"hello"[..]));
/// assert_eq!(frames.decode(&mut buf)?, None); // 2 of 3 body bytes missing
/// buf.feed(b"ye")?;
/// assert_eq!(frames.decode(&mut buf)?.as_deref(), Some(&b"bye"[..]));
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct LengthPrefixed {
    config: LengthConfig,
    /// Header length and bytes to skip, worked out once.
    head: usize,
    skip: usize,
    latch: Latch,
}

impl Default for LengthPrefixed {
    fn default() -> Self {
        Self::from_valid(LengthConfig::default())
    }
}

impl LengthPrefixed {
    /// A decoder with the default configuration.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder with the given configuration.
    ///
    /// # Errors
    ///
    /// [`Misuse::InvalidConfig`](crate::Misuse::InvalidConfig) if `skip` is
    /// longer than the header, or the header length overflows.
    pub fn with_config(config: LengthConfig) -> Result<Self, Error> {
        if config.offset.checked_add(config.width).is_none() {
            return Err(Error::invalid_config(
                "field_offset",
                config.offset as u64,
                "an offset whose sum with the field width fits in usize",
            ));
        }
        if config.magic.len() > config.offset {
            return Err(Error::invalid_config(
                "field_offset",
                config.offset as u64,
                "at least the magic's length: the magic comes before the length field",
            ));
        }
        // width is 1..=8: the shift is 0..=56.
        let field_max = u64::MAX >> (8 * (8 - config.width));
        if i128::from(config.adjustment) < -i128::from(field_max) {
            // Every field would declare a negative body: no frame could
            // be decoded or encoded.
            return Err(Error::invalid_config(
                "adjustment",
                config.adjustment.unsigned_abs(),
                "at least minus the field's largest value (the value here is the magnitude)",
            ));
        }
        if let Some(skip) = config.skip {
            if skip > config.header_len() {
                return Err(Error::invalid_config(
                    "skip",
                    skip as u64,
                    "at most field_offset + field_width",
                ));
            }
        }
        Ok(Self::from_valid(config))
    }

    fn from_valid(config: LengthConfig) -> Self {
        Self {
            head: config.header_len(),
            skip: config.skip.unwrap_or(config.header_len()),
            config,
            latch: Latch::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LengthConfig {
        &self.config
    }

    /// Finds the complete frame at the front of `buf`, if there is one.
    #[inline(always)]
    fn step(&mut self, buf: &RecvBuf) -> Step {
        let data = buf.peek();
        let magic = self.config.magic;
        if !magic.is_empty() {
            if let Some(at) = data.iter().zip(magic).position(|(a, b)| a != b) {
                return self.latch.failed(Error::InvalidInput {
                    kind: InvalidInput::Magic,
                    offset: buf.offset() + at as u64,
                });
            }
        }
        if data.len() < self.head {
            return Step::NeedMore;
        }
        let declared = read_uint(&data[self.config.offset..self.head], self.config.endian);
        let adjustment = self.config.adjustment;
        let Some(body) = declared.checked_add_signed(adjustment) else {
            return self.latch.failed(Error::InvalidInput {
                kind: InvalidInput::LengthOutOfRange {
                    declared,
                    adjustment,
                },
                offset: buf.offset() + self.config.offset as u64,
            });
        };
        if body > self.config.max_frame {
            return self.latch.failed(Error::LimitExceeded {
                limit: Limit::FrameLength,
                max: self.config.max_frame,
                attempted: body,
                offset: buf.offset(),
            });
        }
        complete(buf, self.head, body, self.skip, &mut self.latch)
    }
}

/// The error for encoding with a field offset, out of line (see
/// [`refuse`]).
#[cold]
#[inline(never)]
fn offset_unencodable(offset: usize) -> Box<Error> {
    Box::new(Error::invalid_config(
        "field_offset",
        offset as u64,
        "the magic's length (0 without one) to encode: the encoder writes \
         the magic, the length field and the body",
    ))
}

/// A frame whose head is `magic` then `field`: inline up to
/// [`INLINE_FRAMING`] bytes, as every head here.
#[inline]
fn with_magic(magic: &[u8], field: &[u8], body: Bytes) -> Frame {
    let len = magic.len() + field.len();
    if len > INLINE_FRAMING {
        let mut head = Vec::with_capacity(len);
        head.extend_from_slice(magic);
        head.extend_from_slice(field);
        return Frame::with_framing(&head, body, &[]);
    }
    let mut head = [0u8; INLINE_FRAMING];
    head[..magic.len()].copy_from_slice(magic);
    head[magic.len()..len].copy_from_slice(field);
    Frame::from_parts(
        Part::inline(head, len),
        body,
        Part::inline([0; INLINE_FRAMING], 0),
    )
}

/// Reads an unsigned integer of 1 to 8 bytes.
///
/// The common widths get fixed-size loads; the others a byte loop (a
/// variable-length copy would be a `memcpy` call per frame).
#[inline]
fn read_uint(field: &[u8], endian: Endian) -> u64 {
    match (field, endian) {
        (&[a, b, c, d], Endian::Big) => u64::from(u32::from_be_bytes([a, b, c, d])),
        (&[a, b, c, d], Endian::Little) => u64::from(u32::from_le_bytes([a, b, c, d])),
        (&[a, b], Endian::Big) => u64::from(u16::from_be_bytes([a, b])),
        (&[a, b], Endian::Little) => u64::from(u16::from_le_bytes([a, b])),
        (_, Endian::Big) => field.iter().fold(0, |n, &b| n << 8 | u64::from(b)),
        (_, Endian::Little) => field.iter().rev().fold(0, |n, &b| n << 8 | u64::from(b)),
    }
}

impl Decoder for LengthPrefixed {
    type Item = Bytes;

    /// # Errors
    ///
    /// [`InvalidInput::Magic`] for a header that does not start with the
    /// magic, as soon as the first differing byte arrives;
    /// [`Limit::FrameLength`] for a body over the limit,
    /// [`Limit::Buffer`] for a frame that could never fit in the buffer,
    /// [`InvalidInput::LengthOutOfRange`] when the adjustment takes the
    /// length below zero or past `u64::MAX`. All are reported as soon as the
    /// header has arrived.
    #[inline(always)]
    fn decode(&mut self, buf: &mut RecvBuf) -> Result<Option<Bytes>, Error> {
        self.latch.check()?;
        let step = self.step(buf);
        self.latch.answer(step, buf)
    }

    fn decode_eof(&mut self, buf: &mut RecvBuf) -> Result<Option<Bytes>, Error> {
        self.latch.check()?;
        let step = self.step(buf);
        self.latch.answer_eof(step, buf)
    }
}

impl Encoder for LengthPrefixed {
    type Item = Bytes;

    /// Frames a body: the length field as an inline head (no allocation),
    /// the body untouched. The field holds `len - adjustment`.
    ///
    /// The item is what the decoder gives back with the default skip (the
    /// body). With a shorter skip, the decoder gives back the header bytes
    /// it keeps as well.
    ///
    /// # Errors
    ///
    /// [`Unencodable::TooLong`] past `max_frame_length` or past what the
    /// field can hold, [`Unencodable::TooShort`] when a positive
    /// adjustment asks for more bytes than the body has, and
    /// [`Misuse::InvalidConfig`](crate::Misuse::InvalidConfig) for a
    /// `field_offset` other than the magic's length (0 without one): other
    /// bytes before the field are the caller's to frame.
    #[inline(always)]
    fn encode(&mut self, body: Bytes) -> Result<Frame, Error> {
        let config = &self.config;
        if config.offset != config.magic.len() {
            return Err(*offset_unencodable(config.offset));
        }
        let len = body.len() as u64;
        if len > config.max_frame {
            return Err(*refuse(Unencodable::TooLong {
                len,
                max: config.max_frame,
            }));
        }
        // width is 1..=8: the shift is 0..=56.
        let field_max = u64::MAX >> (8 * (8 - config.width));
        let field = i128::from(len) - i128::from(config.adjustment);
        let Ok(field) = u64::try_from(field) else {
            return Err(*refuse(Unencodable::TooShort {
                len,
                min: u64::try_from(config.adjustment).unwrap_or(0),
            }));
        };
        if field > field_max {
            let max = i128::from(field_max) + i128::from(config.adjustment);
            return Err(*refuse(Unencodable::TooLong {
                len,
                max: u64::try_from(max).unwrap_or(0),
            }));
        }
        // The field's bytes at the front of 8, in wire order: fixed-size
        // writes only.
        let wire = match config.endian {
            Endian::Big => (field << (8 * (8 - config.width))).to_be_bytes(),
            Endian::Little => field.to_le_bytes(),
        };
        if !config.magic.is_empty() {
            return Ok(with_magic(config.magic, &wire[..config.width], body));
        }
        let mut head = [0u8; INLINE_FRAMING];
        head[..8].copy_from_slice(&wire);
        let head = Part::inline(head, config.width);
        Ok(Frame::from_parts(
            head,
            body,
            Part::inline([0; INLINE_FRAMING], 0),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_width_in_both_orders() {
        assert_eq!(read_uint(&[1, 2, 3], Endian::Big), 0x01_02_03);
        assert_eq!(read_uint(&[1, 2, 3], Endian::Little), 0x03_02_01);
        assert_eq!(read_uint(&[0xff; 8], Endian::Big), u64::MAX);
        assert_eq!(read_uint(&[7], Endian::Little), 7);
    }

    #[test]
    fn config_errors_are_typed() {
        assert!(LengthConfig::default().field_width(0).is_err());
        assert!(LengthConfig::default().field_width(9).is_err());
        let too_much_skip = LengthConfig::default().field_offset(1).skip(6);
        assert!(LengthPrefixed::with_config(too_much_skip).is_err());
        let huge_offset = LengthConfig::default().field_offset(usize::MAX);
        assert!(LengthPrefixed::with_config(huge_offset).is_err());
    }
}
