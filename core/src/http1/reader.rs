//! [`HeadSearch`]: the search for the end of one head, shared by the
//! server, the client and the [`Heads`](crate::Heads) decoder, and
//! [`HeadReader`], a request head's length (and the body it announces)
//! once it passes the server's checks.

use crate::error::{Error, Limit};
use crate::http1::config::Http1Config;
use crate::http1::faults::{early_check, first_fault, judged_before, Role};
use crate::http1::lines::{Bad, BlockScan};
use crate::http1::parse::{parse_request, parse_request_inline, RequestParts};
use crate::http1::Body;
use crate::recv_buf::RecvBuf;

/// Where the search for one head is, resumed on every call so that a
/// head trickled in pieces is looked at once, and judged as it comes so
/// that garbage fails at once, with the fault a reader fed byte by byte
/// would meet first, however the bytes came.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct HeadSearch {
    scan: BlockScan,
    /// Bytes judged early already.
    checked: usize,
    /// The stream offset of the head's first byte.
    start: u64,
    /// The stream ([`RecvBuf::stream`]) the search is in: given another
    /// stream's buffer, even at the same offset, it starts over.
    stream: u32,
}

impl HeadSearch {
    /// The length of the head at the front of `buf` (at stream offset
    /// `offset` of stream `stream`) once it is whole, `None` while it is
    /// not.
    pub(crate) fn poll(
        &mut self,
        buf: &[u8],
        (stream, offset): (u32, u64),
        role: Role,
        config: &Http1Config,
    ) -> Result<Option<usize>, Error> {
        if self.start != offset || self.stream != stream {
            // A new head, bytes taken by someone else, or another
            // stream's buffer: start over.
            *self = Self {
                start: offset,
                stream,
                ..Self::default()
            };
        }
        let (max_line, max) = (config.get_max_line(), config.get_max_head());
        let found = self
            .scan
            .scan(
                buf,
                config.get_allow_bare_lf(),
                max_line,
                max,
                Limit::HeadLength,
            )
            .map_err(|bad| {
                let judged = judged_before(bad, max_line, max);
                self.fault(buf, judged, role, start_line_limit(bad, role))
            })?;
        if found.is_none() {
            early_check(buf, self.checked, role).map_err(|bad| bad.into_error(self.start))?;
            self.checked = buf.len();
        }
        Ok(found)
    }

    /// A whole request head in one parse, at the first look at it: the
    /// common case, a head that came in one read. httparse finds where it
    /// ends and takes no bare CR; where it took a bare LF as a line end,
    /// its parts show (`RequestParts::crlf`); and a head no longer than a
    /// line cannot hold a line too long. The verdict is the
    /// line-by-line search's; anything else (a partial head, a refusal, a
    /// long head) takes that search, which judges as the bytes came.
    #[inline(always)]
    pub(crate) fn request_at_once(
        &self,
        buf: &[u8],
        (stream, offset): (u32, u64),
        config: &Http1Config,
    ) -> Option<(usize, RequestParts)> {
        let resumed = self.start == offset && self.stream == stream;
        if resumed && !(self.checked == 0 && self.scan.is_fresh()) {
            return None;
        }
        if matches!(buf.first(), None | Some(b'\r' | b'\n')) {
            // httparse skips empty lines, bare LF ones too: the search
            // judges them.
            return None;
        }
        let (len, parts) = parse_request_inline(buf, config).ok()?;
        let fits = len <= config.get_max_head() && len <= config.get_max_line();
        (fits && parts.crlf).then_some((len, parts))
    }

    /// `bad`, found with `judged` bytes of `buf` in view, as the error a
    /// reader fed byte by byte meets first (a control byte before it, say).
    #[cold]
    pub(crate) fn fault(&self, buf: &[u8], judged: usize, role: Role, bad: Bad) -> Error {
        first_fault(buf, judged, self.checked, role, bad).into_error(self.start)
    }
}

/// A request line too long is its own limit: its target is too long, and
/// a server answers 414, not the 431 of a header line (RFC 9112, section
/// 3). The search starts at the request line (empty lines before it are
/// skipped first): the line at 0.
fn start_line_limit(bad: Bad, role: Role) -> Bad {
    match bad {
        Bad::Limit(Limit::LineLength, max, attempted, 0) if role == Role::Request => {
            Bad::Limit(Limit::RequestLine, max, attempted, 0)
        }
        bad => bad,
    }
}

/// A request head's length once it is whole and passes the server's
/// checks, for decoders that take heads as frames.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct HeadReader {
    search: HeadSearch,
}

