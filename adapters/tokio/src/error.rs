//! The adapter's errors: the core's typed errors, and what the OS said.

use std::io;
use std::sync::Arc;

/// What went wrong reading.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The peer's bytes broke the protocol (or the stream ended inside a
    /// frame: [`cleave_proto::Error::Truncated`] carries the bytes).
    #[error(transparent)]
    Protocol(#[from] cleave_proto::Error),
    /// The socket failed.
    #[error("read failed: {0}")]
    Io(#[from] io::Error),
}

/// What went wrong writing.
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
