//! [`Socket`]: what a [`Conn`](crate::Conn) needs of its source beyond
//! `Read + Write`.

use std::io::{self, Read, Write};
use std::time::Duration;

/// What a [`Conn`](crate::Conn) needs of its socket beyond `Read + Write`:
/// a half-close, whether a short read proves it empty, and a reset.
///
/// Implemented for mio's `TcpStream` and `UnixStream` (which has no
/// reset). A wrapper (TLS over a socket, say) implements it too:
/// `shutdown_write` as it sees fit (a no-op for a source that cannot
/// half-close), `short_read_drains` left `false` if a short read can leave
/// bytes behind, and `reset_on_close` by calling its socket's.
pub trait Socket: Read + Write {
    /// Shuts the sending half down: the peer reads the end of the stream.
    /// The connection calls it once, when it was closed and everything
    /// queued is out ([`Shutdown::Write`](cleave_proto::conn::Shutdown::Write)).
    ///
    /// # Errors
    ///
    /// What the OS says; for the sockets here, not `NotConnected`: a
    /// connection closed both ways already is shut down.
    fn shutdown_write(&self) -> io::Result<()>;

    /// Whether a read that did not fill the buffer proves that the source
    /// holds nothing more, so that the read that would only say
    /// `WouldBlock` can be skipped. True for sockets under the
    /// edge-triggered selectors mio uses on Linux and the BSDs (new bytes
    /// raise a new event); false by default.
    fn short_read_drains(&self) -> bool {
        false
    }

    /// Makes the next close of the socket a reset: for TCP it sets
    /// `SO_LINGER` to zero, so that dropping the socket sends a RST and
    /// drops the data not yet sent, instead of a FIN after it. The
    /// connection calls it when it is reset
    /// ([`Shutdown::Reset`](cleave_proto::conn::Shutdown::Reset)).
    ///
    /// # Errors
    ///
    /// What the OS says. By default `Unsupported`: a source with no reset,
    /// whose peer sees a clean end when it is dropped.
    fn reset_on_close(&self) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Whether the socket has no peer yet: a connect still under way (a
    /// `TcpStream::connect` before its first writable event). A shutdown
    /// then would abort the connect (Linux drops a connection shut down
    /// in SYN_SENT), so the FIN waits for the socket's writable event.
    /// A [`Conn`](crate::Conn) or a `Tunnel` asks on writable (or error)
    /// events, and before a FIN, until the socket says its connect is
    /// over: an event alone does not (a removed source's, still queued,
    /// may reach a new one under the same token). A read that gives bytes
    /// or the end of the stream says so too: a socket closed both ways
    /// has no peer either, and mio's `TcpStream` tells it apart that way.
    /// False by default.
    fn is_connecting(&self) -> bool {
        false
    }

    /// Takes the socket's pending error (`SO_ERROR`), if it has one: how a
    /// connect that [`is_connecting`](Self::is_connecting) still says has
    /// no peer failed (refused, reset, unreachable). A [`Conn`](crate::Conn)
    /// or a `Tunnel` asks only then, on a writable (or error) event, and
    /// reports what it takes as the socket's failure: implement it along with
    /// `is_connecting`. `None` by default.
    ///
    /// # Errors
    ///
    /// What the OS says when asked.
    fn take_error(&self) -> io::Result<Option<io::Error>> {
        Ok(None)
    }
}

/// After a writable (or error) event: whether `socket`'s connect, if it
/// had one, is over. The event alone does not say so: tokens are reused,
/// and an event still queued for a removed source reaches the new one,
/// which may still be connecting. The socket does (mio's steps after a
/// connect's event): it has a peer (`true`), it failed (the error
/// [`Socket::take_error`] takes, or the one it gives), or it is still
/// connecting (`false`: the event was another socket's).
pub(crate) fn connect_over<S: Socket + ?Sized>(socket: &S) -> io::Result<bool> {
    if !socket.is_connecting() {
        return Ok(true);
    }
    match socket.take_error() {
        Ok(None) => Ok(false),
        Ok(Some(e)) | Err(e) => Err(e),
    }
}

/// epoll and kqueue: a short read on a socket drained it.
const EDGE_TRIGGERED: bool = cfg!(any(
    target_os = "linux",
    target_os = "android",
    target_os = "illumos",
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd",
    target_os = "netbsd",
    target_os = "openbsd",
    target_os = "dragonfly",
));

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

impl Socket for mio::net::TcpStream {
    fn shutdown_write(&self) -> io::Result<()> {
        closed_is_shut(self.shutdown(std::net::Shutdown::Write))
    }

    fn short_read_drains(&self) -> bool {
        EDGE_TRIGGERED
    }

    fn reset_on_close(&self) -> io::Result<()> {
        socket2::SockRef::from(self).set_linger(Some(Duration::ZERO))
    }

    fn is_connecting(&self) -> bool {
        matches!(self.peer_addr(), Err(e) if e.kind() == io::ErrorKind::NotConnected)
    }

    fn take_error(&self) -> io::Result<Option<io::Error>> {
        mio::net::TcpStream::take_error(self)
    }
}

#[cfg(unix)]
impl Socket for mio::net::UnixStream {
    fn shutdown_write(&self) -> io::Result<()> {
        closed_is_shut(self.shutdown(std::net::Shutdown::Write))
    }

    fn short_read_drains(&self) -> bool {
        EDGE_TRIGGERED
    }
}
