//! Stalls a connection must not have under edge-triggered readiness: a
//! protocol that waited for room in the queue goes on once a write made
//! it, a protocol switched to hands out the bytes already buffered, and a
//! peer that never reads is ended by the idle timeout. Each wait for what
//! must happen is bounded (`BOUND`), so a stall fails instead of hanging.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread;
use std::time::{Duration, Instant};

use cleave_mio::Conn;
use cleave_proto::websocket::{WebSocket, WsConfig, WsEvent};
use cleave_proto::{Bytes, Framed, Lines, Protocol, Raw};
use mio::net::TcpStream;
use mio::{Events, Poll, Token};

/// How long a test waits for what must happen before calling it a stall.
const BOUND: Duration = Duration::from_secs(3);

fn pair() -> (TcpStream, std::net::TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    server.set_nonblocking(true).unwrap();
    client.set_read_timeout(Some(BOUND)).unwrap();
    client.set_write_timeout(Some(BOUND)).unwrap();
    (TcpStream::from_std(server), client)
}

/// The documented drive loop (the crate docs), for at most `BOUND`,
/// stopping early once `done(events so far)`: events, the read budget's
/// `more`, a write after handling, the registration, and `on_timeout`
/// once `deadline()` passed.
fn drive<P: Protocol>(
    conn: &mut Conn<TcpStream, P>,
    poll: &mut Poll,
    all: &mut Vec<P::Event>,
    done: impl Fn(&[P::Event]) -> bool,
) {
    let mut events = Events::with_capacity(16);
    let start = Instant::now();
    let mut out = Vec::new();
    while start.elapsed() < BOUND && !done(all) && !conn.is_finished() {
        let wait = conn.deadline().map_or(Duration::from_millis(50), |at| {
            at.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(50))
        });
        poll.poll(&mut events, Some(wait)).unwrap();
        for event in &events {
            let mut outcome = conn.on_event(event, &mut out).unwrap();
            loop {
                all.append(&mut out);
                if !outcome.more {
                    break;
                }
                conn.on_writable().unwrap();
                outcome = conn.on_readable(&mut out).unwrap();
            }
            conn.on_writable().unwrap();
            conn.update_registration(poll.registry(), Token(1)).unwrap();
        }
        if conn.deadline().is_some_and(|at| at <= Instant::now()) {
            conn.on_timeout(&mut out).unwrap();
            all.append(&mut out);
            conn.update_registration(poll.registry(), Token(1)).unwrap();
        }
    }
}

/// A masked client frame with an all-zero key (payload unchanged).
fn client_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    assert!(payload.len() < 126);
    let mut f = vec![0x80 | opcode, 0x80 | payload.len() as u8, 0, 0, 0, 0];
    f.extend_from_slice(payload);
    f
}

/// A WebSocket client sends a burst of 100 pings and then a text
/// message, in one write, and reads its 100 pongs. The urgent lane holds
/// 64 replies, so the 65th pong waits for room and the protocol reads
/// nothing more until it is queued. Once a write made that room, the
/// connection asks the protocol again (at once in `on_event`, or through
/// `deadline()` and `on_timeout` after a lone `on_writable`), though no
/// readable edge will come: the client only waits.
#[test]
fn owed_pong_and_following_message_are_not_stalled_after_the_queue_drains() {
    const PINGS: usize = 100;
    let (server, mut client) = pair();
    let mut burst = Vec::new();
    for _ in 0..PINGS {
        burst.extend_from_slice(&client_frame(0x9, b""));
    }
    burst.extend_from_slice(&client_frame(0x1, b"hello"));
    let peer = thread::spawn(move || {
        client.write_all(&burst).unwrap();
        // Read the pongs (2 bytes each: 0x8A 0x00) until all came, or the
        // bound runs out.
        let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
        while got.len() < 2 * PINGS {
            match client.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(_) => break, // timed out: stalled
            }
        }
        got.chunks(2).filter(|c| c == &[0x8A, 0x00]).count()
    });

    let mut conn = Conn::new(server, WebSocket::server(WsConfig::default()));
    let mut poll = Poll::new().unwrap();
    conn.register(poll.registry(), Token(1)).unwrap();
    let mut all = Vec::new();
    drive(&mut conn, &mut poll, &mut all, |all| !all.is_empty());
    let pongs = peer.join().unwrap();
    let texts: Vec<_> = all
        .iter()
        .filter(|e| matches!(e, WsEvent::Text(t) if &t[..] == b"hello"))
        .collect();
    assert_eq!(
        (pongs, texts.len()),
        (PINGS, 1),
        "pongs received by the client, text messages handed out (within {BOUND:?})"
    );
}

