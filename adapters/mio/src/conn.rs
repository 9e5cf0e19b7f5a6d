//! The driver: the core's [`cleave_proto::Conn`] over a socket, on
//! readiness.

use std::io;
use std::time::{Duration, Instant};

use cleave_proto::conn::{ConnConfig, Protocol, Shutdown};
use mio::event::Source;
use mio::{Interest, Registry, Token};

use crate::error::ConnError;
use crate::socket::{connect_over, Socket};

/// What a [`Conn::on_readable`] call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOutcome {
    /// Bytes read from the socket.
    pub read: usize,
    /// Whether the peer ended its side, or reading stopped (now or before).
    pub eof: bool,
    /// Whether reading stopped at the read budget with bytes perhaps left
    /// in the socket: no new event will say so, so call
    /// [`Conn::on_readable`] again once the events are handled (before the
    /// next blocking poll).
    pub more: bool,
}

/// Default [`Conn::set_read_budget`]: 64 KiB a call.
pub const DEFAULT_READ_BUDGET: usize = 64 * 1024;

/// One connection driven on readiness, inside a poll loop you already
/// have: the socket and the core's [`cleave_proto::Conn`], which owns the
/// receive buffer, the write queue, the lifecycle and the timeouts.
///
/// It moves bytes between the socket and the core and keeps the
/// registration in line with what the core wants; every decision (when
/// the read side is over, when to shut the write half, which timeout ran
/// out) is the core's. The protocol is any [`Protocol`]: a
/// [`Framed`](cleave_proto::Framed) decoder, a routing
/// [`Session`](cleave_proto::Session), [`Raw`](cleave_proto::Raw) bytes,
/// or one of yours that answers on the urgent lane.
///
/// ```text
///   accept ─> Conn::with_config(socket, protocol, config) ─> register(registry, token)
///   an event             ─> on_event(event, &mut out)   reads until WouldBlock or the read
///                                                       budget (`more`: read on), and
///                                                       writes if writable
///                            handle `out`; push answers
///   after pushing        ─> on_writable()               write now; WRITABLE covers the rest
///   deadline() passed    ─> on_timeout(&mut out)        a timeout, an inspect delay
///   then, every time     ─> update_registration(registry, token)
///                            is_finished() ─> drop it
///
///   tunnelling two Conns (a proxy):
///   one side's EOF       ─> the other's close()         (a clean end stays a half-close)
///   one side's ConnError::Io, reading or writing
///                        ─> the other's reset()         (a failure stays a failure)
/// ```
///
/// An idle connection holds no buffers: when a read finds the socket
/// empty, the buffers give back what they do not need
/// ([`cleave_proto::Conn::release_idle`]), and so does the queue once the
/// answers are written. Reads go straight into the receive buffer (no
/// second copy); writes are vectored.
#[derive(Debug)]
pub struct Conn<S, P> {
    io: S,
    conn: cleave_proto::Conn<P>,
    /// The core's clock counts from here: `now` is `base.elapsed()`.
    base: Instant,
    /// Bytes one read call takes before it stops (`ReadOutcome::more`).
    read_budget: usize,
    /// The last read found the socket empty: the connection waits for its
    /// peer, so a queue written out gives its memory back (a busy writer
    /// keeps it).
    drained: bool,
    /// What the socket is registered for, if it is.
    registered: Option<Interest>,
    /// A write made room after a push was refused for it: the protocol
    /// may go on (an owed reply, the bytes behind it) with no new event,
    /// so it is asked again at once (`deadline` is now).
    repoll: bool,
    /// The socket showed that a connect, if it had one, is over: a
    /// writable (or error) event came and the socket agreed, or a read
    /// gave bytes or the end of its stream (a connecting socket gives
    /// neither). A FIN may go ([`Socket::is_connecting`]).
    writable_seen: bool,
}

impl<S: Socket, P: Protocol> Conn<S, P> {
    /// Drives `io` with `protocol`, a default buffer and queue and no
    /// timeouts, from now.
    pub fn new(io: S, protocol: P) -> Self {
        Self::with_config(io, protocol, ConnConfig::default())
    }

