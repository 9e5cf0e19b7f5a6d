//! Accepting connections when accepting fails: out of descriptors
//! (EMFILE), which only connections that close cure, or a connection
//! aborted while it waited. A server prints the error and accepts again
//! after a pause; it does not end.

use std::net::SocketAddr;
use std::time::Duration;

/// How long a server waits before it accepts again after an error.
pub const PAUSE: Duration = Duration::from_millis(100);

/// The next connection `listener` accepts; an error is printed (as
/// `name: accept: ...`) and accepting tried again after [`PAUSE`].
pub async fn next(
    listener: &tokio::net::TcpListener,
    name: &str,
) -> (tokio::net::TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(e) => {
                eprintln!("{name}: accept: {e}; again in {PAUSE:?}");
                tokio::time::sleep(PAUSE).await;
            }
        }
    }
}
