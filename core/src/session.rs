//! [`Session`]: one connection's state machine, from its first byte to a
//! tunnel or its end.

use alloc::boxed::Box;
use bytes::Bytes;
use core::time::Duration;

use crate::decoder::Decoder;
use crate::error::{Error, Field, InvalidInput};
use crate::recv_buf::{RecvBuf, RecvBufConfig};
use crate::route::{Decision, RouteState, Router};
use crate::sniff::proxy::{self, ProxyHeader};
use crate::sniff::Sniff;

/// Whether a connection starts with a PROXY protocol header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProxyMode {
    /// Never: the first bytes are the client's.
    Off,
    /// Maybe: a header is taken when there is one.
    Optional,
    /// Always (behind a load balancer): anything else is an error.
    Required,
}

/// Configuration of a [`Session`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionConfig {
    proxy: ProxyMode,
    proxy_max: usize,
    recv: RecvBufConfig,
}

impl Default for SessionConfig {
    /// No PROXY header, the default receive buffer.
    fn default() -> Self {
        Self {
            proxy: ProxyMode::Off,
            proxy_max: proxy::DEFAULT_MAX_HEADER,
            recv: RecvBufConfig::default(),
        }
    }
}

impl SessionConfig {
    /// Whether a PROXY header comes first. Default [`ProxyMode::Off`].
    #[must_use]
    pub fn proxy(mut self, mode: ProxyMode) -> Self {
        self.proxy = mode;
        self
    }

    /// The longest PROXY header read. Default
    /// [`proxy::DEFAULT_MAX_HEADER`].
    ///
    /// # Errors
    ///
    /// [`Misuse::InvalidConfig`](crate::Misuse::InvalidConfig) below 16
    /// bytes (a v2 header's fixed part), which no header fits.
    pub fn proxy_max(mut self, bytes: usize) -> Result<Self, Error> {
        if bytes < 16 {
            return Err(Error::invalid_config(
                "proxy_max",
                bytes as u64,
                "at least 16",
            ));
        }
        self.proxy_max = bytes;
        Ok(self)
    }

    /// The receive buffer's configuration.
    #[must_use]
    pub fn recv_buf(mut self, config: RecvBufConfig) -> Self {
        self.recv = config;
        self
    }
}

/// What a [`Session`] tells its driver, in order.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event<T, F> {
    /// A PROXY header was read and taken off the stream (`len` bytes).
    Proxy {
        /// What it said.
        header: ProxyHeader,
        /// Its length.
        len: usize,
    },
    /// The connection was routed. The sniffed bytes are the first frame's
    /// or the tunnel's, but for the decision's
    /// [`consume`](Decision::consume) bytes, taken off the stream.
    Routed(Decision<T>),
    /// A frame, in framed mode.
    Frame(F),
    /// Raw bytes for the tunnel: first the tail already read when the
    /// session switched to raw mode (as one `Bytes`, not copied, possibly
    /// empty), then whatever is fed after.
    Tunnel(Bytes),
    /// The stream ended; the bytes of anything incomplete (a PROXY header,
    /// a frame) come back here. The last event.
    Closed(Bytes),
}

/// A decoder for sessions that only route and tunnel: it has no values, so
/// it is never called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoFrames {}

impl Decoder for NoFrames {
    type Item = Bytes;

    fn decode(&mut self, _: &mut RecvBuf) -> Result<Option<Bytes>, Error> {
        match *self {}
    }

    fn decode_eof(&mut self, _: &mut RecvBuf) -> Result<Option<Bytes>, Error> {
        match *self {}
    }
}

/// A decoder and the test that ends framed mode.
type Framing<D> = (D, fn(&<D as Decoder>::Item) -> bool);

#[derive(Clone, Debug)]
enum State {
    Proxy,
    Sniff,
    Framed,
    /// In raw mode; whether the hand-off event was given.
    Tunnel {
        announced: bool,
    },
    Closed,
    Failed(Error),
}

