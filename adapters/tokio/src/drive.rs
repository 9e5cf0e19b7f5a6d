//! The one driver, for every connection here (the same-task
//! [`Connection`](crate::Connection) and [`Writer`](crate::Writer), the
//! spawned driver behind the handles): a turn of I/O on a socket for the
//! core's [`Conn`], on tokio's clock.
//!
//! ```text
//!   poll_turn:  write what is queued, without waiting for the socket
//!                 (vectored), then shut down or reset if the core asks ──> bytes went out?  Wrote
//!               over (no event to come, nothing to write) ───────────────────────────────> Finished
//!               read once into the buffer's spare room ──────────────────────────────────> Read
//!               nothing to read: arm the timer at poll_timeout
//!               the timer fired: handle_timeout(now) ────────────────────────────────────> Timer
//!               nothing to do: give idle memory back ────────────────────────────────────> Pending
//! ```
//!
//! After a turn the caller takes the events it made (or lets another task
//! take them) and turns again; `Pending` means every step is waiting, each
//! registered to wake the task.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use cleave_proto::conn::Shutdown;
use cleave_proto::{Conn, Error, Misuse, Protocol};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::reset::Reset;

/// What a turn did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Bytes went out: tickets completed, room was freed (a protocol
    /// waiting to queue an answer goes on at its next `poll_event`).
    Wrote,
    /// Bytes, or the end of the stream, came in.
    Read,
    /// A deadline passed and the core handled it.
    Timer,
    /// No event will come and nothing is left to write (the application
    /// may still push, if the queue is open).
    Finished,
}

/// One turn of I/O for `conn` over `io`, taking no event (see the module's
/// diagram).
///
/// # Errors
///
/// What the socket says, recorded in the core (reading or writing
/// failed) before it is returned.
pub(crate) fn poll_turn<S, P>(
    io: &mut S,
    conn: &mut Conn<P>,
    clock: &mut Clock,
    cx: &mut Context<'_>,
) -> Poll<io::Result<Turn>>
where
    S: AsyncRead + AsyncWrite + Reset + Unpin,
    P: Protocol,
{
    let now = clock.now();
    if conn.wants_write() {
        let marks = conn.queue().marks();
        if let Poll::Ready(Err(e)) = poll_write(io, conn, now, cx) {
            return Poll::Ready(Err(e));
        }
        if conn.queue().marks() != marks {
            return Poll::Ready(Ok(Turn::Wrote));
        }
    }
    if conn.is_finished() {
        return Poll::Ready(Ok(Turn::Finished));
    }
    if conn.wants_read() {
        match poll_fill(io, conn, cx, now) {
            Poll::Ready(Ok(())) => return Poll::Ready(Ok(Turn::Read)),
            Poll::Ready(Err(e)) => {
                conn.handle_read_error(now);
                return Poll::Ready(Err(e));
            }
            Poll::Pending => {}
        }
    }
    if let Poll::Ready(now) = clock.poll(conn.poll_timeout(), cx) {
        conn.handle_timeout(now);
        return Poll::Ready(Ok(Turn::Timer));
    }
    // The task waits: the buffers give back what they do not need.
    conn.release_idle();
    Poll::Pending
}

