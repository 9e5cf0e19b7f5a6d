//! An HTTP/1.x request head, parsed with `httparse`: method, path, version,
//! and the headers a router needs (Host, Upgrade, Connection).

use core::mem::MaybeUninit;

use bytes::Bytes;

use crate::error::{Error, InvalidInput, Limit};

use crate::http1::chars::{NEVER_IN_HEAD, TOKEN};
use crate::sniff::Sniff;

mod head;

use head::head_of;
pub use head::RequestHead;

/// Default byte budget of [`sniff`]: 8 KiB, the request-head limit of
/// nginx's default `large_client_header_buffers` and of Apache's
/// `LimitRequestLine`.
pub const DEFAULT_MAX_HEAD: usize = 8 * 1024;

/// Default header count of [`sniff`]: 64, hyper's and h11's order of
/// magnitude; a client needs a dozen.
pub const DEFAULT_MAX_HEADERS: usize = 64;

/// The most headers [`sniff`] can be asked to read: its header table lives
/// on the stack.
pub const MAX_HEADERS: usize = 128;

/// Sniffs an HTTP/1.x request head at the start of `data`, reading at most
/// `max_len` bytes and `max_headers` headers (at most [`MAX_HEADERS`]).
///
/// `NoMatch` when the bytes are not a well-formed HTTP/1.x request (another
/// protocol that happens to start with letters, such as `SSH-2.0-...` or
/// `PROXY ...`, or a malformed request); `Invalid` with
/// [`Limit::SniffBudget`] when the head is longer than `max_len` or has
/// more headers than `max_headers`, with
/// [`HttpField::Host`](crate::HttpField::Host) when the Host is sent
/// twice, is not a `host[:port]`, or differs from the authority of an
/// absolute-form or CONNECT target (routing on it could send the request
/// to one backend while the target names another), and with
/// [`HttpField::RequestLine`](crate::HttpField::RequestLine) when the
/// target has no request-target form or names a malformed authority, as
/// a server refuses it.
///
/// Empty lines before the request line are skipped (and counted in
/// `max_len`), as a server skips them (RFC 9112, section 2.2), and the
/// method may be any token (RFC 9110, section 9.1): a request a server
/// would read is never "not HTTP" here, where it would pass every Host
/// rule.
///
/// A line is judged once it is whole (its `\n` has arrived), the request
/// line and each header line on its own with httparse, and the whole head
/// again with httparse once its empty line arrives: so a stream that is not
/// HTTP is refused at the end of its first line, or at once on a byte no
/// head may hold (a control character, a `\r` not before `\n`) or a first
/// byte no method starts with. A
/// [`Sniffer`] gives the same answers for a connection whose bytes arrive
/// in pieces, looking at each byte a bounded number of times.
///
/// ```
/// use cleave_proto::sniff::{http, Sniff};
///
/// let head = b"GET /chat HTTP/1.1\r\nHost: example.com:8080\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nrest";
/// match http::sniff(head, http::DEFAULT_MAX_HEAD, http::DEFAULT_MAX_HEADERS) {
///     Sniff::Match { facts, len } => {
///         assert_eq!(facts.host(), Some("example.com:8080"));
///         assert_eq!(facts.host_name().as_deref(), Some("example.com"));
///         assert!(facts.is_upgrade());
///         assert_eq!(&head[len..], b"rest");
///     }
///     other => panic!("{other:?}"),
/// }
/// ```
#[must_use]
pub fn sniff(data: &[u8], max_len: usize, max_headers: usize) -> Sniff<RequestHead> {
    let mut sniffer = Sniffer::new();
    sniffer.sniff(data, max_len, max_headers);
    sniffer.answer
}

/// New bytes from which a [`Sniffer`] looks for the end of the head before
/// it judges lines: a whole head, or a large piece of one.
const SEARCH_AT_LEAST: usize = 32;

/// The HTTP sniffer for one connection, resumable: each call looks only at
/// the bytes that arrived since the last one, so a head trickled a byte at
/// a time costs linear work, not quadratic.
///
/// Give it the connection's first bytes so far on every call (each call's
/// `data` extends the last one's) with the same limits; its answers are
/// those of [`sniff`] on the same bytes. `data` shorter than last time
/// starts it over, and so does a smaller `max_len` than the bytes it
/// has looked at.
///
/// ```
/// use cleave_proto::sniff::{http, Sniff};
///
/// let head = b"GET / HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n";
/// let mut sniffer = http::Sniffer::new();
/// for end in 1..head.len() {
///     let answer = sniffer.sniff(&head[..end], http::DEFAULT_MAX_HEAD, http::DEFAULT_MAX_HEADERS);
///     assert_eq!(answer, &Sniff::NeedMore);
/// }
/// let answer = sniffer.sniff(head, http::DEFAULT_MAX_HEAD, http::DEFAULT_MAX_HEADERS);
/// assert_eq!(answer.facts().and_then(|f| f.host()), Some("example.com"));
/// assert!(sniffer.examined() < 5 * head.len() as u64);
/// ```
#[derive(Clone, Debug)]
pub struct Sniffer {
    /// Bytes of the window searched for the head's end (a `\n` followed by
    /// `\n` or `\r\n`).
    searched: usize,
    /// Bytes of the window scanned for line ends and bytes no head holds.
    scanned: usize,
    /// Bytes of empty lines before the request line.
    lead: usize,
    /// Where the line being scanned starts.
    line: usize,
    /// Lines judged so far: the request line, then header lines.
    lines: usize,
    /// The longest `data` seen.
    seen: usize,
    examined: u64,
    answer: Sniff<RequestHead>,
}

