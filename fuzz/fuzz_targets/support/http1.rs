//! What the two HTTP/1.1 fuzz targets share: offsets, line ends, chunk
//! lines and the framing fields, read the simple way to check the parser.

use cleave_proto::http1::{Body, Headers, Http1Config};
use cleave_proto::Error;

/// The index of a stream offset in the input.
pub(crate) fn ix(offset: u64) -> usize {
    usize::try_from(offset).expect("an offset in memory")
}

pub(crate) fn len64(bytes: &[u8]) -> u64 {
    u64::try_from(bytes.len()).expect("a length in range")
}

/// `rest` without a leading line end: CRLF, or a bare LF if allowed.
pub(crate) fn strip_eol(rest: &[u8], bare_lf: bool) -> Option<&[u8]> {
    match rest {
        [b'\r', b'\n', tail @ ..] => Some(tail),
        [b'\n', tail @ ..] if bare_lf => Some(tail),
        _ => None,
    }
}

/// A chunk-size line at the start of `gap` (after the line end of the
/// previous chunk's data unless `first`): its size, its extension bytes,
/// and the bytes it took. The extensions' grammar is left to the parser:
/// here only their count matters.
pub(crate) fn chunk_line(
    gap: &[u8],
    first: bool,
    config: &Http1Config,
) -> Option<(u64, u64, usize)> {
    let bare_lf = config.get_allow_bare_lf();
    let line = if first { gap } else { strip_eol(gap, bare_lf)? };
    let lf = line.iter().position(|&b| b == b'\n')?;
    let taken = gap.len() - line.len() + lf + 1;
    let line = match line[..lf].strip_suffix(b"\r") {
        Some(line) => line,
        None if bare_lf => &line[..lf],
        None => return None,
    };
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return None;
    }
    let mut size: u64 = 0;
    for &b in &line[..digits] {
        let d = u64::from(char::from(b).to_digit(16)?);
        size = size.checked_mul(16)?.checked_add(d)?;
    }
    let mut rest = &line[digits..];
    if config.get_allow_chunk_size_whitespace() {
        while let [b' ' | b'\t', tail @ ..] = rest {
            rest = tail;
        }
    }
    if !(rest.is_empty() || rest[0] == b';') || rest.contains(&b'\r') {
        return None;
    }
    Some((size, len64(rest), taken))
}

