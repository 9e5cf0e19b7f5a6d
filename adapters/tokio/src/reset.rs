//! [`Reset`]: making a connection's close a reset, for the ends that must
//! not look clean (a failed tunnel, a timed-out peer that left half a
//! frame).

use std::io;

use tokio::io::{AsyncRead, AsyncWrite};

/// A connection whose next close can be made a reset.
///
/// [`tunnel`](crate::tunnel) calls it on both of its streams when either
/// fails, so that a peer cut off on one side is cut off on the other too,
/// instead of seeing a clean end of stream that makes a truncated response
/// or upload look complete; a [`Connection`](crate::Connection) calls it
/// when the core asks for a reset (a timeout with half a frame in the
/// buffer, say).
///
/// Implemented for tokio's `TcpStream` and its write halves; for its
/// `BufReader`, `BufWriter` and `BufStream`, `&mut T` and `Box<T>` of a
/// type that implements it, and `Join` (by its writer), by delegation; and
/// for its `UnixStream`, `DuplexStream` and `Sink`, which have no reset
/// (`Unsupported`: their peer sees a clean end). A wrapper of your own (a
/// TLS stream, a counting or rate limiting stream) delegates to the socket
/// it wraps:
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

fn zero_linger(socket: &tokio::net::TcpStream) -> io::Result<()> {
    #[cfg(not(target_os = "wasi"))]
    {
        socket.set_zero_linger()
    }
    #[cfg(target_os = "wasi")]
    {
        let _ = socket;
        Err(io::ErrorKind::Unsupported.into())
    }
}

impl Reset for tokio::net::TcpStream {
    fn reset_on_close(&self) -> io::Result<()> {
        zero_linger(self)
    }
}

/// Resets the whole stream, as the socket it is a half of.
impl Reset for tokio::net::tcp::OwnedWriteHalf {
    fn reset_on_close(&self) -> io::Result<()> {
        zero_linger(self.as_ref())
    }
}

/// Resets the whole stream, as the socket it is a half of.
impl Reset for tokio::net::tcp::WriteHalf<'_> {
    fn reset_on_close(&self) -> io::Result<()> {
        zero_linger(self.as_ref())
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

/// A sink has no peer to reset. `Unsupported`.
impl Reset for tokio::io::Sink {
    fn reset_on_close(&self) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// Delegates to the writer: `join(reader, sink())` makes a read-only
/// source (a `&[u8]` in a test) a connection.
impl<R: AsyncRead, W: AsyncWrite + Reset> Reset for tokio::io::Join<R, W> {
    fn reset_on_close(&self) -> io::Result<()> {
        self.writer().reset_on_close()
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
