//! The core's one error type.
//!
//! "Need more bytes" is never an error: decoders return `Ok(None)` for it. A
//! clean end of stream is not an error either. What remains is sorted by who is
//! at fault, so a caller can decide between closing the connection, logging a
//! misbehaving peer, and fixing its own code:
//!
//! | variant                    | at fault   | typical reaction                  |
//! |----------------------------|------------|-----------------------------------|
//! | [`Error::InvalidInput`]    | the peer   | close, log the offset             |
//! | [`Error::LimitExceeded`]   | a limit    | close, or raise the limit         |
//! | [`Error::Truncated`]       | the peer   | use or log the partial bytes      |
//! | [`Error::TimedOut`]        | a limit    | close (the connection already is) |
//! | [`Error::Misuse`]          | the caller | fix the calling code              |
//!
//! A full or closed write queue is not among them: it is backpressure, not
//! anyone's fault, and a refused push comes back as a [`Rejected`] with a
//! [`Refusal`].

use bytes::Bytes;
use core::fmt;

use crate::codec::checksum::ChecksumMismatch;

mod fields;
mod rejected;

pub use fields::{HttpField, ProxyField, TlsField, VarintField, WsField};
pub use rejected::{Refusal, Rejected};

/// Everything that can go wrong in the core.
///
/// Errors returned by a [`Decoder`](crate::Decoder) are final: once one is
/// returned, every later call returns the same error again, and the bytes that
/// were not consumed stay in the [`RecvBuf`](crate::RecvBuf), where
/// [`take_tail`](crate::RecvBuf::take_tail) hands them back. Offsets count bytes
/// from the start of the stream the buffer has seen (see
/// [`RecvBuf::offset`](crate::RecvBuf::offset)).
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The peer sent bytes that break the framing rules.
    InvalidInput {
        /// What was wrong.
        kind: InvalidInput,
        /// Stream offset of the first offending byte.
        offset: u64,
    },
    /// The peer's traffic went past a configured limit.
    LimitExceeded {
        /// Which limit.
        limit: Limit,
        /// The configured maximum, in bytes.
        max: u64,
        /// The size the peer asked for or reached, in bytes (always `> max`).
        attempted: u64,
        /// Stream offset of the frame (or buffer) that went past the limit.
        offset: u64,
    },
    /// The stream ended inside a frame.
    ///
    /// `partial` holds every byte after the last complete frame, header bytes
    /// included. They have been taken out of the buffer; later calls return
    /// the same error with the same bytes (another handle to them, not a
    /// copy), so take them from the first one.
    Truncated {
        /// The bytes of the incomplete frame.
        partial: Bytes,
        /// Stream offset of `partial[0]`.
        offset: u64,
    },
    /// A connection's timeout ran out (see
    /// [`Timeouts`](crate::conn::Timeouts)): the peer was silent, or too
    /// slow to finish what it started.
    TimedOut(Timeout),
    /// The caller used the API in a way it does not allow.
    Misuse(Misuse),
}

/// Which of a connection's timeouts ran out, for [`Error::TimedOut`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Timeout {
    /// No byte went either way for
    /// [`Timeouts::idle`](crate::conn::Timeouts::idle).
    Idle,
    /// The protocol did not get past its opening (a PROXY header, routing,
    /// the first frame) within
    /// [`Timeouts::opening`](crate::conn::Timeouts::opening).
    Opening,
    /// A frame or head the peer started did not complete within
    /// [`Timeouts::frame`](crate::conn::Timeouts::frame).
    Frame,
    /// No byte went either way through a raw tunnel for
    /// [`Timeouts::tunnel_idle`](crate::conn::Timeouts::tunnel_idle).
    TunnelIdle,
}

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Idle => "idle timeout",
            Self::Opening => "opening timeout",
            Self::Frame => "frame timeout",
            Self::TunnelIdle => "tunnel idle timeout",
        })
    }
}

/// Who is responsible for an [`Error`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The peer sent bytes that are wrong or incomplete.
    Peer,
    /// The peer's traffic is well formed but goes past a configured limit.
    Limit,
    /// The calling code misused the API or gave an invalid configuration.
    Caller,
}

