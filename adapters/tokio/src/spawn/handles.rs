//! What the tasks hold of a shared connection: the [`Events`] stream and
//! the cloneable [`ConnHandle`]s.

use std::fmt;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use cleave_proto::conn::Shutdown;
use cleave_proto::write::{Marks, Push};
use cleave_proto::{Bytes, Conn, Lane, Protocol, Refusal, Rejected, Ticket};
use futures_core::Stream;
use futures_sink::Sink;

use crate::error::{ConnError, WriteError};

use super::Shared;

/// The protocol's events, from a connection driven by another task (see
/// [`spawn_connection`](crate::spawn_connection)). A `Stream`; consuming events makes room in the
/// buffer, and the driver reads on.
///
/// It ends after the protocol's last event, or after a final error: the
/// protocol's or a timeout's ([`ConnError::Protocol`], e.g.
/// [`Error::TimedOut`](cleave_proto::Error::TimedOut)), or the socket's
/// ([`ConnError::Io`]). Dropping it lets the driver read and drop the
/// events itself.
pub struct Events<P> {
    pub(super) shared: Arc<Shared<P>>,
    pub(super) ended: bool,
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

/// What the driver acts on: a change means it must look again. A queue
/// that still holds bytes the socket did not take is no news: the driver
/// waits for the socket then, which wakes it.
fn driver_view<P: Protocol>(conn: &Conn<P>) -> (bool, bool, Option<Duration>, bool, Marks) {
    (
        conn.wants_read(),
        conn.is_read_done(),
        conn.poll_timeout(),
        conn.wants_write(),
        conn.queue().end_marks(),
    )
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
        if driver_view(&st.conn) != before {
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
/// [`spawn_connection`](crate::spawn_connection)): it pushes into the queue the protocol replies
/// on.
///
/// - [`try_send`](Self::try_send), [`try_send_urgent`](Self::try_send_urgent):
///   queue now or get the item back;
/// - [`send`](Self::send): wait for room;
/// - [`written`](Self::written): wait for a ticket; a ticket nobody waits
///   for costs nothing;
/// - [`flush`](Self::flush), [`close`](Self::close).
///
/// Items are [`Bytes`] or encoded [`Frame`](cleave_proto::Frame)s (any
/// [`Push`]). It is also a `Sink<Bytes>`: an item the sink took while the
/// queue had no room goes out first at the next flush or close (the
/// sink's or [`flush`](Self::flush) and [`close`](Self::close)), or when
/// the handle drops if there is room by then.
///
/// When the last handle and the [`Events`] are dropped, the write side
/// closes as after [`close`](Self::close).
pub struct ConnHandle<P> {
    pub(super) shared: Arc<Shared<P>>,
    /// The sink's item that found no room yet (a lock of its own, so that
    /// `flush(&self)` can send it).
    pending: Mutex<Option<Bytes>>,
    /// The bulk mark of the sink's last item: what its flush waits for.
    sink_mark: u64,
}

impl<P> fmt::Debug for ConnHandle<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnHandle").finish_non_exhaustive()
    }
}

impl<P> Clone for ConnHandle<P> {
    fn clone(&self) -> Self {
        self.shared.lock().handles += 1;
        Self::new(self.shared.clone())
    }
}

impl<P> Drop for ConnHandle<P> {
    fn drop(&mut self) {
        let pending = self.pending_mut().take();
        let mut st = self.shared.lock();
        if let Some(bytes) = pending {
            // Queued if there is room now, else lost: flush or close a
            // sink before dropping it, as with any sink.
            let _ = st.conn.queue_mut().push_to(Lane::Bulk, bytes);
            st.wake_driver();
        }
        st.handles -= 1;
        if st.handles == 0 && !st.events_alive {
            st.wake_driver();
        }
    }
}

impl<P> ConnHandle<P> {
    pub(super) fn new(shared: Arc<Shared<P>>) -> Self {
        Self {
            shared,
            pending: Mutex::new(None),
            sink_mark: 0,
        }
    }

