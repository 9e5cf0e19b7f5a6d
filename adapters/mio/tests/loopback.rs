//! cleave-mio over real loopback TCP, on one thread's poll loop: a
//! thousand connections in random fragments, partial writes under a small
//! send buffer, a reset, a half-close, the end of the stream inside a
//! frame, a silent client routed at the deadline, and a loop that never
//! wakes for nothing.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::thread;
use std::time::{Duration, Instant};

use cleave_mio::{Conn, ConnError};
use cleave_proto::route::{Match, Reason, Router, RouterConfig};
use cleave_proto::{
    Bytes, ConnConfig, Encoder, Error, Event, Framed, Lines, Protocol, Session, SessionConfig,
    WriteQueueConfig,
};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

/// A poll that found nothing for this long means the test is stuck.
const STALLED: Duration = Duration::from_secs(20);
const LISTENER: Token = Token(usize::MAX);

/// A small deterministic generator.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

fn listener(poll: &Poll) -> (TcpListener, SocketAddr) {
    let mut listener = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)
        .unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

fn poll_once(poll: &mut Poll, events: &mut Events, timeout: Duration) {
    poll.poll(events, Some(timeout)).unwrap();
}

/// Runs a line-answering server until `expected` connections came and
/// finished: every line comes back with a `!`, and the server ends its
/// side when the client has ended its own. Returns the number of
/// readiness events that found nothing to do.
fn serve_lines(poll: &mut Poll, listener: &mut TcpListener, expected: usize) -> usize {
    let mut conns: Vec<Option<Conn<TcpStream, Framed<Lines>>>> = Vec::new();
    let (mut accepted, mut finished, mut idle_wakeups) = (0, 0, 0);
    let mut events = Events::with_capacity(1024);
    let mut lines = Vec::new();
    let mut encoder = Lines::new();
    while finished < expected {
        poll_once(poll, &mut events, STALLED);
        assert!(!events.is_empty(), "the loop stalled");
        for event in &events {
            if event.token() == LISTENER {
                loop {
                    match listener.accept() {
                        Ok((socket, _)) => {
                            let mut conn = Conn::new(socket, Framed::new(Lines::new()));
                            conn.register(poll.registry(), Token(conns.len())).unwrap();
                            conns.push(Some(conn));
                            accepted += 1;
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(e) => panic!("accept: {e}"),
                    }
                }
                continue;
            }
            let token = event.token();
            let Some(conn) = conns[token.0].as_mut() else {
                continue;
            };
            // One call per event: reads (skipping the read that would only
            // say WouldBlock) and writes.
            let (closed, queued) = (conn.is_read_closed(), conn.conn().queue().len());
            let mut outcome = conn.on_event(event, &mut lines).unwrap();
            while outcome.more {
                // The read budget ran out (not with these small streams).
                let more = conn.on_readable(&mut lines).unwrap();
                outcome.read += more.read;
                outcome.more = more.more;
                outcome.eof = more.eof;
            }
            let progress = outcome.read > 0
                || conn.is_read_closed() != closed
                || conn.conn().queue().len() < queued;
            if !progress {
                idle_wakeups += 1;
            }
            for line in lines.drain(..) {
                let mut answer = line.to_vec();
                answer.push(b'!');
                conn.conn_mut()
                    .push(encoder.encode(Bytes::from(answer)).unwrap())
                    .unwrap();
            }
            if outcome.eof {
                conn.close();
            }
            conn.on_writable().unwrap(); // the answers just queued
            conn.update_registration(poll.registry(), token).unwrap();
            if conn.is_finished() {
                conn.deregister(poll.registry()).unwrap();
                conns[token.0] = None;
                finished += 1;
            }
        }
    }
    assert_eq!(accepted, expected);
    idle_wakeups
}

/// Two thousand sockets in one process need more descriptors than some
/// machines' default soft limit: raise it towards the hard limit.
fn enough_descriptors(wanted: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < wanted {
            limit.rlim_cur = wanted.min(limit.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

#[test]
fn a_thousand_connections_in_random_fragments_on_one_thread() {
    const CONNECTIONS: usize = 1000;
    enough_descriptors(4096);
    const THREADS: usize = 8;
    const LINES: usize = 20;
    let mut poll = Poll::new().unwrap();
    let (mut listener, addr) = listener(&poll);

    let clients: Vec<_> = (0..THREADS)
        .map(|t| {
            thread::spawn(move || {
                let mut rng = XorShift(0x9e37_79b9_7f4a_7c15 ^ (t as u64 + 1));
                let ids: Vec<usize> = (t..CONNECTIONS).step_by(THREADS).collect();
                let mut sockets: Vec<std::net::TcpStream> = ids
                    .iter()
                    .map(|_| std::net::TcpStream::connect(addr).unwrap())
                    .collect();
                let streams: Vec<Vec<u8>> = ids
                    .iter()
                    .map(|id| {
                        (0..LINES)
                            .flat_map(|l| {
                                format!("conn {id} line {l} {}\n", "x".repeat(l * 7)).into_bytes()
                            })
                            .collect()
                    })
                    .collect();
                // Round-robin: a random piece of each connection's stream
                // in turn, so the server sees every connection mid-line.
                let mut sent = vec![0; ids.len()];
                while sent.iter().zip(&streams).any(|(s, b)| s < &b.len()) {
                    for (i, socket) in sockets.iter_mut().enumerate() {
                        let rest = &streams[i][sent[i]..];
                        if rest.is_empty() {
                            continue;
                        }
                        let n = 1 + rng.below(rest.len().min(40));
                        socket.write_all(&rest[..n]).unwrap();
                        sent[i] += n;
                    }
                }
                for (i, socket) in sockets.iter_mut().enumerate() {
                    socket.shutdown(Shutdown::Write).unwrap();
                    let mut answers = String::new();
                    socket.read_to_string(&mut answers).unwrap();
                    let expected: String = String::from_utf8(streams[i].clone())
                        .unwrap()
                        .lines()
                        .map(|l| format!("{l}!\n"))
                        .collect();
                    assert_eq!(answers, expected, "connection {}", ids[i]);
                }
            })
        })
        .collect();

    let idle = serve_lines(&mut poll, &mut listener, CONNECTIONS);
    assert_eq!(idle, 0, "readiness events that found nothing to do");
    for client in clients {
        client.join().unwrap();
    }
}

#[test]
fn partial_writes_under_a_small_send_buffer_keep_every_byte_in_order() {
    const TOTAL: usize = 2 << 20;
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap();
    let reader = thread::spawn(move || {
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        socket.connect(&addr.into()).unwrap();
        let mut socket: std::net::TcpStream = socket.into();
        let mut received = Vec::with_capacity(TOTAL);
        let mut buf = [0u8; 4096];
        loop {
            let n = socket.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            received.extend_from_slice(&buf[..n]);
            thread::sleep(Duration::from_micros(200)); // a slow reader
        }
        received
    });
    let (socket, _) = std_listener.accept().unwrap();
    socket2::SockRef::from(&socket)
        .set_send_buffer_size(4096)
        .unwrap();
    socket.set_nonblocking(true).unwrap();
    let socket = TcpStream::from_std(socket);

    let config =
        ConnConfig::default().write_queue(WriteQueueConfig::default().max_bytes(TOTAL).unwrap());
    let mut conn = Conn::with_config(socket, Framed::new(Lines::new()), config);
    let payload: Vec<u8> = (0..TOTAL).map(|i| (i % 251) as u8).collect();
    let payload = Bytes::from(payload);
    for piece in (0..TOTAL).step_by(64 * 1024) {
        conn.conn_mut()
            .push(payload.slice(piece..piece + 64 * 1024))
            .unwrap();
    }
    conn.close();

    let mut poll = Poll::new().unwrap();
    conn.register(poll.registry(), Token(0)).unwrap();
    let mut events = Events::with_capacity(8);
    let (mut partial, mut idle) = (0, 0);
    while !conn.conn().queue().is_flushed() || conn.interest().is_some_and(|i| i.is_writable()) {
        poll_once(&mut poll, &mut events, STALLED);
        assert!(!events.is_empty(), "the loop stalled");
        for event in &events {
            if !event.is_writable() {
                continue;
            }
            let before = conn.conn().queue().len();
            let flushed = conn.on_writable().unwrap();
            if conn.conn().queue().len() == before && !flushed {
                idle += 1;
            }
            if !flushed {
                partial += 1;
                assert!(conn.interest().unwrap().is_writable());
            }
            conn.update_registration(poll.registry(), Token(0)).unwrap();
        }
    }
    // Writable is asked for no longer; only the read side is left.
    assert_eq!(conn.interest(), Some(Interest::READABLE));
    assert!(partial > 10, "the send buffer was never full: {partial}");
    assert_eq!(idle, 0, "writable events that could write nothing");
    let received = reader.join().unwrap();
    assert_eq!(received.len(), TOTAL);
    assert!(received == payload, "bytes out of order");
}

/// One accepted connection and its client.
fn pair() -> (TcpStream, std::net::TcpStream) {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client = std::net::TcpStream::connect(std_listener.local_addr().unwrap()).unwrap();
    let (server, _) = std_listener.accept().unwrap();
    server.set_nonblocking(true).unwrap();
    (TcpStream::from_std(server), client)
}

/// HTTP to "web", anything else to "fallback", deciding within `delay`.
fn http_or_fallback(delay: Duration) -> Router<&'static str> {
    Router::with_config("fallback", RouterConfig::default().inspect_delay(delay))
        .rule(Match::Http, "web")
}

/// Drives `conn` until `done` says so, collecting the events.
fn drive<P: Protocol>(
    poll: &mut Poll,
    conn: &mut Conn<TcpStream, P>,
    out: &mut Vec<P::Event>,
    mut done: impl FnMut(&Conn<TcpStream, P>, &[P::Event], &Result<(), ConnError>) -> bool,
) -> Result<(), ConnError> {
    let mut events = Events::with_capacity(8);
    conn.register(poll.registry(), Token(0)).unwrap();
    loop {
        let timeout = conn
            .deadline()
            .map_or(STALLED, |d| d.saturating_duration_since(Instant::now()));
        poll_once(poll, &mut events, timeout);
        let mut result = Ok(());
        if events.is_empty() {
            assert!(conn.deadline().is_some(), "the loop stalled");
            result = conn.on_timeout(out);
        }
        for event in &events {
            if event.is_readable() {
                if let Err(e) = conn.on_readable(out) {
                    result = Err(e);
                }
            }
            if event.is_writable() && result.is_ok() {
                result = conn.on_writable().map(drop);
            }
        }
        if done(conn, out, &result) {
            return result;
        }
        result?;
        conn.update_registration(poll.registry(), Token(0)).unwrap();
    }
}

#[test]
fn the_end_of_the_stream_inside_a_frame_gives_the_partial_bytes_back() {
    let mut poll = Poll::new().unwrap();
    let (server, mut client) = pair();
    client.write_all(b"whole\npart").unwrap();
    client.shutdown(Shutdown::Write).unwrap();
    let mut conn = Conn::new(server, Framed::new(Lines::new()));
    let mut lines = Vec::new();
    let result = drive(&mut poll, &mut conn, &mut lines, |_, _, r| r.is_err());
    assert_eq!(lines, vec![Bytes::from_static(b"whole")]);
    match result {
        Err(ConnError::Protocol(Error::Truncated { partial, offset })) => {
            assert_eq!((&partial[..], offset), (&b"part"[..], 6));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_peer_reset_is_an_io_error() {
    let mut poll = Poll::new().unwrap();
    let (server, client) = pair();
    socket2::SockRef::from(&client)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(client); // RST
    let mut conn = Conn::new(server, Framed::new(Lines::new()));
    let mut lines = Vec::new();
    let result = drive(&mut poll, &mut conn, &mut lines, |_, _, r| r.is_err());
    match result {
        Err(ConnError::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset),
        other => panic!("{other:?}"),
    }
    assert!(conn.interest().is_none() || !conn.interest().unwrap().is_readable());
}

#[test]
fn after_the_peer_half_closes_the_answers_still_go_out() {
    let mut poll = Poll::new().unwrap();
    let (server, mut client) = pair();
    client.write_all(b"one\ntwo\n").unwrap();
    client.shutdown(Shutdown::Write).unwrap();
    let mut conn = Conn::new(server, Framed::new(Lines::new()));
    let mut lines = Vec::new();
    // Read to the end first: the peer's side is closed, ours is open.
    drive(&mut poll, &mut conn, &mut lines, |c, _, _| {
        c.interest().is_none()
    })
    .unwrap();
    assert_eq!(
        lines,
        vec![Bytes::from_static(b"one"), Bytes::from_static(b"two")]
    );
    let mut encoder = Lines::new();
    for line in lines.drain(..) {
        conn.conn_mut().push(encoder.encode(line).unwrap()).unwrap();
    }
    conn.close();
    conn.on_writable().unwrap();
    drive(&mut poll, &mut conn, &mut lines, |c, _, _| c.is_finished()).unwrap_or(());
    let mut answers = String::new();
    client.read_to_string(&mut answers).unwrap();
    assert_eq!(answers, "one\ntwo\n");
}

#[test]
fn a_silent_client_is_routed_by_the_fallback_at_the_deadline() {
    let mut poll = Poll::new().unwrap();
    let (server, mut client) = pair();
    client.write_all(b"GET / HT").unwrap(); // and then nothing
    let router = http_or_fallback(Duration::from_millis(50));
    let mut conn = Conn::new(server, Session::tunnel(router, SessionConfig::default()));
    let mut out = Vec::new();
    // The inspect delay runs from the connection's start.
    let deadline = conn.started() + Duration::from_millis(50);
    assert_eq!(conn.deadline(), Some(deadline));
    drive(&mut poll, &mut conn, &mut out, |_, out, _| out.len() >= 2).unwrap();
    match &out[0] {
        Event::Routed(decision) => {
            assert_eq!(
                (decision.target, decision.reason),
                ("fallback", Reason::DeadlinePassed)
            );
        }
        other => panic!("{other:?}"),
    }
    // Decided by the clock, and not before it said so.
    assert!(Instant::now() >= deadline, "routed before the deadline");
    assert_eq!(out[1], Event::Tunnel(Bytes::from_static(b"GET / HT")));
}

#[test]
fn a_client_that_sends_nothing_is_still_routed_at_the_deadline() {
    let mut poll = Poll::new().unwrap();
    let (server, _client) = pair(); // connects, then never writes
    let router = http_or_fallback(Duration::from_millis(50));
    let mut conn = Conn::new(server, Session::tunnel(router, SessionConfig::default()));
    // The inspect delay runs from the connection's start.
    let deadline = conn.started() + Duration::from_millis(50);
    assert_eq!(conn.deadline(), Some(deadline));
    let mut out = Vec::new();
    drive(&mut poll, &mut conn, &mut out, |_, out, _| !out.is_empty()).unwrap();
    match &out[0] {
        Event::Routed(decision) => {
            assert_eq!(
                (decision.target, decision.reason),
                ("fallback", Reason::DeadlinePassed)
            );
        }
        other => panic!("{other:?}"),
    }
    // Decided by the clock, and not before it said so.
    assert!(Instant::now() >= deadline, "routed before the deadline");
}

#[test]
fn an_inspect_delay_past_what_instant_holds_means_no_deadline() {
    let (server, mut client) = pair();
    client.write_all(b"GET / HT").unwrap();
    let router = http_or_fallback(Duration::MAX);
    let mut conn = Conn::new(server, Session::tunnel(router, SessionConfig::default()));
    let mut out = Vec::new();
    conn.on_timeout(&mut out).unwrap();
    assert!(out.is_empty());
    assert_eq!(conn.deadline(), None, "never by the clock");
}

#[test]
fn after_a_protocol_error_the_answer_goes_out_and_the_connection_finishes() {
    let mut poll = Poll::new().unwrap();
    let (server, mut client) = pair();
    // A line over the limit, and the client stays connected.
    client.write_all(&[b'x'; 64]).unwrap();
    let lines = Lines::with_config(cleave_proto::LinesConfig::default().max_length(16));
    let mut conn = Conn::new(server, Framed::new(lines));
    let mut out = Vec::new();
    let result = drive(&mut poll, &mut conn, &mut out, |_, _, result| {
        result.is_err()
    });
    match result {
        Err(ConnError::Protocol(Error::LimitExceeded { .. })) => {}
        other => panic!("{other:?}"),
    }
    // The read side is over: no more READABLE, and the error stays.
    assert!(conn.is_read_closed() && conn.conn().is_read_done());
    assert_eq!(conn.interest(), None);
    conn.conn_mut()
        .push(Bytes::from_static(b"ERR line too long\n"))
        .unwrap();
    conn.close();
    assert_eq!(conn.interest(), Some(Interest::WRITABLE));
    assert!(conn.on_writable().unwrap());
    assert!(
        conn.is_finished(),
        "answered and shut down: nothing left to do"
    );
    let mut answer = String::new();
    client.read_to_string(&mut answer).unwrap();
    assert_eq!(answer, "ERR line too long\n");
}

#[test]
fn an_idle_connection_never_wakes_the_loop() {
    let mut poll = Poll::new().unwrap();
    let (server, mut client) = pair();
    let mut conn = Conn::new(server, Framed::new(Lines::new()));
    conn.register(poll.registry(), Token(0)).unwrap();
    assert_eq!(conn.interest(), Some(Interest::READABLE));
    // An answer goes out at once; WRITABLE is not asked for after it.
    conn.conn_mut()
        .push(Bytes::from_static(b"hello\n"))
        .unwrap();
    assert!(conn.on_writable().unwrap());
    conn.update_registration(poll.registry(), Token(0)).unwrap();
    assert_eq!(conn.interest(), Some(Interest::READABLE));
    let mut got = [0u8; 6];
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"hello\n");
    // Nothing arrives, nothing is queued: five polls, no event.
    let mut events = Events::with_capacity(8);
    let mut wakeups = 0;
    for _ in 0..5 {
        poll_once(&mut poll, &mut events, Duration::from_millis(20));
        wakeups += events.iter().count();
    }
    assert_eq!(wakeups, 0, "an idle connection woke the loop");
    // And the loop's serving of a thousand connections (above) counts the
    // events that found nothing to do; here one line does the same.
    client.write_all(b"ping\n").unwrap();
    let mut lines = Vec::new();
    let mut spurious = 0;
    while lines.is_empty() {
        poll_once(&mut poll, &mut events, STALLED);
        assert!(!events.is_empty(), "the loop stalled");
        for event in &events {
            assert!(event.is_readable());
            if conn.on_readable(&mut lines).unwrap().read == 0 {
                spurious += 1;
            }
        }
    }
    assert_eq!((lines, spurious), (vec![Bytes::from_static(b"ping")], 0));
}

#[test]
fn the_read_budget_bounds_one_call_and_more_says_to_come_back() {
    const TOTAL: usize = 1 << 20;
    let mut poll = Poll::new().unwrap();
    let (server, mut client) = pair();
    let writer = thread::spawn(move || {
        let line = [b'x'; 1023]
            .iter()
            .chain(b"\n")
            .copied()
            .collect::<Vec<u8>>();
        for _ in 0..TOTAL / 1024 {
            client.write_all(&line).unwrap();
        }
        client.shutdown(Shutdown::Write).unwrap();
        client
    });
    let mut conn = Conn::new(server, Framed::new(Lines::new()));
    conn.set_read_budget(16 * 1024);
    conn.register(poll.registry(), Token(0)).unwrap();
    let mut events = Events::with_capacity(8);
    let (mut lines, mut calls, mut read) = (Vec::new(), 0, 0);
    let mut largest_batch = 0;
    while !conn.is_read_closed() {
        poll_once(&mut poll, &mut events, STALLED);
        assert!(!events.is_empty(), "the loop stalled");
        for event in &events {
            let mut outcome = conn.on_event(event, &mut lines).unwrap();
            loop {
                calls += 1;
                read += outcome.read;
                // One call hands out at most the budget and one read more.
                assert!(outcome.read <= 16 * 1024 + 64 * 1024, "{}", outcome.read);
                largest_batch = largest_batch.max(lines.len());
                lines.clear();
                if !outcome.more {
                    break;
                }
                outcome = conn.on_readable(&mut lines).unwrap();
            }
        }
    }
    writer.join().unwrap();
    assert_eq!(read, TOTAL);
    assert!(calls > TOTAL / (80 * 1024), "{calls} calls for 1 MiB");
    assert!(largest_batch <= 80, "{largest_batch} lines in one call");
}

#[test]
fn checked_frames_come_through_and_a_bad_checksum_is_skipped_when_asked() {
    use cleave_proto::{Checked, Checksum};
    let mut codec = Checked::new(Checksum::Crc32).unwrap();
    let bodies: Vec<Bytes> = (0..50u8)
        .map(|i| Bytes::from(vec![i; usize::from(i) * 700]))
        .collect();
    let mut wire = Vec::new();
    let mut bad_at = 0;
    for (i, body) in bodies.iter().enumerate() {
        let frame = codec.encode(body.clone()).unwrap();
        if i == 10 {
            bad_at = wire.len();
        }
        wire.extend_from_slice(frame.head());
        wire.extend_from_slice(frame.body());
    }
    wire[bad_at + 4] ^= 1; // frame 10's checksum

    let mut poll = Poll::new().unwrap();
    let (server, mut client) = pair();
    let writer = thread::spawn(move || {
        client.write_all(&wire).unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        client
    });
    let mut conn = Conn::new(server, Framed::new(codec.skip_mismatched()));
    // `drive` reads on readiness only: no budget to come back for.
    conn.set_read_budget(usize::MAX);
    let mut items = Vec::new();
    // Read to the end: the peer's side closed, nothing to write.
    let result = drive(&mut poll, &mut conn, &mut items, |conn, _, r| {
        r.is_err() || conn.interest().is_none()
    });
    assert!(result.is_ok(), "{result:?}");
    drop(writer.join().unwrap());
    assert_eq!(items.len(), bodies.len());
    for (i, (item, body)) in items.iter().zip(&bodies).enumerate() {
        match item {
            Ok(payload) => assert!(i != 10 && payload == body, "frame {i}"),
            Err(bad) => {
                assert_eq!((i, bad.offset), (10, bad_at as u64));
                assert_eq!(&bad.payload, body, "the payload was intact");
            }
        }
    }
}
