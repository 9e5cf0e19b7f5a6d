//! cleave-tokio over real loopback TCP: many connections in random
//! fragments, a peer that closes mid-frame or resets, a slow reader, a
//! silent client, clean shutdown, the three write drivers under
//! backpressure.

use std::time::Duration;

use cleave_proto::route::{Match, Reason, Router, RouterConfig};
use cleave_proto::{
    Bytes, ConnConfig, Error, Event, Lines, Session, SessionConfig, WriteQueueConfig,
};
use cleave_tokio::{
    spawn_writer, tunnel, ConnError, FrameReader, SessionReader, WriteError, Writer,
};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[path = "support/pairs.rs"]
mod pairs;
use pairs::pair;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_connections_in_random_fragments() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    const CONNECTIONS: usize = 64;
    const LINES: usize = 50;
    let server = tokio::spawn(async move {
        let mut tasks = Vec::new();
        for _ in 0..CONNECTIONS {
            let (socket, _) = listener.accept().await.unwrap();
            tasks.push(tokio::spawn(async move {
                let session = Session::framed(
                    lines_router(),
                    Lines::new(),
                    |l: &Bytes| &l[..] == b"TUNNEL",
                    SessionConfig::default(),
                );
                let mut events = SessionReader::new(socket, session);
                let (mut frames, mut raw) = (Vec::new(), Vec::new());
                while let Some(event) = events.next().await {
                    match event.unwrap() {
                        Event::Frame(f) => frames.push(f),
                        Event::Tunnel(b) => raw.extend_from_slice(&b),
                        _ => {}
                    }
                }
                (frames, raw)
            }));
        }
        let mut results = Vec::new();
        for t in tasks {
            results.push(t.await.unwrap());
        }
        results
    });
    let mut clients = Vec::new();
    for c in 0..CONNECTIONS {
        clients.push(tokio::spawn(async move {
            let mut rng = XorShift(c as u64 * 7919 + 1);
            let mut wire = Vec::new();
            for i in 0..LINES {
                wire.extend_from_slice(
                    format!("LINE {c} {i} {}\r\n", "x".repeat(rng.below(40))).as_bytes(),
                );
            }
            wire.extend_from_slice(b"TUNNEL\n");
            wire.extend_from_slice(&vec![c as u8; 3000]);
            let mut socket = TcpStream::connect(addr).await.unwrap();
            socket.set_nodelay(true).unwrap();
            let mut rest = &wire[..];
            while !rest.is_empty() {
                let n = 1 + rng.below(rest.len().min(97));
                socket.write_all(&rest[..n]).await.unwrap();
                rest = &rest[n..];
                if rng.below(4) == 0 {
                    tokio::task::yield_now().await;
                }
            }
            socket.shutdown().await.unwrap();
        }));
    }
    for c in clients {
        c.await.unwrap();
    }
    let results = server.await.unwrap();
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
        assert_eq!(
            raw,
            vec![c as u8; 3000],
            "the raw tail and the rest, nothing lost"
        );
    }
}