/// Writes what `conn` holds into `io` until nothing is left or the writer
/// would block, then shuts the write half down or resets the socket if
/// the core asks: `Ready` once nothing is left to do.
///
/// # Errors
///
/// What the writer says; `WriteZero` when it takes nothing, and the
/// core's [`Misuse::AdvanceTooFar`] (`InvalidInput`) when it claims more
/// than it was given (nothing is advanced then: no ticket completes on a
/// lie). Writing failed then: the core drops what is queued.
pub(crate) fn poll_write<W, P>(
    io: &mut W,
    conn: &mut Conn<P>,
    now: Duration,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>>
where
    W: AsyncWrite + Reset + Unpin,
    P: Protocol,
{
    let mut done = ready!(poll_drain(io, conn, now, cx));
    if done.is_ok() {
        done = ready!(poll_end(io, conn, cx));
    }
    if done.is_err() {
        conn.handle_write_error(now);
    }
    Poll::Ready(done)
}

/// [`poll_write`], with the connection's deadlines running while the
/// writer blocks: a peer that stops reading cannot hold a `send`, a
/// `flush` or a `close` for ever (the idle timeout runs while no byte goes
/// either way, and a linger ends in a reset).
///
/// # Errors
///
/// As [`poll_write`].
pub(crate) fn poll_write_timed<W, P>(
    io: &mut W,
    conn: &mut Conn<P>,
    clock: &mut Clock,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>>
where
    W: AsyncWrite + Reset + Unpin,
    P: Protocol,
{
    loop {
        if let Poll::Ready(done) = poll_write(io, conn, clock.now(), cx) {
            return Poll::Ready(done);
        }
        // Blocked: a deadline that passed is handled, and the write side
        // looked at again (a timeout may have reset it).
        let now = ready!(clock.poll(conn.poll_timeout(), cx));
        conn.handle_timeout(now);
    }
}

/// Writes what `conn` holds, with vectored writes when the writer supports
/// them, until nothing is left (`Ready`) or the writer would block.
fn poll_drain<W, P>(
    io: &mut W,
    conn: &mut Conn<P>,
    now: Duration,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>>
where
    W: AsyncWrite + Unpin,
    P: Protocol,
{
    loop {
        let written = conn.write_io(now, |slices| {
            let mut io = Pin::new(&mut *io);
            if io.is_write_vectored() {
                return ready_or_none(io.as_mut().poll_write_vectored(cx, slices));
            }
            // The core checks a count against all it handed out; only the
            // first slice was offered here.
            match ready_or_none(io.as_mut().poll_write(cx, &slices[0])) {
                Ok(Some(n)) if n > slices[0].len() => Err(Error::Misuse(Misuse::AdvanceTooFar {
                    advanced: n,
                    presented: slices[0].len(),
                })
                .into()),
                done => done,
            }
        });
        match written.map_err(io::Error::from)? {
            Some(0) => return Poll::Ready(Ok(())),
            Some(_) => {}
            None => return Poll::Pending,
        }
    }
}

/// Does what the core's [`poll_shutdown`](Conn::poll_shutdown) asks, if
/// anything: a shutdown of the write half (a FIN; tokio's shutdown flushes
/// first), or a reset on close where the socket has one (best effort:
/// where it has not, the close is clean).
fn poll_end<W, P>(io: &mut W, conn: &mut Conn<P>, cx: &mut Context<'_>) -> Poll<io::Result<()>>
where
    W: AsyncWrite + Reset + Unpin,
    P: Protocol,
{
    match conn.poll_shutdown() {
        None => return Poll::Ready(Ok(())),
        Some(Shutdown::Write) => ready!(Pin::new(io).poll_shutdown(cx))?,
        Some(Shutdown::Reset) => drop(io.reset_on_close()),
    }
    conn.handle_shutdown();
    Poll::Ready(Ok(()))
}

/// Flushes `io` (see [`Conn::flush_io`]): `Ready` once flushed.
///
/// # Errors
///
/// What the writer says; writing failed then (the core drops what is
/// queued).
pub(crate) fn poll_flush<W, P>(
    io: &mut W,
    conn: &mut Conn<P>,
    now: Duration,
    cx: &mut Context<'_>,
) -> Poll<Result<(), cleave_proto::ConnError>>
where
    W: AsyncWrite + Unpin,
    P: Protocol,
{
    match conn.flush_io(now, || ready_or_none(Pin::new(&mut *io).poll_flush(cx))) {
        Ok(true) => Poll::Ready(Ok(())),
        Ok(false) => Poll::Pending,
        Err(e) => Poll::Ready(Err(e)),
    }
}

/// What a read into the stack takes when the buffer holds no block: a
/// request head, a line, a small message.
const STACK_READ: usize = 2048;

/// Reads once into `conn`'s spare room and always commits: `Ready(Ok)`
/// when bytes (or the end of the stream) came.
///
/// Memory follows readiness: a buffer that holds no block reads into the
/// stack first, so a silent connection allocates nothing, and a message
/// that fits costs one read and a copy of its bytes into a block made to
/// measure (not a probe, then a block, then its zeroing).
fn poll_fill<S, P>(
    io: &mut S,
    conn: &mut Conn<P>,
    cx: &mut Context<'_>,
    now: Duration,
) -> Poll<io::Result<()>>
where
    S: AsyncRead + Unpin,
    P: Protocol,
{
    if conn.recv_buf().capacity() == 0 {
        let mut stack = [0u8; STACK_READ];
        let room = conn.recv_buf().remaining().clamp(1, STACK_READ);
        let mut buf = ReadBuf::new(&mut stack[..room]);
        // An interrupted read is tried again, as `Conn::read_io` does.
        loop {
            match ready!(Pin::new(&mut *io).poll_read(cx, &mut buf)) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                done => break done?,
            }
        }
        if buf.filled().is_empty() {
            conn.handle_eof(now);
        } else {
            conn.feed(buf.filled(), now).map_err(io::Error::from)?;
        }
        return Poll::Ready(Ok(()));
    }
    let read = conn.read_io(now, |spare| {
        let mut buf = ReadBuf::new(spare);
        let read = ready_or_none(Pin::new(&mut *io).poll_read(cx, &mut buf))?;
        Ok(read.map(|()| buf.filled().len()))
    });
    match read.map_err(io::Error::from)? {
        Some(_) => Poll::Ready(Ok(())),
        None => Poll::Pending,
    }
}

/// A poll's outcome in the shape of the core's I/O steps: `Pending` is
/// "nothing now".
fn ready_or_none<T>(poll: Poll<io::Result<T>>) -> io::Result<Option<T>> {
    match poll {
        Poll::Ready(done) => done.map(Some),
        Poll::Pending => Ok(None),
    }
}

/// A connection's clock: the core's `now` is the time since `base`, and a
/// `Sleep` armed at the core's next deadline.
#[derive(Debug)]
pub(crate) struct Clock {
    base: Instant,
    sleep: Option<Pin<Box<Sleep>>>,
    /// The last reading of [`now`](Self::now).
    last: Duration,
}

impl Clock {
    /// A clock that reads `now` at this instant.
    pub(crate) fn starting_at(now: Duration) -> Self {
        let at = Instant::now();
        Self {
            base: at.checked_sub(now).unwrap_or(at),
            sleep: None,
            last: now,
        }
    }

    /// The core's time now.
    pub(crate) fn now(&mut self) -> Duration {
        self.last = self.base.elapsed();
        self.last
    }

    /// The time [`now`](Self::now) last read: for a handler called in the
    /// same poll as a reading, which need not pay for another (a clock
    /// read is a `clock_gettime`, a few percent of a small request's
    /// cost).
    pub(crate) fn last(&self) -> Duration {
        self.last
    }

    /// Arms the timer for `due` and polls it: `Ready` with the time to
    /// hand to `handle_timeout` once it passed (the timer may wake a hair
    /// early: the deadline has come), `Pending` (the timer wakes the task)
    /// before, or for ever when there is no deadline.
    ///
    /// A deadline later than the one armed is left for when the timer
    /// fires, which then arms it again: the idle deadline of a busy
    /// connection moves at every exchange, and resetting a timer each time
    /// (a removal from tokio's timer wheel and an insertion) would cost
    /// every exchange; an earlier one is armed at once.
    fn poll(&mut self, due: Option<Duration>, cx: &mut Context<'_>) -> Poll<Duration> {
        let Some((due, at)) = due.and_then(|due| Some((due, self.base.checked_add(due)?))) else {
            self.sleep = None;
            return Poll::Pending;
        };
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
        if sleep.deadline() > at {
            sleep.as_mut().reset(at);
        }
        loop {
            ready!(sleep.as_mut().poll(cx));
            if sleep.deadline() >= at {
                break;
            }
            // It fired for a deadline that has since moved on.
            sleep.as_mut().reset(at);
        }
        Poll::Ready(self.now().max(due))
    }
}
