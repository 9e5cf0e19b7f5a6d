//! Delimited lines.
//!
//! ```text
//!   stream:  h e l l o \r \n w o r l d \n p a r t
//!            └── frame ─┘└┬─┘└── frame ┘└┬┘└─ stays buffered
//!                      overhead       overhead
//! ```
//!
//! A line is every byte up to a delimiter (`\n` by default). The delimiter,
//! and with [`strip_cr`](LinesConfig::strip_cr) a `\r` just before it, are
//! framing overhead: they are consumed but not part of the frame.

use bytes::Bytes;

use crate::decoder::{Cut, Decoder, Latch, Step};
use crate::encoder::{refuse, Encoder, Frame, Part, INLINE_FRAMING};
use crate::error::{Error, InvalidInput, Limit, Unencodable};
use crate::recv_buf::RecvBuf;

/// Default [`LinesConfig::max_length`]: 64 KiB, bytes.
///
/// Redis's precedent for inline commands (`PROTO_INLINE_MAX_SIZE`): far more
/// than any human-typed or text-protocol line, small enough that a peer that
/// never sends a newline is cut off early.
pub const DEFAULT_MAX_LINE_LENGTH: usize = 64 * 1024;

/// Configuration of [`Lines`].
///
/// ```
/// use cleave_proto::{Lines, LinesConfig};
///
/// let lines = Lines::with_config(
///     LinesConfig::default()
///         .delimiter(b'\0')
///         .strip_cr(false)
///         .max_length(1024)
///         .utf8(true),
/// );
/// # let _ = lines;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinesConfig {
    delimiter: u8,
    strip_cr: bool,
    max_length: usize,
    utf8: bool,
    unterminated_last_line: bool,
    crlf: bool,
}

impl Default for LinesConfig {
    /// `\n`-delimited, `\r` stripped, at most 64 KiB a line, no UTF-8 check,
    /// an unterminated last line is an error.
    fn default() -> Self {
        Self {
            delimiter: b'\n',
            strip_cr: true,
            max_length: DEFAULT_MAX_LINE_LENGTH,
            utf8: false,
            unterminated_last_line: false,
            crlf: false,
        }
    }
}

impl LinesConfig {
    /// The byte that ends a line. Default `b'\n'`.
    #[must_use]
    pub fn delimiter(mut self, delimiter: u8) -> Self {
        self.delimiter = delimiter;
        self
    }

    /// Whether a `\r` right before the delimiter is dropped too. Default
    /// `true`, so `\r\n` and `\n` endings both work.
    #[must_use]
    pub fn strip_cr(mut self, strip: bool) -> Self {
        self.strip_cr = strip;
        self
    }

    /// The longest line accepted, in bytes, not counting the delimiter or a
    /// stripped `\r`. A longer line is an [`Error::LimitExceeded`] with
    /// [`Limit::LineLength`] as soon as `max + 1` bytes have arrived without a
    /// delimiter (`max + 2` when the last of them is a `\r` that
    /// [`strip_cr`](Self::strip_cr) may still drop): the decoder never waits
    /// for more than that.
    #[must_use]
    pub fn max_length(mut self, max: usize) -> Self {
        self.max_length = max;
        self
    }

    /// Whether every line must be UTF-8 (checked with `simdutf8`). A line
    /// that is not is an [`Error::InvalidInput`] with [`InvalidInput::Utf8`],
    /// whose offset points at the first bad byte. Default `false`.
    #[must_use]
    pub fn utf8(mut self, check: bool) -> Self {
        self.utf8 = check;
        self
    }

    /// What [`Decoder::decode_eof`] does with bytes after the last delimiter:
    /// `true` returns them as a last line (tokio-util's `LinesCodec` does
    /// this), `false` (the default) returns them in an [`Error::Truncated`].
    #[must_use]
    pub fn unterminated_last_line(mut self, allow: bool) -> Self {
        self.unterminated_last_line = allow;
        self
    }

    /// Whether the encoder ends lines with `\r` before the delimiter
    /// (`\r\n`; ignored when the delimiter is `\r`). Default `false`. The
    /// decoder accepts both endings while [`strip_cr`](Self::strip_cr) is
    /// on.
    #[must_use]
    pub fn crlf(mut self, crlf: bool) -> Self {
        self.crlf = crlf;
        self
    }

