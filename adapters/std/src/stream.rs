//! [`Stream`]: one connection over a blocking reader and writer.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use cleave_proto::conn::Shutdown;
use cleave_proto::{Conn, ConnConfig, Lane, Protocol, Push, Ticket};

use crate::error::ConnError;
use crate::socket::Socket;

/// One connection over any blocking `Read` and `Write` (a `TcpStream`, a
/// `UnixStream`, a file, a pipe), driven on the caller's thread: the
/// core's [`Conn`] holds the receive buffer, the write queue, the
/// lifecycle and the timeouts; the stream reads, writes, sets read
/// timeouts and shuts the socket down.
///
/// `P` is any [`Protocol`]: a [`Framed`](cleave_proto::Framed) decoder (the
/// events are its frames), a [`Session`](cleave_proto::Session) (routing,
/// frames, tunnel bytes, the end), or one of your own, which may queue
/// replies of its own on the urgent lane.
///
/// # Call order
///
/// ```text
///   recv() ─> poll_event() ── an event ────────────────────────> Ok(Some(event))
///               │ nothing
///               ├── the end (reader's EOF, the protocol's last) ─> Ok(None)
///               ├── write the protocol's replies (urgent lane), then poll again
///               ├── read timeout := until poll_timeout()    (only while there is one)
///               └── read_with(): read into the buffer, no second copy
///                     n > 0, or 0 (the end) ─> poll again
///                     timed out ─> handle_timeout(now) ─> poll again:
///                                  an event, Err(Protocol(TimedOut(..))),
///                                  or Err(TimedOut) when the timeout was the caller's
///   recv_buffered()        poll only: what arrived together, no read
///
///   conn_mut().push(item)  queue only (bytes or a Frame); refused when full
///   send(item)             queue; when full, write first (write_vectored) to make room
///   flush()                write everything queued, then flush the writer
///   close()                no more pushes; write what is left; shut the write half
///   reset()                drop what is queued; make the close a reset
/// ```
///
/// Reading needs `S: Read + `[`Socket`]; writing `S: Write`, so a
/// read-only source (a `&[u8]`, a child's stdout) works too.
///
/// # Errors and timeouts
///
/// Everything returns [`ConnError`]. [`ConnError::Protocol`] is the core's
/// typed error: the peer's bytes broke the protocol, a limit was hit, or
/// one of the connection's [`Timeouts`](cleave_proto::Timeouts) ran out
/// ([`Error::TimedOut`](cleave_proto::Error::TimedOut)); [`ConnError::Io`]
/// is the OS's. Both are final.
///
/// The connection's deadlines (its timeouts, a router's inspect delay)
/// are honoured by the read timeout: while [`Conn::poll_timeout`] has a
/// deadline, `recv` sets the socket's read timeout so that the read
/// returns then (at most 1/64 of the wait late, so that a steady stream
/// does not set it again on every read), and puts the caller's back once
/// there is none. A decision by the clock comes out as an event, a
/// timeout as `Err(Protocol(TimedOut(..)))`, and the socket is shut down
/// or reset as the protocol says. A read timeout of the caller's, while
/// the connection has no deadline, is [`ConnError::TimedOut`]: nothing is
/// lost, call again. A source without read timeouts (a pipe) honours the
/// deadlines when a read returns. The socket must block: a non-blocking
/// one would have `recv` spin until the deadline.
///
/// The writes `recv` makes (the protocol's replies, what a closing
/// connection owes) and [`close`](Self::close)'s run with the same
/// deadlines: while the connection has one, the socket's write timeout
/// is set to it ([`Socket::set_write_timeout`]), so a peer that stops
/// reading is ended by the connection's timeouts (an idle timeout, then
/// a linger that ends in a reset), and the caller's write timeout is put
/// back after. [`send`](Self::send) and [`flush`](Self::flush) block as
/// the writer lets them (they need only `Write`): set a write timeout on
/// the socket to give up on a peer that stops reading (it comes back as
/// [`ConnError::TimedOut`], and nothing queued is lost). On Unix a read
/// or write timeout is
/// `WouldBlock`; `TimedOut` there is the kernel giving up on the
/// connection (`ETIMEDOUT`: retransmissions or keepalives unanswered),
/// a final [`ConnError::Io`].
///
/// ```
/// use std::io::{Read, Write};
/// use std::net::{Shutdown, TcpListener, TcpStream};
///
/// use cleave_proto::{Encoder, Framed, Lines};
/// use cleave_std::Stream;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let listener = TcpListener::bind("127.0.0.1:0")?;
/// let mut client = TcpStream::connect(listener.local_addr()?)?;
/// client.write_all(b"one\ntwo\n")?;
/// client.shutdown(Shutdown::Write)?;
///
/// let (socket, _) = listener.accept()?;
/// let mut lines = Stream::new(socket, Framed::new(Lines::new()));
/// let mut encoder = Lines::new();
/// while let Some(line) = lines.recv()? {
///     let answer = [&b"> "[..], &line].concat();
///     lines.send(encoder.encode(answer.into())?)?; // queued; written when full
/// }
/// lines.close()?; // one write_vectored for both answers, then a FIN
///
/// let mut answers = String::new();
/// client.read_to_string(&mut answers)?;
/// assert_eq!(answers, "> one\n> two\n");
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Stream<S, P> {
    io: S,
    conn: Conn<P>,
    /// When the connection started: `now` is the time since.
    base: Instant,
    timer: Timer,
    /// The write timeout set while writing what the connection owes.
    write_timer: Timer,
    /// `recv` failed with this kind (reading, or writing a reply): it
    /// says so again, once the events already buffered are out.
    failed: Option<io::ErrorKind>,
}

