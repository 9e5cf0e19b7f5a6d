//! The application served on tokio: a task per connection.

use std::io;

use cleave_proto::ConnError;
use cleave_tokio::Connection;
use futures_util::StreamExt;

use super::{conn_config, server, App};

/// Serves every connection `listener` accepts, each in a task of its own,
/// until the runtime is dropped. An accept error (out of descriptors, say)
/// is printed and accepting goes on after a pause ([`crate::accept`]).
///
/// # Errors
///
/// None: it serves until it is dropped.
pub async fn serve_tokio(listener: tokio::net::TcpListener) -> io::Result<()> {
    loop {
        let (socket, _peer) = crate::accept::next(&listener, "http1_server").await;
        tokio::spawn(async move {
            // A client that breaks off is its own business.
            let _ = serve_tokio_connection(socket).await;
        });
    }
}

/// Serves one connection: the answers to the requests that arrived
/// together are queued, then written with one flush.
///
/// # Errors
///
/// What the socket says; a protocol error is answered, not returned.
pub async fn serve_tokio_connection(socket: tokio::net::TcpStream) -> Result<(), ConnError> {
    socket.set_nodelay(true)?;
    let mut conn = Connection::with_config(socket, server(), conn_config());
    let mut app = App::new();
    let mut out = Vec::new();
    while let Some(first) = conn.next().await {
        let mut next = Some(first);
        while let Some(event) = next {
            match event {
                Ok(event) => app.on_event(event, &mut out)?,
                Err(ConnError::Protocol(e)) => app.on_error(&e, &mut out),
                Err(e) => return Err(e),
            }
            if app.take_declined() {
                conn.conn_mut().protocol_mut().resume();
            }
            // Nothing after a close is answered (the codec parses no
            // more anyway).
            next = if app.wants_close() {
                None
            } else {
                conn.next_buffered()
            };
        }
        for frame in out.drain(..) {
            conn.send(frame).await?;
        }
        conn.flush().await?;
        if app.wants_close() {
            break;
        }
    }
    conn.close().await
}
