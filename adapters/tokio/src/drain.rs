//! The one drain: what a queue (or a connection's queue) holds goes into
//! an `AsyncWrite` with vectored writes, until it is empty or the writer
//! would block. The same-task [`Writer`](crate::Writer), the cross-task
//! writer task and the [`Connection`](crate::Connection) all write through
//! it.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use cleave_proto::conn::SLICES;
use cleave_proto::{Conn, Protocol, WriteQueue};
use tokio::io::AsyncWrite;

/// What a drain writes from: it hands `write` the next slices (never
/// none) and advances by what `write` took; `Ok(0)` without calling it
/// when nothing is left.
pub(crate) trait Outbox {
    fn write_once(
        &mut self,
        write: impl FnOnce(&[IoSlice<'_>]) -> io::Result<usize>,
    ) -> io::Result<usize>;
}

impl Outbox for WriteQueue {
    fn write_once(
        &mut self,
        write: impl FnOnce(&[IoSlice<'_>]) -> io::Result<usize>,
    ) -> io::Result<usize> {
        let written = {
            let mut slices = [IoSlice::new(&[]); SLICES];
            let n = self.io_slices(&mut slices);
            if n == 0 {
                return Ok(0);
            }
            write(&slices[..n])?
        };
        self.advance(written)?;
        Ok(written)
    }
}

/// A connection's queue, with the time the writes are made at.
pub(crate) struct ConnOutbox<'a, P> {
    pub(crate) conn: &'a mut Conn<P>,
    pub(crate) now: Duration,
}

impl<P: Protocol> Outbox for ConnOutbox<'_, P> {
    fn write_once(
        &mut self,
        write: impl FnOnce(&[IoSlice<'_>]) -> io::Result<usize>,
    ) -> io::Result<usize> {
        self.conn.write_with(self.now, write)
    }
}

/// Writes what `out` holds into `io` until nothing is left (`Ready`) or
/// the writer would block (`Pending`), with vectored writes when the
/// writer supports them.
///
/// # Errors
///
/// What the writer says; `WriteZero` when it takes nothing, and
/// `InvalidData` when it claims more than it was given (nothing is
/// advanced then: no ticket completes on a lie).
pub(crate) fn poll_drain<W, O>(
    io: &mut W,
    out: &mut O,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>>
where
    W: AsyncWrite + Unpin + ?Sized,
    O: Outbox,
{
    loop {
        let mut blocked = false;
        let written = out.write_once(|slices| {
            let mut io = Pin::new(&mut *io);
            // What the writer was offered: all slices, or only the first.
            let (poll, offered) = if io.is_write_vectored() {
                let offered = slices.iter().map(|s| s.len()).sum();
                (io.as_mut().poll_write_vectored(cx, slices), offered)
            } else {
                (io.as_mut().poll_write(cx, &slices[0]), slices[0].len())
            };
            match poll {
                Poll::Ready(Ok(0)) => Err(io::ErrorKind::WriteZero.into()),
                Poll::Ready(Ok(n)) if n > offered => Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the writer reported more bytes than it was given",
                )),
                Poll::Ready(result) => result,
                Poll::Pending => {
                    blocked = true;
                    Ok(0)
                }
            }
        })?;
        if blocked {
            return Poll::Pending;
        }
        if written == 0 {
            return Poll::Ready(Ok(()));
        }
    }
}
