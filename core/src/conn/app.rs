//! The application's side of a [`Conn`]: its writes, its close and reset,
//! the questions a driver asks, the parts, and the protocol switch.

use core::time::Duration;

use crate::conn::timeouts::{Timeouts, NEVER};
use crate::conn::{Clock, Conn, Phase, Protocol, ReadSide, Shutdown, WriteSide};
use crate::error::{Error, Refusal, Rejected};
use crate::recv_buf::RecvBuf;
use crate::write::{Lane, Push, Ticket, WriteQueue};

impl<P> Conn<P> {
    // ----- parts -----

    /// The receive buffer: the bytes not consumed yet.
    #[must_use]
    pub fn recv_buf(&self) -> &RecvBuf {
        &self.recv
    }

    /// The write queue.
    #[must_use]
    pub fn queue(&self) -> &WriteQueue {
        &self.send
    }

    /// The write queue, to push, close or inspect it.
    pub fn queue_mut(&mut self) -> &mut WriteQueue {
        &mut self.send
    }

    /// The protocol.
    #[must_use]
    pub fn protocol(&self) -> &P {
        &self.protocol
    }

    /// The protocol, to reconfigure it between events.
    pub fn protocol_mut(&mut self) -> &mut P {
        &mut self.protocol
    }

    /// How the write side ended, once it has: shut down after everything
    /// queued went out ([`Shutdown::Write`]), or reset
    /// ([`Shutdown::Reset`]). `None` while it is open or closing, and after
    /// writing failed.
    #[must_use]
    pub fn write_end(&self) -> Option<Shutdown> {
        match self.write {
            WriteSide::Shut => Some(Shutdown::Write),
            WriteSide::Reset => Some(Shutdown::Reset),
            _ => None,
        }
    }

    /// Whether the write side dropped what was queued: a reset (asked for
    /// or done), or a failed write.
    pub(crate) fn is_queue_dropped(&self) -> bool {
        match self.write {
            WriteSide::Resetting | WriteSide::Reset => !self.reset_after_shut,
            WriteSide::Failed => true,
            WriteSide::Open | WriteSide::Closing | WriteSide::Shut => false,
        }
    }
}

impl<P: Protocol> Conn<P> {
    // ----- the application's writes -----

    /// Queues `item` (bytes or a frame) in the bulk lane.
    ///
    /// # Errors
    ///
    /// It comes back when the lane is full (write, then push again) or the
    /// queue is closed.
    #[allow(clippy::result_large_err)] // a frame comes back by value
    #[inline]
    pub fn push<I: Push>(&mut self, item: I) -> Result<Ticket, Rejected<I, Refusal>> {
        item.push_into(&mut self.send, Lane::Bulk)
    }

    /// Queues `item` in the urgent lane: ahead of queued bulk data, between
    /// frames.
    ///
    /// # Errors
    ///
    /// As [`push`](Self::push), against the urgent lane's limits.
    #[allow(clippy::result_large_err)] // a frame comes back by value
    #[inline]
    pub fn push_urgent<I: Push>(&mut self, item: I) -> Result<Ticket, Rejected<I, Refusal>> {
        item.push_into(&mut self.send, Lane::Urgent)
    }

    /// Ends the write side cleanly: the queue takes nothing more, what it
    /// holds goes out, then [`poll_shutdown`](Self::poll_shutdown) asks for
    /// [`Shutdown::Write`].
    pub fn close(&mut self) {
        // The protocol's last frame, if it has one, goes before the end.
        self.queue_farewell();
        self.send.close();
        if self.write == WriteSide::Open {
            self.write = WriteSide::Closing;
        }
    }

    /// Ends the connection with a reset: what is queued is dropped, nothing
    /// more is read and no event comes (what is buffered stays in
    /// [`recv_buf`](Self::recv_buf)), and [`poll_shutdown`](Self::poll_shutdown) asks for
    /// [`Shutdown::Reset`]. Use it when the peer must not take the end for
    /// a clean one (the other side of a tunnel failed).
    pub fn reset(&mut self) {
        // After a clean shutdown the queue is empty: the reset drops
        // nothing, and says so.
        self.reset_after_shut |= self.write == WriteSide::Shut;
        self.send.abort();
        if !matches!(self.write, WriteSide::Reset) {
            self.write = WriteSide::Resetting;
        }
        // Nothing more comes out either: the buffered bytes are dropped
        // with the connection.
        self.read = ReadSide::Over;
    }

    /// Stops (or resumes) reading, for flow control: while paused,
    /// [`wants_read`](Self::wants_read) is false.
    pub fn pause_reading(&mut self, paused: bool) {
        self.paused = paused;
    }

    // ----- questions -----

    /// Whether to read from the socket now: the read side is open, not
    /// paused, the protocol takes bytes and the buffer has room.
    #[must_use]
    pub fn wants_read(&self) -> bool {
        self.read == ReadSide::Open
            && !self.paused
            && self.error.is_none()
            && self.protocol.phase() != Phase::Done
            && !self.recv.is_full()
    }

    /// Whether to write (or shut down, or reset) now.
    #[must_use]
    pub fn wants_write(&self) -> bool {
        (self.writing() && (!self.send.is_flushed() || self.farewell.is_some()))
            || self.poll_shutdown().is_some()
    }

