//! WebSocket through the demo's HTTP proxy (`http_proxy::serve_with`),
//! by route: upgrades for one Host are passed to a WebSocket echo backend
//! (the 101 comes from it; then the sockets are tunnelled), upgrades for
//! the other are terminated by the proxy, which bridges the messages to a
//! line backend.

use std::net::SocketAddr;
use std::time::Duration;

use cleave_examples::http_proxy;
use cleave_examples::websocket::{connect, serve_tokio};
use cleave_proto::route::{HostPattern, Match, Router};
use cleave_proto::websocket::{close_code, Kind, WsEvent};
use cleave_proto::{Bytes, Encoder, Event, Lines, Session, SessionConfig};
use cleave_tokio::{Connection, FrameReader, SessionReader};
use futures_util::StreamExt;
use tokio::net::{TcpListener, TcpStream};

const LINES: usize = 0;
const ECHO: usize = 1;

/// A line backend: every line back with `lines: ` before it.
async fn line_backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut lines = FrameReader::new(socket, Lines::new());
                let mut encoder = Lines::new();
                while let Some(Ok(line)) = lines.next().await {
                    let answer = [&b"lines: "[..], &line].concat();
                    lines
                        .send(encoder.encode(Bytes::from(answer)).unwrap())
                        .await
                        .unwrap();
                    lines.flush().await.unwrap();
                }
                let _ = lines.close().await;
            });
        }
    });
    addr
}

/// The WebSocket echo example as a backend.
async fn echo_backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_tokio(listener));
    addr
}

/// The proxy as the demo wires it, terminating WebSocket for `LINES`.
async fn proxy() -> SocketAddr {
    let backends = vec![Some(line_backend().await), Some(echo_backend().await)];
    let router = Router::new(LINES)
        .rule(Match::HttpHost(HostPattern::new("lines.test")), LINES)
        .rule(Match::HttpHost(HostPattern::new("echo.test")), ECHO);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let (router, backends) = (router.clone(), backends.clone());
            tokio::spawn(async move {
                let session = Session::tunnel(router.clone(), SessionConfig::default());
                let mut events = SessionReader::new(socket, session);
                while let Some(Ok(event)) = events.next().await {
                    if let Event::Routed(_) = event {
                        let client = http_proxy::routed(events, router);
                        let _ = http_proxy::serve_with(client, &backends, &[LINES]).await;
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// The next event, within a bound that only stops a hang.
async fn next(
    conn: &mut Connection<TcpStream, cleave_proto::websocket::WebSocket>,
) -> Option<WsEvent> {
    tokio::time::timeout(Duration::from_secs(20), conn.next())
        .await
        .expect("an answer in time")
        .map(|event| event.expect("no error"))
}

/// Sends `text`, returns the text message that answers it.
async fn round_trip(
    conn: &mut Connection<TcpStream, cleave_proto::websocket::WebSocket>,
    text: &'static str,
) -> Bytes {
    let frame = conn
        .conn_mut()
        .protocol_mut()
        .message(Kind::Text, Bytes::from_static(text.as_bytes()))
        .unwrap();
    conn.send(frame).await.unwrap();
    conn.flush().await.unwrap();
    match next(conn).await {
        Some(WsEvent::Text(answer)) => answer,
        other => panic!("{other:?}"),
    }
}

/// Closes with 1000 and reads the close that answers.
async fn close(
    conn: &mut Connection<TcpStream, cleave_proto::websocket::WebSocket>,
) -> Option<u16> {
    let frame = conn
        .conn_mut()
        .protocol_mut()
        .close(close_code::NORMAL, "")
        .unwrap();
    conn.send(frame).await.unwrap();
    conn.flush().await.unwrap();
    match next(conn).await {
        Some(WsEvent::Close(frame)) => frame.code,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_terminated_route_bridges_messages_to_lines() {
    let proxy = proxy().await.to_string();
    let mut conn = connect(&proxy, "lines.test", "/").await.unwrap();
    assert_eq!(round_trip(&mut conn, "hello").await, "lines: hello");
    assert_eq!(round_trip(&mut conn, "κόσμε").await, "lines: κόσμε");
    assert_eq!(close(&mut conn).await, Some(1000));
}

#[tokio::test]
async fn a_passed_route_reaches_the_websocket_backend() {
    let proxy = proxy().await.to_string();
    let mut conn = connect(&proxy, "echo.test", "/").await.unwrap();
    // The echo backend answered the handshake and echoes as it came.
    assert_eq!(round_trip(&mut conn, "hello").await, "hello");
    assert_eq!(close(&mut conn).await, Some(1000));
}

#[tokio::test]
async fn a_message_that_is_not_one_line_is_refused_by_policy() {
    let proxy = proxy().await.to_string();
    let mut conn = connect(&proxy, "lines.test", "/").await.unwrap();
    let frame = conn
        .conn_mut()
        .protocol_mut()
        .message(Kind::Text, Bytes::from_static(b"two\nlines"))
        .unwrap();
    conn.send(frame).await.unwrap();
    conn.flush().await.unwrap();
    match next(&mut conn).await {
        Some(WsEvent::Close(frame)) => assert_eq!(frame.code, Some(close_code::POLICY)),
        other => panic!("{other:?}"),
    }
}
