//! cleave-std over real loopback sockets, Unix sockets and pipes: many
//! connections in random fragments, a peer that closes mid-frame or
//! resets, a slow reader, read timeouts, a session's deadline, the writer
//! thread's limits, tickets, flush and close.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use cleave_proto::route::{Match, Reason, Router, RouterConfig};
use cleave_proto::{
    Bytes, ConnConfig, Encoder, Error, Event, Framed, Lane, LengthPrefixed, Lines, Refusal,
    Session, SessionConfig, WriteQueueConfig,
};
use cleave_std::{spawn_writer, ConnError, Stream, WriteError};
use socket2::{Domain, SockRef, Socket, Type};

fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    (client, server)
}

/// A connection whose kernel buffers are small (16 KiB asked; the kernel
/// may double it), so that they cannot absorb what a queue should hold
/// back.
fn small_pair() -> (TcpStream, TcpStream) {
    let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    listener.set_recv_buffer_size(16 * 1024).unwrap();
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    listener.bind(&addr.into()).unwrap();
    listener.listen(1).unwrap();
    let listener: TcpListener = listener.into();
    let client = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    client.set_send_buffer_size(16 * 1024).unwrap();
    client
        .connect(&listener.local_addr().unwrap().into())
        .unwrap();
    let (server, _) = listener.accept().unwrap();
    (client.into(), server)
}

/// Closes `stream` with a RST instead of a FIN.
fn reset(stream: TcpStream) {
    SockRef::from(&stream)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(stream);
}

/// Waits (at most ten seconds) until `condition` holds.
fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if condition() {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    }
    panic!("never reached: {what}");
}

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

fn lines_router() -> Router<&'static str> {
    Router::new("other").rule(Match::Prefix("LINE ".into()), "lines")
}

fn lines_session() -> Session<&'static str, Lines> {
    Session::framed(
        lines_router(),
        Lines::new(),
        |l: &Bytes| &l[..] == b"TUNNEL",
        SessionConfig::default(),
    )
}

#[test]
fn many_connections_in_random_fragments_with_a_thread_each() {
    const CONNECTIONS: usize = 32;
    const LINES: usize = 50;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Thread per connection: a Stream reads the session's events, a writer
    // thread (on a clone of the socket) answers every frame.
    let server = thread::spawn(move || {
        let mut connections = Vec::new();
        for _ in 0..CONNECTIONS {
            let (socket, _) = listener.accept().unwrap();
            connections.push(thread::spawn(move || {
                let (handle, writer) =
                    spawn_writer(socket.try_clone().unwrap(), WriteQueueConfig::default());
                let mut events = Stream::new(socket, lines_session());
                let (mut frames, mut raw) = (Vec::new(), Vec::new());
                while let Some(event) = events.recv().unwrap() {
                    match event {
                        Event::Frame(f) => {
                            handle
                                .send(Bytes::from(format!("OK {}\n", frames.len())))
                                .unwrap();
                            frames.push(f);
                        }
                        Event::Tunnel(b) => raw.extend_from_slice(&b),
                        Event::Closed(rest) => assert!(rest.is_empty(), "{rest:?}"),
                        _ => {}
                    }
                }
                // Written, and the write half shut down: the client reads
                // the end.
                handle.close().unwrap();
                writer.join().unwrap().unwrap();
                (frames, raw)
            }));
        }
        connections
            .into_iter()
            .map(|c| c.join().unwrap())
            .collect::<Vec<_>>()
    });
    let clients: Vec<_> = (0..CONNECTIONS)
        .map(|c| {
            thread::spawn(move || {
                let mut rng = XorShift(c as u64 * 7919 + 1);
                let mut wire = Vec::new();
                for i in 0..LINES {
                    wire.extend_from_slice(
                        format!("LINE {c} {i} {}\r\n", "x".repeat(rng.below(40))).as_bytes(),
                    );
                }
                wire.extend_from_slice(b"TUNNEL\n");
                wire.extend_from_slice(&vec![c as u8; 3000]);
                let mut socket = TcpStream::connect(addr).unwrap();
                socket.set_nodelay(true).unwrap();
                let mut rest = &wire[..];
                while !rest.is_empty() {
                    let n = 1 + rng.below(rest.len().min(97));
                    socket.write_all(&rest[..n]).unwrap();
                    rest = &rest[n..];
                    if rng.below(4) == 0 {
                        thread::yield_now();
                    }
                }
                socket.shutdown(Shutdown::Write).unwrap();
                let mut answers = String::new();
                socket.read_to_string(&mut answers).unwrap();
                answers
            })
        })
        .collect();
    let expected: String = (0..=LINES).map(|i| format!("OK {i}\n")).collect();
    for client in clients {
        assert_eq!(client.join().unwrap(), expected, "one answer per frame");
    }
    let results = server.join().unwrap();
    assert_eq!(results.len(), CONNECTIONS);
    for (frames, raw) in results {
        assert_eq!(frames.len(), LINES + 1, "every line and the marker");
        let c: usize = std::str::from_utf8(&frames[0][5..])
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        for (i, f) in frames[..LINES].iter().enumerate() {
            assert!(f.starts_with(format!("LINE {c} {i} ").as_bytes()), "{f:?}");
        }
        assert_eq!(raw, vec![c as u8; 3000], "the raw tail, nothing lost");
    }
}

