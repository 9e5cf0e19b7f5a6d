//! [`Server`]: the protocol of a connection that receives requests.

use bytes::Bytes;

use crate::conn::{Close, Phase, Protocol, Wire};
use crate::error::{Error, Timeout};
use crate::http1::body::{next_piece, truncated, BodyState, Piece};
use crate::http1::config::Http1Config;
use crate::http1::faults::Role;
use crate::http1::head::{Flags, Headers, Request};
use crate::http1::parse::{parse_request, RequestParts};
use crate::http1::reader::{skip_empty_lines, stuck, HeadSearch};
use crate::recv_buf::RecvBuf;

/// What a [`Server`] reads from a connection, in order: for each request
/// its [`Head`](Self::Head), its body as [`Data`](Self::Data) (views of
/// the receive buffer), its [`Trailers`](Self::Trailers) if chunked ones
/// came, and its [`End`](Self::End).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerEvent {
    /// A request head, with its body's framing decided.
    Head(Request),
    /// Body bytes, as they arrived (never copied, never a whole chunk
    /// held back).
    Data(Bytes),
    /// A chunked body's trailer fields.
    Trailers(Headers),
    /// The request is complete. After a request that closes the
    /// connection (`Connection: close`, HTTP/1.0 without keep-alive), an
    /// upgrade or a CONNECT, nothing more is parsed.
    End,
}

/// HTTP/1.1, server side: requests in, with their bodies framed strictly
/// (RFC 9112), one after the other (pipelined requests each framed by
/// their own head). The responses are the application's, pushed on the
/// connection's queue in the order of the requests (see
/// [`response`](crate::http1::response)).
///
/// Timeouts ([`Timeouts`](crate::Timeouts)): the frame timeout runs while
/// a head is incomplete, and a connection's first head that does not
/// come in time is answered 408 when nothing else is queued (a later
/// one ends the connection with a reset: the application may not have
/// answered the requests before it yet). Body bytes come out as they
/// arrive, so a body's pace is the idle timeout's: a body trickled slower
/// than it ends the connection with a reset.
///
/// Strict as a server must be: a request that could be read two ways (a
/// smuggling vector) ends the connection with a typed error (see
/// [`status_for`](crate::http1::status_for) for the status to answer), the
/// bytes from the bad request on stay in the buffer, and nothing after it
/// is parsed.
///
/// ```
/// use cleave_proto::http1::{Body, Server, ServerEvent};
/// use cleave_proto::Conn;
/// use std::time::Duration;
///
/// let mut conn = Conn::new(Server::new(), Duration::ZERO);
/// conn.feed(
///     b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: x\r\n\r\n",
///     Duration::ZERO,
/// )?;
/// let Some(ServerEvent::Head(post)) = conn.poll_event()? else { panic!() };
/// assert_eq!((post.method(), post.target(), post.body()), ("POST", "/a", Body::Length(5)));
/// assert_eq!(conn.poll_event()?, Some(ServerEvent::Data("hello".into())));
/// assert_eq!(conn.poll_event()?, Some(ServerEvent::End));
/// let Some(ServerEvent::Head(get)) = conn.poll_event()? else { panic!() };
/// assert_eq!(get.target(), "/b");
/// assert_eq!(conn.poll_event()?, Some(ServerEvent::End));
/// assert_eq!(conn.poll_event()?, None);
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Server {
    config: Http1Config,
    state: State,
    /// A request head came: the connection is past its opening.
    opened: bool,
    /// Body bytes of the current request, against the limit.
    received: u64,
}

#[derive(Clone, Debug)]
enum State {
    /// Reading a head: the search so far, the bytes judged early, and
    /// where in the stream the head starts.
    Head {
        search: HeadSearch,
        /// Bytes of empty lines taken before this head.
        blank: usize,
    },
    /// Reading a body (`None`: none); `last` says whether parsing stops
    /// after it.
    Body { body: Option<BodyState>, last: Last },
    /// Nothing more is parsed.
    Done(Last),
}

/// Why parsing stops after a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Last {
    /// It does not: keep-alive.
    No,
    /// The connection closes after it (or the stream ended, or failed).
    Close,
    /// It asked to switch protocols (an upgrade, a CONNECT): the
    /// application decides. `keep_alive`: whether the request keeps the
    /// connection open, should the switch be declined.
    Switch { keep_alive: bool },
}

