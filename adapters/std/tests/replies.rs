//! A protocol that answers by itself, driven through a `Stream` over
//! loopback TCP: a line `PING` gets `PONG` from the protocol, on the
//! urgent lane (a stand-in for a WebSocket ping and pong), while the
//! application echoes every other line. The answer goes out without the
//! application writing, and never inside an echoed line; and a peer that
//! never reads the answers is still ended by the idle timeout.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use cleave_proto::conn::{Phase, Protocol, Wire};
use cleave_proto::{Bytes, ConnConfig, Decoder, Encoder, Error, Lines, Timeout, Timeouts};
use cleave_std::{ConnError, Stream};
use socket2::{Domain, Socket, Type};

/// Lines, but a line `PING` is answered with `PONG` by the protocol
/// itself and not handed to the application.
#[derive(Debug)]
struct PingLines {
    lines: Lines,
    /// An answer the urgent lane had no room for: it goes first, and the
    /// lines after it wait.
    held: Option<Bytes>,
    phase: Phase,
    /// The answer to a `PING`.
    pong: Bytes,
}

impl PingLines {
    fn new() -> Self {
        Self::with_pong(Bytes::from_static(b"PONG\n"))
    }

    fn with_pong(pong: Bytes) -> Self {
        Self {
            lines: Lines::new(),
            held: None,
            phase: Phase::Opening,
            pong,
        }
    }
}

impl Protocol for PingLines {
    type Event = Bytes;

    fn poll_event(&mut self, wire: &mut Wire<'_>) -> Result<Option<Bytes>, Error> {
        loop {
            if let Some(pong) = self.held.take() {
                if let Err(rejected) = wire.reply(pong) {
                    // Full (or closed): hold it until the driver wrote.
                    self.held = Some(rejected.into_value());
                    return Ok(None);
                }
            }
            let line = if wire.is_eof() {
                self.lines.decode_eof(wire.recv())
            } else {
                self.lines.decode(wire.recv())
            };
            match line {
                Ok(Some(line)) if line == "PING" => {
                    self.phase = Phase::Framing;
                    self.held = Some(self.pong.clone());
                }
                Ok(Some(line)) => {
                    self.phase = Phase::Framing;
                    return Ok(Some(line));
                }
                Ok(None) => {
                    if wire.is_eof() {
                        self.phase = Phase::Done;
                    }
                    return Ok(None);
                }
                Err(e) => {
                    self.phase = Phase::Done;
                    return Err(e);
                }
            }
        }
    }

    fn phase(&self) -> Phase {
        self.phase
    }
}

/// A listener whose connections have a small send buffer, so that an
/// echoed line goes out in several writes.
fn small_listener() -> TcpListener {
    let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    listener.set_send_buffer_size(16 * 1024).unwrap();
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    listener.bind(&addr.into()).unwrap();
    listener.listen(8).unwrap();
    listener.into()
}

/// The server: echoes every line the protocol hands out, the lines that
/// arrived together in one flush, and counts them.
fn echo_server(listener: TcpListener, events: Arc<AtomicUsize>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let (socket, _) = listener.accept().unwrap();
        let mut stream = Stream::new(socket, PingLines::new());
        let mut encoder = Lines::new();
        while let Some(line) = stream.recv().unwrap() {
            events.fetch_add(1, Ordering::SeqCst);
            stream.send(encoder.encode(line).unwrap()).unwrap();
            while let Some(line) = stream.recv_buffered().unwrap() {
                events.fetch_add(1, Ordering::SeqCst);
                stream.send(encoder.encode(line).unwrap()).unwrap();
            }
            stream.flush().unwrap();
        }
        stream.close().unwrap();
    })
}

#[test]
fn a_ping_is_answered_while_the_application_only_reads() {
    let listener = small_listener();
    let addr = listener.local_addr().unwrap();
    let events = Arc::new(AtomicUsize::new(0));
    let server = echo_server(listener, events.clone());

    let mut client = TcpStream::connect(addr).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut answers = BufReader::new(client.try_clone().unwrap());
    for _ in 0..3 {
        client.write_all(b"PING\n").unwrap();
        let mut pong = String::new();
        answers.read_line(&mut pong).unwrap();
        assert_eq!(pong, "PONG\n");
    }
    // The application never had an event, so it never wrote: the
    // answers went out from inside recv, before it blocked.
    assert_eq!(events.load(Ordering::SeqCst), 0);

    client.write_all(b"hello\n").unwrap();
    let mut echo = String::new();
    answers.read_line(&mut echo).unwrap();
    assert_eq!(echo, "hello\n");
    client.shutdown(Shutdown::Write).unwrap();
    let mut rest = String::new();
    io::Read::read_to_string(&mut answers, &mut rest).unwrap();
    assert_eq!(rest, "", "nothing more, then the server's FIN");
    server.join().unwrap();
    assert_eq!(events.load(Ordering::SeqCst), 1);
}