#[test]
fn a_peer_that_closes_mid_frame_gives_the_partial_bytes_back() {
    // A decoder: the partial frame comes back in the core's Truncated.
    let (mut client, server) = pair();
    client.write_all(b"one\ntwo\nthr").unwrap();
    client.shutdown(Shutdown::Write).unwrap();
    let mut lines = Stream::new(server, Framed::new(Lines::new()));
    assert_eq!(lines.recv().unwrap().unwrap(), "one");
    assert_eq!(lines.recv().unwrap().unwrap(), "two");
    for _ in 0..2 {
        // Final: the same error, with the same bytes, again.
        match lines.recv() {
            Err(ConnError::Protocol(Error::Truncated { partial, offset })) => {
                assert_eq!((&partial[..], offset), (&b"thr"[..], 8));
            }
            other => panic!("{other:?}"),
        }
    }

    // A session: the partial frame comes back in its Closed event.
    let (mut client, server) = pair();
    client.write_all(b"LINE a\nLINE b\nLINE c").unwrap();
    client.shutdown(Shutdown::Write).unwrap();
    let mut events = Stream::new(server, lines_session());
    let mut got = Vec::new();
    while let Some(event) = events.recv().unwrap() {
        got.push(event);
    }
    assert!(matches!(&got[0], Event::Routed(d) if d.target == "lines"));
    assert_eq!(
        got[1..],
        [
            Event::Frame("LINE a".into()),
            Event::Frame("LINE b".into()),
            Event::Closed("LINE c".into()),
        ]
    );
    assert!(events.recv().unwrap().is_none(), "over, and stays over");
}

