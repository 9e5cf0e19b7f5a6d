//! A connection shared between tasks: a spawned driver owns the socket,
//! an [`Events`] stream hands out the protocol's events, and cloneable
//! [`ConnHandle`]s push into the same queue the protocol replies on.
//!
//! ```text
//!   Events::poll_next ──┐ poll_event                ┌──────────────────────────┐
//!   task A ─┐           ├──────── lock ───────────> │ Conn<P> + Waiters        │ <──> driver task <──> socket
//!   task B ─┼───────────┘ try_send / send /         └──────────────────────────┘  (read, drain, flush,
//!   task C ─┘ written / flush / close                                              timers, shutdown)
//! ```

use std::fmt;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{ready, Context, Poll, Waker};
use std::time::Duration;

use cleave_proto::conn::Shutdown;
use cleave_proto::write::{Marks, Push, Waiters};
use cleave_proto::{Conn, ConnConfig, Lane, Protocol, Refusal, Rejected, Ticket};
use futures_core::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::task::JoinHandle;
use tokio::time::{Instant, Sleep};

use crate::drain::{poll_drain, ConnOutbox};
use crate::error::{ConnError, WriteError};
use crate::reset::Reset;

/// Spawns a task that drives `protocol` over `io` (with `config`'s
/// buffer, queue and timeouts, starting now), and returns the stream of
/// the protocol's events, a handle for any task to write with, and the
/// driver task.
///
/// The protocol's own replies (a pong, say) and the handles' pushes share
/// the connection's one queue and go out through one socket: urgent items
/// between bulk items, never inside one. Events come out as the [`Events`]
/// stream polls them, and the protocol answers what it reads then: poll
/// it, or drop it (the driver then reads and drops the events itself, and
/// the protocol still answers).
///
/// The driver ends once no event will come, the write side is shut (after
/// [`ConnHandle::close`], a timeout's or the protocol's close) or reset,
/// with `Ok(())`, or with the connection's error (a timeout, the
/// protocol's error) or the socket's. When the [`Events`] and every handle
/// are dropped, the write side closes cleanly; if the connection failed
/// by then, the driver does not wait for a peer that does not read: what
/// is queued is dropped and the close is a reset.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use cleave_proto::conn::Framed;
/// use cleave_proto::{Bytes, ConnConfig, Lines};
/// use futures_util::StreamExt;
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
///
/// let (mut client, server) = tokio::io::duplex(1024);
/// let protocol = Framed::new(Lines::new());
/// let (mut events, handle, driver) =
///     cleave_tokio::spawn_connection(server, protocol, ConnConfig::default());
/// client.write_all(b"hello\n").await?;
/// assert_eq!(events.next().await.unwrap()?, "hello");
/// let other = handle.clone(); // another task may write too
/// tokio::spawn(async move { other.send(Bytes::from_static(b"hi\n")).await }).await??;
/// handle.close().await?; // written, then a FIN
/// let mut answer = String::new();
/// client.read_to_string(&mut answer).await?;
/// assert_eq!(answer, "hi\n");
/// client.shutdown().await?;
/// assert!(events.next().await.is_none());
/// driver.await??;
/// # Ok(())
/// # }
/// ```
pub fn spawn_connection<S, P>(
    io: S,
    protocol: P,
    config: ConnConfig,
) -> (Events<P>, ConnHandle<P>, JoinHandle<Result<(), ConnError>>)
where
    S: AsyncRead + AsyncWrite + Reset + Unpin + Send + 'static,
    P: Protocol + Send + 'static,
{
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            conn: Conn::with_config(protocol, config, Duration::ZERO),
            waiters: Waiters::new(),
            driver: None,
            events: None,
            room: Vec::new(),
            handles: 1,
            events_alive: true,
            failed: None,
            write_end: None,
            done: false,
        }),
    });
    let driver = tokio::spawn(Driver {
        io,
        shared: shared.clone(),
        base: Instant::now(),
        sleep: None,
        handled: None,
    });
    let events = Events {
        shared: shared.clone(),
        ended: false,
    };
    (events, ConnHandle { shared }, driver)
}

