//! Request and response heads: owned views of the receive buffer, with
//! the framing decided once, when the head is parsed.

use core::fmt;

use bytes::Bytes;

/// An HTTP/1.x version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Version {
    /// `HTTP/1.0`: no keep-alive unless asked, no Transfer-Encoding.
    Http10,
    /// `HTTP/1.1`.
    Http11,
}

impl Version {
    /// `HTTP/1.0` or `HTTP/1.1`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http10 => "HTTP/1.0",
            Self::Http11 => "HTTP/1.1",
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a message's body is framed (RFC 9112, section 6.3), decided once
/// from its head (and, for a response, the request's method).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Body {
    /// No body: the message ends with its head.
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// Chunked, maybe with trailers.
    Chunked,
    /// A response whose body runs until the server closes the connection.
    UntilClose,
}

/// A span of a head: where it starts and how long it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) at: u32,
    pub(crate) len: u32,
}

impl Span {
    pub(crate) fn of(part: &[u8], whole: &[u8]) -> Self {
        Self {
            // Heads are at most `u32::MAX` bytes (`Http1Config::max_head`).
            at: u32::try_from(part.as_ptr() as usize - whole.as_ptr() as usize).unwrap_or(u32::MAX),
            len: u32::try_from(part.len()).unwrap_or(0),
        }
    }

    pub(crate) fn get(self, whole: &[u8]) -> &[u8] {
        let at = self.at as usize;
        whole.get(at..at + self.len as usize).unwrap_or_default()
    }
}

/// Text the parser checked to be ASCII: never empty by accident.
fn ascii(bytes: &[u8]) -> &str {
    core::str::from_utf8(bytes).unwrap_or_default()
}

/// The header fields of a head or a trailer section, as they came: names
/// and values with their case, order and repeats, in one `Bytes` view of
/// the receive buffer (a proxy forwards [`as_bytes`](Self::as_bytes)
/// untouched). Every line was checked when it was parsed.
///
/// ```
/// use cleave_proto::http1::{Server, ServerEvent};
/// use cleave_proto::Conn;
/// use std::time::Duration;
///
/// let mut conn = Conn::new(Server::new(), Duration::ZERO);
/// conn.feed(b"GET / HTTP/1.1\r\nHost: a\r\nX-Tag: 1\r\nx-tag: 2\r\n\r\n", Duration::ZERO)?;
/// let Some(ServerEvent::Head(request)) = conn.poll_event()? else { panic!() };
/// let tags: Vec<_> = request.headers().get_all("X-TAG").collect();
/// assert_eq!(tags, [&b"1"[..], b"2"]);
/// assert_eq!(request.headers().iter().next().unwrap().name(), "Host");
/// # Ok::<(), cleave_proto::Error>(())
/// ```
///
/// The fields share the `Bytes` of their head: a request or a response
/// holds one reference to the receive buffer, not two.
#[derive(Clone, Default)]
pub struct Headers {
    /// The whole head (or trailer section) the lines are in.
    whole: Bytes,
    /// The lines: `whole[block.at..][..block.len]`.
    block: Span,
    count: u32,
}

impl PartialEq for Headers {
    fn eq(&self, other: &Self) -> bool {
        self.count == other.count && self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Headers {}

impl Headers {
    /// The fields in `whole[at..end]`, `count` of them.
    pub(crate) fn new(whole: Bytes, (at, end): (usize, usize), count: usize) -> Self {
        let block = Span {
            at: u32::try_from(at).unwrap_or(u32::MAX),
            len: u32::try_from(end.saturating_sub(at)).unwrap_or(0),
        };
        Self {
            whole,
            block,
            count: u32::try_from(count).unwrap_or(u32::MAX),
        }
    }

    /// How many fields.
    #[must_use]
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The fields in order.
    pub fn iter(&self) -> HeaderIter<'_> {
        HeaderIter {
            rest: self.as_bytes(),
        }
    }

    /// The first value of `name` (compared without case).
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.iter()
            .find(|h| h.name.eq_ignore_ascii_case(name.as_bytes()))
            .map(|h| h.value)
    }

    /// Every value of `name` (compared without case), in order.
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name.as_bytes()))
            .map(|h| h.value)
    }

    /// The lines as they came, each with its CRLF.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        self.block.get(&self.whole)
    }

    /// The lines as an owned view of the receive buffer: no copy.
    #[must_use]
    pub fn to_bytes(&self) -> Bytes {
        let at = self.block.at as usize;
        self.whole.slice(at..at + self.block.len as usize)
    }

    /// An owned view of a part of these headers (a name or a value from
    /// [`iter`](Self::iter)): no copy.
    ///
    /// # Panics
    ///
    /// If `part` is not within [`as_bytes`](Self::as_bytes), as
    /// [`Bytes::slice_ref`].
    #[must_use]
    pub fn slice_ref(&self, part: &[u8]) -> Bytes {
        if part.is_empty() {
            return Bytes::new();
        }
        self.whole.slice_ref(part)
    }
}

