//! A tunnel of two `Conn`s on a mio poll loop, over loopback TCP, between
//! a blocking client and a blocking backend in threads: a reset on one
//! side reaches the other as a reset after the bytes that made it, a clean
//! end stays a half-close, and a failed write resets the backend.

use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr};
use std::thread;
use std::time::Duration;

use cleave_mio::{Conn, ConnError, ReadOutcome};
use cleave_proto::route::Router;
use cleave_proto::{Bytes, ConnConfig, Event, Session, SessionConfig, WriteQueueConfig};
use mio::net::TcpStream;
use mio::{Events, Poll, Token};

#[path = "support/net.rs"]
mod net;
use net::{accept, connect, listen, pattern, read_to_end_or_error, reset};

/// A poll that found nothing for this long means the test is stuck.
const STALLED: Duration = Duration::from_secs(20);
/// More polls than any of these streams takes.
const MAX_POLLS: usize = 100_000;

const CLIENT: usize = 0;
const BACKEND: usize = 1;

/// One side of the tunnel: a session whose router has no rules decides on
/// no bytes, so every byte comes out as `Event::Tunnel`.
type Side = Conn<TcpStream, Session<()>>;

/// A side stops reading while the other side's queue holds this much, and
/// resumes when it holds less: one read call adds at most its budget and a
/// read more, so the queues (1 MiB) never refuse a push.
const HIGH_WATER: usize = 256 * 1024;

/// A tunnel of two `Conn`s, indexed by `CLIENT` and `BACKEND`: what one
/// side's session hands out is queued on the other; one side's end of
/// stream closes the other's write half; an I/O error on either side,
/// reading or writing, resets both.
struct Tunnel {
    sides: [Side; 2],
    /// Stopped reading until the other side's queue drains.
    paused: [bool; 2],
    /// Bytes queued each way: [to the backend, to the client].
    forwarded: [usize; 2],
    /// The first I/O error.
    error: Option<io::ErrorKind>,
}

/// What the proxy saw.
#[derive(Debug)]
struct Proxied {
    error: Option<io::ErrorKind>,
    forwarded: [usize; 2],
    /// `SO_LINGER` of the client and the backend socket at the end.
    lingers: [Option<Duration>; 2],
}

impl Tunnel {
    fn new(poll: &Poll, client: std::net::TcpStream, backend: std::net::TcpStream) -> Self {
        let queue = WriteQueueConfig::default()
            .max_bytes(1 << 20)
            .unwrap()
            .max_items(1 << 16)
            .unwrap();
        let config = ConnConfig::default().write_queue(queue);
        let side = |socket: std::net::TcpStream| {
            socket.set_nonblocking(true).unwrap();
            let session = Session::tunnel(Router::new(()), SessionConfig::default());
            Conn::with_config(TcpStream::from_std(socket), session, config)
        };
        let mut tunnel = Self {
            sides: [side(client), side(backend)],
            paused: [false; 2],
            forwarded: [0; 2],
            error: None,
        };
        for i in [CLIENT, BACKEND] {
            // A router with no rules decides on no bytes, at the first
            // poll: `Routed`, then the (empty) tail.
            let mut out = Vec::new();
            tunnel.sides[i].on_timeout(&mut out).unwrap();
            assert!(matches!(out[0], Event::Routed(_)), "{out:?}");
            tunnel.forward(i, &mut out);
            tunnel.sides[i].register(poll.registry(), Token(i)).unwrap();
        }
        tunnel
    }

    fn is_finished(&self) -> bool {
        self.sides.iter().all(Conn::is_finished)
    }

    fn on_event(&mut self, event: &mio::event::Event) {
        let i = event.token().0;
        if self.sides[i].is_finished() {
            return;
        }
        let mut out = Vec::new();
        // Reads side `i` (unless paused) and writes its queue.
        let outcome = self.sides[i].on_event(event, &mut out);
        self.pump(i, outcome, out);
        self.resume();
    }

    /// Hands what side `i` read to the other side, and reads on while the
    /// other side's queue has room.
    fn pump(
        &mut self,
        i: usize,
        mut outcome: Result<ReadOutcome, ConnError>,
        mut out: Vec<Event<(), Bytes>>,
    ) {
        let other = 1 - i;
        loop {
            // What was read before an error too.
            self.forward(i, &mut out);
            let read = match outcome {
                Ok(read) => read,
                Err(ConnError::Io(e)) => return self.fail(e),
                Err(e) => panic!("side {i}: {e}"),
            };
            if read.eof {
                self.sides[other].close();
            }
            match self.sides[other].on_writable() {
                Ok(_) => {}
                Err(ConnError::Io(e)) => return self.fail(e),
                Err(e) => panic!("side {other}: {e}"),
            }
            let full = self.sides[other].conn().queue().len() >= HIGH_WATER;
            self.paused[i] = full;
            self.sides[i].pause_reading(full);
            if full || !read.more {
                return;
            }
            outcome = self.sides[i].on_readable(&mut out);
        }
    }

