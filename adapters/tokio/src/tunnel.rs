//! The raw tunnel after a hand-off: both directions copied in one future,
//! a clean end passed on as a half-close, a failure passed on as a reset.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use cleave_proto::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

/// Each direction's copy buffer. tokio's default (8 KiB) made twice the
/// system calls of this on bulk tunnels (see the stream harness).
const BUF_SIZE: usize = 16 * 1024;

/// A connection whose next close can be made a reset.
///
/// [`tunnel`] calls it on both of its streams when either fails, so that a
/// peer cut off on one side is cut off on the other too, instead of seeing
/// a clean end of stream that makes a truncated response or upload look
/// complete.
///
/// Implemented for tokio's `TcpStream`; for its `BufReader`, `BufWriter`
/// and `BufStream`, `&mut T` and `Box<T>` of a type that implements it (by
/// delegation); and for its `UnixStream` and `DuplexStream`, which have no
/// reset (`Unsupported`: their peer sees a clean end). A wrapper of your
/// own (a TLS stream, a counting or rate limiting stream) delegates to the
/// socket it wraps:
///
/// ```
/// use std::io;
/// use cleave_tokio::Reset;
///
/// /// A TLS stream over some socket (its session state left out).
/// struct Tls<S> {
///     socket: S,
/// }
///
/// impl<S: Reset> Reset for Tls<S> {
///     fn reset_on_close(&self) -> io::Result<()> {
///         // The reset skips the TLS close_notify too: the peer's TLS
///         // library reports a truncation, which is the point.
///         self.socket.reset_on_close()
///     }
/// }
/// ```
pub trait Reset {
    /// Makes the next close of this connection a reset: for TCP it sets
    /// `SO_LINGER` to zero, so that closing (dropping) the socket sends a
    /// RST and drops the data not yet sent, instead of a FIN after it.
    ///
    /// It changes nothing until the connection is closed; shutting the
    /// write half down still sends a FIN, so drop the stream instead.
    ///
    /// # Errors
    ///
    /// What the OS says, or `Unsupported` where there is no reset.
    fn reset_on_close(&self) -> io::Result<()>;
}

impl Reset for tokio::net::TcpStream {
    fn reset_on_close(&self) -> io::Result<()> {
        #[cfg(not(target_os = "wasi"))]
        return self.set_zero_linger();
        #[cfg(target_os = "wasi")]
        return Err(io::ErrorKind::Unsupported.into());
    }
}