impl fmt::Debug for Headers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a> IntoIterator for &'a Headers {
    type Item = Header<'a>;
    type IntoIter = HeaderIter<'a>;

    fn into_iter(self) -> HeaderIter<'a> {
        self.iter()
    }
}

/// One header field: its name as it came, and its value without the
/// whitespace around it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    name: &'a [u8],
    value: &'a [u8],
}

impl<'a> Header<'a> {
    /// The name, with its case (a token: ASCII).
    #[must_use]
    pub fn name(&self) -> &'a str {
        ascii(self.name)
    }

    /// The value: visible ASCII, spaces, tabs and maybe bytes past ASCII
    /// (obs-text), never a control byte.
    #[must_use]
    pub fn value(&self) -> &'a [u8] {
        self.value
    }
}

impl fmt::Debug for Header<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: \"{}\"", self.name(), self.value.escape_ascii())
    }
}

/// The fields of a [`Headers`], in order.
#[derive(Clone, Debug)]
pub struct HeaderIter<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for HeaderIter<'a> {
    type Item = Header<'a>;

    fn next(&mut self) -> Option<Header<'a>> {
        let end = memchr::memchr(b'\n', self.rest)?;
        let line = &self.rest[..end];
        self.rest = &self.rest[end + 1..];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = memchr::memchr(b':', line).unwrap_or(line.len());
        let value = line.get(colon + 1..).unwrap_or_default();
        Some(Header {
            name: &line[..colon],
            value: trim_ows(value),
        })
    }
}

/// Without the spaces and tabs around it.
pub(crate) fn trim_ows(mut value: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = value {
        value = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = value {
        value = rest;
    }
    value
}

/// What a head said about the connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Flags(u8);

impl Flags {
    pub(crate) const KEEP_ALIVE: u8 = 1;
    pub(crate) const CONTINUE: u8 = 2;
    pub(crate) const UPGRADE: u8 = 4;
    pub(crate) const CONNECT: u8 = 8;

    pub(crate) fn set(&mut self, flag: u8, on: bool) {
        if on {
            self.0 |= flag;
        } else {
            self.0 &= !flag;
        }
    }

    pub(crate) fn has(self, flag: u8) -> bool {
        self.0 & flag != 0
    }
}

/// A request head: a `Bytes` view of the receive buffer (request line to
/// the empty line), its parts, and the framing of its body.
#[derive(Clone, PartialEq, Eq)]
pub struct Request {
    pub(crate) method: Span,
    pub(crate) target: Span,
    pub(crate) version: Version,
    pub(crate) headers: Headers,
    pub(crate) host: Option<Span>,
    pub(crate) body: Body,
    pub(crate) flags: Flags,
}

impl Request {
    /// The method, as sent (a token; methods are case-sensitive).
    #[must_use]
    pub fn method(&self) -> &str {
        // The registered methods without a second look at their bytes.
        match self.method.get(&self.headers.whole) {
            b"GET" => "GET",
            b"POST" => "POST",
            b"HEAD" => "HEAD",
            b"PUT" => "PUT",
            b"DELETE" => "DELETE",
            b"OPTIONS" => "OPTIONS",
            b"PATCH" => "PATCH",
            b"CONNECT" => "CONNECT",
            b"TRACE" => "TRACE",
            other => ascii(other),
        }
    }

    /// The request target, as sent (visible ASCII).
    #[must_use]
    pub fn target(&self) -> &str {
        ascii(self.target.get(&self.headers.whole))
    }

    /// The version.
    #[must_use]
    pub fn version(&self) -> Version {
        self.version
    }

    /// The header fields.
    #[must_use]
    pub fn headers(&self) -> &Headers {
        &self.headers
    }

    /// The Host a server takes: the header's value, or the authority of an
    /// absolute-form (or CONNECT) target, which must agree with it.
    /// `None` only for an HTTP/1.0 request without either.
    #[must_use]
    pub fn host(&self) -> Option<&str> {
        self.host.map(|s| ascii(s.get(&self.headers.whole)))
    }

    /// How the body is framed.
    #[must_use]
    pub fn body(&self) -> Body {
        self.body
    }

    /// Whether the connection stays open after this exchange: HTTP/1.1
    /// without `Connection: close`, or HTTP/1.0 with `Connection:
    /// keep-alive`.
    #[must_use]
    pub fn keep_alive(&self) -> bool {
        self.flags.has(Flags::KEEP_ALIVE)
    }

    /// Whether the client waits for `100 Continue` before it sends the
    /// body (`Expect: 100-continue`). The framing is the same either way:
    /// answer [`CONTINUE`](crate::http1::CONTINUE), or a final response
    /// (and then, with keep-alive, the body still comes or the connection
    /// must close).
    #[must_use]
    pub fn expects_continue(&self) -> bool {
        self.flags.has(Flags::CONTINUE)
    }

    /// Whether it asks to switch protocols: an `Upgrade` header listed in
    /// `Connection`, in HTTP/1.1 (a server ignores Upgrade in HTTP/1.0,
    /// RFC 9110 section 7.8). After its body the [`Server`](crate::http1::Server)
    /// parses nothing more: answer 101 and switch, or decline and
    /// [`resume`](crate::http1::Server::resume).
    #[must_use]
    pub fn is_upgrade(&self) -> bool {
        self.flags.has(Flags::UPGRADE)
    }

    /// The `Upgrade` header's value, if it asks to switch.
    #[must_use]
    pub fn upgrade(&self) -> Option<&[u8]> {
        if self.is_upgrade() {
            self.headers.get("upgrade")
        } else {
            None
        }
    }

    /// Whether it is a CONNECT: after it the server parses nothing more
    /// (a 2xx makes the connection a tunnel).
    #[must_use]
    pub fn is_connect(&self) -> bool {
        self.flags.has(Flags::CONNECT)
    }

    /// The head as it came, request line to the empty line.
    #[must_use]
    pub fn as_bytes(&self) -> &Bytes {
        &self.headers.whole
    }

    /// The head's bytes.
    #[must_use]
    pub fn into_bytes(self) -> Bytes {
        self.headers.whole
    }
}

impl fmt::Debug for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("method", &self.method())
            .field("target", &self.target())
            .field("version", &self.version)
            .field("headers", &self.headers)
            .field("body", &self.body)
            .field("keep_alive", &self.keep_alive())
            .finish()
    }
}