    /// See [`delimiter`](Self::delimiter).
    #[must_use]
    pub fn get_delimiter(&self) -> u8 {
        self.delimiter
    }

    /// See [`max_length`](Self::max_length).
    #[must_use]
    pub fn get_max_length(&self) -> usize {
        self.max_length
    }
}

/// Decoder of delimited lines into `Bytes` frames without their delimiter.
///
/// The search is done with `memchr`, and bytes already searched are not
/// searched again when a line arrives in pieces.
///
/// ```
/// use cleave_proto::{Decoder, Error, Lines, RecvBuf};
///
/// let mut buf = RecvBuf::new();
/// let mut lines = Lines::new();
/// buf.feed(b"GET a\r\nGET")?;
/// assert_eq!(lines.decode(&mut buf)?.as_deref(), Some(&b"GET a"[..]));
/// assert_eq!(lines.decode(&mut buf)?, None); // need more
/// buf.feed(b" b\nPAR")?;
/// assert_eq!(lines.decode(&mut buf)?.as_deref(), Some(&b"GET b"[..]));
///
/// // The stream ends inside a line: the bytes come back in the error.
/// match lines.decode_eof(&mut buf) {
///     Err(Error::Truncated { partial, offset }) => {
///         assert_eq!((&partial[..], offset), (&b"PAR"[..], 13));
///     }
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Lines {
    config: LinesConfig,
    /// How many leading bytes must hold a delimiter for the line to be
    /// within the limit: the line, an optional `\r`, the delimiter.
    window: usize,
    latch: Latch,
    /// How far the search of the line at the front went: the first
    /// `scanned.2` bytes from offset `scanned.1` of stream `scanned.0` hold
    /// no delimiter. Keyed by the stream and the offset, so bytes consumed
    /// behind the decoder's back, or another stream's buffer, start the
    /// search over; and a buffer lent one call at a time
    /// ([`RecvBuf::from_buffer_at`]) resumes it.
    scanned: (u32, u64, usize),
}

impl Default for Lines {
    fn default() -> Self {
        Self::with_config(LinesConfig::default())
    }
}

