//! A message body as it arrives: `Content-Length` bytes, chunks (with
//! their size lines, extensions and trailers checked strictly), or bytes
//! until the close. Data comes out as `Bytes` views of the receive
//! buffer as soon as it is there: never copied, never held back for a
//! whole chunk.

use bytes::Bytes;

use crate::error::{Error, HttpField, Limit};
use crate::http1::chunk_lines::{size_line, trailers, SizeCheck};
use crate::http1::config::Http1Config;
use crate::http1::head::{Body, Headers};
use crate::http1::lines::{Bad, BlockScan};
use crate::recv_buf::RecvBuf;

/// What a body gives next.
#[derive(Debug)]
pub(crate) enum Piece {
    Data(Bytes),
    Trailers(Headers),
    End,
}

/// Where a body is.
#[derive(Clone, Debug)]
pub(crate) enum BodyState {
    Length(u64),
    Chunked(Chunked),
    UntilClose,
    /// Trailers came out; the end is next.
    Ended,
}

/// A chunked body's progress.
#[derive(Clone, Debug)]
pub(crate) struct Chunked {
    step: Step,
    /// Extension bytes so far in this message.
    extensions: u64,
}

#[derive(Clone, Copy, Debug)]
enum Step {
    /// A size line; the bytes before `scanned` hold no LF, and `check`
    /// says how far they were found a valid start of a size line.
    Size {
        scanned: usize,
        check: SizeCheck,
    },
    Data(u64),
    DataEnd,
    Trailers(BlockScan),
}

impl BodyState {
    /// The state for a body framed as `body`; `None` for no body.
    pub(crate) fn new(body: Body) -> Option<Self> {
        match body {
            Body::Empty => None,
            Body::Length(n) => Some(Self::Length(n)),
            Body::Chunked => Some(Self::Chunked(Chunked {
                step: Step::Size {
                    scanned: 0,
                    check: SizeCheck::default(),
                },
                extensions: 0,
            })),
            Body::UntilClose => Some(Self::UntilClose),
        }
    }

    /// The next piece: `Ok(None)` while more bytes are needed.
    /// `received` counts the body's bytes against the configured limit.
    pub(crate) fn poll(
        &mut self,
        recv: &mut RecvBuf,
        eof: bool,
        config: &Http1Config,
        received: &mut u64,
    ) -> Result<Option<Piece>, Error> {
        match self {
            Self::Length(0) | Self::Ended => Ok(Some(Piece::End)),
            Self::Length(_) => data_or_wait(self.data_now(recv, received, config), recv, eof),
            Self::UntilClose => {
                if recv.is_empty() {
                    return Ok(eof.then_some(Piece::End));
                }
                // Up to the limit, then the error with the bytes past it
                // still buffered: the same however the bytes came.
                let room = room(*received, config);
                if room == 0 {
                    return Err(over_body(config, *received, 1, recv));
                }
                let n = usize::try_from(room).unwrap_or(usize::MAX).min(recv.len());
                let data = recv.split_to(n)?;
                *received = received.saturating_add(data.len() as u64);
                Ok(Some(Piece::Data(data)))
            }
            Self::Chunked(chunked) => {
                let piece = chunked.poll(recv, eof, config, received)?;
                if matches!(piece, Some(Piece::Trailers(_))) {
                    *self = Self::Ended;
                }
                Ok(piece)
            }
        }
    }
}

impl BodyState {
    /// The body's next data when some is buffered and nothing else comes
    /// first (within a Content-Length, or inside a chunk): what
    /// [`poll`](Self::poll) gives then, and the one place that takes it.
    /// `None` in every other case, which `poll` settles: the fast path of
    /// the protocols that read bodies.
    #[inline(always)]
    pub(crate) fn data_now(
        &mut self,
        recv: &mut RecvBuf,
        received: &mut u64,
        config: &Http1Config,
    ) -> Option<Bytes> {
        if recv.is_empty() {
            return None;
        }
        match self {
            Self::Length(remaining) if *remaining > 0 => {
                let data = recv.split_frame(0, buffered(recv, *remaining), 0);
                *remaining -= data.len() as u64;
                Some(data)
            }
            Self::Chunked(chunked) => match chunked.step {
                Step::DataEnd => chunked.next_chunk_now(recv, received, config),
                _ => chunked.data_now(recv, received),
            },
            _ => None,
        }
    }
}

impl BodyState {
    /// Whether the body still wants bytes (its end is not next): with
    /// none buffered and the stream open, [`poll`](Self::poll) waits and
    /// changes nothing.
    #[inline(always)]
    pub(crate) fn wants_bytes(&self) -> bool {
        !matches!(self, Self::Length(0) | Self::Ended)
    }
}

/// Of `remaining` bytes, how many are buffered.
#[inline(always)]
fn buffered(recv: &RecvBuf, remaining: u64) -> usize {
    usize::try_from(remaining).map_or(recv.len(), |n| n.min(recv.len()))
}

