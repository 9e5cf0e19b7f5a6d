//! `ConnHandle::flush` after the peer's reset: it fails only for bytes the
//! failure dropped. A reset read after everything queued was written and
//! flushed dropped nothing, and a flush asked for then is `Ok`; one read
//! while bytes were still queued dropped them, and a flush then fails
//! with the socket's error.

use std::time::Duration;

use cleave_proto::conn::Framed;
use cleave_proto::{Bytes, ConnConfig, Lines, WriteError};
use cleave_tokio::{spawn_connection, ConnError};
use futures_util::StreamExt;
use tokio::io::AsyncReadExt;

#[path = "support/pairs.rs"]
mod pairs;
use pairs::{pair, small_buffered_pair};

const STUCK: Duration = Duration::from_secs(20);

#[tokio::test]
async fn a_flush_after_a_read_reset_that_dropped_nothing_is_ok() {
    tokio::time::timeout(STUCK, async {
        let (mut client, server) = pair().await;
        let (mut events, handle, driver) =
            spawn_connection(server, Framed::new(Lines::new()), ConnConfig::default());
        handle.send(Bytes::from_static(b"hi\n")).await.unwrap();
        handle.flush().await.unwrap();
        let mut got = [0u8; 3];
        client.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"hi\n", "everything queued went out");

        // The peer resets; the driver reads the reset.
        client.set_zero_linger().unwrap();
        drop(client);
        match events.next().await {
            Some(Err(ConnError::Io(_))) => {}
            other => panic!("expected the reset as an I/O error, got {other:?}"),
        }
        assert_eq!(
            handle.pending_bytes(),
            0,
            "nothing was queued, nothing dropped"
        );
        let flushed = handle.flush().await;
        assert!(
            flushed.is_ok(),
            "a flush with nothing queued and nothing dropped: {flushed:?}"
        );
        let _ = driver.await;
    })
    .await
    .expect("stuck");
}

#[tokio::test]
async fn a_flush_after_a_reset_that_dropped_queued_bytes_fails() {
    tokio::time::timeout(STUCK, async {
        let (client, server) = small_buffered_pair().await;
        let (mut events, handle, driver) =
            spawn_connection(server, Framed::new(Lines::new()), ConnConfig::default());
        // More than the sockets hold: the client does not read.
        handle.send(Bytes::from(vec![b'a'; 1 << 20])).await.unwrap();
        while handle.pending_bytes() == 1 << 20 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }

        // The peer resets with most of it still queued.
        client.set_zero_linger().unwrap();
        drop(client);
        match events.next().await {
            Some(Err(ConnError::Io(_))) => {}
            other => panic!("expected the reset as an I/O error, got {other:?}"),
        }
        let flushed = handle.flush().await;
        assert!(
            matches!(flushed, Err(WriteError::Failed(_))),
            "a flush after the queued bytes were dropped: {flushed:?}"
        );
        assert!(driver.await.unwrap().is_err(), "the driver failed");
    })
    .await
    .expect("stuck");
}
