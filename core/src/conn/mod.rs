//! [`Conn`]: one connection in both directions — the receive buffer, the
//! write queue, the lifecycle and the timers — driven by a [`Protocol`].
//!
//! ```text
//!   adapter                          core: Conn<P: Protocol>  (RecvBuf + WriteQueue + lifecycle)
//!   ───────                          ─────────────────────────────────────────────────────────
//!   read into conn.spare_mut() ───>  handle_read(n, now) / handle_eof(now)   (or read_with, read_io)
//!   timer fired ──────────────────>  handle_timeout(now)
//!                                    poll_event()     -> the protocol's next event, or None
//!   writev(conn.poll_transmit()) ─>  handle_written(n, now)                  (or write_with, write_io)
//!   shutdown / reset the socket <──  poll_shutdown()  -> handle_shutdown()
//!                                    poll_timeout()   -> when to call handle_timeout
//!                                    wants_read() / wants_write() / is_finished()
//! ```

mod app;
#[cfg(feature = "std")]
mod io;
mod protocol;
#[cfg(feature = "std")]
mod shared;
mod time;
mod timeouts;

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::time::Duration;

use bytes::Bytes;

use crate::encoder::Frame;
use crate::error::Error;
use crate::recv_buf::RecvBuf;
use crate::write::{Progress, WriteQueue};

#[cfg(feature = "std")]
pub use io::write_chunks;
pub use protocol::{Close, Phase, Protocol, Wire};
#[cfg(feature = "std")]
pub use shared::{Shared, TurnStart};
use timeouts::{nanos, Nanos, NEVER};
pub use timeouts::{ConnConfig, Timeouts};