impl HeadReader {
    /// `(skip, len)`: the empty lines before the head (ignored, RFC 9112
    /// section 2.2), and the head's length, once it is whole and valid;
    /// `None` while it is not whole.
    pub(crate) fn poll(
        &mut self,
        recv: &RecvBuf,
        config: &Http1Config,
    ) -> Result<Option<(usize, usize, Body)>, Error> {
        let all = recv.peek();
        // The empty lines count toward the head's limit on their own, as
        // for a server (`skip_empty_lines`): refused at the line that
        // passes it, however the bytes arrive.
        let max = config.get_max_head();
        let mut skip = 0;
        loop {
            let n = match &all[skip..] {
                [b'\r', b'\n', ..] => 2,
                [b'\n', ..] if config.get_allow_bare_lf() => 1,
                _ => break,
            };
            if skip + n > max {
                return Err(Error::LimitExceeded {
                    limit: Limit::HeadLength,
                    max: max as u64,
                    attempted: (skip + n) as u64,
                    offset: recv.offset() + skip as u64,
                });
            }
            skip += n;
        }
        let buf = &all[skip..];
        // A CR alone may be the start of an empty line to skip: its LF
        // decides, whatever the head's limits (as when both came at once).
        if buf == b"\r" {
            return Ok(None);
        }
        let at = (recv.stream(), recv.offset() + skip as u64);
        let Some(len) = self.search.poll(buf, at, Role::Request, config)? else {
            return Ok(None);
        };
        let request = parse_request(&buf[..len], config)
            .map_err(|bad| self.search.fault(buf, len, Role::Request, bad))?;
        Ok(Some((skip, len, request.1.body)))
    }
}

/// The length of the empty lines at the start of `buf` (CRLF, or a bare
/// LF where `config` allows it).
pub(crate) fn empty_lines(buf: &[u8], config: &Http1Config) -> usize {
    let mut skip = 0;
    loop {
        match &buf[skip..] {
            [b'\r', b'\n', ..] => skip += 2,
            [b'\n', ..] if config.get_allow_bare_lf() => skip += 1,
            _ => return skip,
        }
    }
}

/// Takes the empty lines before a request line off `recv` (RFC 9112,
/// section 2.2: a server ignores at least one); returns how many bytes.
/// They count toward the head's limit, with `blank` the bytes of them
/// taken since the last head: a peer that sends only empty lines, a byte
/// at a time, is refused at `max_head` bytes of them rather than kept
/// for ever (each byte restarts the idle timeout, and no frame starts).
/// The refusal comes at the same byte however they arrive.
#[inline]
pub(crate) fn skip_empty_lines(
    recv: &mut RecvBuf,
    config: &Http1Config,
    blank: &mut usize,
) -> Result<usize, Error> {
    // Most heads have none: that is one look.
    if !matches!(recv.peek().first(), Some(b'\r' | b'\n')) {
        return Ok(0);
    }
    skip_some_empty_lines(recv, config, blank)
}

#[inline(never)]
fn skip_some_empty_lines(
    recv: &mut RecvBuf,
    config: &Http1Config,
    blank: &mut usize,
) -> Result<usize, Error> {
    let mut skipped = 0;
    loop {
        let n = match recv.peek() {
            [b'\r', b'\n', ..] => 2,
            [b'\n', ..] if config.get_allow_bare_lf() => 1,
            _ => return Ok(skipped),
        };
        let max = config.get_max_head();
        if blank.saturating_add(n) > max {
            return Err(Error::LimitExceeded {
                limit: Limit::HeadLength,
                max: max as u64,
                attempted: blank.saturating_add(n) as u64,
                offset: recv.offset(),
            });
        }
        recv.advance(n)?;
        *blank += n;
        skipped += n;
    }
}

/// Whether a role that has no answer (`Ok(None)`) waits for bytes that
/// cannot come: a head, a chunk-size line or a trailer section that
/// filled the buffer without ending is refused with [`Limit::Buffer`]
/// ([`RecvBuf::over_limit`]), as a decoder's would be, instead of waiting
/// for ever (a buffer smaller than the role's own limits). Body data
/// always drains the buffer, and a role that is done (closed, switched)
/// waits for nothing.
///
/// The roles look at their answer in place with this: an event is never
/// borrowed or moved through here (a head is a hundred bytes, and copying
/// it right after it was built costs more than the check).
pub(crate) fn stuck(recv: &RecvBuf, eof: bool, done: bool) -> bool {
    !eof && !done && recv.is_full()
}
