//! [`WriteHandle`]: a cloneable handle to a writer thread's queue.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cleave_proto::{Bytes, Error, Frame, Rejected, Ticket, WriteQueue};

use crate::error::{SendError, WriteError};
use crate::shared::{covers, Inner};
use crate::write::Item;

/// A cloneable handle to a writer thread's queue.
///
/// - [`try_send`](Self::try_send): queue now, or get the bytes back when
///   the queue is full (its item and byte limits are the backpressure);
/// - [`send`](Self::send): wait for room;
///   [`send_timeout`](Self::send_timeout): for so long;
/// - [`wait`](Self::wait): wait for a ticket (no allocation: a ticket is
///   an offset, compared with the queue's watermark); a ticket nobody
///   waits for costs nothing (fire and forget);
/// - [`flush`](Self::flush), [`close`](Self::close).
///
/// When the writer fails, the queue is aborted, and every wait and send
/// returns [`WriteError::Failed`] with the writer's error. When the last
/// handle is dropped, the queue is closed: the thread writes what it holds
/// and ends.
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
///     handle.send_frame(encoder.encode(line.slice(1..))?)?;
/// }
/// handle.close()?; // everything written
/// writer.join().expect("the writer thread does not panic")?;
/// lines.get_ref().shutdown(Shutdown::Write)?; // the writer's clone is gone; end the socket
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

    /// Queues `bytes` in the bulk lane now, without waiting.
    ///
    /// # Errors
    ///
    /// The bytes come back when the queue is full
    /// ([`Error::LimitExceeded`]), closed, or the writer failed
    /// ([`Error::Closed`]).
    pub fn try_send(&self, bytes: Bytes) -> Result<Ticket, Rejected<Bytes>> {
        self.try_push(|queue| queue.push(bytes))
    }

    /// Queues an encoded frame in the bulk lane now, without waiting.
    ///
    /// # Errors
    ///
    /// As [`try_send`](Self::try_send); the frame comes back whole.
    #[allow(clippy::result_large_err)] // the frame comes back by value, as in the core
    pub fn try_send_frame(&self, frame: Frame) -> Result<Ticket, Rejected<Frame>> {
        self.try_push(|queue| queue.push_frame(frame))
    }

    /// Queues `bytes` in the urgent lane: ahead of queued bulk data, between
    /// frames.
    ///
    /// # Errors
    ///
    /// As [`try_send`](Self::try_send), against the urgent lane's limits.
    pub fn try_send_urgent(&self, bytes: Bytes) -> Result<Ticket, Rejected<Bytes>> {
        self.try_push(|queue| queue.push_urgent(bytes))
    }

    fn try_push<T>(
        &self,
        push: impl FnOnce(&mut WriteQueue) -> Result<Ticket, Rejected<T>>,
    ) -> Result<Ticket, Rejected<T>> {
        let mut shared = self.inner.lock();
        let ticket = push(&mut shared.queue)?;
        self.inner.wake_writer(&mut shared);
        Ok(ticket)
    }

    /// Queues `bytes` in the bulk lane, waiting while the queue is full.
    ///
    /// # Errors
    ///
    /// [`WriteError::Closed`] or the writer's failure, with the bytes.
    pub fn send(&self, bytes: Bytes) -> Result<Ticket, SendError<Bytes>> {
        self.send_item(bytes, None)
    }

    /// Queues an encoded frame, waiting while the queue is full.
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send), with the frame.
    #[allow(clippy::result_large_err)] // the frame comes back by value, as in the core
    pub fn send_frame(&self, frame: Frame) -> Result<Ticket, SendError<Frame>> {
        self.send_item(frame, None)
    }

    /// Queues `bytes`, waiting at most `timeout` for room.
    ///
    /// # Errors
    ///
    /// [`WriteError::TimedOut`] when the queue stayed full, or as
    /// [`send`](Self::send); the bytes come back either way.
    pub fn send_timeout(
        &self,
        bytes: Bytes,
        timeout: Duration,
    ) -> Result<Ticket, SendError<Bytes>> {
        self.send_item(bytes, deadline(timeout))
    }

    /// Queues an encoded frame, waiting at most `timeout` for room.
    ///
    /// # Errors
    ///
    /// As [`send_timeout`](Self::send_timeout), with the frame.
    #[allow(clippy::result_large_err)] // the frame comes back by value, as in the core
    pub fn send_frame_timeout(
        &self,
        frame: Frame,
        timeout: Duration,
    ) -> Result<Ticket, SendError<Frame>> {
        self.send_item(frame, deadline(timeout))
    }

    fn send_item<I: Item>(&self, item: I, until: Option<Instant>) -> Result<Ticket, SendError<I>> {
        let mut item = item;
        let mut shared = self.inner.lock();
        loop {
            if let Some(e) = &shared.failed {
                return Err(SendError::new(e.clone(), item));
            }
            match item.push_into(&mut shared.queue) {
                Ok(ticket) => {
                    self.inner.wake_writer(&mut shared);
                    return Ok(ticket);
                }
                Err(rejected) if rejected.error() == &Error::Closed => {
                    return Err(SendError::new(WriteError::Closed, rejected.into_value()));
                }
                Err(rejected) => item = rejected.into_value(),
            }
            shared = match self.inner.wait(shared, until) {
                Ok(shared) => shared,
                Err(_) => return Err(SendError::new(WriteError::TimedOut, item)),
            };
        }
    }

    /// Whether the push named by `ticket` has been handed to the writer
    /// (without taking the lock).
    #[must_use]
    pub fn is_written(&self, ticket: Ticket) -> bool {
        self.inner.written[ticket.lane() as usize].load(Ordering::Acquire) >= ticket.offset()
    }

    /// Waits until the push named by `ticket` (from this handle's queue)
    /// has been handed to the writer.
    ///
    /// # Errors
    ///
    /// The writer's failure (the bytes may not have gone out), or
    /// [`WriteError::Closed`] if the writer ended without writing it (a
    /// ticket from another handle's queue, say).
    pub fn wait(&self, ticket: Ticket) -> Result<(), WriteError> {
        self.wait_until(ticket, None)
    }

    /// Waits at most `timeout` for the push named by `ticket`.
    ///
    /// # Errors
    ///
    /// [`WriteError::TimedOut`] when it was not written in time (it may
    /// still be), or as [`wait`](Self::wait).
    pub fn wait_timeout(&self, ticket: Ticket, timeout: Duration) -> Result<(), WriteError> {
        self.wait_until(ticket, deadline(timeout))
    }

    fn wait_until(&self, ticket: Ticket, until: Option<Instant>) -> Result<(), WriteError> {
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
        let target = shared.pushed();
        for (wanted, target) in shared.flush_wanted.iter_mut().zip(target) {
            *wanted = (*wanted).max(target);
        }
        self.inner.wake_writer(&mut shared);
        loop {
            // After a failure, what was pushed may have been dropped.
            if let Some(e) = &shared.failed {
                return Err(e.clone());
            }
            if covers(shared.flushed, target) {
                return Ok(());
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
    /// waits until the writer thread wrote everything queued, flushed and
    /// ended.
    ///
    /// # Errors
    ///
    /// The writer's failure.
    pub fn close(&self) -> Result<(), WriteError> {
        let mut shared = self.inner.lock();
        shared.queue.close();
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
