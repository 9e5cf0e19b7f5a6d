//! Checksummed frames, byte-compatible with flatstream.
//!
//! ```text
//!   ┌────────────────────┬─────────────────────────┬─────────────────────┐
//!   │ payload length     │ checksum of the payload │ payload             │
//!   │ u32, little endian │ 0, 2, 4 or 8 bytes, LE  │ (length bytes)      │
//!   └────────────────────┴─────────────────────────┴─────────────────────┘
//! ```
//!
//! The checksum covers the payload only. Which [`Checksum`] a stream uses is
//! agreed out of band: there is no magic number and no version on the wire.
//!
//! | [`Checksum`]         | width | algorithm                              | check value¹         |
//! |----------------------|-------|----------------------------------------|----------------------|
//! | [`None`]             | 0     | no checksum (flatstream's "default")   | -                    |
//! | [`Crc16`]            | 2     | CRC-16/XMODEM                          | `0x31C3`             |
//! | [`Crc32`]            | 4     | CRC-32/ISO-HDLC (zlib's, crc32fast's)  | `0xCBF43926`         |
//! | [`Xxh3`]             | 8     | XXH3-64, seed 0 (feature `xxh3`)       | `0x72DC_B18B_67A1_7DFF`² |
//!
//! ¹ Of the nine ASCII bytes `123456789`. ² XXH3 has no catalogued check
//! value; this is the hash of those bytes, as the reference
//! implementation (python-xxhash 3) gives it.
//!
//! [`None`]: Checksum::None
//! [`Crc16`]: Checksum::Crc16
//! [`Crc32`]: Checksum::Crc32
//! [`Xxh3`]: Checksum::Xxh3
//!
//! The decoder reads the length first and refuses one over
//! [`max_frame_length`](CheckedConfig::max_frame_length) before any of the
//! payload arrives (nothing is ever reserved for a declared length). Once
//! the whole frame is buffered, the checksum is computed over the payload
//! where it lies in the receive buffer, and the payload comes out as a view
//! of it: no copy (or the whole frame, header included, with
//! [`keep_header`](CheckedConfig::keep_header), for a proxy to forward). A stream that ends inside a frame is an
//! [`Error::Truncated`] carrying that frame's bytes.
//!
//! A payload that does not match its checksum is, by default, a final
//! [`InvalidInput::Checksum`] error that consumes nothing: the frame stays
//! in the buffer for [`take_tail`](RecvBuf::take_tail). flatstream's reader
//! instead reports the mismatch and goes on with the next frame; that is
//! [`Checked::skip_mismatched`], whose items are `Result<Bytes,
//! BadChecksum>`.

use bytes::Bytes;
use core::fmt;

use crate::codec::length::DEFAULT_MAX_FRAME_LENGTH;
use crate::decoder::{complete, Decoder, Latch, Step};
use crate::encoder::{refuse, Encoder, Frame, Part, INLINE_FRAMING};
use crate::error::{Error, InvalidInput, Limit, Unencodable};
use crate::recv_buf::RecvBuf;

/// Bytes of the length field.
const LENGTH_WIDTH: usize = 4;

/// The largest payload the 4-byte length field can declare.
pub const MAX_CHECKED_FRAME_LENGTH: u64 = u32::MAX as u64;

pub use super::checksum::{Checksum, ChecksumMismatch};

/// `checksum`, or the error for a build that cannot compute it.
fn available(checksum: Checksum) -> Result<Checksum, Error> {
    if checksum.is_available() {
        Ok(checksum)
    } else {
        Err(Error::invalid_config(
            "checksum",
            checksum.width() as u64,
            "an algorithm this build has (the value is its width): XXH3 needs the `xxh3` feature",
        ))
    }
}

/// A frame skipped by [`SkipMismatched`]: the mismatch, where the frame
/// started, and its payload as received (a view of the buffer, not a copy).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadChecksum {
    /// What the frame said and what its payload gives.
    pub mismatch: ChecksumMismatch,
    /// Stream offset of the frame's first header byte.
    pub offset: u64,
    /// The payload that failed the check.
    pub payload: Bytes,
}

impl fmt::Display for BadChecksum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} in the {}-byte frame at offset {}",
            self.mismatch,
            self.payload.len(),
            self.offset
        )
    }
}

/// Configuration of [`Checked`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckedConfig {
    checksum: Checksum,
    max_frame: u64,
    keep_header: bool,
}

