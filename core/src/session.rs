//! [`Session`]: one connection's state machine, from its first byte to a
//! tunnel or its end.

use alloc::boxed::Box;
use bytes::Bytes;
use core::time::Duration;

use crate::conn::{Phase, Protocol, Wire};
use crate::decoder::Decoder;
use crate::error::{Error, InvalidInput, ProxyField};
use crate::recv_buf::RecvBuf;
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
}

impl Default for SessionConfig {
    /// No PROXY header.
    fn default() -> Self {
        Self {
            proxy: ProxyMode::Off,
            proxy_max: proxy::DEFAULT_MAX_HEADER,
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

    /// Whether a PROXY header comes first.
    #[must_use]
    pub fn get_proxy(&self) -> ProxyMode {
        self.proxy
    }

    /// The longest PROXY header read.
    #[must_use]
    pub fn get_proxy_max(&self) -> usize {
        self.proxy_max
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

/// What ends a session's framed mode: a frame after which the bytes are
/// raw (a `CONNECT` line, an upgrade marker). It may keep state (count
/// frames, remember a negotiated switch): any `FnMut(&Item) -> bool` is
/// one.
pub trait Switch<I> {
    /// Whether `frame` is the last one before raw bytes.
    fn is_last(&mut self, frame: &I) -> bool;
}

impl<I, F: FnMut(&I) -> bool> Switch<I> for F {
    fn is_last(&mut self, frame: &I) -> bool {
        self(frame)
    }
}

/// The switch of a session that never leaves framed mode, or has no frames.
pub type NoSwitch<I> = fn(&I) -> bool;

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

/// The routing protocol: an optional PROXY header, sniffing and routing,
/// then frames of a decoder until a switch, then a raw tunnel; or the end
/// of the stream. It does no I/O and reads no clock: a
/// [`Conn`](crate::conn::Conn) drives it.
///
/// ```text
///   events, in order:  [Proxy] Routed (Frame* [Tunnel+]) | Tunnel+  [Closed]
/// ```
///
/// The router's inspect delay runs from the connection's start (given to
/// [`Conn::new`](crate::conn::Conn::new)), so a client that never sends a
/// byte is routed by the clock too; [`Conn::poll_timeout`](crate::conn::Conn::poll_timeout)
/// says when. Errors are final, and the bytes not consumed stay in the
/// connection's buffer.
///
/// ```
/// use cleave_proto::conn::Conn;
/// use cleave_proto::route::{HostPattern, Match, Router};
/// use cleave_proto::{Event, Lines, Session, SessionConfig};
/// use core::time::Duration;
///
/// let router = Router::new("other").rule(Match::Prefix("HELLO ".into()), "lines");
/// // Lines until a line says TUNNEL, then raw bytes.
/// let session = Session::framed(router, Lines::new(), |line: &cleave_proto::Bytes| &line[..] == b"TUNNEL", SessionConfig::default());
/// let mut conn = Conn::new(session, Duration::ZERO);
/// let mut events = Vec::new();
/// for piece in [&b"HELLO th"[..], b"ere\nTUN", b"NEL\nraw\x00bytes"] {
///     conn.feed(piece, Duration::ZERO)?;
///     while let Some(event) = conn.poll_event()? {
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
pub struct Session<T, D: Decoder = NoFrames, S = NoSwitch<<D as Decoder>::Item>> {
    state: State,
    router: Router<T>,
    framing: Option<(D, S)>,
    /// What the PROXY sniffer and the router remember between looks, while
    /// the session reads the first bytes; boxed, and dropped once routed.
    sniffing: Option<Box<Sniffing>>,
    /// Bytes the sniffers looked at (see [`Session::examined`]).
    examined: u64,
    started: Duration,
    /// The PROXY settings.
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

impl<T: Clone, D: Decoder, S: Switch<D::Item>> Session<T, D, S> {
    /// A session that routes, then cuts frames with `decoder` until
    /// `switch` says a frame is the last one before raw bytes.
    pub fn framed(router: Router<T>, decoder: D, switch: S, config: SessionConfig) -> Self {
        Self::make(router, Some((decoder, switch)), config)
    }

    fn make(router: Router<T>, framing: Option<(D, S)>, config: SessionConfig) -> Self {
        Self {
            state: match config.proxy {
                ProxyMode::Off => State::Sniff,
                _ => State::Proxy,
            },
            router,
            framing,
            sniffing: None,
            examined: 0,
            started: Duration::ZERO,
            proxy: config.proxy,
            proxy_max: config.proxy_max,
        }
    }

    /// The router.
    #[must_use]
    pub fn router(&self) -> &Router<T> {
        &self.router
    }

    /// The decoder of framed mode, if the session has one.
    #[must_use]
    pub fn decoder(&self) -> Option<&D> {
        self.framing.as_ref().map(|(decoder, _)| decoder)
    }

    /// The decoder of framed mode, to reconfigure it between frames.
    pub fn decoder_mut(&mut self) -> Option<&mut D> {
        self.framing.as_mut().map(|(decoder, _)| decoder)
    }

    /// Bytes the PROXY sniffer and the router's sniffers have looked at so
    /// far: a measure of the work spent on the first bytes, linear in the
    /// bytes received whatever the size of the reads (each byte is looked
    /// at a small, bounded number of times).
    pub fn examined(&self) -> u64 {
        self.examined + self.sniffing.as_ref().map_or(0, |s| s.examined())
    }

    /// When the inspect delay, counted from the connection's start, runs
    /// out.
    fn inspect_deadline(&self) -> Option<Duration> {
        self.started
            .checked_add(self.router.config().get_inspect_delay())
    }

    fn inspect_due(&self, now: Duration) -> bool {
        self.inspect_deadline().is_some_and(|at| now >= at)
    }

    /// Routing is over: the sniffers' state goes, its count stays.
    fn done_sniffing(&mut self) {
        if let Some(sniffing) = self.sniffing.take() {
            self.examined += sniffing.examined();
        }
    }

    /// The next event, or `Ok(None)` when the session needs more bytes (or
    /// the deadline).
    fn next_event(
        &mut self,
        buf: &mut RecvBuf,
        eof: bool,
        now: Duration,
    ) -> Result<Option<Event<T, D::Item>>, Error> {
        loop {
            match &self.state {
                State::Proxy => match self.sniff_proxy(buf) {
                    Sniff::Match { facts, len } => {
                        buf.advance(len)?;
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
                            kind: InvalidInput::Proxy(ProxyField::Missing),
                            offset: buf.offset(),
                        })
                    }
                    Sniff::Invalid(e) => {
                        let e = e.shifted(buf.offset());
                        return self.fail(e);
                    }
                    // The stream ended inside what may have been a header,
                    // or the inspect delay ran out first (a silent client,
                    // or one whose first bytes look like a header's start):
                    // if one was optional, these are the client's bytes.
                    Sniff::NeedMore
                        if self.proxy == ProxyMode::Optional && (eof || self.inspect_due(now)) =>
                    {
                        self.state = State::Sniff;
                    }
                    Sniff::NeedMore if eof => return Ok(Some(self.close(buf))),
                    // No more can arrive to decide it.
                    Sniff::NeedMore if buf.is_full() => return self.fail_full(buf),
                    Sniff::NeedMore => return Ok(None),
                },
                State::Sniff => {
                    let elapsed = now.saturating_sub(self.started);
                    let sniffing = self.sniffing.get_or_insert_with(Box::default);
                    let data = buf.peek();
                    let decision = if eof {
                        Some(self.router.route_at_end_with(&mut sniffing.route, data))
                    } else {
                        self.router.route_with(&mut sniffing.route, data, elapsed)
                    };
                    let Some(decision) = decision else {
                        if buf.is_full() {
                            // The router's budget is larger than the buffer.
                            return self.fail_full(buf);
                        }
                        return Ok(None);
                    };
                    self.done_sniffing();
                    buf.advance(decision.consume)?;
                    self.state = match self.framing {
                        Some(_) => State::Framed,
                        None => State::Tunnel { announced: false },
                    };
                    return Ok(Some(Event::Routed(decision)));
                }
                State::Framed => return self.poll_frame(buf, eof),
                State::Tunnel { announced } => {
                    if !announced || !buf.is_empty() {
                        self.state = State::Tunnel { announced: true };
                        return Ok(Some(Event::Tunnel(buf.take_tail())));
                    }
                    if eof {
                        return Ok(Some(self.close(buf)));
                    }
                    return Ok(None);
                }
                State::Closed => return Ok(None),
                State::Failed(e) => return Err(e.clone()),
            }
        }
    }

    /// The PROXY sniffer's answer for the bytes so far.
    fn sniff_proxy(&mut self, buf: &RecvBuf) -> Sniff<ProxyHeader> {
        let max = self.proxy_max;
        let data = buf.peek();
        let sniffing = self.sniffing.get_or_insert_with(Box::default);
        sniffing.proxy.sniff(data, max).clone()
    }

    fn poll_frame(
        &mut self,
        buf: &mut RecvBuf,
        eof: bool,
    ) -> Result<Option<Event<T, D::Item>>, Error> {
        let Some((decoder, switch)) = &mut self.framing else {
            self.state = State::Tunnel { announced: false };
            return Ok(None);
        };
        let decoded = if eof {
            decoder.decode_eof(buf)
        } else {
            decoder.decode(buf)
        };
        match decoded {
            Ok(Some(item)) => {
                if switch.is_last(&item) {
                    self.state = State::Tunnel { announced: false };
                }
                Ok(Some(Event::Frame(item)))
            }
            Ok(None) if eof => Ok(Some(self.close(buf))),
            Ok(None) => Ok(None),
            Err(Error::Truncated { partial, .. }) => {
                self.state = State::Closed;
                Ok(Some(Event::Closed(partial)))
            }
            Err(e) => self.fail(e),
        }
    }

    fn close(&mut self, buf: &mut RecvBuf) -> Event<T, D::Item> {
        self.done_sniffing();
        self.state = State::Closed;
        Event::Closed(buf.take_tail())
    }

    fn fail<E>(&mut self, e: Error) -> Result<E, Error> {
        self.done_sniffing();
        self.state = State::Failed(e.clone());
        Err(e)
    }

    /// The buffer is full and what it holds does not decide: as a decoder
    /// in the same place, a final [`Limit::Buffer`](crate::Limit::Buffer)
    /// error.
    fn fail_full<E>(&mut self, buf: &RecvBuf) -> Result<E, Error> {
        let e = buf.over_limit(buf.len() as u64 + 1);
        self.fail(e)
    }
}

impl<T: Clone, D: Decoder, S: Switch<D::Item>> Protocol for Session<T, D, S> {
    type Event = Event<T, D::Item>;

    fn poll_event(&mut self, wire: &mut Wire<'_>) -> Result<Option<Self::Event>, Error> {
        let (eof, now) = (wire.eof, wire.now());
        self.next_event(wire.recv, eof, now)
    }

    fn phase(&self) -> Phase {
        match self.state {
            State::Proxy | State::Sniff => Phase::Opening,
            State::Framed => Phase::Framing,
            State::Tunnel { .. } => Phase::Tunnel,
            State::Closed | State::Failed(_) => Phase::Done,
        }
    }

    /// The inspect delay runs from here.
    fn start(&mut self, now: Duration) {
        self.started = now;
    }

    /// While sniffing, the moment the inspect delay (counted from the
    /// connection's start) runs out; while an optional PROXY header may
    /// still come too (a silent client is routed by the clock all the
    /// same). A required PROXY header has no deadline of its own: the
    /// connection's opening timeout covers it.
    fn poll_timeout(&self) -> Option<Duration> {
        match self.state {
            State::Sniff => self.inspect_deadline(),
            State::Proxy if self.proxy == ProxyMode::Optional => self.inspect_deadline(),
            _ => None,
        }
    }
}
