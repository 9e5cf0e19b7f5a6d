//! The cross-task write driver: cloneable [`WriteHandle`]s push into one
//! queue, a spawned task writes it.
//!
//! ```text
//!   task A ─┐ try_send / send            ┌──────────────────────────┐
//!   task B ─┼──────── lock ────────────> │ WriteQueue + Waiters     │ ──> writer task ──> socket
//!   task C ─┘ written(ticket) / flush    └──────────────────────────┘     (drain, flush, shutdown)
//! ```

mod shared;
mod task;

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use cleave_proto::write::{Marks, Push};
use cleave_proto::{Bytes, Lane, Refusal, Rejected, Ticket, WriteQueue, WriteQueueConfig};
use futures_sink::Sink;
use tokio::io::AsyncWrite;
use tokio::task::JoinHandle;

use crate::error::WriteError;
use shared::Inner;
use task::WriterTask;

/// Spawns a task that writes into `io` what the returned handle (and its
/// clones) push, and returns the handle and the task.
///
/// The task ends when the queue is closed ([`WriteHandle::close`], or the
/// last handle dropped) and everything is written and the writer shut
/// down, or when the writer fails; its result says which.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use cleave_proto::{Bytes, WriteQueueConfig};
///
/// let (reader, writer) = tokio::io::duplex(64 * 1024);
/// let (handle, task) = cleave_tokio::spawn_writer(writer, WriteQueueConfig::default());
/// let ticket = handle.try_send(Bytes::from_static(b"ping\n"))?; // fire and forget...
/// handle.written(ticket).await?; // ...or wait for it: no allocation either way
/// handle.close().await?;
/// task.await??;
/// # drop(reader);
/// # Ok(())
/// # }
/// ```
pub fn spawn_writer<W>(io: W, config: WriteQueueConfig) -> (WriteHandle, JoinHandle<io::Result<()>>)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let shared = Arc::new(Inner::new(WriteQueue::with_config(config)));
    let task = tokio::spawn(WriterTask {
        io,
        shared: shared.clone(),
    });
    (WriteHandle::new(shared), task)
}

/// A cloneable handle to a spawned writer's queue.
///
/// - [`try_send`](Self::try_send): queue now or get the item back;
/// - [`send`](Self::send): wait for room (the queue's byte and item limits
///   are the backpressure);
/// - [`written`](Self::written): wait for a ticket (no allocation); a
///   ticket nobody waits for costs nothing (fire and forget);
/// - [`flush`](Self::flush), [`close`](Self::close).
///
/// Items are [`Bytes`] or encoded [`Frame`](cleave_proto::Frame)s (any
/// [`Push`]). It is also a `Sink<Bytes>`.
///
/// When the last handle is dropped the queue is closed: the writer writes
/// what was queued, shuts the socket down and ends, as after
/// [`close`](Self::close).
#[derive(Debug)]
pub struct WriteHandle {
    shared: Arc<Inner>,
    /// The `Sink`'s item that did not fit yet; [`flush`](Self::flush) and
    /// [`close`](Self::close) send it first.
    pending: Mutex<Option<Bytes>>,
    /// Where the last item sent through the `Sink` ends in the bulk lane:
    /// what the `Sink`'s flush waits for.
    sink_mark: u64,
}

impl Clone for WriteHandle {
    fn clone(&self) -> Self {
        Self::new(self.shared.clone())
    }
}

impl Drop for WriteHandle {
    fn drop(&mut self) {
        let pending = self.take_pending();
        let last = self.shared.handles.fetch_sub(1, Ordering::AcqRel) == 1;
        if pending.is_none() && !last {
            return;
        }
        let mut shared = self.shared.lock();
        if let Some(bytes) = pending {
            // The Sink's item still waiting for room: queued if there is
            // room now, else lost (flush or close a Sink before dropping
            // it, as with any Sink).
            let _ = shared.queue.push(bytes);
        }
        if last {
            shared.queue.close();
        }
        shared.pushed();
    }
}

impl WriteHandle {
    fn new(shared: Arc<Inner>) -> Self {
        shared.handles.fetch_add(1, Ordering::Relaxed);
        Self {
            shared,
            pending: Mutex::new(None),
            sink_mark: 0,
        }
    }

    fn take_pending(&self) -> Option<Bytes> {
        self.pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
    }

