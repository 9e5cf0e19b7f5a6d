//! The cross-task write driver: cloneable handles push into one queue, a
//! spawned task writes it.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use cleave_proto::{Bytes, Error, Frame, Lane, Rejected, Ticket, WriteQueue, WriteQueueConfig};
use futures_sink::Sink;
use tokio::io::AsyncWrite;
use tokio::task::JoinHandle;

use crate::error::WriteError;
use crate::write::poll_drain;

/// The state the handles and the writer task share, behind one lock.
#[derive(Debug, Default)]
struct Shared {
    queue: WriteQueue,
    /// The writer task, when it waits for bytes.
    writer: Option<Waker>,
    /// Producers waiting for room.
    room: Vec<Waker>,
    /// Ticket and flush waiters: lane, offset, waker. Grows to the number
    /// of concurrent waiters once, then is reused: no allocation per ticket.
    tickets: Vec<(Lane, u64, Waker)>,
    flushes: Vec<([u64; 2], Waker)>,
    /// Watermarks (bulk, urgent) the writer has flushed to the socket.
    flushed: [u64; 2],
    failed: Option<WriteError>,
    /// The writer shut the socket down and stopped.
    done: bool,
}

impl Shared {
    fn watermarks(&self) -> [u64; 2] {
        [
            self.queue.watermark(Lane::Bulk),
            self.queue.watermark(Lane::Urgent),
        ]
    }

    /// Wakes the ticket waiters whose bytes are out, and producers waiting
    /// for room.
    fn wake_written(&mut self) {
        let marks = self.watermarks();
        self.tickets.retain(|(lane, offset, waker)| {
            let written = *offset <= marks[*lane as usize];
            if written {
                waker.wake_by_ref();
            }
            !written
        });
        for waker in self.room.drain(..) {
            waker.wake();
        }
    }

    /// Registers a flush waiter once per target and task.
    fn wait_flushed(&mut self, target: [u64; 2], waker: &Waker) {
        let known = self
            .flushes
            .iter()
            .any(|(t, w)| *t == target && w.will_wake(waker));
        if !known {
            self.flushes.push((target, waker.clone()));
        }
    }

    /// Whether a flush waiter's bytes are all written (but not flushed):
    /// the writer flushes then, without waiting for the queue to empty.
    fn flush_due(&self, marks: [u64; 2]) -> bool {
        self.flushed != marks
            && self
                .flushes
                .iter()
                .any(|(t, _)| t[0] <= marks[0] && t[1] <= marks[1])
    }

    fn wake_flushed(&mut self) {
        let flushed = self.flushed;
        self.flushes.retain(|(target, waker)| {
            let done = target[0] <= flushed[0] && target[1] <= flushed[1];
            if done {
                waker.wake_by_ref();
            }
            !done
        });
    }

    fn wake_all(&mut self) {
        for (_, _, waker) in self.tickets.drain(..) {
            waker.wake();
        }
        for (_, waker) in self.flushes.drain(..) {
            waker.wake();
        }
        for waker in self.room.drain(..) {
            waker.wake();
        }
    }

    /// After a push: wake the writer if it sleeps.
    fn pushed(&mut self) {
        if let Some(writer) = self.writer.take() {
            writer.wake();
        }
    }
}

/// What the bulk lane takes: plain bytes or an encoded frame.
pub(crate) trait Item: Sized {
    fn push_into(self, queue: &mut WriteQueue) -> Result<Ticket, Rejected<Self>>;
}

impl Item for Bytes {
    fn push_into(self, queue: &mut WriteQueue) -> Result<Ticket, Rejected<Self>> {
        queue.push(self)
    }
}

impl Item for Frame {
    fn push_into(self, queue: &mut WriteQueue) -> Result<Ticket, Rejected<Self>> {
        queue.push_frame(self)
    }
}

/// The shared state, and the lanes' watermarks outside the lock, so that a
/// ticket already written completes without taking it.
#[derive(Debug, Default)]
struct Inner {
    state: Mutex<Shared>,
    written: [AtomicU64; 2],
    /// Live handles: the last one to go closes the queue.
    handles: AtomicUsize,
}

impl Inner {
    /// Publishes the watermarks; called under the lock after every drain.
    fn publish(&self, shared: &Shared) {
        let marks = shared.watermarks();
        self.written[0].store(marks[0], Ordering::Release);
        self.written[1].store(marks[1], Ordering::Release);
    }

