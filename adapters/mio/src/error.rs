//! The adapter's error: the core's typed errors, and what the OS said.

use std::io;

/// What went wrong with a connection.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnError {
    /// The peer's bytes broke the protocol or a limit, or one of the
    /// connection's timeouts ran out ([`cleave_proto::Error::TimedOut`]);
    /// final. The bytes not consumed stay in the connection's buffer
    /// ([`cleave_proto::Conn::recv_buf`]); an incomplete last frame at the
    /// end of the stream is [`cleave_proto::Error::Truncated`], carrying its
    /// bytes.
    #[error(transparent)]
    Protocol(#[from] cleave_proto::Error),
    /// The socket failed (a reset, say).
    #[error("i/o failed: {0}")]
    Io(#[from] io::Error),
}