/// A socket timeout (read or write) set for the connection's deadline.
#[derive(Clone, Copy, Debug, Default)]
struct Timer {
    /// The socket's timeout, while one is set for a deadline.
    set: Option<Duration>,
    /// The caller's timeout, put back once there is no deadline.
    saved: Option<Duration>,
}

impl Timer {
    /// Sets the timeout (with `set`) to end a wait `wait` from now (at
    /// most [`slack`] late), or puts the caller's back (as `get` said it
    /// was) when there is no deadline. The system is called only when
    /// the value must change.
    fn arm(
        &mut self,
        wait: Option<Duration>,
        get: impl FnOnce() -> io::Result<Option<Duration>>,
        set: impl FnOnce(Option<Duration>) -> io::Result<()>,
    ) -> io::Result<()> {
        let value = match (wait, self.set) {
            (Some(wait), Some(set)) if set >= wait && set - wait < slack(wait) => return Ok(()),
            (Some(wait), _) => Some(wait.saturating_add(slack(wait) / 2)),
            (None, Some(_)) => None,
            (None, None) => return Ok(()),
        };
        if self.set.is_none() {
            self.saved = get()?;
        }
        // No deadline: the caller's timeout, as it was.
        set(value.or(self.saved))?;
        self.set = value;
        Ok(())
    }
}

/// How late a read may return after a deadline `wait` away: 1/64 of the
/// wait, at least a millisecond. Within it, the read timeout already set
/// serves again.
fn slack(wait: Duration) -> Duration {
    (wait / 64).max(Duration::from_millis(1))
}

impl<S, P: Protocol> Stream<S, P> {
    /// `protocol` over `io`, with the default buffer and queue and no
    /// timeouts. The connection's clock starts now.
    pub fn new(io: S, protocol: P) -> Self {
        Self::with_config(io, protocol, ConnConfig::default())
    }

    /// `protocol` over `io`, with the given buffer and queue limits and
    /// timeouts. The connection's clock starts now: its deadlines run
    /// before the first byte arrives.
    pub fn with_config(io: S, protocol: P, config: ConnConfig) -> Self {
        Self {
            io,
            conn: Conn::with_config(protocol, config, Duration::ZERO),
            base: Instant::now(),
            timer: Timer::default(),
            write_timer: Timer::default(),
            failed: None,
        }
    }

    /// The reader and writer.
    pub fn get_ref(&self) -> &S {
        &self.io
    }

