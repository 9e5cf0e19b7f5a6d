//! The same-task write driver for a write half with no protocol: the
//! task that owns it drains the queue.

use std::future::poll_fn;
use std::io;
use std::task::{Context, Poll};

use cleave_proto::write::Push;
use cleave_proto::{Lane, Refusal, Rejected, Ticket, WriteQueue, WriteQueueConfig};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::drain::poll_drain;

/// A writer and its [`WriteQueue`], driven by the task that owns them.
///
/// For a write half with no protocol on it (a backend socket a proxy
/// answers into, a client that only sends): pushes are plain method
/// calls, and bytes reach the socket when the task calls
/// [`flush`](Self::flush) (or [`poll_drain`](Self::poll_drain) from its own
/// `poll`). A connection that is read too is a
/// [`Connection`](crate::Connection), which writes the same way; use
/// [`spawn_writer`](crate::spawn_writer) when other tasks write.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// use cleave_proto::{Bytes, Encoder, LengthPrefixed};
/// use cleave_tokio::Writer;
///
/// let mut writer = Writer::new(Vec::new());
/// let mut codec = LengthPrefixed::new();
/// let ticket = writer.push(codec.encode(Bytes::from_static(b"hello")).unwrap()).unwrap();
/// writer.flush().await?;
/// assert!(writer.queue().is_written(ticket));
/// assert_eq!(writer.get_ref(), b"\0\0\0\x05hello");
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Writer<W> {
    io: W,
    queue: WriteQueue,
}

impl<W: AsyncWrite + Unpin> Writer<W> {
    /// A writer with the default queue.
    pub fn new(io: W) -> Self {
        Self::with_config(io, WriteQueueConfig::default())
    }

    /// A writer with the given queue limits.
    pub fn with_config(io: W, config: WriteQueueConfig) -> Self {
        Self {
            io,
            queue: WriteQueue::with_config(config),
        }
    }

    /// The queue.
    pub fn queue(&self) -> &WriteQueue {
        &self.queue
    }

    /// The queue, to push, close or inspect it.
    pub fn queue_mut(&mut self) -> &mut WriteQueue {
        &mut self.queue
    }

    /// The writer.
    pub fn get_ref(&self) -> &W {
        &self.io
    }

    /// The writer and what was not written yet.
    pub fn into_parts(self) -> (W, WriteQueue) {
        (self.io, self.queue)
    }

    /// Queues `item` (bytes or a frame) in the bulk lane.
    ///
    /// # Errors
    ///
    /// It comes back when the lane is full or the queue closed.
    #[allow(clippy::result_large_err)] // a frame comes back by value, as in the core
    pub fn push<I: Push>(&mut self, item: I) -> Result<Ticket, Rejected<I, Refusal>> {
        self.queue.push_to(Lane::Bulk, item)
    }

    /// Queues `item` in the urgent lane: ahead of queued bulk data, never
    /// inside a frame.
    ///
    /// # Errors
    ///
    /// As [`push`](Self::push), against the urgent lane's limits.
    #[allow(clippy::result_large_err)] // a frame comes back by value, as in the core
    pub fn push_urgent<I: Push>(&mut self, item: I) -> Result<Ticket, Rejected<I, Refusal>> {
        self.queue.push_to(Lane::Urgent, item)
    }

    /// Queues `item` in the bulk lane, writing first to make room while the
    /// lane is full.
    ///
    /// # Errors
    ///
    /// What the writer says; `BrokenPipe` once the queue is closed (the
    /// item is dropped then: use [`push`](Self::push) to keep it).
    pub async fn send<I: Push>(&mut self, item: I) -> io::Result<Ticket> {
        let mut item = item;
        loop {
            item = match self.queue.push_to(Lane::Bulk, item) {
                Ok(ticket) => return Ok(ticket),
                // Closed: nothing more goes out.
                Err(rejected) => rejected.when_full().ok_or(io::ErrorKind::BrokenPipe)?,
            };
            self.drain().await?;
        }
    }

    /// Writes what is queued from a `poll` method: `Ready` once the queue
    /// is empty.
    ///
    /// # Errors
    ///
    /// What the writer says.
    pub fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        poll_drain(&mut self.io, &mut self.queue, cx)
    }

    /// Writes everything queued.
    ///
    /// # Errors
    ///
    /// What the writer says.
    pub async fn drain(&mut self) -> io::Result<()> {
        poll_fn(|cx| self.poll_drain(cx)).await
    }

    /// Writes everything queued and flushes the writer; then the queue
    /// gives back the memory it kept for more writes
    /// ([`WriteQueue::release_idle`]): a connection that waits after a
    /// flush holds no write memory.
    ///
    /// # Errors
    ///
    /// What the writer says.
    pub async fn flush(&mut self) -> io::Result<()> {
        self.drain().await?;
        self.io.flush().await?;
        self.queue.release_idle();
        Ok(())
    }

    /// Closes the queue, writes what it holds, and shuts the writer down.
    ///
    /// # Errors
    ///
    /// What the writer says.
    pub async fn close(&mut self) -> io::Result<()> {
        self.queue.close();
        self.flush().await?;
        self.io.shutdown().await
    }
}
