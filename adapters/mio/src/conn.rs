//! One connection's readiness-driven state: the socket, the read side's
//! state machine, the write queue, and the interest they need.

use std::io::{self, IoSlice, Read, Write};
use std::time::{Duration, Instant};

use cleave_proto::{Bytes, Frame, Inbound, Rejected, Ticket, WriteQueue, WriteQueueConfig};
use mio::event::Source;
use mio::{Interest, Registry, Token};

use crate::error::ConnError;

/// How many slices one write hands the OS.
const SLICES: usize = 64;

/// What a [`Conn`] needs of its socket beyond `Read + Write`: a half-close,
/// whether a short read proves it empty, and a reset.
///
/// Implemented for mio's `TcpStream` and `UnixStream` (which has no
/// reset). A wrapper (TLS over a socket, say) implements it too:
/// `shutdown_write` as it sees fit (a no-op for a source that cannot
/// half-close), `short_read_drains` left `false` if a short read can leave
/// bytes behind, and `reset_on_close` by calling its socket's.
pub trait Socket: Read + Write {
    /// Shuts the sending half down: the peer reads the end of the stream.
    /// [`Conn::close_write`] calls it once the queue is empty.
    ///
    /// # Errors
    ///
    /// What the OS says.
    fn shutdown_write(&self) -> io::Result<()>;

    /// Whether a read that did not fill the buffer proves that the source
    /// holds nothing more, so that the read that would only say
    /// `WouldBlock` can be skipped. True for sockets under the
    /// edge-triggered selectors mio uses on Linux and the BSDs (new bytes
    /// raise a new event); false by default.
    fn short_read_drains(&self) -> bool {
        false
    }

    /// Makes the next close of the socket a reset: for TCP it sets
    /// `SO_LINGER` to zero, so that dropping the socket sends a RST and
    /// drops the data not yet sent, instead of a FIN after it.
    /// [`Conn::reset`] calls it.
    ///
    /// # Errors
    ///
    /// What the OS says. By default `Unsupported`: a source with no reset,
    /// whose peer sees a clean end when it is dropped.
    fn reset_on_close(&self) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// epoll and kqueue: a short read on a socket drained it.
const EDGE_TRIGGERED: bool = cfg!(any(
    target_os = "linux",
    target_os = "android",
    target_os = "illumos",
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd",
    target_os = "netbsd",
    target_os = "openbsd",
    target_os = "dragonfly",
));

impl Socket for mio::net::TcpStream {
    fn shutdown_write(&self) -> io::Result<()> {
        self.shutdown(std::net::Shutdown::Write)
    }

    fn short_read_drains(&self) -> bool {
        EDGE_TRIGGERED
    }

    fn reset_on_close(&self) -> io::Result<()> {
        socket2::SockRef::from(self).set_linger(Some(Duration::ZERO))
    }
}

#[cfg(unix)]
impl Socket for mio::net::UnixStream {
    fn shutdown_write(&self) -> io::Result<()> {
        self.shutdown(std::net::Shutdown::Write)
    }