    /// Resumes a side that stopped reading once the other side's queue has
    /// drained below the mark.
    fn resume(&mut self) {
        for i in [CLIENT, BACKEND] {
            let drained = self.sides[1 - i].conn().queue().len() < HIGH_WATER;
            if self.paused[i] && drained && !self.sides[i].is_finished() {
                self.paused[i] = false;
                self.sides[i].pause_reading(false);
                // Bytes may be waiting, and no new event will say so.
                let mut out = Vec::new();
                let outcome = self.sides[i].on_readable(&mut out);
                self.pump(i, outcome, out);
            }
        }
    }

    /// Queues what side `from` handed out on the other side.
    fn forward(&mut self, from: usize, out: &mut Vec<Event<(), Bytes>>) {
        for event in out.drain(..) {
            let bytes = match event {
                Event::Tunnel(bytes) | Event::Closed(bytes) => bytes,
                Event::Routed(_) => continue,
                other => panic!("side {from}: {other:?}"),
            };
            if !bytes.is_empty() {
                self.forwarded[from] += bytes.len();
                let pushed = self.sides[1 - from].conn_mut().push(bytes);
                assert!(pushed.is_ok(), "the queue holds more than a test sends");
            }
        }
    }

    /// A side failed: what is queued goes to the kernel as far as it takes
    /// it now, then both sides are reset.
    fn fail(&mut self, error: io::Error) {
        self.error.get_or_insert(error.kind());
        for side in &mut self.sides {
            let _ = side.on_writable();
            side.reset().unwrap();
            assert!(side.is_finished() && side.interest().is_none());
        }
    }

    fn finish(mut self, poll: &Poll) -> Proxied {
        let mut lingers = [None; 2];
        for (i, side) in self.sides.iter_mut().enumerate() {
            side.deregister(poll.registry()).unwrap();
            lingers[i] = socket2::SockRef::from(side.get_ref()).linger().unwrap();
        }
        // Dropped, not shut down: a reset side sends its RST now.
        drop(self.sides);
        Proxied {
            error: self.error,
            forwarded: self.forwarded,
            lingers,
        }
    }
}

/// The proxy, on this thread: accepts one client, connects to the backend,
/// tunnels until both sides are finished, then drops both.
fn proxy(listener: std::net::TcpListener, backend: SocketAddr) -> Proxied {
    let (client, _) = listener.accept().unwrap();
    let backend = std::net::TcpStream::connect(backend).unwrap();
    let mut poll = Poll::new().unwrap();
    let mut tunnel = Tunnel::new(&poll, client, backend);
    let mut events = Events::with_capacity(64);
    for _ in 0..MAX_POLLS {
        if tunnel.is_finished() {
            return tunnel.finish(&poll);
        }
        poll.poll(&mut events, Some(STALLED)).unwrap();
        assert!(!events.is_empty(), "the proxy stalled");
        for event in &events {
            tunnel.on_event(event);
        }
        for (i, side) in tunnel.sides.iter_mut().enumerate() {
            side.update_registration(poll.registry(), Token(i)).unwrap();
        }
    }
    panic!("no end after {MAX_POLLS} polls");
}

#[test]
fn a_backend_reset_reaches_the_client_as_a_reset_after_its_bytes() {
    const N: usize = 1000;
    let (listener, addr) = listen();
    let (backends, backend_addr) = listen();
    let backend = thread::spawn(move || {
        let mut socket = accept(&backends);
        socket.write_all(&pattern(0, N)).unwrap();
        reset(socket);
    });
    let client = thread::spawn(move || read_to_end_or_error(&mut connect(addr), N));

    let proxied = proxy(listener, backend_addr);
    backend.join().unwrap();
    let (got, end) = client.join().unwrap();
    assert!(
        got == pattern(0, N),
        "{} bytes, not the {N} sent",
        got.len()
    );
    let kind = end.expect_err("a clean end of stream after a reset").kind();
    assert_eq!(kind, io::ErrorKind::ConnectionReset);
    assert_eq!(proxied.error, Some(io::ErrorKind::ConnectionReset));
    assert_eq!(proxied.forwarded, [0, N]);
    assert_eq!(proxied.lingers, [Some(Duration::ZERO); 2]);
}

#[test]
fn a_client_reset_mid_upload_reaches_the_backend_as_a_reset() {
    const N: usize = 100_000;
    let (listener, addr) = listen();
    let (backends, backend_addr) = listen();
    let backend = thread::spawn(move || read_to_end_or_error(&mut accept(&backends), N));
    let client = thread::spawn(move || {
        let mut socket = connect(addr);
        socket.write_all(&pattern(0, N)).unwrap();
        reset(socket); // what the kernel still holds is dropped
    });

    let proxied = proxy(listener, backend_addr);
    client.join().unwrap();
    // All that arrived, in order, then a reset: never a clean end.
    let (got, end) = backend.join().unwrap();
    assert!(got == pattern(0, got.len()), "bytes lost or reordered");
    let kind = end.expect_err("a clean end of stream after a reset").kind();
    assert_eq!(
        kind,
        io::ErrorKind::ConnectionReset,
        "after {} bytes",
        got.len()
    );
    assert_eq!(proxied.error, Some(io::ErrorKind::ConnectionReset));
    assert!(got.len() <= proxied.forwarded[CLIENT] && proxied.forwarded[CLIENT] <= N);
    assert_eq!(proxied.lingers, [Some(Duration::ZERO); 2]);
}

