//! The writer task: drains the shared queue into the socket.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tokio::io::AsyncWrite;

use super::shared::Inner;
use crate::drain::poll_drain;

/// Drains under the lock (a write never blocks: it is a `poll`), flushes
/// when the queue empties or a flush waiter's bytes are out, shuts down
/// when the queue is closed and empty.
pub(super) struct WriterTask<W> {
    pub(super) io: W,
    pub(super) shared: Arc<Inner>,
}

impl<W: AsyncWrite + Unpin> Future for WriterTask<W> {
    type Output = io::Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let mut guard = this.shared.lock();
        let shared = &mut *guard;
        let drained = poll_drain(&mut this.io, &mut shared.queue, cx);
        let marks = shared.queue.marks();
        this.shared.publish(marks);
        shared.wrote();
        if let Poll::Ready(Err(e)) = drained {
            return Poll::Ready(Err(shared.fail(e)));
        }
        // Empty, or a flush waiter's bytes are all out while others still
        // wait for the socket: make them reach it.
        let empty = drained.is_ready();
        if (empty && shared.waiters.flushed() != marks) || shared.waiters.flush_due(marks) {
            match Pin::new(&mut this.io).poll_flush(cx) {
                Poll::Ready(Ok(())) => shared.waiters.did_flush(marks, Waker::wake),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(shared.fail(e))),
                Poll::Pending => return Poll::Pending,
            }
        }
        if !empty {
            return Poll::Pending; // the socket is full; it wakes us
        }
        if !shared.queue.is_closed() {
            // Idle until the next push: keep no write memory.
            shared.writer = Some(cx.waker().clone());
            shared.queue.release_idle();
            return Poll::Pending;
        }
        match Pin::new(&mut this.io).poll_shutdown(cx) {
            Poll::Ready(Ok(())) => {
                shared.done = true;
                shared.wake_all();
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(shared.fail(e))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<W> Drop for WriterTask<W> {
    /// A writer task aborted, or dropped by a runtime shutting down, or
    /// unwound by a panicking writer: every waiter learns it failed.
    fn drop(&mut self) {
        let mut shared = self.shared.lock();
        if !shared.done && shared.failed.is_none() {
            let ended = io::Error::other("the writer task ended before it finished");
            let _ = shared.fail(ended);
        }
    }
}