    /// The reader and writer. Reading from it directly takes bytes the
    /// protocol would not see; a read timeout set on it is overridden by
    /// `recv` while the connection has a deadline.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.io
    }

    /// The connection: its buffer, queue, lifecycle and timeouts.
    pub fn conn(&self) -> &Conn<P> {
        &self.conn
    }

    /// The connection, to push on its queue or change its timeouts, say.
    /// Its handlers take the time on [`now`](Self::now)'s clock.
    pub fn conn_mut(&mut self) -> &mut Conn<P> {
        &mut self.conn
    }

    /// The time on the connection's clock: since the stream was made.
    pub fn now(&self) -> Duration {
        self.base.elapsed()
    }

    /// Hands the connection to another protocol (see [`Conn::switch`]):
    /// the unread bytes stay in place, and the socket, the queue, the
    /// lifecycle and the timeouts are kept.
    #[must_use = "the connection, with its unread bytes, is in the result"]
    pub fn switch<Q: Protocol>(self, next: impl FnOnce(P) -> Q) -> Stream<S, Q> {
        Stream {
            io: self.io,
            conn: self.conn.switch(next),
            base: self.base,
            timer: self.timer,
            write_timer: self.write_timer,
            failed: self.failed,
        }
    }
}

impl<S: Socket, P: Protocol> Stream<S, P> {
    /// The reader and writer, with the read and write timeouts they had
    /// before the connection's deadlines, and the connection (its buffer
    /// holds the bytes not consumed; its queue what was not written).
    pub fn into_parts(mut self) -> (S, Conn<P>) {
        // Best effort: the caller's timeouts, as they were.
        let _ = self.arm(None);
        let _ = self.arm_write(None);
        (self.io, self.conn)
    }

    /// The next event from the bytes already read, without reading:
    /// `Ok(None)` when they hold no more.
    ///
    /// A server answers every request that arrived in one read, then
    /// [`flush`](Self::flush)es all the answers with one write.
    ///
    /// # Errors
    ///
    /// [`ConnError::Protocol`], as [`recv`](Self::recv).
    pub fn recv_buffered(&mut self) -> Result<Option<P::Event>, ConnError> {
        let polled = self.conn.poll_event();
        if polled.is_err() {
            // The connection may have ended its side (a timeout): the
            // error says what happened, and the write side ends as the
            // connection says.
            self.end_writes();
        }
        polled.map_err(ConnError::Protocol)
    }

    /// After the connection's final error: what it still owes (a clean
    /// close's queue) is written while the peer takes it, until the
    /// connection's linger deadline (see
    /// [`Timeouts`](cleave_proto::Timeouts)), then the close becomes a
    /// reset, so that a peer never takes a stream cut short for a whole
    /// one. A write timeout with no linger span to wait for gives up at
    /// once, with a reset. A write that fails ends it (the core drops what
    /// is queued and the socket is reset).
    fn end_writes(&mut self) {
        loop {
            match self.write_owed() {
                Err(ConnError::TimedOut) => {
                    self.conn.handle_timeout(self.now());
                    if self.conn.poll_timeout().is_none() {
                        // Past the linger deadline (reset already), or no
                        // span to linger for.
                        self.conn.reset();
                    }
                }
                Err(ConnError::Io(_)) => {
                    self.conn.reset();
                    let _ = self.shut();
                    return;
                }
                _ => return,
            }
        }
    }

    /// Ends the connection with a reset: what is queued is dropped, and
    /// the socket is set so that its close is a reset (see
    /// [`Socket::reset_on_close`]); drop the stream then. For when the
    /// peer must not take the end for a clean one.
    ///
    /// # Errors
    ///
    /// What the socket says.
    pub fn reset(&mut self) -> Result<(), ConnError> {
        self.conn.reset();
        self.shut()
    }

    /// Does what [`Conn::poll_shutdown`] asks.
    fn shut(&mut self) -> Result<(), ConnError> {
        let io = &mut self.io;
        let done = self.conn.shutdown_with(|how| match how {
            Shutdown::Write => io.shutdown_write(),
            Shutdown::Reset => io.reset_on_close(),
        });
        done.map_err(ConnError::Io)
    }

