//! [`splice_tunnel`]: the tunnel after a hand-off, moved by the kernel
//! (splice(2) through a pipe) between two sockets on Linux.

use std::io;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use cleave_proto::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, Interest};

use crate::reset::Reset;
use crate::tunnel::{both_ways, reset_both_on_error, Direction, Idle, Move, TunnelConfig};
use cleave_splice::{is_unsupported, Lease, Pipes};

/// A socket registered with tokio whose bytes splice(2) can move: its
/// descriptor, its readiness, and a way to try an operation on it that
/// clears the readiness when the operation would block.
///
/// Implemented for tokio's `TcpStream` and `UnixStream`. A type of your own
/// (an `AsyncFd` wrapper, say) implements it with the readiness of the
/// registration its reads and writes go through, and a `try_io` that
/// clears that readiness on `WouldBlock`, as tokio's does. A TLS stream
/// must not implement it: its bytes on the wire are not the tunnel's.
pub trait SpliceStream: AsyncRead + AsyncWrite + Reset + AsFd + Unpin {
    /// `Ready` when the socket may be readable.
    ///
    /// # Errors
    ///
    /// What the registration reports.
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;

    /// `Ready` when the socket may be writable.
    ///
    /// # Errors
    ///
    /// What the registration reports.
    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;

    /// Runs `f`, an operation on the socket's descriptor; when it fails
    /// with `WouldBlock`, clears the readiness for `interest`.
    ///
    /// # Errors
    ///
    /// What `f` returns.
    fn try_io<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R>;
}

macro_rules! splice_stream {
    ($($stream:ty),*) => {$(
        impl SpliceStream for $stream {
            fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                <$stream>::poll_read_ready(self, cx)
            }

            fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                <$stream>::poll_write_ready(self, cx)
            }

            fn try_io<R>(
                &self,
                interest: Interest,
                f: impl FnOnce() -> io::Result<R>,
            ) -> io::Result<R> {
                <$stream>::try_io(self, interest, f)
            }
        }
    )*};
}

splice_stream!(tokio::net::TcpStream, tokio::net::UnixStream);

/// [`tunnel_with`](crate::tunnel_with) between two sockets, with the bytes
/// after the tail moved by the kernel: socket -> pipe -> socket with
/// splice(2), never copied into user space.
///
/// ```text
///   tail ───────────────write────────────> backend   (first, as `tunnel`)
///   client ──splice──> pipe ──splice─────> backend   } both polled in this
///   client <──splice── pipe <──splice───── backend   } one future
/// ```
///
/// It keeps [`tunnel`](crate::tunnel)'s promises: the tail first, a clean
/// end passed on as a half-close, a failure as a reset of both streams,
/// the bytes written each way returned, the idle timeout of `config`.
///
/// Each direction leases a pipe from `pipes` (most programs pass
/// [`Pipes::global`]) and gives it back at its end, empty, for the next
/// tunnel. A direction copies through a 16 KiB buffer, as `tunnel` does,
/// when there is no splice (not Linux), when the pool has no pipe left
/// within its limit or the system refuses one (or `SIGPIPE` is not
/// ignored: see [`Pipes::new`]), and from the moment the socket refuses a
/// splice (`EINVAL` for a socket type splice(2) does not read, or a TCP
/// urgent mark it will not read past; the pipe is empty then, so nothing
/// is lost and the out-of-band byte is left out, as `tunnel` leaves it
/// out).
///
/// ```no_run
/// # async fn route(mut client: tokio::net::TcpStream, mut backend: tokio::net::TcpStream) -> std::io::Result<()> {
/// use cleave_proto::Bytes;
/// use cleave_tokio::{splice_tunnel, Pipes, TunnelConfig};
///
/// let tail = Bytes::from_static(b"what the session read past its last frame");
/// let (up, down) =
///     splice_tunnel(&mut client, &mut backend, tail, TunnelConfig::default(), Pipes::global())
///         .await?;
/// println!("{up} bytes up, {down} down");
/// # Ok(())
/// # }
/// ```
///
/// # Errors
///
/// As [`tunnel`](crate::tunnel): the first error either socket gave (or
/// `TimedOut`), with both sockets set to reset on close: drop them, do not
/// shut them down.
pub async fn splice_tunnel<A, B>(
    client: &mut A,
    backend: &mut B,
    tail: Bytes,
    config: TunnelConfig,
    pipes: &Pipes,
) -> io::Result<(u64, u64)>
where
    A: SpliceStream + ?Sized,
    B: SpliceStream + ?Sized,
{
    let up = Spliced::new(tail, pipes);
    let down = Spliced::new(Bytes::new(), pipes);
    let idle = config.get_idle().map(Idle::new);
    let result = both_ways(client, backend, up, down, idle).await;
    reset_both_on_error(result, client, backend)
}

