//! The same-task write driver: the connection's own task drains the queue.

use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use cleave_proto::{Bytes, Frame, Progress, Rejected, Ticket, WriteQueue, WriteQueueConfig};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::handle::Item;

/// How many slices one write hands the OS.
const SLICES: usize = 64;

/// Writes what `queue` holds into `io` until the queue is empty (`Ready`)
/// or the writer would block (`Pending`), with vectored writes when the
/// writer supports them. `on_progress` sees every advance, so waiters can be
/// told as soon as their bytes are out.
pub(crate) fn poll_drain<W: AsyncWrite + Unpin>(
    queue: &mut WriteQueue,
    io: &mut W,
    cx: &mut Context<'_>,
    mut on_progress: impl FnMut(Progress),
) -> Poll<io::Result<()>> {
    while !queue.is_flushed() {
        let written = {
            let mut slices = [IoSlice::new(&[]); SLICES];
            let n = queue.io_slices(&mut slices);
            let io = Pin::new(&mut *io);
            // What the writer was offered: all slices (the queue checks
            // the count against them), or only the first.
            let (poll, offered) = if io.is_write_vectored() {
                (io.poll_write_vectored(cx, &slices[..n]), usize::MAX)
            } else {
                (io.poll_write(cx, &slices[0]), slices[0].len())
            };
            match poll {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                // A writer that claims more than it was given.
                Poll::Ready(Ok(written)) if written > offered => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "the writer reported more bytes than it was given",
                    )));
                }
                Poll::Ready(Ok(written)) => written,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        };
        match queue.advance(written) {
            Ok(progress) => on_progress(progress),
            // A writer that claims more than it was given.
            Err(e) => return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e))),
        }
    }
    Poll::Ready(Ok(()))
}

/// A writer and its [`WriteQueue`], driven by the task that owns them.
///
/// The fastest way to write when one task owns the connection: pushes are
/// plain method calls, and bytes reach the socket when the task calls
/// [`flush`](Self::flush) (or [`poll_drain`](Self::poll_drain) from its own
/// `poll`). Use [`spawn_writer`](crate::spawn_writer) when other tasks
/// write to the connection.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// use cleave_proto::{Bytes, Encoder, LengthPrefixed};
/// use cleave_tokio::Writer;
///
/// let mut writer = Writer::new(Vec::new());
/// let mut codec = LengthPrefixed::new();
/// let ticket = writer.push_frame(codec.encode(Bytes::from_static(b"hello")).unwrap()).unwrap();
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

    /// Queues `bytes`; see [`WriteQueue::push`].
    ///
    /// # Errors
    ///
    /// The bytes come back when the queue is full or closed.
    pub fn push(&mut self, bytes: Bytes) -> Result<Ticket, Rejected<Bytes>> {
        self.queue.push(bytes)
    }

    /// Queues a frame; see [`WriteQueue::push_frame`].
    ///
    /// # Errors
    ///
    /// The frame comes back when the queue is full or closed.
    #[allow(clippy::result_large_err)] // the frame comes back by value, as in the core
    pub fn push_frame(&mut self, frame: Frame) -> Result<Ticket, Rejected<Frame>> {
        self.queue.push_frame(frame)
    }

    /// Queues `bytes`, writing first to make room if the queue is full.
    ///
    /// # Errors
    ///
    /// What the socket says; `BrokenPipe` if the queue is closed.
    pub async fn send(&mut self, bytes: Bytes) -> io::Result<Ticket> {
        self.send_item(bytes).await
    }

    /// Queues an encoded frame, writing first to make room if the queue is
    /// full.
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send).
    pub async fn send_frame(&mut self, frame: Frame) -> io::Result<Ticket> {
        self.send_item(frame).await
    }

    async fn send_item<I: Item>(&mut self, item: I) -> io::Result<Ticket> {
        let mut item = item;
        loop {
            match item.push_into(&mut self.queue) {
                Ok(ticket) => return Ok(ticket),
                Err(rejected) if rejected.error() == &cleave_proto::Error::Closed => {
                    return Err(io::ErrorKind::BrokenPipe.into());
                }
                Err(rejected) => {
                    item = rejected.into_value();
                    self.drain().await?;
                }
            }
        }
    }

    /// Writes what is queued from a `poll` method: `Ready` once the queue
    /// is empty.
    ///
    /// # Errors
    ///
    /// What the socket says.
    pub fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        poll_drain(&mut self.queue, &mut self.io, cx, |_| {})
    }

    /// Writes everything queued.
    ///
    /// # Errors
    ///
    /// What the socket says.
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
    /// What the socket says.
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
    /// What the socket says.
    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.queue.close();
        self.flush().await?;
        self.io.shutdown().await
    }
}
