//! One whole head to a [`Request`] or a [`Response`]: httparse for the
//! tokens and values, cleave's own rules for the lines, the framing
//! headers read once, and the body's framing decided (RFC 9112, section
//! 6.3).

use core::mem::MaybeUninit;

use bytes::Bytes;

use crate::error::{HttpField, Limit};
use crate::http1::config::{Http1Config, MAX_HEADERS};
use crate::http1::head::{Body, Flags, Headers, Request, Response, Span, Version};
use crate::http1::host::{absolute_authority, is_host};
use crate::http1::lines::{check_field_lines, Bad};

/// Bytes that are never in a head: control bytes other than HTAB, CR and
/// LF, and DEL. (Bytes past ASCII may be in values and reasons.)
pub(crate) static NEVER_IN_HEAD: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = (b < 0x20 && !matches!(b, 0x09 | 0x0a | 0x0d)) || b == 0x7f;
        b += 1;
    }
    table
};

/// The bytes of a token (RFC 9110, section 5.6.2).
pub(crate) static TOKEN: [bool; 256] = {
    let mut table = [false; 256];
    let mut b: u8 = 0;
    while b < 128 {
        table[b as usize] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        b += 1;
    }
    table
};

/// Whether `bytes` is a token.
pub(crate) fn is_token(bytes: &[u8]) -> bool {
    !bytes.is_empty() && bytes.iter().all(|&b| TOKEN[usize::from(b)])
}

/// Which side a head comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// Requests (a server reads them).
    Request,
    /// Responses (a client reads them).
    Response,
}

impl Role {
    pub(crate) fn start_line(self) -> HttpField {
        match self {
            Self::Request => HttpField::RequestLine,
            Self::Response => HttpField::StatusLine,
        }
    }
}

/// Checks, before the whole head is in, what can already be judged: the
/// first bytes of the start line and control bytes, so that garbage (a
/// TLS hello, a NUL) fails at once rather than at the head limit.
pub(crate) fn early_check(buf: &[u8], from: usize, role: Role) -> Result<(), Bad> {
    if buf == b"\r" {
        // The start of a CRLF, or of a bare CR: the next byte decides.
        return Ok(());
    }
    match role {
        Role::Request => {
            if let Some(&b) = buf.first() {
                if !TOKEN[usize::from(b)] {
                    return Err(Bad::Field(HttpField::RequestLine, 0));
                }
            }
        }
        Role::Response => {
            // A CR at the end is undecided: the next byte says whether
            // it ends the line or is a bare CR (a line-ending fault,
            // whichever way the bytes come).
            let seen = buf.strip_suffix(b"\r").unwrap_or(buf);
            let n = seen.len().min(5);
            if seen[..n] != b"HTTP/"[..n] {
                return Err(Bad::Field(HttpField::StatusLine, 0));
            }
        }
    }
    let from = from.min(buf.len());
    if let Some(i) = buf[from..]
        .iter()
        .position(|&b| NEVER_IN_HEAD[usize::from(b)])
    {
        let at = from + i;
        let line_start = memchr::memrchr(b'\n', &buf[..at]).map_or(0, |i| i + 1);
        let field = if line_start == 0 {
            role.start_line()
        } else if memchr::memchr(b':', &buf[line_start..at]).is_none() {
            HttpField::HeaderName
        } else {
            HttpField::HeaderValue
        };
        return Err(Bad::Field(field, at));
    }
    Ok(())
}

/// The fault a reader fed byte by byte meets first, so that the verdict
/// does not depend on how the bytes came. `bad` was found with a head's
/// bytes up to `judged` in view (see [`judged_before`]); a control byte
/// before that point was refused by [`early_check`] as soon as it
/// arrived, before `bad` could be seen, so it wins. `checked` bytes were
/// judged already.
#[cold]
pub(crate) fn first_fault(buf: &[u8], judged: usize, checked: usize, role: Role, bad: Bad) -> Bad {
    early_check(&buf[..judged.min(buf.len())], checked, role)
        .err()
        .unwrap_or(bad)
}