/// What was wrong with the peer's bytes, for [`Error::InvalidInput`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InvalidInput {
    /// A frame that must be UTF-8 is not; the offset points at the first
    /// invalid byte.
    Utf8,
    /// A length field plus the configured length adjustment is below zero
    /// or past `u64::MAX`.
    LengthOutOfRange {
        /// The value of the length field as sent.
        declared: u64,
        /// The configured adjustment.
        adjustment: i64,
    },
    /// A varint length prefix is malformed.
    Varint(VarintField),
    /// A TLS ClientHello's field does not add up (a length that runs past
    /// its container, a value the protocol does not allow).
    Tls(TlsField),
    /// An HTTP/1.x field is malformed.
    Http(HttpField),
    /// A PROXY protocol header is malformed (or missing where required).
    Proxy(ProxyField),
    /// A WebSocket frame or opening handshake breaks RFC 6455 (or RFC
    /// 7692).
    WebSocket(WsField),
    /// A checked frame's payload does not match its checksum (see
    /// [`Checked`](crate::codec::checked::Checked)); the offset is the
    /// frame's first byte.
    Checksum(ChecksumMismatch),
    /// A frame does not start with the marker its format requires (see
    /// [`LengthConfig::magic`](crate::LengthConfig::magic)); the offset
    /// points at the first byte that differs.
    Magic,
    /// A frame's payload is not a valid message of the expected type (see
    /// `codec::message::ProstCodec`, feature `prost`); the offset is
    /// the frame's first byte. The frame has been taken off the buffer:
    /// the codec hands it back with prost's reason.
    Message,
}

/// Which limit was hit, for [`Error::LimitExceeded`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Limit {
    /// The receive buffer's maximum size
    /// ([`RecvBufConfig::max_buffered`](crate::RecvBufConfig::max_buffered)).
    Buffer,
    /// A line's maximum length (without its delimiter).
    LineLength,
    /// A length-delimited frame's maximum payload length.
    FrameLength,
    /// A sniffer's byte budget (a ClientHello, a request head or a PROXY
    /// header longer than it will read).
    SniffBudget,
    /// An HTTP head's maximum size, start line and headers together (a
    /// server answers 431).
    HeadLength,
    /// An HTTP head's (or trailer section's) maximum number of fields (a
    /// server answers 431).
    HeaderCount,
    /// The chunk-extension bytes one HTTP message may carry.
    ChunkExtension,
    /// An HTTP trailer section's maximum size.
    TrailerLength,
    /// An HTTP message body's maximum size, declared or received (a
    /// server answers 413).
    BodyLength,
    /// A message's maximum size, its frames together (after
    /// decompression, for a compressed WebSocket message): a WebSocket
    /// endpoint closes with 1009.
    MessageLength,
    /// An HTTP request line longer than a line may be
    /// ([`Http1Config::max_line`](crate::http1::Http1Config::max_line)):
    /// its target is too long, and a server answers 414 (RFC 9112,
    /// section 3).
    RequestLine,
}

/// How the caller misused the API, for [`Error::Misuse`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Misuse {
    /// Asked to split or skip more bytes than are buffered.
    OutOfBounds {
        /// Bytes asked for.
        requested: usize,
        /// Bytes buffered.
        available: usize,
    },
    /// Committed more bytes than the spare region that was handed out.
    CommitTooLarge {
        /// Bytes committed.
        committed: usize,
        /// Size of the spare region.
        spare: usize,
    },
    /// Told a write queue that more bytes were written than it handed out.
    AdvanceTooFar {
        /// Bytes reported written.
        advanced: usize,
        /// Bytes handed out by the last drain.
        presented: usize,
    },
    /// An encoder was given an item it cannot put on the wire as it is.
    Unencodable(Unencodable),
    /// A configuration value is out of range.
    InvalidConfig {
        /// The setting's name, as in its setter.
        setting: &'static str,
        /// The value given.
        value: u64,
        /// What the setting accepts.
        expected: &'static str,
    },
}

/// Why an encoder refused an item, for [`Misuse::Unencodable`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unencodable {
    /// The item is longer than the format or the configured limit allows.
    TooLong {
        /// The item's length, in bytes.
        len: u64,
        /// The longest the encoder accepts.
        max: u64,
    },
    /// The item is shorter than the length field can describe (a positive
    /// length adjustment counts bytes the item does not have).
    TooShort {
        /// The item's length, in bytes.
        len: u64,
        /// The shortest the encoder accepts.
        min: u64,
    },
    /// A line holds its own delimiter, which would end it early.
    ContainsDelimiter {
        /// Index of the delimiter in the item.
        offset: usize,
    },
    /// A line ends in `\r`, which a decoder that strips `\r` would drop.
    EndsWithCr,
    /// A line must be UTF-8 and is not.
    NotUtf8 {
        /// Index of the first invalid byte.
        valid_up_to: usize,
    },
    /// An HTTP method or header name that is not a token, or an empty
    /// or non-ASCII request target.
    HttpToken,
    /// An HTTP header value, trailer value or reason phrase with CR, LF,
    /// NUL or another control byte (a header injection), or a header or
    /// trailer value that starts or ends with whitespace (a recipient
    /// trims it: the value would not arrive as given).
    HttpValue,
    /// A Content-Length or Transfer-Encoding among the headers: the body
    /// argument frames the message, so both framings cannot be sent.
    HttpFraming,
    /// A body where the status allows none (1xx, 204, 304), a request
    /// framed by the close, or a CONNECT request with a body (it has none,
    /// and parsers disagree on what such bytes are).
    HttpBody,
    /// A status code outside 100 to 999.
    HttpStatus,
    /// An HTTP/1.1 request without exactly one Host field that is a
    /// `host[:port]` and agrees with the target's authority (RFC 9112,
    /// section 3.2): a server must refuse it.
    HttpHost,
    /// A WebSocket opening request whose target is not a resource name
    /// (RFC 6455, sections 3 and 4.1: a path with an optional query, or
    /// an absolute `http`, `https`, `ws` or `wss` URI holding one; no
    /// fragment), or whose Host is empty: a server must refuse it.
    WsTarget,
    /// A second WebSocket close: one was sent already, or the close
    /// handshake is over (the peer's close was answered, or the
    /// connection failed with a close of its own). One close per side.
    /// For a message or a part: the close was made, and no data frame may
    /// follow it (RFC 6455, section 5.5.1).
    WsClosed,
    /// A WebSocket data frame out of order (RFC 6455, section 5.4): a
    /// continuation with no message started, or a new message (or first
    /// part) while one sent in parts is unfinished.
    WsFragment,
}

