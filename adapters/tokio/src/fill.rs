//! The one read: bytes go from an `AsyncRead` straight into a [`Conn`]'s
//! spare room, used by [`Connection`](crate::Connection) and the shared
//! connection's driver task.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use cleave_proto::{Conn, Protocol};
use tokio::io::{AsyncRead, ReadBuf};

/// What a read into the stack takes when the buffer holds no block: a
/// request head, a line, a small message.
const STACK_READ: usize = 2048;

/// Reads once into `conn`'s spare room and always commits: `Ready(Ok)`
/// when bytes (or the end of the stream) came.
///
/// Memory follows readiness: a buffer that holds no block reads into the
/// stack first, so a silent connection allocates nothing.
pub(crate) fn poll_fill<S, P>(
    io: &mut S,
    conn: &mut Conn<P>,
    cx: &mut Context<'_>,
    now: Duration,
) -> Poll<io::Result<()>>
where
    S: AsyncRead + Unpin,
    P: Protocol,
{
    if conn.recv_buf().capacity() == 0 {
        // No block: read into the stack. A silent connection allocates
        // nothing, and a message that fits costs one read and a copy of
        // its bytes into a block made to measure (not a probe, then a
        // block, then its zeroing).
        let mut stack = [0u8; STACK_READ];
        let room = conn.recv_buf().remaining().clamp(1, STACK_READ);
        let mut buf = ReadBuf::new(&mut stack[..room]);
        ready!(Pin::new(&mut *io).poll_read(cx, &mut buf))?;
        if buf.filled().is_empty() {
            conn.handle_eof(now);
        } else {
            conn.feed(buf.filled(), now).map_err(io::Error::from)?;
        }
        return Poll::Ready(Ok(()));
    }
    let mut pending = false;
    let read = conn.read_with(now, |spare| {
        let mut buf = ReadBuf::new(spare);
        match Pin::new(io).poll_read(cx, &mut buf) {
            Poll::Ready(Ok(())) => Ok(buf.filled().len()),
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => {
                pending = true;
                Err(io::ErrorKind::WouldBlock.into())
            }
        }
    });
    match read {
        Ok(_) => Poll::Ready(Ok(())),
        Err(_) if pending => Poll::Pending,
        Err(e) => Poll::Ready(Err(e)),
    }
}
