//! A message body as it arrives: `Content-Length` bytes, chunks (with
//! their size lines, extensions and trailers checked strictly), or bytes
//! until the close. Data comes out as `Bytes` views of the receive
//! buffer as soon as it is there: never copied, never held back for a
//! whole chunk.

use bytes::Bytes;

use crate::error::{Error, HttpField, Limit};
use crate::http1::chars::TOKEN;
use crate::http1::config::{Http1Config, MAX_HEADERS};
use crate::http1::head::{Body, Headers};
use crate::http1::lines::{check_field_lines, Bad, BlockScan};
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

/// Where the check of a size line that has not ended yet stopped: its
/// first `at` bytes are a valid start of a size line, and `state` is
/// where in the grammar the next byte falls. [`resume`](Self::resume)
/// judges the bytes after them as [`size_line`] would judge the whole
/// partial line, at the same places with the same errors.
#[derive(Clone, Copy, Debug, Default)]
struct SizeCheck {
    at: usize,
    state: SizeState,
    size: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum SizeState {
    /// The size's hex digits (none yet at the start).
    #[default]
    Digits,
    /// Whitespace after the size (only where it is allowed).
    Space,
    /// Right after a `;`: an extension's name.
    Semicolon,
    Name,
    /// Right after a `=`: a token or a quoted string.
    Equals,
    Token,
    Quoted,
    /// After a `\` in a quoted string.
    Escape,
    /// After a quoted string's closing quote.
    Closed,
}

impl SizeCheck {
    /// Checks `line[self.at..]`, a line not yet ended (without its line
    /// end, nor a CR at its end that the LF may still follow).
    fn resume(&mut self, line: &[u8], config: &Http1Config) -> Result<(), Bad> {
        use SizeState::*;
        let ext = |at| Bad::Field(HttpField::ChunkExtension, at);
        for (at, &b) in line.iter().enumerate().skip(self.at) {
            let token = TOKEN[usize::from(b)];
            self.state = match (self.state, b) {
                (Digits, _) if b.is_ascii_hexdigit() => {
                    let digit = u64::from((b as char).to_digit(16).unwrap_or(0));
                    self.size = self
                        .size
                        .checked_mul(16)
                        .and_then(|s| s.checked_add(digit))
                        .ok_or(Bad::Field(HttpField::ChunkSize, 0))?;
                    Digits
                }
                (Digits, _) if at == 0 => return Err(Bad::Field(HttpField::ChunkSize, 0)),
                (Digits | Space, b' ' | b'\t') if config.get_allow_chunk_size_whitespace() => Space,
                (Digits | Space, b';') => Semicolon,
                (Digits | Space, b'\r') => return Err(Bad::Field(HttpField::LineEnding, at)),
                (Digits | Space, _) => return Err(Bad::Field(HttpField::ChunkSize, at)),
                (Semicolon | Name, _) if token => Name,
                (Name | Token | Closed, b';') => Semicolon,
                (Name, b'=') => Equals,
                (Equals, b'"') => Quoted,
                (Equals | Token, _) if token => Token,
                (Quoted, b'"') => Closed,
                (Quoted, b'\\') => Escape,
                (Quoted | Escape, _) if b == b'\t' || (b >= 0x20 && b != 0x7f) => Quoted,
                _ => return Err(ext(at)),
            };
        }
        self.at = self.at.max(line.len());
        Ok(())
    }
}

/// A chunk-size line without its line end: the size, and how many
/// extension bytes it carried. No whitespace anywhere (the grammar's
/// "bad whitespace" around `;` and `=` is what senders must not send,
/// and parsers disagree on it), unless whitespace after the size is
/// allowed.
fn size_line(line: &[u8], config: &Http1Config, partial: bool) -> Result<(u64, usize), Bad> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        if partial && line.is_empty() {
            return Ok((0, 0));
        }
        return Err(Bad::Field(HttpField::ChunkSize, 0));
    }
    let mut size: u64 = 0;
    for &b in &line[..digits] {
        let d = (b as char).to_digit(16).unwrap_or(0);
        size = size
            .checked_mul(16)
            .and_then(|s| s.checked_add(u64::from(d)))
            .ok_or(Bad::Field(HttpField::ChunkSize, 0))?;
    }
    let mut rest = &line[digits..];
    if config.get_allow_chunk_size_whitespace() {
        while let [b' ' | b'\t', tail @ ..] = rest {
            rest = tail;
        }
    }
    let ext_at = line.len() - rest.len();
    match rest.first() {
        None => return Ok((size, 0)),
        Some(b';') => {}
        Some(b'\r') => return Err(Bad::Field(HttpField::LineEnding, ext_at)),
        Some(_) => return Err(Bad::Field(HttpField::ChunkSize, ext_at)),
    }
    extensions(rest, partial).map_err(|i| Bad::Field(HttpField::ChunkExtension, ext_at + i))?;
    Ok((size, rest.len()))
}