pub(crate) fn trim(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

/// The comma-separated elements of every field `name`, trimmed; empty
/// ones kept when `empty`.
pub(crate) fn elements<'h>(headers: &'h Headers, name: &'h str, empty: bool) -> Vec<&'h [u8]> {
    headers
        .get_all(name)
        .flat_map(|v| v.split(|&b| b == b','))
        .map(trim)
        .filter(|e| empty || !e.is_empty())
        .collect()
}

pub(crate) fn has_element(headers: &Headers, name: &str, token: &[u8]) -> bool {
    elements(headers, name, false)
        .iter()
        .any(|e| e.eq_ignore_ascii_case(token))
}

/// Every Content-Length element as a number (`None`: not digits).
pub(crate) fn content_lengths(headers: &Headers) -> Vec<Option<u64>> {
    elements(headers, "content-length", true)
        .into_iter()
        .map(|e| {
            let digits = !e.is_empty() && e.iter().all(u8::is_ascii_digit);
            digits.then(|| std::str::from_utf8(e).ok()?.parse().ok())?
        })
        .collect()
}

/// A head's own shape: its line ends, its bytes, its lines against the
/// limits, its empty line.
pub(crate) fn check_head_lines(head: &[u8], config: &Http1Config) {
    assert!(head.len() <= config.get_max_head(), "a head over max_head");
    for line in head.split_inclusive(|&b| b == b'\n') {
        assert!(line.len() <= config.get_max_line(), "a line over max_line");
        let text = line.strip_suffix(b"\n").expect("a line without its end");
        let crlf = text.strip_suffix(b"\r");
        assert!(crlf.is_some() || config.get_allow_bare_lf(), "a bare LF");
        let text = crlf.unwrap_or(text);
        let control = |&b: &u8| (b < 0x20 && b != b'\t') || b == 0x7f;
        assert!(
            !text.iter().any(control),
            "a control byte in {:?}",
            text.escape_ascii().to_string()
        );
    }
    let last = head.split_inclusive(|&b| b == b'\n').next_back();
    assert!(
        matches!(last, Some(b"\r\n" | b"\n")),
        "a head without its empty line"
    );
}

/// Where `part`, which ends at `end`, starts: asserted to be the bytes
/// there, and after `pos`, what is accounted for.
pub(crate) fn place(input: &[u8], pos: usize, part: &[u8], end: usize) -> usize {
    let start = end
        .checked_sub(part.len())
        .expect("a part longer than the stream");
    assert!(start >= pos, "a part over bytes already accounted for");
    assert_eq!(&input[start..end], part, "a part not at its place");
    start
}

/// Where a message stands in a checker.
#[derive(Debug)]
pub(crate) enum State {
    /// Between messages.
    Idle,
    /// Nothing more is parsed.
    Closed,
    Open(Open),
}

/// A message between its head and its end, as a checker walks its body.
#[derive(Debug)]
pub(crate) struct Open {
    pub(crate) body: Body,
    received: u64,
    /// Bytes left in the current chunk.
    chunk_left: u64,
    chunks: usize,
    extensions: u64,
    trailers: bool,
}

impl Open {
    pub(crate) fn new(body: Body) -> Self {
        Self {
            body,
            received: 0,
            chunk_left: 0,
            chunks: 0,
            extensions: 0,
            trailers: false,
        }
    }

    /// The chunk-size line that fills `gap` (before the data at its end,
    /// or before the trailers or the end when `last`), counted.
    fn chunk(&mut self, gap: &[u8], last: bool, config: &Http1Config) -> usize {
        assert_eq!(self.chunk_left, 0, "a chunk-size line inside a chunk");
        let (size, ext, taken) = chunk_line(gap, self.chunks == 0, config).unwrap_or_else(|| {
            panic!("no chunk-size line in {:?}", gap.escape_ascii().to_string())
        });
        assert_eq!(size == 0, last, "the last chunk or not");
        self.chunk_left = size;
        self.chunks += 1;
        self.extensions += ext;
        let max = config.get_max_chunk_extensions();
        assert!(self.extensions <= max, "past max_chunk_extensions");
        taken
    }

    /// Whether `gap`, consumed after the last event, is a chunked body's
    /// framing: the line end after chunk data, or that (unless first) and
    /// a whole chunk-size line whose data has not come.
    pub(crate) fn is_framing(&self, gap: &[u8], config: &Http1Config) -> bool {
        let first = self.chunks == 0;
        let whole_line = chunk_line(gap, first, config).is_some_and(|(.., n)| n == gap.len());
        let eol = !first && strip_eol(gap, config.get_allow_bare_lf()) == Some(&[][..]);
        self.body == Body::Chunked && self.chunk_left == 0 && (whole_line || eol)
    }

    /// Body bytes `d`, ending at `end`, after what is accounted for
    /// (`pos`): at their place, within the framing and the limits.
    pub(crate) fn data(
        &mut self,
        input: &[u8],
        pos: usize,
        d: &[u8],
        end: usize,
        config: &Http1Config,
    ) {
        assert!(!d.is_empty(), "empty data");
        assert!(!self.trailers, "data after trailers");
        let start = place(input, pos, d, end);
        let gap = &input[pos..start];
        let len = len64(d);
        match self.body {
            Body::Length(n) => {
                assert!(gap.is_empty(), "bytes skipped in a length body");
                assert!(self.received + len <= n, "past Content-Length");
            }
            Body::Chunked => {
                if gap.is_empty() {
                    assert!(self.chunk_left > 0, "data without its chunk-size line");
                } else {
                    let taken = self.chunk(gap, false, config);
                    assert_eq!(taken, gap.len(), "more than a chunk-size line");
                }
                assert!(len <= self.chunk_left, "past the chunk size");
                self.chunk_left -= len;
            }
            Body::UntilClose => assert!(gap.is_empty(), "bytes skipped in a body"),
            Body::Empty => panic!("data in an empty body"),
        }
        self.received += len;
        let max = config.get_max_body();
        assert!(max.is_none_or(|max| self.received <= max), "past max_body");
    }

    /// A trailer section `t` ending at `end`: after the last chunk's line,
    /// within the limits, without framing or routing fields.
    pub(crate) fn trailers(
        &mut self,
        input: &[u8],
        pos: usize,
        t: &Headers,
        end: usize,
        config: &Http1Config,
    ) {
        assert!(
            self.body == Body::Chunked && !self.trailers,
            "trailers in {self:?}"
        );
        let block = t.as_bytes();
        let eol = if input[..end].ends_with(b"\r\n") {
            2
        } else {
            1
        };
        assert!(eol == 2 || config.get_allow_bare_lf() && input[..end].ends_with(b"\n"));
        let start = place(input, pos, block, end - eol);
        let taken = self.chunk(&input[pos..start], true, config);
        assert_eq!(
            pos + taken,
            start,
            "more than the last chunk's line before trailers"
        );
        assert!(
            block.len() + eol <= config.get_max_trailers(),
            "over max_trailers"
        );
        assert!(!t.is_empty() && t.len() <= config.get_max_headers());
        assert_eq!(t.iter().count(), t.len());
        let forbidden = ["content-length", "transfer-encoding", "host", "trailer"];
        for h in t {
            let name = h.name();
            assert!(
                !forbidden.iter().any(|f| name.eq_ignore_ascii_case(f)),
                "{h:?} as a trailer"
            );
        }
        self.trailers = true;
    }

    /// The end of the message, whose framing since the last event is
    /// `gap`: the whole body came, and the gap is its last framing.
    pub(crate) fn end(&mut self, gap: &[u8], config: &Http1Config) {
        match self.body {
            Body::Length(n) => assert_eq!(self.received, n, "ended short of Content-Length"),
            Body::Chunked if !self.trailers => {
                let taken = self.chunk(gap, true, config);
                let after = strip_eol(&gap[taken..], config.get_allow_bare_lf());
                assert_eq!(
                    after,
                    Some(&[][..]),
                    "not the empty line after the last chunk"
                );
            }
            _ => assert!(gap.is_empty(), "bytes skipped before the end"),
        }
    }
}

/// Where a run stopped consuming, checked against the input: a truncated
/// stream hands back its partial bytes, any other run its rest. Then the
/// error, if it has a place, points within what was given, after `pos`.
pub(crate) fn consumed(
    input: &[u8],
    pos: usize,
    error: Option<&Error>,
    consumed: u64,
    rest: &[u8],
) -> usize {
    let at = match error {
        Some(Error::Truncated { partial, offset }) => {
            // Empty when the stream ended in a body whose bytes so far
            // all came out as data.
            assert!(rest.is_empty(), "truncated, yet bytes left");
            assert_eq!(&partial[..], &input[ix(*offset)..], "the partial bytes");
            assert_eq!(ix(consumed), input.len());
            ix(*offset)
        }
        _ => {
            assert_eq!(rest, &input[ix(consumed)..], "the rest");
            ix(consumed)
        }
    };
    assert!(pos <= at);
    if let Some(offset) = error.and_then(Error::offset) {
        let offset = ix(offset);
        assert!(
            offset >= pos && offset <= input.len(),
            "the error at {offset}"
        );
    }
    at
}
