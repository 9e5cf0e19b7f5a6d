//! The driver: one [`Connection`] runs any [`Protocol`] over a tokio
//! socket, both directions, with the core's timers on tokio's clock.

use std::future::poll_fn;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use cleave_proto::conn::Framed;
use cleave_proto::write::Push;
use cleave_proto::{Conn, ConnConfig, Decoder, NoFrames, NoSwitch, Protocol, Session, Ticket};
use futures_core::Stream;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::drive::{poll_flush, poll_turn, poll_write_timed, Clock, Turn};
use crate::error::ConnError;
use crate::reset::Reset;

/// One connection: a socket `S` and the core's [`Conn`] running protocol
/// `P`, driven from tokio. A `Stream` of the protocol's events; the same
/// value writes (same task, no lock).
///
/// ```text
///   poll_next:  conn.poll_event() ──> an event?  hand it out (no I/O)
///               write what is queued (the protocol's urgent replies, the
///                 application's pushes) without waiting for the socket
///               shut down / reset the socket when the core asks
///               read into the buffer's spare room ──> again
///               nothing to read: arm the timer at conn.poll_timeout()
///               the timer fired: conn.handle_timeout(now) ──> again
/// ```
///
/// Events come out as the protocol makes them; answers pushed meanwhile
/// ([`send`](Self::send), or `conn_mut().push`) go out in one vectored
/// write when the buffered events run out, before the next read. The
/// stream ends after a final error (the protocol's, a timeout, the
/// socket's), or once the protocol made its last event and everything
/// queued is written.
///
/// Timeouts ([`ConnConfig`]'s [`Timeouts`](cleave_proto::Timeouts)) run on
/// tokio's clock: when one runs out the stream gives
/// [`Error::TimedOut`](cleave_proto::Error::TimedOut), after shutting the
/// write half down or making the close a reset ([`Reset`]), as the protocol
/// chose. Drop the connection then. Before a clean close's FIN, what is
/// still queued goes out while the peer takes it; a peer that takes
/// nothing more for an idle span gets a reset instead (the linger of
/// [`Timeouts`](cleave_proto::Timeouts)), so it never reads part of a
/// response as a whole one. A protocol's final error waits for
/// its queued bytes the same way.
///
/// Memory follows readiness: a buffer that holds no block reads into a
/// small buffer on the stack first (2 KiB) and keeps what came in a block
/// made for it, so a silent connection allocates nothing and a small
/// request costs one read; and when a read finds nothing, the connection
/// gives back what it does not need ([`Conn::release_idle`]) before the
/// task waits.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use cleave_proto::conn::Framed;
/// use cleave_proto::{Bytes, Lines};
/// use cleave_tokio::Connection;
/// use futures_util::StreamExt;
///
/// let (client, server) = tokio::io::duplex(1024);
/// let mut conn = Connection::new(server, Framed::new(Lines::new()));
/// let mut client = Connection::new(client, Framed::new(Lines::new()));
/// client.send(Bytes::from_static(b"hello\n")).await?;
/// client.flush().await?;
/// assert_eq!(conn.next().await.unwrap()?, "hello");
/// conn.send(Bytes::from_static(b"hi\n")).await?;
/// conn.close().await?; // written, then the write half shut down
/// assert_eq!(client.next().await.unwrap()?, "hi");
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Connection<S, P> {
    io: S,
    conn: Conn<P>,
    clock: Clock,
    /// The stream gave its final error, or its end.
    ended: bool,
}

/// The core is never pinned: a connection moves freely.
impl<S: Unpin, P> Unpin for Connection<S, P> {}

impl<S, P: Protocol> Connection<S, P> {
    /// `protocol` over `io`, with a default buffer and queue and no
    /// timeouts, starting now.
    pub fn new(io: S, protocol: P) -> Self {
        Self::with_config(io, protocol, ConnConfig::default())
    }

    /// `protocol` over `io` with the given buffer, queue and timeouts,
    /// starting now (the timeouts run from here, before the first byte).
    pub fn with_config(io: S, protocol: P, config: ConnConfig) -> Self {
        Self::from_conn(io, Conn::with_config(protocol, config, Duration::ZERO))
    }

    /// Drives a core connection made elsewhere (by hand, or the other half
    /// of [`into_parts`](Self::into_parts)): its clock goes on from its
    /// latest reading ([`Conn::now`]).
    pub fn from_conn(io: S, conn: Conn<P>) -> Self {
        Self {
            io,
            clock: Clock::starting_at(conn.now()),
            conn,
            ended: false,
        }
    }

    /// The core connection: its buffer, queue, protocol and timeouts.
    pub fn conn(&self) -> &Conn<P> {
        &self.conn
    }

    /// The core connection, to reconfigure it between events.
    pub fn conn_mut(&mut self) -> &mut Conn<P> {
        &mut self.conn
    }

    /// The socket.
    pub fn get_ref(&self) -> &S {
        &self.io
    }