/// One connection's state machine: an optional PROXY header, sniffing and
/// routing, then frames of a decoder until a switch, then a raw tunnel; or
/// the end of the stream. It does no I/O and reads no clock.
///
/// # How to drive it
///
/// Methods come in three kinds, quinn-proto style:
///
/// - handlers take input: [`feed`](Self::feed) (or read into
///   [`recv_buf`](Self::recv_buf)), and [`handle_eof`](Self::handle_eof)
///   when the peer is done sending;
/// - [`poll_event`](Self::poll_event) gives output: call it after every
///   handler, until it returns `Ok(None)`;
/// - [`deadline`](Self::deadline) says when to call `poll_event` again
///   even if nothing arrives (the router's inspect delay): arm a timer.
///
/// ```text
///   feed / read ──> poll_event(now) until None ──> wait for bytes or deadline()
///
///   events, in order:  [Proxy] Routed (Frame* [Tunnel+]) | Tunnel+  [Closed]
/// ```
///
/// Errors are final: `poll_event` returns the same error from then on, and
/// `recv_buf().take_tail()` hands back the bytes not consumed.
///
/// ```
/// use cleave_proto::route::{HostPattern, Match, Router};
/// use cleave_proto::{Event, Lines, Session, SessionConfig};
/// use core::time::Duration;
///
/// let router = Router::new("other").rule(Match::Prefix("HELLO ".into()), "lines");
/// // Lines until a line says TUNNEL, then raw bytes.
/// let mut session = Session::framed(router, Lines::new(), |line| &line[..] == b"TUNNEL", SessionConfig::default());
/// let mut events = Vec::new();
/// for piece in [&b"HELLO th"[..], b"ere\nTUN", b"NEL\nraw\x00bytes"] {
///     session.feed(piece)?;
///     while let Some(event) = session.poll_event(Duration::ZERO)? {
///         events.push(event);
///     }
/// }
/// assert!(matches!(&events[0], Event::Routed(d) if d.target == "lines"));
/// assert_eq!(events[1], Event::Frame("HELLO there".into()));
/// assert_eq!(events[2], Event::Frame("TUNNEL".into()));
/// assert_eq!(events[3], Event::Tunnel("raw\x00bytes".into()));
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Debug)]
pub struct Session<T, D: Decoder = NoFrames> {
    buf: RecvBuf,
    state: State,
    router: Router<T>,
    framing: Option<Framing<D>>,
    /// What the PROXY sniffer and the router remember between looks, while
    /// the session reads the first bytes; boxed, and dropped once routed.
    sniffing: Option<Box<Sniffing>>,
    /// Bytes the sniffers looked at (see [`Session::examined`]).
    examined: u64,
    started: Option<Duration>,
    eof: bool,
    /// The PROXY settings (the receive buffer keeps its own).
    proxy: ProxyMode,
    proxy_max: usize,
}

/// The sniffers' progress over a session's first bytes.
#[derive(Debug, Default)]
struct Sniffing {
    proxy: proxy::Sniffer,
    route: RouteState,
}

impl Sniffing {
    fn examined(&self) -> u64 {
        self.proxy.examined() + self.route.examined()
    }
}

impl<T: Clone> Session<T> {
    /// A session that routes, then tunnels everything (the sniffed bytes
    /// included) to the chosen target.
    pub fn tunnel(router: Router<T>, config: SessionConfig) -> Self {
        Self::make(router, None, config)
    }
}

impl<T: Clone, D: Decoder> Session<T, D> {
    /// A session that routes, then cuts frames with `decoder` until
    /// `switch` says a frame is the last one before raw bytes.
    pub fn framed(
        router: Router<T>,
        decoder: D,
        switch: fn(&D::Item) -> bool,
        config: SessionConfig,
    ) -> Self {
        Self::make(router, Some((decoder, switch)), config)
    }

    fn make(router: Router<T>, framing: Option<Framing<D>>, config: SessionConfig) -> Self {
        Self {
            buf: RecvBuf::with_config(config.recv),
            state: match config.proxy {
                ProxyMode::Off => State::Sniff,
                _ => State::Proxy,
            },
            router,
            framing,
            sniffing: None,
            examined: 0,
            started: None,
            eof: false,
            proxy: config.proxy,
            proxy_max: config.proxy_max,
        }
    }

    /// Appends bytes the peer sent.
    ///
    /// # Errors
    ///
    /// As [`RecvBuf::feed`]: nothing is appended when they do not fit.
    pub fn feed(&mut self, data: &[u8]) -> Result<(), Error> {
        self.buf.feed(data)
    }

    /// The receive buffer, for adapters that read straight into it
    /// ([`RecvBuf::spare_mut`] and [`RecvBuf::commit`]).
    pub fn recv_buf(&mut self) -> &mut RecvBuf {
        &mut self.buf
    }

    /// The peer will send nothing more.
    pub fn handle_eof(&mut self) {
        self.eof = true;
    }

