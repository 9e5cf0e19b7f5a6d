//! What was malformed, one enum per protocol, for
//! [`InvalidInput`](crate::InvalidInput): HTTP and WebSocket add theirs
//! without one flat list.

use core::fmt;

/// What was wrong with a varint, for [`InvalidInput::Varint`](crate::InvalidInput::Varint).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VarintField {
    /// More than the 10 bytes a `u64` can take.
    TooLong,
    /// The value does not fit in a `u64`.
    Overflow,
    /// It ends in a zero byte after the first: the same value has a
    /// shorter encoding.
    NotMinimal,
}

/// Which field of a TLS ClientHello was malformed, for
/// [`InvalidInput::Tls`](crate::InvalidInput::Tls).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TlsField {
    /// A record header (its length, or a record that is not a handshake
    /// record while the ClientHello is not complete).
    Record,
    /// The handshake message: not a ClientHello, or its length.
    Handshake,
    /// The fixed part of a ClientHello (session id, cipher suites,
    /// compression methods).
    ClientHello,
    /// An extension's length, or an extension listed twice.
    Extension,
    /// The server_name extension, or a host name in it that is not a DNS
    /// name.
    ServerName,
    /// The ALPN extension.
    Alpn,
    /// The supported_versions extension.
    SupportedVersions,
}

/// Which part of an HTTP/1.x message was malformed, for
/// [`InvalidInput::Http`](crate::InvalidInput::Http).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HttpField {
    /// A request head that `httparse` refuses, where a head was expected.
    Head,
    /// A request's Host: sent twice, not a `host[:port]`, or not the
    /// authority of an absolute-form (or CONNECT) request target; a server
    /// answers 400 (RFC 9112, section 3.2), and routing on it could send
    /// the request where its target says otherwise.
    Host,
    /// A request line: the method is not a token, the target is empty or
    /// holds a space or a control byte, or the separators are not single
    /// spaces.
    RequestLine,
    /// A status line: not a three-digit status from 100 to 999 after one
    /// space, or a reason with control bytes.
    StatusLine,
    /// A version other than `HTTP/1.0` and `HTTP/1.1` (a server answers
    /// 505).
    Version,
    /// A header name that is not a token (empty, or with a separator or a
    /// byte outside ASCII).
    HeaderName,
    /// A header value (or trailer value) with NUL or another control byte
    /// other than HTAB.
    HeaderValue,
    /// A line not ended by CRLF: a bare LF, or a CR not followed by LF,
    /// anywhere in a head, a chunk line or the trailers. Some parsers
    /// take a bare LF as a line end and others do not: the difference is
    /// a smuggling vector (RFC 9112, section 2.2).
    LineEnding,
    /// A header line that starts with a space or a tab: obsolete line
    /// folding, or whitespace between the start line and the first header
    /// (RFC 9112, sections 2.2 and 5.2).
    ObsFold,
    /// Whitespace between a header name and its colon (RFC 9112,
    /// section 5.1: a server must answer 400).
    Whitespace,
    /// A Content-Length that is not one decimal number: a sign, `0x`,
    /// spaces inside, empty, past `u64`, or differing values (a list, or
    /// the header given twice).
    ContentLength,
    /// Transfer-Encoding and Content-Length in one message: the two
    /// framings a front and a back end may each pick one of (RFC 9112,
    /// section 6.3).
    BothFraming,
    /// A Transfer-Encoding that cannot frame the message: `chunked` not
    /// last or given twice, an empty list, or any Transfer-Encoding in an
    /// HTTP/1.0 message.
    TransferEncoding,
    /// A transfer coding other than `chunked` (a server answers 501).
    TransferCoding,
    /// A chunk size: not hexadecimal digits only (a sign, `0x`, a leading
    /// space, an empty line), whitespace after it, or past `u64`.
    ChunkSize,
    /// A chunk extension: not `;name` or `;name=value` with a token or a
    /// quoted string, an unterminated quoted string, or a control byte.
    ChunkExtension,
    /// Chunk data not followed by exactly CRLF.
    ChunkDataEnd,
    /// A trailer field that must not be a trailer (one that frames or
    /// routes the message: Content-Length, Transfer-Encoding, Host,
    /// Trailer), or a malformed trailer section.
    Trailer,
    /// A 101 (Switching Protocols) answering a request that offered no
    /// upgrade: a server must not switch to a protocol the request did
    /// not ask for (RFC 9110, section 15.2.2), and a client that took it
    /// would hand the connection over as a tunnel past its own checks.
    Switch,
    /// A CONNECT request with content: a Transfer-Encoding, or a
    /// Content-Length other than 0. A CONNECT request has none (RFC 9110,
    /// section 9.3.6), and parsers disagree on what such bytes are: a
    /// body to one (h11), the tunnel's first bytes to another (llhttp
    /// ignores the Content-Length), so a proxy and its backend could cut
    /// the tunnel at different places.
    ConnectBody,
    /// A request head with content (a Transfer-Encoding, or a
    /// Content-Length other than 0) where only heads are framed
    /// ([`Heads`](crate::Heads)): its body would be taken for what follows
    /// the head (the next head, or the first bytes of the protocol switched
    /// to), where a server reads it as a body.
    UnframedBody,
}

