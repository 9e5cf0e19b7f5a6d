//! The read side of a [`Conn`]: bytes in (read into its buffer, fed,
//! or the end of the stream), and the protocol's events out.

use alloc::boxed::Box;
use core::time::Duration;

use crate::conn::timeouts::NEVER;
use crate::conn::{Conn, Phase, Protocol, ReadSide, Wire};
use crate::error::Error;

impl<P: Protocol> Conn<P> {
    // ----- handlers: the read side -----

    /// The buffer's spare room, to read into; then call
    /// [`handle_read`](Self::handle_read) with what arrived (0 included).
    ///
    /// # Errors
    ///
    /// As [`RecvBuf::spare_mut`](crate::recv_buf::RecvBuf::spare_mut): the buffer is full ([`wants_read`](Self::wants_read)
    /// is false then).
    pub fn spare_mut(&mut self) -> Result<&mut [u8], Error> {
        self.recv.spare_mut()
    }

    /// `n` bytes were read into [`spare_mut`](Self::spare_mut); 0 is the end
    /// of the stream, as with `std::io::Read`.
    ///
    /// # Errors
    ///
    /// As [`RecvBuf::commit`](crate::recv_buf::RecvBuf::commit): more bytes than the spare room (the reader
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
    /// As [`RecvBuf::feed`](crate::recv_buf::RecvBuf::feed): nothing is appended when they do not fit.
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

    pub(super) fn eof(&mut self) {
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
    pub(super) fn poll_event_full(&mut self) -> Result<Option<P::Event>, Error> {
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

    pub(super) fn fail(&mut self, e: Error) {
        self.error = Some(Box::new(e));
        // What is left to write gets an idle span of its own from here
        // (see `linger_deadline`).
        self.clock.active = self.clock.now;
        if matches!(self.read, ReadSide::Open | ReadSide::Ended) {
            self.read = ReadSide::Stopped;
        }
    }
}