/// How many bytes of a head a reader fed byte by byte had judged early
/// when the search for its end failed with `bad` ([`BlockScan::scan`]'s
/// errors, under `max_line` and `max`): those before a bad line end,
/// those before a line reached its limit, those before the head did.
///
/// [`BlockScan::scan`]: crate::http1::lines::BlockScan::scan
pub(crate) fn judged_before(bad: Bad, max_line: usize, max: usize) -> usize {
    match bad {
        Bad::Field(_, at) => at,
        Bad::Limit(Limit::LineLength, _, _, line) => {
            line.saturating_add(max_line).saturating_sub(1)
        }
        Bad::Limit(..) => max.saturating_sub(1),
    }
}

/// What the framing headers said, read in one pass.
#[derive(Default)]
struct Framing<'h> {
    content_length: Option<u64>,
    /// Transfer-Encoding was present (even if empty).
    te: bool,
    /// `chunked` was the last coding.
    chunked_last: bool,
    /// A coding other than `chunked`.
    other_coding: bool,
    host: Option<&'h [u8]>,
    hosts: u32,
    close: bool,
    keep_alive: bool,
    upgrade_token: bool,
    upgrade: bool,
    expect_continue: bool,
}

/// The comma-separated elements of a list value, without whitespace;
/// empty elements are skipped (RFC 9110, section 5.6.1).
fn elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(crate::http1::head::trim_ows)
        .filter(|e| !e.is_empty())
}

/// A Content-Length value: digits only, no overflow.
fn parse_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    let mut n: u64 = 0;
    for &b in value {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(n)
}

