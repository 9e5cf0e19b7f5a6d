//! The WebSocket echo application shared by the examples: the opening
//! handshake on cleave's `http1::Server`, then every message sent back as
//! it came (whole messages whole, pieces as pieces), over tokio.

use std::io;

use cleave_proto::conn::Conn;
use cleave_proto::http1::{self, Body, Client, ClientEvent, Request, Server, ServerEvent};
use cleave_proto::websocket::{
    self, AcceptConfig, ClientHandshake, ConnectConfig, Kind, WebSocket, WsConfig, WsEvent,
};
use cleave_proto::{Bytes, ConnConfig, ConnError, Error, Frame, RecvBufConfig};
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
/// frame of up to 16 MiB, which is inflated whole), read 64 KiB at a time
/// (a 16 KiB message in one read, not three; the block goes back when the
/// connection waits, so an idle one still holds none).
///
/// # Panics
///
/// Never: the sizes are valid.
#[must_use]
pub fn conn_config() -> ConnConfig {
    let recv = RecvBufConfig::default()
        .max_buffered((16 << 20) + (64 << 10))
        .and_then(|c| c.read_reserve(64 << 10))
        .expect("valid sizes");
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
    ///
    /// # Errors
    ///
    /// The encoder's: none while the events come in order (no message
    /// follows the peer's close).
    pub fn answer(&mut self, ws: &mut WebSocket, event: WsEvent) -> Result<Option<Frame>, Error> {
        Ok(match event {
            WsEvent::Text(text) => Some(ws.message(Kind::Text, text)?),
            WsEvent::Binary(data) => Some(ws.message(Kind::Binary, data)?),
            WsEvent::Part(part) => {
                let first = !self.in_message;
                self.in_message = !part.last;
                Some(ws.part(part.kind, part.data, first, part.last)?)
            }
            WsEvent::Ping(_) | WsEvent::Pong(_) | WsEvent::Close(_) => None,
        })
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
/// An accept error (out of descriptors, say) is printed and accepting goes
/// on after a pause ([`crate::accept`]).
///
/// # Errors
///
/// None: it serves until it is dropped.
pub async fn serve_tokio(listener: tokio::net::TcpListener) -> io::Result<()> {
    loop {
        let (socket, _peer) = crate::accept::next(&listener, "ws_echo_server").await;
        tokio::spawn(async move {
            // A client that breaks off is its own business.
            let _ = serve_tokio_connection(socket).await;
        });
    }
}

/// The answer to a request the HTTP parser refused: RFC 6455, section
/// 4.2.1, has a handshake that breaks HTTP's grammar (two Host fields, a
/// folded line) answered with an HTTP error status, as any refusal; the
/// status [`http1::status_for`] gives, then the close. `None` for a
/// failure that has none (the peer left, a timeout: the codec chose its
/// last word then).
fn http_refusal(error: &ConnError) -> Option<Bytes> {
    let ConnError::Protocol(e) = error else {
        return None;
    };
    if matches!(e, Error::TimedOut(_)) {
        return None;
    }
    let status = http1::status_for(e)?;
    let reason = crate::http1::reason(status);
    http1::response(status, reason, &[("Connection", b"close")], Body::Empty).ok()
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
    let http = Connection::with_config(socket, Server::new(), conn_config());
    let Some(mut conn) = handshake(http).await? else {
        return Ok(());
    };
    echo_until_closed(&mut conn).await
}

/// The server's handshake: the connection switched to WebSocket, or
/// `None` once a refusal was written. The request (a view of the receive
/// buffer: it would keep the buffer's block) goes with it.
async fn handshake(
    mut http: Connection<TcpStream, Server>,
) -> Result<Option<Connection<TcpStream, WebSocket>>, ConnError> {
    let request = match upgrade_request(&mut http).await {
        Ok(request) => request,
        Err(e) => {
            let Some(answer) = http_refusal(&e) else {
                return Err(e);
            };
            http.send(answer).await?;
            http.close().await?;
            return Ok(None);
        }
    };
    let Some(request) = request else {
        http.close().await?;
        return Ok(None);
    };
    let accepted = match websocket::accept(&request, &accept_config()) {
        Ok(accepted) => accepted,
        Err(_) => {
            http.send(websocket::refusal(&request)).await?;
            http.close().await?;
            return Ok(None);
        }
    };
    // The 101 goes out before the protocol switches: a pong the protocol
    // owes for a ping that came with the request takes the urgent lane,
    // which would overtake it.
    http.send(accepted.response().clone()).await?;
    http.flush().await?;
    let ws = protocol(&accepted);
    Ok(Some(http.switch(|_| ws)))
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
    client.expect_upgrade("GET");
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

/// Echoes what the peer sends until the close handshake (or an error,
/// answered with its close code by the protocol): the echo server's loop,
/// and what Autobahn's fuzzingserver asks of a client in each case. The
/// answers to what arrived together are written with one flush.
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
            // An error: the protocol queued its close; write it and stop.
            let Ok(event) = event else {
                return conn.close().await;
            };
            if let Some(frame) = echo.answer(conn.conn_mut().protocol_mut(), event)? {
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

// ----- mio -----

/// A connection's protocol over its life, for a slab that holds one
/// type: the opening handshake on `http1::Server`, then WebSocket on the
/// same buffer (the bytes after the request in place).
#[derive(Debug)]
pub enum Upgrading {
    /// Reading the upgrade request.
    Http(Server),
    /// The handshake is done.
    Open(WebSocket),
}

/// What an [`Upgrading`] connection reads.
#[derive(Debug)]
pub enum UpgradingEvent {
    /// A part of the upgrade request.
    Http(ServerEvent),
    /// A WebSocket event.
    Ws(WsEvent),
}

impl cleave_proto::Protocol for Upgrading {
    type Event = UpgradingEvent;

    fn poll_event(
        &mut self,
        wire: &mut cleave_proto::conn::Wire<'_>,
    ) -> Result<Option<UpgradingEvent>, Error> {
        Ok(match self {
            Self::Http(http) => http.poll_event(wire)?.map(UpgradingEvent::Http),
            Self::Open(ws) => ws.poll_event(wire)?.map(UpgradingEvent::Ws),
        })
    }

    fn phase(&self) -> cleave_proto::conn::Phase {
        match self {
            Self::Http(http) => http.phase(),
            Self::Open(ws) => ws.phase(),
        }
    }

    fn on_timeout(
        &mut self,
        wire: &mut cleave_proto::conn::Wire<'_>,
        timeout: cleave_proto::Timeout,
    ) -> cleave_proto::conn::Close {
        match self {
            Self::Http(http) => http.on_timeout(wire, timeout),
            Self::Open(ws) => ws.on_timeout(wire, timeout),
        }
    }

    fn waits_for_room(&self) -> bool {
        match self {
            Self::Http(http) => http.waits_for_room(),
            Self::Open(ws) => ws.waits_for_room(),
        }
    }

    fn release_idle(&mut self) {
        match self {
            Self::Http(http) => http.release_idle(),
            Self::Open(ws) => ws.release_idle(),
        }
    }

    fn hand_back(&mut self, recv: &mut cleave_proto::RecvBuf) {
        match self {
            Self::Http(http) => http.hand_back(recv),
            Self::Open(ws) => ws.hand_back(recv),
        }
    }
}

const MIO_LISTENER: mio::Token = mio::Token(0);
const MIO_WAKER: mio::Token = mio::Token(1);

type MioWs = cleave_mio::Conn<mio::net::TcpStream, Upgrading>;

/// One mio connection's echo and the frames the queue had no room for
/// yet (reading pauses while there are any).
#[derive(Debug, Default)]
struct MioPeer {
    echo: Echo,
    request: Option<Request>,
    backlog: std::collections::VecDeque<Frame>,
}

/// The echo server on one thread's `mio::Poll`: every connection a
/// [`cleave_mio::Conn`] of [`Upgrading`] in a `Conns` slab. Serves until
/// the returned stop flag is set (and the waker woken).
///
/// # Errors
///
/// What binding, `poll` or `accept` say.
pub fn serve_mio(
    listener: std::net::TcpListener,
    stop: &std::sync::atomic::AtomicBool,
    on_waker: impl FnOnce(std::sync::Arc<mio::Waker>),
) -> io::Result<()> {
    use std::sync::atomic::Ordering;
    listener.set_nonblocking(true)?;
    let mut listener = mio::net::TcpListener::from_std(listener);
    let mut poll = mio::Poll::new()?;
    poll.registry()
        .register(&mut listener, MIO_LISTENER, mio::Interest::READABLE)?;
    on_waker(std::sync::Arc::new(mio::Waker::new(
        poll.registry(),
        MIO_WAKER,
    )?));
    let mut conns: cleave_mio::Conns<mio::net::TcpStream, Upgrading> =
        cleave_mio::Conns::starting_at(mio::Token(2));
    let mut peers: std::collections::HashMap<mio::Token, MioPeer> = Default::default();
    let mut events = mio::Events::with_capacity(256);
    let mut read = Vec::new();
    // Connections to read again once the others had their turn (their
    // read budget ran out: no new event will say that bytes wait).
    let mut again: Vec<mio::Token> = Vec::new();
    // After an accept error (out of descriptors): when to try again.
    let mut accept_at: Option<std::time::Instant> = None;
    while !stop.load(Ordering::SeqCst) {
        let timeout = if again.is_empty() {
            accept_at.map(|at| at.saturating_duration_since(std::time::Instant::now()))
        } else {
            Some(std::time::Duration::ZERO)
        };
        poll.poll(&mut events, timeout)?;
        let mut accept = accept_at.is_some_and(|at| at <= std::time::Instant::now());
        let ready = events.iter().filter_map(|event| {
            let token = event.token();
            (token != MIO_WAKER).then_some((token, Some(event)))
        });
        let ready: Vec<_> = ready
            .chain(
                std::mem::take(&mut again)
                    .into_iter()
                    .map(|token| (token, None)),
            )
            .collect();
        for (token, event) in ready {
            if token == MIO_LISTENER {
                accept = true;
                continue;
            }
            let Some(conn) = conns.get_mut(token) else {
                continue;
            };
            let peer = peers.entry(token).or_default();
            let outcome = match event {
                Some(event) => conn.on_event(event, &mut read),
                None => conn.on_readable(&mut read),
            };
            let (finished, read_again) = match mio_drive(conn, peer, outcome, &mut read) {
                Ok(read_again) => (
                    !matches!(conns.settle(poll.registry(), token), Ok(None)),
                    read_again,
                ),
                Err(_) => (true, false),
            };
            if finished {
                conns.take(token);
                peers.remove(&token);
            } else if read_again && !again.contains(&token) {
                again.push(token);
            }
        }
        if accept {
            accept_at = None;
            let accepted = conns.accept(&listener, poll.registry(), |socket, _peer| {
                socket.set_nodelay(true).ok()?;
                let http = Upgrading::Http(Server::new());
                Some(MioWs::with_config(socket, http, conn_config()))
            });
            // Out of descriptors, say: connections may wait, and no event
            // will say so; try again after a pause.
            if let Err(e) = accepted {
                eprintln!(
                    "ws_echo_mio_server: accept: {e}; again in {:?}",
                    crate::accept::PAUSE
                );
                accept_at = Some(std::time::Instant::now() + crate::accept::PAUSE);
            }
        }
    }
    Ok(())
}

/// Hands what one event brought to the echo, queues its answers, writes;
/// reads on while the protocol switched or room freed. Returns whether to
/// read again once the other connections had their turn: the read budget
/// ran out.
fn mio_drive(
    conn: &mut MioWs,
    peer: &mut MioPeer,
    mut outcome: Result<cleave_mio::ReadOutcome, ConnError>,
    read: &mut Vec<UpgradingEvent>,
) -> Result<bool, ConnError> {
    loop {
        let mut switched = false;
        for event in read.drain(..) {
            match event {
                UpgradingEvent::Http(ServerEvent::Head(request)) => peer.request = Some(request),
                UpgradingEvent::Http(ServerEvent::End) => {
                    switched = mio_upgrade(conn, peer);
                }
                UpgradingEvent::Http(_) => {}
                UpgradingEvent::Ws(event) => {
                    let Upgrading::Open(ws) = conn.conn_mut().protocol_mut() else {
                        continue;
                    };
                    peer.backlog.extend(peer.echo.answer(ws, event)?);
                }
            }
        }
        let more = match outcome {
            Ok(outcome) => outcome.more,
            // A request the HTTP parser refused: answered with its status.
            Err(e @ ConnError::Protocol(_))
                if matches!(conn.conn().protocol(), Upgrading::Http(_)) =>
            {
                if let Some(answer) = http_refusal(&e) {
                    peer.backlog.push_back(Frame::from(answer));
                    let _ = mio_pump(conn, peer);
                }
                conn.close();
                false
            }
            // The protocol queued its close: write it.
            Err(ConnError::Protocol(_)) => false,
            Err(e) => return Err(e),
        };
        let before = conn.conn().queue().marks();
        let resumed = mio_pump(conn, peer)?;
        // Room freed: a protocol waiting to queue an answer goes on.
        let freed = conn.conn().queue().marks() != before && !conn.conn().is_read_done();
        if !peer.backlog.is_empty() {
            return Ok(false);
        }
        if more {
            // The budget ran out: the others first.
            return Ok(true);
        }
        if !(switched || resumed || freed) {
            return Ok(false);
        }
        outcome = conn.on_readable(read);
    }
}

/// The handshake's answer: the 101 and the switch, or a refusal and the
/// close. Returns whether the connection switched (bytes after the
/// request may wait in the buffer).
fn mio_upgrade(conn: &mut MioWs, peer: &mut MioPeer) -> bool {
    let Some(request) = peer.request.take() else {
        conn.close();
        return false;
    };
    match websocket::accept(&request, &accept_config()) {
        Ok(accepted) => {
            // Written before the switch, so that a pong the protocol owes
            // cannot overtake it.
            peer.backlog
                .push_back(Frame::from(accepted.response().clone()));
            let _ = mio_pump(conn, peer);
            *conn.conn_mut().protocol_mut() = Upgrading::Open(protocol(&accepted));
            true
        }
        Err(_) => {
            peer.backlog
                .push_back(Frame::from(websocket::refusal(&request)));
            let _ = mio_pump(conn, peer);
            conn.close();
            false
        }
    }
}

/// Moves the backlog into the write queue and writes while the socket
/// takes it; pauses reading while frames wait. Returns whether reading
/// resumed.
fn mio_pump(conn: &mut MioWs, peer: &mut MioPeer) -> Result<bool, ConnError> {
    let was_paused = !peer.backlog.is_empty();
    let waiting = crate::backlog::pump(conn, &mut peer.backlog)?;
    Ok(was_paused && !waiting)
}
