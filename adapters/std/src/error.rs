//! The adapter's errors: the core's typed errors and what the OS said, for
//! a [`Stream`](crate::Stream) and for a [`WriteHandle`](crate::WriteHandle).

use std::io;
use std::sync::Arc;

/// What went wrong with a [`Stream`](crate::Stream)'s connection.
///
/// [`Protocol`](Self::Protocol) and [`Io`](Self::Io) are final;
/// [`TimedOut`](Self::TimedOut) is not: nothing is lost, call again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnError {
    /// The peer's bytes broke the protocol, a limit was hit, or one of the
    /// connection's [`Timeouts`](cleave_proto::Timeouts) ran out
    /// ([`cleave_proto::Error::TimedOut`], with the timeout that did). With a
    /// [`Framed`](cleave_proto::Framed) decoder, an incomplete last frame at
    /// the end of the stream is [`cleave_proto::Error::Truncated`], carrying
    /// its bytes. Final: the same error comes back on every later call.
    #[error(transparent)]
    Protocol(#[from] cleave_proto::Error),
    /// Reading or writing failed (a reset, say). Final: later reads fail
    /// with the same kind, and what was queued was dropped.
    #[error("i/o failed: {0}")]
    Io(#[source] io::Error),
    /// A read timeout the caller set ran out while the connection had no
    /// deadline of its own, or a write timeout did, or a non-blocking
    /// socket would block. Nothing is lost: call again.
    #[error("the read or write timed out")]
    TimedOut,
}

impl ConnError {
    /// Whether the connection is over: everything but
    /// [`TimedOut`](Self::TimedOut).
    #[must_use]
    pub fn is_final(&self) -> bool {
        !matches!(self, Self::TimedOut)
    }
}

impl From<ConnError> for io::Error {
    /// The `io::Error` itself, `TimedOut`, or the core's error with the
    /// kind that fits it (`InvalidData`, `UnexpectedEof`, `TimedOut`).
    fn from(e: ConnError) -> Self {
        match e {
            ConnError::Io(e) => e,
            ConnError::TimedOut => io::Error::new(io::ErrorKind::TimedOut, ConnError::TimedOut),
            ConnError::Protocol(e) => e.into(),
        }
    }
}

/// What went wrong writing through a [`WriteHandle`](crate::WriteHandle).
///
/// A write that was not queued comes back with it in a
/// [`Rejected`](cleave_proto::Rejected)`<T, WriteError>`.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The writer failed; pending writes were dropped and their tickets
    /// will never complete. Every handle sees the same error.
    #[error("write failed: {0}")]
    Failed(Arc<io::Error>),
    /// The queue was closed: it takes nothing more.
    #[error("the write queue is closed")]
    Closed,
    /// The wait ran out before the queue had room or the ticket was
    /// written. Nothing changed: wait again, or give up.
    #[error("the wait timed out")]
    TimedOut,
}

impl From<WriteError> for io::Error {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::Failed(e) => io::Error::new(e.kind(), e),
            WriteError::Closed => io::Error::new(io::ErrorKind::BrokenPipe, WriteError::Closed),
            WriteError::TimedOut => io::Error::new(io::ErrorKind::TimedOut, WriteError::TimedOut),
        }
    }
}
