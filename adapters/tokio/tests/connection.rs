//! `Connection` over loopback TCP: a protocol that answers on the urgent
//! lane by itself while the application writes bulk frames, and the
//! connection's timeouts ending silent, idle and trickling peers with the
//! close the protocol chose (a FIN, or a reset with half a frame unread).

use std::io;
use std::time::Duration;

use cleave_proto::conn::{Framed, Phase, Protocol, Wire};
use cleave_proto::{Bytes, ConnConfig, Decoder, Encoder, Error, Lines, Raw, Timeout, Timeouts};
use cleave_tokio::{ConnError, Connection, FrameReader};
use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[path = "support/pairs.rs"]
mod pairs;
use pairs::{pair, small_buffered_pair};

/// A safety net against a stuck test, never what a test asserts.
const STUCK: Duration = Duration::from_secs(30);

/// Lines, where a `PING` line is the protocol's own business: it queues
/// `PONG\n` on the urgent lane and gives the application only the other
/// lines. A stand-in for a WebSocket ping.
#[derive(Debug)]
struct Pinged {
    lines: Framed<Lines>,
    /// Pongs the urgent lane had no room for.
    dropped: usize,
}

impl Protocol for Pinged {
    type Event = Bytes;

    fn poll_event(&mut self, wire: &mut Wire<'_>) -> Result<Option<Bytes>, Error> {
        loop {
            match self.lines.poll_event(wire)? {
                Some(line) if line == "PING" => {
                    if wire.reply(Bytes::from_static(b"PONG\n")).is_err() {
                        self.dropped += 1;
                    }
                }
                other => return Ok(other),
            }
        }
    }

    fn phase(&self) -> Phase {
        self.lines.phase()
    }
}

/// Line `i` of the client: 40 KiB, its number first.
fn big_line(i: usize) -> Vec<u8> {
    let mut line = format!("{i:04} ").into_bytes();
    line.resize(40 * 1024, b'a' + (i % 26) as u8);
    line
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_protocols_urgent_reply_arrives_and_never_splits_a_bulk_frame() {
    const BIG: usize = 30;
    tokio::time::timeout(STUCK, async {
        let (client, server) = small_buffered_pair().await;
        let server = tokio::spawn(async move {
            let protocol = Pinged {
                lines: Framed::new(Lines::new()),
                dropped: 0,
            };
            let mut conn = Connection::new(server, protocol);
            let mut encoder = Lines::new();
            let mut echoed = 0;
            // The application echoes the other lines on the bulk lane.
            while let Some(line) = conn.next().await {
                conn.send(encoder.encode(line.unwrap()).unwrap())
                    .await
                    .unwrap();
                echoed += 1;
            }
            conn.close().await.unwrap();
            (echoed, conn.conn().protocol().dropped)
        });

        let (mut read, mut write) = client.into_split();
        let send = async move {
            for i in 0..BIG {
                let mut line = big_line(i);
                line.extend_from_slice(b"\nPING\n");
                write.write_all(&line).await.unwrap();
            }
            write.shutdown().await.unwrap();
        };
        let receive = async move {
            let mut all = Vec::new();
            read.read_to_end(&mut all).await.unwrap();
            all
        };
        let ((), all) = tokio::join!(send, receive);

        let (mut bulk, mut pongs) = (Vec::new(), 0);
        for line in all.split(|&b| b == b'\n') {
            match line {
                b"PONG" => pongs += 1,
                b"" => {}
                line => bulk.push(line.to_vec()),
            }
        }
        assert_eq!(pongs, BIG, "every ping answered by the protocol");
        assert_eq!(bulk.len(), BIG, "no echoed line cut by a pong");
        for (i, line) in bulk.iter().enumerate() {
            assert!(*line == big_line(i), "line {i} arrived whole and in order");
        }
        let (echoed, dropped) = server.await.unwrap();
        assert_eq!((echoed, dropped), (BIG, 0));
    })
    .await
    .expect("stuck");
}

/// A connection with only these timeouts.
fn with_timeouts(timeouts: Timeouts) -> ConnConfig {
    ConnConfig::default().timeouts(timeouts)
}

/// The stream's final error, which must be `which` timing out, and that
/// the stream ends after it.
async fn assert_timed_out<S, D>(conn: &mut FrameReader<S, D>, which: Timeout)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + cleave_tokio::Reset + Unpin,
    D: Decoder,
    D::Item: std::fmt::Debug,
{
    match conn.next().await {
        Some(Err(ConnError::Protocol(Error::TimedOut(t)))) => assert_eq!(t, which),
        other => panic!("{other:?}"),
    }
    assert!(conn.next().await.is_none(), "nothing after the final error");
}

#[tokio::test]
async fn a_silent_client_is_ended_by_the_opening_timeout_with_a_fin() {
    tokio::time::timeout(STUCK, async {
        let (mut client, server) = pair().await;
        let timeouts = Timeouts::default().opening(Some(Duration::from_millis(100)));
        let mut conn = FrameReader::with_config(server, Lines::new(), with_timeouts(timeouts));
        assert_timed_out(&mut conn, Timeout::Opening).await;
        assert_eq!(conn.get_ref().linger().unwrap(), None, "no reset");
        drop(conn);
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap(); // a clean end
        assert!(rest.is_empty());
    })
    .await
    .expect("stuck");
}

#[tokio::test]
async fn an_idle_client_is_ended_by_the_idle_timeout_after_its_answer() {
    tokio::time::timeout(STUCK, async {
        let (mut client, server) = pair().await;
        let timeouts = Timeouts::default().idle(Some(Duration::from_millis(150)));
        let mut conn = FrameReader::with_config(server, Lines::new(), with_timeouts(timeouts));
        client.write_all(b"hello\n").await.unwrap();
        assert_eq!(conn.next().await.unwrap().unwrap(), "hello");
        conn.send(Bytes::from_static(b"hi\n")).await.unwrap();
        // Then the client says nothing more.
        assert_timed_out(&mut conn, Timeout::Idle).await;
        drop(conn);
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"hi\n", "the answer, then a clean end");
    })
    .await
    .expect("stuck");
}

