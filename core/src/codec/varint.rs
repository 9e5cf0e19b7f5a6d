//! Frames with a varint length prefix, as protobuf's delimited streams use.
//!
//! ```text
//!   ┌───────────────────────┬──────────────────────────┐
//!   │ LEB128 length, 1-10 B │ body (length bytes)      │
//!   └───────────────────────┴──────────────────────────┘
//!   e.g. 0xAC 0x02 = 300: 7 bits a byte, low group first, high bit = "more"
//! ```
//!
//! The length is an unsigned LEB128 varint of at most 10 bytes. A varint with
//! more bytes, or whose value does not fit in a `u64`, is an
//! [`Error::InvalidInput`]. So is, by default, one that is not minimally
//! encoded (a zero last byte after the first), since a canonical encoder never
//! writes one; protobuf's parsers accept them, and so does
//! [`allow_non_minimal`](VarintConfig::allow_non_minimal).

use bytes::Bytes;

use crate::codec::length::DEFAULT_MAX_FRAME_LENGTH;
use crate::decoder::{complete, Decoder, Latch, Step};
use crate::encoder::{refuse, Encoder, Frame, Part, INLINE_FRAMING};
use crate::error::{Error, InvalidInput, Limit, Unencodable, VarintField};
use crate::recv_buf::RecvBuf;

/// The most bytes a `u64` varint takes.
pub const MAX_VARINT_LEN: usize = 10;

/// Configuration of [`Varint`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VarintConfig {
    max_frame: u64,
    allow_non_minimal: bool,
}

impl Default for VarintConfig {
    /// Bodies up to 8 MiB, minimal encodings only.
    fn default() -> Self {
        Self {
            max_frame: DEFAULT_MAX_FRAME_LENGTH,
            allow_non_minimal: false,
        }
    }
}

impl VarintConfig {
    /// The largest body accepted, in bytes. A larger one is an
    /// [`Error::LimitExceeded`] with [`Limit::FrameLength`] as soon as its
    /// length has arrived. Default 8 MiB.
    #[must_use]
    pub fn max_frame_length(mut self, max: u64) -> Self {
        self.max_frame = max;
        self
    }

    /// See [`max_frame_length`](Self::max_frame_length).
    #[must_use]
    pub fn get_max_frame_length(&self) -> u64 {
        self.max_frame
    }

    /// Accept lengths that are not minimally encoded, as protobuf's parsers
    /// do. Default `false`.
    #[must_use]
    pub fn allow_non_minimal(mut self, allow: bool) -> Self {
        self.allow_non_minimal = allow;
        self
    }
}

/// Decoder of varint-length-delimited frames into their bodies.
///
/// ```
/// use cleave_proto::{Decoder, RecvBuf, Varint};
///
/// let mut buf = RecvBuf::new();
/// let mut frames = Varint::new();
/// buf.feed(b"\x03abc\x00\x05hel")?;
/// assert_eq!(frames.decode(&mut buf)?.as_deref(), Some(&b"abc"[..]));
/// assert_eq!(frames.decode(&mut buf)?.as_deref(), Some(&b""[..]));
/// assert_eq!(frames.decode(&mut buf)?, None);
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Varint {
    config: VarintConfig,
    latch: Latch,
}

impl Varint {
    /// A decoder with the default configuration.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder with the given configuration.
    #[must_use]
    pub fn with_config(config: VarintConfig) -> Self {
        Self {
            config,
            ..Self::default()
        }
    }

    /// The configuration.
    pub fn config(&self) -> &VarintConfig {
        &self.config
    }

