//! A terminated WebSocket route (`http_proxy::serve_with`, the demo's
//! `ws-lines:` routes) bridging messages to a line backend that answers
//! each line with two, writing each answer before it reads the next line,
//! while the client reads every answer all along: every answer reaches
//! the client (the proxy keeps both ways moving under backpressure).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener as StdListener, TcpStream as StdStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use cleave_examples::http_proxy;
use cleave_proto::route::{HostPattern, Match, Router};
use cleave_proto::{Event, Session, SessionConfig};
use cleave_tokio::SessionReader;
use futures_util::StreamExt;

const LINES: usize = 0;
/// Messages the client sends, and bytes in each (one line each).
const MESSAGES: usize = 1024;
const LEN: usize = 32 * 1024;
/// Total time the test gives the exchange (it takes well under a second
/// when nothing blocks).
const BOUND: Duration = Duration::from_secs(10);

/// A line backend, one connection: every line back, then `ok` (two
/// lines an answer), written as each line comes (read a line, write its
/// answer, read the next), as the repo's own line backends do.
fn echo_backend() -> SocketAddr {
    let listener = StdListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        let (socket, _) = listener.accept().unwrap();
        socket.set_read_timeout(Some(BOUND)).unwrap();
        socket.set_write_timeout(Some(BOUND)).unwrap();
        let mut writer = socket.try_clone().unwrap();
        let mut lines = std::io::BufReader::new(socket);
        let mut line = Vec::new();
        loop {
            line.clear();
            match std::io::BufRead::read_until(&mut lines, b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    line.extend_from_slice(b"ok\n");
                    if writer.write_all(&line).is_err() {
                        return;
                    }
                }
            }
        }
    });
    addr
}

#[test]
fn terminated_websocket_route_keeps_forwarding_under_backpressure() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let backend = echo_backend();
    let backends = vec![Some(backend)];
    let router = Router::new(LINES).rule(Match::HttpHost(HostPattern::new("lines.test")), LINES);
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let proxy = listener.local_addr().unwrap();
    runtime.spawn(async move {
        let Ok((socket, _)) = listener.accept().await else {
            return;
        };
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

    let mut client = StdStream::connect(proxy).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    client.set_write_timeout(Some(BOUND)).unwrap();
    client
        .write_all(
            b"GET / HTTP/1.1\r\nHost: lines.test\r\nUpgrade: websocket\r\n\
              Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
              Sec-WebSocket-Version: 13\r\n\r\n",
        )
        .unwrap();
    // Each answer: a text frame, 4 bytes of header (126 form), the line;
    // then `ok` in a frame of its own (2 bytes of header).
    let expected = MESSAGES * (4 + LEN + 2 + 2);
    let mut reader = client.try_clone().unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        let start = Instant::now();
        let (mut got, mut head, mut buf) = (0usize, Vec::new(), vec![0u8; 64 * 1024]);
        let mut in_head = true;
        while got < expected && start.elapsed() < BOUND {
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if in_head {
                        head.extend_from_slice(&buf[..n]);
                        if let Some(at) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                            assert!(head.starts_with(b"HTTP/1.1 101"), "{head:?}");
                            got += head.len() - (at + 4);
                            in_head = false;
                        }
                    } else {
                        got += n;
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => break,
            }
        }
        let _ = done_tx.send(got);
    });
    // The messages: masked (all-zero key) binary frames of one line each.
    let writer = thread::spawn(move || {
        let mut frame = vec![0x82, 0x80 | 126, (LEN >> 8) as u8, LEN as u8, 0, 0, 0, 0];
        frame.extend(std::iter::repeat_n(b'x', LEN));
        for _ in 0..MESSAGES {
            if client.write_all(&frame).is_err() {
                return false;
            }
        }
        true
    });
    let got = done_rx
        .recv_timeout(BOUND + Duration::from_secs(5))
        .unwrap_or(0);
    let sent_all = writer.join().unwrap();
    runtime.shutdown_background();
    assert_eq!(
        (sent_all, got),
        (true, expected),
        "bytes of answers received within {BOUND:?} (the client read all the while)"
    );
}
