//! Heads, chunks and trailers out: validated so that what cleave sends
//! cannot be read two ways (no CR or LF in a value, never both framings,
//! no body where the status allows none), written with one allocation
//! per head (none with [`response_into`] / [`request_into`] and a kept
//! buffer) and none per chunk (the payload `Bytes` is never copied).

use bytes::{BufMut, Bytes, BytesMut};

use crate::encoder::Frame;
use crate::error::{Error, Misuse, Unencodable};
use crate::http1::chars::is_token;
use crate::http1::head::Body;
use crate::http1::host::{absolute_authority, is_host, is_target_authority, is_target_form};

/// `100 Continue`, for a request that [`expects_continue`]: push it like
/// a response, in order (on the bulk lane: it must not overtake the
/// responses to the requests before), then read the body.
///
/// [`expects_continue`]: crate::http1::Request::expects_continue
pub const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

#[cold]
fn refuse(why: Unencodable) -> Error {
    Error::Misuse(Misuse::Unencodable(why))
}

/// Whether a value may be sent: HTAB, visible ASCII, space, and bytes
/// past ASCII; never CR, LF, NUL or another control byte.
fn is_value(value: &[u8]) -> bool {
    value
        .iter()
        .all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

/// Whether a field value may be sent as it is: [`is_value`], and no
/// whitespace at either end, which a recipient trims (RFC 9110, section
/// 5.5): the value read would not be the one given.
fn is_field_value(value: &[u8]) -> bool {
    let ows = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    is_value(value) && !ows(value.first()) && !ows(value.last())
}

/// The names a caller must not give: the body argument frames the
/// message.
fn is_framing(name: &str) -> bool {
    name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("transfer-encoding")
}

/// Checks the fields and returns the bytes they take (`name: value\r\n`
/// each).
fn fields_len(headers: &[(&str, &[u8])]) -> Result<usize, Error> {
    let mut len = 0;
    for (name, value) in headers {
        if !is_token(name.as_bytes()) {
            return Err(refuse(Unencodable::HttpToken));
        }
        if !is_field_value(value) {
            return Err(refuse(Unencodable::HttpValue));
        }
        if is_framing(name) {
            return Err(refuse(Unencodable::HttpFraming));
        }
        len += name.len() + 2 + value.len() + 2;
    }
    Ok(len)
}

/// Bytes a head is put together in before it is copied to its buffer.
const STAGE: usize = 256;

/// A head being written: its pieces gathered on the stack and copied into
/// `out` in one piece (or one per [`STAGE`] bytes), so that a head of
/// short pieces costs one copy into `out`, not one per piece (each with
/// its own capacity check). The literal pieces are fixed-size stores.
struct Staged<'a> {
    out: &'a mut BytesMut,
    buf: [u8; STAGE],
    len: usize,
}