#[test]
fn a_clean_end_stays_a_half_close_both_ways() {
    const M: usize = 100_000;
    const K: usize = 50_000;
    let (listener, addr) = listen();
    let (backends, backend_addr) = listen();
    let backend = thread::spawn(move || {
        let mut socket = accept(&backends);
        let (upload, end) = read_to_end_or_error(&mut socket, M);
        end.expect("a clean end of the upload");
        // Only after the client's end: the answer crosses the half-close.
        socket.write_all(&pattern(7, K)).unwrap();
        upload // and the socket is closed
    });
    let client = thread::spawn(move || {
        let mut socket = connect(addr);
        socket.write_all(&pattern(0, M)).unwrap();
        socket.shutdown(Shutdown::Write).unwrap(); // FIN; the answer still comes
        read_to_end_or_error(&mut socket, K)
    });

    let proxied = proxy(listener, backend_addr);
    let upload = backend.join().unwrap();
    let (answer, end) = client.join().unwrap();
    assert!(upload == pattern(0, M), "the upload");
    end.expect("a clean end of the answer");
    assert!(answer == pattern(7, K), "the answer");
    assert_eq!(proxied.error, None);
    assert_eq!(proxied.forwarded, [M, K]);
    assert_eq!(proxied.lingers, [None; 2], "a clean end is no reset");
}

#[test]
fn a_failed_write_to_the_client_resets_the_backend() {
    const LIMIT: usize = 64 << 20;
    let (listener, addr) = listen();
    let (backends, backend_addr) = listen();
    // The client ends its side and goes away before anything flows: the
    // proxy reads its end (and half-closes the backend), then a write to
    // it fails once its kernel has answered with a reset.
    drop(connect(addr));
    let backend = thread::spawn(move || {
        let mut socket = accept(&backends);
        let chunk = pattern(0, 16 * 1024);
        let mut sent = 0;
        loop {
            match socket.write(&chunk) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return e,
            }
            assert!(
                sent < LIMIT,
                "the backend streams on after the client is gone"
            );
        }
    });

    let proxied = proxy(listener, backend_addr);
    let error = backend.join().unwrap();
    // The backend had read the forwarded end before the reset: its kernel
    // calls it a broken pipe then, a reset otherwise.
    let kind = error.kind();
    assert!(
        matches!(
            kind,
            io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
        ),
        "{error}"
    );
    let kind = proxied.error.expect("a failed write is an error");
    assert!(
        matches!(
            kind,
            io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
        ),
        "{kind:?}"
    );
    // The error the backend sees cannot tell a reset from a close after a
    // half-close (both end in a RST on the wire): that the proxy set both
    // sockets to reset on close is what says it.
    assert_eq!(proxied.lingers, [Some(Duration::ZERO); 2]);
}

#[test]
fn reset_finishes_the_connection_and_its_drop_sends_a_rst() {
    let (listener, addr) = listen();
    let mut client = connect(addr);
    let (server, _) = listener.accept().unwrap();
    server.set_nonblocking(true).unwrap();
    let session = Session::tunnel(Router::new(()), SessionConfig::default());
    let mut conn: Side = Conn::new(TcpStream::from_std(server), session);
    conn.conn_mut()
        .push(Bytes::from_static(b"never written"))
        .unwrap();
    assert!(conn.interest().is_some());

    conn.reset().unwrap();
    assert!(conn.is_finished() && conn.is_read_closed());
    assert_eq!(conn.interest(), None);
    assert!(conn.conn().queue().is_flushed(), "the queue is aborted");
    assert!(conn.conn_mut().push(Bytes::from_static(b"late")).is_err());
    let linger = socket2::SockRef::from(conn.get_ref()).linger().unwrap();
    assert_eq!(linger, Some(Duration::ZERO));

    drop(conn);
    let (got, end) = read_to_end_or_error(&mut client, 0);
    assert!(got.is_empty());
    assert_eq!(end.unwrap_err().kind(), io::ErrorKind::ConnectionReset);
}

#[cfg(unix)]
#[test]
fn a_socket_with_no_reset_says_so_and_still_finishes() {
    let (ours, _theirs) = mio::net::UnixStream::pair().unwrap();
    let session = Session::tunnel(Router::new(()), SessionConfig::default());
    let mut conn = Conn::new(ours, session);
    let error = conn.reset().unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::Unsupported);
    assert!(conn.is_finished());
    assert_eq!(conn.interest(), None);
}
