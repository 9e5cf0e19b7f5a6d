//! The WebSocket echo application shared by the examples: the opening
//! handshake on cleave's `http1::Server`, then every message sent back as
//! it came (whole messages whole, pieces as pieces), over tokio.

use std::io;

use cleave_proto::conn::Conn;
use cleave_proto::http1::{Client, ClientEvent, Request, Server, ServerEvent};
use cleave_proto::websocket::{
    self, AcceptConfig, ClientHandshake, ConnectConfig, Kind, WebSocket, WsConfig, WsEvent,
};
use cleave_proto::{ConnConfig, ConnError, Frame, RecvBufConfig};
use cleave_tokio::{Connection, OsEntropy};
use futures_util::StreamExt;
use tokio::net::TcpStream;

/// Boxed errors for `main`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The echo's limits: messages up to 64 MiB, frames up to 16 MiB (what
/// Autobahn sends), frames above 1 MiB streamed in pieces.
#[must_use]
pub fn ws_config() -> WsConfig {
    WsConfig::default()
}

/// The connection's buffer: room for a 1 MiB frame (and a compressed
/// frame of up to 16 MiB, which is inflated whole).
///
/// # Panics
///
/// Never: the sizes are valid.
#[must_use]
pub fn conn_config() -> ConnConfig {
    let recv = RecvBufConfig::default()
        .max_buffered((16 << 20) + (64 << 10))
        .expect("a valid limit");
    ConnConfig::default().recv_buf(recv)
}

/// What the server accepts: any subprotocol-less client, and
/// permessage-deflate when the feature is on.
#[must_use]
pub fn accept_config() -> AcceptConfig {
    let config = AcceptConfig::default();
    #[cfg(feature = "deflate")]
    let config = config.deflate(websocket::DeflateConfig::default());
    config
}

/// Sends every message back: the state between the pieces of one.
#[derive(Debug, Default)]
pub struct Echo {
    /// The next piece starts a message.
    in_message: bool,
}

impl Echo {
    /// The frame that answers `event`, if any (a close is answered by the
    /// protocol itself).
    pub fn answer(&mut self, ws: &mut WebSocket, event: WsEvent) -> Option<Frame> {
        match event {
            WsEvent::Text(text) => Some(ws.message(Kind::Text, text)),
            WsEvent::Binary(data) => Some(ws.message(Kind::Binary, data)),
            WsEvent::Part(part) => {
                let first = !self.in_message;
                self.in_message = !part.last;
                Some(ws.part(part.kind, part.data, first, part.last))
            }
            WsEvent::Ping(_) | WsEvent::Pong(_) | WsEvent::Close(_) => None,
        }
    }
}

/// What the client offers: permessage-deflate when the feature is on.
#[must_use]
pub fn connect_config() -> ConnectConfig {
    let config = ConnectConfig::default();
    #[cfg(feature = "deflate")]
    let config = config.deflate(websocket::DeflateConfig::default());
    config
}

/// The protocol for an accepted handshake.
fn protocol(accepted: &websocket::Accepted) -> WebSocket {
    let ws = WebSocket::server(ws_config());
    #[cfg(feature = "deflate")]
    let ws = match accepted.deflate() {
        Some(params) => ws.with_deflate(params, &websocket::DeflateConfig::default()),
        None => ws,
    };
    #[cfg(not(feature = "deflate"))]
    let _ = accepted;
    ws
}

// ----- tokio -----

/// Serves every connection `listener` accepts, each in a task of its own.
///
/// # Errors
///
/// What `accept` says.
pub async fn serve_tokio(listener: tokio::net::TcpListener) -> io::Result<()> {
    loop {
        let (socket, _peer) = listener.accept().await?;
        tokio::spawn(async move {
            // A client that breaks off is its own business.
            let _ = serve_tokio_connection(socket).await;
        });
    }
}

/// The opening handshake: the request, once its head and end came.
async fn upgrade_request(
    conn: &mut Connection<TcpStream, Server>,
) -> Result<Option<Request>, ConnError> {
    let mut request = None;
    while let Some(event) = conn.next().await {
        match event? {
            ServerEvent::Head(head) => request = Some(head),
            ServerEvent::End => return Ok(request),
            ServerEvent::Data(_) | ServerEvent::Trailers(_) => {}
        }
    }
    Ok(None)
}