impl<'h> Framing<'h> {
    /// Reads the fields that frame and route a message.
    fn read(
        headers: &[httparse::Header<'h>],
        config: &Http1Config,
        head: &[u8],
    ) -> Result<Self, Bad> {
        let mut f = Framing::default();
        for h in headers {
            let name = h.name.as_bytes();
            // Most fields frame nothing: the value is looked at only for
            // those that do.
            let value = || crate::http1::head::trim_ows(h.value);
            let at = || Span::of(h.value, head).at as usize;
            match name.len() {
                4 if name.eq_ignore_ascii_case(b"host") => {
                    f.hosts += 1;
                    f.host = Some(value());
                }
                6 if name.eq_ignore_ascii_case(b"expect") => {
                    f.expect_continue |= value().eq_ignore_ascii_case(b"100-continue");
                }
                7 if name.eq_ignore_ascii_case(b"upgrade") => f.upgrade = true,
                10 if name.eq_ignore_ascii_case(b"connection") => {
                    for token in elements(value()) {
                        if token.eq_ignore_ascii_case(b"close") {
                            f.close = true;
                        } else if token.eq_ignore_ascii_case(b"keep-alive") {
                            f.keep_alive = true;
                        } else if token.eq_ignore_ascii_case(b"upgrade") {
                            f.upgrade_token = true;
                        }
                    }
                }
                14 if name.eq_ignore_ascii_case(b"content-length") => {
                    let mut any = false;
                    for element in value().split(|&b| b == b',') {
                        let element = crate::http1::head::trim_ows(element);
                        let n = parse_length(element)
                            .ok_or_else(|| Bad::Field(HttpField::ContentLength, at()))?;
                        any = true;
                        match f.content_length {
                            None => f.content_length = Some(n),
                            Some(m) if m == n && config.get_allow_equal_content_lengths() => {}
                            Some(_) => return Err(Bad::Field(HttpField::ContentLength, at())),
                        }
                    }
                    if !any {
                        return Err(Bad::Field(HttpField::ContentLength, at()));
                    }
                }
                17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                    f.te = true;
                    for coding in elements(value()) {
                        if f.chunked_last {
                            // Anything after chunked (chunked again too).
                            return Err(Bad::Field(HttpField::TransferEncoding, at()));
                        }
                        if coding.eq_ignore_ascii_case(b"chunked") {
                            f.chunked_last = true;
                        } else {
                            f.other_coding = true;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(f)
    }

    fn keep_alive(&self, version: Version) -> bool {
        match version {
            Version::Http11 => !self.close,
            Version::Http10 => self.keep_alive && !self.close,
        }
    }
}

fn version_of(v: Option<u8>) -> Version {
    if v == Some(0) {
        Version::Http10
    } else {
        Version::Http11
    }
}

/// httparse's refusal as cleave's field (or limit). httparse names the
/// token it expected (a version after a target with a space in it, say):
/// a refusal in the start line is judged from the line itself.
#[cold]
fn refused(e: httparse::Error, head: &[u8], role: Role, max_headers: usize) -> Bad {
    let field = match e {
        httparse::Error::HeaderName => HttpField::HeaderName,
        httparse::Error::HeaderValue => HttpField::HeaderValue,
        httparse::Error::TooManyHeaders => {
            return Bad::Limit(
                Limit::HeaderCount,
                max_headers as u64,
                max_headers as u64 + 1,
                0,
            )
        }
        _ => {
            let line_end = memchr::memchr(b'\n', head).map_or(head.len(), |i| i + 1);
            let line = &head[..line_end];
            let start_ok = match role {
                Role::Request => httparse::Request::new(&mut []).parse(line).is_ok(),
                Role::Response => httparse::Response::new(&mut []).parse(line).is_ok(),
            };
            if start_ok {
                HttpField::LineEnding
            } else {
                start_line_field(&head[..start_line_end(head)], role)
            }
        }
    };
    Bad::Field(field, 0)
}

/// Which field a refused start line breaks: its version when the rest of
/// the line is well formed (`method target VERSION`, `HTTP/digits.digits
/// status`) or the version is missing, otherwise the line itself.
fn start_line_field(line: &[u8], role: Role) -> HttpField {
    match role {
        Role::Request => {
            let mut parts = line.split(|&b| b == b' ');
            let (method, target, version, extra) =
                (parts.next(), parts.next(), parts.next(), parts.next());
            let well_formed = |method: &[u8], target: &[u8]| {
                is_token(method)
                    && !target.is_empty()
                    && target.iter().all(|b| (0x21..0x7f).contains(b))
            };
            match (method, target, version, extra) {
                (Some(m), Some(t), None | Some(_), None) if well_formed(m, t) => HttpField::Version,
                _ => HttpField::RequestLine,
            }
        }
        Role::Response => {
            let version = line.split(|&b| b == b' ').next().unwrap_or_default();
            match version.strip_prefix(b"HTTP/") {
                Some(number)
                    if !number.is_empty()
                        && number != b"1.1"
                        && number != b"1.0"
                        && number.iter().all(|b| b.is_ascii_digit() || *b == b'.') =>
                {
                    HttpField::Version
                }
                _ => HttpField::StatusLine,
            }
        }
    }
}

/// The start line's end: the index of its CR (or bare LF).
fn start_line_end(head: &[u8]) -> usize {
    let lf = memchr::memchr(b'\n', head).unwrap_or(head.len());
    if lf > 0 && head[lf - 1] == b'\r' {
        lf - 1
    } else {
        lf
    }
}

/// The header lines of a head: after the start line, before the empty
/// line.
fn field_block(head: &[u8]) -> (usize, usize) {
    let first = memchr::memchr(b'\n', head).map_or(head.len(), |i| i + 1);
    let end = if head.ends_with(b"\r\n") {
        head.len() - 2
    } else {
        head.len().saturating_sub(1)
    };
    (first, end.max(first))
}

/// Whether every line of a head httparse took ends in CRLF: httparse
/// takes a bare LF as a line end (and nothing else: a bare CR anywhere is
/// its error), so each line's end is looked at, where httparse's parts
/// say it is: after the version, after each value and the whitespace
/// after it, and the empty line.
fn lines_end_in_crlf(head: &[u8], target: &[u8], headers: &[httparse::Header<'_>]) -> bool {
    let crlf_at = |at: usize| head.get(at..at + 2) == Some(b"\r\n");
    // `HTTP/1.x` after the target and a space.
    let version_end = Span::of(target, head).at as usize + target.len() + 9;
    if !crlf_at(version_end) {
        return false;
    }
    for h in headers {
        let mut end = Span::of(h.value, head).at as usize + h.value.len();
        while matches!(head.get(end), Some(b' ' | b'\t')) {
            end += 1;
        }
        if !crlf_at(end) {
            return false;
        }
    }
    head.ends_with(b"\r\n")
}

/// A whole request head (`head` ends with its empty line). Nothing is
/// taken from the buffer: the caller splits the head off once it parsed.
///
/// `buf` may run past the head (the fast path's first look): the head is
/// what httparse found complete, and its length comes back.
pub(crate) fn parse_request(
    buf: &[u8],
    config: &Http1Config,
) -> Result<(usize, RequestParts), Bad> {
    let max_headers = config.get_max_headers().min(MAX_HEADERS);
    let mut slots = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let parsed = req.parse_with_uninit_headers(buf, &mut slots[..max_headers]);
    let len = match parsed {
        Ok(httparse::Status::Complete(len)) => len,
        _ => buf.len(),
    };
    let head = &buf[..len];
    let (block_at, block_end) = field_block(head);
    if !matches!(parsed, Ok(httparse::Status::Complete(_))) {
        // httparse refuses every line shape cleave refuses (folding,
        // whitespace before a colon, no colon) but names them all
        // `HeaderName`: judge the lines only when it refused.
        check_field_lines(&head[block_at..block_end], block_at, true)?;
    }
    match parsed {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(Bad::Field(HttpField::RequestLine, 0)),
        Err(e) => return Err(refused(e, head, Role::Request, max_headers)),
    }
    let method = req.method.unwrap_or_default().as_bytes();
    let target = req.path.unwrap_or_default().as_bytes();
    // httparse takes bytes past ASCII in a target (and nothing below
    // 0x21, nor DEL); a target is ASCII.
    if let Some(i) = (!target.is_ascii())
        .then(|| target.iter().position(|&b| !(0x21..0x7f).contains(&b)))
        .flatten()
    {
        return Err(Bad::Field(
            HttpField::RequestLine,
            Span::of(target, head).at as usize + i,
        ));
    }
    let version = version_of(req.version);
    let crlf = lines_end_in_crlf(head, target, req.headers);
    let f = Framing::read(req.headers, config, head)?;

    // Host: one, well formed, and the target's authority if it names one.
    let authority = if method == b"CONNECT" {
        Some(target)
    } else {
        absolute_authority(target)
    };
    let host_at = |part: &[u8]| Bad::Field(HttpField::Host, Span::of(part, head).at as usize);
    if f.hosts > 1 {
        return Err(Bad::Field(HttpField::Host, 0));
    }
    let host = match (f.host, authority) {
        (Some(host), _) if !is_host(host) => return Err(host_at(host)),
        (_, Some(authority)) if !is_host(authority) || authority.is_empty() => {
            return Err(Bad::Field(
                HttpField::RequestLine,
                Span::of(target, head).at as usize,
            ))
        }
        (Some(host), Some(authority)) if !host.eq_ignore_ascii_case(authority) => {
            return Err(host_at(host))
        }
        (Some(host), _) => Some(host),
        (None, Some(authority)) if version == Version::Http10 => Some(authority),
        (None, _) if version == Version::Http11 => return Err(Bad::Field(HttpField::Host, 0)),
        (None, authority) => authority,
    };

    // The body (RFC 9112, section 6.3).
    let body = request_body(&f, version)?;
    if let (Body::Length(n), Some(max)) = (body, config.get_max_body()) {
        if n > max {
            return Err(Bad::Limit(Limit::BodyLength, max, n, 0));
        }
    }
    let mut flags = Flags::default();
    flags.set(Flags::KEEP_ALIVE, f.keep_alive(version));
    flags.set(
        Flags::CONTINUE,
        f.expect_continue && version == Version::Http11,
    );
    // A server must ignore Upgrade in an HTTP/1.0 request (RFC 9110,
    // section 7.8).
    flags.set(
        Flags::UPGRADE,
        f.upgrade && f.upgrade_token && version == Version::Http11,
    );
    flags.set(Flags::CONNECT, method == b"CONNECT");
    Ok((
        len,
        RequestParts {
            method: Span::of(method, head),
            target: Span::of(target, head),
            version,
            block: (block_at, block_end),
            count: req.headers.len(),
            host: host.map(|h| Span::of(h, head)),
            body,
            flags,
            crlf,
        },
    ))
}

fn request_body(f: &Framing<'_>, version: Version) -> Result<Body, Bad> {
    if f.te {
        if f.content_length.is_some() {
            return Err(Bad::Field(HttpField::BothFraming, 0));
        }
        if version == Version::Http10 {
            return Err(Bad::Field(HttpField::TransferEncoding, 0));
        }
        if f.other_coding {
            return Err(Bad::Field(HttpField::TransferCoding, 0));
        }
        if !f.chunked_last {
            return Err(Bad::Field(HttpField::TransferEncoding, 0));
        }
        return Ok(Body::Chunked);
    }
    Ok(match f.content_length {
        Some(0) | None => Body::Empty,
        Some(n) => Body::Length(n),
    })
}

/// A parsed request head, as spans of the head it was parsed from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RequestParts {
    method: Span,
    target: Span,
    version: Version,
    block: (usize, usize),
    count: usize,
    host: Option<Span>,
    pub(crate) body: Body,
    flags: Flags,
    /// Every line ended in CRLF (httparse also takes a bare LF).
    pub(crate) crlf: bool,
}

impl RequestParts {
    /// The request, over the head's bytes (split off the buffer).
    pub(crate) fn into_request(self, head: Bytes) -> Request {
        let headers = Headers::new(head.slice(self.block.0..self.block.1), self.count);
        Request {
            head,
            method: self.method,
            target: self.target,
            version: self.version,
            headers,
            host: self.host,
            body: self.body,
            flags: self.flags,
        }
    }
}

/// What a client knows of the request a response answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Asked {
    /// HEAD: no body, whatever the headers say.
    Head,
    /// CONNECT: a 2xx makes a tunnel.
    Connect,
    /// Any other method.
    Other,
}

/// A whole response head, answering a request of kind `asked`.
pub(crate) fn parse_response(
    head: &[u8],
    asked: Asked,
    config: &Http1Config,
) -> Result<ResponseParts, Bad> {
    let (block_at, block_end) = field_block(head);
    let line = &head[..start_line_end(head)];
    let max_headers = config.get_max_headers().min(MAX_HEADERS);
    let mut slots = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut res = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut res,
        head,
        &mut slots[..max_headers],
    );
    if !matches!(parsed, Ok(httparse::Status::Complete(_))) {
        // As for requests: the line shapes only when httparse refused.
        check_field_lines(&head[block_at..block_end], block_at, true)?;
    }
    match parsed {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(Bad::Field(HttpField::StatusLine, 0)),
        Err(e) => return Err(refused(e, head, Role::Response, max_headers)),
    }
    let status = res.code.unwrap_or_default();
    // `HTTP/1.1 200` with no space after the code: RFC 9112 requires one.
    if status < 100 || line.get(12) != Some(&b' ') {
        return Err(Bad::Field(HttpField::StatusLine, 9));
    }
    // The reason as sent, after `HTTP/1.1 200 ` (httparse checked its
    // bytes, but gives "" for one with obs-text).
    let reason = Span::of(&line[13..], head);
    let version = version_of(res.version);
    let f = Framing::read(res.headers, config, head)?;
    let switches = status == 101 || (asked == Asked::Connect && (200..300).contains(&status));
    let bodiless = asked == Asked::Head
        || (100..200).contains(&status)
        || status == 204
        || status == 304
        || switches;
    let body = if bodiless {
        Body::Empty
    } else if f.te {
        if f.content_length.is_some() {
            return Err(Bad::Field(HttpField::BothFraming, 0));
        }
        // Strict as for requests: RFC 9112 would read a body whose last
        // coding is not chunked to the close, but cleave frames with
        // chunked alone and decodes no other coding.
        request_body(&f, version)?
    } else {
        match f.content_length {
            Some(0) => Body::Empty,
            Some(n) => Body::Length(n),
            None => Body::UntilClose,
        }
    };
    if let (Body::Length(n), Some(max)) = (body, config.get_max_body()) {
        if n > max {
            return Err(Bad::Limit(Limit::BodyLength, max, n, 0));
        }
    }
    let mut flags = Flags::default();
    flags.set(
        Flags::KEEP_ALIVE,
        f.keep_alive(version) && body != Body::UntilClose && !switches,
    );
    flags.set(Flags::UPGRADE, switches);
    Ok(ResponseParts {
        version,
        status,
        reason,
        block: (block_at, block_end),
        count: res.headers.len(),
        body,
        flags,
    })
}

/// A parsed response head, as spans of the head it was parsed from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ResponseParts {
    version: Version,
    pub(crate) status: u16,
    reason: Span,
    block: (usize, usize),
    count: usize,
    pub(crate) body: Body,
    flags: Flags,
}

impl ResponseParts {
    /// The response, over the head's bytes (split off the buffer).
    pub(crate) fn into_response(self, head: Bytes) -> Response {
        let headers = Headers::new(head.slice(self.block.0..self.block.1), self.count);
        Response {
            head,
            version: self.version,
            status: self.status,
            reason: self.reason,
            headers,
            body: self.body,
            flags: self.flags,
        }
    }
}