    /// Finds the complete frame at the front of `buf`, if there is one.
    #[inline(always)]
    fn step(&mut self, buf: &RecvBuf) -> Step {
        match parse(buf.peek(), self.config.allow_non_minimal) {
            Ok(Some((value, head))) if value <= self.config.max_frame => {
                complete(buf, head, value, head, &mut self.latch)
            }
            Ok(Some((value, _))) => self.latch.failed(Error::LimitExceeded {
                limit: Limit::FrameLength,
                max: self.config.max_frame,
                attempted: value,
                offset: buf.offset(),
            }),
            Ok(None) => Step::NeedMore,
            Err((kind, at)) => self.latch.failed(Error::InvalidInput {
                kind,
                offset: buf.offset() + at as u64,
            }),
        }
    }
}

/// Parses a varint at the start of `data`: `Ok(Some((value, length)))`,
/// `Ok(None)` if it is not complete, or the error and the index of the byte
/// that shows it.
fn parse(
    data: &[u8],
    allow_non_minimal: bool,
) -> Result<Option<(u64, usize)>, (InvalidInput, usize)> {
    let mut value = 0u64;
    for (i, &byte) in data.iter().take(MAX_VARINT_LEN).enumerate() {
        if i == MAX_VARINT_LEN - 1 {
            if byte & 0x80 != 0 {
                return Err((InvalidInput::Varint(VarintField::TooLong), i));
            }
            if byte > 1 {
                return Err((InvalidInput::Varint(VarintField::Overflow), i));
            }
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            if byte == 0 && i > 0 && !allow_non_minimal {
                return Err((InvalidInput::Varint(VarintField::NotMinimal), i));
            }
            return Ok(Some((value, i + 1)));
        }
    }
    Ok(None)
}

impl Decoder for Varint {
    type Item = Bytes;

    /// # Errors
    ///
    /// [`InvalidInput::Varint`] ([`VarintField::TooLong`], `Overflow`,
    /// `NotMinimal`) for bad lengths (the offset points
    /// at the byte that shows it); [`Limit::FrameLength`] and
    /// [`Limit::Buffer`] as for [`LengthPrefixed`](crate::LengthPrefixed).
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

impl Encoder for Varint {
    type Item = Bytes;

    /// Frames a body: its length as a minimal LEB128 inline head (no
    /// allocation), the body untouched.
    ///
    /// # Errors
    ///
    /// [`Unencodable::TooLong`] past `max_frame_length`.
    #[inline(always)]
    fn encode(&mut self, body: Bytes) -> Result<Frame, Error> {
        let len = body.len() as u64;
        if len > self.config.max_frame {
            return Err(*refuse(Unencodable::TooLong {
                len,
                max: self.config.max_frame,
            }));
        }
        let mut head = [0u8; INLINE_FRAMING];
        let mut n = len;
        let mut i = 0;
        // Each group is masked to 7 bits before the cast; 64 bits take at
        // most 10 groups.
        while n >= 0x80 {
            head[i] = (n & 0x7f) as u8 | 0x80;
            n >>= 7;
            i += 1;
        }
        head[i] = (n & 0x7f) as u8;
        let head = Part::inline(head, i + 1);
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
    fn parses_known_encodings() {
        assert_eq!(parse(&[0], false), Ok(Some((0, 1))));
        assert_eq!(parse(&[0xac, 0x02], false), Ok(Some((300, 2))));
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(parse(&max, false), Ok(Some((u64::MAX, 10))));
        assert_eq!(parse(&max[..9], false), Ok(None));
    }

    #[test]
    fn rejects_bad_encodings_at_the_byte_that_shows_it() {
        let mut too_long = [0x80; 11];
        too_long[10] = 0;
        assert_eq!(
            parse(&too_long, false),
            Err((InvalidInput::Varint(VarintField::TooLong), 9))
        );
        let mut overflow = [0xff; 10];
        overflow[9] = 0x02;
        assert_eq!(
            parse(&overflow, false),
            Err((InvalidInput::Varint(VarintField::Overflow), 9))
        );
        assert_eq!(
            parse(&[0x80, 0x00], false),
            Err((InvalidInput::Varint(VarintField::NotMinimal), 1))
        );
        assert_eq!(parse(&[0x80, 0x00], true), Ok(Some((0, 2))));
    }
}