/// What the driver, the events and the handles share, behind one lock.
struct State<P> {
    conn: Conn<P>,
    /// Ticket and flush (and close) waiters, and how far the socket was
    /// flushed.
    waiters: Waiters<Waker>,
    /// The driver, when it waits for a push, a close or room in the buffer.
    driver: Option<Waker>,
    /// The events stream, when it waits for bytes.
    events: Option<Waker>,
    /// Senders waiting for room.
    room: Vec<Waker>,
    /// Live handles.
    handles: usize,
    events_alive: bool,
    /// The socket failed (reading or writing).
    failed: Option<Arc<io::Error>>,
    /// How the write side ended: a FIN or a reset.
    write_end: Option<Shutdown>,
    /// The driver stopped.
    done: bool,
}

impl<P> State<P> {
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

    fn failure(&self) -> Option<WriteError> {
        self.failed.clone().map(WriteError::Failed)
    }

    /// The driver will not write this any more.
    fn writing_over(&self) -> bool {
        self.done || self.write_end.is_some()
    }
}

struct Shared<P> {
    state: Mutex<State<P>>,
}

impl<P> Shared<P> {
    fn lock(&self) -> MutexGuard<'_, State<P>> {
        // A panic while the lock was held leaves the connection as it was
        // between two operations; carry on.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Reads in one poll of the driver before it lets others in.
const READ_BUDGET: usize = 32;

/// The driver task: reads, writes, flushes, keeps the time and shuts the
/// socket down, all under the lock (every step is a `poll`: it never
/// blocks while holding it).
struct Driver<S, P> {
    io: S,
    shared: Arc<Shared<P>>,
    /// The start of the core's clock: `now` is `base.elapsed()`.
    base: Instant,
    sleep: Option<Pin<Box<Sleep>>>,
    /// The deadline last handled: a protocol's own deadline is acted on at
    /// its next `poll_event`, so the driver waits for that rather than
    /// handling the same deadline again.
    handled: Option<Duration>,
}

impl<S, P> Driver<S, P>
where
    S: AsyncRead + AsyncWrite + Reset + Unpin,
    P: Protocol,
{
    /// Writes what is queued, flushes for who waits, shuts down or resets
    /// when the core asks. `Pending` on the socket is fine: it wakes us.
    fn write(&mut self, st: &mut State<P>, cx: &mut Context<'_>, now: Duration) -> io::Result<()> {
        let mut out = ConnOutbox {
            conn: &mut st.conn,
            now,
        };
        let before = out.conn.queue().marks();
        let drained = poll_drain(&mut self.io, &mut out, cx);
        let marks = st.conn.queue().marks();
        if marks != before || st.conn.queue().is_closed() {
            st.waiters.written(marks, Waker::wake);
            st.wake_room();
        }
        if let Poll::Ready(Err(e)) = drained {
            return Err(e);
        }
        let empty = drained.is_ready();
        if (empty && st.waiters.flushed() != marks) || st.waiters.flush_due(marks) {
            if let Poll::Ready(flushed) = Pin::new(&mut self.io).poll_flush(cx) {
                flushed?;
                st.waiters.did_flush(marks, Waker::wake);
            }
        }
        let end = match st.conn.poll_shutdown() {
            None => return Ok(()),
            Some(Shutdown::Write) => {
                match Pin::new(&mut self.io).poll_shutdown(cx) {
                    Poll::Ready(result) => result?,
                    // The socket wakes the driver.
                    Poll::Pending => return Ok(()),
                }
                Shutdown::Write
            }
            Some(Shutdown::Reset) => {
                // Best effort: where there is no reset, the close is clean.
                let _ = self.io.reset_on_close();
                Shutdown::Reset
            }
        };
        st.conn.handle_shutdown();
        st.write_end = Some(end);
        st.wake_all();
        Ok(())
    }

    /// Reads once into the buffer's spare room: `Ready(Ok)` when bytes (or
    /// the end of the stream) came.
    fn read(
        &mut self,
        st: &mut State<P>,
        cx: &mut Context<'_>,
        now: Duration,
    ) -> Poll<io::Result<()>> {
        if st.conn.recv_buf().capacity() == 0 {
            // Allocate only once the socket is readable.
            let mut probe = ReadBuf::new(&mut []);
            ready!(Pin::new(&mut self.io).poll_read(cx, &mut probe))?;
        }
        let io = &mut self.io;
        let mut pending = false;
        let read = st.conn.read_with(now, |spare| {
            let mut buf = ReadBuf::new(spare);
            match Pin::new(io).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) => Ok(buf.filled().len()),
                Poll::Ready(Err(e)) => Err(e),
                Poll::Pending => {
                    pending = true;
                    Err(io::ErrorKind::WouldBlock.into())
                }
            }
        });
        match read {
            Ok(_) => Poll::Ready(Ok(())),
            Err(_) if pending => Poll::Pending,
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    /// Arms the timer for the core's next deadline; `Ready(deadline)` once
    /// it passed (and was not handled already).
    fn timer(&mut self, conn: &Conn<P>, cx: &mut Context<'_>) -> Poll<Duration> {
        // A deadline past what `Instant` can hold is no deadline at all.
        let Some((due, at)) = conn
            .poll_timeout()
            .filter(|&due| self.handled != Some(due))
            .and_then(|due| Some((due, self.base.checked_add(due)?)))
        else {
            self.sleep = None;
            return Poll::Pending;
        };
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
        if sleep.deadline() != at {
            sleep.as_mut().reset(at);
        }
        ready!(sleep.as_mut().poll(cx));
        self.handled = Some(due);
        Poll::Ready(due)
    }
}

/// The socket failed: nothing more is read or written, everyone learns it.
fn fail<P: Protocol>(st: &mut State<P>, e: io::Error, now: Duration) -> ConnError {
    let kind = e.kind();
    let e = Arc::new(e);
    st.failed = Some(e.clone());
    st.conn.handle_write_error(now);
    st.conn.handle_read_error(now);
    st.done = true;
    st.wake_all();
    ConnError::Io(io::Error::new(kind, e))
}

impl<S, P> Future for Driver<S, P>
where
    S: AsyncRead + AsyncWrite + Reset + Unpin,
    P: Protocol,
{
    type Output = Result<(), ConnError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let shared = this.shared.clone();
        let mut guard = shared.lock();
        let st = &mut *guard;
        let mut reads = 0;
        loop {
            let now = this.base.elapsed();
            let abandoned = !st.events_alive && st.handles == 0;
            if !st.events_alive {
                // Nobody takes the events: the protocol still answers.
                while let Ok(Some(_)) = st.conn.poll_event() {}
            }
            if abandoned {
                if st.conn.error().is_some() && !st.conn.queue().is_flushed() {
                    // Failed, and nobody left to wait for a peer that may
                    // never read: drop the rest.
                    st.conn.reset();
                } else {
                    st.conn.close();
                }
            }
            if let Err(e) = this.write(st, cx, now) {
                return Poll::Ready(Err(fail(st, e, now)));
            }
            let conn = &st.conn;
            if conn.is_read_done() && conn.queue().is_closed() && conn.is_write_done() {
                let result = conn.error().map_or(Ok(()), |e| Err(e.clone().into()));
                st.done = true;
                st.wake_all();
                return Poll::Ready(result);
            }
            if st.conn.wants_read() {
                match this.read(st, cx, now) {
                    Poll::Ready(Ok(())) => {
                        st.wake_events();
                        reads += 1;
                        if reads == READ_BUDGET {
                            // A peer that never stops sending (with nobody
                            // taking the events, the buffer never fills)
                            // does not keep the lock or the thread.
                            cx.waker().wake_by_ref();
                            return Poll::Pending;
                        }
                        continue;
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(fail(st, e, now))),
                    Poll::Pending => st.conn.release_idle(),
                }
            }
            match this.timer(&st.conn, cx) {
                Poll::Ready(due) => {
                    // The timer may wake a hair early: the deadline has come.
                    st.conn.handle_timeout(this.base.elapsed().max(due));
                    st.wake_events();
                    st.wake_room();
                }
                Poll::Pending => {
                    st.driver = Some(cx.waker().clone());
                    return Poll::Pending;
                }
            }
        }
    }
}

