//! A half-close on a socket that is still connecting: the FIN waits for
//! the connect (a shutdown in SYN_SENT would abort it).
//!
//! This workspace's own proxies (tests/support/proxy.rs, benches/mio_proxy.rs)
//! hand a just-made `mio::net::TcpStream::connect` socket to a `Conn`
//! ("a connecting socket: writes wait (WouldBlock) until it is
//! connected") and close that side when the client's stream ends. A
//! client that sends nothing and half-closes at once (a client of a
//! server-speaks-first protocol, routed by the inspect delay) makes that
//! `close()` come while the backend's handshake is still under way.
//!
//! The backend listener's accept queue is kept full (listen(0) and one
//! connection not accepted yet), so the proxy's SYN is dropped and the
//! connect stays in SYN_SENT until the kernel retries (after ~1 s); the
//! filler is then accepted so the retry succeeds.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::thread;
use std::time::{Duration, Instant};

use cleave_mio::{Conn, Pipes, PipesConfig, Side, Tunnel};
use cleave_proto::{Bytes, Raw};
use mio::{Events, Poll, Token};

#[path = "support/backlog.rs"]
mod backlog;
use backlog::{accept_after_filler, full_backend, BOUND};

/// `Conn::close` on a connecting socket with nothing queued: the backend
/// must see a connection whose stream ends (a FIN), and its answer must
/// still come back (a clean end is a half-close).
#[test]
fn close_while_connecting_is_a_half_close_not_an_aborted_connect() {
    let (listener, addr, _filler) = full_backend();
    let socket = mio::net::TcpStream::connect(addr).unwrap();
    let mut conn = Conn::new(socket, Raw::new());
    let mut poll = Poll::new().unwrap();
    conn.register(poll.registry(), Token(0)).unwrap();
    // The client's end of stream reaches this side: close it.
    conn.close();
    let _ = conn.on_writable();
    conn.update_registration(poll.registry(), Token(0)).unwrap();

    let backend = thread::spawn(move || {
        let mut socket = accept_after_filler(&listener)?;
        let mut upload = Vec::new();
        let end = socket.read_to_end(&mut upload);
        let _ = socket.write_all(b"220 banner\n");
        Some((upload, end.is_ok()))
    });

    let (mut events, mut got, mut error) = (Events::with_capacity(8), Vec::new(), None);
    let start = Instant::now();
    while !conn.is_finished() && start.elapsed() < BOUND + BOUND {
        poll.poll(&mut events, Some(Duration::from_millis(50)))
            .unwrap();
        for event in &events {
            let mut out = Vec::new();
            match conn.on_event(event, &mut out) {
                Ok(_) => {}
                Err(e) => {
                    error = Some(e.to_string());
                    let _ = conn.reset();
                }
            }
            got.extend(out.iter().flat_map(|b: &Bytes| b.iter().copied()));
        }
        let _ = conn.on_writable();
        conn.update_registration(poll.registry(), Token(0)).unwrap();
    }
    let _ = conn.deregister(poll.registry());
    drop(conn);
    let backend = backend.join().unwrap();
    assert_eq!(
        backend,
        Some((Vec::new(), true)),
        "the backend never got the connection (the half-close aborted the connect)"
    );
    assert_eq!(
        (String::from_utf8_lossy(&got), error),
        ("220 banner\n".into(), None)
    );
}

/// The same through `Tunnel`: the client sends nothing and half-closes;
/// the backend's banner must reach it, then a clean end.
#[test]
fn tunnel_half_close_before_the_backend_connected_keeps_the_backend() {
    let (backend_listener, backend_addr, _filler) = full_backend();
    let clients = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client_addr = clients.local_addr().unwrap();
    let client = thread::spawn(move || {
        let mut socket = std::net::TcpStream::connect(client_addr).unwrap();
        socket.set_read_timeout(Some(BOUND + BOUND)).unwrap();
        socket.shutdown(Shutdown::Write).unwrap(); // nothing to say
        let mut answer = Vec::new();
        let end = socket.read_to_end(&mut answer).map_err(|e| e.kind());
        (answer, end)
    });
    let (client_socket, _) = clients.accept().unwrap();
    client_socket.set_nonblocking(true).unwrap();
    thread::sleep(Duration::from_millis(50)); // the client's FIN is in
    let backend_socket = mio::net::TcpStream::connect(backend_addr).unwrap();
    let backend = thread::spawn(move || {
        let mut socket = accept_after_filler(&backend_listener)?;
        let mut upload = Vec::new();
        let end = socket.read_to_end(&mut upload);
        let _ = socket.write_all(b"220 banner\n");
        Some((upload, end.is_ok()))
    });

    let pipes = Pipes::new(PipesConfig::default().max_open(Some(0)));
    let mut tunnel = Tunnel::new(
        mio::net::TcpStream::from_std(client_socket),
        backend_socket,
        Bytes::new(),
        &pipes,
    );
    let mut poll = Poll::new().unwrap();
    tunnel
        .register(poll.registry(), Token(0), Token(1))
        .unwrap();
    let mut more = tunnel.on_ready();
    let mut events = Events::with_capacity(8);
    let start = Instant::now();
    while !tunnel.is_finished() && start.elapsed() < BOUND + BOUND {
        while more {
            more = tunnel.on_ready();
        }
        poll.poll(&mut events, Some(Duration::from_millis(50)))
            .unwrap();
        for event in &events {
            let side = if event.token() == Token(0) {
                Side::Client
            } else {
                Side::Backend
            };
            more |= tunnel.on_event(side, event);
        }
    }
    let result = tunnel
        .result()
        .map(|r| r.as_ref().map_err(|e| e.to_string()).cloned());
    tunnel.deregister(poll.registry()).unwrap();
    drop(tunnel);
    let backend = backend.join().unwrap();
    let (answer, end) = client.join().unwrap();
    assert_eq!(
        (
            backend,
            String::from_utf8_lossy(&answer).into_owned(),
            end,
            result
        ),
        (
            Some((Vec::new(), true)),
            "220 banner\n".to_owned(),
            Ok(11),
            Some(Ok((0, 11)))
        ),
        "(what the backend got, what the client got, the client's end, the tunnel's result)"
    );
}