/// What the adapter must do to the socket, from [`Conn::poll_shutdown`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shutdown {
    /// Shut the write half down (a FIN): everything queued is out.
    Write,
    /// Make the socket's close a reset (for TCP, `SO_LINGER` 0) and close
    /// it: what was queued was dropped.
    Reset,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadSide {
    Open,
    /// The peer ended its side.
    Ended,
    /// Reading failed (an I/O error the adapter reported).
    Failed,
    /// Nothing more is read: the protocol failed, a timeout ran out, or
    /// the connection was reset.
    Stopped,
    /// Reading failed or stopped, and the protocol has made what the
    /// buffered bytes made (`poll_event` said `Ok(None)`): no event comes
    /// any more.
    Over,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WriteSide {
    Open,
    /// Closed: what is queued goes out, then the write half is shut.
    Closing,
    Shut,
    /// A reset was asked for and not done yet.
    Resetting,
    Reset,
    /// Writing failed: the queue was aborted.
    Failed,
}

/// The connection's clock readings, on the driver's clock, in nanoseconds
/// (48 bytes, not 96, in every connection).
#[derive(Clone, Copy, Debug)]
struct Clock {
    /// The latest `now` a handler was given.
    now: Nanos,
    /// When the connection (or its current protocol) started.
    started: Nanos,
    /// When the last byte went either way.
    active: Nanos,
    /// Since when an incomplete frame has been waiting (`NEVER`: none is).
    partial_since: Nanos,
    /// How long the connection stays quiet before its idle memory goes
    /// back (`ConnConfig::release_after`; 0: whenever the driver asks).
    release_after: Nanos,
    /// The `active` of the quiet spell whose memory went back (`NEVER`:
    /// none yet): one release a spell, and no deadline after it.
    released: Nanos,
}

/// One connection in both directions: a [`RecvBuf`], a [`WriteQueue`], the
/// lifecycle of both sides, the [`Timeouts`], and the [`Protocol`] that
/// makes events of the bytes. It does no I/O and reads no clock.
///
/// # How to drive it
///
/// Methods come in three kinds, quinn-proto style, and the driver calls
/// them in this order, again and again:
///
/// 1. **Handlers** take what happened, with the time `now` on any clock
///    the driver likes (only differences matter; the start is given to
///    [`new`](Self::new), so the deadlines are known before the first byte):
///    bytes read into [`spare_mut`](Self::spare_mut) then
///    [`handle_read`](Self::handle_read) (or [`read_with`](Self::read_with),
///    which does both and always commits), [`handle_eof`](Self::handle_eof),
///    [`handle_written`](Self::handle_written) (or
///    [`write_with`](Self::write_with)), [`handle_shutdown`](Self::handle_shutdown),
///    [`handle_timeout`](Self::handle_timeout), and the I/O failures
///    [`handle_read_error`](Self::handle_read_error) and
///    [`handle_write_error`](Self::handle_write_error). A driver over
///    `std::io` results reads and writes with `read_io` and `write_io`
///    (feature `std`), which also decide which outcomes are final, so
///    that every adapter treats a socket's errors alike.
/// 2. **Polls** give what to do: [`poll_event`](Self::poll_event) until
///    `Ok(None)` (the application's events; the protocol's own replies are
///    queued meanwhile), [`poll_transmit`](Self::poll_transmit) (the next
///    slices to write), [`poll_shutdown`](Self::poll_shutdown) (a FIN or a
///    reset is due) and [`poll_timeout`](Self::poll_timeout) (when to call
///    `handle_timeout`).
/// 3. **Questions** say what to wait for: [`wants_read`](Self::wants_read),
///    [`wants_write`](Self::wants_write), and
///    [`is_finished`](Self::is_finished) (drop it).
///
/// The application writes with [`push`](Self::push) (bulk lane) and ends
/// its side with [`close`](Self::close) or [`reset`](Self::reset).
///
/// # Lifecycle
///
/// ```text
///   read:  open ── handle_eof ──> ended ── protocol's last event ──> done
///            ├── handle_read_error ──> failed
///            └── protocol error / timeout ──> stopped
///   write: open ── close() ──> closing ── queue flushed: Shutdown::Write ──> shut
///            ├── reset() / timeout with Close::Reset ──> resetting ── Shutdown::Reset ──> reset
///            └── handle_write_error ──> failed (queue aborted)
/// ```
///
/// Errors are final: after a protocol error or a timeout,
/// [`poll_event`](Self::poll_event) returns the same error on every call,
/// and the bytes the protocol did not consume stay in the buffer
/// ([`recv_buf`](Self::recv_buf)).
///
/// ```
/// use cleave_proto::conn::{Conn, Framed};
/// use cleave_proto::{Bytes, Lines};
/// use core::time::Duration;
///
/// let mut conn = Conn::new(Framed::new(Lines::new()), Duration::ZERO);
/// conn.feed(b"ping\nhel", Duration::from_millis(1))?;
/// assert_eq!(conn.poll_event()?, Some(Bytes::from("ping")));
/// assert_eq!(conn.poll_event()?, None); // need more
/// conn.push(Bytes::from_static(b"pong\n")).unwrap();
/// let mut out = Vec::new();
/// while let Some(chunk) = conn.poll_transmit_chunk() {
///     out.extend_from_slice(&chunk);
///     conn.handle_written(chunk.len(), Duration::from_millis(2))?;
/// }
/// assert_eq!(out, b"pong\n");
/// conn.handle_eof(Duration::from_millis(3));
/// assert!(matches!(conn.poll_event(), Err(cleave_proto::Error::Truncated { .. })));
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Debug)]
pub struct Conn<P> {
    recv: RecvBuf,
    send: WriteQueue,
    protocol: P,
    /// The final error (a protocol's, or a timeout), boxed: rare, and an
    /// idle connection keeps 8 bytes for it.
    error: Option<Box<Error>>,
    timeouts: Timeouts,
    clock: Clock,
    read: ReadSide,
    write: WriteSide,
    paused: bool,
    /// The protocol's deadline passed and was handled: `poll_timeout`
    /// leaves it out while it stays in the past (the protocol acts on it at
    /// its next `poll_event`, or does not: either way it fired once).
    spent: bool,
    /// A late timer passed the protocol's deadline and a connection
    /// timeout after it, and the protocol's goes first: until the next
    /// `poll_event` gives the protocol its turn, the connection's timeout
    /// is held back (and left out of `poll_timeout`).
    turn_owed: bool,
    /// The reset came after the write side was shut cleanly: everything
    /// queued had gone out, so nothing was dropped.
    reset_after_shut: bool,
    /// The protocol's last frame, queued at the next write, then the
    /// write side closes ([`Wire::farewell`]).
    farewell: Option<Box<Frame>>,
}

impl<P: Protocol> Conn<P> {
    /// `protocol` over a default buffer and queue, no timeouts, started at
    /// `now`.
    pub fn new(protocol: P, now: Duration) -> Self {
        Self::with_config(protocol, ConnConfig::default(), now)
    }