    /// Drives `io` with `protocol` and the given buffer, queue and
    /// timeouts, from now: the timeouts run from here, before the first
    /// byte arrives.
    pub fn with_config(io: S, protocol: P, config: ConnConfig) -> Self {
        Self {
            io,
            conn: cleave_proto::Conn::with_config(protocol, config, Duration::ZERO),
            base: Instant::now(),
            read_budget: DEFAULT_READ_BUDGET,
            drained: false,
            registered: None,
            repoll: false,
            writable_seen: false,
        }
    }

    fn now(&self) -> Duration {
        self.base.elapsed()
    }

    /// Handles one of mio's events for this connection: reads if it is
    /// readable (or closed, or failed), writes if it is writable.
    ///
    /// Unlike [`on_readable`](Self::on_readable), it knows whether the
    /// event already said that the peer closed its side, so on sockets
    /// where a short read proves the socket empty
    /// ([`Socket::short_read_drains`]) it skips the last read that would
    /// only say `WouldBlock`: one system call fewer per event.
    ///
    /// # Errors
    ///
    /// As [`on_readable`](Self::on_readable) and
    /// [`on_writable`](Self::on_writable).
    pub fn on_event(
        &mut self,
        event: &mio::event::Event,
        events: &mut Vec<P::Event>,
    ) -> Result<ReadOutcome, ConnError> {
        let mut read = Ok(ReadOutcome {
            eof: self.conn.is_read_closed(),
            ..ReadOutcome::default()
        });
        if event.is_readable() || event.is_read_closed() || event.is_error() {
            let shortcut =
                !event.is_read_closed() && !event.is_error() && self.io.short_read_drains();
            read = self.read(events, shortcut);
        }
        if !self.writable_seen
            && (event.is_writable() || event.is_write_closed() || event.is_error())
        {
            read = self.check_connect(read);
        }
        // Even when the read failed: a writable edge comes once, and an
        // answer to the bad input may be queued.
        if event.is_writable() || event.is_write_closed() {
            let written = self.on_writable();
            if read.is_ok() {
                written?;
            }
        }
        // Room the write made lets a protocol that waited for it go on.
        while self.repoll && read.is_ok() {
            self.repoll = false;
            self.poll_events(events)?;
            self.on_writable()?;
        }
        read
    }

    /// After a writable (or error) event, until one showed it: whether
    /// the socket's connect, if it had one, is over ([`connect_over`]: an
    /// event alone does not say so, the socket does). A read that failed
    /// took its error; if none did, the error [`Socket::take_error`]
    /// takes is the read's failure, as a read would have reported it.
    fn check_connect(
        &mut self,
        read: Result<ReadOutcome, ConnError>,
    ) -> Result<ReadOutcome, ConnError> {
        // A read that failed (the socket's error) or broke the protocol
        // (bytes came) was on a socket that is not connecting.
        if read.is_err() {
            self.writable_seen = true;
            return read;
        }
        match connect_over(&self.io) {
            Ok(over) => {
                self.writable_seen = over;
                read
            }
            Err(e) => {
                self.writable_seen = true;
                self.conn.handle_read_error(self.now());
                Err(ConnError::Io(e))
            }
        }
    }

    /// Reads until the socket would block, the core wants no more bytes
    /// (the peer ended its side, the protocol is done or failed, reading is
    /// paused) or the [read budget](Self::set_read_budget) is spent, and
    /// appends the events the bytes make to `events`.
    ///
    /// Call it on every readable event (mio's are edge-triggered: the
    /// socket must be read until it would block), and once after
    /// [`pause_reading(false)`](Self::pause_reading) or a
    /// [`switch`](Self::switch). When it reads nothing it still hands out
    /// what the protocol has left to say.
    ///
    /// # Errors
    ///
    /// [`ConnError::Protocol`] when the bytes break the protocol or a limit
    /// (final; the unread bytes stay in the connection's buffer),
    /// [`ConnError::Io`] when the socket fails (a reset, say). Events made
    /// before the error are in `events`.
    pub fn on_readable(&mut self, events: &mut Vec<P::Event>) -> Result<ReadOutcome, ConnError> {
        self.read(events, false)
    }

