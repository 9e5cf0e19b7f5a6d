//! [`Client`]: the protocol of a connection that sends requests and
//! receives responses.

use alloc::collections::VecDeque;

use bytes::Bytes;

use crate::conn::{Phase, Protocol, Wire};
use crate::error::{Error, HttpField};
use crate::http1::body::{next_piece, truncated, BodyState, Piece};
use crate::http1::config::Http1Config;
use crate::http1::encode;
use crate::http1::faults::Role;
use crate::http1::framing::elements;
use crate::http1::head::{Body, Headers, Request, Response};
use crate::http1::lines::Bad;
use crate::http1::parse::{parse_response, Asked, ResponseParts};
use crate::http1::reader::{stuck, HeadSearch};
use crate::recv_buf::RecvBuf;

/// What a [`Client`] reads from a connection, in order: for each request
/// sent, any [`Interim`](Self::Interim) responses, then the final
/// response's [`Head`](Self::Head), its body as [`Data`](Self::Data),
/// [`Trailers`](Self::Trailers) if chunked ones came, and its
/// [`End`](Self::End).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientEvent {
    /// A 1xx response other than 101 (`100 Continue`, `103 Early Hints`):
    /// the final response is still to come.
    Interim(Response),
    /// A final response head, its body's framing decided for the request
    /// it answers.
    Head(Response),
    /// Body bytes, as they arrived.
    Data(Bytes),
    /// A chunked body's trailer fields.
    Trailers(Headers),
    /// The response is complete. After one that closes the connection, a
    /// 101 or a 2xx to a CONNECT, nothing more is parsed (the bytes after
    /// it stay in the buffer for the next protocol).
    End,
}

/// HTTP/1.1, client side: requests out, responses in, each response
/// framed for the request it answers (no body after HEAD, a tunnel after
/// a 2xx to CONNECT). Requests are pipelined in the order they are
/// recorded: [`request`](Self::request) encodes one and records it; a
/// proxy that forwards request heads as they came records each with
/// [`expect_response`](Self::expect_response). A response with no request
/// waiting (a `408` before a close, or one sent twice) is framed as an
/// answer to a GET and is the connection's last: it is seen, and nothing
/// after it is parsed.
///
/// ```
/// use cleave_proto::http1::{Body, Client, ClientEvent};
/// use cleave_proto::Conn;
/// use std::time::Duration;
///
/// let mut conn = Conn::new(Client::new(), Duration::ZERO);
/// let head = conn.protocol_mut().request("HEAD", "/", &[("Host", b"example.com")], Body::Empty)?;
/// conn.push(head).expect("room");
/// conn.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 512\r\n\r\n", Duration::ZERO)?;
/// let Some(ClientEvent::Head(response)) = conn.poll_event()? else { panic!() };
/// assert_eq!(response.status(), 200);
/// assert_eq!(conn.poll_event()?, Some(ClientEvent::End)); // no body after HEAD
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Client {
    config: Http1Config,
    state: State,
    /// The requests sent whose responses have not come, oldest first.
    asked: VecDeque<Asked>,
    opened: bool,
    /// An interim response came and its final one has not.
    interim: bool,
    received: u64,
}

#[derive(Clone, Debug)]
enum State {
    Head { search: HeadSearch },
    Body { body: Option<BodyState>, last: bool },
    Done,
}

impl Default for Client {
    fn default() -> Self {
        Self::new()
    }
}

impl Client {
    /// A client with the default limits ([`Http1Config`]).
    #[must_use]
    pub fn new() -> Self {
        Self::with_config(Http1Config::default())
    }

