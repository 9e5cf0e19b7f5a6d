//! A request's way to its backend and its response's way back: the
//! backend connections, the relay of one response, and what a failure
//! leaves the client.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use cleave_proto::http1::{self, Body, Client, ClientEvent, Request, Routed};
use cleave_proto::{Bytes, Conn, ConnConfig, Protocol, Timeouts};
use cleave_tokio::{ConnError, Connection, Reset};
use futures_util::{FutureExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::{body_piece, last_chunk, upgrades_to_websocket_alone, BoxError, Moved};

/// A request on its way to a backend.
pub(super) struct Forward {
    pub(super) target: usize,
    pub(super) chunked: bool,
    pub(super) head: Bytes,
    /// The request's head as read: what its answer is framed for (HEAD,
    /// CONNECT, an upgrade, the client's last request).
    pub(super) request: Request,
    /// Safe to send again on a new connection if the kept one turns out
    /// closed: a GET, HEAD or OPTIONS without a body, on a kept connection.
    pub(super) again: bool,
    /// Sending the head failed (a kept connection the backend closed).
    pub(super) failed: bool,
}

impl Forward {
    /// The request (a head only) once more, on `backend`, and its answer.
    pub(super) async fn send_again<S>(
        &self,
        backend: &mut Connection<TcpStream, Client>,
        client: &mut Connection<S, Routed<usize>>,
        moved: &mut Moved,
    ) -> Result<After, Relay>
    where
        S: AsyncRead + AsyncWrite + Reset + Unpin,
    {
        backend
            .conn_mut()
            .protocol_mut()
            .expect_response_to(&self.request);
        let sent = backend.send(self.head.clone()).await;
        let flushed = match sent {
            Ok(_) => backend.flush().await,
            Err(e) => Err(e),
        };
        flushed.map_err(|e| Relay::NoAnswer(e.into()))?;
        relay_response(backend, client, moved, None).await
    }
}

/// Why a response was not relayed.
pub(super) enum Relay {
    /// The backend failed (or timed out) before any of its answer reached
    /// the client: the client can still be answered.
    NoAnswer(BoxError),
    /// It failed part way, or the client did: the client's connection
    /// ends without a clean end.
    Cut(BoxError),
}

impl Relay {
    pub(super) fn into_error(self) -> BoxError {
        match self {
            Self::NoAnswer(e) | Self::Cut(e) => e,
        }
    }
}

/// Whether a backend's failure was its idle timeout.
pub(super) fn is_timeout(e: &BoxError) -> bool {
    matches!(
        e.downcast_ref::<ConnError>(),
        Some(ConnError::Protocol(cleave_proto::Error::TimedOut(_)))
    )
}

/// The open connection to `target`'s backend, connecting if needed (with
/// `idle` as its idle timeout); `None` when the target has no address.
pub(super) async fn connect_backend<'a>(
    open: &'a mut [Option<Connection<TcpStream, Client>>],
    backends: &[Option<SocketAddr>],
    target: usize,
    idle: Option<Duration>,
) -> io::Result<Option<&'a mut Connection<TcpStream, Client>>> {
    let Some(addr) = backends.get(target).copied().flatten() else {
        return Ok(None);
    };
    let slot = open.get_mut(target).ok_or(io::ErrorKind::NotFound)?;
    if slot.is_none() {
        let socket = TcpStream::connect(addr).await?;
        socket.set_nodelay(true)?;
        let config = ConnConfig::default().timeouts(Timeouts::default().idle(idle));
        *slot = Some(Connection::with_config(socket, Client::new(), config));
    }
    Ok(slot.as_mut())
}

/// What follows a relayed response.
pub(super) enum After {
    /// Both connections go on.
    KeepAlive,
    /// The client's connection ends: its request or the response said so
    /// (the response's `Connection: close` goes to the client as it came,
    /// so the client's connection closes with the backend's), or the body
    /// ran to the backend's close.
    ClientCloses,
    /// A 101 or a 2xx to CONNECT: tunnel the two.
    Switch,
}