impl CheckedConfig {
    /// Frames checked with `checksum`, payloads up to 8 MiB (the limit of
    /// every codec here; flatstream's reader defaults to 2 GiB, its
    /// FlatBuffers limit: raise it with
    /// [`max_frame_length`](Self::max_frame_length) to match).
    #[must_use]
    pub const fn new(checksum: Checksum) -> Self {
        Self {
            checksum,
            max_frame: DEFAULT_MAX_FRAME_LENGTH,
            keep_header: false,
        }
    }

    /// Emit each verified frame whole, its length and checksum included,
    /// instead of its payload: what a proxy forwards as it came
    /// (`Frame::from(bytes)`), without computing the checksum again to
    /// encode it. Default: the payload only. (A frame that fails its
    /// checksum is still reported with its payload.) The encoder still
    /// takes payloads: do not encode kept frames again.
    #[must_use]
    pub const fn keep_header(mut self) -> Self {
        self.keep_header = true;
        self
    }

    /// See [`keep_header`](Self::keep_header).
    #[must_use]
    pub const fn keeps_header(&self) -> bool {
        self.keep_header
    }

    /// The largest payload accepted, in bytes, at most
    /// [`MAX_CHECKED_FRAME_LENGTH`]. A larger one is an
    /// [`Error::LimitExceeded`] with [`Limit::FrameLength`] as soon as its
    /// length has arrived.
    #[must_use]
    pub const fn max_frame_length(mut self, max: u64) -> Self {
        self.max_frame = max;
        self
    }

    /// The algorithm.
    #[must_use]
    pub const fn checksum(&self) -> Checksum {
        self.checksum
    }

    /// See [`max_frame_length`](Self::max_frame_length).
    #[must_use]
    pub const fn get_max_frame_length(&self) -> u64 {
        self.max_frame
    }

    /// Header length: the length field and the checksum.
    #[must_use]
    pub const fn header_len(&self) -> usize {
        LENGTH_WIDTH + self.checksum.width()
    }
}

/// Decoder and encoder of checksummed frames.
///
/// ```
/// use cleave_proto::codec::checked::{Checked, Checksum};
/// use cleave_proto::{Decoder, Encoder, RecvBuf};
///
/// let mut codec = Checked::new(Checksum::Crc32)?;
/// let frame = codec.encode("abc".into())?;
/// // Length 3, then CRC-32("abc") = 0x352441C2, both little endian.
/// assert_eq!(frame.head(), b"\x03\0\0\0\xc2\x41\x24\x35");
///
/// let mut buf = RecvBuf::new();
/// buf.feed(frame.head())?;
/// buf.feed(frame.body())?;
/// assert_eq!(codec.decode(&mut buf)?.as_deref(), Some(&b"abc"[..]));
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Checked {
    config: CheckedConfig,
    latch: Latch,
}

/// What [`Checked`] found at the front of the buffer.
enum Found {
    Step(Step),
    /// A whole frame whose payload fails its checksum.
    Mismatch(ChecksumMismatch, usize),
}

impl Checked {
    /// A codec with `checksum` and the default limit.
    ///
    /// # Errors
    ///
    /// [`Misuse::InvalidConfig`](crate::Misuse::InvalidConfig) for an
    /// algorithm this build cannot compute (see
    /// [`Checksum::is_available`]).
    pub fn new(checksum: Checksum) -> Result<Self, Error> {
        Self::with_config(CheckedConfig::new(checksum))
    }

