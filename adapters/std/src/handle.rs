//! [`WriteHandle`]: a cloneable handle to a writer thread's queue.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cleave_proto::{Lane, Push, Refusal, Rejected, Ticket};

use crate::error::WriteError;
use crate::shared::Inner;

/// A cloneable handle to a writer thread's queue.
///
/// - [`try_send`](Self::try_send): queue now (bytes or a
///   [`Frame`](cleave_proto::Frame)), or get it back when the queue is full
///   (its item and byte limits are the backpressure);
///   [`try_send_urgent`](Self::try_send_urgent): ahead of bulk data;
/// - [`send`](Self::send): wait for room;
///   [`send_timeout`](Self::send_timeout): for so long;
/// - [`written`](Self::written): wait for a ticket (no allocation: a
///   ticket is an offset, compared with how far the writer got); a ticket
///   nobody waits for costs nothing (fire and forget);
/// - [`flush`](Self::flush), [`close`](Self::close).
///
/// When the writer fails, the queue is aborted, and every wait and send
/// returns [`WriteError::Failed`] with the writer's error. When the last
/// handle is dropped, the queue is closed: the thread writes what it
/// holds, shuts the write half down and ends.
///
/// # Reading on one thread, writing from others
///
/// A socket cloned with `try_clone` can be read by a [`Stream`](crate::Stream)
/// while the writer thread writes it; the handle goes to whoever answers.
///
/// ```
/// use std::io::{Read, Write};
/// use std::net::{Shutdown, TcpListener, TcpStream};
///
/// use cleave_proto::{Encoder, Framed, Lines, WriteQueueConfig};
/// use cleave_std::{spawn_writer, Stream};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let listener = TcpListener::bind("127.0.0.1:0")?;
/// let mut client = TcpStream::connect(listener.local_addr()?)?;
/// let (socket, _) = listener.accept()?;
///
/// let (handle, writer) = spawn_writer(socket.try_clone()?, WriteQueueConfig::default());
/// let mut lines = Stream::new(socket, Framed::new(Lines::new()));
/// client.write_all(b"ping\nping\n")?;
/// client.shutdown(Shutdown::Write)?;
///
/// let mut encoder = Lines::new();
/// while let Some(line) = lines.recv()? {
///     let handle = handle.clone(); // any thread may answer
///     handle.send(encoder.encode(line.slice(1..))?)?;
/// }
/// handle.close()?; // everything written, and the write half shut down
/// writer.join().expect("the writer thread does not panic")?;
///
/// let mut answers = String::new();
/// client.read_to_string(&mut answers)?;
/// assert_eq!(answers, "ing\ning\n");
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct WriteHandle {
    inner: Arc<Inner>,
}