    fn short_read_drains(&self) -> bool {
        EDGE_TRIGGERED
    }
}

/// What a [`Conn::on_readable`] call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOutcome {
    /// Bytes read from the socket.
    pub read: usize,
    /// Whether the peer ended its side (now or before).
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
/// have.
///
/// It owns the socket, the read side's state machine (any
/// [`Inbound`]: a [`cleave_proto::Session`], a [`cleave_proto::Framed`] decoder) and a
/// [`WriteQueue`]. Call [`on_readable`](Self::on_readable) and
/// [`on_writable`](Self::on_writable) when mio says so, push what to send,
/// and keep the registration up to date with
/// [`update_registration`](Self::update_registration): it asks for
/// `WRITABLE` only while something is queued, so an idle connection never
/// wakes the loop.
///
/// ```text
///   accept ─> Conn::new(socket, inbound) ─> register(registry, token)
///   event.is_readable()  ─> on_readable(&mut events)   (reads until WouldBlock or the
///                                                       read budget: `more` says read on)
///                            handle events; push / push_frame answers
///   event.is_writable()  ─> on_writable()              (writes until WouldBlock or empty)
///   after pushing        ─> on_writable()              (write now; WRITABLE covers the rest)
///   deadline() passed    ─> on_deadline(&mut events)
///   then, every time     ─> update_registration(registry, token)
///                            is_finished() ─> drop it
///
///   tunnelling two Conns (a proxy):
///   one side's EOF       ─> the other's close_write()   (a clean end stays a half-close)
///   one side's ConnError::Io, reading or writing
///                        ─> the other's reset()         (a failure stays a failure)
///                            deregister both and drop them: the RST goes out
/// ```
///
/// An idle connection holds no buffers: when a read finds the socket
/// empty, the receive buffer gives back what it does not need
/// ([`RecvBuf::release_idle`](cleave_proto::RecvBuf::release_idle)), and so
/// does the write queue once flushed; nothing is allocated before the
/// socket is readable.
///
/// Reads go straight into the [`Inbound`]'s [`RecvBuf`](cleave_proto::RecvBuf)
/// (no second copy); writes are vectored.
#[derive(Debug)]
pub struct Conn<S, P> {
    io: S,
    inbound: P,
    queue: WriteQueue,
    started: Instant,
    /// The peer ended its side, or reading stopped for an error.
    read_done: bool,
    /// The caller stopped reading for now (flow control).
    paused: bool,
    /// `close_write` was called; `true` once the socket was shut down.
    closing: bool,
    write_shut: bool,
    /// A write failed: nothing more goes out.
    write_failed: bool,
    /// Bytes one read call takes before it stops (`ReadOutcome::more`).
    read_budget: usize,
    /// The inbound was polled at least once (its clock started).
    polled: bool,
    /// The last read found the socket empty (see `went_idle`).
    idle: bool,
    /// What the socket is registered for, if it is.
    registered: Option<Interest>,
}

impl<S: Socket, P: Inbound> Conn<S, P> {
    /// Drives `io` with `inbound` and the default write queue, from now.
    pub fn new(io: S, inbound: P) -> Self {
        Self::with_queue(io, inbound, WriteQueueConfig::default())
    }

    /// Drives `io` with `inbound` and a write queue with the given limits.
    pub fn with_queue(io: S, inbound: P, config: WriteQueueConfig) -> Self {
        Self {
            io,
            inbound,
            queue: WriteQueue::with_config(config),
            started: Instant::now(),
            read_done: false,
            paused: false,
            closing: false,
            write_shut: false,
            write_failed: false,
            read_budget: DEFAULT_READ_BUDGET,
            polled: false,
            idle: false,
            registered: None,
        }
    }

    /// Reads until the socket would block, the peer ends its side, the read
    /// side's state machine is done or the [read
    /// budget](Self::set_read_budget) is spent, and appends the events the
    /// bytes make to `events`.
    ///
    /// Call it on every readable event (mio's are edge-triggered: the
    /// socket must be read until it would block), and once after
    /// [`pause_reading(false)`](Self::pause_reading).
    ///
    /// # Errors
    ///
    /// [`ConnError::Protocol`] when the bytes break the protocol or a limit
    /// (final; the unread bytes stay in the inbound's buffer),
    /// [`ConnError::Io`] when the socket fails (a reset, say). Events made
    /// before the error are in `events`.
    pub fn on_readable(&mut self, events: &mut Vec<P::Event>) -> Result<ReadOutcome, ConnError> {
        self.read(events, false)
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
        let mut outcome = ReadOutcome {
            eof: self.read_done,
            ..ReadOutcome::default()
        };
        let mut read = Ok(());
        if event.is_readable() || event.is_read_closed() || event.is_error() {
            let shortcut =
                !event.is_read_closed() && !event.is_error() && self.io.short_read_drains();
            read = self.read(events, shortcut).map(|o| outcome = o);
        }
        // Even when the read failed: a writable edge comes once, and an
        // answer to the bad input may be queued.
        if event.is_writable() || event.is_write_closed() {
            let written = self.on_writable();
            if read.is_ok() {
                written?;
            }
        }
        read.map(|()| outcome)
    }

    /// Reads as [`on_readable`](Self::on_readable) says; any error ends the
    /// read side (a protocol error is final, a full buffer stays full).
    fn read(
        &mut self,
        events: &mut Vec<P::Event>,
        shortcut: bool,
    ) -> Result<ReadOutcome, ConnError> {
        let read = self.read_until_empty(events, shortcut);
        if read.is_err() {
            self.read_done = true;
        }
        read
    }