    /// Writes what must not wait for the application, if the source can
    /// be written: the protocol's replies (the urgent lane, after the rest
    /// of a frame in progress), or everything once the write side is
    /// closing (a timeout, a protocol's close); then shuts down or resets
    /// as the core asks. Returns whether it wrote. The connection's
    /// deadlines run while it writes (see [`timed`](Self::timed)).
    fn write_owed(&mut self) -> Result<bool, ConnError> {
        if self.io.writer().is_none() {
            // Nothing is written here, but the end the connection asks
            // for still applies: a reset of a `ReadHalf`'s socket.
            self.shut()?;
            return Ok(false);
        }
        let mut wrote = false;
        if self.owes() {
            self.timed(|s| s.write_owed_now(&mut wrote))?;
        }
        self.shut()?;
        Ok(wrote)
    }

    /// Whether the connection owes writes that must not wait: closing, or
    /// nothing more will be read (a protocol's last frame may wait to be
    /// queued), or replies on the urgent lane.
    fn owes(&self) -> bool {
        self.conn.queue().is_closed()
            || self.conn.is_read_done()
            || self.conn.queue().pending_bytes(Lane::Urgent) > 0
    }

    /// [`write_owed`](Self::write_owed)'s writes, without the deadlines;
    /// `wrote` says whether any bytes went out.
    fn write_owed_now(&mut self, wrote: &mut bool) -> Result<(), ConnError> {
        let Some(writer) = self.io.writer() else {
            return Ok(());
        };
        let closing = self.conn.queue().is_closed() || self.conn.is_read_done();
        let mut now = false;
        while closing || self.conn.queue().pending_bytes(Lane::Urgent) > 0 {
            if write_once(&mut self.conn, writer, self.base)? == 0 {
                break;
            }
            now = true;
        }
        *wrote |= now;
        if now {
            flush_only(&mut self.conn, writer, self.base)?;
        }
        Ok(())
    }

    /// Runs `write` with the connection's deadlines running, as `recv`
    /// does for reads: while the connection has a deadline, the socket's
    /// write timeout is set to it ([`Socket::set_write_timeout`]), and a
    /// write that times out there has the connection handle it (an idle
    /// timeout, a linger that ends in a reset) and goes on; so a peer that
    /// stops reading cannot hold a write past the connection's timeouts.
    /// A timeout of the caller's, with no deadline, is
    /// [`ConnError::TimedOut`]. The caller's write timeout is put back
    /// after.
    fn timed<T>(
        &mut self,
        mut write: impl FnMut(&mut Self) -> Result<T, ConnError>,
    ) -> Result<T, ConnError> {
        let done = loop {
            let now = self.now();
            if self.conn.poll_timeout().is_some_and(|at| at <= now) {
                self.conn.handle_timeout(now);
            }
            let wait = self.conn.poll_timeout().map(|at| at.saturating_sub(now));
            if let Err(e) = self.arm_write(wait) {
                break Err(ConnError::Io(e));
            }
            match write(self) {
                // The connection's deadline, or a tick before it: handled
                // above, then the writes go on.
                Err(ConnError::TimedOut) if wait.is_some() => {}
                done => break done,
            }
        };
        // Best effort: what matters is how the writes went.
        let _ = self.arm_write(None);
        done
    }

    /// Sets the read timeout to end a read `wait` from now, or puts the
    /// caller's back when there is no deadline (see [`Timer::arm`]).
    fn arm(&mut self, wait: Option<Duration>) -> io::Result<()> {
        let io = &self.io;
        self.timer
            .arm(wait, || io.read_timeout(), |t| io.set_read_timeout(t))
    }

    /// [`arm`](Self::arm), for the write timeout.
    fn arm_write(&mut self, wait: Option<Duration>) -> io::Result<()> {
        let io = &self.io;
        self.write_timer
            .arm(wait, || io.write_timeout(), |t| io.set_write_timeout(t))
    }
}