impl<'a> Staged<'a> {
    /// A head of `len` bytes into `out` (room reserved at once).
    #[inline(always)]
    fn new(out: &'a mut BytesMut, len: usize) -> Self {
        out.reserve(len);
        Self {
            out,
            buf: [0; STAGE],
            len: 0,
        }
    }

    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) {
        let end = self.len + bytes.len();
        match self.buf.get_mut(self.len..end) {
            Some(room) => {
                room.copy_from_slice(bytes);
                self.len = end;
            }
            None => self.spill(bytes),
        }
    }

    /// What does not fit: the staged bytes go first, then `bytes`.
    #[cold]
    #[inline(never)]
    fn spill(&mut self, bytes: &[u8]) {
        self.out.put_slice(&self.buf[..self.len]);
        self.len = 0;
        if bytes.len() < STAGE {
            self.buf[..bytes.len()].copy_from_slice(bytes);
            self.len = bytes.len();
        } else {
            self.out.put_slice(bytes);
        }
    }

    /// `n` in decimal, written in place.
    #[inline(always)]
    fn put_decimal(&mut self, n: u64) {
        let digits = decimal_digits(n);
        if self.len + digits > STAGE {
            self.spill(&[]);
        }
        let mut n = n;
        for at in (self.len..self.len + digits).rev() {
            #[allow(clippy::cast_possible_truncation)] // below 10
            let digit = (n % 10) as u8;
            if let Some(b) = self.buf.get_mut(at) {
                *b = b'0' + digit;
            }
            n /= 10;
        }
        self.len += digits;
    }

    /// The fields, as given.
    #[inline(always)]
    fn put_fields(&mut self, headers: &[(&str, &[u8])]) {
        for (name, value) in headers {
            self.put(name.as_bytes());
            self.put(b": ");
            self.put(value);
            self.put(b"\r\n");
        }
    }

    /// The framing field for `body` (if any) and the empty line, which
    /// end the head: copied to `out`. By reference: a move of the stage
    /// is a copy of all of it (`memcpy` of 272 bytes, when not elided).
    #[inline(always)]
    fn finish(&mut self, body: Body) {
        match body {
            Body::Length(n) => {
                self.put(b"Content-Length: ");
                self.put_decimal(n);
                self.put(b"\r\n\r\n");
            }
            Body::Chunked => self.put(b"Transfer-Encoding: chunked\r\n\r\n"),
            Body::Empty | Body::UntilClose => self.put(b"\r\n"),
        }
        self.end();
    }

    /// What is staged, copied to `out` (by reference: moving the stage
    /// would copy all of it).
    #[inline(always)]
    fn end(&mut self) {
        self.out.put_slice(&self.buf[..self.len]);
    }
}

/// The digits of `n` in decimal (a loop: a short length, the common
/// case, takes one step, where `checked_ilog10` costs its whole table).
#[inline(always)]
fn decimal_digits(n: u64) -> usize {
    let mut digits = 1;
    let mut rest = n / 10;
    while rest > 0 {
        digits += 1;
        rest /= 10;
    }
    digits
}

/// The bytes the framing field and the empty line after it take.
fn framing_len(body: Body) -> usize {
    match body {
        Body::Length(n) => 16 + decimal_digits(n) + 4,
        Body::Chunked => 30,
        Body::Empty | Body::UntilClose => 2,
    }
}

/// A request head: `method target HTTP/1.1`, the fields as given, then
/// the framing header for `body` (Content-Length, or Transfer-Encoding:
/// chunked; none for [`Body::Empty`]).
///
/// ```
/// use cleave_proto::http1::{request, Body};
///
/// let head = request("POST", "/upload", &[("Host", b"example.com")], Body::Length(5))?;
/// assert_eq!(head, "POST /upload HTTP/1.1\r\nHost: example.com\r\nContent-Length: 5\r\n\r\n");
/// assert!(request("GET", "/", &[("X", b"a\r\nEvil: 1")], Body::Empty).is_err());
/// # Ok::<(), cleave_proto::Error>(())
/// ```
///
/// # Errors
///
/// `Misuse::Unencodable` with [`HttpToken`](Unencodable::HttpToken) (a
/// method or name not a token, a target empty or not visible ASCII, a
/// target of none of the forms a server takes (origin-form, `*`,
/// absolute-form `scheme://authority...`, authority-form for a
/// CONNECT), a
/// CONNECT target or an absolute-form target's authority that is not a
/// `host[:port]`), [`HttpHost`](Unencodable::HttpHost) (no Host field,
/// more than one, one that is not a `host[:port]` or that differs from
/// the target's authority: HTTP/1.1 requires one, and cleave's server
/// refuses the others),
/// [`HttpValue`](Unencodable::HttpValue) (a control byte in a value, or
/// whitespace at its start or end),
/// [`HttpFraming`](Unencodable::HttpFraming) (a framing field among the
/// headers) or [`HttpBody`](Unencodable::HttpBody) (a request framed by
/// the close, a CONNECT with a body).
pub fn request(
    method: &str,
    target: &str,
    headers: &[(&str, &[u8])],
    body: Body,
) -> Result<Bytes, Error> {
    let mut out = BytesMut::new();
    request_into(&mut out, method, target, headers, body)?;
    Ok(out.freeze())
}

