//! [`Socket`]: what a [`Stream`](crate::Stream) needs of its reader and
//! writer besides `Read` and `Write`.

use std::fs::File;
use std::io::{self, Cursor, Stdin, Write};
use std::net::TcpStream;
use std::process::{ChildStderr, ChildStdin, ChildStdout};
use std::time::Duration;

/// What a [`Stream`](crate::Stream) needs of its reader and writer besides
/// `Read` and `Write`: a read timeout, so that a blocking read returns at
/// the connection's deadline, the two ways to end a connection, and the
/// writer for the protocol's own replies.
///
/// Implemented for [`TcpStream`] and `UnixStream` (all of it), for files,
/// pipes, standard input, cursors, byte slices and `Vec<u8>` (no timeout:
/// a read blocks until bytes or the end come, so the connection's
/// deadlines are honoured when a read returns; nothing to shut down or
/// reset: dropping them ends them), and through `&mut T` and `Box<T>`.
/// A type of your own implements what it has; the defaults are harmless.
///
/// ```
/// use std::io::{self, Read, Write};
///
/// /// A socket of a user-space stack, say: no timeouts, a real shutdown.
/// struct Pipe(Vec<u8>);
/// # impl Read for Pipe { fn read(&mut self, _: &mut [u8]) -> io::Result<usize> { Ok(0) } }
/// # impl Write for Pipe {
/// #     fn write(&mut self, b: &[u8]) -> io::Result<usize> { self.0.write(b) }
/// #     fn flush(&mut self) -> io::Result<()> { Ok(()) }
/// # }
///
/// impl cleave_std::Socket for Pipe {
///     fn shutdown_write(&self) -> io::Result<()> {
///         Ok(()) // tell the other end, here
///     }
///
///     fn writer(&mut self) -> Option<&mut dyn Write> {
///         Some(self) // the protocol's replies go out while reading
///     }
/// }
/// ```
pub trait Socket {
    /// Sets how long a read may block (`None`: as long as it takes). A
    /// read that times out returns `WouldBlock` on Unix (as a socket's
    /// does: `TimedOut` there is a connection the kernel gave up on), and
    /// `WouldBlock` or `TimedOut` elsewhere.
    /// [`recv`](crate::Stream::recv) calls it while the connection has a
    /// deadline, and puts back what [`read_timeout`](Self::read_timeout)
    /// said once it has none.
    ///
    /// # Errors
    ///
    /// What the OS says. By default nothing is set, and `Ok`.
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        let _ = timeout;
        Ok(())
    }

    /// The read timeout now: the caller's, which
    /// [`recv`](crate::Stream::recv) puts back.
    ///
    /// # Errors
    ///
    /// What the OS says. By default `Ok(None)`.
    fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(None)
    }

    /// Sets how long a write may block (`None`: as long as it takes), as
    /// [`set_read_timeout`](Self::set_read_timeout) for reads. A
    /// [`Stream`](crate::Stream) sets it while it writes what it owes
    /// (the protocol's replies, a close's queue) and the connection has a
    /// deadline, so that a peer that stops reading cannot hold it past
    /// its timeouts; then it puts back what
    /// [`write_timeout`](Self::write_timeout) said.
    ///
    /// # Errors
    ///
    /// What the OS says. By default nothing is set, and `Ok`.
    fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        let _ = timeout;
        Ok(())
    }

    /// The write timeout now: the caller's, which a
    /// [`Stream`](crate::Stream) puts back.
    ///
    /// # Errors
    ///
    /// What the OS says. By default `Ok(None)`.
    fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(None)
    }

    /// Shuts the sending half down: the peer reads the end of the stream.
    /// [`Stream::close`](crate::Stream::close) calls it once everything
    /// queued is written, and the writer thread once its queue is closed
    /// and written.
    ///
    /// # Errors
    ///
    /// What the OS says (for the sockets here, not `NotConnected`: a
    /// connection closed both ways already is shut down). By default
    /// nothing is done, and `Ok`: the end comes when the value is dropped.
    fn shutdown_write(&self) -> io::Result<()> {
        Ok(())
    }

    /// Makes the next close a reset: for TCP, `SO_LINGER` 0, so that
    /// dropping the socket sends a RST and drops what was not sent,
    /// instead of a FIN after it. [`Stream::reset`](crate::Stream::reset)
    /// calls it, and so does [`recv`](crate::Stream::recv) when the
    /// connection ends itself with a reset (a timeout with an incomplete
    /// frame).
    ///
    /// # Errors
    ///
    /// What the OS says. By default nothing is done, and `Ok`: the peer
    /// sees a clean end when the value is dropped.
    fn reset_on_close(&self) -> io::Result<()> {
        Ok(())
    }

    /// The writer [`recv`](crate::Stream::recv) writes the protocol's own
    /// replies with before it blocks in a read (a pong must not wait for
    /// the application's next write): `Some(self)` for what can be
    /// written. By default `None`, a read-only source: its replies stay
    /// queued until the application writes.
    fn writer(&mut self) -> Option<&mut dyn Write> {
        None
    }
}