impl Clone for WriteHandle {
    fn clone(&self) -> Self {
        self.inner.lock().handles += 1;
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl Drop for WriteHandle {
    fn drop(&mut self) {
        let mut shared = self.inner.lock();
        shared.handles -= 1;
        if shared.handles == 0 {
            shared.queue.close();
            self.inner.wake_writer(&mut shared);
        }
    }
}

impl WriteHandle {
    pub(crate) fn new(inner: Arc<Inner>) -> Self {
        Self { inner }
    }

    /// Queues `item` (bytes or a [`Frame`](cleave_proto::Frame)) in the
    /// bulk lane now, without waiting.
    ///
    /// # Errors
    ///
    /// It comes back when the lane is full ([`Refusal::Full`]), or the
    /// queue is closed or the writer failed ([`Refusal::Closed`]).
    #[allow(clippy::result_large_err)] // a frame comes back by value, as in the core
    pub fn try_send<I: Push>(&self, item: I) -> Result<Ticket, Rejected<I, Refusal>> {
        self.try_push(item, Lane::Bulk)
    }

    /// Queues `item` in the urgent lane: ahead of queued bulk data, between
    /// frames.
    ///
    /// # Errors
    ///
    /// As [`try_send`](Self::try_send), against the urgent lane's limits.
    #[allow(clippy::result_large_err)] // a frame comes back by value, as in the core
    pub fn try_send_urgent<I: Push>(&self, item: I) -> Result<Ticket, Rejected<I, Refusal>> {
        self.try_push(item, Lane::Urgent)
    }

    #[allow(clippy::result_large_err)] // a frame comes back by value, as in the core
    fn try_push<I: Push>(&self, item: I, lane: Lane) -> Result<Ticket, Rejected<I, Refusal>> {
        let mut shared = self.inner.lock();
        let ticket = shared.queue.push_to(lane, item)?;
        self.inner.wake_writer(&mut shared);
        Ok(ticket)
    }

    /// Queues `item` in the bulk lane, waiting while the queue is full.
    ///
    /// # Errors
    ///
    /// [`WriteError::Closed`] or the writer's failure, with the item.
    #[allow(clippy::result_large_err)] // a frame comes back by value, as in the core
    pub fn send<I: Push>(&self, item: I) -> Result<Ticket, Rejected<I, WriteError>> {
        self.send_until(item, None)
    }

    /// Queues `item`, waiting at most `timeout` for room.
    ///
    /// # Errors
    ///
    /// [`WriteError::TimedOut`] when the queue stayed full, or as
    /// [`send`](Self::send); the item comes back either way.
    #[allow(clippy::result_large_err)] // a frame comes back by value, as in the core
    pub fn send_timeout<I: Push>(
        &self,
        item: I,
        timeout: Duration,
    ) -> Result<Ticket, Rejected<I, WriteError>> {
        self.send_until(item, deadline(timeout))
    }

    #[allow(clippy::result_large_err)] // a frame comes back by value, as in the core
    fn send_until<I: Push>(
        &self,
        item: I,
        until: Option<Instant>,
    ) -> Result<Ticket, Rejected<I, WriteError>> {
        let mut item = item;
        let mut shared = self.inner.lock();
        loop {
            if let Some(e) = &shared.failed {
                return Err(Rejected::new(e.clone(), item));
            }
            match shared.queue.push_to(Lane::Bulk, item) {
                Ok(ticket) => {
                    self.inner.wake_writer(&mut shared);
                    return Ok(ticket);
                }
                Err(rejected) => match rejected.into_parts() {
                    (Refusal::Full(_), back) => item = back,
                    (_, back) => return Err(Rejected::new(WriteError::Closed, back)),
                },
            }
            shared = match self.inner.wait(shared, until) {
                Ok(shared) => shared,
                Err(_) => return Err(Rejected::new(WriteError::TimedOut, item)),
            };
        }
    }

    /// Whether the push named by `ticket` has been handed to the writer
    /// (without taking the lock).
    #[must_use]
    pub fn is_written(&self, ticket: Ticket) -> bool {
        self.inner.written().covers_ticket(ticket)
    }

    /// Waits until the push named by `ticket` (from this handle's queue)
    /// has been handed to the writer.
    ///
    /// # Errors
    ///
    /// The writer's failure (the bytes may not have gone out), or
    /// [`WriteError::Closed`] if the writer ended without writing it (a
    /// ticket from another handle's queue, say).
    pub fn written(&self, ticket: Ticket) -> Result<(), WriteError> {
        self.written_until(ticket, None)
    }

    /// Waits at most `timeout` for the push named by `ticket`.
    ///
    /// # Errors
    ///
    /// [`WriteError::TimedOut`] when it was not written in time (it may
    /// still be), or as [`written`](Self::written).
    pub fn written_timeout(&self, ticket: Ticket, timeout: Duration) -> Result<(), WriteError> {
        self.written_until(ticket, deadline(timeout))
    }

    fn written_until(&self, ticket: Ticket, until: Option<Instant>) -> Result<(), WriteError> {
        if self.is_written(ticket) {
            return Ok(());
        }
        let mut shared = self.inner.lock();
        loop {
            if shared.queue.is_written(ticket) {
                return Ok(());
            }
            if let Some(e) = &shared.failed {
                return Err(e.clone());
            }
            if shared.done || (shared.queue.is_closed() && shared.queue.is_flushed()) {
                return Err(WriteError::Closed);
            }
            shared = self
                .inner
                .wait(shared, until)
                .map_err(|_| WriteError::TimedOut)?;
        }
    }

    /// Waits until everything pushed so far (by any handle) is written and
    /// the writer flushed.
    ///
    /// # Errors
    ///
    /// The writer's failure.
    pub fn flush(&self) -> Result<(), WriteError> {
        let mut shared = self.inner.lock();
        // A failure dropped what was pushed: it will never be written.
        if let (true, Some(e)) = (shared.lost, &shared.failed) {
            return Err(e.clone());
        }
        let target = shared.queue.end_marks();
        if !shared.flushes.flushed().covers(target) {
            shared.flushes.wait_flush(target, (), |_, _| true);
            self.inner.wake_writer(&mut shared);
        }
        loop {
            // Done is done, whatever failed since.
            if shared.flushes.flushed().covers(target) {
                return Ok(());
            }
            if let Some(e) = &shared.failed {
                return Err(e.clone());
            }
            if shared.done {
                return Err(WriteError::Closed);
            }
            shared = self
                .inner
                .wait(shared, None)
                .map_err(|_| WriteError::TimedOut)?;
        }
    }

    /// Closes the queue (later sends fail with [`WriteError::Closed`]) and
    /// waits until the writer thread wrote everything queued, flushed, shut
    /// the write half down ([`Socket::shutdown_write`](crate::Socket::shutdown_write))
    /// and ended.
    ///
    /// # Errors
    ///
    /// The writer's failure.
    pub fn close(&self) -> Result<(), WriteError> {
        let mut shared = self.inner.lock();
        if !shared.queue.is_closed() {
            shared.queue.close();
            // Senders waiting for room learn that none will come.
            self.inner.wake_waiters(&shared);
        }
        self.inner.wake_writer(&mut shared);
        loop {
            if let Some(e) = &shared.failed {
                return Err(e.clone());
            }
            if shared.done {
                return Ok(());
            }
            shared = self
                .inner
                .wait(shared, None)
                .map_err(|_| WriteError::TimedOut)?;
        }
    }

    /// Bytes pending in the queue (both lanes).
    #[must_use]
    pub fn pending_bytes(&self) -> usize {
        self.inner.lock().queue.len()
    }

    /// Whether the queue is closed, or the writer failed.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.inner.lock().queue.is_closed()
    }

    /// The writer's failure, if it failed.
    #[must_use]
    pub fn error(&self) -> Option<WriteError> {
        self.inner.lock().failed.clone()
    }
}

/// `timeout` from now; `None` (no deadline) if that is past what the
/// clock can say.
fn deadline(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}