#[tokio::test]
async fn a_trickling_client_is_ended_by_the_frame_timeout_with_a_reset() {
    tokio::time::timeout(STUCK, async {
        let (client, server) = pair().await;
        let timeouts = Timeouts::default()
            .idle(Some(Duration::from_secs(5)))
            .frame(Some(Duration::from_millis(200)));
        let mut conn = FrameReader::with_config(server, Lines::new(), with_timeouts(timeouts));
        let (mut read, mut write) = client.into_split();
        // One byte every 20 ms, never a whole line: the idle timeout never
        // runs out, the frame timeout does.
        let trickle = tokio::spawn(async move {
            for _ in 0..1000 {
                if write.write_all(b"x").await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        assert_timed_out(&mut conn, Timeout::Frame).await;
        assert_eq!(
            conn.get_ref().linger().unwrap(),
            Some(Duration::ZERO),
            "half a line unread: the close is a reset"
        );
        drop(conn);
        let mut buf = [0; 16];
        let end = read.read(&mut buf).await;
        assert_eq!(
            end.expect_err("a reset, not a clean end").kind(),
            io::ErrorKind::ConnectionReset
        );
        trickle.abort();
    })
    .await
    .expect("stuck");
}

#[tokio::test]
async fn a_switch_hands_the_unread_bytes_to_the_next_protocol() {
    tokio::time::timeout(STUCK, async {
        let (mut client, server) = pair().await;
        client.write_all(b"RAW\nbytes\x00as").await.unwrap();
        let mut lines = Connection::new(server, Framed::new(Lines::new()));
        assert_eq!(lines.next().await.unwrap().unwrap(), "RAW");
        let mut raw = lines.switch(|_| Raw::new());
        client.write_all(b" they come").await.unwrap();
        client.shutdown().await.unwrap();
        let mut got = Vec::new();
        while let Some(chunk) = raw.next().await {
            got.extend_from_slice(&chunk.unwrap());
        }
        assert_eq!(got, b"bytes\x00as they come");
    })
    .await
    .expect("stuck");
}

/// Lines with a deadline of its own that it never moves: it polls the
/// clock and ignores it. Past `SPIN` polls it gives the deadline up, so
/// that a driver that fires the same deadline again and again is caught
/// rather than stuck.
#[derive(Debug)]
struct Stubborn {
    lines: Framed<Lines>,
    polls: usize,
}

const SPIN: usize = 10_000;

impl Protocol for Stubborn {
    type Event = Bytes;

    fn poll_event(&mut self, wire: &mut Wire<'_>) -> Result<Option<Bytes>, Error> {
        self.polls += 1;
        self.lines.poll_event(wire)
    }

    fn phase(&self) -> Phase {
        self.lines.phase()
    }

    fn poll_timeout(&self) -> Option<Duration> {
        (self.polls < SPIN).then_some(Duration::from_millis(20))
    }
}

#[tokio::test]
async fn a_deadline_the_protocol_leaves_in_place_fires_once() {
    tokio::time::timeout(STUCK, async {
        let (mut client, server) = pair().await;
        let stubborn = Stubborn {
            lines: Framed::new(Lines::new()),
            polls: 0,
        };
        let mut conn = Connection::new(server, stubborn);
        let late = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            client.write_all(b"late\n").await.unwrap();
            client
        };
        let (line, _client) = tokio::join!(conn.next(), late);
        assert_eq!(line.unwrap().unwrap(), "late");
        let polls = conn.conn().protocol().polls;
        // Once at the start, once for the deadline, once or twice for the
        // line: not once per turn of a spinning driver.
        assert!(polls < 10, "the protocol was polled {polls} times");
    })
    .await
    .expect("stuck");
}

/// With `release_after`, a connection keeps its read block between
/// exchanges that come sooner, and gives it back once quiet that long:
/// the connection's own timer does it, with no read or write to wake it.
#[tokio::test]
async fn a_quiet_connection_gives_its_buffers_back_after_its_release_delay() {
    tokio::time::timeout(STUCK, async {
        let (mut client, server) = pair().await;
        let config = ConnConfig::default().release_after(Duration::from_millis(300));
        let mut conn = Connection::with_config(server, Framed::new(Lines::new()), config);
        for line in ["one", "two"] {
            client
                .write_all(format!("{line}\n").as_bytes())
                .await
                .unwrap();
            assert_eq!(conn.next().await.unwrap().unwrap(), line);
            conn.send(Bytes::from(format!("{line}!\n"))).await.unwrap();
            conn.flush().await.unwrap();
            assert!(
                conn.conn().recv_buf().capacity() > 0,
                "kept across the exchange and its flush"
            );
        }
        let mut answers = [0u8; 10];
        client.read_exact(&mut answers).await.unwrap();
        assert_eq!(&answers, b"one!\ntwo!\n");
        // Then quiet: the wait for the next line runs past the delay.
        let waited = tokio::time::timeout(Duration::from_millis(1200), conn.next()).await;
        assert!(waited.is_err(), "no line came");
        assert_eq!(conn.conn().recv_buf().capacity(), 0, "given back");
        assert_eq!(conn.conn().poll_timeout(), None, "and no deadline after");
        // The connection is as good as before.
        client.write_all(b"three\n").await.unwrap();
        assert_eq!(conn.next().await.unwrap().unwrap(), "three");
    })
    .await
    .expect("stuck");
}

/// A client busier than the idle timeout is never cut, though its
/// deadline moves at every line (the timer armed for an earlier one
/// fires, finds it moved on and waits again); once it goes quiet, the
/// idle timeout ends it.
#[tokio::test]
async fn a_client_busier_than_the_idle_timeout_is_kept_then_cut_when_quiet() {
    tokio::time::timeout(STUCK, async {
        let (mut client, server) = pair().await;
        let timeouts = Timeouts::default().idle(Some(Duration::from_millis(200)));
        let mut conn = FrameReader::with_config(server, Lines::new(), with_timeouts(timeouts));
        let writer = tokio::spawn(async move {
            for i in 0..12 {
                client.write_all(format!("{i}\n").as_bytes()).await.unwrap();
                tokio::time::sleep(Duration::from_millis(60)).await;
            }
            client
        });
        for i in 0..12 {
            assert_eq!(conn.next().await.unwrap().unwrap(), i.to_string());
        }
        let _client = writer.await.unwrap();
        assert_timed_out(&mut conn, Timeout::Idle).await;
    })
    .await
    .expect("stuck");
}
