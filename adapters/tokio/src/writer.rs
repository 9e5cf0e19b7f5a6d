//! A write half with no protocol: a [`Connection`] that reads nothing,
//! driven by the task that owns it.

use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use cleave_proto::conn::WriteOnly;
use cleave_proto::write::Push;
use cleave_proto::{Conn, ConnConfig, Refusal, Rejected, Ticket, WriteQueue, WriteQueueConfig};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::{Connection, Reset};

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
pub struct Writer<W>(Connection<WriteHalf<W>, WriteOnly>);

impl<W: AsyncWrite + Unpin> Writer<W> {
    /// A writer with a default queue.
    pub fn new(io: W) -> Self {
        Self::with_config(io, WriteQueueConfig::default())
    }

    /// A writer whose queue has the given limits.
    pub fn with_config(io: W, config: WriteQueueConfig) -> Self {
        let config = ConnConfig::default().write_queue(config);
        let conn = Conn::with_config(WriteOnly, config, Duration::ZERO);
        Self(Connection::from_conn(WriteHalf(io), conn))
    }

    /// The queue: tickets, marks, room.
    pub fn queue(&self) -> &WriteQueue {
        self.0.conn().queue()
    }

    /// The queue, to push through (`push_to`, `try_reserve`) or close.
    pub fn queue_mut(&mut self) -> &mut WriteQueue {
        self.0.conn_mut().queue_mut()
    }

    /// The writer.
    pub fn get_ref(&self) -> &W {
        &self.0.get_ref().0
    }

    /// The writer and the queue (what it still holds, its tickets' marks).
    pub fn into_parts(self) -> (W, WriteQueue) {
        let (io, conn) = self.0.into_parts();
        (io.0, conn.into_parts().2)
    }

    /// Queues `item` (bytes or a frame) in the bulk lane.
    ///
    /// # Errors
    ///
    /// It comes back when the lane is full or the queue closed.
    #[allow(clippy::result_large_err)] // a frame comes back by value, as in the core
    pub fn push<I: Push>(&mut self, item: I) -> Result<Ticket, Rejected<I, Refusal>> {
        self.0.conn_mut().push(item)
    }

    /// Queues `item` in the urgent lane: ahead of queued bulk data, never
    /// inside a frame.
    ///
    /// # Errors
    ///
    /// As [`push`](Self::push), against the urgent lane's limits.
    #[allow(clippy::result_large_err)] // a frame comes back by value, as in the core
    pub fn push_urgent<I: Push>(&mut self, item: I) -> Result<Ticket, Rejected<I, Refusal>> {
        self.0.conn_mut().push_urgent(item)
    }

    /// Queues `item` in the bulk lane, writing first to make room while the
    /// lane is full.
    ///
    /// # Errors
    ///
    /// What the writer says; `BrokenPipe` once the queue is closed (the
    /// item is dropped then: use [`push`](Self::push) to keep it).
    pub async fn send<I: Push>(&mut self, item: I) -> io::Result<Ticket> {
        Ok(self.0.send(item).await?)
    }

    /// Writes what is queued from a `poll` method: `Ready` once the queue
    /// is empty (and the writer shut down, after [`close`](Self::close)).
    ///
    /// # Errors
    ///
    /// What the writer says.
    pub fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.poll_drain(cx).map_err(io::Error::from)
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
        Ok(self.0.flush().await?)
    }

    /// Closes the queue, writes what it holds, and shuts the writer down.
    ///
    /// # Errors
    ///
    /// What the writer says.
    pub async fn close(&mut self) -> io::Result<()> {
        Ok(self.0.close().await?)
    }
}

/// Any writer as the socket of a connection that reads nothing: nothing
/// to read, and no reset (a write-only connection asks for none unless
/// told to, [`Conn::reset`], and then closes cleanly).
#[derive(Debug)]
pub(crate) struct WriteHalf<W>(pub(crate) W);

impl<W> AsyncRead for WriteHalf<W> {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl<W> Reset for WriteHalf<W> {
    fn reset_on_close(&self) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for WriteHalf<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}