/// [`request`], appended to `out` instead of a buffer of its own: a
/// client that keeps one `BytesMut` and pushes `out.split().freeze()`
/// allocates no head once the queue has copied (or written) the ones
/// before. `out` grows by the head's length, at most once.
///
/// ```
/// use cleave_proto::http1::{request_into, Body};
/// use cleave_proto::BytesMut;
///
/// let mut heads = BytesMut::with_capacity(1024);
/// request_into(&mut heads, "GET", "/", &[("Host", b"example.com")], Body::Empty)?;
/// assert_eq!(heads.split().freeze(), "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n");
/// # Ok::<(), cleave_proto::Error>(())
/// ```
///
/// # Errors
///
/// As [`request`]; nothing is written then.
pub fn request_into(
    out: &mut BytesMut,
    method: &str,
    target: &str,
    headers: &[(&str, &[u8])],
    body: Body,
) -> Result<(), Error> {
    let len = check_request(method, target, headers, body)?;
    write_request(out, method, target, headers, body, len);
    Ok(())
}

/// Checks a request head as [`request`] does, and returns its length.
pub(crate) fn check_request(
    method: &str,
    target: &str,
    headers: &[(&str, &[u8])],
    body: Body,
) -> Result<usize, Error> {
    if !is_token(method.as_bytes())
        || target.is_empty()
        || !target.bytes().all(|b| (0x21..0x7f).contains(&b))
        || !is_target_form(method.as_bytes(), target.as_bytes())
    {
        return Err(refuse(Unencodable::HttpToken));
    }
    // A CONNECT has no body (RFC 9110, section 9.3.6): cleave's server
    // refuses one, as a smuggling vector.
    if body == Body::UntilClose || (method == "CONNECT" && body != Body::Empty) {
        return Err(refuse(Unencodable::HttpBody));
    }
    let fields = fields_len(headers)?;
    check_host(method, target, headers)?;
    Ok(method.len() + 1 + target.len() + 11 + fields + framing_len(body))
}

/// Writes a request head [`check_request`] passed (`len` is what it
/// returned) at the end of `out`.
#[inline(always)]
pub(crate) fn write_request(
    out: &mut BytesMut,
    method: &str,
    target: &str,
    headers: &[(&str, &[u8])],
    body: Body,
    len: usize,
) {
    let mut head = Staged::new(out, len);
    head.put(method.as_bytes());
    head.put(b" ");
    head.put(target.as_bytes());
    head.put(b" HTTP/1.1\r\n");
    head.put_fields(headers);
    head.finish(body);
}

/// The Host rules a server holds an HTTP/1.1 request to (RFC 9112,
/// section 3.2; cleave's [`Server`](crate::http1::Server) refuses the
/// rest): a CONNECT's target is a `host:port` (a port from 1 to 65535) and
/// an absolute-form target's authority a `host[:port]`, neither host
/// empty; one Host field, a `host[:port]`, equal (case aside)
/// to the target's authority when it names one.
fn check_host(method: &str, target: &str, headers: &[(&str, &[u8])]) -> Result<(), Error> {
    let authority = if method == "CONNECT" {
        Some(target.as_bytes())
    } else {
        absolute_authority(target.as_bytes())
    };
    if authority.is_some_and(|a| !is_target_authority(a, method == "CONNECT")) {
        return Err(refuse(Unencodable::HttpToken));
    }
    let mut hosts = headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("host"));
    let (Some((_, host)), None) = (hosts.next(), hosts.next()) else {
        return Err(refuse(Unencodable::HttpHost));
    };
    if !is_host(host) || authority.is_some_and(|a| !a.eq_ignore_ascii_case(host)) {
        return Err(refuse(Unencodable::HttpHost));
    }
    Ok(())
}

