//! A WebSocket upgrade terminated by the proxy: the handshake answered
//! here, then the messages bridged to the backend as lines.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::task::Poll;

use cleave_proto::http1::{self, Body, Request, Routed, RoutedEvent};
use cleave_proto::websocket::{self, close_code, Assembler, Kind, WebSocket, WsConfig, WsEvent};
use cleave_proto::{Bytes, Encoder, Frame, Lines};
use cleave_tokio::{ConnError, Connection, FrameReader, Reset};
use futures_util::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::{BoxError, Moved};

/// What moved one way of a terminated WebSocket, or made room.
enum Step {
    /// A queue that held back a message or a line has room.
    Room,
    /// The client's next event.
    Client(Option<Result<WsEvent, ConnError>>),
    /// The backend's next line.
    Backend(Option<Result<Bytes, ConnError>>),
}

/// Terminates a WebSocket upgrade: the handshake answered here, then the
/// messages bridged to `addr` as lines until either side ends.
pub(super) async fn terminate<S>(
    mut client: Connection<S, Routed<usize>>,
    request: Request,
    addr: Option<SocketAddr>,
    mut moved: Moved,
) -> Result<Moved, BoxError>
where
    S: AsyncRead + AsyncWrite + Reset + Unpin,
{
    // The request's end: a WebSocket upgrade has no body.
    while let Some(event) = client.next().await {
        if matches!(event?, RoutedEvent::End) {
            break;
        }
    }
    let (accepted, addr) = match (
        websocket::accept(&request, &websocket::AcceptConfig::default()),
        addr,
    ) {
        (Ok(accepted), Some(addr)) => (accepted, addr),
        (refused, _) => {
            let answer = match refused {
                Ok(_) => {
                    http1::response(502, "Bad Gateway", &[("Connection", b"close")], Body::Empty)?
                }
                Err(_) => websocket::refusal(&request),
            };
            client.send(answer).await?;
            client.close().await?;
            return Ok(moved);
        }
    };
    let socket = TcpStream::connect(addr).await?;
    socket.set_nodelay(true)?;
    let mut lines = FrameReader::new(socket, Lines::new());
    client.send(accepted.response().clone()).await?;
    client.flush().await?;
    moved.requests += 1;
    let mut ws = client.switch(|_| WebSocket::server(WsConfig::default()));
    let mut encoder = Lines::new();
    let mut parts = Assembler::new();
    let mut backend_open = true;
    // Each way moves on its own. What finds its queue full waits here,
    // and only that way stops reading until the queue makes room, while
    // both queues are written all the time: a way that waited for its
    // write while not reading the other would deadlock against a backend
    // that writes its answers before it reads on.
    let mut to_backend: Option<Frame> = None;
    let mut to_client: VecDeque<Frame> = VecDeque::new();
    loop {
        if let Some(line) = to_backend.take() {
            to_backend = lines.conn_mut().push_or_full(line)?.err();
        }
        while let Some(frame) = to_client.pop_front() {
            if let Err(full) = ws.conn_mut().push_or_full(frame)? {
                to_client.push_front(full);
                break;
            }
        }
        let step = poll_fn(|cx| {
            let up_room = lines.poll_drain(cx)?.is_ready();
            let down_room = ws.poll_drain(cx)?.is_ready();
            if (to_backend.is_some() && up_room) || (!to_client.is_empty() && down_room) {
                return Poll::Ready(Ok::<_, ConnError>(Step::Room));
            }
            if to_backend.is_none() {
                if let Poll::Ready(event) = ws.poll_next_unpin(cx) {
                    return Poll::Ready(Ok(Step::Client(event)));
                }
            }
            if to_client.is_empty() && backend_open {
                if let Poll::Ready(line) = lines.poll_next_unpin(cx) {
                    return Poll::Ready(Ok(Step::Backend(line)));
                }
            }
            Poll::Pending
        })
        .await?;
        match step {
            Step::Room => {}
            Step::Client(event) => {
                let message = match event {
                    Some(Ok(WsEvent::Text(data) | WsEvent::Binary(data))) => data,
                    Some(Ok(WsEvent::Part(part))) => match parts.push(part) {
                        Some((_, whole)) => whole,
                        None => continue,
                    },
                    Some(Ok(_)) => continue,
                    // The close handshake is done, or the client broke a
                    // rule (the protocol answered it): the line side ends.
                    Some(Err(_)) | None => break,
                };
                moved.up += message.len() as u64;
                match encoder.encode(message) {
                    Ok(line) => to_backend = Some(line),
                    // A message with a line break cannot be one line
                    // (one close per side: none if one went already).
                    Err(_) if !ws.conn().protocol().is_closing() => {
                        let close = ws
                            .conn_mut()
                            .protocol_mut()
                            .close(close_code::POLICY, "not a line")?;
                        to_client.push_back(close);
                    }
                    Err(_) => {}
                }
            }
            Step::Backend(line) => {
                let Some(Ok(line)) = line else {
                    // The backend ended: the client is told so.
                    backend_open = false;
                    if !ws.conn().protocol().is_closing() {
                        let close = ws
                            .conn_mut()
                            .protocol_mut()
                            .close(close_code::GOING_AWAY, "")?;
                        to_client.push_back(close);
                    }
                    continue;
                };
                moved.down += line.len() as u64;
                let message = ws.conn_mut().protocol_mut().message(Kind::Text, line)?;
                to_client.push_back(message);
            }
        }
    }
    // What still waited for room goes before the ends.
    if let Some(line) = to_backend {
        lines.send(line).await?;
    }
    for frame in to_client {
        ws.send(frame).await?;
    }
    ws.close().await?;
    lines.close().await?;
    Ok(moved)
}
