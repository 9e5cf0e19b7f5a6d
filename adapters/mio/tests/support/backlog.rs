//! A backend whose connect stays in SYN_SENT for a while: its listener's
//! accept queue is kept full (listen(0) and one connection not accepted
//! yet), so a new connect's SYN is dropped until the kernel retries
//! (after ~1 s); the filler is then accepted so the retry succeeds.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

/// How long a test waits for the connection it expects.
pub const BOUND: Duration = Duration::from_secs(6);

/// A backend listener whose accept queue is full: the next connect's SYN
/// is dropped (and retried by the kernel ~1 s later). Returns the
/// listener, its address and the filler connection.
pub fn full_backend() -> (std::net::TcpListener, SocketAddr, std::net::TcpStream) {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    socket.bind(&addr.into()).unwrap();
    socket.listen(0).unwrap();
    let listener: std::net::TcpListener = socket.into();
    let addr = listener.local_addr().unwrap();
    let filler = std::net::TcpStream::connect(addr).unwrap();
    thread::sleep(Duration::from_millis(50));
    (listener, addr, filler)
}

/// Accepts the filler, then waits (at most `BOUND`) for the next
/// connection: the proxy's.
pub fn accept_after_filler(listener: &std::net::TcpListener) -> Option<std::net::TcpStream> {
    let (filler, _) = listener.accept().unwrap();
    drop(filler);
    listener.set_nonblocking(true).unwrap();
    let start = Instant::now();
    while start.elapsed() < BOUND {
        match listener.accept() {
            Ok((socket, _)) => {
                socket.set_nonblocking(false).unwrap();
                socket.set_read_timeout(Some(BOUND)).unwrap();
                return Some(socket);
            }
            Err(_) => thread::sleep(Duration::from_millis(20)),
        }
    }
    None
}
