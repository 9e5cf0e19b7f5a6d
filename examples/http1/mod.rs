//! A tiny HTTP/1.1 application on cleave's [`http1`](cleave_proto::http1)
//! codec, shared by the `http1_server` (tokio), `http1_mio_server` (mio)
//! and `http1_client` examples and by the interoperability tests.
//!
//! | request | answer |
//! |---|---|
//! | `GET /` | 200, `hello\n` |
//! | `GET /chunked` | 200, three chunks (`one\n`, `two\n`, `three\n`) and an `X-Chunks: 3` trailer |
//! | `POST /echo` | 200, the request's body (Content-Length or chunked), at most [`MAX_BODY`] bytes |
//! | `GET /host` | 200, the request's Host and `\n` |
//! | `HEAD` of any of these | the same head, no body |
//! | anything else | 404 |
//!
//! [`App`] is the application without I/O: it takes one connection's
//! [`ServerEvent`]s in order and makes the frames to write, so answers
//! go out in the order of the requests however many arrive together
//! (pipelining). It sends [`CONTINUE`] when a request expects it, honours
//! `Connection: close` (and HTTP/1.0 without keep-alive), and answers a
//! request the codec refuses with the status [`status_for`] gives, then
//! closes. The drivers ([`serve_tokio`], [`MioServer`]) only move its
//! frames; [`fetch`] is the client side.
//!
//! A production server would also linger after its close (read and drop
//! what the client still sends for a while, so that the kernel does not
//! answer those bytes with a reset); these examples close at once.

use std::time::Duration;

use cleave_proto::http1::{
    chunk, last_chunk, response, response_into, status_for, Body, Http1Config, Request, Server,
    ServerEvent, Version, CONTINUE,
};
use cleave_proto::{Bytes, BytesMut, ConnConfig, Error, Frame, Timeouts};

/// The error of the client and of the drivers' setup.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The largest request body the server takes (1 MiB): `POST /echo` holds
/// the whole body before it answers, so the codec refuses more (a 413).
pub const MAX_BODY: u64 = 1 << 20;

/// The chunks of `GET /chunked`.
pub const CHUNKS: [&str; 3] = ["one\n", "two\n", "three\n"];

/// The room the answers' heads are written into, reserved at a time: many
/// heads share one block, which is reused once the queue copied them.
const HEAD_ROOM: usize = 4096;

/// How long a connection may stay silent between requests.
const IDLE: Duration = Duration::from_secs(60);

/// How long a head (or a chunk-size line) may take to arrive once it
/// started. A body is handed out as it comes, and each piece starts the
/// time again: a body that keeps coming, however slowly, is not cut here
/// (a floor on the rate, against a client that trickles its body, is the
/// application's to set).
const FRAME: Duration = Duration::from_secs(30);

/// The server's codec: default limits, and [`MAX_BODY`] for bodies.
#[must_use]
pub fn server() -> Server {
    Server::with_config(Http1Config::default().max_body(Some(MAX_BODY)))
}

/// The servers' connection settings: a client silent for a minute, or
/// half a minute into a head it does not finish, is let go (a 408 if it
/// is the connection's first request). A body is handed out as it comes,
/// each piece starting that time again: one that keeps coming, however
/// slowly, is not cut (a floor on the rate is the application's to set).
/// A kept-alive connection keeps its buffers between requests, and gives
/// them back once quiet for a second (`RELEASE_AFTER`).
#[must_use]
pub fn conn_config() -> ConnConfig {
    let timeouts = Timeouts::default().idle(Some(IDLE)).frame(Some(FRAME));
    ConnConfig::default()
        .timeouts(timeouts)
        .release_after(RELEASE_AFTER)
}

/// How long a connection stays quiet before its read block and write
/// buffer go back: a client that sends its next request sooner (a busy
/// keep-alive client) costs no allocation per request, and an idle
/// connection holds no buffer after a second. Given back at each wait
/// instead, they cost about 0.25 µs a request under `wrk` (a 16 KiB and an
/// 8 KiB allocation, and the read block zeroed).
const RELEASE_AFTER: Duration = Duration::from_secs(1);

/// What a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Hello,
    Chunked,
    Echo,
    Host,
    NotFound,
}

impl Route {
    /// The route of `method` on `target` (its query ignored).
    fn of(method: &str, target: &str) -> Self {
        let path = target.split_once('?').map_or(target, |(path, _)| path);
        match (method, path) {
            ("GET" | "HEAD", "/") => Self::Hello,
            ("GET" | "HEAD", "/chunked") => Self::Chunked,
            ("GET" | "HEAD", "/host") => Self::Host,
            ("POST", "/echo") => Self::Echo,
            _ => Self::NotFound,
        }
    }
}

/// The request being read: what its answer needs.
#[derive(Debug)]
struct Exchange {
    route: Route,
    /// The request asked to switch protocols (an Upgrade, a CONNECT).
    switch: bool,
    /// A HEAD: the answer's head only.
    head_only: bool,
    version: Version,
    keep_alive: bool,
    host: String,
    /// The body so far, for `POST /echo` only (the codec bounds it).
    body: BytesMut,
}