    fn is_written(&self, ticket: Ticket) -> bool {
        self.written[ticket.lane() as usize].load(Ordering::Acquire) >= ticket.offset()
    }
}

fn lock(inner: &Inner) -> MutexGuard<'_, Shared> {
    let shared = &inner.state;
    // A panic while the lock was held leaves the queue as it was between
    // two operations; carry on.
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Spawns a task that writes into `io` what the returned handle (and its
/// clones) push, and returns the handle and the task.
///
/// The task ends when the queue is closed ([`WriteHandle::close`]) and
/// everything is written and the writer shut down, or when the writer
/// fails; its result says which.
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
    let shared = Arc::new(Inner {
        state: Mutex::new(Shared {
            queue: WriteQueue::with_config(config),
            ..Shared::default()
        }),
        written: Default::default(),
        handles: AtomicUsize::new(0),
    });
    let task = tokio::spawn(WriterTask {
        io,
        shared: shared.clone(),
        shutting_down: false,
    });
    (WriteHandle::new(shared), task)
}

/// The writer task: drains under the lock (a write never blocks: it is a
/// `poll`), flushes when the queue empties, shuts down when it is closed.
struct WriterTask<W> {
    io: W,
    shared: Arc<Inner>,
    shutting_down: bool,
}

impl<W: AsyncWrite + Unpin> Future for WriterTask<W> {
    type Output = io::Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let mut shared = lock(&this.shared);
        let shared = &mut *shared;
        loop {
            let drained = poll_drain(&mut shared.queue, &mut this.io, cx, |_| {});
            this.shared.publish(shared);
            shared.wake_written();
            if let Poll::Ready(Err(e)) = drained {
                return fail(shared, e);
            }
            // Empty, or a flush waiter's bytes are all out while others
            // still wait for the socket: make them reach it.
            let marks = shared.watermarks();
            let empty = drained.is_ready();
            if (empty && shared.flushed != marks) || shared.flush_due(marks) {
                match Pin::new(&mut this.io).poll_flush(cx) {
                    Poll::Ready(Ok(())) => {
                        shared.flushed = marks;
                        shared.wake_flushed();
                    }
                    Poll::Ready(Err(e)) => return fail(shared, e),
                    Poll::Pending => return Poll::Pending,
                }
            }
            if !empty {
                return Poll::Pending; // the socket is full; it wakes us
            }
            if !shared.queue.is_closed() {
                shared.writer = Some(cx.waker().clone());
                if shared.queue.is_flushed() {
                    // Idle until the next push: keep no write memory.
                    shared.queue.release_idle();
                    return Poll::Pending;
                }
                continue; // pushed while flushing
            }
            if shared.queue.is_flushed() || this.shutting_down {
                this.shutting_down = true;
                match Pin::new(&mut this.io).poll_shutdown(cx) {
                    Poll::Ready(Ok(())) => {
                        shared.done = true;
                        shared.wake_all();
                        return Poll::Ready(Ok(()));
                    }
                    Poll::Ready(Err(e)) => return fail(shared, e),
                    Poll::Pending => return Poll::Pending,
                }
            }
        }
    }
}

impl<W> Drop for WriterTask<W> {
    /// A writer task aborted, or dropped by a runtime shutting down, or
    /// unwound by a panicking writer: every waiter learns it failed.
    fn drop(&mut self) {
        let mut shared = lock(&self.shared);
        if !shared.done && shared.failed.is_none() {
            let ended = io::Error::other("the writer task ended before it finished");
            let _ = fail(&mut shared, ended);
        }
    }
}

fn fail(shared: &mut Shared, e: io::Error) -> Poll<io::Result<()>> {
    let kind = e.kind();
    let e = Arc::new(e);
    shared.failed = Some(WriteError::Failed(e.clone()));
    shared.queue.abort();
    shared.wake_all();
    Poll::Ready(Err(io::Error::new(kind, e)))
}

