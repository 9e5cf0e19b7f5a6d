//! The errors every adapter's driver reports (feature `std`): one name for
//! a connection's failure, one for a shared writer's, whichever runtime
//! moves the bytes.

use alloc::sync::Arc;
use core::fmt;
use std::io;

use crate::error::Error;

/// Why a connection driven by an adapter (a cleave-tokio `Connection`, a
/// cleave-mio `Conn`, a cleave-std `Stream`) failed.
///
/// [`Protocol`](Self::Protocol) and [`Io`](Self::Io) are final;
/// [`TimedOut`](Self::TimedOut) is not.
#[non_exhaustive]
#[derive(Debug)]
pub enum ConnError {
    /// The peer's bytes broke the protocol, a limit was hit, one of the
    /// connection's [`Timeouts`](crate::conn::Timeouts) ran out
    /// ([`Error::TimedOut`]), or the stream ended inside a frame
    /// ([`Error::Truncated`] carries the bytes). The bytes not consumed
    /// stay in the connection's buffer. Final: the same error comes back.
    Protocol(Error),
    /// The socket failed, reading or writing (a reset, say). Final.
    Io(io::Error),
    /// A wait the caller bounded ran out: a read or write timeout set on a
    /// blocking socket, with no deadline of the connection's own behind it
    /// (only blocking drivers return it). Nothing is lost: call again.
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

impl From<Error> for ConnError {
    fn from(e: Error) -> Self {
        Self::Protocol(e)
    }
}

impl From<io::Error> for ConnError {
    /// [`Io`](Self::Io), unless the error is one of the core's carried
    /// through an I/O step (a read into a full buffer, say: see
    /// `impl From<Error> for io::Error`): that one is the typed
    /// [`Protocol`](Self::Protocol) error again, not the OS's.
    fn from(e: io::Error) -> Self {
        match e.get_ref().and_then(|inner| inner.downcast_ref::<Error>()) {
            Some(core) => Self::Protocol(core.clone()),
            None => Self::Io(e),
        }
    }
}

impl fmt::Display for ConnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Protocol(e) => fmt::Display::fmt(e, f),
            Self::Io(e) => write!(f, "connection failed: {e}"),
            Self::TimedOut => f.write_str("the read or write timed out"),
        }
    }
}

impl std::error::Error for ConnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Protocol(e) => e.source(),
            Self::Io(e) => Some(e),
            Self::TimedOut => None,
        }
    }
}

impl From<ConnError> for io::Error {
    /// The socket's error as it was; the core's error with the kind that
    /// fits it (`InvalidData`, `UnexpectedEof`, `TimedOut`); `TimedOut`.
    fn from(e: ConnError) -> Self {
        match e {
            ConnError::Io(e) => e,
            ConnError::Protocol(e) => e.into(),
            ConnError::TimedOut => io::Error::new(io::ErrorKind::TimedOut, ConnError::TimedOut),
        }
    }
}

/// What went wrong writing through an adapter's cross-thread or cross-task
/// write handle. A value that was not queued comes back with it, in a
/// [`Rejected`](crate::Rejected)`<T, WriteError>`.
#[non_exhaustive]
#[derive(Clone, Debug)]
pub enum WriteError {
    /// The writer failed; pending writes were dropped and their tickets
    /// will never complete. Every handle sees the same error.
    Failed(Arc<io::Error>),
    /// The queue was closed: it takes nothing more.
    Closed,
    /// A wait the caller bounded ran out before the queue had room or the
    /// ticket was written (only blocking drivers return it). Nothing
    /// changed: wait again, or give up.
    TimedOut,
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Failed(e) => write!(f, "write failed: {e}"),
            Self::Closed => f.write_str("the write queue is closed"),
            Self::TimedOut => f.write_str("the wait timed out"),
        }
    }
}

impl std::error::Error for WriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Failed(e) => Some(&**e),
            Self::Closed | Self::TimedOut => None,
        }
    }
}

impl From<WriteError> for io::Error {
    /// The writer's error with its kind, `BrokenPipe` for a closed queue,
    /// `TimedOut`.
    fn from(e: WriteError) -> Self {
        let kind = match &e {
            WriteError::Failed(e) => e.kind(),
            WriteError::Closed => io::ErrorKind::BrokenPipe,
            WriteError::TimedOut => io::ErrorKind::TimedOut,
        };
        io::Error::new(kind, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Limit;

    /// A core error that went through an I/O step comes back typed; the
    /// OS's errors stay the OS's.
    #[test]
    fn a_core_error_carried_as_io_is_the_protocol_error_again() {
        let full = Error::LimitExceeded {
            limit: Limit::Buffer,
            max: 16,
            attempted: 17,
            offset: 3,
        };
        match ConnError::from(io::Error::from(full.clone())) {
            ConnError::Protocol(e) => assert_eq!(e, full),
            other => panic!("{other:?}"),
        }
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        assert!(matches!(
            ConnError::from(reset),
            ConnError::Io(e) if e.kind() == io::ErrorKind::ConnectionReset
        ));
        let wrapped = io::Error::other("not ours");
        assert!(matches!(ConnError::from(wrapped), ConnError::Io(_)));
    }
}