impl Exchange {
    fn new(request: &Request) -> Self {
        Self {
            route: Route::of(request.method(), request.target()),
            switch: request.is_upgrade() || request.is_connect(),
            head_only: request.method() == "HEAD",
            version: request.version(),
            keep_alive: request.keep_alive(),
            host: request.host().unwrap_or_default().to_owned(),
            body: BytesMut::new(),
        }
    }

    /// The `Connection` field the answer carries: `close` when the
    /// connection ends after it, `keep-alive` to an HTTP/1.0 client that
    /// asked for it (whose default is to close), none otherwise.
    fn connection_field(&self) -> Option<(&'static str, &'static [u8])> {
        if !self.keep_alive {
            Some(("Connection", b"close"))
        } else if self.version == Version::Http10 {
            Some(("Connection", b"keep-alive"))
        } else {
            None
        }
    }

    /// The answer's frames, in order; its head written into `heads`.
    fn answer(self, heads: &mut BytesMut, out: &mut Vec<Frame>) -> Result<(), Error> {
        if self.route == Route::Chunked && self.version == Version::Http11 {
            return self.chunked(heads, out);
        }
        let connection = self.connection_field();
        let (status, reason, content_type, body) = match self.route {
            Route::Hello => (200, "OK", "text/plain", Bytes::from_static(b"hello\n")),
            // HTTP/1.0 has no chunks: the same body, with its length.
            Route::Chunked => (200, "OK", "text/plain", Bytes::from(CHUNKS.concat())),
            Route::Echo => (200, "OK", "application/octet-stream", self.body.freeze()),
            Route::Host => (
                200,
                "OK",
                "text/plain",
                Bytes::from(format!("{}\n", self.host)),
            ),
            Route::NotFound => (
                404,
                "Not Found",
                "text/plain",
                Bytes::from_static(b"not found\n"),
            ),
        };
        let content_type = ("Content-Type", content_type.as_bytes());
        let both;
        let fields: &[(&str, &[u8])] = match connection {
            Some(connection) => {
                both = [content_type, connection];
                &both
            }
            None => core::slice::from_ref(&content_type),
        };
        let length = Body::Length(u64::try_from(body.len()).unwrap_or(u64::MAX));
        heads.reserve(HEAD_ROOM);
        response_into(heads, status, reason, fields, length)?;
        out.push(heads.split().freeze().into());
        if !self.head_only && !body.is_empty() {
            out.push(body.into());
        }
        Ok(())
    }

    /// `GET /chunked`: the head, each chunk as a frame whose payload is not
    /// copied, then the last chunk with the trailer the head announced.
    fn chunked(self, heads: &mut BytesMut, out: &mut Vec<Frame>) -> Result<(), Error> {
        let mut fields = vec![
            ("Content-Type", &b"text/plain"[..]),
            ("Trailer", b"X-Chunks"),
        ];
        fields.extend(self.connection_field());
        heads.reserve(HEAD_ROOM);
        response_into(heads, 200, "OK", &fields, Body::Chunked)?;
        out.push(heads.split().freeze().into());
        if self.head_only {
            return Ok(());
        }
        for text in CHUNKS {
            out.push(chunk(Bytes::from_static(text.as_bytes()))?);
        }
        let count = CHUNKS.len().to_string();
        out.push(last_chunk(&[("X-Chunks", count.as_bytes())])?.into());
        Ok(())
    }
}

/// One connection's application, without I/O: feed it the connection's
/// events in order ([`on_event`](Self::on_event)) and its final error
/// ([`on_error`](Self::on_error)), write the frames it makes in the order
/// it makes them, and close once it [`wants_close`](Self::wants_close).
///
/// ```
/// use std::time::Duration;
/// use cleave_examples::http1::{server, App};
/// use cleave_proto::Conn;
///
/// let mut conn = Conn::new(server(), Duration::ZERO);
/// conn.feed(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /nope HTTP/1.1\r\nHost: a\r\n\r\n", Duration::ZERO)?;
/// let (mut app, mut out) = (App::new(), Vec::new());
/// while let Some(event) = conn.poll_event()? {
///     app.on_event(event, &mut out)?;
/// }
/// let wire: Vec<u8> = out.iter().flat_map(|frame| frame.to_bytes()).collect();
/// assert_eq!(
///     String::from_utf8_lossy(&wire),
///     "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nhello\n\
///      HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\nnot found\n"
/// );
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct App {
    current: Option<Exchange>,
    /// The connection ends once what was made is written.
    closing: bool,
    /// Where the answers' heads are written (`response_into`), split off
    /// as each is made: once the queue has copied the heads before, its
    /// room is reused, so an answer's head allocates nothing.
    heads: BytesMut,
    /// A request that asked to switch (an Upgrade, a CONNECT) was answered
    /// as any other: the codec, which stopped after it, is to
    /// [`resume`](cleave_proto::http1::Server::resume).
    declined: bool,
}