/// A Unix socket has no reset: the peer reads the end of the stream (or,
/// on Linux, a reset if data it sent was left unread). `Unsupported`.
#[cfg(unix)]
impl Reset for tokio::net::UnixStream {
    fn reset_on_close(&self) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// An in-memory pipe has no reset: the other end reads the end of the
/// stream. `Unsupported`.
impl Reset for tokio::io::DuplexStream {
    fn reset_on_close(&self) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// Delegates to the stream it buffers.
impl<T: Reset + AsyncWrite> Reset for tokio::io::BufWriter<T> {
    fn reset_on_close(&self) -> io::Result<()> {
        self.get_ref().reset_on_close()
    }
}

/// Delegates to the stream it buffers.
impl<T: Reset + AsyncRead> Reset for tokio::io::BufReader<T> {
    fn reset_on_close(&self) -> io::Result<()> {
        self.get_ref().reset_on_close()
    }
}

/// Delegates to the stream it buffers.
impl<T: Reset + AsyncRead + AsyncWrite> Reset for tokio::io::BufStream<T> {
    fn reset_on_close(&self) -> io::Result<()> {
        self.get_ref().reset_on_close()
    }
}

impl<T: Reset + ?Sized> Reset for &mut T {
    fn reset_on_close(&self) -> io::Result<()> {
        (**self).reset_on_close()
    }
}

impl<T: Reset + ?Sized> Reset for Box<T> {
    fn reset_on_close(&self) -> io::Result<()> {
        (**self).reset_on_close()
    }
}

/// Writes `tail` (the bytes the session had read past its last frame) to
/// `backend` first, then copies both ways until both directions are done.
///
/// ```text
///   tail ──────────────────────────────> backend   (written and flushed first)
///   client ──read──> 16 KiB ──write────> backend   } both polled in this
///   client <──write── 16 KiB <──read──── backend   } one future
/// ```
///
/// - **Nothing is lost.** The tail goes out before anything read later,
///   and what one direction has read is written, in order, before it
///   reports a read error (tokio's `copy_bidirectional` drops it).
/// - **A clean end stays a half-close.** When one side ends its stream,
///   the other side's writer is flushed and its write half shut down
///   (a FIN); the other direction goes on until it ends too.
/// - **A failure stays a failure.** On any error, on either side, reading
///   or writing, both streams are set to [reset on close](Reset) (its own
///   errors are ignored) and the first error is returned. When the caller
///   then drops the streams, each peer sees a reset, not a clean end: a
///   backend that resets after half a response gives the client a reset
///   after that half, and a client that resets mid-upload gives the
///   backend a reset after what arrived, so neither mistakes a cut-off
///   stream for a complete one.
///
/// A reset discards what is still in the kernel's send buffer, as any RST
/// does: after an error, a peer gets a prefix of what was written to its
/// socket, then the reset. On a read error, the bytes already read are
/// written first on a best-effort basis: if the peer does not read them,
/// the tunnel waits for it, as it would without the error (put a timeout
/// around the tunnel to bound it). A tunnel future dropped before it ends
/// (that timeout) resets nothing: call [`Reset::reset_on_close`] on the
/// streams before dropping them if the peers must see a reset then too.
///
/// Returns the bytes written each way: (to the backend, tail included; to
/// the client).
///
/// # Errors
///
/// The first error either stream gave. Both streams are then set to reset
/// on close: **drop them, do not shut them down** (a shutdown would send
/// the FIN that the reset is there to prevent).
pub async fn tunnel<A, B>(client: &mut A, backend: &mut B, tail: Bytes) -> io::Result<(u64, u64)>
where
    A: AsyncRead + AsyncWrite + Reset + Unpin + ?Sized,
    B: AsyncRead + AsyncWrite + Reset + Unpin + ?Sized,
{
    let result = copy_both_ways(client, backend, &tail).await;
    if result.is_err() {
        // Best effort: the error that matters is the one that got us here.
        let _ = client.reset_on_close();
        let _ = backend.reset_on_close();
    }
    result
}

/// The tail, then both directions until both end or one fails.
async fn copy_both_ways<A, B>(
    client: &mut A,
    backend: &mut B,
    tail: &[u8],
) -> io::Result<(u64, u64)>
where
    A: AsyncRead + AsyncWrite + Unpin + ?Sized,
    B: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    if !tail.is_empty() {
        backend.write_all(tail).await?;
        // A buffering backend (a `BufWriter`, a TLS stream) must pass the
        // tail on now: the client may wait for the answer to it.
        backend.flush().await?;
    }
    let (mut up, mut down) = (Direction::new(), Direction::new());
    let (mut up_done, mut down_done) = (None, None);
    poll_fn(|cx| {
        if up_done.is_none() {
            if let Poll::Ready(n) =
                up.poll_copy(cx, Pin::new(&mut *client), Pin::new(&mut *backend))
            {
                up_done = Some(n?);
            }
        }
        if down_done.is_none() {
            if let Poll::Ready(n) =
                down.poll_copy(cx, Pin::new(&mut *backend), Pin::new(&mut *client))
            {
                down_done = Some(n?);
            }
        }
        match (up_done, down_done) {
            (Some(up), Some(down)) => Poll::Ready(Ok((up + tail.len() as u64, down))),
            _ => Poll::Pending,
        }
    })
    .await
}

/// One direction's copy: read into the buffer, write all of it, and at
/// the end of the stream flush and shut the writer down.
struct Direction {
    buf: Box<[u8]>,
    /// Read and not yet written: `buf[start..end]`.
    start: usize,
    end: usize,
    /// The reader ended its stream.
    eof: bool,
    /// The reader failed; returned once what was read before is written.
    read_error: Option<io::Error>,
    /// Written since the writer was last flushed.
    unflushed: bool,
    written: u64,
}

impl Direction {
    fn new() -> Self {
        Self {
            buf: vec![0; BUF_SIZE].into_boxed_slice(),
            start: 0,
            end: 0,
            eof: false,
            read_error: None,
            unflushed: false,
            written: 0,
        }
    }

