//! Blocking sockets for the tests' clients and backends: listeners on
//! 127.0.0.1, timeouts as a safety net, a reset close, reading to the end
//! or an error, and the pattern every stream carries.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// The blocking sockets' timeouts: a safety net, never what a test asserts.
pub const STUCK: Duration = Duration::from_secs(30);

/// The byte at `offset` of every stream here: a gap or a reordering shows.
pub fn pattern(offset: usize, len: usize) -> Vec<u8> {
    (offset..offset + len).map(|i| (i % 251) as u8).collect()
}

pub fn listen() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let socket = TcpStream::connect(addr).unwrap();
    socket.set_read_timeout(Some(STUCK)).unwrap();
    socket.set_write_timeout(Some(STUCK)).unwrap();
    socket
}

pub fn accept(listener: &TcpListener) -> TcpStream {
    let (socket, _) = listener.accept().unwrap();
    socket.set_read_timeout(Some(STUCK)).unwrap();
    socket.set_write_timeout(Some(STUCK)).unwrap();
    socket
}

/// Closes `socket` with a RST.
pub fn reset(socket: TcpStream) {
    socket2::SockRef::from(&socket)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
}

/// Reads until the end of the stream (`Ok`) or an error, at most `max`
/// bytes.
pub fn read_to_end_or_error(socket: &mut TcpStream, max: usize) -> (Vec<u8>, io::Result<()>) {
    let (mut got, mut buf) = (Vec::new(), vec![0; 64 * 1024]);
    // Each read gets a byte at least, but the end.
    for _ in 0..=max {
        match socket.read(&mut buf) {
            Ok(0) => return (got, Ok(())),
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                assert!(got.len() <= max, "more bytes than were sent: {}", got.len());
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (got, Err(e)),
        }
    }
    panic!("no end after {} bytes", got.len());
}
