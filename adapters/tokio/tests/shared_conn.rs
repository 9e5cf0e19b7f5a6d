//! `spawn_connection` over loopback TCP: many tasks write into the queue a
//! protocol answers on, tickets and flushes, a clean close, and a timeout
//! that ends the connection under waiting senders.

use std::time::Duration;

use cleave_proto::conn::{Framed, Phase, Protocol, Wire};
use cleave_proto::{Bytes, ConnConfig, Error, Lines, Timeout, Timeouts, WriteQueueConfig};
use cleave_tokio::{spawn_connection, ConnError, WriteError};
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
}

impl Protocol for Pinged {
    type Event = Bytes;

    fn poll_event(&mut self, wire: &mut Wire<'_>) -> Result<Option<Bytes>, Error> {
        loop {
            match self.lines.poll_event(wire)? {
                Some(line) if line == "PING" => {
                    // The urgent lane's default limits hold every pong here.
                    wire.reply(Bytes::from_static(b"PONG\n")).unwrap();
                }
                other => return Ok(other),
            }
        }
    }

    fn phase(&self) -> Phase {
        self.lines.phase()
    }
}

/// Line `n` of task `task`: 20 KiB, both numbers first.
fn task_line(task: usize, n: usize) -> Vec<u8> {
    let mut line = format!("{task} {n:04} ").into_bytes();
    line.resize(20 * 1024, b'a' + ((task + n) % 26) as u8);
    line.push(b'\n');
    line
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pongs_and_pushes_from_many_tasks_share_one_queue_and_arrive_whole() {
    const TASKS: usize = 4;
    const LINES: usize = 40;
    const PINGS: usize = 60;
    tokio::time::timeout(STUCK, async {
        let (client, server) = small_buffered_pair().await;
        let protocol = Pinged {
            lines: Framed::new(Lines::new()),
        };
        let (mut events, handle, driver) =
            spawn_connection(server, protocol, ConnConfig::default());
        let pushers: Vec<_> = (0..TASKS)
            .map(|task| {
                let handle = handle.clone();
                tokio::spawn(async move {
                    for n in 0..LINES {
                        let line = Bytes::from(task_line(task, n));
                        handle.send(line).await.unwrap();
                    }
                })
            })
            .collect();
        // The application reads the other lines (there are none but one).
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(line) = events.next().await {
                got.push(line.unwrap());
            }
            got
        });

        let (mut read, mut write) = client.into_split();
        let ping = tokio::spawn(async move {
            for _ in 0..PINGS {
                write.write_all(b"PING\n").await.unwrap();
                tokio::task::yield_now().await;
            }
            write.write_all(b"bye\n").await.unwrap();
            write.shutdown().await.unwrap();
        });
        let receive = tokio::spawn(async move {
            let mut all = Vec::new();
            read.read_to_end(&mut all).await.unwrap();
            all
        });

        for pusher in pushers {
            pusher.await.unwrap();
        }
        ping.await.unwrap();
        assert_eq!(
            reader.await.unwrap(),
            ["bye"],
            "pings never reach the application"
        );
        handle.close().await.unwrap();
        let all = receive.await.unwrap();
        driver.await.unwrap().unwrap();

        let mut pongs = 0;
        let mut next = [0; TASKS];
        for line in all.split_inclusive(|&b| b == b'\n') {
            if line == b"PONG\n" {
                pongs += 1;
                continue;
            }
            let head = std::str::from_utf8(&line[..7]).unwrap();
            let task: usize = head[..1].parse().unwrap();
            assert!(
                line == task_line(task, next[task]),
                "task {task}'s line {} arrived whole and in order",
                next[task]
            );
            next[task] += 1;
        }
        assert_eq!(pongs, PINGS, "every ping answered");
        assert_eq!(next, [LINES; TASKS], "every line arrived");
    })
    .await
    .expect("stuck");
}