impl Default for Server {
    fn default() -> Self {
        Self::new()
    }
}

impl Server {
    /// A server with the default limits ([`Http1Config`]).
    #[must_use]
    pub fn new() -> Self {
        Self::with_config(Http1Config::default())
    }

    /// A server with the given limits and leniencies.
    #[must_use]
    pub fn with_config(config: Http1Config) -> Self {
        Self {
            config,
            state: fresh(),
            opened: false,
            received: 0,
        }
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &Http1Config {
        &self.config
    }

    /// Whether parsing stopped after a request that asked to switch
    /// protocols (an upgrade, or a CONNECT): answer 101 (or 2xx) and
    /// [`switch`](crate::Conn::switch) the connection to the next
    /// protocol, with the bytes after the request in place; or decline
    /// with a final response and [`resume`](Self::resume).
    #[must_use]
    pub fn is_switch_pending(&self) -> bool {
        matches!(self.state, State::Done(Last::Switch { .. }))
    }

    /// Parses requests again after a declined upgrade or CONNECT, unless
    /// that request closes the connection (`Connection: close`, HTTP/1.0
    /// without keep-alive): then nothing more is parsed (RFC 9112,
    /// section 9.6). Does nothing otherwise.
    pub fn resume(&mut self) {
        if let State::Done(Last::Switch { keep_alive }) = self.state {
            self.state = if keep_alive {
                fresh()
            } else {
                State::Done(Last::Close)
            };
        }
    }

    /// The next head, as a `Head` event built where it is returned (a
    /// head's parts moved right after they were written wait on their
    /// stores), or what stopped it, settled.
    #[inline(always)]
    fn head(&mut self, recv: &mut RecvBuf, eof: bool) -> Result<Option<ServerEvent>, Error> {
        let (parts, head) = match self.find_head(recv, eof) {
            Ok(Some(found)) => found,
            other => return self.settle(recv, eof, other.map(|_| None)),
        };
        let flags = parts.flags;
        let last = if flags.has(Flags::UPGRADE) || flags.has(Flags::CONNECT) {
            Last::Switch {
                keep_alive: flags.has(Flags::KEEP_ALIVE),
            }
        } else if flags.has(Flags::KEEP_ALIVE) {
            Last::No
        } else {
            Last::Close
        };
        self.state = State::Body {
            body: BodyState::new(parts.body),
            last,
        };
        self.opened = true;
        self.received = 0;
        Ok(Some(ServerEvent::Head(parts.into_request(head))))
    }

    /// The next whole head, parsed and split off the buffer.
    #[inline]
    fn find_head(
        &mut self,
        recv: &mut RecvBuf,
        eof: bool,
    ) -> Result<Option<(RequestParts, Bytes)>, Error> {
        let State::Head { search, blank } = &mut self.state else {
            return Ok(None);
        };
        skip_empty_lines(recv, &self.config, blank)?;
        // A CR alone may be the start of an empty line to skip: its LF
        // decides, whatever the head's limits (as when both came at once).
        if recv.peek() == b"\r" && !eof {
            return Ok(None);
        }
        if recv.is_empty() {
            if eof {
                self.state = State::Done(Last::Close);
            }
            return Ok(None);
        }
        let at = (recv.stream(), recv.offset());
        let (len, parts) = match search.request_at_once(recv.peek(), at, &self.config) {
            Some(whole) => whole,
            None => {
                let Some(len) = search.poll(recv.peek(), at, Role::Request, &self.config)? else {
                    return if eof { Err(truncated(recv)) } else { Ok(None) };
                };
                let buf = recv.peek();
                parse_request(&buf[..len], &self.config)
                    .map_err(|bad| search.fault(buf, len, Role::Request, bad))?
            }
        };
        Ok(Some((parts, recv.split_to(len)?)))
    }

    /// What a poll that gave no event leaves: a full buffer that cannot
    /// make progress is an error, and after an error nothing more is
    /// parsed.
    #[inline(always)]
    fn settle(
        &mut self,
        recv: &RecvBuf,
        eof: bool,
        mut polled: Result<Option<ServerEvent>, Error>,
    ) -> Result<Option<ServerEvent>, Error> {
        let done = matches!(self.state, State::Done(_));
        if matches!(polled, Ok(None)) && stuck(recv, eof, done) {
            polled = Err(recv.over_limit(recv.len() as u64 + 1));
        }
        if polled.is_err() {
            self.state = State::Done(Last::Close);
        }
        polled
    }
}

/// What a server answers a head that did not come in time.
const REQUEST_TIMEOUT: &[u8] =
    b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";

/// The state before a head.
fn fresh() -> State {
    State::Head {
        search: HeadSearch::default(),
        blank: 0,
    }
}

impl Protocol for Server {
    type Event = ServerEvent;