impl Error {
    /// Who is responsible for this error.
    pub fn fault(&self) -> Fault {
        match self {
            Self::InvalidInput { .. } | Self::Truncated { .. } => Fault::Peer,
            Self::LimitExceeded { .. } | Self::TimedOut(_) => Fault::Limit,
            Self::Misuse(_) => Fault::Caller,
        }
    }

    /// The stream offset the error points at, when it has one.
    pub fn offset(&self) -> Option<u64> {
        match self {
            Self::InvalidInput { offset, .. }
            | Self::LimitExceeded { offset, .. }
            | Self::Truncated { offset, .. } => Some(*offset),
            Self::Misuse(_) | Self::TimedOut(_) => None,
        }
    }

    pub(crate) fn invalid_config(
        setting: &'static str,
        value: u64,
        expected: &'static str,
    ) -> Self {
        Self::Misuse(Misuse::InvalidConfig {
            setting,
            value,
            expected,
        })
    }

    /// This error with its offset moved by `by` bytes (from a window of the
    /// stream to the stream).
    pub(crate) fn shifted(self, by: u64) -> Self {
        match self {
            Self::InvalidInput { kind, offset } => Self::InvalidInput {
                kind,
                offset: offset + by,
            },
            Self::LimitExceeded {
                limit,
                max,
                attempted,
                offset,
            } => Self::LimitExceeded {
                limit,
                max,
                attempted,
                offset: offset + by,
            },
            Self::Truncated { partial, offset } => Self::Truncated {
                partial,
                offset: offset + by,
            },
            other => other,
        }
    }

    pub(crate) fn out_of_bounds(requested: usize, available: usize) -> Self {
        Self::Misuse(Misuse::OutOfBounds {
            requested,
            available,
        })
    }
}

impl From<Misuse> for Error {
    fn from(misuse: Misuse) -> Self {
        Self::Misuse(misuse)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidInput { kind, offset } => {
                write!(f, "peer sent invalid input at offset {offset}: {kind}")
            }
            Self::LimitExceeded {
                limit,
                max,
                attempted,
                offset,
            } => write!(
                f,
                "{limit} limit exceeded at offset {offset}: {attempted} bytes, limit {max} bytes"
            ),
            Self::Truncated { partial, offset } => write!(
                f,
                "stream ended inside a frame at offset {offset}: {} bytes of an incomplete frame",
                partial.len()
            ),
            Self::TimedOut(timeout) => write!(f, "connection closed: {timeout}"),
            Self::Misuse(misuse) => write!(f, "API misuse: {misuse}"),
        }
    }
}

impl fmt::Display for InvalidInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Utf8 => f.write_str("frame is not valid UTF-8"),
            Self::LengthOutOfRange {
                declared,
                adjustment,
            } => write!(
                f,
                "length field {declared} with adjustment {adjustment} is out of range"
            ),
            Self::Varint(VarintField::TooLong) => f.write_str("varint longer than 10 bytes"),
            Self::Varint(VarintField::Overflow) => {
                f.write_str("varint value does not fit in 64 bits")
            }
            Self::Varint(VarintField::NotMinimal) => f.write_str("varint is not minimally encoded"),
            Self::Tls(field) => write!(f, "malformed {field}"),
            Self::Http(field) => write!(f, "malformed {field}"),
            Self::Proxy(field) => write!(f, "malformed {field}"),
            Self::WebSocket(field) => write!(f, "malformed {field}"),
            Self::Checksum(mismatch) => write!(
                f,
                "{mismatch} (the frame's length was sound: a reader that skips it \
                 can go on with the next)"
            ),
            Self::Magic => f.write_str("frame does not start with its format's marker"),
            Self::Message => f.write_str("frame payload is not a valid message"),
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Buffer => "receive buffer",
            Self::LineLength => "line length",
            Self::FrameLength => "frame length",
            Self::SniffBudget => "sniffing budget",
            Self::HeadLength => "HTTP head size",
            Self::HeaderCount => "HTTP header count",
            Self::ChunkExtension => "HTTP chunk extension size",
            Self::TrailerLength => "HTTP trailer size",
            Self::BodyLength => "HTTP body size",
            Self::MessageLength => "message size",
            Self::RequestLine => "HTTP request line length",
        })
    }
}

