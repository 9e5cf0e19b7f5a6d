//! The socket-facing steps every adapter's driver takes (feature `std`):
//! one read, one write, and what their outcomes mean for the connection.
//! Decided here once, so that no adapter has its own idea of which error
//! is final, of a writer that takes nothing, or of what a flush reports
//! after the write side dropped its queue.
//!
//! The adapter's closure says what its socket did, in one shape for every
//! runtime: `Ok(Some(n))` it moved `n` bytes (0 read: the end of the
//! stream), `Ok(None)` it has nothing now (a non-blocking socket's
//! `WouldBlock`, a blocking one's read or write timeout, a `Pending`
//! poll: which of these it is, only the adapter knows), `Err` it failed.

use core::time::Duration;
use std::io::{self, IoSlice};

use bytes::Bytes;

use super::{Conn, Protocol, SLICES};
use crate::driver::ConnError;
use crate::write::{Push, Ticket};

impl<P: Protocol> Conn<P> {
    /// Reads once into the buffer's spare room with `read` (called again
    /// when a signal interrupts it) and handles the outcome:
    ///
    /// - `Ok(Some(n))`: `n` bytes came, or the end of the stream (`0`);
    /// - `Ok(None)`: `read` had nothing now; nothing changed but the time;
    /// - `Err(ConnError::Io)`: the source failed. The read side is failed
    ///   ([`handle_read_error`](Self::handle_read_error)): complete events
    ///   still buffered can be polled, nothing more is read.
    ///
    /// ```
    /// use cleave_proto::conn::{Conn, Framed};
    /// use cleave_proto::Lines;
    /// use core::time::Duration;
    /// use std::io::Read;
    ///
    /// # fn main() -> Result<(), cleave_proto::ConnError> {
    /// let mut socket: &[u8] = b"one\n";
    /// let mut conn = Conn::new(Framed::new(Lines::new()), Duration::ZERO);
    /// while conn.wants_read() {
    ///     conn.read_io(Duration::ZERO, |spare| socket.read(spare).map(Some))?;
    /// }
    /// assert_eq!(conn.poll_event()?.as_deref(), Some(&b"one"[..]));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ConnError::Io`] as above; [`ConnError::Protocol`] when the buffer
    /// is full ([`wants_read`](Self::wants_read) is false then) or `read`
    /// claimed more than the spare room (reading fails then).
    pub fn read_io(
        &mut self,
        now: Duration,
        mut read: impl FnMut(&mut [u8]) -> io::Result<Option<usize>>,
    ) -> Result<Option<usize>, ConnError> {
        loop {
            let outcome = read(self.recv.spare_mut()?);
            match outcome {
                Ok(Some(n)) => {
                    self.handle_read(n, now)?;
                    return Ok(Some(n));
                }
                Ok(None) => {
                    self.tick(now);
                    self.recv.commit(0)?;
                    return Ok(None);
                }
                Err(e) => {
                    self.recv.commit(0)?;
                    if e.kind() != io::ErrorKind::Interrupted {
                        self.handle_read_error(now);
                        return Err(ConnError::Io(e));
                    }
                }
            }
        }
    }