    /// A client with the given limits and leniencies (a client talking to
    /// a broken server may allow bare LF line ends, say).
    #[must_use]
    pub fn with_config(config: Http1Config) -> Self {
        Self {
            config,
            state: fresh(),
            asked: VecDeque::new(),
            opened: false,
            interim: false,
            received: 0,
        }
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &Http1Config {
        &self.config
    }

    /// Records that a request with `method` went out: the responses are
    /// framed in this order (no body for HEAD, a tunnel after a 2xx to
    /// CONNECT). A 101 answering it is refused
    /// ([`HttpField::Switch`](crate::HttpField::Switch)): the request
    /// offered no upgrade; record one that did with
    /// [`expect_upgrade`](Self::expect_upgrade).
    pub fn expect_response(&mut self, method: &str) {
        self.asked.push_back(asked(method, false, false));
    }

    /// Records that a request with `method` and `Connection: close` went
    /// out: its response is the connection's last (RFC 9112, section
    /// 9.6), whether or not the server says so. The response's
    /// [`keep_alive`](Response::keep_alive) is false, and nothing is
    /// parsed after its [`End`](ClientEvent::End).
    pub fn expect_last_response(&mut self, method: &str) {
        self.asked.push_back(asked(method, false, true));
    }

    /// Records that `request` (a head read by a [`Server`](crate::http1::Server)
    /// or a [`Routed`](crate::http1::Routed) session) went out as it came,
    /// as a proxy forwards one: its method, whether it offered an upgrade,
    /// and whether it was the connection's last (`Connection: close`, or
    /// HTTP/1.0 without keep-alive) frame the response.
    pub fn expect_response_to(&mut self, request: &Request) {
        self.asked.push_back(asked(
            request.method(),
            request.is_upgrade(),
            !request.keep_alive(),
        ));
    }

    /// Records that a request offering a protocol upgrade went out
    /// (`Connection: upgrade` and `Upgrade`, a WebSocket handshake's): a
    /// 101 answering it ends the HTTP protocol ([`Response::switches`]);
    /// any other response is framed as for
    /// [`expect_response`](Self::expect_response).
    pub fn expect_upgrade(&mut self, method: &str) {
        self.asked.push_back(asked(method, true, false));
    }

    /// How many requests wait for their response. A server may close
    /// between responses (a keep-alive it ended): the stream then ends
    /// with no error, and this says how many requests it left unanswered
    /// (resend those that are safe to repeat). A close after an interim
    /// response is an [`Error::Truncated`] (with no bytes): that server
    /// had the request.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.asked.len()
    }

    /// Encodes a request head (see [`encode::request`](crate::http1::request))
    /// and records it: push the bytes on the connection's queue, then the
    /// body. A request whose `Connection` field says `close` is recorded
    /// as the connection's last
    /// ([`expect_last_response`](Self::expect_last_response)).
    ///
    /// # Errors
    ///
    /// As [`request`](crate::http1::request); nothing is recorded then.
    pub fn request(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &[u8])],
        body: Body,
    ) -> Result<Bytes, Error> {
        let head = encode::request(method, target, headers, body)?;
        let close = connection_says(headers, b"close");
        self.asked
            .push_back(asked(method, offers_upgrade(headers), close));
        Ok(head)
    }

    fn head(&mut self, recv: &mut RecvBuf, eof: bool) -> Result<Option<ClientEvent>, Error> {
        let State::Head { search } = &mut self.state else {
            return Ok(None);
        };
        if recv.is_empty() {
            if eof {
                // After an interim response the exchange is under way:
                // its end is a cut response (the server read the request),
                // not a close between responses.
                if self.interim {
                    return Err(truncated(recv));
                }
                self.state = State::Done;
            }
            return Ok(None);
        }
        let Some(len) = search.poll(
            recv.peek(),
            (recv.stream(), recv.offset()),
            Role::Response,
            &self.config,
        )?
        else {
            return if eof { Err(truncated(recv)) } else { Ok(None) };
        };
        let buf = recv.peek();
        // A response nobody asked for (a 408 before a close, say, or one
        // a confused server sent twice) is framed as one to a GET and as
        // the connection's last: it is seen, and nothing after it is
        // parsed, so no later response is taken for the answer to a
        // request sent after it (RFC 9112, section 9.3.2).
        let asked = self.asked.front().copied().unwrap_or(Asked {
            close: true,
            ..Asked::default()
        });
        let parts = match parse_response(&buf[..len], asked, &self.config) {
            Err(Bad::Field(HttpField::ObsFold, _))
                if self.config.get_allow_obs_fold_in_responses() =>
            {
                unfold(recv, len, asked, &self.config)
            }
            parsed => parsed,
        }
        .map_err(|bad| search.fault(recv.peek(), len, Role::Response, bad))?;
        let response = parts.into_response(recv.split_to(len)?);
        self.opened = true;
        self.interim = response.is_interim();
        if response.is_interim() {
            self.state = fresh();
            return Ok(Some(ClientEvent::Interim(response)));
        }
        self.asked.pop_front();
        self.state = State::Body {
            body: BodyState::new(parts.body),
            last: !response.keep_alive(),
        };
        self.received = 0;
        Ok(Some(ClientEvent::Head(response)))
    }
}

