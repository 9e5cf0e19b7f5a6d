//! `Conns` reuses a removed connection's token, and an event still queued
//! for the old connection then reaches the new one. A stale writable
//! event does not tell a new socket that is still connecting that its
//! connect is over: the socket is asked, so a `close()` right after waits
//! for the connect instead of shutting the socket down in SYN_SENT (which
//! would abort it).
//!
//! The same holds for a `Tunnel`, whose tokens are the loop's to choose:
//! a loop that keeps connections and tunnels in one slab of its own hands
//! a freed key to a tunnel's backend, still connecting, as readily.

use std::io::{Read, Write};
use std::net::Shutdown;
use std::thread;
use std::time::{Duration, Instant};

use cleave_mio::{Conn, Conns, Pipes, PipesConfig, Side, Tunnel};
use cleave_proto::{Bytes, Raw};
use mio::{Events, Poll, Token};

#[path = "support/backlog.rs"]
mod backlog;
use backlog::{accept_after_filler, full_backend, BOUND};

#[test]
fn a_stale_writable_event_on_a_reused_token_does_not_abort_a_connecting_socket() {
    let mut poll = Poll::new().unwrap();
    let mut events = Events::with_capacity(16);
    let mut conns: Conns<mio::net::TcpStream, Raw> = Conns::starting_at(Token(10));

    // The old connection: connected, with an answer queued (so it is
    // registered for WRITABLE and the poll reports it writable).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (old, _) = listener.accept().unwrap();
    old.set_nonblocking(true).unwrap();
    let mut old = Conn::new(mio::net::TcpStream::from_std(old), Raw::new());
    old.conn_mut().push(Bytes::from_static(b"bye\n")).unwrap();
    let token = conns
        .insert(poll.registry(), old)
        .map_err(|(e, _)| e)
        .unwrap();
    let start = Instant::now();
    while events.iter().all(|e| e.token() != token) && start.elapsed() < BOUND {
        poll.poll(&mut events, Some(Duration::from_millis(50)))
            .unwrap();
    }
    assert!(
        events.iter().any(|e| e.token() == token && e.is_writable()),
        "the old connection's writable event"
    );

    // Before that event is handled (another event of the same batch ended
    // the old connection, and a backend connect took its token)...
    let old = conns.remove(poll.registry(), token).unwrap();
    drop(old);
    drop(peer);
    let (backend_listener, backend_addr, _filler) = full_backend();
    let backend = mio::net::TcpStream::connect(backend_addr).unwrap();
    let new_token = conns
        .insert(poll.registry(), Conn::new(backend, Raw::new()))
        .map_err(|(e, _)| e)
        .unwrap();
    assert_eq!(new_token, token, "the token is reused");

    // ...the stale event reaches the new, still connecting, connection.
    for event in events.iter().filter(|e| e.token() == token) {
        let mut out = Vec::new();
        let _ = conns.get_mut(token).unwrap().on_event(event, &mut out);
    }

    let backend_thread = thread::spawn(move || {
        let mut socket = accept_after_filler(&backend_listener)?;
        let mut upload = Vec::new();
        let end = socket.read_to_end(&mut upload);
        let _ = socket.write_all(b"220 banner\n");
        Some((upload, end.is_ok()))
    });

    // The client has nothing to say and half-closes: close the backend side.
    let conn = conns.get_mut(token).unwrap();
    conn.close();
    let _ = conn.on_writable();
    conns.settle(poll.registry(), token).unwrap();

    let (mut got, mut error) = (Vec::new(), None);
    let start = Instant::now();
    while conns.contains(token) && start.elapsed() < BOUND + BOUND {
        poll.poll(&mut events, Some(Duration::from_millis(50)))
            .unwrap();
        for event in &events {
            let Some(conn) = conns.get_mut(event.token()) else {
                continue;
            };
            let mut out = Vec::new();
            if let Err(e) = conn.on_event(event, &mut out) {
                error = Some(e.to_string());
                let _ = conn.reset();
            }
            got.extend(out.iter().flat_map(|b: &Bytes| b.iter().copied()));
            let _ = conn.on_writable();
        }
        if let Some(conn) = conns.get_mut(token) {
            let _ = conn.on_writable();
        }
        conns.settle(poll.registry(), token).unwrap();
    }
    drop(conns);
    let backend = backend_thread.join().unwrap();
    assert_eq!(
        backend,
        Some((Vec::new(), true)),
        "the backend never got the connection: the stale event let the half-close abort the connect \
         (the new connection's error: {error:?})"
    );
    assert_eq!(
        (String::from_utf8_lossy(&got), error),
        ("220 banner\n".into(), None)
    );
}