impl Default for Sniffer {
    fn default() -> Self {
        Self::new()
    }
}

impl Sniffer {
    /// A sniffer that has seen nothing.
    #[must_use]
    pub fn new() -> Self {
        Self {
            searched: 0,
            scanned: 0,
            lead: 0,
            line: 0,
            lines: 0,
            seen: 0,
            examined: 0,
            answer: Sniff::NeedMore,
        }
    }

    /// The answer for `data`, the connection's first bytes so far: as
    /// [`sniff`]`(data, max_len, max_headers)`, once final kept.
    #[inline]
    pub fn sniff(
        &mut self,
        data: &[u8],
        max_len: usize,
        max_headers: usize,
    ) -> &Sniff<RequestHead> {
        // Shorter data, or a smaller budget than the bytes already looked
        // at (a caller that changed `max_len`): start over.
        let window = data.len().min(max_len);
        if data.len() < self.seen || self.scanned.max(self.searched) > window {
            *self = Self::new();
        }
        self.seen = data.len();
        if self.answer.is_need_more() {
            self.answer = self.step(data, max_len, max_headers);
        }
        &self.answer
    }

    /// The last answer given (need more before the first call).
    pub fn answer(&self) -> &Sniff<RequestHead> {
        &self.answer
    }

    /// Bytes looked at so far (scanned, each line parsed once, the whole
    /// head parsed and copied once): a measure of the work done, linear in
    /// the input whatever its pieces.
    pub fn examined(&self) -> u64 {
        self.examined
    }

    #[inline(never)]
    fn step(&mut self, data: &[u8], max_len: usize, max_headers: usize) -> Sniff<RequestHead> {
        let max_headers = max_headers.min(MAX_HEADERS);
        let window = &data[..data.len().min(max_len)];
        if self.scanned == self.lead {
            // Nothing of the request line scanned yet. Empty lines before
            // it are skipped, as a server skips them (RFC 9112, section
            // 2.2) and httparse does: a request after them is routed as
            // any other. Its first byte must start a method (a token).
            self.skip_empty_lines(window);
            (self.scanned, self.line) = (self.lead, self.lead);
            self.searched = self.searched.max(self.lead);
            match &window[self.lead..] {
                [] | [b'\r'] if window.len() < max_len || data.is_empty() => {
                    return Sniff::NeedMore
                }
                [] | [b'\r'] => return over_budget(max_len, max_len as u64 + 1),
                [b, ..] if !TOKEN[usize::from(*b)] => return Sniff::NoMatch,
                _ => {}
            }
        }
        // Many new bytes: the rest of the head may be among them, and then
        // httparse's one pass over it gives the answer its lines would give
        // one by one. (A few new bytes are judged as lines: searching them
        // too would look at each byte of a trickled head once more.)
        if window.len() - self.scanned >= SEARCH_AT_LEAST {
            if let Some(end) = self.head_end(window) {
                return self.parse_head(&window[..end], max_headers);
            }
        }
        // Not yet: judge each line as it completes, so that a stream that
        // is not HTTP is refused early.
        while self.scanned < window.len() {
            let at = self.scanned;
            let b = window[at];
            self.examined += 1;
            if NEVER_IN_HEAD[usize::from(b)] {
                return Sniff::NoMatch;
            }
            if b == b'\r' {
                match window.get(at + 1) {
                    None => break, // judged when the next byte comes
                    Some(b'\n') => {}
                    Some(_) => return Sniff::NoMatch,
                }
            }
            self.scanned = at + 1;
            if b == b'\n' {
                let line = &window[self.line..at + 1];
                self.line = at + 1;
                if let Some(answer) = self.judge_line(window, line, max_headers) {
                    return answer;
                }
            }
        }
        if window.len() < max_len {
            Sniff::NeedMore
        } else {
            over_budget(max_len, max_len as u64 + 1)
        }
    }

    /// Takes the empty lines (CRLF, or a bare LF as httparse takes it) at
    /// `lead` in `window` into `lead`.
    fn skip_empty_lines(&mut self, window: &[u8]) {
        let from = self.lead;
        loop {
            match &window[self.lead..] {
                [b'\r', b'\n', ..] => self.lead += 2,
                [b'\n', ..] => self.lead += 1,
                _ => break,
            }
        }
        self.examined += (self.lead - from) as u64;
    }