impl<S: Read + Socket, P: Protocol> Stream<S, P> {
    /// The next event, reading as needed; `Ok(None)` once the stream is
    /// over (after the reader's end, the protocol's last event).
    ///
    /// Before it blocks in a read, it writes the protocol's own replies
    /// (a pong must not wait for the application's next write), and sets
    /// the read timeout to the connection's next deadline, if it has one.
    ///
    /// # Errors
    ///
    /// - [`ConnError::Protocol`] with the core's typed error: final. It is
    ///   [`Error::TimedOut`](cleave_proto::Error::TimedOut) when one of the
    ///   connection's timeouts ran out (the socket was shut down or reset
    ///   then, as the protocol said: drop the stream). What a clean close
    ///   still owes is written first, until the connection's linger
    ///   deadline (the socket's write timeout is set to it; with no span
    ///   to linger for, a write timeout of the caller's is a reset at
    ///   once): a reply the peer does not take in time ends with a reset,
    ///   never a FIN after part of it. At the end of the stream a [`Framed`](cleave_proto::Framed) decoder gives an
    ///   incomplete last frame back in
    ///   [`Error::Truncated`](cleave_proto::Error::Truncated) (a
    ///   [`Session`](cleave_proto::Session) gives it in
    ///   [`Event::Closed`](cleave_proto::Event::Closed) instead);
    /// - [`ConnError::Io`] when the reader fails (or writing a reply
    ///   does): final;
    /// - [`ConnError::TimedOut`] when a read timeout of the caller's ran
    ///   out while the connection had no deadline (or the source would
    ///   block): not final, call again.
    pub fn recv(&mut self) -> Result<Option<P::Event>, ConnError> {
        let got = self.next_event();
        if let Err(ConnError::Io(e)) = &got {
            self.failed.get_or_insert(e.kind());
        }
        got
    }

    fn next_event(&mut self) -> Result<Option<P::Event>, ConnError> {
        loop {
            if let Some(event) = self.recv_buffered()? {
                return Ok(Some(event));
            }
            if let Some(kind) = self.failed {
                return Err(ConnError::Io(kind.into()));
            }
            let now = self.now();
            let deadline = self.conn.poll_timeout();
            if deadline.is_some_and(|at| at <= now) {
                // Due before the read (or the writes below, the last ones
                // too): the connection times out, or the protocol decides
                // by the clock (once: see `Conn::handle_timeout`). A write
                // that keeps timing out on a peer that does not read must
                // not keep the connection's own timeouts from running.
                self.conn.handle_timeout(now);
                continue;
            }
            if self.conn.is_read_done() || self.conn.is_read_closed() {
                self.write_owed()?;
                // A deadline that passed while it wrote may have ended the
                // connection: its error comes first.
                if let Some(event) = self.recv_buffered()? {
                    return Ok(Some(event));
                }
                if self.conn.poll_timeout().is_none() {
                    // No deadline is left: the caller's read timeout, as
                    // it was (best effort, as in `into_parts`: the stream
                    // ended cleanly all the same).
                    let _ = self.arm(None);
                }
                return Ok(None);
            }
            if self.write_owed()? {
                // The protocol may have held a reply back for room: it
                // goes on before the read.
                continue;
            }
            self.arm(deadline.map(|at| at - now))
                .map_err(ConnError::Io)?;
            let io = &mut self.io;
            let read = self
                .conn
                .read_io(now, |spare| nothing_on_timeout(io.read(spare)));
            if read?.is_some() {
                continue;
            }
            // Nothing came in time: the connection waits, so its buffers
            // give back what they do not need.
            self.conn.release_idle();
            self.conn.handle_timeout(self.now());
            if let Some(event) = self.recv_buffered()? {
                return Ok(Some(event));
            }
            if deadline.is_none() {
                return Err(ConnError::TimedOut);
            }
            // Woken before the deadline (a timer may fire a tick early):
            // read on.
        }
    }
}

impl<S: Write, P: Protocol> Stream<S, P> {
    /// Queues `item` in the bulk lane; when the lane is full, writes first
    /// (blocking) to make room. What is queued reaches the writer when the
    /// queue fills, on [`flush`](Self::flush), or before a
    /// [`recv`](Self::recv) blocks if the protocol queued a reply behind it.
    ///
    /// # Errors
    ///
    /// What writing says ([`ConnError::TimedOut`] for a write timeout,
    /// [`ConnError::Io`] for a failure); when the queue is closed, the
    /// connection's error, or `BrokenPipe`. The item is dropped then:
    /// a push through [`conn_mut`](Self::conn_mut) keeps it.
    pub fn send<I: Push>(&mut self, item: I) -> Result<Ticket, ConnError> {
        let mut item = item;
        loop {
            match self.conn.push_or_full(item)? {
                Ok(ticket) => return Ok(ticket),
                Err(full) => item = full,
            }
            if write_once(&mut self.conn, &mut self.io, self.base)? == 0 {
                return Err(self.conn.closed_error());
            }
        }
    }

