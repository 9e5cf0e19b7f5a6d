//! What `recv` says after an I/O error: the errors it returned are final
//! (a failure to set the read timeout for a deadline included), and a
//! failure of the application's own writes does not hide what the peer
//! already sent.

use std::cell::Cell;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use cleave_proto::{Bytes, ConnConfig, Framed, Lines, Timeouts};
use cleave_std::{ConnError, Socket, Stream};

/// A TCP stream whose first `set_read_timeout` fails (as a wrapper's
/// might: a TLS stream over a socket that was closed under it, say).
struct Flaky {
    inner: TcpStream,
    fail_once: Cell<bool>,
}

impl Read for Flaky {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf)
    }
}

impl Write for Flaky {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl Socket for Flaky {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        if self.fail_once.replace(false) {
            return Err(io::Error::other("setsockopt failed"));
        }
        Socket::set_read_timeout(&self.inner, timeout)
    }
    fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Socket::read_timeout(&self.inner)
    }
    fn shutdown_write(&self) -> io::Result<()> {
        Socket::shutdown_write(&self.inner)
    }
    fn writer(&mut self) -> Option<&mut dyn Write> {
        Some(self)
    }
}

/// `ConnError::Io` from `recv` is final, also when it came from setting
/// the read timeout for the connection's deadline.
#[test]
fn an_io_error_from_arming_the_read_timeout_is_final() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    let socket = Flaky {
        inner: server,
        fail_once: Cell::new(true),
    };
    // A deadline, so that recv arms the read timeout.
    let config = ConnConfig::default().timeouts(Timeouts::NONE.idle(Some(Duration::from_secs(10))));
    let mut stream = Stream::with_config(socket, Framed::new(Lines::new()), config);

    let first = stream.recv();
    println!("first recv: {first:?}");
    assert!(matches!(first, Err(ConnError::Io(_))), "{first:?}");

    client.write_all(b"one\n").unwrap();
    let second = stream.recv();
    println!("second recv: {second:?}");
    assert!(
        matches!(second, Err(ConnError::Io(_))),
        "ConnError::Io is documented final, yet recv went on: {second:?}"
    );
}

/// The peer answers early (an upload too large), then closes without
/// reading, which is a reset: the application's `send` fails, and its next
/// `recv` still reads the answer the peer sent before the reset.
#[test]
fn a_failed_send_does_not_hide_the_peers_answer_from_recv() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    client
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let (mut server, _) = listener.accept().unwrap();
    // The peer answers early ("an upload too large"), then closes
    // without reading: its close is a reset.
    let peer = thread::spawn(move || {
        let mut some = [0u8; 16];
        let _ = server.read(&mut some);
        server.write_all(b"too large\n").unwrap();
        thread::sleep(Duration::from_millis(100));
        drop(server);
    });
    let mut stream = Stream::new(client, Framed::new(Lines::new()));
    let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
    let mut failed = None;
    for _ in 0..1000 {
        if let Err(e) = stream.send(chunk.clone()).and_then(|_| stream.flush()) {
            failed = Some(e);
            break;
        }
    }
    peer.join().unwrap();
    println!("send failed with {failed:?}");
    assert!(matches!(failed, Some(ConnError::Io(_))));
    // The answer is still in the kernel's receive queue.
    let mut peek = [0u8; 16];
    let peeked = stream.get_ref().peek(&mut peek);
    println!("peek: {peeked:?}");
    let got = stream.recv();
    println!("recv after the failed send: {got:?}");
    let _ = stream.get_ref().shutdown(Shutdown::Both);
    assert!(
        matches!(&got, Ok(Some(line)) if &line[..] == b"too large"),
        "the reader did not fail, yet recv says: {got:?}"
    );
}