impl Chunked {
    /// Inside a chunk, its next data if some is buffered; `None` anywhere
    /// else.
    #[inline(always)]
    fn data_now(&mut self, recv: &mut RecvBuf, received: &mut u64) -> Option<Bytes> {
        let Step::Data(remaining) = self.step else {
            return None;
        };
        if recv.is_empty() {
            return None;
        }
        let data = recv.split_frame(0, buffered(recv, remaining), 0);
        // Within the limit: the size line was checked.
        *received = received.saturating_add(data.len() as u64);
        let left = remaining - data.len() as u64;
        self.step = if left == 0 {
            Step::DataEnd
        } else {
            Step::Data(left)
        };
        Some(data)
    }
}

impl Chunked {
    /// After a chunk's data, the commonest boundary at once: its CRLF and
    /// the next chunk's size line, only hex digits (at most 15) and CRLF,
    /// a size above 0 within the body limit; then that chunk's data, if
    /// some is buffered. Anything else (an extension, whitespace, a bare
    /// LF, the last chunk, a size over the limit, a line not all here)
    /// is left to [`poll`](Self::poll), which judges it. What this takes,
    /// `poll` takes the same way: the CRLF, then the size line (its size
    /// is what `size_line` reads from hex digits alone, with no
    /// extension bytes to count).
    #[inline]
    fn next_chunk_now(
        &mut self,
        recv: &mut RecvBuf,
        received: &mut u64,
        config: &Http1Config,
    ) -> Option<Bytes> {
        let line = recv.peek().strip_prefix(b"\r\n")?;
        let digits = line
            .iter()
            .take(16)
            .take_while(|b| b.is_ascii_hexdigit())
            .count();
        if !(1..=15).contains(&digits) || line.get(digits..digits + 2) != Some(b"\r\n") {
            return None;
        }
        let size = line[..digits].iter().fold(0u64, |n, &b| {
            (n << 4) | u64::from((b as char).to_digit(16).unwrap_or(0))
        });
        if size == 0 || size > room(*received, config) {
            return None;
        }
        recv.advance(2 + digits + 2).ok()?;
        self.step = Step::Data(size);
        self.data_now(recv, received)
    }
}

/// Data [`BodyState::data_now`] took, or, when none was buffered, a wait
/// for more (a truncation at the end of the stream).
fn data_or_wait(
    data: Option<Bytes>,
    recv: &mut RecvBuf,
    eof: bool,
) -> Result<Option<Piece>, Error> {
    match data {
        Some(data) => Ok(Some(Piece::Data(data))),
        None if eof => Err(truncated(recv)),
        None => Ok(None),
    }
}

/// The next piece of the current message: its body's, or its end at once
/// when it has none (`body` is `None`).
pub(crate) fn next_piece(
    body: &mut Option<BodyState>,
    recv: &mut RecvBuf,
    eof: bool,
    config: &Http1Config,
    received: &mut u64,
) -> Result<Option<Piece>, Error> {
    match body {
        None => Ok(Some(Piece::End)),
        Some(body) => body.poll(recv, eof, config, received),
    }
}

/// The stream ended inside a message.
#[cold]
pub(crate) fn truncated(recv: &mut RecvBuf) -> Error {
    let offset = recv.offset();
    Error::Truncated {
        partial: recv.take_tail(),
        offset,
    }
}

/// How many more body bytes the configured limit allows.
fn room(received: u64, config: &Http1Config) -> u64 {
    config
        .get_max_body()
        .map_or(u64::MAX, |max| max.saturating_sub(received))
}

/// `more` body bytes past the `received` ones would pass the limit: the
/// error at the start of the buffer, where they are.
#[cold]
fn over_body(config: &Http1Config, received: u64, more: u64, recv: &RecvBuf) -> Error {
    Error::LimitExceeded {
        limit: Limit::BodyLength,
        max: config.get_max_body().unwrap_or(u64::MAX),
        attempted: received.saturating_add(more),
        offset: recv.offset(),
    }
}

/// `bad`, at its place in the stream.
pub(crate) fn at(bad: Bad, recv: &RecvBuf) -> Error {
    bad.into_error(recv.offset())
}