    /// `protocol` with the given buffer, queue and timeouts, started at
    /// `now`.
    pub fn with_config(protocol: P, config: ConnConfig, now: Duration) -> Self {
        let mut conn = Self::from_parts(
            protocol,
            RecvBuf::with_config(*config.get_recv_buf()),
            WriteQueue::with_config(*config.get_write_queue()),
            *config.get_timeouts(),
            now,
        );
        conn.clock.release_after = nanos(config.get_release_after());
        conn
    }

    /// `protocol` over an existing buffer (bytes read before, by another
    /// protocol or another connection) and queue, started at `now`.
    pub fn from_parts(
        mut protocol: P,
        recv: RecvBuf,
        send: WriteQueue,
        timeouts: Timeouts,
        now: Duration,
    ) -> Self {
        protocol.start(now);
        let now = nanos(now);
        Self {
            recv,
            send,
            protocol,
            error: None,
            timeouts,
            clock: Clock {
                now,
                started: now,
                active: now,
                partial_since: NEVER,
                release_after: 0,
                released: NEVER,
            },
            read: ReadSide::Open,
            write: WriteSide::Open,
            paused: false,
            spent: false,
            turn_owed: false,
            reset_after_shut: false,
            farewell: None,
        }
    }

    // ----- handlers: the read side -----

    /// The buffer's spare room, to read into; then call
    /// [`handle_read`](Self::handle_read) with what arrived (0 included).
    ///
    /// # Errors
    ///
    /// As [`RecvBuf::spare_mut`]: the buffer is full ([`wants_read`](Self::wants_read)
    /// is false then).
    pub fn spare_mut(&mut self) -> Result<&mut [u8], Error> {
        self.recv.spare_mut()
    }

    /// `n` bytes were read into [`spare_mut`](Self::spare_mut); 0 is the end
    /// of the stream, as with `std::io::Read`.
    ///
    /// # Errors
    ///
    /// As [`RecvBuf::commit`]: more bytes than the spare room (the reader
    /// misbehaved); reading fails then.
    pub fn handle_read(&mut self, n: usize, now: Duration) -> Result<(), Error> {
        self.tick(now);
        if let Err(e) = self.recv.commit(n) {
            // Reading fails, unless it was over already (a reset, a
            // timeout): a late completion does not bring it back.
            if matches!(self.read, ReadSide::Open | ReadSide::Ended) {
                self.read = ReadSide::Failed;
            }
            return Err(e);
        }
        if n == 0 {
            self.eof();
        } else {
            self.clock.active = self.clock.now;
        }
        Ok(())
    }

    /// Appends bytes the peer sent, for a driver that owns its read buffer
    /// (a test, a user-space stack).
    ///
    /// # Errors
    ///
    /// As [`RecvBuf::feed`]: nothing is appended when they do not fit.
    pub fn feed(&mut self, data: &[u8], now: Duration) -> Result<(), Error> {
        self.tick(now);
        self.recv.feed(data)?;
        if !data.is_empty() {
            self.clock.active = self.clock.now;
        }
        Ok(())
    }

    /// Reads once with `read` straight into the spare room and always
    /// commits (0 when `read` fails), then handles what came: `Ok(0)` is
    /// the end of the stream. Returns what `read` said.
    ///
    /// ```
    /// # #[cfg(feature = "std")]
    /// # fn main() -> std::io::Result<()> {
    /// use cleave_proto::conn::{Conn, Framed};
    /// use cleave_proto::Lines;
    /// use core::time::Duration;
    ///
    /// let mut socket: &[u8] = b"one\ntwo\n";
    /// let mut conn = Conn::new(Framed::new(Lines::new()), Duration::ZERO);
    /// while conn.wants_read() {
    ///     // `std::io::Error` takes the core's errors (feature `std`).
    ///     conn.read_with(Duration::ZERO, |spare| std::io::Read::read(&mut socket, spare))?;
    /// }
    /// assert_eq!(conn.poll_event()?.as_deref(), Some(&b"one"[..]));
    /// # Ok(())
    /// # }
    /// # #[cfg(not(feature = "std"))]
    /// # fn main() {}
    /// ```
    ///
    /// # Errors
    ///
    /// What `read` returned (the adapter decides whether it is final:
    /// then it calls [`handle_read_error`](Self::handle_read_error)), or
    /// the core's error turned into `E`: a full buffer, or a reader that
    /// claimed more than the spare room (reading fails then).
    pub fn read_with<E: From<Error>>(
        &mut self,
        now: Duration,
        read: impl FnOnce(&mut [u8]) -> Result<usize, E>,
    ) -> Result<usize, E> {
        let spare = self.recv.spare_mut()?;
        match read(spare) {
            Ok(n) => {
                self.handle_read(n, now)?;
                Ok(n)
            }
            Err(e) => {
                self.tick(now);
                self.recv.commit(0)?;
                Err(e)
            }
        }
    }