impl fmt::Display for Misuse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OutOfBounds {
                requested,
                available,
            } => write!(
                f,
                "asked for {requested} bytes but only {available} are buffered"
            ),
            Self::CommitTooLarge { committed, spare } => write!(
                f,
                "committed {committed} bytes into a spare region of {spare} bytes"
            ),
            Self::AdvanceTooFar {
                advanced,
                presented,
            } => write!(
                f,
                "advanced {advanced} bytes but the last drain handed out {presented}"
            ),
            Self::Unencodable(why) => write!(f, "cannot encode: {why}"),
            Self::InvalidConfig {
                setting,
                value,
                expected,
            } => write!(f, "invalid {setting} {value}: expected {expected}"),
        }
    }
}

impl fmt::Display for Unencodable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLong { len, max } => write!(f, "{len} bytes, at most {max} fit"),
            Self::TooShort { len, min } => write!(f, "{len} bytes, at least {min} needed"),
            Self::ContainsDelimiter { offset } => {
                write!(f, "the line holds its delimiter at index {offset}")
            }
            Self::EndsWithCr => f.write_str("the line ends in \\r, which the decoder strips"),
            Self::NotUtf8 { valid_up_to } => {
                write!(f, "the line is not UTF-8 from index {valid_up_to}")
            }
            Self::HttpToken => f.write_str("an HTTP method, target or header name is malformed"),
            Self::HttpValue => f.write_str("an HTTP value holds CR, LF or another control byte"),
            Self::HttpFraming => f.write_str(
                "Content-Length or Transfer-Encoding given as a header: the body frames",
            ),
            Self::HttpBody => f.write_str("a body this HTTP message cannot carry"),
            Self::HttpStatus => f.write_str("an HTTP status outside 100 to 999"),
            Self::HttpHost => f.write_str(
                "an HTTP/1.1 request needs one Host, a host[:port] that agrees with the target",
            ),
            Self::WsTarget => f.write_str(
                "a WebSocket request needs a Host and a resource name: a path (and query), no fragment",
            ),
            Self::WsClosed => {
                f.write_str("a WebSocket close, or data, after the close was sent")
            }
            Self::WsFragment => f.write_str(
                "a WebSocket continuation with no message started, or a message inside one sent in parts",
            ),
        }
    }
}

impl core::error::Error for Error {}

#[cfg(feature = "std")]
impl From<Error> for std::io::Error {
    /// An `io::Error` of a kind that fits: `InvalidData` for the peer's
    /// bytes and limits, `UnexpectedEof` for a truncated frame, `TimedOut`
    /// for a timeout, `InvalidInput` for misuse.
    fn from(e: Error) -> Self {
        use std::io::ErrorKind;
        let kind = match e {
            Error::InvalidInput { .. } | Error::LimitExceeded { .. } => ErrorKind::InvalidData,
            Error::Truncated { .. } => ErrorKind::UnexpectedEof,
            Error::TimedOut(_) => ErrorKind::TimedOut,
            Error::Misuse(_) => ErrorKind::InvalidInput,
        };
        Self::new(kind, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_carries_the_numbers() {
        let e = Error::LimitExceeded {
            limit: Limit::LineLength,
            max: 10,
            attempted: 11,
            offset: 42,
        };
        assert_eq!(
            e.to_string(),
            "line length limit exceeded at offset 42: 11 bytes, limit 10 bytes"
        );
        assert_eq!(e.fault(), Fault::Limit);
        assert_eq!(e.offset(), Some(42));
    }

    #[test]
    fn faults_are_assigned() {
        let peer = Error::InvalidInput {
            kind: InvalidInput::Varint(VarintField::Overflow),
            offset: 3,
        };
        assert_eq!(peer.fault(), Fault::Peer);
        assert_eq!(
            peer.to_string(),
            "peer sent invalid input at offset 3: varint value does not fit in 64 bits"
        );
        let misuse = Error::out_of_bounds(5, 2);
        assert_eq!(misuse.fault(), Fault::Caller);
        assert_eq!(misuse.offset(), None);
        assert_eq!(
            misuse.to_string(),
            "API misuse: asked for 5 bytes but only 2 are buffered"
        );
    }
}