#[test]
fn a_peer_reset_is_a_final_io_error() {
    let (mut client, server) = pair();
    client.write_all(b"partial li").unwrap();
    reset(client);
    let mut lines = Stream::new(server, Framed::new(Lines::new()));
    match lines.recv() {
        Err(ConnError::Io(e)) => {
            assert_eq!(e.kind(), io::ErrorKind::ConnectionReset);
            match lines.recv() {
                Err(ConnError::Io(again)) => assert_eq!(again.kind(), e.kind()),
                other => panic!("{other:?}"),
            }
        }
        // Some stacks deliver the bytes and a clean end before the reset.
        Err(ConnError::Protocol(Error::Truncated { partial, .. })) => {
            assert_eq!(&partial[..], b"partial li")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_read_timeout_is_recoverable_and_loses_nothing() {
    let (mut client, server) = pair();
    client.set_nodelay(true).unwrap();
    server
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let mut frames = Stream::new(server, Framed::new(LengthPrefixed::new()));
    let body: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
    let mut wire = (body.len() as u32).to_be_bytes().to_vec();
    wire.extend_from_slice(&body);

    // Half the header; then the rest of it and half the body.
    let (head, rest) = wire.split_at(2);
    let (middle, last) = rest.split_at(502);
    for piece in [head, middle] {
        client.write_all(piece).unwrap();
        // Nothing complete yet: timed out, twice, and the bytes stay.
        for _ in 0..2 {
            match frames.recv() {
                Err(ConnError::TimedOut) => {}
                other => panic!("{other:?}"),
            }
        }
    }
    client.write_all(last).unwrap();
    client.write_all(&[0, 0, 0, 1, b'!']).unwrap();
    client.shutdown(Shutdown::Write).unwrap();
    assert_eq!(frames.recv().unwrap().unwrap(), body);
    assert_eq!(frames.recv().unwrap().unwrap(), "!");
    assert!(frames.recv().unwrap().is_none());
}

#[test]
fn a_silent_client_is_routed_by_the_fallback_once_the_deadline_passes() {
    let delay = Duration::from_millis(200);
    let patience = Duration::from_secs(30);
    // Some bytes that do not decide, or none at all: the inspect delay runs
    // from the stream's start either way.
    for first in [&b"GET / HT"[..], b""] {
        let (mut client, server) = pair();
        client.write_all(first).unwrap(); // and then nothing
        let router = Router::with_config("fallback", RouterConfig::default().inspect_delay(delay))
            .rule(Match::Http, "web");
        // The caller's own read timeout: recv sets the deadline's while
        // the session sniffs, and puts this one back once routed.
        server.set_read_timeout(Some(patience)).unwrap();
        let started = Instant::now();
        let mut events = Stream::new(server, Session::tunnel(router, SessionConfig::default()));
        assert_eq!(events.conn().poll_timeout(), Some(delay));
        // No TimedOut on the way: the decision by the clock is the event.
        let decision = match events.recv() {
            Ok(Some(Event::Routed(decision))) => decision,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            (decision.target, decision.reason),
            ("fallback", Reason::DeadlinePassed)
        );
        assert!(started.elapsed() >= delay, "routed before the deadline");
        assert_eq!(
            events.conn().poll_timeout(),
            None,
            "routed: no deadline any more"
        );
        assert_eq!(
            events.recv().unwrap().unwrap(),
            Event::Tunnel(Bytes::copy_from_slice(first))
        );
        client.write_all(b"TP/1.1").unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        assert_eq!(
            events.recv().unwrap().unwrap(),
            Event::Tunnel("TP/1.1".into())
        );
        // The caller's read timeout was back for that read.
        assert_eq!(events.get_ref().read_timeout().unwrap(), Some(patience));
        assert_eq!(events.recv().unwrap().unwrap(), Event::Closed(Bytes::new()));
        assert!(events.recv().unwrap().is_none());
    }
}

#[test]
fn close_shuts_the_write_half_and_reading_goes_on() {
    let (mut client, server) = pair();
    let mut lines = Stream::new(server, Framed::new(Lines::new()));
    lines.conn_mut().push(Bytes::from_static(b"bye\n")).unwrap();
    lines.close().unwrap(); // written, then a FIN
    let mut got = String::new();
    client.read_to_string(&mut got).unwrap();
    assert_eq!(got, "bye\n");
    assert!(matches!(
        lines.send(Bytes::from_static(b"late\n")),
        Err(ConnError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe
    ));
    client.write_all(b"still\nhere\n").unwrap();
    client.shutdown(Shutdown::Write).unwrap();
    assert_eq!(lines.recv().unwrap().unwrap(), "still");
    assert_eq!(lines.recv().unwrap().unwrap(), "here");
    assert!(lines.recv().unwrap().is_none());
    assert!(lines.conn().is_finished());
}

#[test]
fn reset_drops_what_is_queued_and_resets_the_peer() {
    let (mut client, server) = pair();
    let mut lines = Stream::new(server, Framed::new(Lines::new()));
    lines
        .conn_mut()
        .push(Bytes::from_static(b"never sent\n"))
        .unwrap();
    lines.reset().unwrap();
    assert!(lines.conn().is_finished());
    assert!(lines.conn().queue().is_empty());
    assert!(lines.recv().unwrap().is_none(), "nothing more is read");
    drop(lines); // the close is a reset
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    let e = client.read_to_end(&mut got).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::ConnectionReset);
    assert!(got.is_empty());
}

const CHUNK: usize = 16 * 1024;
const MAX: usize = 64 * 1024;
const CHUNKS: usize = 256;

#[test]
fn a_slow_reader_makes_stream_send_block_at_the_byte_bound() {
    let (client, mut server) = small_pair();
    let config = WriteQueueConfig::default().max_bytes(MAX).unwrap();
    let sent = Arc::new(AtomicUsize::new(0));
    let queued = Arc::new(AtomicUsize::new(0));
    let producer = {
        let (sent, queued) = (sent.clone(), queued.clone());
        thread::spawn(move || {
            let config = ConnConfig::default().write_queue(config);
            let mut out = Stream::with_config(client, Framed::new(Lines::new()), config);
            let chunk = Bytes::from(vec![7u8; CHUNK]);
            for _ in 0..CHUNKS {
                out.send(chunk.clone()).unwrap();
                let pending = out.conn().queue().len();
                assert!(pending <= MAX, "{pending} bytes queued");
                queued.store(pending, Ordering::SeqCst);
                sent.fetch_add(1, Ordering::SeqCst);
            }
            out.close().unwrap();
        })
    };
    // Nobody reads: the kernel's buffers fill, then the queue; send blocks
    // in the write that makes room.
    wait_for("a full queue", || {
        queued.load(Ordering::SeqCst) + CHUNK > MAX
    });
    thread::sleep(Duration::from_millis(50));
    assert!(
        sent.load(Ordering::SeqCst) < CHUNKS,
        "send went past the bound"
    );
    assert!(!producer.is_finished());
    // Now read everything: the producer finishes, nothing lost.
    let mut received = Vec::new();
    server.read_to_end(&mut received).unwrap();
    producer.join().unwrap();
    assert_eq!(received.len(), CHUNKS * CHUNK);
    assert!(received.iter().all(|&b| b == 7));
}

#[test]
fn a_slow_reader_makes_handle_send_block_at_the_byte_bound() {
    let (client, mut server) = small_pair();
    let config = WriteQueueConfig::default().max_bytes(MAX).unwrap();
    let (handle, writer) = spawn_writer(client, config);
    let sent = Arc::new(AtomicUsize::new(0));
    let producer = {
        let handle = handle.clone();
        let sent = sent.clone();
        thread::spawn(move || {
            let chunk = Bytes::from(vec![7u8; CHUNK]);
            for _ in 0..CHUNKS {
                handle.send(chunk.clone()).unwrap();
                let pending = handle.pending_bytes();
                assert!(pending <= MAX, "{pending} bytes queued");
                sent.fetch_add(1, Ordering::SeqCst);
            }
            handle.close().unwrap();
        })
    };
    wait_for("a full queue", || handle.pending_bytes() + CHUNK > MAX);
    thread::sleep(Duration::from_millis(50));
    assert!(handle.pending_bytes() <= MAX);
    assert!(
        sent.load(Ordering::SeqCst) < CHUNKS,
        "send went past the bound"
    );
    assert!(!producer.is_finished());
    let mut received = Vec::new();
    server.read_to_end(&mut received).unwrap();
    producer.join().unwrap();
    writer.join().unwrap().unwrap();
    assert_eq!(received.len(), CHUNKS * CHUNK);
    assert!(received.iter().all(|&b| b == 7));
}

#[test]
fn a_full_writer_gives_bytes_back_times_out_and_then_drains() {
    let (client, mut server) = small_pair();
    let config = WriteQueueConfig::default().max_bytes(MAX).unwrap();
    let (handle, writer) = spawn_writer(client, config);
    // Fill the kernel's buffers and the queue; nobody reads. Each send
    // waits at most 10 ms for room, and gives its bytes back when it times
    // out; then try_send must give them back too, unless the writer made
    // room meanwhile (it was slow, not blocked): then fill on.
    let mut accepted = Vec::new();
    let mut timeouts = 0;
    let mut i = 0u32;
    loop {
        assert!(i < 10_000, "the queue never filled");
        let chunk = Bytes::from(vec![(i % 251) as u8; CHUNK]);
        i += 1;
        let e = match handle.send_timeout(chunk.clone(), Duration::from_millis(10)) {
            Ok(ticket) => {
                accepted.push((ticket, chunk));
                continue;
            }
            Err(e) => e,
        };
        assert!(matches!(e.error(), WriteError::TimedOut), "{e}");
        let back = e.into_value();
        assert_eq!(back.as_ptr(), chunk.as_ptr(), "the same bytes, back");
        timeouts += 1;
        // The writer never holds the lock while it blocks in a write:
        // try_send answers at once.
        match handle.try_send(back) {
            Ok(ticket) => accepted.push((ticket, chunk)),
            Err(rejected) => {
                assert_eq!(rejected.error(), &Refusal::Full(Lane::Bulk));
                assert_eq!(rejected.into_value(), chunk);
                break;
            }
        }
    }
    assert!(timeouts > 0);
    assert!(handle.pending_bytes() <= MAX);
    // The last write cannot be written while nobody reads: a wait for it
    // times out. (Should the writer only have been slow, it gets more to
    // write until it blocks.)
    let mut last = accepted.last().unwrap().0;
    loop {
        match handle.written_timeout(last, Duration::from_millis(10)) {
            Err(WriteError::TimedOut) => break,
            Ok(()) => {
                let chunk = Bytes::from(vec![(i % 251) as u8; CHUNK]);
                i += 1;
                if let Ok(ticket) = handle.send_timeout(chunk.clone(), Duration::from_millis(10)) {
                    accepted.push((ticket, chunk));
                    last = ticket;
                }
            }
            Err(e) => panic!("{e}"),
        }
        assert!(i < 20_000, "every write went through with nobody reading");
    }

    let reader = thread::spawn(move || {
        let mut all = Vec::new();
        server.read_to_end(&mut all).unwrap();
        all
    });
    handle.written(last).unwrap();
    assert!(handle.is_written(last));
    handle.flush().unwrap();
    assert_eq!(handle.pending_bytes(), 0);
    handle.close().unwrap();
    writer.join().unwrap().unwrap();
    let expected: Vec<u8> = accepted.iter().flat_map(|(_, c)| c.to_vec()).collect();
    assert_eq!(reader.join().unwrap(), expected, "in order, exactly once");
}

#[test]
fn close_writes_everything_and_tickets_complete_in_order() {
    let (client, mut server) = pair();
    let (handle, writer) = spawn_writer(client, WriteQueueConfig::default());
    let mut tickets = Vec::new();
    for i in 0..1000u32 {
        tickets.push(
            handle
                .try_send(Bytes::from(i.to_be_bytes().to_vec()))
                .unwrap(),
        );
    }
    let reader = thread::spawn(move || {
        let mut all = Vec::new();
        server.read_to_end(&mut all).unwrap();
        all
    });
    for ticket in &tickets {
        handle.written(*ticket).unwrap();
    }
    handle.flush().unwrap();
    handle.close().unwrap();
    assert!(handle.is_closed());
    writer.join().unwrap().unwrap();
    let expected: Vec<u8> = (0..1000u32).flat_map(|i| i.to_be_bytes()).collect();
    assert_eq!(reader.join().unwrap(), expected);
    let late = Bytes::from_static(b"late");
    let e = handle.send(late.clone()).unwrap_err();
    assert!(matches!(e.error(), WriteError::Closed));
    assert_eq!(e.into_value(), late, "given back");
    assert_eq!(handle.try_send(late).unwrap_err().error(), &Refusal::Closed);
    handle.flush().unwrap(); // nothing pushed since: nothing to wait for
}

#[test]
fn a_writer_failure_reaches_every_waiter() {
    let (client, server) = small_pair();
    let config = WriteQueueConfig::default().max_bytes(MAX).unwrap();
    let (handle, writer) = spawn_writer(client, config);
    let chunk = Bytes::from(vec![1u8; CHUNK]);
    // Waiters of every kind: a ticket, a flush, a send waiting for room.
    // Nobody reads, so each pushes until it blocks (the kernel's buffers
    // are finite); only the writer's failure ends them.
    let waiters: Vec<thread::JoinHandle<WriteError>> = vec![
        {
            let (handle, chunk) = (handle.clone(), chunk.clone());
            thread::spawn(move || loop {
                let ticket = match handle.send(chunk.clone()) {
                    Ok(ticket) => ticket,
                    Err(e) => return e.into_parts().0,
                };
                if let Err(e) = handle.written(ticket) {
                    return e;
                }
            })
        },
        {
            let (handle, chunk) = (handle.clone(), chunk.clone());
            thread::spawn(move || loop {
                if let Err(e) = handle.send(chunk.clone()) {
                    return e.into_parts().0;
                }
                if let Err(e) = handle.flush() {
                    return e;
                }
            })
        },
        {
            let (handle, chunk) = (handle.clone(), chunk.clone());
            thread::spawn(move || loop {
                if let Err(e) = handle.send(chunk.clone()) {
                    return e.into_parts().0;
                }
            })
        },
    ];
    wait_for("a full queue", || handle.pending_bytes() + CHUNK > MAX);
    thread::sleep(Duration::from_millis(50)); // let them block
    reset(server);
    let kinds = [io::ErrorKind::ConnectionReset, io::ErrorKind::BrokenPipe];
    for waiter in waiters {
        match waiter.join().unwrap() {
            WriteError::Failed(e) => assert!(kinds.contains(&e.kind()), "{e}"),
            other => panic!("{other:?}"),
        }
    }
    let e = writer.join().unwrap().unwrap_err();
    assert!(kinds.contains(&e.kind()), "{e}");
    // Everything after sees it too; the queue was aborted.
    assert!(matches!(handle.error(), Some(WriteError::Failed(_))));
    assert!(matches!(handle.close(), Err(WriteError::Failed(_))));
    assert!(handle.is_closed());
    assert_eq!(handle.pending_bytes(), 0);
    assert_eq!(
        handle
            .try_send(Bytes::from_static(b"x"))
            .unwrap_err()
            .error(),
        &Refusal::Closed
    );
}

#[test]
fn frames_wait_for_room_on_both_drivers_and_arrive_whole() {
    // A queue far smaller than what is sent: both drivers must wait.
    let config = WriteQueueConfig::default()
        .max_items(4)
        .unwrap()
        .max_bytes(4 * 1024)
        .unwrap();
    let bodies: Vec<Bytes> = (0..300u32)
        .map(|i| Bytes::from(vec![(i % 251) as u8; (i as usize * 37) % 3000 + 1]))
        .collect();
    let collect = |socket: TcpStream| {
        thread::spawn(move || {
            let mut frames = Stream::new(socket, Framed::new(LengthPrefixed::new()));
            let mut all = Vec::new();
            while let Some(frame) = frames.recv().unwrap() {
                all.push(frame);
            }
            all
        })
    };
    let mut codec = LengthPrefixed::new();

    // Same thread.
    let (client, server) = pair();
    let reader = collect(server);
    let queue = ConnConfig::default().write_queue(config);
    let mut out = Stream::with_config(client, Framed::new(LengthPrefixed::new()), queue);
    for body in &bodies {
        out.send(codec.encode(body.clone()).unwrap()).unwrap();
        assert!(out.conn().queue().len() <= 4 * 1024 + 3000 + 4);
        assert!(out.conn().queue().items() <= 4);
    }
    out.close().unwrap(); // everything written, then a FIN
    assert_eq!(reader.join().unwrap(), bodies);

    // Writer thread.
    let (client, server) = pair();
    let reader = collect(server);
    let (handle, writer) = spawn_writer(client, config);
    let mut last = None;
    for body in &bodies {
        last = Some(handle.send(codec.encode(body.clone()).unwrap()).unwrap());
    }
    handle.written(last.unwrap()).unwrap();
    drop(handle); // the last handle: closes the queue, the thread finishes
    writer.join().unwrap().unwrap();
    assert_eq!(reader.join().unwrap(), bodies);
}

#[test]
fn recv_buffered_gives_what_arrived_together_without_reading() {
    let (mut client, server) = pair();
    let mut lines = Stream::new(server, Framed::new(Lines::new()));
    client.write_all(b"one\ntwo\nthree\nfou").unwrap();
    assert_eq!(lines.recv().unwrap().unwrap(), "one");
    // The rest of that read is buffered (a 17-byte write on loopback
    // arrives whole).
    assert_eq!(lines.recv_buffered().unwrap().unwrap(), "two");
    assert_eq!(lines.recv_buffered().unwrap().unwrap(), "three");
    assert!(
        lines.recv_buffered().unwrap().is_none(),
        "\"fou\" is not a line yet"
    );
    client.write_all(b"r\n").unwrap();
    client.shutdown(Shutdown::Write).unwrap();
    assert_eq!(lines.recv().unwrap().unwrap(), "four");
    assert!(lines.recv().unwrap().is_none());
    let (_, conn) = lines.into_parts();
    assert!(conn.recv_buf().is_empty() && conn.queue().is_empty());
}

#[test]
fn a_reader_only_stream_over_a_file() {
    let path = std::env::temp_dir().join(format!("cleave-std-{}.lines", std::process::id()));
    {
        let file = std::fs::File::create(&path).unwrap();
        let mut out = Stream::new(file, Framed::new(Lines::new()));
        let mut encoder = Lines::new();
        for i in 0..5000 {
            out.send(encoder.encode(format!("{i}").into()).unwrap())
                .unwrap();
        }
        out.conn_mut()
            .push(Bytes::from_static(b"no newline"))
            .unwrap();
        out.flush().unwrap();
    }
    let file = std::fs::File::open(&path).unwrap();
    let mut lines = Stream::new(file, Framed::new(Lines::new()));
    for i in 0..5000 {
        assert_eq!(lines.recv().unwrap().unwrap(), format!("{i}"));
    }
    match lines.recv() {
        Err(ConnError::Protocol(Error::Truncated { partial, .. })) => {
            assert_eq!(partial, "no newline")
        }
        other => panic!("{other:?}"),
    }
    std::fs::remove_file(&path).unwrap();
}

#[cfg(unix)]
mod unix {
    use std::os::unix::net::UnixStream;
    use std::process::{Command, Stdio};

    use super::*;

    #[test]
    fn unix_streams_work_too() {
        let (a, b) = UnixStream::pair().unwrap();
        let (handle, writer) = spawn_writer(a.try_clone().unwrap(), WriteQueueConfig::default());
        let reader = thread::spawn(move || {
            let mut frames = Stream::new(b, Framed::new(LengthPrefixed::new()));
            let mut all = Vec::new();
            while let Some(frame) = frames.recv().unwrap() {
                all.push(frame);
            }
            all
        });
        let mut codec = LengthPrefixed::new();
        let bodies: Vec<Bytes> = (0..200u32)
            .map(|i| Bytes::from(vec![i as u8; i as usize * 131 % 5000]))
            .collect();
        for body in &bodies {
            handle.send(codec.encode(body.clone()).unwrap()).unwrap();
        }
        // Written, and the write half shut down: the reader gets the end
        // although `a` is still open.
        handle.close().unwrap();
        writer.join().unwrap().unwrap();
        assert_eq!(reader.join().unwrap(), bodies);
        drop(a);
    }

    #[test]
    fn pipes_work_too() {
        // Through `cat`: our writes go into its stdin pipe, our reads come
        // from its stdout pipe.
        let mut cat = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let (handle, writer) = spawn_writer(cat.stdin.take().unwrap(), WriteQueueConfig::default());
        let mut lines = Stream::new(cat.stdout.take().unwrap(), Framed::new(Lines::new()));
        let mut encoder = Lines::new();
        let sent: Vec<Bytes> = (0..2000).map(|i| format!("line {i}").into()).collect();
        let feeder = {
            let sent = sent.clone();
            thread::spawn(move || {
                for line in sent {
                    handle.send(encoder.encode(line).unwrap()).unwrap();
                }
                // The last handle goes: the queue closes, the thread writes
                // the rest and drops the pipe, and cat ends.
            })
        };
        let mut got = Vec::new();
        while let Some(line) = lines.recv().unwrap() {
            got.push(line);
        }
        feeder.join().unwrap();
        writer.join().unwrap().unwrap();
        assert!(cat.wait().unwrap().success());
        assert_eq!(got, sent);
    }
}

/// `recv` sets the socket's read timeout for the connection's deadlines
/// and "puts the caller's back once there is none": at the end of the
/// stream the connection has no deadline left, and the socket has the
/// caller's read timeout again.
#[test]
fn the_callers_read_timeout_is_back_once_the_stream_ended() {
    let (mut client, server) = pair();
    let mine = Some(Duration::from_secs(7));
    server.set_read_timeout(mine).unwrap();
    let config = ConnConfig::default()
        .timeouts(cleave_proto::Timeouts::default().idle(Some(Duration::from_secs(30))));
    let mut lines = Stream::with_config(server, Framed::new(Lines::new()), config);
    client.write_all(b"one\n").unwrap();
    client.shutdown(Shutdown::Write).unwrap();
    assert_eq!(lines.recv().unwrap().unwrap(), "one");
    assert!(lines.recv().unwrap().is_none());
    assert_eq!(lines.conn().poll_timeout(), None);
    assert_eq!(lines.get_mut().read_timeout().unwrap(), mine);
}