    /// Writes everything queued (both lanes, with vectored writes) and
    /// flushes the writer.
    ///
    /// # Errors
    ///
    /// What writing says. After [`ConnError::TimedOut`] (a write timeout)
    /// what the writer did not take stays queued, and calling again goes
    /// on where it stopped; [`ConnError::Io`] is final. Once the write
    /// side dropped what was queued (a reset, a write that failed, even
    /// inside a [`recv`](Self::recv) whose own error was the protocol's),
    /// `Err` again: see [`close`](Self::close).
    pub fn flush(&mut self) -> Result<(), ConnError> {
        flush_into(&mut self.conn, &mut self.io, self.base)?;
        self.conn.check_written()
    }
}

impl<S: Write + Socket, P: Protocol> Stream<S, P> {
    /// Ends the write side cleanly: the queue takes nothing more, what it
    /// holds is written and the writer flushed, then the write half is
    /// shut down ([`Socket::shutdown_write`]; a reset instead if the
    /// connection was reset). Reading goes on. The connection's deadlines
    /// run while it writes, as in [`recv`](Self::recv): a peer that takes
    /// nothing until the linger deadline gets a reset.
    ///
    /// # Errors
    ///
    /// As [`flush`](Self::flush), and what the socket says: `Ok` only when
    /// everything queued went out and the write half was shut down.
    pub fn close(&mut self) -> Result<(), ConnError> {
        self.conn.close();
        self.timed(|s| flush_into(&mut s.conn, &mut s.io, s.base))?;
        // A reset is done even though the close then reports it.
        self.shut()?;
        self.conn.check_written()
    }
}

/// One vectored write of the next slices into `io` (see
/// [`Conn::write_io`]): `Ok(0)` when nothing may go out. A write timeout
/// is [`ConnError::TimedOut`]: nothing was taken, nothing is lost.
fn write_once<P: Protocol, W: Write + ?Sized>(
    conn: &mut Conn<P>,
    io: &mut W,
    base: Instant,
) -> Result<usize, ConnError> {
    let written = conn.write_io(base.elapsed(), |slices| {
        nothing_on_timeout(io.write_vectored(slices))
    });
    written?.ok_or(ConnError::TimedOut)
}

/// A read or write timeout is "nothing now" to the core: `WouldBlock` on
/// Unix (and from a non-blocking socket), `TimedOut` elsewhere. On Unix
/// `TimedOut` (`ETIMEDOUT`) is the kernel giving up on the connection
/// (retransmissions or keepalives unanswered, `TCP_USER_TIMEOUT`): a
/// failure, final.
fn nothing_on_timeout<T>(done: io::Result<T>) -> io::Result<Option<T>> {
    match done {
        Err(e) if is_timeout(e.kind()) => Ok(None),
        done => done.map(Some),
    }
}

#[cfg(unix)]
fn is_timeout(kind: io::ErrorKind) -> bool {
    kind == io::ErrorKind::WouldBlock
}

#[cfg(not(unix))]
fn is_timeout(kind: io::ErrorKind) -> bool {
    matches!(kind, io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// Writes everything queued into `io` and flushes it.
fn flush_into<P: Protocol, W: Write + ?Sized>(
    conn: &mut Conn<P>,
    io: &mut W,
    base: Instant,
) -> Result<(), ConnError> {
    while write_once(conn, io, base)? > 0 {}
    flush_only(conn, io, base)
}

/// Flushes `io` (see [`Conn::flush_io`]): a flush that timed out is
/// [`ConnError::TimedOut`], not final; any other failure is, and the
/// connection drops what is queued.
fn flush_only<P: Protocol, W: Write + ?Sized>(
    conn: &mut Conn<P>,
    io: &mut W,
    base: Instant,
) -> Result<(), ConnError> {
    let flushed = conn.flush_io(base.elapsed(), || nothing_on_timeout(io.flush()))?;
    flushed.then_some(()).ok_or(ConnError::TimedOut)
}