/// Which part of a PROXY protocol header was malformed, for
/// [`InvalidInput::Proxy`](crate::InvalidInput::Proxy).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProxyField {
    /// A v1 line.
    V1,
    /// A v2 header: version, command, family or length.
    V2Header,
    /// A v2 address block shorter than its family needs.
    V2Address,
    /// A v2 TLV that runs past the header, or a known TLV with a value of
    /// the wrong size.
    V2Tlv,
    /// A v2 CRC32C TLV that does not match the header.
    V2Checksum,
    /// A header was required and something else came.
    Missing,
}

impl fmt::Display for TlsField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Record => "TLS record",
            Self::Handshake => "TLS handshake message",
            Self::ClientHello => "TLS ClientHello",
            Self::Extension => "TLS extension",
            Self::ServerName => "TLS server_name extension",
            Self::Alpn => "TLS ALPN extension",
            Self::SupportedVersions => "TLS supported_versions extension",
        })
    }
}

impl fmt::Display for HttpField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Head => "HTTP request head",
            Self::Host => "HTTP Host (repeated, malformed, or not the target's authority)",
            Self::RequestLine => "HTTP request line",
            Self::StatusLine => "HTTP status line",
            Self::Version => "HTTP version",
            Self::HeaderName => "HTTP header name",
            Self::HeaderValue => "HTTP header value",
            Self::LineEnding => "HTTP line ending (bare CR or LF)",
            Self::ObsFold => "HTTP header line (folded, or starting with whitespace)",
            Self::Whitespace => "HTTP header (whitespace before the colon)",
            Self::ContentLength => "HTTP Content-Length",
            Self::BothFraming => "HTTP framing (Transfer-Encoding with Content-Length)",
            Self::TransferEncoding => "HTTP Transfer-Encoding",
            Self::TransferCoding => "HTTP transfer coding (only chunked is known)",
            Self::ChunkSize => "HTTP chunk size",
            Self::ChunkExtension => "HTTP chunk extension",
            Self::ChunkDataEnd => "HTTP chunk end (data not followed by CRLF)",
            Self::Trailer => "HTTP trailer",
            Self::Switch => "HTTP 101 to a request that offered no upgrade",
            Self::ConnectBody => "HTTP CONNECT request with content",
            Self::UnframedBody => "HTTP request with content, where only heads are framed",
        })
    }
}

impl fmt::Display for ProxyField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::V1 => "PROXY v1 line",
            Self::V2Header => "PROXY v2 header",
            Self::V2Address => "PROXY v2 addresses",
            Self::V2Tlv => "PROXY v2 TLV",
            Self::V2Checksum => "PROXY v2 CRC32C",
            Self::Missing => "connection start: a PROXY header was required",
        })
    }
}

/// Which rule of RFC 6455 (or RFC 7692) a WebSocket frame or handshake
/// broke, for [`InvalidInput::WebSocket`](crate::InvalidInput::WebSocket).
/// [`websocket::close_code_for`](crate::websocket::close_code_for) gives
/// the close code to answer with.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WsField {
    /// A reserved bit set that no extension gave a meaning (RSV1 outside
    /// permessage-deflate, or on a control or continuation frame).
    Reserved,
    /// A reserved opcode (3-7, 11-15).
    OpCode,
    /// A control frame (close, ping, pong) without FIN, or with more than
    /// 125 bytes of payload.
    Control,
    /// A client frame not masked, or a server frame masked.
    Mask,
    /// A 64-bit payload length with its most significant bit set.
    Length,
    /// A continuation frame with no message to continue, or a new text or
    /// binary frame before the last one ended.
    Continuation,
    /// A close frame whose payload is one byte, or whose code may not be
    /// sent (RFC 6455, section 7.4).
    Close,
    /// A compressed message that does not inflate.
    Compressed,
    /// An opening handshake that is not a WebSocket one: not a GET, no
    /// `Upgrade: websocket` or `Connection: upgrade`, a missing or
    /// malformed `Sec-WebSocket-Key`, an unsupported
    /// `Sec-WebSocket-Version` (a server answers 426 with the version it
    /// speaks), or a response other than 101 with the right
    /// `Sec-WebSocket-Accept`.
    Handshake,
    /// A `Sec-WebSocket-Extensions` or `Sec-WebSocket-Protocol` the other
    /// side may not choose (one that was not offered, malformed
    /// parameters).
    Negotiation,
}

impl fmt::Display for WsField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Reserved => "WebSocket frame (reserved bit set)",
            Self::OpCode => "WebSocket frame (reserved opcode)",
            Self::Control => "WebSocket control frame (fragmented, or over 125 bytes)",
            Self::Mask => "WebSocket frame (masking)",
            Self::Length => "WebSocket frame length",
            Self::Continuation => "WebSocket fragmentation",
            Self::Close => "WebSocket close frame",
            Self::Compressed => "WebSocket compressed message",
            Self::Handshake => "WebSocket opening handshake",
            Self::Negotiation => "WebSocket extension or subprotocol",
        })
    }
}
