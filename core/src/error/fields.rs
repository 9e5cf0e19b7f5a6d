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