    /// The peer ended its side: no more bytes will come.
    pub fn handle_eof(&mut self, now: Duration) {
        self.tick(now);
        self.eof();
    }

    fn eof(&mut self) {
        if self.read == ReadSide::Open {
            self.read = ReadSide::Ended;
        }
    }

    /// Reading failed (a reset, say): nothing more is read. Complete events
    /// still buffered can be polled. After the peer's end it changes
    /// nothing: the stream ended before, and what it left (a frame cut
    /// short, handed back as `Truncated`) is still the protocol's to say.
    pub fn handle_read_error(&mut self, now: Duration) {
        self.tick(now);
        if self.read == ReadSide::Open {
            self.read = ReadSide::Failed;
        }
    }

    // ----- handlers: the write side -----

    /// The writer took `n` bytes of what [`poll_transmit`](Self::poll_transmit)
    /// handed out.
    ///
    /// Once the queue was dropped (a reset, a failed write), a write that
    /// completes late (a chunk an io_uring driver still held) has nothing
    /// left to count against: it changes nothing.
    ///
    /// # Errors
    ///
    /// [`Misuse::AdvanceTooFar`](crate::Misuse::AdvanceTooFar) when `n` is
    /// more than was handed out: writing fails then.
    pub fn handle_written(&mut self, n: usize, now: Duration) -> Result<Progress, Error> {
        self.tick(now);
        if self.is_queue_dropped() {
            return self.send.advance(0);
        }
        match self.send.advance(n) {
            Ok(progress) => {
                if n > 0 {
                    self.clock.active = self.clock.now;
                }
                Ok(progress)
            }
            Err(e) => {
                self.handle_write_error(now);
                Err(e)
            }
        }
    }

    /// Writing failed: what is queued is dropped (its tickets never
    /// complete) and nothing more goes out. A write side that ended
    /// already (shut down after its last byte, or reset) stays as it
    /// ended: a socket error after a clean shutdown loses nothing. A reset
    /// asked for and not done yet is still asked for: the peer must not
    /// take the end for a clean one.
    pub fn handle_write_error(&mut self, now: Duration) {
        self.tick(now);
        self.fail_write();
    }

    fn fail_write(&mut self) {
        self.send.abort();
        if !matches!(
            self.write,
            WriteSide::Reset | WriteSide::Shut | WriteSide::Resetting
        ) {
            self.write = WriteSide::Failed;
        }
    }

    /// Does what [`poll_shutdown`](Self::poll_shutdown) asks, if anything,
    /// with `shut`, for drivers whose shutdown does not wait. Neither is
    /// tried again: a failed shutdown of the write half fails writing (as
    /// a failed write does), a failed reset is recorded done (best effort:
    /// the close is then a clean one).
    ///
    /// # Errors
    ///
    /// What `shut` returns.
    pub fn shutdown_with<E>(
        &mut self,
        shut: impl FnOnce(Shutdown) -> Result<(), E>,
    ) -> Result<(), E> {
        let Some(how) = self.poll_shutdown() else {
            return Ok(());
        };
        let done = shut(how);
        if done.is_err() && how == Shutdown::Write {
            self.fail_write();
        } else {
            self.handle_shutdown();
        }
        done
    }

    /// The adapter did what [`poll_shutdown`](Self::poll_shutdown) asked.
    pub fn handle_shutdown(&mut self) {
        self.write = match self.write {
            WriteSide::Closing => WriteSide::Shut,
            WriteSide::Resetting => WriteSide::Reset,
            other => other,
        };
    }

    // ----- polls -----