    /// Whether the connection is over: no event will come (the protocol
    /// made its last, failed, timed out, or reading failed), and nothing
    /// is left to write (all written and shut down if it was closed, or
    /// reset, or writing failed). Drop it.
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.is_read_done() && self.is_write_done()
    }

    /// Whether no event will come any more.
    #[must_use]
    pub fn is_read_done(&self) -> bool {
        self.error.is_some() || self.read == ReadSide::Over || self.protocol.phase() == Phase::Done
    }

    /// Whether nothing is left to write.
    #[must_use]
    pub fn is_write_done(&self) -> bool {
        match self.write {
            WriteSide::Open => self.send.is_flushed() && self.farewell.is_none(),
            WriteSide::Closing | WriteSide::Resetting => false,
            WriteSide::Shut | WriteSide::Reset | WriteSide::Failed => true,
        }
    }

    /// Whether writing failed ([`handle_write_error`](Self::handle_write_error)
    /// before the write side ended): what was queued then was dropped.
    #[must_use]
    pub fn is_write_failed(&self) -> bool {
        self.write == WriteSide::Failed
    }

    /// Whether the peer ended its side (or reading stopped).
    #[must_use]
    pub fn is_read_closed(&self) -> bool {
        self.read != ReadSide::Open
    }

    /// The final error, if the connection failed or timed out.
    #[must_use]
    pub fn error(&self) -> Option<&Error> {
        self.error.as_deref()
    }

    /// The latest time a handler was given.
    #[must_use]
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.clock.now)
    }

    /// The timeouts.
    #[must_use]
    pub fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }

    /// Changes the timeouts (a proxy gives a tunnel its own); running
    /// timers keep their start.
    pub fn set_timeouts(&mut self, timeouts: Timeouts) {
        self.timeouts = timeouts;
    }

    /// Gives back what an idle connection does not need: an empty receive
    /// buffer's block, a flushed queue's run buffer (as their configs say,
    /// [`RecvBuf::release_idle`], [`WriteQueue::release_idle`]), and what
    /// the protocol keeps between messages ([`Protocol::release_idle`]).
    /// Adapters call it when a read finds the socket empty.
    ///
    /// With [`ConnConfig::release_after`](crate::ConnConfig::release_after),
    /// only once the connection has been quiet that long (by the last
    /// handler's `now`), or once it is [finished](Self::is_finished) or
    /// ended by an error; before, it does nothing, and
    /// [`handle_timeout`](Self::handle_timeout) releases when the time
    /// comes.
    pub fn release_idle(&mut self) {
        let due = self.clock.active.saturating_add(self.clock.release_after);
        // A connection that reads no more and owes no write (finished, or
        // ended by an error) has no timer to wait for: at once.
        if self.clock.release_after == 0
            || self.clock.now >= due
            || self.is_finished()
            || self.error.is_some()
        {
            self.release_now();
        }
    }

    /// [`release_idle`](Self::release_idle) whatever the delay, for this
    /// quiet spell.
    pub(super) fn release_now(&mut self) {
        self.clock.released = self.clock.active;
        self.recv.release_idle();
        if self.send.is_flushed() {
            self.send.release_idle();
        }
        self.protocol.release_idle();
    }

    /// Hands the connection to another protocol, with the same buffer
    /// (unread bytes in place: nothing copied, nothing lost), queue,
    /// lifecycle and timeouts; `next` gets the old protocol and makes the
    /// new one, which starts now. For an HTTP Upgrade, a CONNECT, a marker
    /// line before raw bytes. What was queued before the switch goes out
    /// before anything the new protocol queues on the urgent lane
    /// ([`WriteQueue::fence`](crate::WriteQueue::fence)): a 101 before the
    /// pong for a ping that came with the upgrade request.
    ///
    /// ```
    /// use cleave_proto::conn::{Conn, Framed, Raw};
    /// use cleave_proto::{Bytes, Lines};
    /// use core::time::Duration;
    ///
    /// let mut conn = Conn::new(Framed::new(Lines::new()), Duration::ZERO);
    /// conn.feed(b"TUNNEL\nraw\x00bytes", Duration::ZERO)?;
    /// assert_eq!(conn.poll_event()?.as_deref(), Some(&b"TUNNEL"[..]));
    /// let mut raw = conn.switch(|_lines| Raw::new());
    /// assert_eq!(raw.poll_event()?, Some(Bytes::from_static(b"raw\x00bytes")));
    /// # Ok::<(), cleave_proto::Error>(())
    /// ```
    #[must_use = "the connection, with its unread bytes, is in the result"]
    pub fn switch<Q: Protocol>(mut self, next: impl FnOnce(P) -> Q) -> Conn<Q> {
        // What the old protocol queued (its last reply: a 101) goes out
        // before anything the new one answers on the urgent lane.
        self.send.fence();
        self.protocol.hand_back(&mut self.recv);
        let mut protocol = next(self.protocol);
        protocol.start(Duration::from_nanos(self.clock.now));
        Conn {
            recv: self.recv,
            send: self.send,
            protocol,
            error: self.error,
            timeouts: self.timeouts,
            clock: Clock {
                started: self.clock.now,
                active: self.clock.now,
                partial_since: NEVER,
                released: NEVER,
                ..self.clock
            },
            read: self.read,
            write: self.write,
            paused: self.paused,
            spent: false,
            turn_owed: false,
            reset_after_shut: self.reset_after_shut,
            farewell: self.farewell,
        }
    }

    /// The protocol, the buffer (with the bytes not consumed:
    /// [`RecvBuf::take_tail`] hands them over as one `Bytes`, for a raw
    /// tunnel) and the queue (with what was not written).
    #[must_use = "the buffer holds the unread bytes: hand them on"]
    pub fn into_parts(mut self) -> (P, RecvBuf, WriteQueue) {
        // A protocol's last frame goes with the queue.
        self.queue_farewell();
        self.protocol.hand_back(&mut self.recv);
        (self.protocol, self.recv, self.send)
    }
}