/// A backend connect that fails fails the tunnel with its error (the
/// writable or error event that ends the connect asks the socket), and
/// the client is reset, not ended cleanly.
#[test]
fn tunnel_with_a_refused_backend_connect_fails_with_the_refusal() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let backend_addr = closed.local_addr().unwrap();
    drop(closed);
    let clients = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client_addr = clients.local_addr().unwrap();
    let client = thread::spawn(move || {
        let mut socket = std::net::TcpStream::connect(client_addr).unwrap();
        socket.set_read_timeout(Some(BOUND)).unwrap();
        socket.shutdown(Shutdown::Write).unwrap(); // nothing to say
        socket.read_to_end(&mut Vec::new()).map_err(|e| e.kind())
    });
    let (client_socket, _) = clients.accept().unwrap();
    client_socket.set_nonblocking(true).unwrap();
    thread::sleep(Duration::from_millis(50)); // the client's FIN is in

    let pipes = Pipes::new(PipesConfig::default().max_open(Some(0)));
    let mut tunnel = Tunnel::new(
        mio::net::TcpStream::from_std(client_socket),
        mio::net::TcpStream::connect(backend_addr).unwrap(),
        Bytes::new(),
        &pipes,
    );
    let mut poll = Poll::new().unwrap();
    tunnel
        .register(poll.registry(), Token(0), Token(1))
        .unwrap();
    let mut more = tunnel.on_ready();
    let mut events = Events::with_capacity(8);
    let start = Instant::now();
    while !tunnel.is_finished() && start.elapsed() < BOUND {
        while more {
            more = tunnel.on_ready();
        }
        poll.poll(&mut events, Some(Duration::from_millis(50)))
            .unwrap();
        for event in &events {
            let side = if event.token() == Token(0) {
                Side::Client
            } else {
                Side::Backend
            };
            more |= tunnel.on_event(side, event);
        }
    }
    let result = tunnel
        .result()
        .map(|r| r.as_ref().map_err(io::Error::kind).copied());
    tunnel.deregister(poll.registry()).unwrap();
    drop(tunnel);
    assert_eq!(
        (result, client.join().unwrap()),
        (
            Some(Err(io::ErrorKind::ConnectionRefused)),
            Err(io::ErrorKind::ConnectionReset)
        )
    );
}

/// A socket closed both ways has no peer either, as a connecting one: its
/// read (the end of the stream) says that it is not connecting, so a
/// `close()` ends the connection instead of waiting for a connect.
#[test]
fn a_socket_closed_both_ways_is_not_taken_for_a_connecting_one() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut ours = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (mut theirs, _) = listener.accept().unwrap();
    ours.shutdown(Shutdown::Write).unwrap();
    assert_eq!(theirs.read(&mut [0; 1]).unwrap(), 0);
    drop(theirs);
    assert_eq!(ours.read(&mut [0; 1]).unwrap(), 0);
    ours.set_nonblocking(true).unwrap();
    let ours = mio::net::TcpStream::from_std(ours);
    assert!(cleave_mio::Socket::is_connecting(&ours), "no peer");

    let mut poll = Poll::new().unwrap();
    let mut events = Events::with_capacity(8);
    let mut conn = Conn::new(ours, Raw::new());
    conn.register(poll.registry(), Token(0)).unwrap();
    let (mut eof, mut errors) = (false, Vec::new());
    let start = Instant::now();
    while !conn.is_finished() && start.elapsed() < BOUND {
        poll.poll(&mut events, Some(Duration::from_millis(50)))
            .unwrap();
        for event in &events {
            match conn.on_event(event, &mut Vec::new()) {
                Ok(outcome) if outcome.eof => {
                    eof = true;
                    conn.close();
                }
                Ok(_) => {}
                Err(e) => errors.push(e.to_string()),
            }
            if let Err(e) = conn.on_writable() {
                errors.push(e.to_string());
            }
            conn.update_registration(poll.registry(), Token(0)).unwrap();
        }
    }
    assert_eq!(
        (conn.is_finished(), eof, errors),
        (true, true, Vec::<String>::new())
    );
}
