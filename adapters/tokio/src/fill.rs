//! The one read: bytes go from an `AsyncRead` straight into a [`Conn`]'s
//! spare room, used by [`Connection`](crate::Connection) and the shared
//! connection's driver task.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use cleave_proto::{Conn, Protocol};
use tokio::io::{AsyncRead, ReadBuf};

/// Reads once into `conn`'s spare room and always commits: `Ready(Ok)`
/// when bytes (or the end of the stream) came.
///
/// Memory follows readiness: a buffer that holds no block first asks the
/// socket with no room at all, which tokio's sockets answer `Pending`
/// until they are readable, so a silent connection allocates nothing.
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
        let mut probe = ReadBuf::new(&mut []);
        ready!(Pin::new(&mut *io).poll_read(cx, &mut probe))?;
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