/// A response head: `HTTP/1.1 status reason`, the fields as given, then
/// the framing header for `body`: Content-Length (0 for [`Body::Empty`]
/// on a status that may carry a body, so the client does not read to the
/// close), Transfer-Encoding: chunked, or none for
/// [`Body::UntilClose`] (the caller closes after the body). To a HEAD,
/// give the length the body would have, and send none. A 2xx to CONNECT
/// opens a tunnel and must carry no framing field (RFC 9110, section
/// 9.3.6): give [`Body::UntilClose`].
///
/// ```
/// use cleave_proto::http1::{response, Body};
///
/// let head = response(200, "OK", &[("Content-Type", b"text/plain")], Body::Chunked)?;
/// assert_eq!(head, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n");
/// assert_eq!(response(204, "No Content", &[], Body::Empty)?, "HTTP/1.1 204 No Content\r\n\r\n");
/// assert!(response(204, "No Content", &[], Body::Length(3)).is_err());
/// # Ok::<(), cleave_proto::Error>(())
/// ```
///
/// # Errors
///
/// As [`request`], and [`HttpStatus`](Unencodable::HttpStatus) for a
/// status outside 100 to 999, [`HttpBody`](Unencodable::HttpBody) for a
/// body on a 1xx, 204 or 304.
pub fn response(
    status: u16,
    reason: &str,
    headers: &[(&str, &[u8])],
    body: Body,
) -> Result<Bytes, Error> {
    let mut out = BytesMut::new();
    response_into(&mut out, status, reason, headers, body)?;
    Ok(out.freeze())
}

/// [`response`], appended to `out` instead of a buffer of its own: a
/// server that keeps one `BytesMut` and pushes `out.split().freeze()`
/// allocates no head once the queue has copied (or written) the ones
/// before (heads under the queue's
/// [`coalesce_below`](crate::WriteQueueConfig::coalesce_below) are copied
/// as they are pushed). `out` grows by the head's length, at most once.
///
/// ```
/// use cleave_proto::http1::{response_into, Body};
/// use cleave_proto::BytesMut;
///
/// let mut heads = BytesMut::with_capacity(1024);
/// response_into(&mut heads, 200, "OK", &[], Body::Length(5))?;
/// assert_eq!(heads.split().freeze(), "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n");
/// # Ok::<(), cleave_proto::Error>(())
/// ```
///
/// # Errors
///
/// As [`response`]; nothing is written then.
pub fn response_into(
    out: &mut BytesMut,
    status: u16,
    reason: &str,
    headers: &[(&str, &[u8])],
    body: Body,
) -> Result<(), Error> {
    let (body, len) = check_response(status, reason, headers, body)?;
    write_response(out, status, reason, headers, body, len);
    Ok(())
}

/// Checks a response head as [`response`] does, and returns the framing
/// it will carry ([`Body::Empty`] becomes a length of 0 where the status
/// allows a body) and its length.
#[inline]
pub(crate) fn check_response(
    status: u16,
    reason: &str,
    headers: &[(&str, &[u8])],
    body: Body,
) -> Result<(Body, usize), Error> {
    if !(100..=999).contains(&status) {
        return Err(refuse(Unencodable::HttpStatus));
    }
    if !is_value(reason.as_bytes()) {
        return Err(refuse(Unencodable::HttpValue));
    }
    let bodiless = status < 200 || status == 204 || status == 304;
    let body = match body {
        Body::Empty if !bodiless => Body::Length(0),
        Body::Empty => Body::Empty,
        _ if bodiless => return Err(refuse(Unencodable::HttpBody)),
        other => other,
    };
    let fields = if headers.is_empty() {
        0
    } else {
        fields_len(headers)?
    };
    Ok((body, 13 + reason.len() + 2 + fields + framing_len(body)))
}

/// Writes a response head [`check_response`] passed (`body` and `len` as
/// it returned them) at the end of `out`.
#[inline(always)]
pub(crate) fn write_response(
    out: &mut BytesMut,
    status: u16,
    reason: &str,
    headers: &[(&str, &[u8])],
    body: Body,
    len: usize,
) {
    // The status line up to the reason, in one piece of a known length.
    // Three digits: the status is within 100..=999.
    let mut line = *b"HTTP/1.1 000 ";
    #[allow(clippy::cast_possible_truncation)] // each below 10
    {
        line[9] += (status / 100 % 10) as u8;
        line[10] += (status / 10 % 10) as u8;
        line[11] += (status % 10) as u8;
    }
    let mut head = Staged::new(out, len);
    head.put(&line);
    head.put(reason.as_bytes());
    head.put(b"\r\n");
    head.put_fields(headers);
    head.finish(body);
}

