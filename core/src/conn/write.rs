//! The write side of a [`Conn`]: what the queue holds handed to the
//! writer, what it took counted, and what to do to the socket at the end.

use alloc::vec::Vec;
use core::time::Duration;

use bytes::Bytes;

use crate::conn::{Conn, Protocol, Shutdown, WriteSide};
use crate::error::Error;
use crate::write::Progress;

impl<P: Protocol> Conn<P> {
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

    pub(super) fn fail_write(&mut self) {
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

    pub(super) fn writing(&self) -> bool {
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