    /// The protocol's next event, or `Ok(None)` when it needs more bytes,
    /// the end of the stream or time. Call it after every handler until it
    /// returns `Ok(None)`. No event comes after the protocol's last one.
    ///
    /// # Errors
    ///
    /// The protocol's error, or [`Error::TimedOut`]: final, returned again
    /// on every later call; reading stops.
    #[inline(always)]
    pub fn poll_event(&mut self) -> Result<Option<P::Event>, Error> {
        // The protocol has its turn now (see `handle_timeout`).
        self.turn_owed = false;
        // The protocol's fast path, in the caller's loop (nothing, for a
        // protocol without one): the same event the full poll would give,
        // with the same bookkeeping (an event ends a partial frame's wait).
        if self.error.is_none()
            && self.read != ReadSide::Over
            && self.protocol.phase() != Phase::Done
        {
            let mut close_asked = false;
            if let Some(event) = self.with_wire(&mut close_asked, P::poll_fast) {
                debug_assert!(!close_asked, "a fast event asked to close");
                self.clock.partial_since = NEVER;
                return Ok(Some(event));
            }
            // Waiting for bytes with none buffered: what the full poll
            // would answer, and its bookkeeping (nothing partial waits).
            if self.read == ReadSide::Open
                && self.recv.is_empty()
                && self.protocol.waits_when_empty()
            {
                self.clock.partial_since = NEVER;
                return Ok(None);
            }
        }
        self.poll_event_full()
    }