/// A cloneable handle to a spawned writer's queue.
///
/// - [`try_send`](Self::try_send): queue now or get the bytes back;
/// - [`send`](Self::send): wait for room (the queue's byte and item limits
///   are the backpressure);
/// - [`written`](Self::written): wait for a ticket (no allocation); a
///   ticket nobody waits for costs nothing (fire and forget);
/// - [`flush`](Self::flush), [`close`](Self::close).
///
/// It is also a `Sink<Bytes>`.
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
        let mut shared = lock(&self.shared);
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
            self.send(bytes).await?;
        }
        Ok(())
    }

    /// Queues `bytes` in the bulk lane now.
    ///
    /// # Errors
    ///
    /// The bytes come back when the queue is full, closed, or the writer
    /// failed.
    pub fn try_send(&self, bytes: Bytes) -> Result<Ticket, Rejected<Bytes>> {
        let mut shared = lock(&self.shared);
        let ticket = shared.queue.push(bytes)?;
        shared.pushed();
        Ok(ticket)
    }

    /// Queues `frame` in the bulk lane now.
    ///
    /// # Errors
    ///
    /// The frame comes back when the queue is full, closed, or the writer
    /// failed.
    #[allow(clippy::result_large_err)] // the frame comes back by value, as in the core
    pub fn try_send_frame(&self, frame: Frame) -> Result<Ticket, Rejected<Frame>> {
        let mut shared = lock(&self.shared);
        let ticket = shared.queue.push_frame(frame)?;
        shared.pushed();
        Ok(ticket)
    }

    /// Queues `bytes` in the urgent lane: ahead of queued bulk data, between
    /// frames.
    ///
    /// # Errors
    ///
    /// As [`try_send`](Self::try_send), against the urgent lane's limits.
    pub fn try_send_urgent(&self, bytes: Bytes) -> Result<Ticket, Rejected<Bytes>> {
        let mut shared = lock(&self.shared);
        let ticket = shared.queue.push_urgent(bytes)?;
        shared.pushed();
        Ok(ticket)
    }

    /// Queues `bytes`, waiting for room while the queue is full.
    ///
    /// # Errors
    ///
    /// [`WriteError::Closed`] or the writer's failure; the bytes are
    /// dropped then (use [`try_send`](Self::try_send) to keep them).
    pub async fn send(&self, bytes: Bytes) -> Result<Ticket, WriteError> {
        let mut item = Some(bytes);
        poll_fn(|cx| self.poll_send(cx, &mut item)).await
    }

    /// Queues an encoded frame, waiting for room while the queue is full.
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send).
    pub async fn send_frame(&self, frame: Frame) -> Result<Ticket, WriteError> {
        let mut item = Some(frame);
        poll_fn(|cx| self.poll_send(cx, &mut item)).await
    }

    fn poll_send<I: Item>(
        &self,
        cx: &mut Context<'_>,
        item: &mut Option<I>,
    ) -> Poll<Result<Ticket, WriteError>> {
        let mut shared = lock(&self.shared);
        if let Some(e) = &shared.failed {
            return Poll::Ready(Err(e.clone()));
        }
        let Some(value) = item.take() else {
            return Poll::Ready(Err(WriteError::Closed));
        };
        match value.push_into(&mut shared.queue) {
            Ok(ticket) => {
                shared.pushed();
                Poll::Ready(Ok(ticket))
            }
            Err(rejected) if rejected.error() == &Error::Closed => {
                Poll::Ready(Err(WriteError::Closed))
            }
            Err(rejected) => {
                *item = Some(rejected.into_value());
                shared.room.push(cx.waker().clone());
                Poll::Pending
            }
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
            registered: false,
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
        let target = lock(&self.shared).queue_pushed();
        poll_fn(|cx| {
            let mut shared = lock(&self.shared);
            if let Some(e) = &shared.failed {
                return Poll::Ready(Err(e.clone()));
            }
            let flushed = shared.flushed;
            if target[0] <= flushed[0] && target[1] <= flushed[1] {
                return Poll::Ready(Ok(()));
            }
            if shared.done {
                return Poll::Ready(Err(WriteError::Closed));
            }
            shared.wait_flushed(target, cx.waker());
            shared.pushed(); // make sure the writer looks
            Poll::Pending
        })
        .await
    }

    /// Closes the queue and waits until the writer wrote everything queued,
    /// flushed and shut the socket down.
    ///
    /// # Errors
    ///
    /// The writer's failure.
    pub async fn close(&self) -> Result<(), WriteError> {
        self.send_pending().await?;
        {
            let mut shared = lock(&self.shared);
            shared.queue.close();
            shared.pushed();
        }
        poll_fn(|cx| {
            let mut shared = lock(&self.shared);
            if let Some(e) = &shared.failed {
                return Poll::Ready(Err(e.clone()));
            }
            if shared.done {
                return Poll::Ready(Ok(()));
            }
            shared.wait_flushed([u64::MAX; 2], cx.waker());
            Poll::Pending
        })
        .await
    }

    /// Bytes pending in the queue.
    pub fn pending_bytes(&self) -> usize {
        lock(&self.shared).queue.len()
    }

    /// Whether the queue is closed (or the writer failed).
    pub fn is_closed(&self) -> bool {
        lock(&self.shared).queue.is_closed()
    }
}