    /// A codec with the given configuration.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new), and for a `max_frame_length` over
    /// [`MAX_CHECKED_FRAME_LENGTH`].
    pub fn with_config(config: CheckedConfig) -> Result<Self, Error> {
        available(config.checksum)?;
        if config.max_frame > MAX_CHECKED_FRAME_LENGTH {
            return Err(Error::invalid_config(
                "max_frame_length",
                config.max_frame,
                "at most u32::MAX: the length field is 4 bytes",
            ));
        }
        Ok(Self {
            config,
            latch: Latch::default(),
        })
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &CheckedConfig {
        &self.config
    }

    /// This decoder, made to report a frame that fails its checksum and go
    /// on with the next one, as flatstream's reader does.
    ///
    /// A decoder that has already stopped at a mismatch can be turned into
    /// one that skips: the mismatch is forgotten (the bad frame is still in
    /// the buffer and comes out as a [`BadChecksum`]); any other error
    /// stays final.
    #[must_use]
    pub fn skip_mismatched(mut self) -> SkipMismatched {
        self.latch.forget(|e| {
            matches!(
                e,
                Error::InvalidInput {
                    kind: InvalidInput::Checksum(_),
                    ..
                }
            )
        });
        SkipMismatched { inner: self }
    }

    /// Finds the complete frame at the front of `buf` and checks it.
    #[inline(always)]
    fn find(&mut self, buf: &RecvBuf) -> Found {
        let data = buf.peek();
        let width = self.config.checksum.width();
        let head = LENGTH_WIDTH + width;
        let Some(&[a, b, c, d]) = data.get(..LENGTH_WIDTH) else {
            return Found::Step(Step::NeedMore);
        };
        let len = u64::from(u32::from_le_bytes([a, b, c, d]));
        if len > self.config.max_frame {
            return Found::Step(self.latch.failed(Error::LimitExceeded {
                limit: Limit::FrameLength,
                max: self.config.max_frame,
                attempted: len,
                offset: buf.offset(),
            }));
        }
        let skip = if self.config.keep_header { 0 } else { head };
        let step = complete(buf, head, len, skip, &mut self.latch);
        let Step::Frame(cut) = step else {
            return Found::Step(step);
        };
        let total = cut.skip + cut.len + cut.trail;
        debug_assert!(total <= data.len());
        let Some(payload) = data.get(head..total) else {
            // `complete` saw the whole frame buffered: not reached.
            return Found::Step(Step::NeedMore);
        };
        let expected = read_le(&data[LENGTH_WIDTH..head]);
        let calculated = self.config.checksum.compute(payload);
        if expected == calculated {
            Found::Step(step)
        } else {
            let mismatch = ChecksumMismatch {
                checksum: self.config.checksum,
                expected,
                calculated,
            };
            Found::Mismatch(mismatch, total)
        }
    }

    #[inline(always)]
    fn step(&mut self, buf: &RecvBuf) -> Step {
        match self.find(buf) {
            Found::Step(step) => step,
            Found::Mismatch(mismatch, _) => self.latch.failed(Error::InvalidInput {
                kind: InvalidInput::Checksum(mismatch),
                offset: buf.offset(),
            }),
        }
    }
}

/// Reads a little-endian checksum of 0, 2, 4 or 8 bytes.
#[inline(always)]
fn read_le(field: &[u8]) -> u64 {
    match *field {
        [a, b] => u64::from(u16::from_le_bytes([a, b])),
        [a, b, c, d] => u64::from(u32::from_le_bytes([a, b, c, d])),
        [a, b, c, d, e, f, g, h] => u64::from_le_bytes([a, b, c, d, e, f, g, h]),
        _ => 0,
    }
}

impl Decoder for Checked {
    type Item = Bytes;

    /// # Errors
    ///
    /// [`Limit::FrameLength`] for a payload over the limit and
    /// [`Limit::Buffer`] for a frame that could never fit in the buffer,
    /// both as soon as the length has arrived; [`InvalidInput::Checksum`]
    /// for a payload that fails its checksum, once the whole frame has
    /// arrived (the frame is not consumed).
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

impl Encoder for Checked {
    type Item = Bytes;

