//! What the loopback tunnel tests share.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt};

/// Reads until the end of the stream (`Ok`) or an error, at most `max`
/// bytes.
pub async fn read_to_end_or_error<S: AsyncRead + Unpin>(
    socket: &mut S,
    max: usize,
) -> (Vec<u8>, io::Result<()>) {
    let (mut got, mut buf) = (Vec::new(), vec![0; 64 * 1024]);
    // Each read gets a byte at least, but the end.
    for _ in 0..=max {
        match socket.read(&mut buf).await {
            Ok(0) => return (got, Ok(())),
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                assert!(got.len() <= max, "more bytes than were sent: {}", got.len());
            }
            Err(e) => return (got, Err(e)),
        }
    }
    panic!("no end after {} bytes", got.len());
}