    fn read_until_empty(
        &mut self,
        events: &mut Vec<P::Event>,
        shortcut: bool,
    ) -> Result<ReadOutcome, ConnError> {
        let mut outcome = ReadOutcome::default();
        while !self.read_done && !self.paused && !self.inbound.is_closed() {
            let buf = self.inbound.recv_buf();
            let spare = buf.spare_mut()?;
            match self.io.read(spare) {
                Ok(0) => {
                    buf.commit(0)?;
                    self.read_done = true;
                    self.inbound.handle_eof();
                }
                Ok(n) => {
                    self.idle = false;
                    let drained = n < spare.len();
                    buf.commit(n)?;
                    outcome.read += n;
                    // A read that did not fill the buffer emptied the
                    // socket (see `Socket::short_read_drains`): skip the
                    // read that would only say WouldBlock, as tokio does.
                    if drained && shortcut {
                        self.poll_events(events)?;
                        self.went_idle();
                        break;
                    }
                }
                Err(e) => {
                    buf.commit(0)?;
                    match e.kind() {
                        io::ErrorKind::WouldBlock => {
                            self.went_idle();
                            break;
                        }
                        io::ErrorKind::Interrupted => continue,
                        _ => {
                            self.read_done = true;
                            self.poll_events(events)?;
                            return Err(e.into());
                        }
                    }
                }
            }
            self.poll_events(events)?;
            if outcome.read >= self.read_budget && !self.read_done {
                outcome.more = true;
                break;
            }
        }
        outcome.eof = self.read_done;
        Ok(outcome)
    }