/// One direction: through a pipe, or copied when there is none; once
/// ended, neither (its pipe back in the pool while the other way goes on).
enum Spliced {
    Pipe(PipeDirection),
    Copy(Direction),
    /// The direction ended, `written` bytes in all; `moved` until the idle
    /// timer has seen its last bytes.
    Done {
        written: u64,
        moved: bool,
    },
}

impl Spliced {
    fn new(tail: Bytes, pipes: &Pipes) -> Self {
        match pipes.lease() {
            Some(lease) => Spliced::Pipe(PipeDirection {
                tail,
                lease,
                eof: false,
                moved: false,
                written: 0,
            }),
            None => Spliced::Copy(Direction::with_tail(tail)),
        }
    }
}

impl<R, W> Move<R, W> for Spliced
where
    R: SpliceStream + ?Sized,
    W: SpliceStream + ?Sized,
{
    /// The copy's last pass; a pipe's bytes are not moved after a failure
    /// (a splice shuts the writer down at the reader's end).
    fn poll_last(&mut self, cx: &mut Context<'_>, reader: &mut R, writer: &mut W) {
        if let Spliced::Copy(direction) = self {
            direction.poll_last(cx, reader, writer);
        }
    }

    fn poll_move(
        &mut self,
        cx: &mut Context<'_>,
        reader: &mut R,
        writer: &mut W,
    ) -> Poll<io::Result<u64>> {
        loop {
            match self {
                Spliced::Copy(direction) => return direction.poll_move(cx, reader, writer),
                Spliced::Done { written, .. } => return Poll::Ready(Ok(*written)),
                Spliced::Pipe(pipe) => match pipe.poll_splice(cx, reader, writer) {
                    Step::Done(Poll::Ready(Ok(written))) => {
                        // The last bytes may have moved in this very poll.
                        let moved = pipe.moved;
                        *self = Spliced::Done { written, moved };
                        return Poll::Ready(Ok(written));
                    }
                    Step::Done(poll) => return poll,
                    // The pipe is empty and the tail written: the copy goes
                    // on from there, and the pipe goes back to the pool.
                    Step::Unsupported => {
                        let (written, moved) = (pipe.written, pipe.moved);
                        *self = Spliced::Copy(Direction::resuming(written, moved));
                    }
                },
            }
        }
    }

    fn take_moved(&mut self) -> bool {
        match self {
            Spliced::Pipe(pipe) => std::mem::take(&mut pipe.moved),
            Spliced::Copy(direction) => Move::<R, W>::take_moved(direction),
            Spliced::Done { moved, .. } => std::mem::take(moved),
        }
    }
}

enum Step {
    Done(Poll<io::Result<u64>>),
    /// A splice from the reader was refused (a socket splice(2) cannot
    /// read, or one stopped at a TCP urgent mark): copy instead.
    Unsupported,
}

/// The bytes move reader -> pipe -> writer. The pipe is filled only when it
/// is empty, so a splice into it that would block always means the reader
/// has nothing (never that the pipe is full), and the readiness that
/// `try_io` clears is the reader's.
struct PipeDirection {
    /// Bytes to write before anything read (the hand-off's tail).
    tail: Bytes,
    lease: Lease,
    /// The reader ended its stream (and the pipe is empty).
    eof: bool,
    moved: bool,
    written: u64,
}