/// A response head: a `Bytes` view of the receive buffer (status line to
/// the empty line), its parts, and the framing of its body.
#[derive(Clone, PartialEq, Eq)]
pub struct Response {
    pub(crate) version: Version,
    pub(crate) status: u16,
    pub(crate) reason: Span,
    pub(crate) headers: Headers,
    pub(crate) body: Body,
    pub(crate) flags: Flags,
}

impl Response {
    /// The version.
    #[must_use]
    pub fn version(&self) -> Version {
        self.version
    }

    /// The status code, 100 to 999.
    #[must_use]
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The reason phrase, as sent (maybe empty; may hold obs-text).
    #[must_use]
    pub fn reason(&self) -> &[u8] {
        self.reason.get(&self.headers.whole)
    }

    /// The header fields.
    #[must_use]
    pub fn headers(&self) -> &Headers {
        &self.headers
    }

    /// How the body is framed (for the request it answers).
    #[must_use]
    pub fn body(&self) -> Body {
        self.body
    }

    /// Whether the connection stays open after this exchange.
    #[must_use]
    pub fn keep_alive(&self) -> bool {
        self.flags.has(Flags::KEEP_ALIVE)
    }

    /// Whether this response ends HTTP on the connection: a 101, or a
    /// 2xx to a CONNECT. The bytes after it stay in the buffer for the
    /// next protocol.
    #[must_use]
    pub fn switches(&self) -> bool {
        self.flags.has(Flags::UPGRADE)
    }

    /// Whether it is interim (1xx other than 101): the final response is
    /// still to come.
    #[must_use]
    pub fn is_interim(&self) -> bool {
        (100..200).contains(&self.status) && self.status != 101
    }

    /// The head as it came, status line to the empty line.
    #[must_use]
    pub fn as_bytes(&self) -> &Bytes {
        &self.headers.whole
    }

    /// The head's bytes.
    #[must_use]
    pub fn into_bytes(self) -> Bytes {
        self.headers.whole
    }
}

impl fmt::Debug for Response {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Response")
            .field("status", &self.status)
            .field("reason", &format_args!("{}", self.reason().escape_ascii()))
            .field("version", &self.version)
            .field("headers", &self.headers)
            .field("body", &self.body)
            .field("keep_alive", &self.keep_alive())
            .finish()
    }
}
