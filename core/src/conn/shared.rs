//! [`Shared`]: a connection one task drives and other tasks use (feature
//! `std`), the state an async adapter keeps behind its lock and the rules
//! for who is woken when. The adapter owns the socket, the lock and the
//! task; the answers here are the same for every runtime that polls with a
//! [`Waker`].
//!
//! ```text
//!   events task ── poll_event ───┐                      ┌── start_turn / end_turn / did_flush ── driver task
//!   handle tasks ─ push, poll_push, poll_written,      ─┤ Shared<P>: Conn<P>, waiters, handles,  ├── after_read / after_timer / finish
//!                  poll_flushed, poll_closed ───────────┘ the socket's failure                  └── fail / abandon   (socket: the adapter's)
//! ```

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::io;

use super::{Conn, Protocol, Shutdown};
use crate::driver::{ConnError, WriteError};
use crate::write::{Lane, Marks, Push, Ticket, Waiters};
use crate::{Refusal, Rejected};

/// A [`Conn`] shared by the task that drives its socket and the tasks that
/// take its events and push into its queue, with everything they wait
/// for. The adapter keeps it behind one lock and calls, under that lock:
///
/// - from the events stream: [`poll_event`](Self::poll_event), and
///   [`drop_events`](Self::drop_events) when it goes;
/// - from a handle: [`push`](Self::push), [`poll_push`](Self::poll_push),
///   [`poll_written`](Self::poll_written), [`poll_flushed`](Self::poll_flushed),
///   [`poll_closed`](Self::poll_closed); [`add_handle`](Self::add_handle) and
///   [`drop_handle`](Self::drop_handle) for its clones;
/// - from the driver, around each turn of I/O on the connection
///   ([`conn_mut`](Self::conn_mut)): [`start_turn`](Self::start_turn), then
///   [`end_turn`](Self::end_turn) (which says whether to flush the socket,
///   then [`did_flush`](Self::did_flush)); after what the turn did,
///   [`after_read`](Self::after_read), [`after_timer`](Self::after_timer),
///   [`finish`](Self::finish) when the connection has nothing left to do,
///   [`park`](Self::park) before it waits; [`fail`](Self::fail) when the
///   socket fails and [`abandon`](Self::abandon) if the driver goes away
///   before it finished.
///
/// When the events stream and every handle are gone the write side
/// closes cleanly; if the connection failed by then and still holds bytes
/// a peer may never read, the close is a reset instead.
///
/// Everything here runs under the adapter's lock, the protocol's
/// `poll_event` and the wakers' `wake` included: a protocol must not call
/// back into a handle of its own connection, and a waker must not poll its
/// task inline (tokio's, like most executors', only schedules it).
#[derive(Debug)]
pub struct Shared<P> {
    conn: Conn<P>,
    /// Ticket and flush (and close) waiters, and how far the socket was
    /// flushed.
    waiters: Waiters<Waker>,
    /// The driver, when it waits for a push, a close or room in the buffer.
    driver: Option<Waker>,
    /// The events stream, when it waits for an event.
    events: Option<Waker>,
    /// Senders waiting for room.
    room: Vec<Waker>,
    /// Live handles.
    handles: usize,
    events_alive: bool,
    /// The socket failed (reading or writing).
    failed: Option<Arc<io::Error>>,
    /// A failure dropped bytes before they were written and flushed (or
    /// the write side had dropped them already: a failed write, a reset).
    lost: bool,
    /// The driver stopped.
    done: bool,
}

/// What a turn of the driver starts from: [`Shared::end_turn`] wakes who
/// waits for what changed since.
#[derive(Clone, Copy, Debug)]
#[must_use = "end_turn takes it after the turn"]
pub struct TurnStart {
    marks: Marks,
    closed: bool,
    end: Option<Shutdown>,
}

impl<P> Shared<P> {
    /// `conn`, with one handle and its events stream.
    pub fn new(conn: Conn<P>) -> Self {
        Self {
            conn,
            waiters: Waiters::new(),
            driver: None,
            events: None,
            room: Vec::new(),
            handles: 1,
            events_alive: true,
            failed: None,
            lost: false,
            done: false,
        }
    }

    /// The connection.
    pub fn conn(&self) -> &Conn<P> {
        &self.conn
    }

    /// The connection, for the driver's turn.
    pub fn conn_mut(&mut self) -> &mut Conn<P> {
        &mut self.conn
    }

    /// The socket's failure, as every handle sees it.
    pub fn failure(&self) -> Option<WriteError> {
        self.failed.clone().map(WriteError::Failed)
    }