/// Reads the response head at the front of `recv` (`len` bytes) with its
/// folded field lines unfolded: each line end followed by a space or a
/// tab, past the first field line, becomes spaces where it lies (RFC
/// 9112, section 5.2). Unfolded in a copy first, so that a head refused
/// for another fault stays as it came; the copy is made only for a
/// folded head.
#[cold]
fn unfold(
    recv: &mut RecvBuf,
    len: usize,
    asked: Asked,
    config: &Http1Config,
) -> Result<ResponseParts, Bad> {
    let came = &recv.peek()[..len];
    let mut head = came.to_vec();
    // The status line's end is not a fold: whitespace before the first
    // field line is refused (section 2.2).
    let first = memchr::memchr(b'\n', came).map_or(len, |lf| lf + 1);
    for lf in memchr::memchr_iter(b'\n', came).filter(|&lf| lf >= first) {
        if matches!(came.get(lf + 1), Some(b' ' | b'\t')) {
            head[lf] = b' ';
            if head[lf - 1] == b'\r' {
                head[lf - 1] = b' ';
            }
        }
    }
    parse_response(&head, asked, config)?;
    recv.peek_mut()[..len].copy_from_slice(&head);
    parse_response(&recv.peek()[..len], asked, config)
}

/// What a client knows of a request with `method` that went out: whether
/// it offered an upgrade, and whether it said `Connection: close`.
fn asked(method: &str, upgrade: bool, close: bool) -> Asked {
    Asked {
        head: method == "HEAD",
        connect: method == "CONNECT",
        upgrade,
        close,
    }
}

/// Whether `headers` offer a protocol upgrade: an `Upgrade` field and an
/// `upgrade` token in `Connection` (RFC 9110, section 7.8).
fn offers_upgrade(headers: &[(&str, &[u8])]) -> bool {
    let upgrade = headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("upgrade"));
    upgrade && connection_says(headers, b"upgrade")
}

/// Whether a `Connection` field of `headers` holds `option`.
fn connection_says(headers: &[(&str, &[u8])], option: &[u8]) -> bool {
    headers.iter().any(|(name, value)| {
        name.eq_ignore_ascii_case("connection")
            && elements(value).any(|token| token.eq_ignore_ascii_case(option))
    })
}

fn fresh() -> State {
    State::Head {
        search: HeadSearch::default(),
    }
}

impl Protocol for Client {
    type Event = ClientEvent;

    fn poll_event(&mut self, wire: &mut Wire<'_>) -> Result<Option<ClientEvent>, Error> {
        let eof = wire.is_eof();
        let recv = wire.recv();
        let mut polled = match &mut self.state {
            State::Head { .. } => self.head(recv, eof),
            State::Body { body, last } => {
                let last = *last;
                next_piece(body, recv, eof, &self.config, &mut self.received).map(|piece| {
                    piece.map(|piece| match piece {
                        Piece::Data(data) => ClientEvent::Data(data),
                        Piece::Trailers(t) => ClientEvent::Trailers(t),
                        Piece::End => {
                            self.state = if last { State::Done } else { fresh() };
                            ClientEvent::End
                        }
                    })
                })
            }
            State::Done => Ok(None),
        };
        let done = matches!(self.state, State::Done);
        if matches!(polled, Ok(None)) && stuck(recv, eof, done) {
            polled = Err(recv.over_limit(recv.len() as u64 + 1));
        }
        if polled.is_err() {
            self.state = State::Done;
        }
        polled
    }

    /// Body data that is buffered, within a Content-Length or inside a
    /// chunk, taken in the caller's loop.
    #[inline(always)]
    fn poll_fast(&mut self, wire: &mut Wire<'_>) -> Option<ClientEvent> {
        match &mut self.state {
            State::Body {
                body: Some(body), ..
            } => body
                .data_now(wire.recv(), &mut self.received, &self.config)
                .map(ClientEvent::Data),
            _ => None,
        }
    }

    fn phase(&self) -> Phase {
        match self.state {
            State::Done => Phase::Done,
            _ if self.opened => Phase::Framing,
            _ => Phase::Opening,
        }
    }
}
