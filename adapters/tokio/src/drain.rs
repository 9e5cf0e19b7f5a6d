//! The write side of a connection, for every driver here (the same-task
//! [`Connection`](crate::Connection) and [`Writer`](crate::Writer), the
//! spawned driver behind the handles): what the queue holds goes into an
//! `AsyncWrite` with vectored writes, then the write half is shut down or
//! reset when the core asks.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use cleave_proto::conn::Shutdown;
use cleave_proto::{Conn, Protocol};
use tokio::io::AsyncWrite;

use crate::reset::Reset;

/// Writes what `conn` holds into `io` until nothing is left (`Ready`) or
/// the writer would block (`Pending`), with vectored writes when the
/// writer supports them.
///
/// # Errors
///
/// What the writer says; `WriteZero` when it takes nothing, and
/// `InvalidData` when it claims more than it was given (nothing is
/// advanced then: no ticket completes on a lie). The caller records it.
pub(crate) fn poll_drain<W, P>(
    io: &mut W,
    conn: &mut Conn<P>,
    now: Duration,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>>
where
    W: AsyncWrite + Unpin,
    P: Protocol,
{
    loop {
        let mut blocked = false;
        let written = conn.write_with(now, |slices| {
            let mut io = Pin::new(&mut *io);
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

/// Does what the core's [`poll_shutdown`](Conn::poll_shutdown) asks, if
/// anything, and says what was done: a shutdown of the write half (`FIN`),
/// or a reset on close where the socket has one (best effort: where it has
/// not, the close is clean).
pub(crate) fn poll_end<W, P>(
    io: &mut W,
    conn: &mut Conn<P>,
    cx: &mut Context<'_>,
) -> Poll<io::Result<Option<Shutdown>>>
where
    W: AsyncWrite + Reset + Unpin,
    P: Protocol,
{
    let how = conn.poll_shutdown();
    match how {
        None => return Poll::Ready(Ok(None)),
        Some(Shutdown::Write) => ready!(Pin::new(io).poll_shutdown(cx))?,
        Some(Shutdown::Reset) => drop(io.reset_on_close()),
    }
    conn.handle_shutdown();
    Poll::Ready(Ok(how))
}