/// A line protocol switched to `Raw` after an `UPGRADE` line, as
/// `Conn::switch` documents: `on_readable` once after it hands out the
/// bytes that came with the line, though the socket is empty and no new
/// event will come.
#[test]
fn switch_then_on_readable_hands_out_the_buffered_tail() {
    let (server, mut client) = pair();
    client.write_all(b"UPGRADE\nraw tail").unwrap();
    let mut conn = Conn::new(server, Framed::new(Lines::new()));
    let mut poll = Poll::new().unwrap();
    conn.register(poll.registry(), Token(1)).unwrap();
    let mut lines = Vec::new();
    drive(&mut conn, &mut poll, &mut lines, |all| !all.is_empty());
    assert_eq!(lines, vec![Bytes::from_static(b"UPGRADE")]);
    assert_eq!(
        conn.conn().recv_buf().peek(),
        b"raw tail",
        "the tail is buffered"
    );

    let mut raw = conn.switch(|_| Raw::new());
    let mut out = Vec::new();
    raw.on_readable(&mut out).unwrap(); // as documented
                                        // And, to be sure, the documented loop for a while: the client waits.
    drive(&mut raw, &mut poll, &mut out, |all| !all.is_empty());
    let got: Vec<u8> = out.iter().flat_map(|b| b.iter().copied()).collect();
    assert_eq!(
        String::from_utf8_lossy(&got),
        "raw tail",
        "the tail after the switch (within {BOUND:?})"
    );
    drop(client);
}

/// A peer that never reads; the server queues
/// more than the socket takes. The idle timeout must end the connection
/// (a clean close that cannot go out, then the linger reset), within a
/// bound, with memory bounded by the queue.
#[test]
fn a_peer_that_never_reads_is_ended_by_the_idle_timeout_and_linger() {
    use cleave_proto::{ConnConfig, Timeouts, WriteQueueConfig};
    let (server, client) = pair();
    let idle = Timeouts::default().idle(Some(Duration::from_millis(200)));
    let queue = WriteQueueConfig::default().max_bytes(8 << 20).unwrap();
    let mut conn = Conn::with_config(
        server,
        Framed::new(Lines::new()),
        ConnConfig::default().timeouts(idle).write_queue(queue),
    );
    conn.conn_mut()
        .push(Bytes::from(vec![b'x'; 8 << 20]))
        .unwrap();
    let mut poll = Poll::new().unwrap();
    conn.register(poll.registry(), Token(1)).unwrap();
    conn.on_writable().unwrap();
    let (mut events, mut out) = (Events::with_capacity(8), Vec::<Bytes>::new());
    let start = Instant::now();
    let mut errors = Vec::new();
    while !conn.is_finished() && start.elapsed() < BOUND {
        let timeout = conn.deadline().map_or(Duration::from_millis(50), |d| {
            d.saturating_duration_since(Instant::now())
        });
        poll.poll(&mut events, Some(timeout)).unwrap();
        for event in &events {
            if let Err(e) = conn.on_event(event, &mut out) {
                errors.push(format!("{e}"));
            }
        }
        if conn.deadline().is_some_and(|d| d <= Instant::now()) {
            if let Err(e) = conn.on_timeout(&mut out) {
                errors.push(format!("{e}"));
            }
        }
        conn.update_registration(poll.registry(), Token(1)).unwrap();
    }
    assert!(conn.is_finished(), "not finished: {errors:?}");
    assert_eq!(
        socket2::SockRef::from(conn.get_ref()).linger().unwrap(),
        Some(Duration::ZERO)
    );
    drop(client);
}
