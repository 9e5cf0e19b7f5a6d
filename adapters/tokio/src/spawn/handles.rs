//! What the tasks hold of a shared connection: the [`Events`] stream and
//! the cloneable [`ConnHandle`]s.

use std::fmt;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use cleave_proto::write::{Marks, Push};
use cleave_proto::{Bytes, Lane, Protocol, Refusal, Rejected, Ticket};
use futures_core::Stream;
use futures_sink::Sink;

use crate::error::{ConnError, WriteError};

use super::Locked;

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
    pub(super) shared: Arc<Locked<P>>,
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
        self.shared.lock().drop_events();
    }
}

impl<P: Protocol> Stream for Events<P> {
    type Item = Result<P::Event, ConnError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        let polled = this.shared.lock().poll_event(cx);
        this.ended = matches!(polled, Poll::Ready(None | Some(Err(_))));
        polled
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
    pub(super) shared: Arc<Locked<P>>,
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
        self.shared.lock().add_handle();
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
            let _ = st.push(Lane::Bulk, bytes);
        }
        st.drop_handle();
    }
}

impl<P> ConnHandle<P> {
    pub(super) fn new(shared: Arc<Locked<P>>) -> Self {
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
        self.shared.lock().push(lane, item)
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

    /// Sends the sink's kept item, if any. It stays in the handle while it
    /// waits for room: a flush or close cancelled meanwhile loses nothing.
    async fn send_pending(&self) -> Result<(), WriteError> {
        poll_fn(|cx| {
            let mut pending = self
                .pending
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if pending.is_none() {
                return Poll::Ready(Ok(()));
            }
            let pushed = self.shared.lock().poll_push(cx, &mut pending);
            pushed.map(|done| done.map(drop).map_err(|rejected| rejected.into_parts().0))
        })
        .await
    }

    /// Pushes the item in `slot` into the bulk lane, or keeps it there and
    /// waits for room.
    #[allow(clippy::result_large_err)] // a frame comes back by value, as in the core
    fn poll_push<I: Push>(
        &self,
        cx: &mut Context<'_>,
        slot: &mut Option<I>,
    ) -> Poll<Result<Ticket, Rejected<I, WriteError>>> {
        self.shared.lock().poll_push(cx, slot)
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
        poll_fn(|cx| self.shared.lock().poll_written(cx, ticket)).await
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
        let target = self.shared.lock().flush_target()?;
        poll_fn(|cx| self.shared.lock().poll_flushed(cx, target)).await
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
        poll_fn(|cx| self.shared.lock().poll_closed(cx)).await
    }

    /// Bytes queued and not written yet.
    #[must_use]
    pub fn pending_bytes(&self) -> usize {
        self.shared.lock().conn().queue().len()
    }

    /// Whether the queue takes nothing more (closed, timed out, failed).
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.shared.lock().conn().queue().is_closed()
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
        let pushed = this.shared.lock().push_or_full(item);
        match pushed.map_err(|rejected| rejected.into_parts().0)? {
            Ok(ticket) => this.sink_mark = ticket.offset(),
            Err(full) => *this.pending_mut() = Some(full),
        }
        Ok(())
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), WriteError>> {
        if self.as_mut().poll_ready(cx)?.is_pending() {
            return Poll::Pending;
        }
        let target = Marks {
            bulk: self.sink_mark,
            urgent: 0,
        };
        self.shared.lock().poll_flushed(cx, target)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), WriteError>> {
        if self.as_mut().poll_flush(cx)?.is_pending() {
            return Poll::Pending;
        }
        self.shared.lock().poll_closed(cx)
    }
}