    /// Copies until the reader ends (`Ok(bytes written)`, the writer shut
    /// down) or either side fails (the read error comes after the bytes
    /// read before it are written).
    fn poll_copy<R, W>(
        &mut self,
        cx: &mut Context<'_>,
        mut reader: Pin<&mut R>,
        mut writer: Pin<&mut W>,
    ) -> Poll<io::Result<u64>>
    where
        R: AsyncRead + ?Sized,
        W: AsyncWrite + ?Sized,
    {
        loop {
            // Read while there is room, even with bytes waiting for the
            // writer: the next write then takes more at once.
            let mut read_pending = false;
            if !self.eof && self.read_error.is_none() && self.end < self.buf.len() {
                let mut room = ReadBuf::new(&mut self.buf[self.end..]);
                match reader.as_mut().poll_read(cx, &mut room) {
                    Poll::Ready(Ok(())) if room.filled().is_empty() => self.eof = true,
                    Poll::Ready(Ok(())) => self.end += room.filled().len(),
                    Poll::Ready(Err(e)) => self.read_error = Some(e),
                    Poll::Pending => read_pending = true,
                }
            }

            if self.start < self.end {
                match writer
                    .as_mut()
                    .poll_write(cx, &self.buf[self.start..self.end])
                {
                    Poll::Ready(Ok(0)) => return self.fail(io::ErrorKind::WriteZero.into()),
                    Poll::Ready(Ok(n)) => {
                        self.start += n;
                        self.written += n as u64;
                        self.unflushed = true;
                        if self.start == self.end {
                            (self.start, self.end) = (0, 0);
                        }
                        continue;
                    }
                    Poll::Ready(Err(e)) => return self.fail(e),
                    // Woken by the writer (and by the reader, if it is
                    // pending too).
                    Poll::Pending => return Poll::Pending,
                }
            }

            // Everything read is written.
            if let Some(e) = self.read_error.take() {
                // Best effort, as the writes before it: the error is the
                // reader's either way.
                let _ = ready!(writer.as_mut().poll_flush(cx));
                return Poll::Ready(Err(e));
            }
            if self.eof {
                if self.unflushed {
                    ready!(writer.as_mut().poll_flush(cx))?;
                    self.unflushed = false;
                }
                ready!(writer.as_mut().poll_shutdown(cx))?;
                return Poll::Ready(Ok(self.written));
            }
            if read_pending {
                // The reader waits: pass on what a buffering writer holds.
                if self.unflushed {
                    ready!(writer.as_mut().poll_flush(cx))?;
                    self.unflushed = false;
                }
                return Poll::Pending;
            }
        }
    }

    /// A write failed: the reader's earlier error, if any, comes first.
    fn fail(&mut self, write_error: io::Error) -> Poll<io::Result<u64>> {
        Poll::Ready(Err(self.read_error.take().unwrap_or(write_error)))
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::collections::VecDeque;

    use super::*;

    /// A stream that reads what it is given (then waits forever), refuses
    /// its first write once, and records what it is told.
    #[derive(Default)]
    struct Mock {
        reads: VecDeque<io::Result<&'static [u8]>>,
        written: Vec<u8>,
        refused_once: bool,
        shut: bool,
        reset: Cell<bool>,
    }

    impl AsyncRead for Mock {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            match self.reads.pop_front() {
                Some(Ok(bytes)) => {
                    buf.put_slice(bytes);
                    Poll::Ready(Ok(()))
                }
                Some(Err(e)) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            }
        }
    }

    impl AsyncWrite for Mock {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            if !self.refused_once {
                self.refused_once = true;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            self.written.extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.shut = true;
            Poll::Ready(Ok(()))
        }
    }

    impl Reset for Mock {
        fn reset_on_close(&self) -> io::Result<()> {
            self.reset.set(true);
            Ok(())
        }
    }

    #[tokio::test]
    async fn bytes_read_before_a_read_error_are_written_then_both_sides_reset() {
        let mut client = Mock {
            reads: [
                Ok(&b"hello"[..]),
                Err(io::ErrorKind::ConnectionReset.into()),
            ]
            .into(),
            ..Mock::default()
        };
        let mut backend = Mock::default();
        let result = tunnel(&mut client, &mut backend, Bytes::new()).await;
        assert_eq!(result.unwrap_err().kind(), io::ErrorKind::ConnectionReset);
        assert_eq!(backend.written, b"hello", "read while the writer waited");
        assert!(client.reset.get() && backend.reset.get());
        assert!(!backend.shut, "a failure is no clean end");
    }

    #[tokio::test]
    async fn a_clean_end_shuts_the_other_writer_down_and_resets_nothing() {
        let mut client = Mock {
            reads: [Ok(&b"up"[..]), Ok(&b""[..])].into(),
            ..Mock::default()
        };
        let mut backend = Mock {
            reads: [Ok(&b"down"[..]), Ok(&b""[..])].into(),
            ..Mock::default()
        };
        let result = tunnel(&mut client, &mut backend, Bytes::from_static(b"tail:")).await;
        assert_eq!(result.unwrap(), (7, 4));
        assert_eq!(
            (&backend.written[..], &client.written[..]),
            (&b"tail:up"[..], &b"down"[..])
        );
        assert!(client.shut && backend.shut);
        assert!(!client.reset.get() && !backend.reset.get());
    }
}
