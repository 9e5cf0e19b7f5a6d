//! One whole head to a [`Request`] or a [`Response`]: httparse for the
//! tokens and values, cleave's own rules for the lines, the framing
//! headers read once, and the body's framing decided (RFC 9112, section
//! 6.3).

use core::mem::MaybeUninit;

use bytes::Bytes;

use crate::error::{HttpField, Limit};
use crate::http1::chars::start_line_end;
use crate::http1::config::{Http1Config, MAX_HEADERS};
use crate::http1::faults::{refused, Role};
use crate::http1::framing::{request_body, response_body, Framing};
use crate::http1::head::{Body, Flags, Headers, Request, Response, Span, Version};
use crate::http1::host::{absolute_authority, is_host, is_target_authority, is_target_form};
use crate::http1::lines::{check_field_lines, Bad};

fn version_of(v: Option<u8>) -> Version {
    if v == Some(0) {
        Version::Http10
    } else {
        Version::Http11
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

/// Where a request line httparse took ends: `HTTP/1.x` after the target
/// and a space.
fn version_end(head: &[u8], target: &[u8]) -> usize {
    Span::of(target, head).at as usize + target.len() + 9
}

/// Whether every line of a head httparse took ends in CRLF. httparse
/// takes a bare LF as a line end (and nothing else: a bare CR anywhere is
/// its error), and with its defaults each field name starts right where
/// its line starts (it refuses whitespace there, and obs-fold in a
/// request, and skips no invalid line). So the line
/// before a field ends in CRLF when the two bytes before its name are
/// CRLF, and the last field line (or, with no field, the start line) and
/// the empty line when the head ends with two CRLFs. One look a field,
/// without finding where its value ends.
fn lines_end_in_crlf(head: &[u8], headers: &[httparse::Header<'_>]) -> bool {
    let base = head.as_ptr() as usize;
    let mut crlf = head.ends_with(b"\r\n\r\n");
    for h in headers {
        let at = (h.name.as_ptr() as usize).wrapping_sub(base);
        crlf &= at >= 2 && head.get(at - 2..at) == Some(b"\r\n".as_slice());
    }
    crlf
}

/// A whole request head (`head` ends with its empty line). Nothing is
/// taken from the buffer: the caller splits the head off once it parsed.
///
/// `buf` may run past the head (the fast path's first look): the head is
/// what httparse found complete, and its length comes back.
#[inline(never)]
pub(crate) fn parse_request(
    buf: &[u8],
    config: &Http1Config,
) -> Result<(usize, RequestParts), Bad> {
    parse_request_inline(buf, config)
}

/// [`parse_request`], inlined: for the server's first look at a head, so
/// that the parts are built where the request is (a head's parts moved
/// between functions right after they were written cost more than the
/// checks that made them).
#[inline(always)]
pub(crate) fn parse_request_inline(
    buf: &[u8],
    config: &Http1Config,
) -> Result<(usize, RequestParts), Bad> {
    let max_headers = config.get_max_headers().min(MAX_HEADERS);
    let mut slots = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    // httparse's defaults, which `lines_end_in_crlf` and `Framing::read`
    // rely on: no obs-fold, no invalid field line skipped
    // (`ignore_invalid_headers_in_requests`), each name where its line
    // starts, each value without the whitespace around it.
    let mut req = httparse::Request::new(&mut []);
    let parsed = req.parse_with_uninit_headers(buf, &mut slots[..max_headers]);
    let len = match parsed {
        Ok(httparse::Status::Complete(len)) => len,
        _ => buf.len(),
    };
    let head = &buf[..len];
    if !matches!(parsed, Ok(httparse::Status::Complete(_))) {
        // httparse refuses every line shape cleave refuses (folding,
        // whitespace before a colon, no colon) but names them all
        // `HeaderName`: judge the lines only when it refused.
        let (block_at, block_end) = field_block(head);
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
    if !is_target_form(method, target) {
        return Err(Bad::Field(
            HttpField::RequestLine,
            Span::of(target, head).at as usize,
        ));
    }
    let version = version_of(req.version);
    let crlf = lines_end_in_crlf(head, req.headers);
    let (block_at, block_end) = if crlf {
        // The start line ends with CRLF right after the version, and the
        // head with the empty line's: no search.
        (version_end(head, target) + 2, head.len() - 2)
    } else {
        field_block(head)
    };
    let f = Framing::read(req.headers, config, head, true)?;

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
    // The target before the Host field: errors come in byte order.
    let host = match (f.host, authority) {
        (_, Some(authority)) if !is_target_authority(authority, method == b"CONNECT") => {
            return Err(Bad::Field(
                HttpField::RequestLine,
                Span::of(target, head).at as usize,
            ))
        }
        (Some(host), _) if !is_host(host) => return Err(host_at(host)),
        (Some(host), Some(authority)) if !host.eq_ignore_ascii_case(authority) => {
            return Err(host_at(host))
        }
        (Some(host), _) => Some(host),
        (None, Some(authority)) if version == Version::Http10 => Some(authority),
        (None, _) if version == Version::Http11 => return Err(Bad::Field(HttpField::Host, 0)),
        (None, authority) => authority,
    };

    // The body (RFC 9112, section 6.3). A CONNECT has none (RFC 9110,
    // section 9.3.6): one announced would be a body to some parsers and
    // the tunnel's first bytes to others.
    let body = request_body(&f, version)?;
    if method == b"CONNECT" && (f.te || body != Body::Empty) {
        return Err(Bad::Field(HttpField::ConnectBody, 0));
    }
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
    pub(crate) flags: Flags,
    /// Every line ended in CRLF (httparse also takes a bare LF).
    pub(crate) crlf: bool,
}

impl RequestParts {
    /// The request, over the head's bytes (split off the buffer).
    pub(crate) fn into_request(self, head: Bytes) -> Request {
        Request {
            headers: Headers::new(head, self.block, self.count),
            method: self.method,
            target: self.target,
            version: self.version,
            host: self.host,
            body: self.body,
            flags: self.flags,
        }
    }
}

/// What a client knows of the request a response answers. A request may
/// be a HEAD (or a CONNECT) and offer an upgrade at once (`curl -I
/// --http2` sends a HEAD with `Upgrade: h2c`): a 101 switches, any other
/// answer is framed by the method.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Asked {
    /// HEAD: no body, whatever the headers say.
    pub(crate) head: bool,
    /// CONNECT: a 2xx makes a tunnel.
    pub(crate) connect: bool,
    /// The request offered an upgrade (`Connection: upgrade` and
    /// `Upgrade`): a 101 switches.
    pub(crate) upgrade: bool,
    /// The request said `Connection: close`: its exchange is the
    /// connection's last, whatever the response says (RFC 9112, section
    /// 9.6).
    pub(crate) close: bool,
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
    // A 101 only answers a request that offered an upgrade.
    if status == 101 && !asked.upgrade {
        return Err(Bad::Field(HttpField::Switch, 9));
    }
    let switches = status == 101 || (asked.connect && (200..300).contains(&status));
    let bodiless =
        asked.head || (100..200).contains(&status) || status == 204 || status == 304 || switches;
    let f = Framing::read(res.headers, config, head, !bodiless)?;
    let body = if bodiless {
        Body::Empty
    } else if f.te {
        response_body(&f, version)?
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
        f.keep_alive(version) && body != Body::UntilClose && !switches && !asked.close,
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
        Response {
            headers: Headers::new(head, self.block, self.count),
            version: self.version,
            status: self.status,
            reason: self.reason,
            body: self.body,
            flags: self.flags,
        }
    }
}
