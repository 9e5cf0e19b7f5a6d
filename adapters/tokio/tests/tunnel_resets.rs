//! A client that resets mid-upload: the backend sees a reset, never a
//! clean end, through the splicing tunnel and the copying one. The reset
//! races the tunnel's reads, so each test runs many short trials.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use cleave_proto::Bytes;
use cleave_tokio::{splice_tunnel, tunnel_with, Pipes, PipesConfig, TunnelConfig};
use tokio::net::{TcpListener, TcpStream};

#[path = "support/net.rs"]
mod net;
use net::read_to_end_or_error;

/// One trial: a client streams small writes, then resets. Returns what the
/// backend saw at the end (Ok = a clean end of stream) and the bytes.
async fn reset_trial(
    listener: &TcpListener,
    backends: &TcpListener,
    pipes: &Pipes,
    splice: bool,
    writes: usize,
) -> (usize, io::Result<()>, io::Result<(u64, u64)>) {
    let addr = listener.local_addr().unwrap();
    let client = std::thread::spawn(move || {
        let mut client = std::net::TcpStream::connect(addr).unwrap();
        client.set_nodelay(true).unwrap();
        for _ in 0..writes {
            if client.write_all(b"x").is_err() {
                break;
            }
        }
        socket2::SockRef::from(&client)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(client); // RST
    });
    let (mut proxy_client, _) = listener.accept().await.unwrap();
    let mut proxy_backend = TcpStream::connect(backends.local_addr().unwrap())
        .await
        .unwrap();
    let (mut backend, _) = backends.accept().await.unwrap();
    let pipes2 = pipes.clone();
    let proxy = tokio::spawn(async move {
        let config = TunnelConfig::default().idle(Some(Duration::from_secs(5)));
        let result = if splice {
            splice_tunnel(
                &mut proxy_client,
                &mut proxy_backend,
                Bytes::new(),
                config,
                &pipes2,
            )
            .await
        } else {
            tunnel_with(&mut proxy_client, &mut proxy_backend, Bytes::new(), config).await
        };
        drop((proxy_client, proxy_backend));
        result
    });
    let (got, end) = read_to_end_or_error(&mut backend, writes).await;
    // Lets a tunnel that took the reset for an end finish.
    drop(backend);
    let result = proxy.await.unwrap();
    client.join().unwrap();
    (got.len(), end, result)
}

async fn a_client_reset_never_reaches_the_backend_as_a_clean_end(splice: bool) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let backends = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let pipes = Pipes::new(PipesConfig::default().max_open(Some(2)));
    let started = Instant::now();
    for trial in 0..4000 {
        if started.elapsed() > Duration::from_secs(10) {
            break;
        }
        let writes = 1 + (trial * 7) % 400;
        let (got, end, result) = tokio::time::timeout(
            Duration::from_secs(20),
            reset_trial(&listener, &backends, &pipes, splice, writes),
        )
        .await
        .expect("stuck");
        assert!(
            end.is_err(),
            "trial {trial}: the client reset after {writes} one-byte writes; the backend read {got} \
             bytes then a clean end of stream; the tunnel returned {result:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn splice_a_client_reset_never_reaches_the_backend_as_a_clean_end() {
    a_client_reset_never_reaches_the_backend_as_a_clean_end(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn copy_a_client_reset_never_reaches_the_backend_as_a_clean_end() {
    a_client_reset_never_reaches_the_backend_as_a_clean_end(false).await;
}