/// One chunk of a chunked body: the size line and the CRLF after the data
/// are the frame's inline framing, `data` its body, not copied.
///
/// ```
/// use cleave_proto::http1::chunk;
/// use cleave_proto::Bytes;
///
/// let frame = chunk(Bytes::from_static(b"hello world"))?;
/// assert_eq!((frame.head(), &frame.body()[..], frame.tail()), (&b"b\r\n"[..], &b"hello world"[..], &b"\r\n"[..]));
/// # Ok::<(), cleave_proto::Error>(())
/// ```
///
/// # Errors
///
/// `Unencodable::TooShort` for empty data: an empty chunk would end the
/// body (use [`last_chunk`]).
pub fn chunk(data: Bytes) -> Result<Frame, Error> {
    if data.is_empty() {
        return Err(refuse(Unencodable::TooShort { len: 0, min: 1 }));
    }
    let mut line = [0u8; 18];
    let mut n = data.len() as u64;
    let mut i = 16;
    loop {
        i -= 1;
        line[i] = b"0123456789abcdef"[(n & 15) as usize];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    line[16] = b'\r';
    line[17] = b'\n';
    Ok(Frame::with_framing(&line[i..], data, b"\r\n"))
}

/// The last chunk and the trailer section that ends a chunked body.
///
/// ```
/// use cleave_proto::http1::last_chunk;
///
/// assert_eq!(last_chunk(&[])?, "0\r\n\r\n");
/// assert_eq!(last_chunk(&[("Digest", b"sha-256=abc")])?, "0\r\nDigest: sha-256=abc\r\n\r\n");
/// assert!(last_chunk(&[("Content-Length", b"5")]).is_err());
/// # Ok::<(), cleave_proto::Error>(())
/// ```
///
/// # Errors
///
/// As [`request`]'s fields; a trailer that would frame or route the
/// message (Content-Length, Transfer-Encoding, Host, Trailer) is
/// [`HttpFraming`](Unencodable::HttpFraming).
pub fn last_chunk(trailers: &[(&str, &[u8])]) -> Result<Bytes, Error> {
    if trailers.is_empty() {
        return Ok(Bytes::from_static(b"0\r\n\r\n"));
    }
    if trailers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host") || name.eq_ignore_ascii_case("trailer"))
    {
        return Err(refuse(Unencodable::HttpFraming));
    }
    let len = 3 + fields_len(trailers)? + 2;
    let mut out = BytesMut::new();
    let mut section = Staged::new(&mut out, len);
    section.put(b"0\r\n");
    section.put_fields(trailers);
    section.put(b"\r\n");
    section.end();
    Ok(out.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http1::chars::TOKEN;

    #[test]
    fn chunk_sizes_in_hex() {
        for len in [1usize, 15, 16, 255, 4096, 65_535, 1 << 20] {
            let frame = chunk(Bytes::from(alloc::vec![b'x'; len])).unwrap();
            let line = core::str::from_utf8(frame.head()).unwrap();
            assert_eq!(usize::from_str_radix(line.trim_end(), 16).unwrap(), len);
            assert!(line.ends_with("\r\n"));
        }
    }

    #[test]
    fn refuses_injection_in_every_part() {
        assert!(request("GE T", "/", &[], Body::Empty).is_err());
        assert!(request("GET", "/a b", &[], Body::Empty).is_err());
        assert!(request("GET", "", &[], Body::Empty).is_err());
        // Targets a URL parser reads as naming another authority.
        let evil: &[(&str, &[u8])] = &[("Host", b"evil.example")];
        for target in [
            "http:/evil.example/",
            "http:evil.example",
            "@evil.example/x",
        ] {
            assert!(
                request("GET", target, evil, Body::Empty).is_err(),
                "{target}"
            );
        }
        assert!(request("GET", "http://evil.example/", evil, Body::Empty).is_ok());
        assert!(request("GET", "/", &[("Na me", b"v")], Body::Empty).is_err());
        assert!(request("GET", "/", &[("Name", b"v\n")], Body::Empty).is_err());
        assert!(request("GET", "/", &[("Name", b"v\0")], Body::Empty).is_err());
        assert!(request(
            "POST",
            "/",
            &[("transfer-encoding", b"chunked")],
            Body::Length(1)
        )
        .is_err());
        assert!(response(200, "OK\r\nX: y", &[], Body::Empty).is_err());
        assert!(response(99, "", &[], Body::Empty).is_err());
        assert!(response(304, "Not Modified", &[], Body::Chunked).is_err());
        assert!(last_chunk(&[("Transfer-Encoding", b"chunked")]).is_err());
    }

    /// A head as plain concatenation: what the staged writer must give.
    fn reference(start: &[u8], headers: &[(&str, &[u8])], body: Body) -> Vec<u8> {
        let mut head = start.to_vec();
        for (name, value) in headers {
            head.extend_from_slice(name.as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(value);
            head.extend_from_slice(b"\r\n");
        }
        match body {
            Body::Length(n) => {
                head.extend_from_slice(alloc::format!("Content-Length: {n}\r\n\r\n").as_bytes());
            }
            Body::Chunked => head.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n"),
            Body::Empty | Body::UntilClose => head.extend_from_slice(b"\r\n"),
        }
        head
    }

    /// Heads put together on the stack spill into the buffer when they
    /// outgrow it: at every point of a head (inside the reason, a name, a
    /// value, the Content-Length digits, the last line), and for pieces
    /// longer than the stage, the bytes are the plain concatenation, after
    /// what the buffer held, and an empty buffer is given the head's
    /// exact length once.
    #[test]
    fn heads_of_every_length_are_written_whole() {
        let long = alloc::vec![b'v'; 3 * STAGE];
        for pad in 0..2 * STAGE + 8 {
            let reason = "R".repeat(pad % 300);
            let value = &long[..pad];
            let headers: [(&str, &[u8]); 3] = [("X-A", b"1"), ("X-Pad", value), ("X-B", b"22")];
            for body in [
                Body::Length(0),
                Body::Length(9),
                Body::Length(1_234_567_890_123),
                Body::Length(u64::MAX),
                Body::Chunked,
                Body::UntilClose,
            ] {
                let mut out = BytesMut::from(&b"before"[..]);
                response_into(&mut out, 200, &reason, &headers, body).unwrap();
                let start = alloc::format!("HTTP/1.1 200 {reason}\r\n");
                let mut expected = b"before".to_vec();
                expected.extend(reference(start.as_bytes(), &headers, body));
                assert_eq!(&out[..], &expected[..], "pad {pad}, {body:?}");

                if body == Body::UntilClose {
                    let trailers: [(&str, &[u8]); 2] = [("X-Pad", value), ("X-Sum", b"9")];
                    let section = last_chunk(&trailers).unwrap();
                    assert_eq!(
                        &section[..],
                        &reference(b"0\r\n", &trailers, body)[..],
                        "pad {pad}"
                    );
                    continue;
                }
                let target = alloc::format!("/{}", "t".repeat(pad));
                let request_headers: [(&str, &[u8]); 2] =
                    [("Host", b"example.com"), ("X-Pad", value)];
                let mut out = BytesMut::new();
                request_into(&mut out, "POST", &target, &request_headers, body).unwrap();
                let start = alloc::format!("POST {target} HTTP/1.1\r\n");
                let expected = reference(start.as_bytes(), &request_headers, body);
                assert_eq!(&out[..], &expected[..], "pad {pad}, {body:?}");
                // The length reserved was the head's: one allocation, exact.
                assert_eq!(out.capacity(), out.len(), "pad {pad}, {body:?}");
            }
        }
    }

    #[test]
    fn token_table_matches_the_rfc() {
        let tchar =
            b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
        for b in 0..=255u8 {
            assert_eq!(TOKEN[usize::from(b)], tchar.contains(&b), "byte {b:#x}");
        }
    }
}
