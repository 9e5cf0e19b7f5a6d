//! Tunnels at their edges: a read error that meets a flush that waits,
//! the idle timer across a direction's last poll, and a backend reset
//! while the client uploads (the same scenario as cleave-mio's).

use std::io;
use std::time::Duration;

use cleave_proto::Bytes;
use cleave_tokio::{splice_tunnel, tunnel, tunnel_with, Pipes, PipesConfig, TunnelConfig};
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, TcpStream};

#[path = "support/net.rs"]
mod net;
use net::read_to_end_or_error;

const STUCK: Duration = Duration::from_secs(20);

/// Two connected loopback pairs: (client, proxy's client side), (proxy's
/// backend side, backend).
async fn pairs() -> ((TcpStream, TcpStream), (TcpStream, TcpStream)) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let backends = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (proxy_client, _) = listener.accept().await.unwrap();
    let proxy_backend = TcpStream::connect(backends.local_addr().unwrap())
        .await
        .unwrap();
    let (backend, _) = backends.accept().await.unwrap();
    ((client, proxy_client), (proxy_backend, backend))
}

/// A buffering backend writer (`BufWriter`, which implements `Reset`)
/// whose socket is full when the tunnel reads the client's reset: the read
/// error must still end the tunnel and reset the backend, though the flush
/// before it waits (the next read of the reset socket would say end of
/// stream, and the backend would get a clean FIN).
#[tokio::test]
async fn a_client_reset_read_while_the_backend_flush_waits_is_not_lost() {
    tokio::time::timeout(STUCK, async {
        let ((mut client, mut proxy_client), (proxy_backend, mut backend)) = pairs().await;
        // The backend reads nothing yet: fill the proxy's socket to it.
        let chunk = vec![b'p'; 64 * 1024];
        let mut prefilled = 0;
        for _ in 0..3 {
            loop {
                match proxy_backend.try_write(&chunk) {
                    Ok(n) => prefilled += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("{e}"),
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut proxy_backend = BufWriter::new(proxy_backend);
        let proxy = tokio::spawn(async move {
            let result = tunnel(&mut proxy_client, &mut proxy_backend, Bytes::new()).await;
            drop((proxy_client, proxy_backend));
            result
        });
        client.write_all(b"upload").await.unwrap();
        // The proxy reads it into the BufWriter; its flush waits.
        tokio::time::sleep(Duration::from_millis(100)).await;
        client.set_zero_linger().unwrap();
        drop(client); // RST mid-upload
        // The proxy reads the reset; its flush still waits.
        tokio::time::sleep(Duration::from_millis(100)).await;

        let (got, end) = read_to_end_or_error(&mut backend, prefilled + 6).await;
        let _ = backend.shutdown().await; // lets a still-running tunnel end
        let result = proxy.await.unwrap();
        assert!(
            end.is_err() && result.is_err(),
            "the backend read {} bytes (of {prefilled} + 6) then {end:?}; the tunnel returned {result:?}",
            got.len()
        );
    })
    .await
    .expect("stuck");
}

/// The idle timeout counts from the last byte that moved, also when a
/// direction moves its last bytes and ends in the same poll (spliced, or
/// copied): the backend answers within the timeout of the request's last
/// byte, and the tunnel ends cleanly.
async fn idle_counts_the_last_bytes_of_an_ended_direction(spliced: bool) {
    tokio::time::timeout(STUCK, async {
        let ((mut client, mut proxy_client), (mut proxy_backend, mut backend)) = pairs().await;
        let config = TunnelConfig::default().idle(Some(Duration::from_millis(2000)));
        let proxy = tokio::spawn(async move {
            let result = if spliced {
                let pipes = Pipes::new(PipesConfig::default().max_open(Some(2)));
                splice_tunnel(
                    &mut proxy_client,
                    &mut proxy_backend,
                    Bytes::new(),
                    config,
                    &pipes,
                )
                .await
            } else {
                tunnel_with(&mut proxy_client, &mut proxy_backend, Bytes::new(), config).await
            };
            drop((proxy_client, proxy_backend));
            result
        });
        // Silent for 1.4 s, then a request and its end, in one go.
        tokio::time::sleep(Duration::from_millis(1400)).await;
        client.write_all(b"question").await.unwrap();
        client.shutdown().await.unwrap();
        let (request, end) = read_to_end_or_error(&mut backend, 8).await;
        assert_eq!(request, b"question");
        end.unwrap();
        // The backend answers 1.2 s after the last byte moved: within the
        // 2 s idle timeout (counted from the start, it would have run out).
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let _ = backend.write_all(b"answer").await;
        let _ = backend.shutdown().await;
        let (answer, end) = read_to_end_or_error(&mut client, 6).await;
        let result = proxy.await.unwrap();
        assert!(
            result.is_ok() && end.is_ok() && answer == b"answer",
            "tunnel: {result:?}; the client read {answer:?} then {end:?}"
        );
    })
    .await
    .expect("stuck");
}

#[tokio::test]
async fn copy_idle_counts_the_last_bytes_of_an_ended_direction() {
    idle_counts_the_last_bytes_of_an_ended_direction(false).await;
}

#[tokio::test]
async fn splice_idle_counts_the_last_bytes_of_an_ended_direction() {
    idle_counts_the_last_bytes_of_an_ended_direction(true).await;
}

/// A backend that resets after half a response while the client uploads:
/// the client gets a reset after the half, never a clean end.
async fn backend_reset_during_upload(spliced: bool) {
    tokio::time::timeout(STUCK, async {
        let ((mut client, mut proxy_client), (mut proxy_backend, mut backend)) = pairs().await;
        backend.write_all(b"half").await.unwrap();
        backend.set_zero_linger().unwrap();
        drop(backend);
        client.write_all(b"upload").await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let result = if spliced {
            let pipes = Pipes::new(PipesConfig::default().max_open(Some(2)));
            let config = TunnelConfig::default();
            splice_tunnel(
                &mut proxy_client,
                &mut proxy_backend,
                Bytes::new(),
                config,
                &pipes,
            )
            .await
        } else {
            tunnel(&mut proxy_client, &mut proxy_backend, Bytes::new()).await
        };
        drop((proxy_client, proxy_backend));
        let (got, end) = read_to_end_or_error(&mut client, 4).await;
        assert!(
            end.is_err(),
            "client read {got:?} then {end:?}; tunnel {result:?}"
        );
    })
    .await
    .expect("stuck");
}

#[tokio::test]
async fn copy_a_backend_reset_during_an_upload_reaches_the_client_as_a_reset() {
    backend_reset_during_upload(false).await;
}

#[tokio::test]
async fn splice_a_backend_reset_during_an_upload_reaches_the_client_as_a_reset() {
    backend_reset_during_upload(true).await;
}