#[tokio::test]
async fn tickets_flush_and_close_end_with_a_fin_and_an_ok_driver() {
    tokio::time::timeout(STUCK, async {
        let (mut client, server) = pair().await;
        let protocol = Framed::new(Lines::new());
        let (mut events, handle, driver) =
            spawn_connection(server, protocol, ConnConfig::default());
        client.write_all(b"hello\n").await.unwrap();
        assert_eq!(events.next().await.unwrap().unwrap(), "hello");

        let ticket = handle.try_send(Bytes::from_static(b"one\n")).unwrap();
        handle.written(ticket).await.unwrap();
        let other = handle.clone();
        tokio::spawn(async move {
            other.send(Bytes::from_static(b"two\n")).await.unwrap();
            other.flush().await.unwrap(); // else the urgent item goes first
            other
                .try_send_urgent(Bytes::from_static(b"three\n"))
                .unwrap();
            other.flush().await.unwrap();
        })
        .await
        .unwrap();
        assert_eq!(handle.pending_bytes(), 0, "flushed");
        handle.close().await.unwrap();
        assert!(handle.is_closed());
        let late = handle
            .send(Bytes::from_static(b"late\n"))
            .await
            .unwrap_err();
        assert!(matches!(late.error(), WriteError::Closed));
        assert_eq!(late.into_value(), "late\n", "the item comes back");

        let mut got = String::new();
        client.read_to_string(&mut got).await.unwrap(); // up to the FIN
        assert_eq!(got, "one\ntwo\nthree\n");
        // The peer ends too: no more events, and the driver ends well.
        client.shutdown().await.unwrap();
        assert!(events.next().await.is_none());
        driver.await.unwrap().unwrap();
    })
    .await
    .expect("stuck");
}

#[tokio::test]
async fn dropping_the_events_and_every_handle_closes_cleanly() {
    tokio::time::timeout(STUCK, async {
        let (mut client, server) = pair().await;
        let (events, handle, driver) =
            spawn_connection(server, Framed::new(Lines::new()), ConnConfig::default());
        let other = handle.clone();
        handle.try_send(Bytes::from_static(b"a\n")).unwrap();
        other.try_send(Bytes::from_static(b"b\n")).unwrap();
        drop((events, handle));
        other.try_send(Bytes::from_static(b"c\n")).unwrap();
        drop(other);
        let mut got = String::new();
        client.read_to_string(&mut got).await.unwrap(); // a clean end
        assert_eq!(got, "a\nb\nc\n");
        // What the client says now is read and dropped by the driver.
        client.write_all(b"ignored\n").await.unwrap();
        client.shutdown().await.unwrap();
        driver.await.unwrap().unwrap();
    })
    .await
    .expect("stuck");
}

#[tokio::test]
async fn without_the_events_the_protocol_still_answers() {
    tokio::time::timeout(STUCK, async {
        let (mut client, server) = pair().await;
        let protocol = Pinged {
            lines: Framed::new(Lines::new()),
        };
        let (events, handle, driver) = spawn_connection(server, protocol, ConnConfig::default());
        drop(events);
        client
            .write_all(b"PING\nnobody reads this\nPING\n")
            .await
            .unwrap();
        let mut pongs = [0; 10];
        client.read_exact(&mut pongs).await.unwrap();
        assert_eq!(&pongs, b"PONG\nPONG\n");
        handle.close().await.unwrap();
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap(); // the FIN
        assert!(rest.is_empty());
        client.shutdown().await.unwrap();
        driver.await.unwrap().unwrap();
    })
    .await
    .expect("stuck");
}

#[tokio::test]
async fn the_idle_timeout_ends_the_connection_and_fails_waiting_senders() {
    tokio::time::timeout(STUCK, async {
        // The client never reads: the socket fills, then the queue (one
        // item), then senders wait, and nothing moves either way.
        let (client, server) = small_buffered_pair().await;
        let timeouts = Timeouts::default().idle(Some(Duration::from_millis(200)));
        let config = ConnConfig::default()
            .timeouts(timeouts)
            .write_queue(WriteQueueConfig::default().max_items(1).unwrap());
        let (mut events, handle, driver) =
            spawn_connection(server, Framed::new(Lines::new()), config);
        let senders: Vec<_> = (0..3)
            .map(|_| {
                let handle = handle.clone();
                tokio::spawn(async move {
                    let mut sent = 0usize;
                    // Bounded: 4 MiB per sender, far past what the
                    // sockets hold.
                    for _ in 0..64 {
                        match handle.send(Bytes::from(vec![b'x'; 64 * 1024])).await {
                            Ok(_) => sent += 1,
                            Err(rejected) => return (sent, Some(rejected.into_parts().0)),
                        }
                    }
                    (sent, None)
                })
            })
            .collect();

        match events.next().await {
            Some(Err(ConnError::Protocol(Error::TimedOut(t)))) => assert_eq!(t, Timeout::Idle),
            other => panic!("{other:?}"),
        }
        assert!(
            events.next().await.is_none(),
            "nothing after the final error"
        );
        for sender in senders {
            let (_, error) = sender.await.unwrap();
            assert!(
                matches!(error, Some(WriteError::Closed)),
                "a waiting send fails: {error:?}"
            );
        }
        // Nobody is left to wait for a client that never reads.
        drop((events, handle));
        match driver.await.unwrap() {
            Err(ConnError::Protocol(Error::TimedOut(Timeout::Idle))) => {}
            other => panic!("{other:?}"),
        }
        drop(client);
    })
    .await
    .expect("stuck");
}