impl Shared {
    /// Where each lane's stream ends now: what a flush must reach.
    fn queue_pushed(&self) -> [u64; 2] {
        let marks = self.watermarks();
        [
            marks[0] + self.queue.pending_bytes(Lane::Bulk) as u64,
            marks[1] + self.queue.pending_bytes(Lane::Urgent) as u64,
        ]
    }
}

/// Future returned by [`WriteHandle::written`].
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Written<'a> {
    shared: &'a Inner,
    ticket: Ticket,
    registered: bool,
}

impl Future for Written<'_> {
    type Output = Result<(), WriteError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.shared.is_written(this.ticket) {
            return Poll::Ready(Ok(()));
        }
        let mut shared = lock(this.shared);
        if shared.queue.is_written(this.ticket) {
            return Poll::Ready(Ok(()));
        }
        if let Some(e) = &shared.failed {
            return Poll::Ready(Err(e.clone()));
        }
        if shared.done || (shared.queue.is_closed() && shared.queue.is_flushed()) {
            // The writer ended and this ticket is past what it wrote.
            return Poll::Ready(Err(WriteError::Closed));
        }
        let (lane, offset) = (this.ticket.lane(), this.ticket.offset());
        let waker = cx.waker();
        match shared
            .tickets
            .iter_mut()
            .find(|(l, o, w)| this.registered && *l == lane && *o == offset && w.will_wake(waker))
        {
            Some(_) => {}
            None => {
                shared.tickets.push((lane, offset, waker.clone()));
                this.registered = true;
            }
        }
        Poll::Pending
    }
}

impl Sink<Bytes> for WriteHandle {
    type Error = WriteError;

    /// Ready when the item sent last has found room in the queue.
    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), WriteError>> {
        let this = self.get_mut();
        let pending = this.pending_mut();
        if pending.is_none() {
            return match &lock(&this.shared).failed {
                Some(e) => Poll::Ready(Err(e.clone())),
                None => Poll::Ready(Ok(())),
            };
        }
        let mut item = pending.take();
        match this.poll_send(cx, &mut item) {
            Poll::Ready(Ok(ticket)) => {
                this.sink_mark = ticket.offset();
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                *this.pending_mut() = item;
                Poll::Pending
            }
        }
    }

    /// Queues the item, or keeps it until there is room (the next
    /// `poll_ready`, `poll_flush` or `poll_close` sends it).
    fn start_send(self: Pin<&mut Self>, item: Bytes) -> Result<(), WriteError> {
        let this = self.get_mut();
        let mut shared = lock(&this.shared);
        if let Some(e) = &shared.failed {
            return Err(e.clone());
        }
        match shared.queue.push(item) {
            Ok(ticket) => {
                shared.pushed();
                this.sink_mark = ticket.offset();
                Ok(())
            }
            Err(rejected) if rejected.error() == &Error::Closed => Err(WriteError::Closed),
            Err(rejected) => {
                drop(shared);
                // Full: keep it; the next poll_ready or poll_flush sends it.
                *this.pending_mut() = Some(rejected.into_value());
                Ok(())
            }
        }
    }

    /// Ready when what this `Sink` sent is written and flushed; pushes
    /// through other handles do not hold it up.
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), WriteError>> {
        if self.as_mut().poll_ready(cx)?.is_pending() {
            return Poll::Pending;
        }
        let target = [self.sink_mark, 0];
        let mut shared = lock(&self.shared);
        if let Some(e) = &shared.failed {
            return Poll::Ready(Err(e.clone()));
        }
        let flushed = shared.flushed;
        if target[0] <= flushed[0] {
            return Poll::Ready(Ok(()));
        }
        shared.wait_flushed(target, cx.waker());
        shared.pushed();
        Poll::Pending
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), WriteError>> {
        if self.as_mut().poll_flush(cx)?.is_pending() {
            return Poll::Pending;
        }
        let mut shared = lock(&self.shared);
        if let Some(e) = &shared.failed {
            return Poll::Ready(Err(e.clone()));
        }
        shared.queue.close();
        if shared.done {
            return Poll::Ready(Ok(()));
        }
        shared.wait_flushed([u64::MAX; 2], cx.waker());
        shared.pushed();
        Poll::Pending
    }
}