/// Serves one connection: the handshake, then the echo until the close
/// handshake (or an error, answered with its close code by the protocol).
///
/// # Errors
///
/// What the socket says.
pub async fn serve_tokio_connection(socket: TcpStream) -> Result<(), ConnError> {
    socket.set_nodelay(true)?;
    let mut http = Connection::with_config(socket, Server::new(), conn_config());
    let Some(request) = upgrade_request(&mut http).await? else {
        return http.close().await;
    };
    let accepted = match websocket::accept(&request, &accept_config()) {
        Ok(accepted) => accepted,
        Err(_) => {
            http.send(websocket::refusal(&request)).await?;
            return http.close().await;
        }
    };
    // The 101 goes out before the protocol switches: a pong the protocol
    // owes for a ping that came with the request takes the urgent lane,
    // which would overtake it.
    http.send(accepted.response().clone()).await?;
    http.flush().await?;
    let ws = protocol(&accepted);
    let mut conn = http.switch(|_| ws);
    let mut echo = Echo::default();
    while let Some(first) = conn.next().await {
        let mut next = Some(first);
        while let Some(event) = next {
            // An error: the protocol queued its close; write it and stop.
            let Ok(event) = event else {
                return conn.close().await;
            };
            if let Some(frame) = echo.answer(conn.conn_mut().protocol_mut(), event) {
                conn.send(frame).await?;
            }
            next = conn.next_buffered();
        }
        conn.flush().await?;
    }
    conn.close().await
}

/// A WebSocket client connection to `addr`, asking for `target` of
/// `host`: the handshake on cleave's `http1::Client`, checked, then the
/// connection switched to a client [`WebSocket`] (masks from the
/// operating system).
///
/// # Errors
///
/// The socket's, or the handshake's (a refused or malformed answer).
pub async fn connect(
    addr: &str,
    host: &str,
    target: &str,
) -> Result<Connection<TcpStream, WebSocket>, BoxError> {
    connect_with(addr, host, target, ws_config()).await
}

/// As [`connect`], with the protocol's limits and habits from `config`.
///
/// # Errors
///
/// As [`connect`].
pub async fn connect_with(
    addr: &str,
    host: &str,
    target: &str,
    config: WsConfig,
) -> Result<Connection<TcpStream, WebSocket>, BoxError> {
    let socket = TcpStream::connect(addr).await?;
    socket.set_nodelay(true)?;
    let mut entropy = OsEntropy::new();
    let (handshake, request) = ClientHandshake::new(host, target, &connect_config(), &mut entropy)?;
    let mut client = Client::new();
    client.expect_response("GET");
    let mut http = Connection::with_config(socket, client, conn_config());
    http.send(request).await?;
    http.flush().await?;
    let response = loop {
        match http.next().await {
            Some(Ok(ClientEvent::Head(response))) => break response,
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e.into()),
            None => return Err("the server closed during the handshake".into()),
        }
    };
    let negotiated = handshake.check(&response)?;
    // The 101's end: nothing more is parsed, the bytes after it stay.
    if let Some(Err(e)) = http.next_buffered() {
        return Err(e.into());
    }
    let ws = WebSocket::client(config, entropy);
    #[cfg(feature = "deflate")]
    let ws = match negotiated.deflate() {
        Some(params) => ws.with_deflate(params, &websocket::DeflateConfig::default()),
        None => ws,
    };
    #[cfg(not(feature = "deflate"))]
    let _ = negotiated;
    Ok(http.switch(|_| ws))
}

/// Echoes what the server sends until its close (Autobahn's
/// fuzzingserver runs each case so).
///
/// # Errors
///
/// The socket's.
pub async fn echo_until_closed(
    conn: &mut Connection<TcpStream, WebSocket>,
) -> Result<(), ConnError> {
    let mut echo = Echo::default();
    while let Some(first) = conn.next().await {
        let mut next = Some(first);
        while let Some(event) = next {
            let Ok(event) = event else {
                return conn.close().await;
            };
            if let Some(frame) = echo.answer(conn.conn_mut().protocol_mut(), event) {
                conn.send(frame).await?;
            }
            next = conn.next_buffered();
        }
        conn.flush().await?;
    }
    conn.close().await
}

/// A `Conn` for tests: the echo's protocol over a buffer, no socket.
#[must_use]
pub fn sans_io_echo() -> Conn<WebSocket> {
    Conn::with_config(
        WebSocket::server(ws_config()),
        conn_config(),
        std::time::Duration::ZERO,
    )
}