    /// Runs `f` on the protocol with a [`Wire`] over this connection's
    /// buffer, queue and clock; `close_asked` says whether it asked to
    /// close the write side.
    #[inline(always)]
    pub(super) fn with_wire<R>(
        &mut self,
        close_asked: &mut bool,
        f: impl FnOnce(&mut P, &mut Wire<'_>) -> R,
    ) -> R {
        let mut wire = Wire {
            recv: &mut self.recv,
            send: &mut self.send,
            eof: self.read == ReadSide::Ended,
            now: self.clock.now,
            close: close_asked,
            farewell: &mut self.farewell,
        };
        f(&mut self.protocol, &mut wire)
    }

    /// [`poll_event`](Self::poll_event) the whole way.
    #[inline]
    fn poll_event_full(&mut self) -> Result<Option<P::Event>, Error> {
        if let Some(e) = &self.error {
            return Err((**e).clone());
        }
        let phase = self.protocol.phase();
        if phase == Phase::Done || self.read == ReadSide::Over {
            return Ok(None);
        }
        let mut close_asked = false;
        let polled = self.with_wire(&mut close_asked, P::poll_event);
        if close_asked {
            self.close();
        }
        // The answer is looked at in place and returned as it came: an
        // event is never rebuilt here (copying a head right after it was
        // built costs more than this bookkeeping).
        match &polled {
            Ok(Some(_)) => {
                self.clock.partial_since = NEVER;
                if phase != Phase::Tunnel && self.protocol.phase() == Phase::Tunnel {
                    // A tunnel's idle time counts from when it opened (a
                    // silent client routed by the clock must still give a
                    // server that speaks first its chance), then from each
                    // byte.
                    self.clock.active = self.clock.now;
                }
            }
            Ok(None) => {
                if matches!(self.read, ReadSide::Failed | ReadSide::Stopped)
                    && !self.protocol.waits_for_room()
                {
                    self.read = ReadSide::Over;
                }
                let framing = matches!(self.protocol.phase(), Phase::Opening | Phase::Framing);
                if !framing || self.recv.is_empty() {
                    self.clock.partial_since = NEVER;
                } else if self.clock.partial_since == NEVER {
                    self.clock.partial_since = self.clock.now;
                }
            }
            Err(e) => self.fail(e.clone()),
        }
        polled
    }

    fn fail(&mut self, e: Error) {
        self.error = Some(Box::new(e));
        // What is left to write gets an idle span of its own from here
        // (see `linger_deadline`).
        self.clock.active = self.clock.now;
        if matches!(self.read, ReadSide::Open | ReadSide::Ended) {
            self.read = ReadSide::Stopped;
        }
    }

    /// The next slices to write, in `out`; returns how many it filled (0:
    /// nothing to write). Write them with one vectored write, then call
    /// [`handle_written`](Self::handle_written) with what the writer took.
    #[cfg(feature = "std")]
    pub fn poll_transmit<'a>(&'a mut self, out: &mut [std::io::IoSlice<'a>]) -> usize {
        self.queue_farewell();
        if !self.writing() {
            return 0;
        }
        self.send.io_slices(out)
    }

    /// As [`poll_transmit`](Self::poll_transmit), as plain slices (no
    /// `std`).
    pub fn poll_transmit_slices<'a>(&'a mut self, out: &mut [&'a [u8]]) -> usize {
        self.queue_farewell();
        if !self.writing() {
            return 0;
        }
        self.send.chunks(out)
    }

    /// The next bytes to write as one owned chunk (a view of the queue's
    /// bytes, not a copy), for a driver that writes one buffer at a time
    /// (a test, an io_uring submission); `None` when nothing is queued.
    pub fn poll_transmit_chunk(&mut self) -> Option<Bytes> {
        self.queue_farewell();
        if !self.writing() {
            return None;
        }
        let mut chunks = Vec::with_capacity(1);
        self.send.chunks_owned(&mut chunks, 1);
        chunks.pop()
    }

    /// Writes once with `write` (the next slices; never called with none)
    /// and always advances the queue by what it took. Returns what `write`
    /// said; `Ok(0)` without calling it when nothing is queued.
    ///
    /// # Errors
    ///
    /// What `write` returned (the adapter decides whether it is final:
    /// then it calls [`handle_write_error`](Self::handle_write_error)), or
    /// the core's error turned into `E` for a writer that claimed more than
    /// it was given (writing fails then).
    #[cfg(feature = "std")]
    pub fn write_with<E: From<Error>>(
        &mut self,
        now: Duration,
        write: impl FnOnce(&[std::io::IoSlice<'_>]) -> Result<usize, E>,
    ) -> Result<usize, E> {
        // Nothing to write (a driver's last call of a drain): no slices
        // to set up, no plan to make.
        if self.farewell.is_none() && self.send.is_empty() {
            return Ok(0);
        }
        let Some(written) = self.transmit(write) else {
            return Ok(0);
        };
        match written {
            Ok(n) => {
                self.handle_written(n, now)?;
                Ok(n)
            }
            Err(e) => {
                self.tick(now);
                Err(e)
            }
        }
    }

    /// Calls `write` with the next slices to write, unless there are none.
    /// A queue that needs few slices (the usual burst of small pushes,
    /// coalesced into one run) gets them in a small array: the full
    /// [`SLICES`] is a kilobyte to set up before every write.
    #[cfg(feature = "std")]
    pub(crate) fn transmit<R>(
        &mut self,
        write: impl FnOnce(&[std::io::IoSlice<'_>]) -> R,
    ) -> Option<R> {
        if self.farewell.is_none() && self.send.needs_at_most(FEW_SLICES) {
            self.transmit_in::<FEW_SLICES, R>(write)
        } else {
            self.transmit_in::<SLICES, R>(write)
        }
    }

    #[cfg(feature = "std")]
    fn transmit_in<const N: usize, R>(
        &mut self,
        write: impl FnOnce(&[std::io::IoSlice<'_>]) -> R,
    ) -> Option<R> {
        let mut slices = [std::io::IoSlice::new(&[]); N];
        let n = self.poll_transmit(&mut slices);
        (n > 0).then(|| write(&slices[..n]))
    }

    /// Queues the protocol's last frame, after what the application
    /// queued (even past the queue's limits: it is one small frame, and
    /// it must not overtake the data before it), and closes the write
    /// side.
    pub(crate) fn queue_farewell(&mut self) {
        let Some(frame) = self.farewell.take() else {
            return;
        };
        if !self.writing() {
            return;
        }
        self.send.push_last_frame(*frame);
        self.close();
    }

    fn writing(&self) -> bool {
        matches!(self.write, WriteSide::Open | WriteSide::Closing)
    }

    /// What to do to the socket now: shut its write half (everything
    /// queued is out after [`close`](Self::close)), or reset it. Call
    /// [`handle_shutdown`](Self::handle_shutdown) once done.
    #[must_use]
    pub fn poll_shutdown(&self) -> Option<Shutdown> {
        match self.write {
            // A farewell still to queue goes before the FIN.
            WriteSide::Closing if self.send.is_flushed() && self.farewell.is_none() => {
                Some(Shutdown::Write)
            }
            WriteSide::Resetting => Some(Shutdown::Reset),
            _ => None,
        }
    }
}

/// The most slices one write hands the OS (a write from a queue that
/// needs few gets a smaller array).
#[cfg(feature = "std")]
pub const SLICES: usize = 64;

/// The slices set up for a write when the queue needs no more.
#[cfg(feature = "std")]
const FEW_SLICES: usize = 4;

mod framed;
pub use framed::{Framed, Raw, WriteOnly};