/// The reading half of a socket whose writing half is another's (a
/// [`spawn_writer`](crate::spawn_writer) thread writing a `try_clone` of
/// it): a [`Stream`](crate::Stream) over it reads, and honours its
/// deadlines with read timeouts, but never writes and never shuts the
/// write half down, so a timeout or the end of the reading side does not
/// cut a reply the writer thread is still writing. A reset
/// ([`Stream::reset`](crate::Stream::reset), or a protocol's) still
/// applies to the connection.
///
/// Its connection sees only the bytes read: an idle timeout counts from
/// the last byte read, whatever the writer thread writes. When it runs
/// out, `recv` says so and the writer's handle decides what to do.
///
/// Nor does it write a protocol's own replies (a WebSocket pong or close
/// frame, an HTTP `100 Continue`): they stay in its connection's queue,
/// and once that queue is full the protocol stops until they go, so the
/// peer's next bytes end as a full buffer. Use it with protocols that
/// answer nothing themselves (a [`Framed`](cleave_proto::Framed)
/// decoder, a [`Session`](cleave_proto::Session)); a protocol that does
/// wants a [`Stream`](crate::Stream) over the whole socket.
///
/// ```
/// use std::net::{TcpListener, TcpStream};
///
/// use cleave_proto::{Framed, Lines, WriteQueueConfig};
/// use cleave_std::{spawn_writer, ReadHalf, Stream};
///
/// # fn main() -> std::io::Result<()> {
/// # let listener = TcpListener::bind("127.0.0.1:0")?;
/// # let _client = TcpStream::connect(listener.local_addr()?)?;
/// let (socket, _) = listener.accept()?;
/// let (writes, writer) = spawn_writer(socket.try_clone()?, WriteQueueConfig::default());
/// let reads = Stream::new(ReadHalf(socket), Framed::new(Lines::new()));
/// # drop((writes, reads)); let _ = writer.join();
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct ReadHalf<S>(pub S);

impl<S: io::Read> io::Read for ReadHalf<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }

    fn read_vectored(&mut self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        self.0.read_vectored(bufs)
    }
}

impl<S: Socket> Socket for ReadHalf<S> {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.0.set_read_timeout(timeout)
    }

    fn read_timeout(&self) -> io::Result<Option<Duration>> {
        self.0.read_timeout()
    }

    /// The write half is the writer's: nothing is done.
    fn shutdown_write(&self) -> io::Result<()> {
        Ok(())
    }

    fn reset_on_close(&self) -> io::Result<()> {
        self.0.reset_on_close()
    }
}

/// A shutdown of a connection that is already closed both ways (the
/// peer's end came after ours, or a reset whose error was taken) says
/// `NotConnected` on Linux, and a second shutdown does on macOS: nothing
/// is left to shut down, so it is done (as tokio's `TcpStream` has it).
fn closed_is_shut(result: io::Result<()>) -> io::Result<()> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
        other => other,
    }
}

impl Socket for TcpStream {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, timeout)
    }

    fn read_timeout(&self) -> io::Result<Option<Duration>> {
        TcpStream::read_timeout(self)
    }

    fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        TcpStream::set_write_timeout(self, timeout)
    }

    fn write_timeout(&self) -> io::Result<Option<Duration>> {
        TcpStream::write_timeout(self)
    }

    fn shutdown_write(&self) -> io::Result<()> {
        closed_is_shut(self.shutdown(std::net::Shutdown::Write))
    }

    fn reset_on_close(&self) -> io::Result<()> {
        socket2::SockRef::from(self).set_linger(Some(Duration::ZERO))
    }

    fn writer(&mut self) -> Option<&mut dyn Write> {
        Some(self)
    }
}

