//! `tunnel` over loopback TCP, through a proxy task that accepts a client,
//! connects to a backend, tunnels, then drops both streams: a reset on one
//! side reaches the other as a reset after the bytes that made it, a clean
//! end stays a half-close, a failed write resets the backend, and an idle
//! tunnel times out with both sides reset.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use cleave_proto::Bytes;
use cleave_tokio::{tunnel_with, TunnelConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A safety net against a stuck test, never what a test asserts.
const STUCK: Duration = Duration::from_secs(30);

/// The byte at `offset` of every stream here: a gap or a reordering shows.
fn pattern(offset: usize, len: usize) -> Vec<u8> {
    (offset..offset + len).map(|i| (i % 251) as u8).collect()
}

/// What the proxy task saw.
#[derive(Debug)]
struct Proxied {
    result: io::Result<(u64, u64)>,
    /// `SO_LINGER` of the client and the backend stream after the tunnel.
    lingers: (Option<Duration>, Option<Duration>),
}

/// The proxy's and the backend's listeners, and the proxy task: it accepts
/// one client, connects to the backend, tunnels with `tail` first, then
/// drops both streams.
async fn proxy(tail: Bytes) -> (SocketAddr, TcpListener, JoinHandle<Proxied>) {
    proxy_with(tail, TunnelConfig::default()).await
}

/// As [`proxy`], with `config`.
async fn proxy_with(
    tail: Bytes,
    config: TunnelConfig,
) -> (SocketAddr, TcpListener, JoinHandle<Proxied>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let backends = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (proxy_addr, backend_addr) = (
        listener.local_addr().unwrap(),
        backends.local_addr().unwrap(),
    );
    let task = tokio::spawn(async move {
        let (mut client, _) = listener.accept().await.unwrap();
        let mut backend = TcpStream::connect(backend_addr).await.unwrap();
        let result = tunnel_with(&mut client, &mut backend, tail, config).await;
        let lingers = (client.linger().unwrap(), backend.linger().unwrap());
        drop((client, backend)); // dropped, not shut down
        Proxied { result, lingers }
    });
    (proxy_addr, backends, task)
}

/// Reads until the end of the stream (`Ok`) or an error, at most `max`
/// bytes.
async fn read_to_end_or_error(socket: &mut TcpStream, max: usize) -> (Vec<u8>, io::Result<()>) {
    let (mut got, mut buf) = (Vec::new(), vec![0; 64 * 1024]);
    // Each read gets a byte at least, but the end.
    for _ in 0..=max {
        match socket.read(&mut buf).await {
            Ok(0) => return (got, Ok(())),
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                assert!(got.len() <= max, "more bytes than were sent: {}", got.len());
            }
            Err(e) => return (got, Err(e)),
        }
    }
    panic!("no end after {} bytes", got.len());
}

#[tokio::test]
async fn a_backend_reset_reaches_the_client_as_a_reset_after_its_bytes() {
    const N: usize = 1000;
    tokio::time::timeout(STUCK, async {
        let tail = Bytes::from_static(b"GET / HTTP/1.1\r\n\r\n");
        let (addr, backends, proxy) = proxy(tail.clone()).await;
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (mut backend, _) = backends.accept().await.unwrap();
        // The tail arrives once the proxy's connect is through: a reset
        // before that would fail the connect, not the tunnel.
        let mut request = vec![0; tail.len()];
        backend.read_exact(&mut request).await.unwrap();
        assert_eq!(request, tail);
        backend.write_all(&pattern(0, N)).await.unwrap();
        backend.set_zero_linger().unwrap();
        drop(backend); // RST

        let (got, end) = read_to_end_or_error(&mut client, N).await;
        assert!(
            got == pattern(0, N),
            "{} bytes, not the {N} sent",
            got.len()
        );
        let kind = end.expect_err("a clean end of stream after a reset").kind();
        assert_eq!(kind, io::ErrorKind::ConnectionReset);

        assert_failed_with_both_reset(proxy.await.unwrap(), io::ErrorKind::ConnectionReset);
    })
    .await
    .expect("stuck");
}

/// The tunnel failed with `kind`, and left both of its sockets to reset
/// on close.
fn assert_failed_with_both_reset(proxied: Proxied, kind: io::ErrorKind) {
    assert_eq!(proxied.result.unwrap_err().kind(), kind);
    assert_eq!(
        proxied.lingers,
        (Some(Duration::ZERO), Some(Duration::ZERO))
    );
}

#[tokio::test]
async fn a_client_reset_mid_upload_reaches_the_backend_as_a_reset() {
    const N: usize = 100_000;
    tokio::time::timeout(STUCK, async {
        let (addr, backends, proxy) = proxy(Bytes::new()).await;
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (mut backend, _) = backends.accept().await.unwrap();
        let uploader = tokio::spawn(async move {
            client.write_all(&pattern(0, N)).await.unwrap();
            client.set_zero_linger().unwrap();
            drop(client); // RST: what the kernel still holds is dropped
        });

        // All that arrived, in order, then a reset: never a clean end.
        let (got, end) = read_to_end_or_error(&mut backend, N).await;
        assert!(got == pattern(0, got.len()), "bytes lost or reordered");
        let kind = end.expect_err("a clean end of stream after a reset").kind();
        assert_eq!(
            kind,
            io::ErrorKind::ConnectionReset,
            "after {} bytes",
            got.len()
        );

        uploader.await.unwrap();
        assert_failed_with_both_reset(proxy.await.unwrap(), io::ErrorKind::ConnectionReset);
    })
    .await
    .expect("stuck");
}