impl Chunked {
    fn poll(
        &mut self,
        recv: &mut RecvBuf,
        eof: bool,
        config: &Http1Config,
        received: &mut u64,
    ) -> Result<Option<Piece>, Error> {
        loop {
            match self.step {
                Step::Size { scanned, mut check } => {
                    let buf = recv.peek();
                    // The furthest the LF may be: after 16 hex digits,
                    // the extension bytes left and a CR (a line of 18
                    // bytes past the budget, as `max_chunk_extensions`
                    // says).
                    let budget = config
                        .get_max_chunk_extensions()
                        .saturating_sub(self.extensions);
                    let most = usize::try_from(budget.saturating_add(17)).unwrap_or(usize::MAX);
                    // A position past the buffer (one swapped under the protocol)
                    // searches it whole rather than panic.
                    let scanned = scanned.min(buf.len());
                    let found = memchr::memchr(b'\n', &buf[scanned..]).map(|i| scanned + i);
                    let Some(lf) = found.filter(|&lf| lf <= most) else {
                        // Judge what came so far: garbage fails now, not
                        // at the limit. Only the bytes a reader fed byte
                        // by byte had when it reached the limit count, so
                        // that the verdict does not depend on how they
                        // came.
                        let seen = &buf[..buf.len().min(most.saturating_add(1))];
                        let partial = seen.strip_suffix(b"\r").unwrap_or(seen);
                        // From where the last look stopped: a line that
                        // comes a byte at a time is checked once, not from
                        // its start at every read.
                        check.resume(partial, config).map_err(|bad| at(bad, recv))?;
                        if seen.len() > most {
                            return Err(ext_limit(
                                config,
                                self.extensions,
                                seen.len() as u64,
                                recv,
                            ));
                        }
                        if eof {
                            return Err(truncated(recv));
                        }
                        self.step = Step::Size {
                            scanned: buf.len(),
                            check,
                        };
                        return Ok(None);
                    };
                    let (line, crlf) = match buf[..lf].strip_suffix(b"\r") {
                        Some(line) => (line, true),
                        None => (&buf[..lf], config.get_allow_bare_lf()),
                    };
                    let (size, ext) =
                        size_line(line, config, false).map_err(|bad| at(bad, recv))?;
                    if !crlf {
                        // A bare LF: inside an extension, the extension is
                        // malformed; after a size, the line end.
                        let field = if ext > 0 {
                            HttpField::ChunkExtension
                        } else {
                            HttpField::LineEnding
                        };
                        return Err(at(Bad::Field(field, lf), recv));
                    }
                    self.extensions += ext as u64;
                    if self.extensions > config.get_max_chunk_extensions() {
                        return Err(ext_limit(config, 0, self.extensions, recv));
                    }
                    // A chunk declares its size: one past the limit is
                    // refused at its size line, before any of its data is
                    // taken, the same however the bytes come.
                    if size > room(*received, config) {
                        return Err(over_body(config, *received, size, recv));
                    }
                    recv.advance(lf + 1)?;
                    self.step = if size == 0 {
                        Step::Trailers(BlockScan::default())
                    } else {
                        Step::Data(size)
                    };
                }
                Step::Data(_) => return data_or_wait(self.data_now(recv, received), recv, eof),
                Step::DataEnd => {
                    let n = match recv.peek() {
                        [b'\r', b'\n', ..] => 2,
                        [b'\n', ..] if config.get_allow_bare_lf() => 1,
                        [] | [b'\r'] if !eof => return Ok(None),
                        [] | [b'\r'] => return Err(truncated(recv)),
                        _ => return Err(at(Bad::Field(HttpField::ChunkDataEnd, 0), recv)),
                    };
                    recv.advance(n)?;
                    self.step = Step::Size {
                        scanned: 0,
                        check: SizeCheck::default(),
                    };
                }
                Step::Trailers(mut scan) => {
                    let buf = recv.peek();
                    match buf {
                        [b'\r', b'\n', ..] => {
                            recv.advance(2)?;
                            self.step = Step::Size {
                                scanned: 0,
                                check: SizeCheck::default(),
                            };
                            return Ok(Some(Piece::End));
                        }
                        [b'\n', ..] if config.get_allow_bare_lf() => {
                            recv.advance(1)?;
                            return Ok(Some(Piece::End));
                        }
                        _ => {}
                    }
                    let found = scan
                        .scan(
                            buf,
                            config.get_allow_bare_lf(),
                            config.get_max_line(),
                            config.get_max_trailers(),
                            Limit::TrailerLength,
                        )
                        .map_err(|bad| at(bad, recv))?;
                    let Some(len) = found else {
                        if eof {
                            return Err(truncated(recv));
                        }
                        self.step = Step::Trailers(scan);
                        return Ok(None);
                    };
                    let count = trailers(&buf[..len], config).map_err(|bad| at(bad, recv))?;
                    let block = recv.split_to(len)?;
                    let end = if block.ends_with(b"\r\n") {
                        len - 2
                    } else {
                        len - 1
                    };
                    return Ok(Some(Piece::Trailers(Headers::new(block, (0, end), count))));
                }
            }
        }
    }
}

#[cold]
fn ext_limit(config: &Http1Config, used: u64, attempted: u64, recv: &RecvBuf) -> Error {
    Error::LimitExceeded {
        limit: Limit::ChunkExtension,
        max: config.get_max_chunk_extensions(),
        attempted: used.saturating_add(attempted),
        offset: recv.offset(),
    }
}