/// `*( ";" token [ "=" ( token / quoted-string ) ] )`: `Err` with the
/// index of the first byte that does not fit. With `partial`, `ext` is
/// what came of the line so far: running out of bytes anywhere is not an
/// error.
fn extensions(ext: &[u8], partial: bool) -> Result<(), usize> {
    let token = |from: usize| {
        ext[from..]
            .iter()
            .take_while(|&&b| TOKEN[usize::from(b)])
            .count()
    };
    let mut i = 0;
    while i < ext.len() {
        if ext[i] != b';' {
            return Err(i);
        }
        i += 1;
        let name = token(i);
        i += name;
        if name == 0 && !(partial && i == ext.len()) {
            return Err(i);
        }
        if ext.get(i) != Some(&b'=') {
            continue;
        }
        i += 1;
        if ext.get(i) == Some(&b'"') {
            match quoted_string_end(ext, i + 1) {
                Ok(end) => i = end,
                Err(end) if partial && end == ext.len() => return Ok(()),
                Err(at) => return Err(at),
            }
        } else {
            let value = token(i);
            i += value;
            if value == 0 && !(partial && i == ext.len()) {
                return Err(i);
            }
        }
    }
    Ok(())
}

/// The index past the closing quote of a quoted string whose content
/// starts at `i`.
fn quoted_string_end(ext: &[u8], mut i: usize) -> Result<usize, usize> {
    while i < ext.len() {
        match ext[i] {
            b'"' => return Ok(i + 1),
            b'\\' => match ext.get(i + 1) {
                Some(&b) if b == b'\t' || b >= 0x20 && b != 0x7f => i += 2,
                _ => return Err(i + 1),
            },
            b'\t' => i += 1,
            b if b < 0x20 || b == 0x7f => return Err(i),
            _ => i += 1,
        }
    }
    Err(ext.len())
}

/// Checks a whole trailer section (its empty line included): its lines'
/// shape, httparse's verdict, the count, and no field that frames or
/// routes a message. Returns the number of fields.
fn trailers(block: &[u8], config: &Http1Config) -> Result<usize, Bad> {
    let end = if block.ends_with(b"\r\n") {
        block.len() - 2
    } else {
        block.len() - 1
    };
    check_field_lines(&block[..end], 0, false).map_err(|bad| match bad {
        Bad::Field(HttpField::ObsFold | HttpField::Whitespace | HttpField::HeaderName, at) => {
            Bad::Field(HttpField::Trailer, at)
        }
        other => other,
    })?;
    let max = config.get_max_headers().min(MAX_HEADERS);
    // Trailers are rare: initialised slots, and httparse's plain call.
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let parsed = httparse::parse_headers(block, &mut slots[..max]);
    let headers = match parsed {
        Ok(httparse::Status::Complete((_, headers))) => headers,
        Err(httparse::Error::TooManyHeaders) => {
            return Err(Bad::Limit(
                Limit::HeaderCount,
                max as u64,
                max as u64 + 1,
                0,
            ))
        }
        Err(httparse::Error::NewLine) => return Err(Bad::Field(HttpField::LineEnding, 0)),
        _ => return Err(Bad::Field(HttpField::Trailer, 0)),
    };
    for h in headers.iter() {
        let name = h.name.as_bytes();
        if [
            &b"content-length"[..],
            b"transfer-encoding",
            b"host",
            b"trailer",
        ]
        .iter()
        .any(|forbidden| name.eq_ignore_ascii_case(forbidden))
        {
            return Err(Bad::Field(HttpField::Trailer, 0));
        }
    }
    Ok(headers.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Bytes a size line is made of, and some it must not hold.
    fn line() -> impl Strategy<Value = Vec<u8>> {
        let byte = prop_oneof![
            4 => prop::sample::select(b"0123456789abcdefABCDEF".to_vec()),
            3 => prop::sample::select(b";=\"\\ \t\rxyz-!".to_vec()),
            1 => prop::sample::select(vec![0x00, 0x01, 0x7f, 0x80, 0xc3, b'\n']),
        ];
        prop::collection::vec(byte, 0..40)
    }

    proptest! {
        /// A line checked piece by piece, from where the last look
        /// stopped, gets the verdict of the whole partial line checked
        /// from its start, at the same place: nothing before the first
        /// error is refused, the first error is the same.
        #[test]
        fn a_resumed_check_judges_as_a_whole_one(
            line in line(),
            cuts in prop::collection::vec(0usize..40, 0..6),
            whitespace in any::<bool>(),
        ) {
            let config = Http1Config::default().allow_chunk_size_whitespace(whitespace);
            let mut ends: Vec<usize> = cuts.into_iter().map(|c| c.min(line.len())).collect();
            ends.push(line.len());
            ends.sort_unstable();
            let mut check = SizeCheck::default();
            for end in ends {
                let prefix = &line[..end];
                let whole = size_line(prefix, &config, true).map(|_| ());
                let resumed = check.resume(prefix, &config);
                prop_assert_eq!(&resumed, &whole, "{:?}", prefix);
                if resumed.is_err() {
                    break;
                }
            }
        }
    }
}