impl<S, P> Drop for Driver<S, P> {
    /// A driver aborted, or dropped by a runtime shutting down: everyone
    /// waiting learns the connection failed.
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        if !st.done {
            let e = io::Error::other("the connection's driver task ended before it finished");
            st.failed = Some(Arc::new(e));
            st.done = true;
            st.wake_all();
        }
    }
}

/// The protocol's events, from a connection driven by another task (see
/// [`spawn_connection`]). A `Stream`; consuming events makes room in the
/// buffer, and the driver reads on.
///
/// It ends after the protocol's last event, or after a final error: the
/// protocol's or a timeout's ([`ConnError::Protocol`], e.g.
/// [`Error::TimedOut`](cleave_proto::Error::TimedOut)), or the socket's
/// ([`ConnError::Io`]). Dropping it lets the driver read and drop the
/// events itself.
pub struct Events<P> {
    shared: Arc<Shared<P>>,
    ended: bool,
}

impl<P> fmt::Debug for Events<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Events")
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl<P> Drop for Events<P> {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.events_alive = false;
        st.events = None;
        st.wake_driver();
    }
}

/// What the driver acts on: a change means it must look again.
fn driver_view<P: Protocol>(conn: &Conn<P>) -> (bool, bool, Option<Duration>) {
    (conn.wants_read(), conn.is_read_done(), conn.poll_timeout())
}