impl PipeDirection {
    fn poll_splice<R, W>(&mut self, cx: &mut Context<'_>, reader: &R, writer: &mut W) -> Step
    where
        R: SpliceStream + ?Sized,
        W: SpliceStream + ?Sized,
    {
        macro_rules! ready {
            ($poll:expr) => {
                match $poll {
                    Poll::Ready(Ok(v)) => v,
                    Poll::Ready(Err(e)) => return Step::Done(Poll::Ready(Err(e))),
                    Poll::Pending => return Step::Done(Poll::Pending),
                }
            };
        }
        while !self.tail.is_empty() {
            let n = ready!(Pin::new(&mut *writer).poll_write(cx, &self.tail));
            if n == 0 {
                return Step::Done(Poll::Ready(Err(io::ErrorKind::WriteZero.into())));
            }
            self.tail = self.tail.slice(n.min(self.tail.len())..);
            self.written += n as u64;
            self.moved = true;
            if self.tail.is_empty() {
                // A socket holds nothing back, but a flush is the contract.
                ready!(Pin::new(&mut *writer).poll_flush(cx));
            }
        }
        loop {
            if !self.lease.is_empty() {
                ready!(writer.poll_write_ready(cx));
                let lease = &mut self.lease;
                match writer.try_io(Interest::WRITABLE, || lease.drain(writer.as_fd())) {
                    Ok(0) => return Step::Done(Poll::Ready(Err(io::ErrorKind::WriteZero.into()))),
                    Ok(n) => {
                        self.written += n as u64;
                        self.moved = true;
                    }
                    // A signal: nothing moved, try again.
                    Err(e) if is_retry(&e) => {}
                    Err(e) => return Step::Done(Poll::Ready(Err(e))),
                }
                continue;
            }
            if self.eof {
                ready!(Pin::new(&mut *writer).poll_shutdown(cx));
                return Step::Done(Poll::Ready(Ok(self.written)));
            }
            ready!(reader.poll_read_ready(cx));
            let lease = &mut self.lease;
            match reader.try_io(Interest::READABLE, || lease.fill(reader.as_fd())) {
                Ok(0) => self.eof = true,
                Ok(_) => self.moved = true,
                Err(e) if is_retry(&e) => {}
                // The pipe is empty: copying from here loses nothing.
                Err(e) if is_unsupported(&e) => return Step::Unsupported,
                Err(e) => return Step::Done(Poll::Ready(Err(e))),
            }
        }
    }
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use std::collections::VecDeque;
    use std::fs::File;
    use std::os::fd::BorrowedFd;

    use tokio::io::ReadBuf;

    use super::*;
    use cleave_splice::PipesConfig;

    /// A stream in memory whose descriptor is a directory's: every splice
    /// from it fails with `EINVAL`, as from a socket splice(2) cannot read.
    struct Unspliceable {
        fd: File,
        reads: VecDeque<&'static [u8]>,
        written: Vec<u8>,
        shut: bool,
    }

    impl Unspliceable {
        fn new(reads: &[&'static [u8]]) -> Self {
            Self {
                fd: File::open("/").unwrap(),
                reads: reads.iter().copied().collect(),
                written: Vec::new(),
                shut: false,
            }
        }
    }

    impl AsFd for Unspliceable {
        fn as_fd(&self) -> BorrowedFd<'_> {
            self.fd.as_fd()
        }
    }

    impl AsyncRead for Unspliceable {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            // Then the end of the stream.
            if let Some(bytes) = self.reads.pop_front() {
                buf.put_slice(bytes);
            }
            Poll::Ready(Ok(()))
        }
    }

    impl AsyncWrite for Unspliceable {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
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

    impl Reset for Unspliceable {
        fn reset_on_close(&self) -> io::Result<()> {
            Ok(())
        }
    }

    impl SpliceStream for Unspliceable {
        fn poll_read_ready(&self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_write_ready(&self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn try_io<R>(&self, _: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
            f()
        }
    }

    #[tokio::test]
    async fn a_refused_first_splice_falls_back_to_copying_and_returns_the_pipes() {
        let pipes = Pipes::new(PipesConfig::default().max_open(Some(2)));
        let mut client = Unspliceable::new(&[b"up ", b"and up"]);
        let mut backend = Unspliceable::new(&[b"down"]);
        let tail = Bytes::from_static(b"tail, ");
        let config = TunnelConfig::default();
        let moved = splice_tunnel(&mut client, &mut backend, tail, config, &pipes).await;
        assert_eq!(moved.unwrap(), (15, 4));
        assert_eq!(backend.written, b"tail, up and up");
        assert_eq!(client.written, b"down");
        assert!(client.shut && backend.shut);
        // Both were leased, refused, and kept empty for the next tunnel.
        assert_eq!((pipes.open(), pipes.idle(), pipes.spliced()), (2, 2, 0));
    }
}

/// A splice that moved nothing and may be tried again: the socket was
/// not ready after all (`WouldBlock`), or a signal came (`Interrupted`).
fn is_retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}