    /// Where the head ends in `window`, searching only what was not searched
    /// before: a `\n` followed by `\n` or `\r\n`.
    fn head_end(&mut self, window: &[u8]) -> Option<usize> {
        // Lines judged complete are not empty: the end is not in them but
        // for the `\n` of the last one.
        let from = self.searched.max(self.line.saturating_sub(1));
        let mut end = None;
        let mut stop = window.len();
        for at in memchr::memchr_iter(b'\n', &window[from..]).map(|i| from + i) {
            match &window[at + 1..] {
                [b'\n', ..] => end = Some(at + 2),
                [b'\r', b'\n', ..] => end = Some(at + 3),
                // Undecided until the next bytes come: look here again.
                [] | [b'\r'] => stop = at,
                _ => continue,
            }
            break;
        }
        let looked = end.unwrap_or(stop);
        self.examined += looked.saturating_sub(from) as u64;
        self.searched = looked.max(from);
        end
    }

    /// Judges one whole line (`\n` included): `Some` with the final answer
    /// when it decides, `None` to go on.
    fn judge_line(
        &mut self,
        window: &[u8],
        line: &[u8],
        max_headers: usize,
    ) -> Option<Sniff<RequestHead>> {
        self.examined += line.len() as u64;
        let first = self.lines == 0;
        self.lines += 1;
        if first {
            // The request line alone: httparse says "partial" when it is
            // well formed.
            let mut request = httparse::Request::new(&mut []);
            return match request.parse(line) {
                Ok(httparse::Status::Partial) => None,
                _ => Some(Sniff::NoMatch),
            };
        }
        if matches!(line, b"\n" | b"\r\n") {
            // The empty line: the head is whole; parse it all, once.
            return Some(self.parse_head(&window[..self.line], max_headers));
        }
        let mut header = [httparse::EMPTY_HEADER; 1];
        match httparse::parse_headers(line, &mut header) {
            // A header past the limit counts once it is whole and well
            // formed: httparse's order (it parses a header, then looks for
            // a slot to put it in).
            Ok(httparse::Status::Partial) if self.lines - 1 > max_headers => {
                Some(over_budget(max_headers, max_headers as u64 + 1))
            }
            Ok(httparse::Status::Partial) => None,
            _ => Some(Sniff::NoMatch),
        }
    }

    /// The whole head, as httparse reads it.
    fn parse_head(&mut self, head: &[u8], max_headers: usize) -> Sniff<RequestHead> {
        // Parsed, then copied into the facts.
        self.examined += 2 * head.len() as u64;
        // Uninitialised header slots: nothing to clear before the parse.
        let mut headers = [MaybeUninit::uninit(); MAX_HEADERS];
        let mut request = httparse::Request::new(&mut []);
        match request.parse_with_uninit_headers(head, &mut headers[..max_headers]) {
            Ok(httparse::Status::Complete(len)) => match head_of(&request, &head[..len]) {
                Ok(facts) => Sniff::Match { facts, len },
                Err((field, at)) => Sniff::Invalid(Error::InvalidInput {
                    kind: InvalidInput::Http(field),
                    offset: at as u64,
                }),
            },
            Err(httparse::Error::TooManyHeaders) => {
                over_budget(max_headers, max_headers as u64 + 1)
            }
            // Bytes httparse refuses are not (well-formed) HTTP: another
            // protocol that starts with a token (`SSH-2.0-...`, `PROXY
            // ...`) or a broken request; either way this sniffer does not
            // match.
            _ => Sniff::NoMatch,
        }
    }
}

/// Checks head limits as [`RouterConfig::http_limits`](crate::route::RouterConfig::http_limits)
/// and [`Heads::new`](crate::codec::heads::Heads::new) take them.
pub(crate) fn check_limits(max_head: usize, max_headers: usize) -> Result<(), Error> {
    if max_head == 0 {
        return Err(Error::invalid_config("max_head", 0, "at least 1"));
    }
    if max_headers == 0 || max_headers > MAX_HEADERS {
        return Err(Error::invalid_config(
            "max_headers",
            max_headers as u64,
            "1 to MAX_HEADERS (128)",
        ));
    }
    Ok(())
}

fn over_budget<T>(max: usize, attempted: u64) -> Sniff<T> {
    Sniff::Invalid(Error::LimitExceeded {
        limit: Limit::SniffBudget,
        max: max as u64,
        attempted,
        offset: 0,
    })
}

/// Whether a head cut by [`Heads`](crate::codec::heads::Heads) asks to switch protocols.
pub fn is_upgrade_head(head: &Bytes) -> bool {
    matches!(sniff(head, head.len().max(1), MAX_HEADERS), Sniff::Match { facts, .. } if facts.is_upgrade())
}
