//! A protocol's own replies through cleave-mio, over loopback TCP on a
//! poll loop: a line protocol answers `PING` with `PONG` on the urgent lane
//! by itself (a stand-in for a WebSocket ping), while the application
//! echoes every other line, large, on the bulk lane. Every pong arrives,
//! and none lands inside an echoed line.

use std::io::{Read, Write};
use std::net::Shutdown;
use std::thread;
use std::time::Duration;

use cleave_mio::Conn;
use cleave_proto::conn::{Phase, Protocol, Wire};
use cleave_proto::{Bytes, ConnConfig, Decoder, Encoder, Error, Lines, Refusal, WriteQueueConfig};
use mio::net::TcpStream;
use mio::{Events, Poll, Token};

/// A poll that found nothing for this long means the test is stuck.
const STALLED: Duration = Duration::from_secs(20);
/// Lines the client sends; a `PING` follows each.
const ROUNDS: usize = 40;
/// Bytes of each echoed line: many writes' worth under a 4 KiB send buffer.
const LINE: usize = 40_000;

/// Lines, with `PING` answered by the protocol itself: `PONG` is queued on
/// the urgent lane, ahead of the echoes waiting in the bulk lane but never
/// inside one, and the `PING` is not handed to the application.
#[derive(Debug, Default)]
struct Pings {
    lines: Lines,
    /// A pong the urgent lane had no room for: nothing more is read until
    /// it is queued (a peer that pings faster than it reads is slowed).
    owed: bool,
    done: bool,
}

impl Pings {
    /// Queues the pong owed; false while the urgent lane is full.
    fn pay(&mut self, wire: &mut Wire<'_>) -> bool {
        match wire.reply(Bytes::from_static(b"PONG\n")) {
            // Queued, or the application ended its side: nothing goes out.
            Ok(_) => self.owed = false,
            Err(refused) if *refused.error() == Refusal::Closed => self.owed = false,
            Err(_) => {}
        }
        !self.owed
    }
}

impl Protocol for Pings {
    type Event = Bytes;

    fn poll_event(&mut self, wire: &mut Wire<'_>) -> Result<Option<Bytes>, Error> {
        loop {
            if self.owed && !self.pay(wire) {
                return Ok(None);
            }
            let line = if wire.is_eof() {
                self.lines.decode_eof(wire.recv())?
            } else {
                self.lines.decode(wire.recv())?
            };
            let Some(line) = line else {
                self.done = wire.is_eof();
                return Ok(None);
            };
            if &line[..] != b"PING" {
                return Ok(Some(line));
            }
            self.owed = true;
        }
    }

    fn phase(&self) -> Phase {
        if self.done {
            Phase::Done
        } else {
            Phase::Framing
        }
    }
}

/// One accepted connection, with a 4 KiB send buffer (writes are partial,
/// so pongs come while echoes are half written), and its client.
fn pair() -> (TcpStream, std::net::TcpStream) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    socket2::SockRef::from(&server)
        .set_send_buffer_size(4096)
        .unwrap();
    server.set_nonblocking(true).unwrap();
    client.set_read_timeout(Some(STALLED)).unwrap();
    client.set_write_timeout(Some(STALLED)).unwrap();
    (TcpStream::from_std(server), client)
}

fn line(i: usize) -> Vec<u8> {
    let mut line = format!("line {i} ").into_bytes();
    line.resize(LINE, b'a' + (i % 26) as u8);
    line
}

#[test]
fn pongs_from_the_protocol_arrive_and_never_split_an_echoed_line() {
    let (server, client) = pair();
    let mut reader = client.try_clone().unwrap();
    let received = thread::spawn(move || {
        let mut all = Vec::new();
        reader.read_to_end(&mut all).unwrap();
        all
    });
    let mut writer = client;
    let sender = thread::spawn(move || {
        for i in 0..ROUNDS {
            writer.write_all(&line(i)).unwrap();
            writer.write_all(b"\nPING\n").unwrap();
        }
        writer.shutdown(Shutdown::Write).unwrap();
    });

    // Room for every echo: the test is about the lanes, not backpressure.
    let queue = WriteQueueConfig::default().max_bytes(4 << 20).unwrap();
    let mut conn = Conn::with_config(
        server,
        Pings::default(),
        ConnConfig::default().write_queue(queue),
    );
    let mut poll = Poll::new().unwrap();
    conn.set_read_budget(LINE / 4);
    conn.register(poll.registry(), Token(0)).unwrap();
    let (mut events, mut lines, mut encoder) = (Events::with_capacity(8), Vec::new(), Lines::new());
    let mut echoed = 0;
    for _ in 0..1_000_000 {
        if conn.is_finished() {
            break;
        }
        poll.poll(&mut events, Some(STALLED)).unwrap();
        assert!(!events.is_empty(), "the loop stalled");
        for event in &events {
            let mut outcome = conn.on_event(event, &mut lines).unwrap();
            loop {
                for line in lines.drain(..) {
                    conn.conn_mut().push(encoder.encode(line).unwrap()).unwrap();
                    echoed += 1;
                }
                if !outcome.more {
                    break;
                }
                // Write between reads: pongs come while an echo is half out.
                conn.on_writable().unwrap();
                outcome = conn.on_readable(&mut lines).unwrap();
            }
            if outcome.eof {
                conn.close();
            }
            conn.on_writable().unwrap();
            conn.update_registration(poll.registry(), Token(0)).unwrap();
        }
    }
    assert!(conn.is_finished(), "no end");
    assert_eq!(echoed, ROUNDS, "the pings were not handed out");
    sender.join().unwrap();
    let received = received.join().unwrap();

    // Every piece is a whole echoed line, in order, or a pong.
    let pieces: Vec<&[u8]> = received.split(|&b| b == b'\n').collect();
    assert_eq!(
        pieces.last(),
        Some(&&b""[..]),
        "the stream ends after a line"
    );
    let (mut next, mut pongs) = (0, 0);
    for piece in &pieces[..pieces.len() - 1] {
        if *piece == b"PONG" {
            pongs += 1;
        } else {
            assert!(next < ROUNDS, "more lines than were sent");
            assert!(*piece == line(next), "line {next} is not whole");
            next += 1;
        }
    }
    assert_eq!((next, pongs), (ROUNDS, ROUNDS));
}