impl<P: Protocol> Stream for Events<P> {
    type Item = Result<P::Event, ConnError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        let mut guard = this.shared.lock();
        let st = &mut *guard;
        let before = driver_view(&st.conn);
        let polled = st.conn.poll_event();
        // The protocol may have queued a reply, freed room or finished.
        if st.conn.wants_write() || driver_view(&st.conn) != before {
            st.wake_driver();
        }
        match polled {
            Ok(Some(event)) => Poll::Ready(Some(Ok(event))),
            Err(e) => {
                this.ended = true;
                Poll::Ready(Some(Err(e.into())))
            }
            Ok(None) if st.conn.is_read_done() || st.done => {
                this.ended = true;
                Poll::Ready(
                    st.failed
                        .as_ref()
                        .map(|e| Err(ConnError::Io(io::Error::new(e.kind(), e.clone())))),
                )
            }
            Ok(None) => {
                st.events = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// A cloneable handle to a connection driven by another task (see
/// [`spawn_connection`]): it pushes into the queue the protocol replies
/// on.
///
/// - [`try_send`](Self::try_send), [`try_send_urgent`](Self::try_send_urgent):
///   queue now or get the item back;
/// - [`send`](Self::send): wait for room;
/// - [`written`](Self::written): wait for a ticket; a ticket nobody waits
///   for costs nothing;
/// - [`flush`](Self::flush), [`close`](Self::close).
///
/// When the last handle and the [`Events`] are dropped, the write side
/// closes as after [`close`](Self::close).
pub struct ConnHandle<P> {
    shared: Arc<Shared<P>>,
}

impl<P> fmt::Debug for ConnHandle<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnHandle").finish_non_exhaustive()
    }
}

impl<P> Clone for ConnHandle<P> {
    fn clone(&self) -> Self {
        self.shared.lock().handles += 1;
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<P> Drop for ConnHandle<P> {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.handles -= 1;
        if st.handles == 0 && !st.events_alive {
            st.wake_driver();
        }
    }
}

impl<P: Protocol> ConnHandle<P> {
    #[allow(clippy::result_large_err)] // a frame comes back by value, as in the core
    fn try_push<I: Push>(&self, lane: Lane, item: I) -> Result<Ticket, Rejected<I, Refusal>> {
        let mut st = self.shared.lock();
        let ticket = st.conn.queue_mut().push_to(lane, item)?;
        st.wake_driver();
        Ok(ticket)
    }

    /// Queues `item` (bytes or a frame) in the bulk lane now.
    ///
    /// # Errors
    ///
    /// It comes back when the lane is full, or the queue closed (by a
    /// close, a timeout or a failure).
    #[allow(clippy::result_large_err)] // a frame comes back by value, as in the core
    pub fn try_send<I: Push>(&self, item: I) -> Result<Ticket, Rejected<I, Refusal>> {
        self.try_push(Lane::Bulk, item)
    }

    /// Queues `item` in the urgent lane: ahead of queued bulk data, between
    /// items, next to the protocol's own replies.
    ///
    /// # Errors
    ///
    /// As [`try_send`](Self::try_send), against the urgent lane's limits.
    #[allow(clippy::result_large_err)] // a frame comes back by value, as in the core
    pub fn try_send_urgent<I: Push>(&self, item: I) -> Result<Ticket, Rejected<I, Refusal>> {
        self.try_push(Lane::Urgent, item)
    }