    #[inline(always)]
    fn poll_event(&mut self, wire: &mut Wire<'_>) -> Result<Option<ServerEvent>, Error> {
        let eof = wire.is_eof();
        let recv = wire.recv();
        let polled = match &mut self.state {
            State::Head { .. } => return self.head(recv, eof),
            State::Body { body, last } => {
                let last = *last;
                next_piece(body, recv, eof, &self.config, &mut self.received).map(|piece| {
                    piece.map(|piece| match piece {
                        Piece::Data(data) => ServerEvent::Data(data),
                        Piece::Trailers(t) => ServerEvent::Trailers(t),
                        Piece::End => {
                            self.state = match last {
                                Last::No => fresh(),
                                last => State::Done(last),
                            };
                            ServerEvent::End
                        }
                    })
                })
            }
            State::Done(_) => Ok(None),
        };
        self.settle(recv, eof, polled)
    }

    /// Body data that is buffered, within a Content-Length or inside a
    /// chunk, and the end of a request whose body is read (or that has
    /// none) when the connection stays open: a few stores, in the
    /// caller's loop (the head's parse stays out of line: inlined into a
    /// caller's loop it made it slower).
    #[inline(always)]
    fn poll_fast(&mut self, wire: &mut Wire<'_>) -> Option<ServerEvent> {
        match &mut self.state {
            State::Body {
                body: None | Some(BodyState::Length(0) | BodyState::Ended),
                last: Last::No,
            } => {
                self.state = fresh();
                Some(ServerEvent::End)
            }
            State::Body {
                body: Some(body), ..
            } => body
                .data_now(wire.recv(), &mut self.received, &self.config)
                .map(ServerEvent::Data),
            _ => None,
        }
    }

    /// Between requests, or inside a body that still wants bytes: with
    /// nothing buffered and the stream open, a poll waits and changes
    /// nothing. A body that is over (its end is next) is not waiting.
    #[inline(always)]
    fn waits_when_empty(&self) -> bool {
        match &self.state {
            State::Head { .. } => true,
            State::Body {
                body: Some(body), ..
            } => body.wants_bytes(),
            State::Body { body: None, .. } | State::Done(_) => false,
        }
    }

    /// The connection's first request head, when it did not come whole in
    /// time, is answered with 408 (and the connection closed cleanly)
    /// unless something is queued: a 408 must not be taken for the answer
    /// to another request. So a head cut short after earlier requests (the
    /// application may not have answered them all: an empty queue does not
    /// say), a body cut short, or a 408 that would follow queued bytes, end
    /// the connection with a reset instead: the client cannot take the
    /// silence for a complete exchange.
    fn on_timeout(&mut self, wire: &mut Wire<'_>, timeout: Timeout) -> Close {
        let head_started = matches!(self.state, State::Head { .. }) && !wire.recv().is_empty();
        let idle = matches!(self.state, State::Head { .. }) && wire.recv().is_empty();
        if idle {
            return Close::Clean;
        }
        let in_time = matches!(timeout, Timeout::Opening | Timeout::Frame | Timeout::Idle);
        if head_started
            && in_time
            && !self.opened
            && wire.queued() == 0
            && wire.reply(Bytes::from_static(REQUEST_TIMEOUT)).is_ok()
        {
            return Close::Clean;
        }
        Close::Reset
    }

    fn phase(&self) -> Phase {
        match self.state {
            State::Done(_) => Phase::Done,
            _ if self.opened => Phase::Framing,
            _ => Phase::Opening,
        }
    }
}