    /// The socket.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.io
    }

    /// The socket and the core connection: its buffer holds the bytes read
    /// and not consumed (the tail of a hand-off), its queue what was not
    /// written (flush first).
    pub fn into_parts(self) -> (S, Conn<P>) {
        (self.io, self.conn)
    }

    /// Hands the socket and the buffer (unread bytes in place) to another
    /// protocol; see [`Conn::switch`].
    #[must_use = "the connection, with its unread bytes, is in the result"]
    pub fn switch<Q: Protocol>(self, next: impl FnOnce(P) -> Q) -> Connection<S, Q> {
        Connection {
            io: self.io,
            conn: self.conn.switch(next),
            clock: self.clock,
            ended: false,
        }
    }

    /// The next event already in the buffer, without reading or writing:
    /// `None` when the buffer holds no complete one (or the stream is
    /// over). A same-task server answers all that arrived together, then
    /// writes once.
    ///
    /// After an error it cannot write what the connection still owes the
    /// peer (a WebSocket close frame with its code, the rest of a queued
    /// response): await [`flush`](Self::flush) or [`close`](Self::close)
    /// before dropping the connection, as polling the stream does by
    /// itself.
    pub fn next_buffered(&mut self) -> Option<Result<P::Event, ConnError>> {
        if self.ended {
            return None;
        }
        match self.conn.poll_event() {
            Ok(event) => event.map(Ok),
            Err(e) => {
                self.ended = true;
                Some(Err(e.into()))
            }
        }
    }
}

impl<S, P> Connection<S, P>
where
    S: AsyncWrite + Reset + Unpin,
    P: Protocol,
{
    /// Writes what is queued, then shuts the write half down or resets the
    /// socket if the core asks (after [`close`](Self::close), a protocol's
    /// close or a timeout): `Ready` once nothing is left to do. While the
    /// socket takes nothing, the connection's timeouts run: a peer that
    /// stops reading is cut off by the idle timeout (or a linger's reset),
    /// as when the connection waits to read.
    ///
    /// # Errors
    ///
    /// What the socket says; writing fails then (the queue is dropped).
    pub fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ConnError>> {
        poll_write_timed(&mut self.io, &mut self.conn, &mut self.clock, cx).map_err(ConnError::from)
    }

    /// Queues `item` in the bulk lane, writing first to make room while the
    /// lane is full.
    ///
    /// # Errors
    ///
    /// What the socket says; once the queue is closed, the connection's
    /// error or `BrokenPipe` (the item is dropped then: push through
    /// [`conn_mut`](Self::conn_mut) to keep it).
    pub async fn send<I: Push>(&mut self, item: I) -> Result<Ticket, ConnError> {
        let mut item = item;
        loop {
            match self.conn.push_or_full(item)? {
                Ok(ticket) => return Ok(ticket),
                Err(full) => item = full,
            }
            poll_fn(|cx| self.poll_drain(cx)).await?;
        }
    }

    /// Writes everything queued and flushes the socket; then the connection
    /// gives back the memory it kept for more ([`Conn::release_idle`]).
    ///
    /// # Errors
    ///
    /// What the socket says; once the write side dropped what was queued
    /// (a reset: a timeout's, or [`Conn::reset`]; a failed write), the
    /// connection's error, or `BrokenPipe`.
    pub async fn flush(&mut self) -> Result<(), ConnError> {
        poll_fn(|cx| self.poll_drain(cx)).await?;
        self.conn.check_written()?;
        // The drain read the clock as it finished.
        let now = self.clock.last();
        poll_fn(|cx| poll_flush(&mut self.io, &mut self.conn, now, cx)).await?;
        self.conn.release_idle();
        Ok(())
    }

    /// Closes the queue, writes what it holds and shuts the write half
    /// down (a FIN); reading goes on until the peer ends too.
    ///
    /// # Errors
    ///
    /// As [`flush`](Self::flush): `Ok` only when everything queued went out
    /// and the write half was shut down.
    pub async fn close(&mut self) -> Result<(), ConnError> {
        self.conn.close();
        poll_fn(|cx| self.poll_drain(cx)).await?;
        self.conn.check_written()
    }

    /// Ends the stream with `e` once the write side did what it owes: what
    /// is queued (a timeout's last reply, the rest of a response) goes out
    /// while the peer takes it, then the FIN; a peer that takes nothing
    /// until the linger deadline gets a reset instead (see
    /// [`Timeouts`](cleave_proto::Timeouts)). Handed out sooner, the error
    /// would let the connection be dropped with bytes queued and nothing
    /// shut down: a clean FIN after part of a response.
    fn poll_end_with(&mut self, cx: &mut Context<'_>, e: ConnError) -> Poll<ConnError> {
        if self.conn.wants_write() {
            // A write that fails ends it (the core drops what is queued);
            // its error adds nothing to the one being reported.
            let _ = ready!(self.poll_drain(cx));
        }
        self.ended = true;
        Poll::Ready(e)
    }
}

