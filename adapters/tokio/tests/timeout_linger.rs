//! A timeout that closes the same-task `Connection` cleanly while a
//! response is still queued: the stream gives `TimedOut` only once the
//! write side ended as the protocol chose, so dropping the connection then
//! (as its docs say) loses nothing silently. What is queued goes out while
//! the peer takes it, one more idle span; a peer that takes none of it
//! gets a reset, never a clean end after part of the response.

use std::time::Duration;

use cleave_proto::conn::{Framed, Shutdown};
use cleave_proto::{Bytes, ConnConfig, Error, Lines, Timeout, Timeouts};
use cleave_tokio::{ConnError, Connection};
use futures_util::StreamExt;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

#[path = "support/pairs.rs"]
mod pairs;
use pairs::small_buffered_pair;

/// A safety net against a stuck test, never what a test asserts.
const STUCK: Duration = Duration::from_secs(30);

/// The response: far more than the two sockets' buffers hold.
const TOTAL: usize = 1 << 20;

/// A server connection with the idle timeout `idle` and a big response
/// queued.
fn server_with_response(server: TcpStream, idle: Duration) -> Connection<TcpStream, Framed<Lines>> {
    let timeouts = Timeouts::default().idle(Some(idle));
    let config = ConnConfig::default().timeouts(timeouts);
    let mut conn = Connection::with_config(server, Framed::new(Lines::new()), config);
    conn.conn_mut()
        .push(Bytes::from(vec![b'a'; TOTAL]))
        .unwrap();
    conn
}

async fn expect_idle_timeout(conn: &mut Connection<TcpStream, Framed<Lines>>) {
    match conn.next().await {
        Some(Err(ConnError::Protocol(Error::TimedOut(Timeout::Idle)))) => {}
        other => panic!("expected the idle timeout, got {other:?}"),
    }
    assert!(conn.next().await.is_none(), "nothing after the final error");
}

#[tokio::test]
async fn a_timeout_with_a_response_the_peer_does_not_take_ends_in_a_reset() {
    tokio::time::timeout(STUCK, async {
        let (mut client, server) = small_buffered_pair().await;
        let mut conn = server_with_response(server, Duration::from_millis(300));
        // The client does not read while the timeout and the linger run.
        expect_idle_timeout(&mut conn).await;
        let queued = conn.conn().queue().len();
        let end = conn.conn().write_end();
        assert_eq!(
            end,
            Some(Shutdown::Reset),
            "the linger ran out with {queued} bytes queued: the close is a reset"
        );
        drop(conn);

        let mut got = Vec::new();
        let read = client.read_to_end(&mut got).await;
        if read.is_ok() {
            assert_eq!(
                got.len(),
                TOTAL,
                "the client read a clean end of stream after {} of {TOTAL} bytes \
                 (at the TimedOut error {queued} bytes were still queued, write_end {end:?})",
                got.len()
            );
        }
    })
    .await
    .expect("stuck");
}

#[tokio::test]
async fn a_timeout_with_a_response_the_peer_takes_in_the_linger_ends_with_all_of_it() {
    tokio::time::timeout(STUCK, async {
        let (mut client, server) = small_buffered_pair().await;
        let idle = Duration::from_millis(800);
        let mut conn = server_with_response(server, idle);
        // The client starts reading after the idle timeout ran out, well
        // inside the linger's idle span.
        let reader = tokio::spawn(async move {
            tokio::time::sleep(idle + idle / 2).await;
            let mut got = Vec::new();
            client.read_to_end(&mut got).await.map(|_| got.len())
        });
        expect_idle_timeout(&mut conn).await;
        assert_eq!(conn.conn().queue().len(), 0, "everything went out");
        assert_eq!(conn.conn().write_end(), Some(Shutdown::Write));
        drop(conn);
        assert_eq!(
            reader.await.unwrap().unwrap(),
            TOTAL,
            "all of it, then a clean end"
        );
    })
    .await
    .expect("stuck");
}