#[test]
fn pongs_never_split_an_echoed_line() {
    const LINES: usize = 200;
    let listener = small_listener();
    let addr = listener.local_addr().unwrap();
    let events = Arc::new(AtomicUsize::new(0));
    let server = echo_server(listener, events.clone());

    let client = TcpStream::connect(addr).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // Long lines (48 KiB, three times the server's send buffer), each
    // followed by a burst of pings: more at once than the urgent lane
    // holds, so that the protocol holds answers back too.
    let line = |i: usize| format!("{i:05} {}", "x".repeat(48 * 1024 + i % 97));
    let mut pings = 0;
    let mut wire = Vec::new();
    for i in 0..LINES {
        wire.extend_from_slice(line(i).as_bytes());
        wire.push(b'\n');
        let burst = if i % 50 == 0 { 100 } else { i % 4 };
        for _ in 0..burst {
            wire.extend_from_slice(b"PING\n");
        }
        pings += burst;
    }
    let writer = {
        let mut client = client.try_clone().unwrap();
        thread::spawn(move || {
            for piece in wire.chunks(7919) {
                client.write_all(piece).unwrap();
            }
            client.shutdown(Shutdown::Write).unwrap();
        })
    };

    let mut got = Vec::new();
    let mut answers = BufReader::new(client);
    loop {
        let mut answer = String::new();
        if answers.read_line(&mut answer).unwrap() == 0 {
            break;
        }
        got.push(answer);
    }
    writer.join().unwrap();
    server.join().unwrap();

    // Every line is a whole PONG or a whole echo: a PONG written inside an
    // echo would cut it in two lines, neither of which is either.
    let pongs = got.iter().filter(|a| *a == "PONG\n").count();
    let echoes: Vec<&String> = got.iter().filter(|a| *a != "PONG\n").collect();
    assert_eq!(pongs, pings);
    assert_eq!(echoes.len(), LINES);
    for (i, echo) in echoes.iter().enumerate() {
        assert_eq!(**echo, line(i) + "\n", "echo {i}, whole and in order");
    }
    assert_eq!(events.load(Ordering::SeqCst), LINES);
}

/// Small kernel buffers both ways, so that a peer that does not read
/// blocks the server's writes soon.
fn small_pair() -> (TcpStream, TcpStream) {
    let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    listener.set_send_buffer_size(16 * 1024).unwrap();
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    listener.bind(&addr.into()).unwrap();
    listener.listen(1).unwrap();
    let listener: TcpListener = listener.into();
    let client = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    client.set_recv_buffer_size(16 * 1024).unwrap();
    client
        .connect(&listener.local_addr().unwrap().into())
        .unwrap();
    let (server, _) = listener.accept().unwrap();
    (client.into(), server)
}

/// A peer that sends pings and never reads: the server's pongs fill the
/// socket, its writes time out (a write timeout, as the docs advise), and
/// then nothing moves either way. The connection's idle timeout must end
/// it (final `Protocol(TimedOut(Idle))`), however often a caller retries
/// the non-final `ConnError::TimedOut`.
#[test]
fn the_idle_timeout_ends_a_connection_whose_peer_never_reads_its_replies() {
    let (mut client, server) = small_pair();
    server
        .set_write_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    // As the kernel keeps it (in its clock's ticks: 52 ms at 250 Hz).
    let callers = server.write_timeout().unwrap();
    let config =
        ConnConfig::default().timeouts(Timeouts::default().idle(Some(Duration::from_millis(300))));
    // 4 KiB pongs: a few fill the socket.
    let mut pong = vec![b'p'; 4095];
    pong.push(b'\n');
    let protocol = PingLines::with_pong(Bytes::from(pong));
    let mut stream = Stream::with_config(server, protocol, config);
    // 400 pings (2 KB: the kernel takes them all), then silence; the
    // client never reads.
    client.write_all(&b"PING\n".repeat(400)).unwrap();

    let started = Instant::now();
    let mut write_timeouts = 0;
    let outcome = loop {
        if started.elapsed() > Duration::from_secs(5) {
            break None;
        }
        match stream.recv() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("ended without an error"),
            Err(ConnError::TimedOut) => write_timeouts += 1, // not final: call again
            Err(e) => break Some(e),
        }
    };
    match outcome {
        Some(ConnError::Protocol(Error::TimedOut(Timeout::Idle))) => {}
        other => panic!(
            "the idle timeout (300 ms) never fired in 5 s; recv gave ConnError::TimedOut {write_timeouts} times, then {other:?}"
        ),
    }
    let timeout = stream.get_ref().write_timeout().unwrap();
    assert_eq!(timeout, callers, "the caller's write timeout is back");
    drop(client);
}

/// The same peer, and no write timeout of the caller's: while it writes
/// the protocol's replies, the stream sets the socket's write timeout to
/// the connection's deadline, so the idle timeout ends the connection on
/// its own instead of a write blocking for ever; and the socket has the
/// caller's write timeout (none) again after.
#[test]
fn the_idle_timeout_ends_a_blocked_reply_without_a_write_timeout_of_the_callers() {
    let (mut client, server) = small_pair();
    assert_eq!(server.write_timeout().unwrap(), None);
    let config =
        ConnConfig::default().timeouts(Timeouts::default().idle(Some(Duration::from_millis(300))));
    let mut pong = vec![b'p'; 4095];
    pong.push(b'\n');
    let protocol = PingLines::with_pong(Bytes::from(pong));
    let (done, outcome) = std::sync::mpsc::channel();
    let serving = thread::spawn(move || {
        let mut stream = Stream::with_config(server, protocol, config);
        let ended = loop {
            match stream.recv() {
                Ok(Some(_)) => {}
                Ok(None) => break None,
                Err(e) => break Some(e),
            }
        };
        let (socket, _) = stream.into_parts();
        let _ = done.send((ended, socket.write_timeout().unwrap()));
    });
    client.write_all(&b"PING\n".repeat(400)).unwrap();

    // A bound on the wait, not a measure: before the stream set write
    // timeouts, its write blocked until the peer read or went away.
    let (ended, timeout) = outcome
        .recv_timeout(Duration::from_secs(10))
        .expect("the connection ended while its peer neither read nor went away");
    match ended {
        Some(ConnError::Protocol(Error::TimedOut(Timeout::Idle))) => {}
        other => panic!("ended with {other:?}, not the idle timeout"),
    }
    assert_eq!(timeout, None, "the caller's write timeout (none) is back");
    serving.join().unwrap();
    drop(client);
}
