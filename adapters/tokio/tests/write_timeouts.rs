//! The connection's timeouts while the same-task `Connection` writes
//! (`send`, `close`): a peer that stops reading is cut off.

use std::time::Duration;

use cleave_proto::conn::Framed;
use cleave_proto::{Bytes, ConnConfig, Encoder, Lines, Timeouts};
use cleave_tokio::{spawn_connection, Connection, FrameReader};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;

/// The README's line server, verbatim but for shorter timeouts (idle
/// 200 ms instead of 60 s, frame 100 ms instead of 5 s).
async fn serve(socket: tokio::io::DuplexStream) -> Result<(), Box<dyn std::error::Error>> {
    let timeouts = Timeouts::default()
        .idle(Some(Duration::from_millis(200)))
        .frame(Some(Duration::from_millis(100)));
    let config = ConnConfig::default().timeouts(timeouts);
    let mut lines = FrameReader::with_config(socket, Lines::new(), config);
    let mut encoder = Lines::new();
    while let Some(line) = lines.next().await {
        lines.send(encoder.encode(line?)?).await?; // queued
    }
    lines.close().await?; // what is left, then a FIN
    Ok(())
}

/// A client that sends lines and never reads its answers: once the
/// server's queue is full its `send` waits for room, nothing moves either
/// way, and the idle timeout must cut the client off ("a client silent
/// for a minute ... is cut off"; the idle timeout "runs while no byte
/// goes either way").
#[tokio::test]
async fn the_readme_server_cuts_off_a_client_that_does_not_read() {
    let (mut client, server) = tokio::io::duplex(4096);
    let writer = tokio::spawn(async move {
        let mut line = vec![b'x'; 1023];
        line.push(b'\n');
        for _ in 0..10_000 {
            if client.write_all(&line).await.is_err() {
                break;
            }
        }
        // Keep the client (its read half unread) open.
        tokio::time::sleep(Duration::from_secs(60)).await;
        drop(client);
    });
    let served = tokio::time::timeout(Duration::from_secs(5), serve(server)).await;
    writer.abort();
    let served =
        served.expect("the server is still held 5 s after the client stopped (idle 200 ms)");
    assert!(served.is_err(), "the idle timeout ends it with an error");
}

/// A server that answers one request and closes: the client half-closes
/// and never reads. The core ends such a connection by its idle timeout
/// (a done protocol's write side is bounded by the idle span), and
/// `close` runs the connection's timers while the socket takes nothing.
#[tokio::test]
async fn close_ends_by_the_idle_timeout_on_a_peer_that_does_not_read() {
    let (mut client, server) = tokio::io::duplex(1024);
    let timeouts = Timeouts::default().idle(Some(Duration::from_millis(200)));
    let config = ConnConfig::default().timeouts(timeouts);
    let mut conn = Connection::with_config(server, Framed::new(Lines::new()), config);
    client.write_all(b"get\n").await.unwrap();
    client.shutdown().await.unwrap(); // then never reads
    assert_eq!(conn.next().await.unwrap().unwrap(), "get");
    conn.send(Bytes::from(vec![b'a'; 256 * 1024]))
        .await
        .unwrap();
    let closed = tokio::time::timeout(Duration::from_secs(5), conn.close()).await;
    drop(client);
    let closed = closed.expect("close still waits 5 s after the idle timeout (200 ms) ran out");
    assert!(closed.is_err(), "not everything went out: not Ok");
}

/// The same scenario through `spawn_connection` ends alike (the driver
/// runs the timers while the handle waits).
#[tokio::test]
async fn the_spawned_driver_ends_the_same_close() {
    let (mut client, server) = tokio::io::duplex(1024);
    let timeouts = Timeouts::default().idle(Some(Duration::from_millis(200)));
    let config = ConnConfig::default().timeouts(timeouts);
    let (mut events, handle, driver) = spawn_connection(server, Framed::new(Lines::new()), config);
    client.write_all(b"get\n").await.unwrap();
    client.shutdown().await.unwrap();
    assert_eq!(events.next().await.unwrap().unwrap(), "get");
    handle
        .send(Bytes::from(vec![b'a'; 256 * 1024]))
        .await
        .unwrap();
    let closed = tokio::time::timeout(Duration::from_secs(5), handle.close()).await;
    drop(client);
    assert!(closed.expect("the spawned driver ends it").is_err());
    drop(driver);
}