impl App {
    /// An application for a new connection.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the connection's next event; appends to `out` what to write.
    /// A request is answered at its end (its body read), so the answers
    /// follow the requests' order; only `100 Continue` goes out at the
    /// head, for a client that waits for it before it sends the body.
    ///
    /// # Errors
    ///
    /// An answer the encoders refuse (none of this application's can be).
    pub fn on_event(&mut self, event: ServerEvent, out: &mut Vec<Frame>) -> Result<(), Error> {
        match event {
            ServerEvent::Head(request) => {
                if request.expects_continue() && request.body() != Body::Empty {
                    out.push(Bytes::from_static(CONTINUE).into());
                }
                self.current = Some(Exchange::new(&request));
            }
            ServerEvent::Data(data) => {
                if let Some(exchange) = self.current.as_mut() {
                    if exchange.route == Route::Echo {
                        exchange.body.extend_from_slice(&data);
                    }
                }
            }
            ServerEvent::Trailers(_) => {}
            ServerEvent::End => {
                if let Some(exchange) = self.current.take() {
                    self.closing |= !exchange.keep_alive;
                    self.declined |= exchange.switch;
                    exchange.answer(&mut self.heads, out)?;
                }
            }
        }
        Ok(())
    }

    /// Takes the connection's final error: a request the codec refused
    /// (malformed, ambiguous, over a limit) gets the status
    /// [`status_for`] gives, with `Connection: close`; other errors (the
    /// peer left mid-request) get nothing. A timeout gets nothing from
    /// here either: the connection's queue is closed by then, and the
    /// codec chose its last word (a 408, or a reset). Either way the
    /// connection closes.
    pub fn on_error(&mut self, error: &Error, out: &mut Vec<Frame>) {
        self.current = None;
        self.closing = true;
        if matches!(error, Error::TimedOut(_)) {
            return;
        }
        let Some(status) = status_for(error) else {
            return;
        };
        let reason = reason(status);
        let body = Bytes::from(format!("{status} {reason}\n"));
        let length = Body::Length(u64::try_from(body.len()).unwrap_or(u64::MAX));
        let fields: [(&str, &[u8]); 2] =
            [("Content-Type", b"text/plain"), ("Connection", b"close")];
        if let Ok(head) = response(status, reason, &fields, length) {
            out.push(head.into());
            out.push(body.into());
        }
    }

    /// Whether the connection ends once what was made is written: a
    /// request said `Connection: close` (or was HTTP/1.0 without
    /// keep-alive), or the connection failed.
    #[must_use]
    pub fn wants_close(&self) -> bool {
        self.closing
    }

    /// Whether a request that asked to switch protocols (`Upgrade: h2c`
    /// from `curl --http2`, a CONNECT) was answered without switching,
    /// once: the driver then calls
    /// [`Server::resume`](cleave_proto::http1::Server::resume), and the
    /// requests behind it are read (RFC 9110, section 7.8: a server may
    /// ignore an Upgrade).
    pub fn take_declined(&mut self) -> bool {
        std::mem::take(&mut self.declined)
    }
}

/// The reason phrase of the statuses this application answers.
pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        408 => "Request Timeout",
        413 => "Content Too Large",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

mod client;
mod on_mio;
mod on_tokio;

pub use client::{fetch, Answer, Ask};
pub use on_mio::{MioServer, MioStop};
pub use on_tokio::{serve_tokio, serve_tokio_connection};

#[cfg(test)]
mod tests {
    use cleave_proto::http1::status_for;
    use cleave_proto::{Error, HttpField, InvalidInput, Limit, Timeout};

    use super::reason;

    /// Every status the codec asks a server to answer with has its own
    /// reason phrase here (a 414 went out as `414 Error`).
    #[test]
    fn every_status_the_codec_gives_has_its_reason() {
        let limit = |limit| Error::LimitExceeded {
            limit,
            max: 1,
            attempted: 2,
            offset: 0,
        };
        let field = |field| Error::InvalidInput {
            kind: InvalidInput::Http(field),
            offset: 0,
        };
        let errors = [
            field(HttpField::TransferCoding),
            field(HttpField::Version),
            field(HttpField::Host),
            limit(Limit::HeadLength),
            limit(Limit::HeaderCount),
            limit(Limit::LineLength),
            limit(Limit::RequestLine),
            limit(Limit::BodyLength),
            limit(Limit::ChunkExtension),
            limit(Limit::TrailerLength),
            Error::TimedOut(Timeout::Opening),
            Error::TimedOut(Timeout::Frame),
        ];
        let mut statuses: Vec<u16> = errors.iter().filter_map(status_for).collect();
        statuses.sort_unstable();
        statuses.dedup();
        assert_eq!(statuses, [400, 408, 413, 414, 431, 501, 505]);
        for status in statuses {
            assert_ne!(reason(status), "Error", "{status}");
        }
    }
}
