//! Hostile peers against `Stream`: one that never reads the protocol's
//! replies is still ended by the idle timeout, and a write that failed
//! inside `recv` is not reported as written by a later flush or close.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use cleave_proto::conn::{Phase, Protocol, Wire};
use cleave_proto::{Bytes, ConnConfig, Decoder, Error, Framed, Lines, Timeout, Timeouts};
use cleave_std::{ConnError, Socket, Stream};

/// Lines, where a line `PING` is answered by the protocol itself with a
/// 4 KiB `PONG` on the urgent lane (a stand-in for a WebSocket pong).
#[derive(Debug)]
struct BigPongs {
    lines: Lines,
    held: Option<Bytes>,
    phase: Phase,
}

impl Protocol for BigPongs {
    type Event = Bytes;

    fn poll_event(&mut self, wire: &mut Wire<'_>) -> Result<Option<Bytes>, Error> {
        loop {
            if let Some(pong) = self.held.take() {
                if let Err(rejected) = wire.reply(pong) {
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
                    let mut pong = vec![b'p'; 4095];
                    pong.push(b'\n');
                    self.held = Some(Bytes::from(pong));
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

/// Small kernel buffers both ways, so that a peer that does not read
/// blocks the server's writes soon.
fn small_pair() -> (TcpStream, TcpStream) {
    use socket2::{Domain, Socket as RawSocket, Type};
    let listener = RawSocket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    listener.set_send_buffer_size(16 * 1024).unwrap();
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    listener.bind(&addr.into()).unwrap();
    listener.listen(1).unwrap();
    let listener: TcpListener = listener.into();
    let client = RawSocket::new(Domain::IPV4, Type::STREAM, None).unwrap();
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
    let config =
        ConnConfig::default().timeouts(Timeouts::default().idle(Some(Duration::from_millis(300))));
    let protocol = BigPongs {
        lines: Lines::new(),
        held: None,
        phase: Phase::Opening,
    };
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
    drop(client);
}

/// An in-memory socket: reads come from `input`, every write fails (the
/// peer reset the connection).
struct BrokenWrites {
    input: io::Cursor<Vec<u8>>,
}

impl Read for BrokenWrites {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for BrokenWrites {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::ErrorKind::BrokenPipe.into())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Socket for BrokenWrites {
    fn writer(&mut self) -> Option<&mut dyn Write> {
        Some(self)
    }
}

/// The answer queued before `recv` is dropped when `recv`'s best-effort
/// write of it fails (the error reported is the protocol's). `close()`
/// must not then say that it wrote what the queue held and shut down.
#[test]
fn close_is_not_ok_after_a_write_failure_recv_swallowed() {
    let io = BrokenWrites {
        input: io::Cursor::new(b"one\ntw".to_vec()),
    };
    let mut stream = Stream::new(io, Framed::new(Lines::new()));
    assert_eq!(stream.recv().unwrap().unwrap(), "one");
    stream
        .conn_mut()
        .push(Bytes::from_static(b"answer\n"))
        .unwrap();
    match stream.recv() {
        Err(ConnError::Protocol(Error::Truncated { .. })) => {}
        other => panic!("{other:?}"),
    }
    let flushed = stream.flush();
    let closed = stream.close();
    assert!(
        flushed.is_err() || closed.is_err(),
        "the answer was never written (every write failed), yet flush() = {flushed:?} and close() = {closed:?}"
    );
}