impl<S, P> Stream for Connection<S, P>
where
    S: AsyncRead + AsyncWrite + Reset + Unpin,
    P: Protocol,
{
    type Item = Result<P::Event, ConnError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.ended {
                return Poll::Ready(None);
            }
            match this.conn.poll_event() {
                Ok(Some(event)) => return Poll::Ready(Some(Ok(event))),
                Ok(None) => {}
                // The core gives its error again at the next poll, while
                // the write side is still at work.
                Err(e) => return this.poll_end_with(cx, e.into()).map(|e| Some(Err(e))),
            }
            match ready!(poll_turn(&mut this.io, &mut this.conn, &mut this.clock, cx)) {
                Ok(Turn::Finished) => this.ended = true,
                Ok(_) => {}
                Err(e) => {
                    this.ended = true;
                    return Poll::Ready(Some(Err(e.into())));
                }
            }
        }
    }
}

/// A [`Connection`] that routes: a `Stream` of a [`Session`]'s events
/// ([`Event`](cleave_proto::Event)s), the router's inspect delay and the
/// [`ConnConfig`] timeouts on tokio's clock.
///
/// After an [`Event::Tunnel`](cleave_proto::Event::Tunnel) hand-off, take
/// the socket back with [`into_parts`](Connection::into_parts) and splice
/// it (see [`tunnel_with`](crate::tunnel_with)); or keep polling, and raw
/// bytes keep coming as `Tunnel` events.
pub type SessionReader<S, T, D = NoFrames, W = NoSwitch<<D as Decoder>::Item>> =
    Connection<S, Session<T, D, W>>;

/// A [`Connection`] that cuts a decoder's frames: `FrameReader::new(socket,
/// Lines::new())`. Everything a [`Connection`] does (send, flush, close)
/// it does too, through `Deref`.
///
/// Frames come out as the decoder cuts them; at the end of the stream an
/// incomplete last frame comes out as
/// [`ConnError::Protocol`]`(`[`cleave_proto::Error::Truncated`]`)` carrying
/// its bytes, then the stream ends.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), cleave_tokio::ConnError> {
/// use cleave_proto::Lines;
/// use cleave_tokio::FrameReader;
/// use futures_util::StreamExt;
///
/// // A read-only source, joined with a sink for the (unused) write half.
/// let input: &[u8] = b"one\ntwo\n";
/// let io = tokio::io::join(input, tokio::io::sink());
/// let lines: Vec<_> = FrameReader::new(io, Lines::new()).collect().await;
/// assert_eq!(lines.len(), 2);
/// assert_eq!(&lines[1].as_ref().unwrap()[..], b"two");
/// # Ok(())
/// # }
/// ```
///
/// A same-task server answers every frame that arrived together and then
/// writes all the answers at once:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use cleave_proto::{Encoder, Lines};
/// use cleave_tokio::FrameReader;
/// use futures_util::StreamExt;
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
///
/// let (mut client, server) = tokio::io::duplex(1024);
/// client.write_all(b"one\ntwo\nthree\n").await?;
/// client.shutdown().await?;
/// let mut lines = FrameReader::new(server, Lines::new());
/// let mut encoder = Lines::new();
/// while let Some(line) = lines.next().await {
///     lines.send(encoder.encode(line?)?).await?; // queued
///     while let Some(line) = lines.next_buffered() {
///         lines.send(encoder.encode(line?)?).await?;
///     }
///     lines.flush().await?; // one write for the three answers
/// }
/// lines.close().await?;
/// let mut echoed = String::new();
/// client.read_to_string(&mut echoed).await?;
/// assert_eq!(echoed, "one\ntwo\nthree\n");
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct FrameReader<S, D>(Connection<S, Framed<D>>);

impl<S, D: Decoder> FrameReader<S, D> {
    /// Frames cut by `decoder` from `io`, with a default buffer and queue
    /// and no timeouts.
    pub fn new(io: S, decoder: D) -> Self {
        Self(Connection::new(io, Framed::new(decoder)))
    }

    /// Frames cut by `decoder` from `io`, with the given buffer, queue and
    /// timeouts.
    pub fn with_config(io: S, decoder: D, config: ConnConfig) -> Self {
        Self(Connection::with_config(io, Framed::new(decoder), config))
    }

    /// The decoder.
    pub fn decoder(&self) -> &D {
        self.0.conn().protocol().decoder()
    }

    /// The decoder, to reconfigure it or to ask it about an error (say,
    /// `ProstCodec::take_bad_message`).
    pub fn decoder_mut(&mut self) -> &mut D {
        self.0.conn_mut().protocol_mut().decoder_mut()
    }

    /// The connection it is.
    pub fn into_inner(self) -> Connection<S, Framed<D>> {
        self.0
    }

    /// The socket and the core connection (its buffer holds the bytes not
    /// decoded yet); see [`Connection::into_parts`].
    pub fn into_parts(self) -> (S, Conn<Framed<D>>) {
        self.0.into_parts()
    }
}

impl<S, D> Deref for FrameReader<S, D> {
    type Target = Connection<S, Framed<D>>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl<S, D> DerefMut for FrameReader<S, D> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl<S, D> Stream for FrameReader<S, D>
where
    S: AsyncRead + AsyncWrite + Reset + Unpin,
    D: Decoder,
{
    type Item = Result<D::Item, ConnError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.get_mut().0).poll_next(cx)
    }
}