/// The other way a connect ends: it fails. On a connection that does not
/// read (paused), no read takes the socket's error, so the writable (or
/// error) event that says the connect is over is asked about it, and the
/// refusal comes out of `on_event` as the connection's error.
#[test]
fn a_refused_connect_is_the_connections_error_even_when_it_does_not_read() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let mut poll = Poll::new().unwrap();
    let mut events = Events::with_capacity(16);
    let mut conn = Conn::new(mio::net::TcpStream::connect(addr).unwrap(), Raw::new());
    conn.pause_reading(true);
    conn.close();
    let _ = conn.on_writable();
    conn.register(poll.registry(), Token(0)).unwrap();

    let mut error = None;
    let start = Instant::now();
    while error.is_none() && start.elapsed() < BOUND {
        poll.poll(&mut events, Some(Duration::from_millis(50)))
            .unwrap();
        for event in &events {
            if let Err(e) = conn.on_event(event, &mut Vec::new()) {
                error = Some(e);
            }
        }
    }
    assert!(
        matches!(&error, Some(cleave_mio::ConnError::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused),
        "{error:?}"
    );
}

/// The same through `Tunnel`: the client sent nothing and half-closed, so
/// the tunnel's FIN to its backend waits for the backend's connect. A
/// removed connection's writable event, delivered for the backend under
/// the token it reused, must not let it go.
#[test]
fn a_stale_writable_event_on_a_reused_token_does_not_abort_a_tunnels_connect() {
    let mut poll = Poll::new().unwrap();
    let mut events = Events::with_capacity(16);

    // The old connection, under the token the tunnel's backend gets next:
    // connected, with an answer queued (so the poll reports it writable).
    let token = Token(11);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (old, _) = listener.accept().unwrap();
    old.set_nonblocking(true).unwrap();
    let mut old = Conn::new(mio::net::TcpStream::from_std(old), Raw::new());
    old.conn_mut().push(Bytes::from_static(b"bye\n")).unwrap();
    old.register(poll.registry(), token).unwrap();
    let start = Instant::now();
    while events.iter().all(|e| e.token() != token) && start.elapsed() < BOUND {
        poll.poll(&mut events, Some(Duration::from_millis(50)))
            .unwrap();
    }
    assert!(
        events.iter().any(|e| e.token() == token && e.is_writable()),
        "the old connection's writable event"
    );

    // Before that event is handled, the old connection ends, and a client
    // routed to a backend gets a tunnel whose backend takes its token.
    old.deregister(poll.registry()).unwrap();
    drop(old);
    drop(peer);
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
    let pipes = Pipes::new(PipesConfig::default().max_open(Some(0)));
    let mut tunnel = Tunnel::new(
        mio::net::TcpStream::from_std(client_socket),
        backend_socket,
        Bytes::new(),
        &pipes,
    );
    let client_token = Token(10);
    tunnel
        .register(poll.registry(), client_token, token)
        .unwrap();
    // The client's end is read; the FIN waits for the backend's connect.
    let mut more = tunnel.on_ready();

    // The stale event reaches the tunnel's backend, still connecting.
    for event in events.iter().filter(|e| e.token() == token) {
        more |= tunnel.on_event(Side::Backend, event);
    }

    let backend = thread::spawn(move || {
        let mut socket = accept_after_filler(&backend_listener)?;
        let mut upload = Vec::new();
        let end = socket.read_to_end(&mut upload);
        let _ = socket.write_all(b"220 banner\n");
        Some((upload, end.is_ok()))
    });
    let start = Instant::now();
    while !tunnel.is_finished() && start.elapsed() < BOUND + BOUND {
        while more {
            more = tunnel.on_ready();
        }
        poll.poll(&mut events, Some(Duration::from_millis(50)))
            .unwrap();
        for event in &events {
            let side = if event.token() == client_token {
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
        "(what the backend got, what the client got, the client's end, the tunnel's result): \
         a backend that never got the connection means the stale event let the FIN abort the connect"
    );
}