    /// Queues `item` in the bulk lane, waiting for room while it is full.
    ///
    /// # Errors
    ///
    /// [`WriteError::Closed`] once the queue is closed (a close, a
    /// timeout), or the socket's failure, with the item.
    #[allow(clippy::result_large_err)] // a frame comes back by value, as in the core
    pub async fn send<I: Push>(&self, item: I) -> Result<Ticket, Rejected<I, WriteError>> {
        let mut slot = Some(item);
        poll_fn(|cx| {
            let Some(item) = slot.take() else {
                return Poll::Pending;
            };
            let mut st = self.shared.lock();
            if let Some(e) = st.failure() {
                return Poll::Ready(Err(Rejected::new(e, item)));
            }
            match st.conn.push(item) {
                Ok(ticket) => {
                    st.wake_driver();
                    Poll::Ready(Ok(ticket))
                }
                Err(rejected) => match rejected.into_parts() {
                    (Refusal::Full(_), item) if !st.done => {
                        slot = Some(item);
                        st.room.push(cx.waker().clone());
                        Poll::Pending
                    }
                    (_, item) => Poll::Ready(Err(Rejected::new(WriteError::Closed, item))),
                },
            }
        })
        .await
    }

    /// Waits until the push named by `ticket` has been handed to the
    /// socket.
    ///
    /// # Errors
    ///
    /// The socket's failure (the bytes may not have gone out), or
    /// [`WriteError::Closed`] if the write side ended without writing it
    /// (a reset, or a ticket of another connection).
    pub async fn written(&self, ticket: Ticket) -> Result<(), WriteError> {
        poll_fn(|cx| {
            let mut st = self.shared.lock();
            if st.conn.queue().is_written(ticket) {
                return Poll::Ready(Ok(()));
            }
            if let Some(e) = st.failure() {
                return Poll::Ready(Err(e));
            }
            if st.writing_over() {
                return Poll::Ready(Err(WriteError::Closed));
            }
            st.waiters
                .wait_ticket(ticket, cx.waker().clone(), Waker::will_wake);
            Poll::Pending
        })
        .await
    }

    /// Waits until everything queued so far (by any handle, and the
    /// protocol) is written and the socket flushed. Pushes meanwhile do
    /// not hold it up.
    ///
    /// # Errors
    ///
    /// The socket's failure, or [`WriteError::Closed`] if the write side
    /// ended without writing it.
    pub async fn flush(&self) -> Result<(), WriteError> {
        let target = self.shared.lock().conn.queue().end_marks();
        poll_fn(|cx| self.poll_flushed(cx, target)).await
    }

    fn poll_flushed(&self, cx: &mut Context<'_>, target: Marks) -> Poll<Result<(), WriteError>> {
        let mut st = self.shared.lock();
        if let Some(e) = st.failure() {
            return Poll::Ready(Err(e));
        }
        if st.waiters.flushed().covers(target) {
            return Poll::Ready(Ok(()));
        }
        if st.writing_over() {
            return Poll::Ready(Err(WriteError::Closed));
        }
        st.waiters
            .wait_flush(target, cx.waker().clone(), Waker::will_wake);
        st.wake_driver();
        Poll::Pending
    }

    /// Closes the write side: the queue takes nothing more, what it holds
    /// goes out, then the write half is shut down (a FIN). Waits for that;
    /// reading goes on until the peer ends too.
    ///
    /// # Errors
    ///
    /// The socket's failure, or [`WriteError::Closed`] when the write side
    /// ended otherwise (a reset: what was queued was dropped).
    pub async fn close(&self) -> Result<(), WriteError> {
        poll_fn(|cx| {
            let mut st = self.shared.lock();
            st.conn.close();
            if let Some(e) = st.failure() {
                return Poll::Ready(Err(e));
            }
            match st.write_end {
                Some(Shutdown::Write) => return Poll::Ready(Ok(())),
                Some(Shutdown::Reset) => return Poll::Ready(Err(WriteError::Closed)),
                None if st.done => return Poll::Ready(Err(WriteError::Closed)),
                None => {}
            }
            st.waiters
                .wait_flush(Marks::END, cx.waker().clone(), Waker::will_wake);
            st.wake_driver();
            Poll::Pending
        })
        .await
    }

    /// Bytes queued and not written yet.
    #[must_use]
    pub fn pending_bytes(&self) -> usize {
        self.shared.lock().conn.queue().len()
    }

    /// Whether the queue takes nothing more (closed, timed out, failed).
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.shared.lock().conn.queue().is_closed()
    }
}
