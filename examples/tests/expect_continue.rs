//! `Expect: 100-continue` through the demo's HTTP proxy
//! (`http_proxy::serve`): the client sends a head that expects 100 and
//! waits for it before its body (RFC 9110, section 10.1.1); the backend
//! answers `100 Continue` as soon as it sees such a head. The proxy must
//! forward the head at once and relay the 100.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use cleave_examples::http_proxy;
use cleave_proto::http1::{self, Body, Server, ServerEvent, CONTINUE};
use cleave_proto::route::{HostPattern, Match, Router};
use cleave_proto::{Bytes, Event, Session, SessionConfig};
use cleave_tokio::{Connection, SessionReader};
use futures_util::StreamExt;

/// A backend that answers `100 Continue` to a head that expects it, then
/// `200` with the body's length once the body came.
async fn backend() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut conn = Connection::new(socket, Server::new());
                let mut got = 0;
                while let Some(Ok(event)) = conn.next().await {
                    match event {
                        ServerEvent::Head(request) if request.expects_continue() => {
                            conn.send(Bytes::from_static(CONTINUE)).await.unwrap();
                            conn.flush().await.unwrap();
                        }
                        ServerEvent::Data(data) => got += data.len(),
                        ServerEvent::End => {
                            let body = format!("got {got}");
                            let head =
                                http1::response(200, "OK", &[], Body::Length(body.len() as u64))
                                    .unwrap();
                            conn.send(head).await.unwrap();
                            conn.send(Bytes::from(body)).await.unwrap();
                            conn.flush().await.unwrap();
                            got = 0;
                        }
                        _ => {}
                    }
                }
            });
        }
    });
    addr
}

async fn proxy(backend: SocketAddr) -> SocketAddr {
    let router = Router::new(0usize).rule(Match::HttpHost(HostPattern::new("example.com")), 0);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let router = router.clone();
            tokio::spawn(async move {
                let session = Session::tunnel(router.clone(), SessionConfig::default());
                let mut events = SessionReader::new(socket, session);
                while let Some(Ok(event)) = events.next().await {
                    if let Event::Routed(_) = event {
                        let client = http_proxy::routed(events, router);
                        let _ = http_proxy::serve(client, &[Some(backend)]).await;
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// What arrives on `socket` until it ends with `end`, or within `wait`.
fn read_for(socket: &mut std::net::TcpStream, end: &[u8], wait: Duration) -> Vec<u8> {
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let (start, mut got, mut buf) = (Instant::now(), Vec::new(), [0u8; 4096]);
    while start.elapsed() < wait && !got.ends_with(end) {
        match socket.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    got
}

#[test]
fn expect_continue_head_reaches_the_backend_and_its_100_reaches_the_client() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let proxy = runtime.block_on(async { proxy(backend().await).await });

    let mut client = std::net::TcpStream::connect(proxy).unwrap();
    client
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    client
        .write_all(
            b"POST /upload HTTP/1.1\r\nHost: example.com\r\nContent-Length: 5\r\n\
              Expect: 100-continue\r\n\r\n",
        )
        .unwrap();
    // The client waits for the interim answer before it sends the body.
    let interim = read_for(&mut client, b"\r\n\r\n", Duration::from_secs(5));
    // (Then it gives up waiting and sends the body: the request itself
    // still works, only the wait above is the problem.)
    client.write_all(b"hello").unwrap();
    let rest = read_for(&mut client, b"got 5", Duration::from_secs(5));
    runtime.shutdown_background();
    assert!(
        String::from_utf8_lossy(&rest).contains("got 5"),
        "the request works once the body is sent: {:?}",
        String::from_utf8_lossy(&rest)
    );
    assert!(
        interim.starts_with(b"HTTP/1.1 100 Continue\r\n\r\n"),
        "within 5 s of the head, the client got {:?}: the backend's 100 Continue \
         never came, the proxy held the head (and so the request) until the body",
        String::from_utf8_lossy(&interim)
    );
}
