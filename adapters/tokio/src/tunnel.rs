//! The raw tunnel after a hand-off.

use std::io;

use cleave::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

/// Each direction's copy buffer. tokio's default (8 KiB) made twice the
/// system calls of this on bulk tunnels (see the stream harness).
const BUF_SIZE: usize = 16 * 1024;

/// Writes `tail` (the bytes the session had read past its last frame) to
/// `backend` first, then copies both ways until both directions are done.
///
/// Nothing is lost: the tail goes out before anything read later. A
/// half-close is respected: when one side stops sending, the other side's
/// write half is shut down and the other direction goes on.
///
/// Returns the bytes sent each way: (to the backend, tail included; to the
/// client).
///
/// # Errors
///
/// What either socket says.
pub async fn tunnel<A, B>(client: &mut A, backend: &mut B, tail: Bytes) -> io::Result<(u64, u64)>
where
    A: AsyncRead + AsyncWrite + Unpin + ?Sized,
    B: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    if !tail.is_empty() {
        backend.write_all(&tail).await?;
        // A buffering backend (a `BufWriter`, a TLS stream) must pass the
        // tail on now: the client may wait for the answer to it.
        backend.flush().await?;
    }
    let (up, down) =
        tokio::io::copy_bidirectional_with_sizes(client, backend, BUF_SIZE, BUF_SIZE).await?;
    Ok((up + tail.len() as u64, down))
}