    /// Whether the session is closed (ended or failed).
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed | State::Failed(_))
    }

    /// When to call [`poll_event`](Self::poll_event) again even if no byte
    /// arrives: while sniffing, the moment the inspect delay runs out.
    pub fn deadline(&self) -> Option<Duration> {
        match (&self.state, self.started) {
            (State::Sniff, Some(started)) => {
                Some(started.saturating_add(self.router.config().inspect_delay_duration()))
            }
            _ => None,
        }
    }

    /// Bytes the PROXY sniffer and the router's sniffers have looked at so
    /// far: a measure of the work spent on the first bytes, linear in the
    /// bytes received whatever the size of the reads (each byte is looked
    /// at a small, bounded number of times).
    pub fn examined(&self) -> u64 {
        self.examined + self.sniffing.as_ref().map_or(0, |s| s.examined())
    }

    /// Routing is over: the sniffers' state goes, its count stays.
    fn done_sniffing(&mut self) {
        if let Some(sniffing) = self.sniffing.take() {
            self.examined += sniffing.examined();
        }
    }

    /// The next event, or `Ok(None)` when the session needs more bytes (or
    /// the deadline). `now` is the caller's clock; only differences matter.
    ///
    /// # Errors
    ///
    /// A malformed or missing PROXY header, a decoder's error: final.
    pub fn poll_event(&mut self, now: Duration) -> Result<Option<Event<T, D::Item>>, Error> {
        loop {
            match &self.state {
                State::Proxy => match self.sniff_proxy() {
                    Sniff::Match { facts, len } => {
                        self.buf.advance(len)?;
                        // The router's bytes start after the header.
                        self.done_sniffing();
                        self.state = State::Sniff;
                        return Ok(Some(Event::Proxy { header: facts, len }));
                    }
                    Sniff::NoMatch if self.proxy == ProxyMode::Optional => {
                        self.state = State::Sniff;
                    }
                    Sniff::NoMatch => {
                        return self.fail(Error::InvalidInput {
                            kind: InvalidInput::Malformed(Field::ProxyMissing),
                            offset: self.buf.offset(),
                        })
                    }
                    Sniff::Invalid(e) => {
                        let e = e.shifted(self.buf.offset());
                        return self.fail(e);
                    }
                    // The stream ended inside what may have been a header:
                    // if one was optional, these are the client's bytes.
                    Sniff::NeedMore if self.eof && self.proxy == ProxyMode::Optional => {
                        self.state = State::Sniff;
                    }
                    Sniff::NeedMore if self.eof => return Ok(Some(self.close())),
                    // No more can arrive to decide it.
                    Sniff::NeedMore if self.buf.is_full() => return self.fail_full(),
                    Sniff::NeedMore => return Ok(None),
                },
                State::Sniff => {
                    let started = *self.started.get_or_insert(now);
                    let elapsed = now.saturating_sub(started);
                    let sniffing = self.sniffing.get_or_insert_with(Box::default);
                    let data = self.buf.peek();
                    let decision = if self.eof {
                        Some(self.router.route_at_end_with(&mut sniffing.route, data))
                    } else {
                        self.router.route_with(&mut sniffing.route, data, elapsed)
                    };
                    let Some(decision) = decision else {
                        if self.buf.is_full() {
                            // The router's budget is larger than the buffer.
                            return self.fail_full();
                        }
                        return Ok(None);
                    };
                    self.done_sniffing();
                    self.buf.advance(decision.consume)?;
                    self.state = match self.framing {
                        Some(_) => State::Framed,
                        None => State::Tunnel { announced: false },
                    };
                    return Ok(Some(Event::Routed(decision)));
                }
                State::Framed => return self.poll_frame(),
                State::Tunnel { announced } => {
                    if !announced || !self.buf.is_empty() {
                        self.state = State::Tunnel { announced: true };
                        return Ok(Some(Event::Tunnel(self.buf.take_tail())));
                    }
                    if self.eof {
                        return Ok(Some(self.close()));
                    }
                    return Ok(None);
                }
                State::Closed => return Ok(None),
                State::Failed(e) => return Err(e.clone()),
            }
        }
    }

    /// The PROXY sniffer's answer for the bytes so far.
    fn sniff_proxy(&mut self) -> Sniff<ProxyHeader> {
        let max = self.proxy_max;
        let data = self.buf.peek();
        let sniffing = self.sniffing.get_or_insert_with(Box::default);
        sniffing.proxy.sniff(data, max).clone()
    }

    fn poll_frame(&mut self) -> Result<Option<Event<T, D::Item>>, Error> {
        let Some((decoder, switch)) = &mut self.framing else {
            self.state = State::Tunnel { announced: false };
            return Ok(None);
        };
        let decoded = if self.eof {
            decoder.decode_eof(&mut self.buf)
        } else {
            decoder.decode(&mut self.buf)
        };
        match decoded {
            Ok(Some(item)) => {
                if switch(&item) {
                    self.state = State::Tunnel { announced: false };
                }
                Ok(Some(Event::Frame(item)))
            }
            Ok(None) if self.eof => Ok(Some(self.close())),
            Ok(None) => Ok(None),
            Err(Error::Truncated { partial, .. }) => {
                self.state = State::Closed;
                Ok(Some(Event::Closed(partial)))
            }
            Err(e) => self.fail(e),
        }
    }

    fn close(&mut self) -> Event<T, D::Item> {
        self.done_sniffing();
        self.state = State::Closed;
        Event::Closed(self.buf.take_tail())
    }

    fn fail<E>(&mut self, e: Error) -> Result<E, Error> {
        self.done_sniffing();
        self.state = State::Failed(e.clone());
        Err(e)
    }

    /// The buffer is full and what it holds does not decide: as a decoder
    /// in the same place, a final [`Limit::Buffer`](crate::Limit::Buffer)
    /// error.
    fn fail_full<E>(&mut self) -> Result<E, Error> {
        let e = self.buf.over_limit(self.buf.len() as u64 + 1);
        self.fail(e)
    }
}
