//! The WebSocket echo servers (`cleave_examples::websocket`, the
//! code of `ws_echo_server` and `ws_echo_mio_server`) against a client
//! that keeps its connection busy.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

#[path = "support/ws_servers.rs"]
mod ws_servers;

use ws_servers::{mio_server, tokio_server};

#[path = "support/busy.rs"]
mod busy;

use busy::Busy;

const HANDSHAKE: &[u8] =
    b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

/// A masked client frame (mask key 0) with a short payload.
fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() < 126);
    let mut f = vec![0x80 | opcode, 0x80 | payload.len() as u8, 0, 0, 0, 0];
    f.extend_from_slice(payload);
    f
}

/// Reads until `done` says so, the stream ends, or `wait` passes.
fn read_until(socket: &mut TcpStream, wait: Duration, done: impl Fn(&[u8]) -> bool) -> Vec<u8> {
    socket
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let (start, mut got, mut buf) = (Instant::now(), Vec::new(), [0u8; 4096]);
    while start.elapsed() < wait && !done(&got) {
        match socket.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut => {
            }
            Err(_) => break,
        }
    }
    got
}

fn open(addr: SocketAddr) -> TcpStream {
    let mut socket = TcpStream::connect(addr).unwrap();
    socket.write_all(HANDSHAKE).unwrap();
    let got = read_until(&mut socket, Duration::from_secs(5), |got| {
        got.windows(4).any(|w| w == b"\r\n\r\n")
    });
    assert!(
        got.starts_with(b"HTTP/1.1 101"),
        "{:?}",
        String::from_utf8_lossy(&got)
    );
    socket
}

/// One client sends one-byte binary messages as fast as it can (reading
/// the echoes); another client, meanwhile, must still get its handshake
/// and its echo.
#[test]
fn one_busy_client_does_not_starve_the_other_connections() {
    for (name, (addr, server)) in [("tokio", tokio_server()), ("mio", mio_server())] {
        let blob: Vec<u8> = (0..100_000).flat_map(|_| frame(2, b"x")).collect();
        let busy = Busy::start(open(addr), blob);
        thread::sleep(Duration::from_millis(500));
        let start = Instant::now();
        let other = (|| {
            let mut other = TcpStream::connect(addr).ok()?;
            other.write_all(HANDSHAKE).ok()?;
            other.write_all(&frame(1, b"hello")).ok()?;
            Some(read_until(&mut other, Duration::from_secs(5), |got| {
                got.ends_with(b"hello")
            }))
        })();
        let took = start.elapsed();
        busy.stop();
        drop(server);
        let other = other.unwrap_or_default();
        assert!(
            other.ends_with(b"hello"),
            "{name} server: the other client got {:?} in {took:?} while one client was busy",
            String::from_utf8_lossy(&other)
        );
    }
}