/// A Unix socket has no reset: the peer sees a clean end.
#[cfg(unix)]
impl Socket for std::os::unix::net::UnixStream {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        std::os::unix::net::UnixStream::set_read_timeout(self, timeout)
    }

    fn read_timeout(&self) -> io::Result<Option<Duration>> {
        std::os::unix::net::UnixStream::read_timeout(self)
    }

    fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        std::os::unix::net::UnixStream::set_write_timeout(self, timeout)
    }

    fn write_timeout(&self) -> io::Result<Option<Duration>> {
        std::os::unix::net::UnixStream::write_timeout(self)
    }

    fn shutdown_write(&self) -> io::Result<()> {
        closed_is_shut(self.shutdown(std::net::Shutdown::Write))
    }

    fn writer(&mut self) -> Option<&mut dyn Write> {
        Some(self)
    }
}

/// Written as well as read: replies go out while reading.
impl Socket for File {
    fn writer(&mut self) -> Option<&mut dyn Write> {
        Some(self)
    }
}

/// Write-only: replies go out while reading.
impl Socket for ChildStdin {
    fn writer(&mut self) -> Option<&mut dyn Write> {
        Some(self)
    }
}

/// Write-only: replies go out while reading.
impl Socket for Vec<u8> {
    fn writer(&mut self) -> Option<&mut dyn Write> {
        Some(self)
    }
}

/// Read-only.
impl Socket for ChildStdout {}

/// Read-only.
impl Socket for ChildStderr {}

/// Read-only.
impl Socket for Stdin {}

/// Read-only.
impl Socket for &[u8] {}

/// Read from; its replies stay queued (writing would move the position
/// reads come from).
impl<T> Socket for Cursor<T> {}

impl<T: Socket + ?Sized> Socket for &mut T {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        (**self).set_read_timeout(timeout)
    }

    fn read_timeout(&self) -> io::Result<Option<Duration>> {
        (**self).read_timeout()
    }

    fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        (**self).set_write_timeout(timeout)
    }

    fn write_timeout(&self) -> io::Result<Option<Duration>> {
        (**self).write_timeout()
    }

    fn shutdown_write(&self) -> io::Result<()> {
        (**self).shutdown_write()
    }

    fn reset_on_close(&self) -> io::Result<()> {
        (**self).reset_on_close()
    }

    fn writer(&mut self) -> Option<&mut dyn Write> {
        (**self).writer()
    }
}

impl<T: Socket + ?Sized> Socket for Box<T> {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        (**self).set_read_timeout(timeout)
    }

    fn read_timeout(&self) -> io::Result<Option<Duration>> {
        (**self).read_timeout()
    }

    fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        (**self).set_write_timeout(timeout)
    }

    fn write_timeout(&self) -> io::Result<Option<Duration>> {
        (**self).write_timeout()
    }

    fn shutdown_write(&self) -> io::Result<()> {
        (**self).shutdown_write()
    }

    fn reset_on_close(&self) -> io::Result<()> {
        (**self).reset_on_close()
    }

    fn writer(&mut self) -> Option<&mut dyn Write> {
        (**self).writer()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::time::Duration;

    use super::Socket;

    /// Our end was shut down and the peer closed after it: the connection
    /// is closed both ways, the kernel says `NotConnected` to another
    /// shutdown, and `shutdown_write` says it is done.
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "macos"))]
    #[test]
    fn a_connection_closed_both_ways_is_shut_down() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut ours = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut theirs, _) = listener.accept().unwrap();
        for socket in [&ours, &theirs] {
            socket
                .set_read_timeout(Some(Duration::from_secs(30)))
                .unwrap();
        }
        ours.shutdown(Shutdown::Write).unwrap();
        assert_eq!(theirs.read(&mut [0; 1]).unwrap(), 0);
        drop(theirs);
        assert_eq!(ours.read(&mut [0; 1]).unwrap(), 0);
        let again = ours.shutdown(Shutdown::Write);
        assert_eq!(again.unwrap_err().kind(), std::io::ErrorKind::NotConnected);
        Socket::shutdown_write(&ours).unwrap();
    }
}
