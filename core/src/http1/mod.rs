//! HTTP/1.1, both roles, on the connection model: a [`Server`] reads
//! requests and a [`Client`] reads responses, each a
//! [`Protocol`](crate::Protocol) driven by a [`Conn`](crate::Conn); the
//! encoders write heads, chunks and trailers.
//!
//! ```text
//!   bytes in ──> Conn<Server> ──> Head(Request) ─> Data(Bytes)* ─> Trailers? ─> End ─> Head ...
//!                                  │ a view of the buffer: method, target, headers as sent,
//!                                  │ the body's framing (RFC 9112 section 6.3) decided once
//!   answers <─── conn.push(response(..)) / chunk(data) / last_chunk(..)
//! ```
//!
//! # Strict, as a server must be
//!
//! Request smuggling lives in the places where two parsers can read one
//! message two ways. cleave refuses every one of them with a typed error
//! ([`InvalidInput::Http`] naming the
//! [`HttpField`], or a [`Limit`]), parses
//! nothing after it, and leaves the bytes from the bad message on in the
//! buffer. [`status_for`] gives the status a server should answer before
//! it closes.
//!
//! | refused | field |
//! |---|---|
//! | Transfer-Encoding with Content-Length | `BothFraming` |
//! | `chunked` not last (in a request) or twice, Transfer-Encoding in HTTP/1.0, an empty one | `TransferEncoding` |
//! | a coding other than `chunked` in a request (a 501) | `TransferCoding` |
//! | Content-Length `+5`, `0x5`, `5 5`, empty, past `u64`, differing or repeated | `ContentLength` |
//! | a chunk size with a sign, `0x`, a space, nothing, past `u64` | `ChunkSize` |
//! | an extension not `;name[=token or "quoted"]`, unterminated quotes, control bytes | `ChunkExtension` |
//! | chunk data not followed by exactly CRLF | `ChunkDataEnd` |
//! | a bare LF or a bare CR anywhere in a head, chunk line or trailers | `LineEnding` |
//! | a header line starting with whitespace (folding) | `ObsFold` |
//! | whitespace before the first header, or before a colon | `Whitespace` |
//! | a header name not a token; NUL or a control byte in a value | `HeaderName`, `HeaderValue` |
//! | a malformed request line; a version not 1.0 or 1.1 (a response's `HTTP/1.2` too, which RFC 9110 section 6.2 would read as 1.1: httparse knows no other minor version, and none exists) | `RequestLine`, `Version` |
//! | no Host in HTTP/1.1, two, a malformed one, one the target contradicts | `Host` |
//! | Content-Length, Transfer-Encoding, Host or Trailer as a trailer | `Trailer` |
//! | a CONNECT request with content (Transfer-Encoding, Content-Length other than 0) | `ConnectBody` |
//!
//! Where RFC 9112 lets a recipient choose, cleave chooses strict and
//! offers a switch in [`Http1Config`], meant for a client that talks to a
//! broken server: bare LF line ends
//! ([`allow_bare_lf`](Http1Config::allow_bare_lf)), whitespace after a
//! chunk size ([`allow_chunk_size_whitespace`](Http1Config::allow_chunk_size_whitespace)),
//! a Content-Length repeated with one value
//! ([`allow_equal_content_lengths`](Http1Config::allow_equal_content_lengths)).
//! Whitespace around `;` and `=` in chunk extensions, which the grammar
//! calls "bad whitespace" and senders must not send, is refused.
//!
//! A response is framed as RFC 9112 says a client must frame it where it
//! leaves no choice: one whose last transfer coding is not `chunked` runs
//! to the close (section 6.3, rule 4; the codings are the application's
//! to undo, as for one whose last coding is `chunked`), and one that no
//! request waits for is the connection's last (section 9.3.2).
//!
//! # Pipelining, 100-continue, upgrades
//!
//! Requests that arrive together are each framed by their own head, one
//! after the other; answer them in order. `Expect: 100-continue` changes
//! nothing in the framing: the application answers [`CONTINUE`] or a
//! final response. After `Connection: close` (or HTTP/1.0 without
//! keep-alive) nothing more is parsed. An upgrade request or a CONNECT
//! stops the parsing after its body: answer 101 (or 2xx) and
//! [`switch`](crate::Conn::switch) the connection, the bytes after the
//! request in place for the next protocol; or decline and
//! [`Server::resume`].

mod body;
pub(crate) mod chars;
mod chunk_lines;
mod client;
mod config;
mod encode;
mod faults;
pub(crate) mod framing;
mod head;
pub(crate) mod host;
mod lines;
pub(crate) mod parse;
pub(crate) mod reader;
mod routed;
mod server;
mod slice;

pub use client::{Client, ClientEvent};
pub use config::{Http1Config, MAX_HEADERS};
pub use encode::{chunk, last_chunk, request, request_into, response, response_into, CONTINUE};
pub use head::{Body, Header, HeaderIter, Headers, Request, Response, Version};
pub use routed::{PerRequest, Routed, RoutedEvent};
pub use server::{Server, ServerEvent};
pub use slice::{request_slice, response_slice, HeadSlice};

use crate::error::{Error, HttpField, InvalidInput, Limit, Timeout};

/// The status a server should answer an error with before it closes:
/// 400 for a malformed request, 501 for an unknown transfer coding, 505
/// for an unsupported version, 431 for a head over its limits, 413 for a
/// body over its limit, 408 when the request did not come in time (a
/// [`Server`] sends that one itself for a connection's first request
/// when nothing else is queued, before its clean close);
/// `None` for errors no status answers (the peer left, the caller's
/// misuse).
///
/// ```
/// use cleave_proto::http1::{status_for, Server};
/// use cleave_proto::Conn;
/// use std::time::Duration;
///
/// let mut conn = Conn::new(Server::new(), Duration::ZERO);
/// conn.feed(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", Duration::ZERO)?;
/// let e = conn.poll_event().unwrap_err();
/// assert_eq!(status_for(&e), Some(400));
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[must_use]
pub fn status_for(error: &Error) -> Option<u16> {
    match error {
        Error::InvalidInput {
            kind: InvalidInput::Http(field),
            ..
        } => Some(match field {
            HttpField::TransferCoding => 501,
            HttpField::Version => 505,
            _ => 400,
        }),
        Error::InvalidInput { .. } => Some(400),
        Error::LimitExceeded { limit, .. } => match limit {
            Limit::HeadLength | Limit::HeaderCount | Limit::LineLength => Some(431),
            Limit::RequestLine => Some(414),
            Limit::BodyLength => Some(413),
            Limit::ChunkExtension | Limit::TrailerLength => Some(400),
            _ => None,
        },
        Error::TimedOut(Timeout::Opening | Timeout::Frame) => Some(408),
        _ => None,
    }
}
