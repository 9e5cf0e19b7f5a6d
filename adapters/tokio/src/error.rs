//! The adapter's errors: the core's typed errors, and what the OS said.

use std::io;
use std::sync::Arc;

/// Why a [`Connection`](crate::Connection) (or a [`FrameReader`](crate::FrameReader),
/// a [`SessionReader`](crate::SessionReader)) failed. Final: the stream
/// ends after it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnError {
    /// The peer's bytes broke the protocol, a limit was hit, a timeout ran
    /// out ([`cleave_proto::Error::TimedOut`]), or the stream ended inside
    /// a frame ([`cleave_proto::Error::Truncated`] carries the bytes).
    #[error(transparent)]
    Protocol(#[from] cleave_proto::Error),
    /// The socket failed, reading or writing.
    #[error("connection failed: {0}")]
    Io(#[from] io::Error),
}

impl From<ConnError> for io::Error {
    /// The socket's error as it was, or the core's error as an `io::Error`
    /// of a kind that fits (`TimedOut` for a timeout, `InvalidData` for
    /// bad bytes, `UnexpectedEof` for a truncated frame).
    fn from(e: ConnError) -> Self {
        match e {
            ConnError::Protocol(e) => e.into(),
            ConnError::Io(e) => e,
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
}

impl From<WriteError> for io::Error {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::Failed(e) => io::Error::new(e.kind(), e),
            WriteError::Closed => io::Error::new(io::ErrorKind::BrokenPipe, WriteError::Closed),
        }
    }
}