#[tokio::test]
async fn a_peer_that_closes_mid_frame_gives_the_partial_bytes_back() {
    let (mut client, server) = pair().await;
    client.write_all(b"one\ntwo\nthr").await.unwrap();
    client.shutdown().await.unwrap();
    let got: Vec<_> = FrameReader::new(server, Lines::new()).collect().await;
    assert_eq!(got.len(), 3);
    assert_eq!(&got[1].as_ref().unwrap()[..], b"two");
    match &got[2] {
        Err(ConnError::Protocol(Error::Truncated { partial, offset })) => {
            assert_eq!((&partial[..], *offset), (&b"thr"[..], 8));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_peer_reset_is_an_io_error() {
    let (client, server) = pair().await;
    let mut client = client.into_std().unwrap();
    std::io::Write::write_all(&mut client, b"partial li").unwrap();
    let client = socket_with_linger_zero(client);
    drop(client); // RST
    let mut reader = FrameReader::new(server, Lines::new());
    match reader.next().await {
        Some(Err(ConnError::Io(e))) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset),
        // Some stacks deliver the bytes and a clean end before the reset.
        Some(Err(ConnError::Protocol(Error::Truncated { partial, .. }))) => {
            assert_eq!(&partial[..], b"partial li")
        }
        other => panic!("{other:?}"),
    }
}

/// Sets SO_LINGER to zero so that closing sends a RST.
fn socket_with_linger_zero(stream: std::net::TcpStream) -> TcpStream {
    let stream = TcpStream::from_std(stream).unwrap();
    stream.set_zero_linger().unwrap();
    stream
}

#[tokio::test]
async fn a_slow_reader_makes_send_wait_instead_of_growing_memory() {
    // Small socket buffers, so the kernel cannot absorb what the queue
    // should hold back.
    let listener = tokio::net::TcpSocket::new_v4().unwrap();
    listener.set_recv_buffer_size(16 * 1024).unwrap();
    listener.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = listener.listen(1).unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_send_buffer_size(16 * 1024).unwrap();
    let (client, server) = tokio::join!(
        socket.connect(listener.local_addr().unwrap()),
        listener.accept()
    );
    let (client, mut server) = (client.unwrap(), server.unwrap().0);
    let config = WriteQueueConfig::default().max_bytes(64 * 1024).unwrap();
    let (handle, task) = spawn_writer(client, config);
    let chunk = Bytes::from(vec![7u8; 16 * 1024]);
    // Nobody reads: the socket buffers fill, then the queue; send waits.
    let producer = {
        let handle = handle.clone();
        let chunk = chunk.clone();
        tokio::spawn(async move {
            for _ in 0..256 {
                handle.send(chunk.clone()).await.unwrap();
                assert!(
                    handle.pending_bytes() <= 64 * 1024 + 16 * 1024,
                    "{}",
                    handle.pending_bytes()
                );
            }
            handle.close().await.unwrap();
        })
    };
    // Wait until the producer is blocked on a full queue.
    while handle.pending_bytes() + 16 * 1024 <= 64 * 1024 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(!producer.is_finished(), "send went past the limit");
    // Now read everything: the producer finishes, nothing lost.
    let mut received = Vec::new();
    server.read_to_end(&mut received).await.unwrap();
    producer.await.unwrap();
    task.await.unwrap().unwrap();
    assert_eq!(received.len(), 256 * 16 * 1024);
    assert!(received.iter().all(|&b| b == 7));
}

#[tokio::test(start_paused = true)]
async fn a_silent_client_is_routed_by_the_fallback_at_the_deadline() {
    let (mut client, server) = pair().await;
    client.write_all(b"GET / HT").await.unwrap(); // and then nothing
    let router = Router::with_config(
        "fallback",
        RouterConfig::default().inspect_delay(Duration::from_secs(3)),
    )
    .rule(Match::Http, "web");
    let mut events = SessionReader::new(server, Session::tunnel(router, SessionConfig::default()));
    let started = tokio::time::Instant::now();
    match events.next().await.unwrap().unwrap() {
        Event::Routed(decision) => {
            assert_eq!(
                (decision.target, decision.reason),
                ("fallback", Reason::DeadlinePassed)
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "routed before the deadline"
    );
    assert_eq!(
        events.next().await.unwrap().unwrap(),
        Event::Tunnel("GET / HT".into())
    );
}

#[tokio::test]
async fn an_inspect_delay_past_what_instant_holds_means_no_deadline() {
    let (mut client, server) = pair().await;
    client.write_all(b"GET / HT").await.unwrap();
    // "Never decide by the clock."
    let router = Router::with_config(
        "fallback",
        RouterConfig::default().inspect_delay(Duration::MAX),
    )
    .rule(Match::Http, "web");
    let mut events = SessionReader::new(server, Session::tunnel(router, SessionConfig::default()));
    let waited = tokio::time::timeout(Duration::from_millis(50), events.next()).await;
    assert!(waited.is_err(), "no decision without the rest: {waited:?}");
    client
        .write_all(b"TP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    match events.next().await.unwrap().unwrap() {
        Event::Routed(decision) => assert_eq!(decision.target, "web"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn clean_shutdown_writes_everything_pushed_and_tickets_complete_in_order() {
    let (client, mut server) = pair().await;
    let (handle, task) = spawn_writer(client, WriteQueueConfig::default());
    let mut tickets = Vec::new();
    for i in 0..1000u32 {
        tickets.push(
            handle
                .try_send(Bytes::from(i.to_be_bytes().to_vec()))
                .unwrap(),
        );
    }
    let reader = tokio::spawn(async move {
        let mut all = Vec::new();
        server.read_to_end(&mut all).await.unwrap();
        all
    });
    for ticket in tickets {
        handle.written(ticket).await.unwrap();
    }
    handle.flush().await.unwrap();
    handle.close().await.unwrap();
    task.await.unwrap().unwrap();
    let all = reader.await.unwrap();
    let expected: Vec<u8> = (0..1000u32).flat_map(|i| i.to_be_bytes()).collect();
    assert_eq!(all, expected);
    let late = handle.send(Bytes::from_static(b"late")).await.unwrap_err();
    assert!(matches!(late.error(), WriteError::Closed));
    assert_eq!(late.into_value(), "late", "the bytes come back");
}

#[tokio::test]
async fn the_handle_is_a_sink() {
    let (client, mut server) = pair().await;
    let config = WriteQueueConfig::default().max_items(4).unwrap();
    let (mut handle, task) = spawn_writer(client, config);
    let reader = tokio::spawn(async move {
        let mut all = Vec::new();
        server.read_to_end(&mut all).await.unwrap();
        all
    });
    for i in 0..100u8 {
        handle.send(Bytes::from(vec![i])).await.unwrap();
    }
    SinkExt::close(&mut handle).await.unwrap();
    task.await.unwrap().unwrap();
    assert_eq!(reader.await.unwrap(), (0..100u8).collect::<Vec<_>>());
}

#[tokio::test]
async fn same_task_writer_and_tunnel_lose_nothing() {
    // client -> proxy (session: lines, then TUNNEL, then raw) -> backend
    let (mut client, proxy_in) = pair().await;
    let (proxy_out, mut backend) = pair().await;
    let proxy = tokio::spawn(async move {
        let session = Session::framed(
            lines_router(),
            Lines::new(),
            |l: &Bytes| &l[..] == b"TUNNEL",
            SessionConfig::default(),
        );
        let mut events = SessionReader::new(proxy_in, session);
        let mut out = Writer::new(proxy_out);
        while let Some(event) = events.next().await {
            match event.unwrap() {
                Event::Frame(line) => {
                    out.push(line).unwrap();
                    out.push(Bytes::from_static(b"\n")).unwrap();
                }
                Event::Tunnel(tail) => {
                    out.flush().await.unwrap();
                    let (mut client, _) = events.into_parts();
                    let (mut backend, _) = out.into_parts();
                    return tunnel(&mut client, &mut backend, tail).await.unwrap();
                }
                _ => {}
            }
        }
        unreachable!("no tunnel");
    });
    let raw: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let mut wire = b"LINE a\nLINE b\r\nTUNNEL\n".to_vec();
    wire.extend_from_slice(&raw);
    let sender = tokio::spawn(async move {
        for piece in wire.chunks(777) {
            client.write_all(piece).await.unwrap();
        }
        client.shutdown().await.unwrap(); // half-close: the reply still comes
        let mut reply = Vec::new();
        client.read_to_end(&mut reply).await.unwrap();
        reply
    });
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = backend.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    backend.write_all(b"bye").await.unwrap();
    backend.shutdown().await.unwrap();
    let (up, down) = proxy.await.unwrap();
    let mut expected = b"LINE a\nLINE b\nTUNNEL\n".to_vec();
    expected.extend_from_slice(&raw);
    assert_eq!(got, expected);
    assert_eq!((up, down), (raw.len() as u64, 3));
    assert_eq!(sender.await.unwrap(), b"bye");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_waits_for_room_on_every_driver_and_frames_arrive_whole() {
    use cleave_proto::{Encoder, LengthPrefixed};
    // A queue far smaller than what is sent: every driver must wait.
    let config = WriteQueueConfig::default()
        .max_items(4)
        .unwrap()
        .max_bytes(4 * 1024)
        .unwrap();
    let bodies: Vec<Bytes> = (0..300u32)
        .map(|i| Bytes::from(vec![(i % 251) as u8; (i as usize * 37) % 3000 + 1]))
        .collect();

    // Same task.
    let (client, server) = pair().await;
    let reader = tokio::spawn(async move {
        FrameReader::new(server, LengthPrefixed::new())
            .map(|frame| frame.unwrap())
            .collect::<Vec<_>>()
            .await
    });
    let mut writer = Writer::with_config(client, config);
    let mut codec = LengthPrefixed::new();
    for body in &bodies {
        writer
            .send(codec.encode(body.clone()).unwrap())
            .await
            .unwrap();
        assert!(writer.queue().len() <= 4 * 1024 + 3000 + 4);
    }
    writer.close().await.unwrap();
    assert_eq!(reader.await.unwrap(), bodies);

    // Same task, on a connection that also reads.
    let (client, server) = pair().await;
    let reader = tokio::spawn(async move {
        FrameReader::new(server, LengthPrefixed::new())
            .map(|frame| frame.unwrap())
            .collect::<Vec<_>>()
            .await
    });
    let mut conn = FrameReader::with_config(
        client,
        LengthPrefixed::new(),
        ConnConfig::default().write_queue(config),
    );
    for body in &bodies {
        conn.send(codec.encode(body.clone()).unwrap())
            .await
            .unwrap();
        assert!(conn.conn().queue().len() <= 4 * 1024 + 3000 + 4);
    }
    conn.close().await.unwrap();
    assert_eq!(reader.await.unwrap(), bodies);
    assert!(conn.next().await.is_none(), "the peer ended too");

    // Cross task.
    let (client, server) = pair().await;
    let reader = tokio::spawn(async move {
        FrameReader::new(server, LengthPrefixed::new())
            .map(|frame| frame.unwrap())
            .collect::<Vec<_>>()
            .await
    });
    let (handle, task) = spawn_writer(client, config);
    let mut last = None;
    for body in &bodies {
        last = Some(
            handle
                .send(codec.encode(body.clone()).unwrap())
                .await
                .unwrap(),
        );
    }
    handle.written(last.unwrap()).await.unwrap();
    handle.close().await.unwrap();
    task.await.unwrap().unwrap();
    assert_eq!(reader.await.unwrap(), bodies);
}

#[tokio::test]
async fn next_buffered_gives_what_arrived_together_without_reading() {
    let (mut client, server) = pair().await;
    let mut lines = FrameReader::new(server, Lines::new());
    client.write_all(b"one\ntwo\nthree\nfou").await.unwrap();
    assert_eq!(lines.next().await.unwrap().unwrap(), "one");
    // The rest of that read is buffered (a 17-byte write on loopback
    // arrives whole).
    assert_eq!(lines.next_buffered().unwrap().unwrap(), "two");
    assert_eq!(lines.next_buffered().unwrap().unwrap(), "three");
    assert!(lines.next_buffered().is_none(), "\"fou\" is not a line yet");
    client.write_all(b"r\n").await.unwrap();
    client.shutdown().await.unwrap();
    assert_eq!(lines.next().await.unwrap().unwrap(), "four");
    assert!(lines.next().await.is_none());
    assert!(lines.next_buffered().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checked_frames_cross_the_loopback_and_a_bad_one_is_stopped_or_skipped() {
    use cleave_proto::{BadChecksum, Checked, Checksum, ChecksumMismatch, Encoder, InvalidInput};
    let bodies: Vec<Bytes> = (0..200u32)
        .map(|i| Bytes::from(vec![(i % 251) as u8; (i as usize * 97) % 20_000]))
        .collect();
    let mut codec = Checked::new(Checksum::Crc32).unwrap();
    // The third frame's payload, corrupted on the wire after encoding.
    let frames: Vec<Vec<u8>> = bodies
        .iter()
        .map(|b| {
            let f = codec.encode(b.clone()).unwrap();
            [f.head(), f.body()].concat()
        })
        .collect();
    let mut corrupt = frames.clone();
    let bad = &mut corrupt[2];
    let last = bad.len() - 1;
    bad[last] ^= 1;

    // Written through a `Writer` that encodes with the same codec: the
    // reader gets every payload back.
    let (client, server) = pair().await;
    let reader = tokio::spawn(async move {
        FrameReader::new(server, Checked::new(Checksum::Crc32).unwrap())
            .map(|frame| frame.unwrap())
            .collect::<Vec<_>>()
            .await
    });
    let mut writer = Writer::new(client);
    for body in &bodies {
        writer
            .send(codec.encode(body.clone()).unwrap())
            .await
            .unwrap();
    }
    writer.close().await.unwrap();
    assert_eq!(reader.await.unwrap(), bodies);

    // Stop (the default): the two good frames, then the typed error.
    let (mut client, server) = pair().await;
    let wire = corrupt.concat();
    let sender = tokio::spawn(async move {
        client.write_all(&wire).await.unwrap();
        client.shutdown().await.unwrap();
    });
    let mut reader = FrameReader::new(server, Checked::new(Checksum::Crc32).unwrap());
    for body in &bodies[..2] {
        assert_eq!(&reader.next().await.unwrap().unwrap(), body);
    }
    match reader.next().await.unwrap() {
        Err(ConnError::Protocol(Error::InvalidInput {
            kind: InvalidInput::Checksum(ChecksumMismatch { checksum, .. }),
            offset,
        })) => {
            assert_eq!(checksum, Checksum::Crc32);
            assert_eq!(offset, (frames[0].len() + frames[1].len()) as u64);
        }
        other => panic!("{other:?}"),
    }
    sender.await.unwrap();

    // Skip: every frame, the bad one as a `BadChecksum` with its payload.
    let (mut client, server) = pair().await;
    let wire = corrupt.concat();
    let sender = tokio::spawn(async move {
        client.write_all(&wire).await.unwrap();
        client.shutdown().await.unwrap();
    });
    let skipping = Checked::new(Checksum::Crc32).unwrap().skip_mismatched();
    let got: Vec<Result<Bytes, BadChecksum>> = FrameReader::new(server, skipping)
        .map(|item| item.unwrap())
        .collect()
        .await;
    sender.await.unwrap();
    assert_eq!(got.len(), bodies.len());
    for (i, (item, body)) in got.iter().zip(&bodies).enumerate() {
        match item {
            Ok(payload) => assert!(i != 2 && payload == body, "frame {i}"),
            Err(bad) => {
                assert_eq!(i, 2);
                assert_eq!(bad.payload.len(), body.len());
                assert_ne!(bad.payload, body);
            }
        }
    }
}