    /// The events stream is gone: the driver takes the events (and drops
    /// them) so that the protocol still answers.
    pub fn drop_events(&mut self) {
        self.events_alive = false;
        self.events = None;
        self.wake_driver();
    }

    /// One more handle.
    pub fn add_handle(&mut self) {
        self.handles += 1;
    }

    /// A handle is gone; the last one, with the events gone too, lets the
    /// driver close.
    pub fn drop_handle(&mut self) {
        self.handles = self.handles.saturating_sub(1);
        if self.handles == 0 && !self.events_alive {
            self.wake_driver();
        }
    }

    /// Queues `item` in `lane` now (see [`Conn::push`]), waking the driver.
    ///
    /// # Errors
    ///
    /// It comes back when the lane is full or the queue closed.
    #[allow(clippy::result_large_err)] // a frame comes back by value
    #[inline]
    pub fn push<I: Push>(&mut self, lane: Lane, item: I) -> Result<Ticket, Rejected<I, Refusal>> {
        let ticket = self.conn.queue_mut().push_to(lane, item)?;
        self.wake_driver();
        Ok(ticket)
    }

    /// Why nothing more will be written, if so: the socket's failure, or
    /// `Closed` once the write side ended (shut, reset) or the driver
    /// stopped.
    fn writing_over(&self) -> Option<WriteError> {
        self.failure().or_else(|| {
            (self.done || self.conn.write_end().is_some()).then_some(WriteError::Closed)
        })
    }

    /// The driver waits: a push, a close, an events poll that freed room
    /// wakes `cx`.
    pub fn park(&mut self, cx: &Context<'_>) {
        self.driver = Some(cx.waker().clone());
    }

    /// The driver went away before it finished (aborted, or dropped by a
    /// runtime shutting down): everyone waiting learns the connection
    /// failed.
    pub fn abandon(&mut self) {
        if !self.done {
            let e = io::Error::other("the connection's driver task ended before it finished");
            self.failed = Some(Arc::new(e));
            self.done = true;
            // Nothing will write what is queued, or what a push would add.
            self.note_loss();
            self.conn.queue_mut().abort();
            self.wake_all();
        }
    }

    /// The queue is about to be dropped: whether that loses bytes not yet
    /// written and flushed. A queue the write side dropped already (a
    /// failed write, a reset) lost what it held, though it now looks
    /// empty.
    fn note_loss(&mut self) {
        self.lost |= self.conn.is_queue_dropped()
            || !self.waiters.flushed().covers(self.conn.queue().end_marks());
    }

    fn wake_driver(&mut self) {
        if let Some(driver) = self.driver.take() {
            driver.wake();
        }
    }

    fn wake_events(&mut self) {
        if let Some(events) = self.events.take() {
            events.wake();
        }
    }

    fn wake_room(&mut self) {
        self.room.drain(..).for_each(Waker::wake);
    }

    /// Something every waiter must see happened (the write side ended, the
    /// driver stopped).
    fn wake_all(&mut self) {
        self.waiters.wake_all(Waker::wake);
        self.wake_room();
        self.wake_events();
    }
}