    /// Writes the next slices once with `write` (one vectored write; called
    /// again when a signal interrupts it), always advancing the queue by
    /// what it took, and handles the outcome:
    ///
    /// - `Ok(Some(n))`: the writer took `n` bytes; `Some(0)` when nothing
    ///   may go out (nothing queued, or the write side ended), without
    ///   calling `write`;
    /// - `Ok(None)`: `write` took nothing now; nothing is lost;
    /// - `Err(ConnError::Io)`: the writer failed, or took nothing of a
    ///   non-empty write (`WriteZero`). Writing failed then
    ///   ([`handle_write_error`](Self::handle_write_error)): what is queued
    ///   is dropped.
    ///
    /// # Errors
    ///
    /// [`ConnError::Io`] as above; [`ConnError::Protocol`] when `write`
    /// claimed more than it was given (writing fails then too).
    pub fn write_io(
        &mut self,
        now: Duration,
        write: impl FnMut(&[IoSlice<'_>]) -> io::Result<Option<usize>>,
    ) -> Result<Option<usize>, ConnError> {
        let Some(outcome) = self.transmit(|slices| write_slices(slices, write)) else {
            return Ok(Some(0));
        };
        match outcome {
            Ok(Some(n)) => {
                self.handle_written(n, now)?;
                Ok(Some(n))
            }
            Ok(None) => {
                self.tick(now);
                Ok(None)
            }
            Err(e) => {
                self.handle_write_error(now);
                Err(ConnError::Io(e))
            }
        }
    }

    /// Flushes the writer with `flush` (called again when a signal
    /// interrupts it) and handles the outcome as a write's: `Ok(true)`
    /// flushed; `Ok(false)` `flush` had nothing now (a blocking writer's
    /// timeout, a `Pending` poll), nothing is lost; `Err(ConnError::Io)`
    /// the writer failed, and writing failed with it
    /// ([`handle_write_error`](Self::handle_write_error)): what is queued
    /// is dropped.
    ///
    /// # Errors
    ///
    /// As above.
    pub fn flush_io(
        &mut self,
        now: Duration,
        mut flush: impl FnMut() -> io::Result<Option<()>>,
    ) -> Result<bool, ConnError> {
        loop {
            match flush() {
                Ok(done) => return Ok(done.is_some()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.handle_write_error(now);
                    return Err(ConnError::Io(e));
                }
            }
        }
    }

    /// What a flush or a close reports once the write side dropped what was
    /// queued, whatever the adapter: `BrokenPipe` after a failed write (or
    /// a failed shutdown of the write half); after a reset, asked for or
    /// done, the connection's own error (a timeout, say), else
    /// `BrokenPipe`. `Ok` while nothing was dropped.
    ///
    /// # Errors
    ///
    /// As above.
    pub fn check_written(&self) -> Result<(), ConnError> {
        if self.is_write_failed() {
            return Err(ConnError::Io(io::ErrorKind::BrokenPipe.into()));
        }
        if self.is_queue_dropped() {
            return Err(self.closed_error());
        }
        Ok(())
    }

    /// Queues `item` in the bulk lane (as [`push`](Self::push)) for a
    /// driver's `send`, which writes to make room while the lane is full:
    /// `Ok(Ok(ticket))` queued, `Ok(Err(item))` the lane is full (write,
    /// then offer it again).
    ///
    /// # Errors
    ///
    /// Once the queue is closed, [`closed_error`](Self::closed_error); the
    /// item is dropped.
    pub fn push_or_full<I: Push>(&mut self, item: I) -> Result<Result<Ticket, I>, ConnError> {
        match self.push(item) {
            Ok(ticket) => Ok(Ok(ticket)),
            Err(rejected) => rejected
                .when_full()
                .map(Err)
                .ok_or_else(|| self.closed_error()),
        }
    }

    /// The error for an item a closed queue refused: the connection's own
    /// (a timeout, the protocol's), or `BrokenPipe`.
    #[must_use]
    pub fn closed_error(&self) -> ConnError {
        match self.error() {
            Some(e) => ConnError::Protocol(e.clone()),
            None => ConnError::Io(io::ErrorKind::BrokenPipe.into()),
        }
    }
}

/// One vectored write of `chunks` with `write`, by the rules of
/// [`Conn::write_io`], for a writer that writes away from its queue: the
/// chunks are owned views the queue handed out
/// ([`WriteQueue::chunks_owned`](crate::WriteQueue::chunks_owned)), and the
/// count goes back to its `advance`. `write` is called again when a
/// signal interrupts it, and a write that takes nothing of a non-empty
/// one is `WriteZero`. At most [`SLICES`] chunks are offered.
///
/// ```
/// use cleave_proto::conn::write_chunks;
/// use cleave_proto::Bytes;
/// use std::io::Write;
///
/// let chunks = [Bytes::from_static(b"hello "), Bytes::from_static(b"world")];
/// let mut out = Vec::new();
/// let n = write_chunks(&chunks, |slices| out.write_vectored(slices).map(Some))?;
/// assert_eq!((n, &out[..]), (Some(11), &b"hello world"[..]));
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Errors
///
/// What `write` says, `WriteZero` as above.
pub fn write_chunks(
    chunks: &[Bytes],
    write: impl FnMut(&[IoSlice<'_>]) -> io::Result<Option<usize>>,
) -> io::Result<Option<usize>> {
    let mut slices = [IoSlice::new(&[]); SLICES];
    let n = chunks.len().min(SLICES);
    for (slice, chunk) in slices.iter_mut().zip(chunks) {
        *slice = IoSlice::new(chunk);
    }
    write_slices(&slices[..n], write)
}

/// The one rule for a write: retried when interrupted; nothing taken of a
/// non-empty write is `WriteZero`.
fn write_slices(
    slices: &[IoSlice<'_>],
    mut write: impl FnMut(&[IoSlice<'_>]) -> io::Result<Option<usize>>,
) -> io::Result<Option<usize>> {
    let empty = slices.iter().all(|s| s.is_empty());
    loop {
        match write(slices) {
            Ok(Some(0)) if !empty => return Err(io::ErrorKind::WriteZero.into()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            done => return done,
        }
    }
}