    /// The `Sink`'s kept item, through `&mut self`: no locking.
    fn pending_mut(&mut self) -> &mut Option<Bytes> {
        self.pending
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Sends the `Sink`'s item that did not fit yet, if any.
    async fn send_pending(&self) -> Result<(), WriteError> {
        if let Some(bytes) = self.take_pending() {
            self.send(bytes).await.map_err(|r| r.into_parts().0)?;
        }
        Ok(())
    }

    fn try_push<I: Push>(&self, lane: Lane, item: I) -> Result<Ticket, Rejected<I, Refusal>> {
        let mut shared = self.shared.lock();
        let ticket = shared.queue.push_to(lane, item)?;
        shared.pushed();
        Ok(ticket)
    }

    /// Queues `item` (bytes or a frame) in the bulk lane now.
    ///
    /// # Errors
    ///
    /// It comes back when the lane is full, or the queue closed (or the
    /// writer failed, which closes it).
    #[allow(clippy::result_large_err)] // a frame comes back by value, as in the core
    pub fn try_send<I: Push>(&self, item: I) -> Result<Ticket, Rejected<I, Refusal>> {
        self.try_push(Lane::Bulk, item)
    }

    /// Queues `item` in the urgent lane: ahead of queued bulk data, between
    /// frames.
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
    /// [`WriteError::Closed`] or the writer's failure, with the item.
    #[allow(clippy::result_large_err)] // a frame comes back by value, as in the core
    pub async fn send<I: Push>(&self, item: I) -> Result<Ticket, Rejected<I, WriteError>> {
        let mut item = Some(item);
        poll_fn(|cx| self.poll_send(cx, &mut item)).await
    }

    /// Pushes the item in `slot`; while the lane is full it stays there and
    /// the task waits for room. An empty slot (polled after it completed)
    /// stays `Pending`.
    #[allow(clippy::result_large_err)] // a frame comes back by value, as in the core
    fn poll_send<I: Push>(
        &self,
        cx: &mut Context<'_>,
        slot: &mut Option<I>,
    ) -> Poll<Result<Ticket, Rejected<I, WriteError>>> {
        let Some(item) = slot.take() else {
            return Poll::Pending;
        };
        let mut shared = self.shared.lock();
        if let Some(e) = &shared.failed {
            return Poll::Ready(Err(Rejected::new(e.clone(), item)));
        }
        match shared.queue.push_to(Lane::Bulk, item) {
            Ok(ticket) => {
                shared.pushed();
                Poll::Ready(Ok(ticket))
            }
            Err(rejected) => match rejected.into_parts() {
                (Refusal::Full(_), item) => {
                    *slot = Some(item);
                    shared.room.push(cx.waker().clone());
                    Poll::Pending
                }
                (_, item) => Poll::Ready(Err(Rejected::new(WriteError::Closed, item))),
            },
        }
    }

    /// Waits until the push named by `ticket` has been handed to the
    /// writer.
    ///
    /// # Errors
    ///
    /// The writer's failure (the bytes may not have gone out), or
    /// [`WriteError::Closed`] if the writer ended without writing it (a
    /// ticket from another handle's queue, say).
    pub fn written(&self, ticket: Ticket) -> Written<'_> {
        Written {
            shared: &self.shared,
            ticket,
        }
    }

    /// Waits until everything pushed so far (through any handle) is
    /// written and the writer flushed. Other handles pushing meanwhile do
    /// not hold it up: the writer flushes as soon as these bytes are out.
    ///
    /// # Errors
    ///
    /// The writer's failure.
    pub async fn flush(&self) -> Result<(), WriteError> {
        self.send_pending().await?;
        let target = self.shared.lock().queue.end_marks();
        poll_fn(|cx| self.shared.lock().poll_flushed(cx, target)).await
    }

    /// Closes the queue and waits until the writer wrote everything queued,
    /// flushed and shut the socket down.
    ///
    /// # Errors
    ///
    /// The writer's failure.
    pub async fn close(&self) -> Result<(), WriteError> {
        self.send_pending().await?;
        self.shared.lock().queue.close();
        poll_fn(|cx| self.shared.lock().poll_done(cx)).await
    }

    /// Bytes pending in the queue.
    pub fn pending_bytes(&self) -> usize {
        self.shared.lock().queue.len()
    }

    /// Whether the queue is closed (or the writer failed).
    pub fn is_closed(&self) -> bool {
        self.shared.lock().queue.is_closed()
    }
}

/// Future returned by [`WriteHandle::written`].
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Written<'a> {
    shared: &'a Inner,
    ticket: Ticket,
}

impl Future for Written<'_> {
    type Output = Result<(), WriteError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let ticket = self.ticket;
        if self.shared.is_written(ticket) {
            return Poll::Ready(Ok(()));
        }
        let mut shared = self.shared.lock();
        if shared.queue.is_written(ticket) {
            return Poll::Ready(Ok(()));
        }
        if let Some(e) = &shared.failed {
            return Poll::Ready(Err(e.clone()));
        }
        if shared.done || (shared.queue.is_closed() && shared.queue.is_flushed()) {
            // The writer ended and this ticket is past what it wrote.
            return Poll::Ready(Err(WriteError::Closed));
        }
        shared
            .waiters
            .wait_ticket(ticket, cx.waker().clone(), Waker::will_wake);
        Poll::Pending
    }
}

impl Sink<Bytes> for WriteHandle {
    type Error = WriteError;

    /// Ready when the item sent last has found room in the queue.
    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), WriteError>> {
        let this = self.get_mut();
        if this.pending_mut().is_none() {
            return match &this.shared.lock().failed {
                Some(e) => Poll::Ready(Err(e.clone())),
                None => Poll::Ready(Ok(())),
            };
        }
        let mut slot = this.pending_mut().take();
        let sent = this.poll_send(cx, &mut slot);
        *this.pending_mut() = slot;
        match sent {
            Poll::Ready(Ok(ticket)) => {
                this.sink_mark = ticket.offset();
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(rejected)) => Poll::Ready(Err(rejected.into_parts().0)),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Queues the item, or keeps it until there is room (the next
    /// `poll_ready`, `poll_flush` or `poll_close` sends it).
    fn start_send(self: Pin<&mut Self>, item: Bytes) -> Result<(), WriteError> {
        let this = self.get_mut();
        let mut shared = this.shared.lock();
        if let Some(e) = &shared.failed {
            return Err(e.clone());
        }
        match shared.queue.push(item) {
            Ok(ticket) => {
                shared.pushed();
                this.sink_mark = ticket.offset();
                Ok(())
            }
            Err(rejected) => match rejected.into_parts() {
                (Refusal::Full(_), item) => {
                    drop(shared);
                    // Full: keep it; the next poll_ready or poll_flush sends it.
                    *this.pending_mut() = Some(item);
                    Ok(())
                }
                _ => Err(WriteError::Closed),
            },
        }
    }

    /// Ready when what this `Sink` sent is written and flushed; pushes
    /// through other handles do not hold it up.
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
        let mut shared = self.shared.lock();
        shared.queue.close();
        shared.poll_done(cx)
    }
}