impl Lines {
    /// A decoder with the default configuration.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder with the given configuration.
    #[must_use]
    pub fn with_config(config: LinesConfig) -> Self {
        Self {
            config,
            window: config
                .max_length
                .saturating_add(1 + usize::from(config.strip_cr)),
            latch: Latch::default(),
            scanned: (0, 0, 0),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LinesConfig {
        &self.config
    }

    /// Finds the complete line at the front of `buf`, if there is one.
    #[inline(always)]
    fn step(&mut self, buf: &mut RecvBuf) -> Step {
        let delimiter = self.config.delimiter;
        let data = buf.peek();
        if data.is_empty() {
            // A read that ended on a line's end: nothing to search, nothing
            // to note (a note about no bytes is no note).
            return Step::NeedMore;
        }
        let end = data.len().min(self.window);
        // Resume where the last search of this line stopped. The offset
        // first: after a frame it has moved, and the check ends there.
        let start = if self.scanned.1 == buf.offset() && self.scanned.0 == buf.stream() {
            self.scanned.2.min(end)
        } else {
            0
        };
        match memchr::memchr(delimiter, &data[start..end]) {
            Some(i) => self.line(buf, data, start + i, 1),
            None if self.known_too_long(data) => {
                let e = self.too_long(buf);
                self.latch.failed(e)
            }
            None => {
                self.scanned = (buf.stream(), buf.offset(), end);
                Step::NeedMore
            }
        }
    }

    /// Whether a line with no delimiter in `data` (up to the window) is
    /// already over the limit: it is, past `max` bytes, unless the byte
    /// right after `max` is a `\r` that a delimiter may still follow.
    #[inline(always)]
    fn known_too_long(&self, data: &[u8]) -> bool {
        let max = self.config.max_length;
        match data.len().checked_sub(max) {
            None | Some(0) => false,
            Some(1) => !(self.config.strip_cr && data[max] == b'\r'),
            Some(_) => true,
        }
    }

    /// Checks the line that ends at `end` (the delimiter's index, or the
    /// buffer's length at end of stream) of `data` (what `buf` holds),
    /// followed by `delimiter` bytes.
    #[inline(always)]
    fn line(&mut self, buf: &RecvBuf, data: &[u8], end: usize, delimiter: usize) -> Step {
        let mut len = end;
        if self.config.strip_cr && len > 0 && data[len - 1] == b'\r' {
            len -= 1;
        }
        if len > self.config.max_length {
            let e = self.too_long(buf);
            return self.latch.failed(e);
        }
        if self.config.utf8 && simdutf8::basic::from_utf8(&data[..len]).is_err() {
            let valid = core::str::from_utf8(&data[..len]).map_or_else(|e| e.valid_up_to(), |_| 0);
            return self.latch.failed(Error::InvalidInput {
                kind: InvalidInput::Utf8,
                offset: buf.offset() + valid as u64,
            });
        }
        Step::Frame(Cut {
            skip: 0,
            len,
            trail: end + delimiter - len,
        })
    }

    /// The error for a line over the limit. Whatever the pieces, it is
    /// reported when `max + 1` bytes of the line are known, so `attempted`
    /// is always `max + 1`: "at least that long".
    fn too_long(&self, buf: &RecvBuf) -> Error {
        let max = self.config.max_length as u64;
        Error::LimitExceeded {
            limit: Limit::LineLength,
            max,
            attempted: max + 1,
            offset: buf.offset(),
        }
    }
}

impl Decoder for Lines {
    type Item = Bytes;

    /// # Errors
    ///
    /// [`Limit::LineLength`] for a line over the limit (`attempted` is
    /// `max + 1`: at least that long); [`InvalidInput::Utf8`] when UTF-8 is
    /// required and the line is not.
    #[inline(always)]
    fn decode(&mut self, buf: &mut RecvBuf) -> Result<Option<Bytes>, Error> {
        self.latch.check()?;
        let step = self.step(buf);
        self.latch.answer(step, buf)
    }

    fn decode_eof(&mut self, buf: &mut RecvBuf) -> Result<Option<Bytes>, Error> {
        self.latch.check()?;
        let step = match self.step(buf) {
            Step::NeedMore if self.config.unterminated_last_line && !buf.is_empty() => {
                self.line(buf, buf.peek(), buf.len(), 0)
            }
            step => step,
        };
        self.latch.answer_eof(step, buf)
    }
}

impl Encoder for Lines {
    type Item = Bytes;

    /// Frames a line: the line as the body, the delimiter (`\r` and the
    /// delimiter with [`crlf`](LinesConfig::crlf), unless the delimiter is
    /// itself `\r`) as an inline tail. No allocation, no copy.
    ///
    /// Decoding gives the line back as it was, except with `crlf` on and
    /// [`strip_cr`](LinesConfig::strip_cr) off: the decoder then keeps the
    /// `\r`, as asked.
    ///
    /// # Errors
    ///
    /// [`Unencodable`] when the line could not be read back as it is: it
    /// holds the delimiter, is longer than `max_length`, ends in `\r` while
    /// the decoder strips it, or is not UTF-8 while UTF-8 is required.
    #[inline(always)]
    fn encode(&mut self, line: Bytes) -> Result<Frame, Error> {
        let config = &self.config;
        // `\r` before a `\r` delimiter would be a line of its own.
        let crlf = config.crlf && config.delimiter != b'\r';
        // Without `strip_cr` the decoder reads the `\r` of `\r\n` as part of
        // the line, so it counts against the limit.
        let read_len = line.len() + usize::from(crlf && !config.strip_cr);
        if read_len > config.max_length {
            return Err(*refuse(Unencodable::TooLong {
                len: line.len() as u64,
                max: config
                    .max_length
                    .saturating_sub(usize::from(crlf && !config.strip_cr))
                    as u64,
            }));
        }
        if let Some(offset) = memchr::memchr(config.delimiter, &line) {
            return Err(*refuse(Unencodable::ContainsDelimiter { offset }));
        }
        // A last `\r` right before the delimiter would be stripped; after
        // the `\r` of `\r\n` it is kept.
        if config.strip_cr && !crlf && line.last() == Some(&b'\r') {
            return Err(*refuse(Unencodable::EndsWithCr));
        }
        if config.utf8 && simdutf8::basic::from_utf8(&line).is_err() {
            let valid_up_to = core::str::from_utf8(&line).map_or_else(|e| e.valid_up_to(), |_| 0);
            return Err(*refuse(Unencodable::NotUtf8 { valid_up_to }));
        }
        let mut tail = [0u8; INLINE_FRAMING];
        let tail = if crlf {
            tail[..2].copy_from_slice(&[b'\r', config.delimiter]);
            Part::inline(tail, 2)
        } else {
            tail[0] = config.delimiter;
            Part::inline(tail, 1)
        };
        let head = Part::inline([0; INLINE_FRAMING], 0);
        Ok(Frame::from_parts(head, line, tail))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(config: LinesConfig, input: &[u8]) -> (Vec<Bytes>, Option<Error>, RecvBuf) {
        let mut buf = RecvBuf::new();
        buf.feed(input).unwrap();
        let mut dec = Lines::with_config(config);
        let mut out = Vec::new();
        loop {
            match dec.decode_eof(&mut buf) {
                Ok(Some(line)) => out.push(line),
                Ok(None) => return (out, None, buf),
                Err(e) => return (out, Some(e), buf),
            }
        }
    }

    #[test]
    fn strips_cr_only_before_the_delimiter() {
        let (got, err, _) = lines(LinesConfig::default(), b"a\r\nb\rc\n\r\n");
        assert_eq!(got, ["a", "b\rc", ""]);
        assert_eq!(err, None);
        let (got, _, _) = lines(LinesConfig::default().strip_cr(false), b"a\r\n");
        assert_eq!(got, ["a\r"]);
    }

    #[test]
    fn line_of_exactly_max_length_is_accepted_with_or_without_cr() {
        let config = LinesConfig::default().max_length(3);
        let (got, err, _) = lines(config, b"abc\r\nabc\n");
        assert_eq!((got, err), (vec![Bytes::from("abc"); 2], None));
    }

    #[test]
    fn line_one_over_max_is_refused_with_the_bytes_left_in_place() {
        let config = LinesConfig::default().max_length(3);
        let (got, err, mut buf) = lines(config, b"ok\nabcd\nrest");
        assert_eq!(got, ["ok"]);
        assert_eq!(
            err,
            Some(Error::LimitExceeded {
                limit: Limit::LineLength,
                max: 3,
                attempted: 4,
                offset: 3
            })
        );
        assert_eq!(&buf.take_tail()[..], b"abcd\nrest");
    }

    #[test]
    fn unterminated_last_line_when_asked() {
        let config = LinesConfig::default().unterminated_last_line(true);
        let (got, err, _) = lines(config, b"a\nlast\r");
        assert_eq!(
            (got, err),
            (vec![Bytes::from("a"), Bytes::from("last")], None)
        );
    }

    #[test]
    fn utf8_error_points_at_the_bad_byte() {
        let config = LinesConfig::default().utf8(true);
        let (got, err, _) = lines(config, b"\xc3\xa9\nab\xc3\xa9\xff\n");
        assert_eq!(got, ["é"]);
        assert_eq!(
            err,
            Some(Error::InvalidInput {
                kind: InvalidInput::Utf8,
                offset: 3 + 4
            })
        );
    }

    #[test]
    fn resumes_the_search_where_it_stopped() {
        let mut buf = RecvBuf::new();
        let mut dec = Lines::new();
        buf.feed(b"abc").unwrap();
        assert_eq!(dec.decode(&mut buf), Ok(None));
        let stream = buf.stream();
        assert_eq!(dec.scanned, (stream, 0, 3));
        buf.feed(b"de").unwrap();
        assert_eq!(dec.decode(&mut buf), Ok(None));
        assert_eq!(dec.scanned, (stream, 0, 5));
        buf.feed(b"\nx").unwrap();
        assert_eq!(
            dec.decode(&mut buf).unwrap().as_deref(),
            Some(&b"abcde"[..])
        );
        assert_eq!(dec.decode(&mut buf), Ok(None));
        assert_eq!(dec.scanned, (stream, 6, 1), "a new note for the next line");
        // Bytes consumed behind the decoder's back: the note is stale.
        buf.advance(1).unwrap();
        buf.feed(b"y\n").unwrap();
        assert_eq!(dec.decode(&mut buf).unwrap().as_deref(), Some(&b"y"[..]));
    }
}