#[tokio::test]
async fn a_clean_end_stays_a_half_close_both_ways() {
    const M: usize = 100_000;
    const K: usize = 50_000;
    tokio::time::timeout(STUCK, async {
        let tail = Bytes::from(pattern(0, 300));
        let (addr, backends, proxy) = proxy(tail.clone()).await;
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (mut backend, _) = backends.accept().await.unwrap();

        let client_side = async {
            client.write_all(&pattern(300, M)).await.unwrap();
            client.shutdown().await.unwrap(); // FIN; the answer still comes
            read_to_end_or_error(&mut client, K).await
        };
        let backend_side = async {
            let (got, end) = read_to_end_or_error(&mut backend, tail.len() + M).await;
            end.expect("a clean end of the upload");
            // Only after the client's end: the answer crosses the half-close.
            backend.write_all(&pattern(7, K)).await.unwrap();
            backend.shutdown().await.unwrap();
            got
        };
        let ((answer, end), upload) = tokio::join!(client_side, backend_side);
        assert!(
            upload == pattern(0, tail.len() + M),
            "the tail, then the upload"
        );
        end.expect("a clean end of the answer");
        assert!(answer == pattern(7, K), "the answer");

        let proxied = proxy.await.unwrap();
        let (up, down) = proxied.result.unwrap();
        assert_eq!((up, down), ((M + tail.len()) as u64, K as u64));
        assert_eq!(proxied.lingers, (None, None), "a clean end is no reset");
    })
    .await
    .expect("stuck");
}

#[tokio::test]
async fn a_failed_write_to_the_client_resets_the_backend() {
    const LIMIT: usize = 64 << 20;
    tokio::time::timeout(STUCK, async {
        let (addr, backends, proxy) = proxy(Bytes::new()).await;
        // The client ends its side and goes away before anything flows: the
        // tunnel reads its end (and half-closes the backend), then every
        // write to it fails once its kernel has answered with a reset.
        drop(TcpStream::connect(addr).await.unwrap());
        let (mut backend, _) = backends.accept().await.unwrap();

        let chunk = pattern(0, 16 * 1024);
        let mut sent = 0;
        let error = loop {
            match backend.write(&chunk).await {
                Ok(n) => sent += n,
                Err(e) => break e,
            }
            assert!(
                sent < LIMIT,
                "the backend streams on after the client is gone"
            );
        };
        // The backend had read the forwarded end before the reset: its
        // kernel calls it a broken pipe then, a reset otherwise.
        let kind = error.kind();
        assert!(
            matches!(
                kind,
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
            ),
            "{error}"
        );

        let proxied = proxy.await.unwrap();
        let kind = proxied
            .result
            .expect_err("a failed write is an error")
            .kind();
        assert!(
            matches!(
                kind,
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
            ),
            "{kind:?}"
        );
        // The error the backend sees cannot tell a reset from a close after
        // a half-close (both end in a RST on the wire): that the tunnel set
        // both streams to reset on close is what says it.
        assert_eq!(
            proxied.lingers,
            (Some(Duration::ZERO), Some(Duration::ZERO))
        );
    })
    .await
    .expect("stuck");
}

#[tokio::test]
async fn an_idle_tunnel_times_out_and_both_sides_see_a_reset() {
    tokio::time::timeout(STUCK, async {
        let config = TunnelConfig::default().idle(Some(Duration::from_millis(200)));
        let (addr, backends, proxy) = proxy_with(Bytes::from_static(b"hello"), config).await;
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (mut backend, _) = backends.accept().await.unwrap();
        // Bytes both ways first: the timeout counts from the last of them.
        let mut hello = [0; 5];
        backend.read_exact(&mut hello).await.unwrap();
        backend.write_all(b"hi").await.unwrap();
        let mut hi = [0; 2];
        client.read_exact(&mut hi).await.unwrap();
        assert_eq!((&hello, &hi), (b"hello", b"hi"));

        // Then nobody says anything.
        let proxied = proxy.await.unwrap();
        assert_failed_with_both_reset(proxied, io::ErrorKind::TimedOut);
        for socket in [&mut client, &mut backend] {
            let (got, end) = read_to_end_or_error(socket, 0).await;
            assert!(got.is_empty());
            let kind = end.expect_err("a reset, not a clean end").kind();
            assert_eq!(kind, io::ErrorKind::ConnectionReset);
        }
    })
    .await
    .expect("stuck");
}

#[tokio::test]
async fn a_tunnel_busier_than_its_idle_timeout_runs_to_its_clean_end() {
    const BYTES: usize = 40;
    tokio::time::timeout(STUCK, async {
        // Far longer than the gaps between the client's bytes, and far
        // shorter than the whole upload.
        let config = TunnelConfig::default().idle(Some(Duration::from_millis(500)));
        let (addr, backends, proxy) = proxy_with(Bytes::new(), config).await;
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (mut backend, _) = backends.accept().await.unwrap();
        let client_side = async {
            for i in 0..BYTES {
                client.write_all(&pattern(i, 1)).await.unwrap();
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            client.shutdown().await.unwrap();
            read_to_end_or_error(&mut client, 0).await
        };
        let backend_side = async {
            let (got, end) = read_to_end_or_error(&mut backend, BYTES).await;
            end.expect("a clean end of the upload");
            backend.shutdown().await.unwrap();
            got
        };
        let ((answer, end), upload) = tokio::join!(client_side, backend_side);
        assert_eq!(upload, pattern(0, BYTES));
        assert!(answer.is_empty());
        end.expect("a clean end");
        let proxied = proxy.await.unwrap();
        assert_eq!(proxied.result.unwrap(), (BYTES as u64, 0));
        assert_eq!(proxied.lingers, (None, None));
    })
    .await
    .expect("stuck");
}