    /// The socket has nothing more to read: the connection waits for its
    /// peer, so its buffers give back what they do not need (an empty
    /// receive buffer its block, a flushed queue its run buffer).
    fn went_idle(&mut self) {
        self.idle = true;
        self.inbound.recv_buf().release_idle();
        self.queue.release_idle();
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
    /// empty; then, if [`close_write`](Self::close_write) was called and
    /// everything is out, shuts the write half down. Returns whether the
    /// queue is empty.
    ///
    /// Call it on every writable event and right after pushing.
    ///
    /// # Errors
    ///
    /// What the socket says; the queue is aborted then (its tickets will
    /// never complete) and nothing more is written.
    pub fn on_writable(&mut self) -> Result<bool, ConnError> {
        if self.write_failed {
            return Err(ConnError::Io(io::ErrorKind::BrokenPipe.into()));
        }
        if let Err(e) = self.drain() {
            self.write_failed = true;
            self.queue.abort();
            return Err(e.into());
        }
        let flushed = self.queue.is_flushed();
        if flushed && self.idle {
            // Answered, and nothing more to read: keep no write memory.
            self.queue.release_idle();
        }
        if flushed && self.closing && !self.write_shut {
            self.write_shut = true;
            self.io.shutdown_write()?;
        }
        Ok(flushed)
    }

    fn drain(&mut self) -> io::Result<()> {
        while !self.queue.is_flushed() {
            let written = {
                let mut slices = [IoSlice::new(&[]); SLICES];
                let n = self.queue.io_slices(&mut slices);
                match self.io.write_vectored(&slices[..n]) {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(written) => written,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            };
            self.queue
                .advance(written)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        }
        Ok(())
    }

    /// Polls the read side with the time since the connection began: call
    /// it when [`deadline`](Self::deadline) has passed (a session's inspect
    /// delay), and the routing decision comes out.
    ///
    /// # Errors
    ///
    /// As [`on_readable`](Self::on_readable)'s protocol errors.
    pub fn on_deadline(&mut self, events: &mut Vec<P::Event>) -> Result<(), ConnError> {
        let polled = self.poll_events(events);
        if polled.is_err() {
            self.read_done = true;
        }
        polled
    }

    fn poll_events(&mut self, events: &mut Vec<P::Event>) -> Result<(), ConnError> {
        self.polled = true;
        let now = self.started.elapsed();
        while let Some(event) = self.inbound.poll_event(now)? {
            events.push(event);
        }
        Ok(())
    }

    /// When the read side wants to be polled even if nothing arrives, with
    /// [`on_deadline`](Self::on_deadline); use it for the poll loop's
    /// timeout.
    ///
    /// Until the read side is polled the first time (by a read or by
    /// `on_deadline`), this is the connection's start: the first poll
    /// starts its clock, so a session's inspect delay runs even for a
    /// client that never sends a byte (and never makes the socket
    /// readable), and it gives the events the read side can make without
    /// input (a router that decides on no bytes, frames already buffered).
    pub fn deadline(&self) -> Option<Instant> {
        if !self.polled {
            return Some(self.started);
        }
        // A delay past what `Instant` can hold is no deadline at all.
        self.inbound
            .deadline()
            .and_then(|d| self.started.checked_add(d))
    }

    /// The time the read side's clock counts from (the connection's start).
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Queues `bytes`; see [`WriteQueue::push`]. Call
    /// [`on_writable`](Self::on_writable) afterwards to write.
    ///
    /// # Errors
    ///
    /// The bytes come back when the queue is full or closed.
    pub fn push(&mut self, bytes: Bytes) -> Result<Ticket, Rejected<Bytes>> {
        self.queue.push(bytes)
    }

    /// Queues an encoded frame; see [`WriteQueue::push_frame`].
    ///
    /// # Errors
    ///
    /// The frame comes back when the queue is full or closed.
    #[allow(clippy::result_large_err)] // the frame comes back by value, as in the core
    pub fn push_frame(&mut self, frame: Frame) -> Result<Ticket, Rejected<Frame>> {
        self.queue.push_frame(frame)
    }

    /// Stops (or resumes) reading, for flow control: while paused, the
    /// connection does not ask for `READABLE`. After resuming, call
    /// [`on_readable`](Self::on_readable) once: bytes may be waiting, and
    /// no new event will say so.
    pub fn pause_reading(&mut self, paused: bool) {
        self.paused = paused;
    }

    /// Closes the write queue: what is queued still goes out, then the
    /// write half is shut down (by [`on_writable`](Self::on_writable)).
    pub fn close_write(&mut self) {
        self.queue.close();
        self.closing = true;
    }

    /// Ends the connection with a reset: makes the socket's close a reset
    /// ([`Socket::reset_on_close`]: for TCP, `SO_LINGER` 0), aborts the
    /// write queue (its tickets never complete; pushes are refused) and
    /// ends reading and writing, so that [`is_finished`](Self::is_finished)
    /// is true and [`interest`](Self::interest) is `None`. Deregister the
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
        let reset = self.io.reset_on_close();
        self.queue.abort();
        // Nothing more goes out or comes in: both sides are done.
        self.write_failed = true;
        self.read_done = true;
        reset
    }

    /// What the connection needs to be woken for: `READABLE` while it
    /// reads, `WRITABLE` only while something is queued (or a shutdown is
    /// due). `None` when it needs nothing: it is finished, or paused with
    /// nothing to write.
    pub fn interest(&self) -> Option<Interest> {
        let read = !self.read_done && !self.paused && !self.inbound.is_closed();
        let write =
            !self.write_failed && (!self.queue.is_flushed() || (self.closing && !self.write_shut));
        match (read, write) {
            (true, true) => Some(Interest::READABLE | Interest::WRITABLE),
            (true, false) => Some(Interest::READABLE),
            (false, true) => Some(Interest::WRITABLE),
            (false, false) => None,
        }
    }

    /// Whether both sides are done: the peer ended (or reading failed) and
    /// everything queued is written (and the write half shut down, if
    /// [`close_write`](Self::close_write) was called), or writing failed.
    pub fn is_finished(&self) -> bool {
        let read = self.read_done || self.inbound.is_closed();
        let write =
            self.write_failed || (self.queue.is_flushed() && self.write_shut == self.closing);
        read && write
    }

    /// Whether the peer ended its side (or reading stopped for an error).
    pub fn is_read_closed(&self) -> bool {
        self.read_done
    }

    /// The read side's state machine.
    pub fn inbound(&self) -> &P {
        &self.inbound
    }

    /// The read side's state machine, to inspect or reconfigure it.
    pub fn inbound_mut(&mut self) -> &mut P {
        &mut self.inbound
    }

    /// The write queue.
    pub fn queue(&self) -> &WriteQueue {
        &self.queue
    }

    /// The write queue, to push urgent data, close or inspect it.
    pub fn queue_mut(&mut self) -> &mut WriteQueue {
        &mut self.queue
    }

    /// The socket.
    pub fn get_ref(&self) -> &S {
        &self.io
    }

    /// The socket and the state: the inbound's buffer holds what was read
    /// and not handed out, the queue what was not written. Deregister the
    /// socket first if it is registered.
    pub fn into_parts(self) -> (S, P, WriteQueue) {
        (self.io, self.inbound, self.queue)
    }
}

impl<S: Socket + Source, P: Inbound> Conn<S, P> {
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
