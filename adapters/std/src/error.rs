//! The adapter's errors: the core's typed errors, what the OS said, and the
//! writes that were given back.

use std::fmt;
use std::io;
use std::sync::Arc;

/// What went wrong reading.
///
/// [`TimedOut`](Self::TimedOut) is the one that is not final: the buffered
/// bytes are kept, and calling `recv` again goes on where it stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecvError {
    /// The peer's bytes broke the protocol, or a limit was hit (or, with a
    /// [`Framed`](cleave_proto::Framed), the stream ended inside a frame:
    /// [`cleave_proto::Error::Truncated`] carries the bytes). Final: the same
    /// error comes back on every later call.
    #[error(transparent)]
    Protocol(#[from] cleave_proto::Error),
    /// The reader failed. Final: later calls fail with the same kind.
    #[error("read failed: {0}")]
    Io(#[source] io::Error),
    /// The read timed out (the reader's read timeout, or `WouldBlock` from
    /// a non-blocking reader). Nothing is lost: call `recv` again.
    #[error("the read timed out")]
    TimedOut,
}

impl RecvError {
    /// Whether this is [`TimedOut`](Self::TimedOut): the stream can go on.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::TimedOut)
    }
}

impl From<RecvError> for io::Error {
    fn from(e: RecvError) -> Self {
        match e {
            RecvError::Io(e) => e,
            RecvError::TimedOut => io::Error::new(io::ErrorKind::TimedOut, RecvError::TimedOut),
            RecvError::Protocol(e) => io::Error::new(io::ErrorKind::InvalidData, e),
        }
    }
}

/// What went wrong writing through a [`WriteHandle`](crate::WriteHandle).
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

/// A write that was not queued, given back with the reason.
///
/// Returned by the blocking sends of a [`WriteHandle`](crate::WriteHandle),
/// so that bytes are never dropped without the caller's say.
pub struct SendError<T> {
    error: WriteError,
    value: T,
}

impl<T> SendError<T> {
    pub(crate) fn new(error: WriteError, value: T) -> Self {
        Self { error, value }
    }

    /// Why the write was not queued.
    pub fn error(&self) -> &WriteError {
        &self.error
    }

    /// The write, given back.
    pub fn into_value(self) -> T {
        self.value
    }

    /// The reason and the write.
    pub fn into_parts(self) -> (WriteError, T) {
        (self.error, self.value)
    }
}

/// Shows the reason, not the bytes.
impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendError")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not queued: {}", self.error)
    }
}

impl<T> std::error::Error for SendError<T> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl<T> From<SendError<T>> for WriteError {
    fn from(e: SendError<T>) -> Self {
        e.error
    }
}

impl<T> From<SendError<T>> for io::Error {
    fn from(e: SendError<T>) -> Self {
        e.error.into()
    }
}