impl<P: Protocol> Shared<P> {
    /// The next event: `Ready(Some(..))` an event or the final error,
    /// `Ready(None)` the end (the stream is over after either of the last
    /// two), `Pending` with `cx` woken when the driver reads more. The
    /// driver is woken if the protocol queued a reply, freed room or
    /// finished.
    pub fn poll_event(&mut self, cx: &Context<'_>) -> Poll<Option<Result<P::Event, ConnError>>> {
        let before = self.driver_view();
        let polled = self.conn.poll_event();
        if self.driver_view() != before {
            self.wake_driver();
        }
        match polled {
            Ok(Some(event)) => Poll::Ready(Some(Ok(event))),
            Err(e) => Poll::Ready(Some(Err(e.into()))),
            Ok(None) if self.conn.is_read_done() || self.done => Poll::Ready(
                self.failed
                    .as_ref()
                    .map(|e| Err(ConnError::Io(io::Error::new(e.kind(), e.clone())))),
            ),
            Ok(None) => {
                self.events = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    /// What the driver acts on: a change means it must look again. A queue
    /// that still holds bytes the socket did not take is no news: the
    /// driver waits for the socket then, which wakes it.
    fn driver_view(&self) -> (bool, bool, Option<Duration>, bool, Marks) {
        let conn = &self.conn;
        (
            conn.wants_read(),
            conn.is_read_done(),
            conn.poll_timeout(),
            conn.wants_write(),
            conn.queue().end_marks(),
        )
    }

    /// Queues `item` in the bulk lane now: `Ok(Ok(ticket))`, or
    /// `Ok(Err(item))` when the lane is full and the driver still runs.
    ///
    /// # Errors
    ///
    /// The socket's failure, or [`WriteError::Closed`] (the queue is
    /// closed, or the driver stopped), with the item.
    #[allow(clippy::result_large_err)] // a frame comes back by value
    pub fn push_or_full<I: Push>(
        &mut self,
        item: I,
    ) -> Result<Result<Ticket, I>, Rejected<I, WriteError>> {
        if let Some(e) = self.failure() {
            return Err(Rejected::new(e, item));
        }
        match self.push(Lane::Bulk, item) {
            Ok(ticket) => Ok(Ok(ticket)),
            Err(rejected) => match rejected.into_parts() {
                (Refusal::Full(_), item) if !self.done => Ok(Err(item)),
                (_, item) => Err(Rejected::new(WriteError::Closed, item)),
            },
        }
    }

    /// Pushes the item in `slot` into the bulk lane, or keeps it there and
    /// waits for room (`Pending`, `cx` woken when the driver frees some).
    /// An empty slot is `Pending` for ever.
    ///
    /// # Errors
    ///
    /// As [`push_or_full`](Self::push_or_full).
    #[allow(clippy::result_large_err)] // a frame comes back by value
    pub fn poll_push<I: Push>(
        &mut self,
        cx: &Context<'_>,
        slot: &mut Option<I>,
    ) -> Poll<Result<Ticket, Rejected<I, WriteError>>> {
        let Some(item) = slot.take() else {
            return Poll::Pending;
        };
        match self.push_or_full(item) {
            Ok(Ok(ticket)) => Poll::Ready(Ok(ticket)),
            Ok(Err(item)) => {
                *slot = Some(item);
                // Once per sender, however often it is polled.
                if !self.room.iter().any(|w| w.will_wake(cx.waker())) {
                    self.room.push(cx.waker().clone());
                }
                Poll::Pending
            }
            Err(rejected) => Poll::Ready(Err(rejected)),
        }
    }

    /// `Ready(Ok)` once the push named by `ticket` was handed to the
    /// socket.
    ///
    /// # Errors
    ///
    /// The socket's failure (the bytes may not have gone out), or
    /// [`WriteError::Closed`] if the write side ended without writing it
    /// (a reset, or a ticket of another connection).
    pub fn poll_written(
        &mut self,
        cx: &Context<'_>,
        ticket: Ticket,
    ) -> Poll<Result<(), WriteError>> {
        if self.conn.queue().is_written(ticket) {
            return Poll::Ready(Ok(()));
        }
        if let Some(over) = self.writing_over() {
            return Poll::Ready(Err(over));
        }
        self.waiters
            .wait_ticket(ticket, cx.waker().clone(), Waker::will_wake);
        Poll::Pending
    }

    /// Where a flush asked for now must get to: everything queued so far
    /// ([`end_marks`](crate::WriteQueue::end_marks)).
    ///
    /// # Errors
    ///
    /// Once bytes were dropped before they were written and flushed (the
    /// socket failed: its error; a reset: [`WriteError::Closed`]), they
    /// never will be: a flush asked for after that fails. A failure that
    /// dropped nothing (a read that failed after everything went out) does
    /// not fail it; and one asked for before is answered by
    /// [`poll_flushed`](Self::poll_flushed): done is done.
    pub fn flush_target(&self) -> Result<Marks, WriteError> {
        // Once the socket failed, `lost` says whether that dropped
        // anything: its write side is marked failed either way.
        let dropped = if self.failed.is_some() {
            self.lost
        } else {
            self.conn.is_queue_dropped()
        };
        if dropped {
            return Err(self.failure().unwrap_or(WriteError::Closed));
        }
        Ok(self.conn.queue().end_marks())
    }

    /// `Ready(Ok)` once everything up to `target` (the
    /// [`flush_target`](Self::flush_target) when the flush began)
    /// is written and the socket flushed; done is done, whatever failed
    /// since.
    ///
    /// # Errors
    ///
    /// As [`poll_written`](Self::poll_written).
    pub fn poll_flushed(
        &mut self,
        cx: &Context<'_>,
        target: Marks,
    ) -> Poll<Result<(), WriteError>> {
        if self.waiters.flushed().covers(target) {
            return Poll::Ready(Ok(()));
        }
        if let Some(over) = self.writing_over() {
            return Poll::Ready(Err(over));
        }
        self.waiters
            .wait_flush(target, cx.waker().clone(), Waker::will_wake);
        self.wake_driver();
        Poll::Pending
    }

    /// Closes the queue and waits until what it holds is written and the
    /// write half shut down (a FIN): `Ready(Ok)` then, whatever failed
    /// since.
    ///
    /// # Errors
    ///
    /// The socket's failure, or [`WriteError::Closed`] when the write side
    /// ended otherwise (a reset: what was queued was dropped).
    pub fn poll_closed(&mut self, cx: &Context<'_>) -> Poll<Result<(), WriteError>> {
        if !self.conn.queue().is_closed() {
            self.conn.close();
            // Senders waiting for room learn that none will come.
            self.wake_room();
        }
        if self.conn.write_end() == Some(Shutdown::Write) {
            return Poll::Ready(Ok(()));
        }
        if let Some(over) = self.writing_over() {
            return Poll::Ready(Err(over));
        }
        self.waiters
            .wait_flush(Marks::END, cx.waker().clone(), Waker::will_wake);
        self.wake_driver();
        Poll::Pending
    }

    /// Before a turn: with nobody taking the events, takes them (the
    /// protocol still answers), and once the handles are gone too closes
    /// the write side (a reset if the connection failed with bytes still
    /// queued: nobody is left to wait for a peer that may never read).
    pub fn start_turn(&mut self) -> TurnStart {
        if !self.events_alive {
            while let Ok(Some(_)) = self.conn.poll_event() {}
            if self.handles == 0 {
                if self.conn.error().is_some() && !self.conn.queue().is_flushed() {
                    self.conn.reset();
                } else {
                    self.conn.close();
                }
            }
        }
        TurnStart {
            marks: self.conn.queue().marks(),
            closed: self.conn.queue().is_closed(),
            end: self.conn.write_end(),
        }
    }

    /// After a turn: wakes who waits for what changed since `start`
    /// (tickets, room, a protocol holding an answer back, the queue's
    /// close, the write side's end). `Some(marks)` when the socket should
    /// be flushed now for who waits for a flush: flush it, then
    /// [`did_flush`](Self::did_flush) with these marks if it completed.
    pub fn end_turn(&mut self, start: TurnStart) -> Option<Marks> {
        let marks = self.conn.queue().marks();
        // Only news: a closed queue that still waits for the socket is not.
        if marks != start.marks || self.conn.queue().is_closed() != start.closed {
            self.waiters.written(marks, Waker::wake);
            self.wake_room();
            // A protocol waiting to queue an answer goes on at the next
            // poll of the events.
            self.wake_events();
        }
        let end = self.conn.write_end();
        if end != start.end {
            // A shutdown flushed first.
            if end == Some(Shutdown::Write) {
                self.waiters.did_flush(marks, Waker::wake);
            }
            self.wake_all();
            return None;
        }
        let due = (self.conn.queue().is_flushed() && self.waiters.flushed() != marks)
            || self.waiters.flush_due(marks);
        due.then_some(marks)
    }

    /// The socket was flushed up to `marks`: their waiters are woken.
    pub fn did_flush(&mut self, marks: Marks) {
        self.waiters.did_flush(marks, Waker::wake);
    }

    /// The turn read bytes (or the end): the events stream looks.
    pub fn after_read(&mut self) {
        self.wake_events();
    }

    /// The turn handled a timer: the events stream and the senders look.
    pub fn after_timer(&mut self) {
        self.wake_events();
        self.wake_room();
    }

    /// The connection has nothing left to do (no event to come, nothing to
    /// write): once its queue is closed the driver is done, `Ready` with
    /// the connection's error if it has one; while the handles may still
    /// push, the connection gives back its idle memory and `cx` waits.
    ///
    /// # Errors
    ///
    /// The connection's error (a timeout, the protocol's).
    pub fn finish(&mut self, cx: &Context<'_>) -> Poll<Result<(), ConnError>> {
        if !self.conn.queue().is_closed() {
            self.conn.release_idle();
            self.park(cx);
            return Poll::Pending;
        }
        self.done = true;
        self.wake_all();
        Poll::Ready(self.conn.error().map_or(Ok(()), |e| Err(e.clone().into())))
    }

    /// The socket failed: nothing more is read or written, everyone learns
    /// `e`. Returns it for the driver's result.
    pub fn fail(&mut self, e: io::Error, now: Duration) -> ConnError {
        let kind = e.kind();
        let e = Arc::new(e);
        self.failed = Some(e.clone());
        self.note_loss();
        self.conn.handle_write_error(now);
        self.conn.handle_read_error(now);
        self.done = true;
        self.wake_all();
        ConnError::Io(io::Error::new(kind, e))
    }
}