    fn read(
        &mut self,
        events: &mut Vec<P::Event>,
        shortcut: bool,
    ) -> Result<ReadOutcome, ConnError> {
        let mut outcome = ReadOutcome::default();
        if self.conn.error().is_none() {
            // Before reading: a protocol just switched to may have
            // buffered bytes, or the end of the stream, to hand out, and
            // one that waited for room may go on.
            self.repoll = false;
            self.poll_events(events)?;
        }
        while self.conn.wants_read() {
            let (io, mut room) = (&mut self.io, 0);
            let read = self.conn.read_io(self.base.elapsed(), |spare| {
                room = spare.len();
                match io.read(spare) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
                    read => read.map(Some),
                }
            });
            let n = match read {
                Ok(Some(n)) => {
                    // Bytes or the end of the stream: no connecting socket
                    // gives either (one closed both ways has no peer either).
                    self.writable_seen = true;
                    n
                }
                Ok(None) => {
                    self.went_idle();
                    break;
                }
                Err(e) => {
                    self.poll_events(events)?; // what was complete before it
                    return Err(e);
                }
            };
            outcome.read += n;
            self.drained = false;
            // A read that did not fill the room emptied the socket (see
            // `Socket::short_read_drains`): the read that would only say
            // WouldBlock can be skipped, as tokio does.
            let emptied = 0 < n && n < room;
            self.poll_events(events)?;
            if shortcut && emptied {
                self.went_idle();
                break;
            }
            if outcome.read >= self.read_budget && self.conn.wants_read() {
                outcome.more = true;
                break;
            }
        }
        outcome.eof = self.conn.is_read_closed();
        Ok(outcome)
    }

    /// The socket is empty: the buffers give back what they do not need.
    fn went_idle(&mut self) {
        self.drained = true;
        self.conn.release_idle();
    }

    fn poll_events(&mut self, events: &mut Vec<P::Event>) -> Result<(), ConnError> {
        while let Some(event) = self.conn.poll_event()? {
            events.push(event);
        }
        Ok(())
    }

    /// How many bytes one [`on_event`](Self::on_event) or
    /// [`on_readable`](Self::on_readable) call reads at most before it
    /// stops and says [`more`](ReadOutcome::more) (the last read may go
    /// past it by one read's worth). It bounds what one call hands out
    /// (the events hold the bytes until they are handled) and keeps one
    /// busy connection from starving the others on the loop.
    pub fn set_read_budget(&mut self, bytes: usize) {
        self.read_budget = bytes.max(1);
    }

    /// Writes what is queued until the socket would block or the queue is
    /// empty; then does what the core asks of the socket: shut the write
    /// half down once everything is out after [`close`](Self::close), or
    /// make its close a reset. Returns whether the queue is empty.
    ///
    /// Call it on every writable event and right after pushing.
    ///
    /// # Errors
    ///
    /// What the socket says; the queue is aborted then (its tickets will
    /// never complete) and nothing more is written.
    pub fn on_writable(&mut self) -> Result<bool, ConnError> {
        let mut wrote = false;
        loop {
            let io = &mut self.io;
            let written = self.conn.write_io(self.base.elapsed(), |slices| {
                match io.write_vectored(slices) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
                    written => written.map(Some),
                }
            });
            match written? {
                Some(0) => break, // nothing queued, or nothing may go out
                Some(_) => wrote = true,
                None => {
                    self.note_room(wrote);
                    return Ok(false);
                }
            }
        }
        self.note_room(wrote);
        if self.drained {
            // Answered, and nothing more to read: keep no write memory (by
            // the connection's rule: at once, or once quiet for its
            // `release_after`).
            self.conn.release_idle();
        }
        match self.shut_down() {
            // A source with no reset: its peer sees a clean end.
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {}
            done => done?,
        }
        Ok(self.conn.queue().is_flushed())
    }

    /// After a write: if it made room and a push was refused for room
    /// since the last look, the protocol is to be asked again.
    fn note_room(&mut self, wrote: bool) {
        if wrote && self.conn.queue_mut().take_refused() {
            self.repoll = true;
        }
    }

    /// Does to the socket what the core asks: a FIN or a reset. A FIN
    /// waits while the socket is still connecting (it would abort the
    /// connect): the socket's writable event lets it go.
    fn shut_down(&mut self) -> io::Result<()> {
        if !self.writable_seen && self.conn.poll_shutdown() == Some(Shutdown::Write) {
            if self.io.is_connecting() {
                return Ok(());
            }
            self.writable_seen = true;
        }
        let io = &mut self.io;
        self.conn.shutdown_with(|how| match how {
            Shutdown::Write => io.shutdown_write(),
            Shutdown::Reset => io.reset_on_close(),
        })
    }

    /// Call it when [`deadline`](Self::deadline) has passed: ends the
    /// connection if one of its timeouts ran out, or lets the protocol
    /// decide by the clock (a session's inspect delay: the routing decision
    /// comes out in `events`). A timeout that ended the connection is acted
    /// on at once: the write half is shut after what is queued, or the
    /// socket set to reset, as the protocol said.
    ///
    /// # Errors
    ///
    /// [`ConnError::Protocol`] with [`cleave_proto::Error::TimedOut`] when a
    /// timeout ran out, and as [`on_readable`](Self::on_readable)'s
    /// protocol errors and [`on_writable`](Self::on_writable)'s.
    pub fn on_timeout(&mut self, events: &mut Vec<P::Event>) -> Result<(), ConnError> {
        self.conn.handle_timeout(self.now());
        self.repoll = false;
        let polled = self.poll_events(events);
        let written = self.on_writable();
        polled?;
        written.map(drop)
    }

    /// When to call [`on_timeout`](Self::on_timeout) even if no event
    /// comes: the earliest of the connection's running timeouts and the
    /// protocol's own deadline (a session's inspect delay), known from the
    /// start. Use it for the poll loop's timeout. `None` when nothing
    /// runs (a deadline past what `Instant` can hold is none at all).
    ///
    /// It is now when a write made room for a protocol that waited for it
    /// (a reply it could not queue, and the bytes behind it): no event
    /// will come for that, and `on_timeout` asks the protocol again.
    #[must_use]
    pub fn deadline(&self) -> Option<Instant> {
        if self.repoll {
            // A write made room for a protocol that waited for it: ask it
            // again now, through `on_timeout`.
            return Some(self.base + self.now());
        }
        self.conn
            .poll_timeout()
            .and_then(|at| self.base.checked_add(at))
    }

    /// The time the connection's clock counts from (its creation).
    #[must_use]
    pub fn started(&self) -> Instant {
        self.base
    }

    /// Ends the write side cleanly: the queue takes nothing more, what it
    /// holds still goes out, then the write half is shut down (by
    /// [`on_writable`](Self::on_writable)).
    pub fn close(&mut self) {
        self.conn.close();
    }

    /// Ends the connection with a reset, at once: aborts the write queue
    /// (its tickets never complete; pushes are refused), stops reading and
    /// makes the socket's close a reset ([`Socket::reset_on_close`]: for
    /// TCP, `SO_LINGER` 0), so that [`is_finished`](Self::is_finished) is
    /// true and [`interest`](Self::interest) is `None`. Deregister the
    /// connection and drop it: dropping the socket sends the RST, and drops
    /// what the kernel had not sent yet.
    ///
    /// Use it when the peer must not mistake the end for a clean one: when
    /// one side of a tunnel fails (a reset, a failed write), `reset()` the
    /// other, so that a cut-off response or upload arrives as a reset after
    /// the bytes that made it, not as a complete stream.
    ///
    /// # Errors
    ///
    /// What [`Socket::reset_on_close`] says (`Unsupported` for a source
    /// with no reset, whose peer then sees a clean end). The connection is
    /// finished either way.
    pub fn reset(&mut self) -> io::Result<()> {
        self.conn.reset();
        self.shut_down()
    }

    /// Stops (or resumes) reading, for flow control: while paused, the
    /// connection does not ask for `READABLE`. After resuming, call
    /// [`on_readable`](Self::on_readable) once: bytes may be waiting, and
    /// no new event will say so.
    pub fn pause_reading(&mut self, paused: bool) {
        self.conn.pause_reading(paused);
    }

    /// What the connection needs to be woken for: `READABLE` while the core
    /// wants bytes, `WRITABLE` only while something is queued (or a
    /// shutdown is due). `None` when it needs nothing: it is finished, or
    /// paused with nothing to write.
    #[must_use]
    pub fn interest(&self) -> Option<Interest> {
        match (self.conn.wants_read(), self.conn.wants_write()) {
            (true, true) => Some(Interest::READABLE | Interest::WRITABLE),
            (true, false) => Some(Interest::READABLE),
            (false, true) => Some(Interest::WRITABLE),
            (false, false) => None,
        }
    }

    /// Whether the connection is over: no event will come and nothing is
    /// left to write (see [`cleave_proto::Conn::is_finished`]). Deregister
    /// and drop it.
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.conn.is_finished()
    }

    /// Whether the peer ended its side, or reading stopped (an error, a
    /// timeout, a reset).
    #[must_use]
    pub fn is_read_closed(&self) -> bool {
        self.conn.is_read_closed()
    }

    /// The core's connection: the buffer, the queue, the lifecycle.
    #[must_use]
    pub fn conn(&self) -> &cleave_proto::Conn<P> {
        &self.conn
    }

    /// The core's connection, to inspect the queue or change the timeouts.
    pub fn conn_mut(&mut self) -> &mut cleave_proto::Conn<P> {
        &mut self.conn
    }

    /// The socket.
    #[must_use]
    pub fn get_ref(&self) -> &S {
        &self.io
    }

    /// Hands the connection to another protocol: the same socket,
    /// registration, clock, buffer (unread bytes in place), queue and
    /// lifecycle (see [`cleave_proto::Conn::switch`]). After a routing
    /// decision, say, a [`Raw`](cleave_proto::Raw) tunnel.
    ///
    /// Call [`on_readable`](Self::on_readable) once after it: the new
    /// protocol may have bytes already read, or the end of the stream, to
    /// hand out, and no new event will say so.
    #[must_use = "the connection, with its unread bytes, is in the result"]
    pub fn switch<Q: Protocol>(self, next: impl FnOnce(P) -> Q) -> Conn<S, Q> {
        Conn {
            io: self.io,
            conn: self.conn.switch(next),
            base: self.base,
            read_budget: self.read_budget,
            drained: self.drained,
            registered: self.registered,
            repoll: self.repoll,
            writable_seen: self.writable_seen,
        }
    }

    /// The socket and the core's connection, whose buffer holds what was
    /// read and not handed out and whose queue what was not written.
    /// Deregister the socket first if it is registered.
    #[must_use = "the buffer holds the unread bytes: hand them on"]
    pub fn into_parts(self) -> (S, cleave_proto::Conn<P>) {
        (self.io, self.conn)
    }
}

impl<S: Socket + Source, P: Protocol> Conn<S, P> {
    /// Registers the socket with what [`interest`](Self::interest) says.
    ///
    /// # Errors
    ///
    /// What mio says.
    pub fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        self.registered = None;
        self.update_registration(registry, token)
    }

    /// Brings the registration in line with [`interest`](Self::interest):
    /// registers, reregisters or deregisters, and does nothing when it has
    /// not changed (no system call). Call it after handling each event.
    ///
    /// # Errors
    ///
    /// What mio says.
    pub fn update_registration(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        let want = self.interest();
        match (self.registered, want) {
            (current, wanted) if current == wanted => {}
            (None, Some(interest)) => registry.register(&mut self.io, token, interest)?,
            (Some(_), Some(interest)) => registry.reregister(&mut self.io, token, interest)?,
            (Some(_), None) => registry.deregister(&mut self.io)?,
            (None, None) => {}
        }
        self.registered = want;
        Ok(())
    }

    /// Deregisters the socket if it is registered.
    ///
    /// # Errors
    ///
    /// What mio says.
    pub fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        if self.registered.take().is_some() {
            registry.deregister(&mut self.io)?;
        }
        Ok(())
    }
}