    /// Frames a payload: the length and the checksum, computed over the
    /// payload where it lies, as an inline head (no allocation); the
    /// payload untouched.
    ///
    /// The item is a payload, whatever the decoder gives back: frames
    /// decoded with [`keep_header`](CheckedConfig::keep_header) are whole
    /// already, and go out as they are (`Frame::from(frame)`), not through
    /// this.
    ///
    /// # Errors
    ///
    /// [`Unencodable::TooLong`] past `max_frame_length`.
    #[inline(always)]
    fn encode(&mut self, payload: Bytes) -> Result<Frame, Error> {
        encode(&self.config, payload)
    }
}

#[inline(always)]
fn encode(config: &CheckedConfig, payload: Bytes) -> Result<Frame, Error> {
    let len = payload.len() as u64;
    if len > config.max_frame {
        return Err(*refuse(Unencodable::TooLong {
            len,
            max: config.max_frame,
        }));
    }
    // `max_frame <= u32::MAX`, checked when the codec was made.
    let field = u32::try_from(len).unwrap_or(u32::MAX);
    let sum = config.checksum.compute(&payload);
    let mut head = [0u8; INLINE_FRAMING];
    head[..LENGTH_WIDTH].copy_from_slice(&field.to_le_bytes());
    head[LENGTH_WIDTH..LENGTH_WIDTH + 8].copy_from_slice(&sum.to_le_bytes());
    Ok(Frame::from_parts(
        Part::inline(head, config.header_len()),
        payload,
        Part::inline([0; INLINE_FRAMING], 0),
    ))
}

/// [`Checked`] that reports a frame failing its checksum as an item and
/// goes on with the next frame, as flatstream's reader does.
///
/// The bad frame is consumed; its payload comes back in the
/// [`BadChecksum`]. Every other error (a length over the limit, a torn
/// frame at the end) is final, as for `Checked`.
///
/// ```
/// use cleave_proto::codec::checked::{Checked, Checksum};
/// use cleave_proto::{Decoder, RecvBuf};
///
/// let mut frames = Checked::new(Checksum::Crc16)?.skip_mismatched();
/// let mut buf = RecvBuf::new();
/// // "abc" with a wrong CRC, then "abc" with CRC-16/XMODEM("abc") = 0x9DD6.
/// buf.feed(b"\x03\0\0\0\x00\x00abc\x03\0\0\0\xd6\x9dabc")?;
/// let bad = frames.decode(&mut buf)?.unwrap().unwrap_err();
/// assert_eq!((bad.mismatch.expected, bad.mismatch.calculated), (0, 0x9dd6));
/// assert_eq!(frames.decode(&mut buf)?, Some(Ok("abc".into())));
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct SkipMismatched {
    inner: Checked,
}

impl SkipMismatched {
    /// The decoder that stops at a mismatch instead.
    #[must_use]
    pub fn into_inner(self) -> Checked {
        self.inner
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &CheckedConfig {
        &self.inner.config
    }

    #[inline(always)]
    fn next(
        &mut self,
        buf: &mut RecvBuf,
        eof: bool,
    ) -> Result<Option<Result<Bytes, BadChecksum>>, Error> {
        let inner = &mut self.inner;
        inner.latch.check()?;
        match inner.find(buf) {
            Found::Step(step) if eof => inner.latch.answer_eof(step, buf).map(|f| f.map(Ok)),
            Found::Step(step) => inner.latch.answer(step, buf).map(|f| f.map(Ok)),
            Found::Mismatch(mismatch, total) => Ok(Some(Err(skip(inner, buf, mismatch, total)))),
        }
    }
}

/// Takes a frame that failed its checksum off the buffer.
#[cold]
#[inline(never)]
fn skip(
    inner: &Checked,
    buf: &mut RecvBuf,
    mismatch: ChecksumMismatch,
    total: usize,
) -> BadChecksum {
    let head = inner.config.header_len();
    let offset = buf.offset();
    let payload = buf.split_frame(head, total - head, 0);
    BadChecksum {
        mismatch,
        offset,
        payload,
    }
}

impl Decoder for SkipMismatched {
    type Item = Result<Bytes, BadChecksum>;

    /// # Errors
    ///
    /// As [`Checked`]'s, except for a checksum mismatch, which is an item.
    #[inline(always)]
    fn decode(&mut self, buf: &mut RecvBuf) -> Result<Option<Self::Item>, Error> {
        self.next(buf, false)
    }

    fn decode_eof(&mut self, buf: &mut RecvBuf) -> Result<Option<Self::Item>, Error> {
        self.next(buf, true)
    }
}

impl Encoder for SkipMismatched {
    type Item = Bytes;

    /// As [`Checked`]'s.
    #[inline(always)]
    fn encode(&mut self, payload: Bytes) -> Result<Frame, Error> {
        encode(&self.inner.config, payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHECK: &[u8] = b"123456789";

    #[test]
    fn catalogued_check_values() {
        assert_eq!(Checksum::Crc16.compute(CHECK), 0x31c3);
        assert_eq!(Checksum::Crc32.compute(CHECK), 0xcbf4_3926);
        assert_eq!(Checksum::None.compute(CHECK), 0);
    }

    #[cfg(feature = "xxh3")]
    #[test]
    fn xxh3_of_the_check_string() {
        // Both values from python-xxhash, which binds the reference C code.
        assert_eq!(Checksum::Xxh3.compute(CHECK), 0x72dc_b18b_67a1_7dff);
        assert_eq!(Checksum::Xxh3.compute(b""), 0x2d06_8005_38d3_94c2);
    }

    #[test]
    fn reads_every_width() {
        assert_eq!(read_le(&[]), 0);
        assert_eq!(read_le(&[0x34, 0x12]), 0x1234);
        assert_eq!(read_le(&[4, 3, 2, 1]), 0x0102_0304);
        assert_eq!(read_le(&[8, 7, 6, 5, 4, 3, 2, 1]), 0x0102_0304_0506_0708);
    }

    #[test]
    fn limit_over_the_field_is_refused() {
        let config = CheckedConfig::new(Checksum::None).max_frame_length(1 << 32);
        assert!(Checked::with_config(config).is_err());
    }
}