/// Copies one response (interim ones first) from `backend` to `client`,
/// starting with `first` if the backend's first event was read already.
/// What came goes to the client before waiting for more: a streamed
/// response is not held back.
pub(super) async fn relay_response<S>(
    backend: &mut Connection<TcpStream, Client>,
    client: &mut Connection<S, Routed<usize>>,
    moved: &mut Moved,
    mut first: Option<ClientEvent>,
) -> Result<After, Relay>
where
    S: AsyncRead + AsyncWrite + Reset + Unpin,
{
    let mut relayed = first.is_some();
    let cut = |relayed: bool, e: BoxError| {
        if relayed {
            Relay::Cut(e)
        } else {
            Relay::NoAnswer(e)
        }
    };
    let client_failed = |e: ConnError| Relay::Cut(e.into());
    let mut chunked = false;
    let mut after = After::KeepAlive;
    let mut trailers = None;
    loop {
        let next = match first.take() {
            Some(event) => Some(Ok(event)),
            None => match backend.next().now_or_never() {
                Some(next) => next,
                None => {
                    // Nothing more from the backend now: what came goes
                    // out before the wait.
                    client.flush().await.map_err(client_failed)?;
                    backend.next().await
                }
            },
        };
        let event = match next {
            Some(Ok(event)) => event,
            Some(Err(e)) => return Err(cut(relayed, e.into())),
            None => break,
        };
        relayed = true;
        match event {
            ClientEvent::Interim(response) => {
                moved.down += response.as_bytes().len() as u64;
                client
                    .send(response.into_bytes())
                    .await
                    .map_err(client_failed)?;
            }
            ClientEvent::Head(response) => {
                chunked = response.body() == Body::Chunked;
                if response.status() == 101 && !switches_to_websocket(&response) {
                    return Err(Relay::NoAnswer(
                        "a 101 to another protocol than WebSocket".into(),
                    ));
                }
                after = if response.switches() {
                    After::Switch
                } else if !response.keep_alive() {
                    After::ClientCloses
                } else {
                    After::KeepAlive
                };
                moved.down += response.as_bytes().len() as u64;
                client
                    .send(response.into_bytes())
                    .await
                    .map_err(client_failed)?;
            }
            ClientEvent::Data(data) => {
                moved.down += data.len() as u64;
                let piece = body_piece(data, chunked).map_err(Relay::Cut)?;
                client.send(piece).await.map_err(client_failed)?;
            }
            ClientEvent::Trailers(t) => trailers = Some(t),
            ClientEvent::End => {
                if chunked {
                    let last = last_chunk(trailers.as_ref()).map_err(Relay::Cut)?;
                    client.send(last).await.map_err(client_failed)?;
                }
                client.flush().await.map_err(client_failed)?;
                if !matches!(after, After::Switch) {
                    // A declined upgrade or CONNECT: the client's requests
                    // go on (unless it asked to close).
                    client.conn_mut().protocol_mut().server_mut().resume();
                }
                if !client_keeps_alive(client.conn()) && matches!(after, After::KeepAlive) {
                    return Ok(After::ClientCloses);
                }
                return Ok(after);
            }
        }
    }
    Err(cut(
        relayed,
        "the backend closed before its response ended".into(),
    ))
}

/// Whether the client's connection goes on: its server side did not stop
/// after this request (a `Connection: close`, HTTP/1.0).
fn client_keeps_alive<S: Protocol>(conn: &Conn<S>) -> bool {
    !conn.is_read_done()
}

/// Whether a backend's answer switches to WebSocket, the one protocol the
/// proxy tunnels: a 101 to anything else is not relayed.
pub(super) fn switches_to_websocket(response: &http1::Response) -> bool {
    upgrades_to_websocket_alone(response.headers())
}