    /// The sink's kept item, through `&mut self`: no locking.
    fn pending_mut(&mut self) -> &mut Option<Bytes> {
        self.pending
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
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
        poll_fn(|cx| self.poll_push(cx, &mut slot)).await
    }

    /// Sends the sink's kept item, if any.
    async fn send_pending(&self) -> Result<(), WriteError> {
        let pending = self
            .pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(bytes) = pending {
            self.send(bytes).await.map_err(|r| r.into_parts().0)?;
        }
        Ok(())
    }

    /// Pushes the item in `slot` into the bulk lane, or keeps it there and
    /// waits for room.
    #[allow(clippy::result_large_err)] // a frame comes back by value, as in the core
    fn poll_push<I: Push>(
        &self,
        cx: &mut Context<'_>,
        slot: &mut Option<I>,
    ) -> Poll<Result<Ticket, Rejected<I, WriteError>>> {
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
                    *slot = Some(item);
                    st.room.push(cx.waker().clone());
                    Poll::Pending
                }
                (_, item) => Poll::Ready(Err(Rejected::new(WriteError::Closed, item))),
            },
        }
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
        self.send_pending().await?;
        let target = self.shared.lock().conn.queue().end_marks();
        poll_fn(|cx| self.poll_flushed(cx, target)).await
    }

    fn poll_flushed(&self, cx: &mut Context<'_>, target: Marks) -> Poll<Result<(), WriteError>> {
        let mut st = self.shared.lock();
        // Done is done, whatever failed since.
        if st.waiters.flushed().covers(target) {
            return Poll::Ready(Ok(()));
        }
        if let Some(e) = st.failure() {
            return Poll::Ready(Err(e));
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
        self.send_pending().await?;
        poll_fn(|cx| self.poll_closed(cx)).await
    }

    fn poll_closed(&self, cx: &mut Context<'_>) -> Poll<Result<(), WriteError>> {
        let mut st = self.shared.lock();
        st.conn.close();
        // Everything written and shut down, whatever failed since.
        if st.conn.write_end() == Some(Shutdown::Write) {
            return Poll::Ready(Ok(()));
        }
        if let Some(e) = st.failure() {
            return Poll::Ready(Err(e));
        }
        // Reset (what was queued was dropped), or the driver stopped.
        if st.conn.write_end().is_some() || st.done {
            return Poll::Ready(Err(WriteError::Closed));
        }
        st.waiters
            .wait_flush(Marks::END, cx.waker().clone(), Waker::will_wake);
        st.wake_driver();
        Poll::Pending
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

impl<P: Protocol> Sink<Bytes> for ConnHandle<P> {
    type Error = WriteError;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), WriteError>> {
        let this = self.get_mut();
        if this.pending_mut().is_none() {
            return Poll::Ready(this.shared.lock().failure().map_or(Ok(()), Err));
        }
        let mut slot = this.pending_mut().take();
        let pushed = this.poll_push(cx, &mut slot);
        *this.pending_mut() = slot;
        match pushed {
            Poll::Ready(Ok(ticket)) => {
                this.sink_mark = ticket.offset();
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(rejected)) => Poll::Ready(Err(rejected.into_parts().0)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn start_send(self: Pin<&mut Self>, item: Bytes) -> Result<(), WriteError> {
        let this = self.get_mut();
        let mut st = this.shared.lock();
        if let Some(e) = st.failure() {
            return Err(e);
        }
        match st.conn.push(item) {
            Ok(ticket) => {
                st.wake_driver();
                this.sink_mark = ticket.offset();
                Ok(())
            }
            Err(rejected) => match rejected.into_parts() {
                (Refusal::Full(_), item) => {
                    drop(st);
                    *this.pending_mut() = Some(item);
                    Ok(())
                }
                _ => Err(WriteError::Closed),
            },
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), WriteError>> {
        if self.as_mut().poll_ready(cx)?.is_pending() {
            return Poll::Pending;
        }
        let target = Marks {
            bulk: self.sink_mark,
            urgent: 0,
        };
        self.poll_flushed(cx, target)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), WriteError>> {
        if self.as_mut().poll_flush(cx)?.is_pending() {
            return Poll::Pending;
        }
        self.poll_closed(cx)
    }
}
