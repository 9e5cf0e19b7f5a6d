//! `tunnel` and `splice_tunnel` over loopback TCP, through a proxy task
//! that accepts a client, connects to a backend, tunnels, then drops both
//! streams: a reset on one side reaches the other as a reset after the
//! bytes that made it, a clean end stays a half-close, a failed write
//! resets the backend, a backend that closes early ends the tunnel with
//! both sides reset, an idle tunnel times out with both sides reset, and
//! TCP urgent data (where splice(2) stops) loses nothing after it.
//!
//! Every test runs three ways ([`Mode`]): the copying `tunnel_with`, the
//! kernel's `splice_tunnel` (which must have moved the bytes through its
//! pipes), and `splice_tunnel` with no pipe to lease (its fallback copy).

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use cleave_proto::Bytes;
use cleave_tokio::{splice_tunnel, tunnel_with, Pipes, PipesConfig, TunnelConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A safety net against a stuck test, never what a test asserts.
#[path = "support/net.rs"]
mod net;
use net::read_to_end_or_error;

const STUCK: Duration = Duration::from_secs(30);

/// The byte at `offset` of every stream here: a gap or a reordering shows.
fn pattern(offset: usize, len: usize) -> Vec<u8> {
    (offset..offset + len).map(|i| (i % 251) as u8).collect()
}

/// How the proxy task tunnels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `tunnel_with`: copies through user space.
    Copy,
    /// `splice_tunnel` with pipes to lease.
    Splice,
    /// `splice_tunnel` with a pool that opens no pipe: it copies.
    Fallback,
}

/// What the proxy task saw.
#[derive(Debug)]
struct Proxied {
    result: io::Result<(u64, u64)>,
    /// `SO_LINGER` of the client and the backend stream after the tunnel.
    lingers: (Option<Duration>, Option<Duration>),
    /// The splice modes' pool, after the tunnel.
    pipes: Option<Pipes>,
}

impl Proxied {
    /// Checks what the pipes did: in `Splice` mode, at least `spliced`
    /// bytes went through them; in `Fallback`, none did. Either way every
    /// pipe is back in the pool or closed.
    fn assert_pipes(&self, mode: Mode, spliced: u64) {
        let Some(pipes) = &self.pipes else {
            return;
        };
        match mode {
            Mode::Splice => {
                assert!(
                    pipes.spliced() >= spliced,
                    "{} bytes spliced, {spliced} expected",
                    pipes.spliced()
                );
            }
            _ => assert_eq!((pipes.open(), pipes.spliced()), (0, 0)),
        }
        assert_eq!(pipes.open(), pipes.idle(), "a pipe left in use");
    }
}

/// The proxy's and the backend's listeners, and the proxy task: it accepts
/// one client, connects to the backend, tunnels with `tail` first, then
/// drops both streams.
async fn proxy(mode: Mode, tail: Bytes) -> (SocketAddr, TcpListener, JoinHandle<Proxied>) {
    proxy_with(mode, tail, TunnelConfig::default()).await
}

/// As [`proxy`], with `config`.
async fn proxy_with(
    mode: Mode,
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
        let (result, pipes) = match mode {
            Mode::Copy => (
                tunnel_with(&mut client, &mut backend, tail, config).await,
                None,
            ),
            Mode::Splice | Mode::Fallback => {
                let limit = if mode == Mode::Splice { 2 } else { 0 };
                let pipes = pool(limit, 2);
                let result = splice_tunnel(&mut client, &mut backend, tail, config, &pipes).await;
                (result, Some(pipes))
            }
        };
        let lingers = (client.linger().unwrap(), backend.linger().unwrap());
        drop((client, backend)); // dropped, not shut down
        Proxied {
            result,
            lingers,
            pipes,
        }
    });
    (proxy_addr, backends, task)
}

/// A pool of at most `max_open` pipes, keeping `max_idle`.
fn pool(max_open: usize, max_idle: usize) -> Pipes {
    Pipes::new(
        PipesConfig::default()
            .max_open(Some(max_open))
            .max_idle(max_idle),
    )
}

async fn a_backend_reset_reaches_the_client_as_a_reset_after_its_bytes(mode: Mode) {
    const N: usize = 1000;
    tokio::time::timeout(STUCK, async {
        let tail = Bytes::from_static(b"GET / HTTP/1.1\r\n\r\n");
        let (addr, backends, proxy) = proxy(mode, tail.clone()).await;
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

        let proxied = proxy.await.unwrap();
        proxied.assert_pipes(mode, N as u64);
        assert_failed_with_both_reset(proxied, io::ErrorKind::ConnectionReset);
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

async fn a_client_reset_mid_upload_reaches_the_backend_as_a_reset(mode: Mode) {
    const N: usize = 100_000;
    tokio::time::timeout(STUCK, async {
        let (addr, backends, proxy) = proxy(mode, Bytes::new()).await;
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
        let proxied = proxy.await.unwrap();
        proxied.assert_pipes(mode, got.len() as u64);
        assert_failed_with_both_reset(proxied, io::ErrorKind::ConnectionReset);
    })
    .await
    .expect("stuck");
}

async fn a_clean_end_stays_a_half_close_both_ways(mode: Mode) {
    const M: usize = 100_000;
    const K: usize = 50_000;
    tokio::time::timeout(STUCK, async {
        let tail = Bytes::from(pattern(0, 300));
        let (addr, backends, proxy) = proxy(mode, tail.clone()).await;
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
        proxied.assert_pipes(mode, (M + K) as u64);
        let (up, down) = proxied.result.unwrap();
        assert_eq!((up, down), ((M + tail.len()) as u64, K as u64));
        assert_eq!(proxied.lingers, (None, None), "a clean end is no reset");
    })
    .await
    .expect("stuck");
}

async fn a_failed_write_to_the_client_resets_the_backend(mode: Mode) {
    const LIMIT: usize = 64 << 20;
    tokio::time::timeout(STUCK, async {
        let (addr, backends, proxy) = proxy(mode, Bytes::new()).await;
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
        proxied.assert_pipes(mode, 0);
        let kind = proxied
            .result
            .as_ref()
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

async fn an_idle_tunnel_times_out_and_both_sides_see_a_reset(mode: Mode) {
    tokio::time::timeout(STUCK, async {
        let config = TunnelConfig::default().idle(Some(Duration::from_millis(200)));
        let (addr, backends, proxy) = proxy_with(mode, Bytes::from_static(b"hello"), config).await;
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
        proxied.assert_pipes(mode, 2);
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

async fn a_tunnel_busier_than_its_idle_timeout_runs_to_its_clean_end(mode: Mode) {
    const BYTES: usize = 40;
    tokio::time::timeout(STUCK, async {
        // Far longer than the gaps between the client's bytes, and far
        // shorter than the whole upload.
        let config = TunnelConfig::default().idle(Some(Duration::from_millis(500)));
        let (addr, backends, proxy) = proxy_with(mode, Bytes::new(), config).await;
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
        proxied.assert_pipes(mode, BYTES as u64);
        assert_eq!(proxied.result.unwrap(), (BYTES as u64, 0));
        assert_eq!(proxied.lingers, (None, None));
    })
    .await
    .expect("stuck");
}

async fn a_backend_that_closes_early_ends_the_tunnel_with_both_sides_reset(mode: Mode) {
    const LIMIT: usize = 64 << 20;
    tokio::time::timeout(STUCK, async {
        let (addr, backends, proxy) = proxy(mode, Bytes::from_static(b"hello")).await;
        let client = TcpStream::connect(addr).await.unwrap();
        let (mut backend, _) = backends.accept().await.unwrap();
        let mut hello = [0; 5];
        backend.read_exact(&mut hello).await.unwrap();
        assert_eq!(&hello, b"hello");
        backend.write_all(b"bye").await.unwrap();
        // A clean close while the client still uploads: the proxy's next
        // writes to it fail.
        drop(backend);

        let (mut reader, mut writer) = client.into_split();
        let uploader = tokio::spawn(async move {
            let chunk = pattern(0, 16 * 1024);
            let mut sent = 0;
            loop {
                match writer.write(&chunk).await {
                    Ok(n) => sent += n,
                    Err(e) => return e,
                }
                assert!(sent < LIMIT, "the upload goes on after the backend left");
            }
        });
        // What arrived of the answer (a reset may overtake it: the kernel
        // drops what its socket had not handed out), then the end of the
        // stream or the reset.
        let (got, end) = read_to_end_or_error(&mut reader, 3).await;
        assert!(b"bye".starts_with(&got), "{got:?}");
        if let Err(e) = end {
            assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}");
        }
        let error = uploader.await.unwrap();
        assert!(
            matches!(
                error.kind(),
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
            ),
            "{error}"
        );

        let proxied = proxy.await.unwrap();
        proxied.assert_pipes(mode, 0);
        let kind = proxied
            .result
            .as_ref()
            .expect_err("the upload failed")
            .kind();
        assert!(
            matches!(
                kind,
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
            ),
            "{kind:?}"
        );
        assert_eq!(
            proxied.lingers,
            (Some(Duration::ZERO), Some(Duration::ZERO))
        );
    })
    .await
    .expect("stuck");
}

/// `TUNNELS` tunnels at once on one pool of pipes, each carrying `BYTES`
/// up to an echoing backend and back.
async fn echo_tunnels(pipes: Pipes) {
    const TUNNELS: usize = 3;
    const BYTES: usize = 200_000;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let backends = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (addr, backend_addr) = (
        listener.local_addr().unwrap(),
        backends.local_addr().unwrap(),
    );
    let (go, started) = tokio::sync::watch::channel(false);
    let proxy = tokio::spawn(async move {
        let mut pairs = Vec::new();
        for _ in 0..TUNNELS {
            let (client, _) = listener.accept().await.unwrap();
            let backend = TcpStream::connect(backend_addr).await.unwrap();
            pairs.push((client, backend));
        }
        // All the tunnels start in one poll, each leasing its pipes there,
        // and only then do the clients send: none can end (and give its
        // pipes back) before the last leased.
        let [(c0, b0), (c1, b1), (c2, b2)] = &mut pairs[..] else {
            unreachable!("{TUNNELS} tunnels")
        };
        let config = TunnelConfig::default();
        let moved = tokio::join!(
            splice_tunnel(c0, b0, Bytes::new(), config, &pipes),
            splice_tunnel(c1, b1, Bytes::new(), config, &pipes),
            splice_tunnel(c2, b2, Bytes::new(), config, &pipes),
            async { go.send_replace(true) },
        );
        for moved in [moved.0, moved.1, moved.2] {
            assert_eq!(moved.unwrap(), (BYTES as u64, BYTES as u64));
        }
    });
    let echo = tokio::spawn(async move {
        for _ in 0..TUNNELS {
            let (mut socket, _) = backends.accept().await.unwrap();
            tokio::spawn(async move {
                let (mut r, mut w) = socket.split();
                tokio::io::copy(&mut r, &mut w).await.unwrap();
                w.shutdown().await.unwrap();
            });
        }
    });
    let mut clients = Vec::new();
    for i in 0..TUNNELS {
        let client = TcpStream::connect(addr).await.unwrap();
        let mut started = started.clone();
        clients.push(tokio::spawn(async move {
            started.wait_for(|&go| go).await.unwrap();
            let (mut reader, mut writer) = client.into_split();
            let upload = tokio::spawn(async move {
                writer.write_all(&pattern(i, BYTES)).await.unwrap();
                writer.shutdown().await.unwrap();
            });
            let (got, end) = read_to_end_or_error(&mut reader, BYTES).await;
            end.unwrap();
            assert!(got == pattern(i, BYTES), "the echo of tunnel {i}");
            upload.await.unwrap();
        }));
    }
    for client in clients {
        client.await.unwrap();
    }
    echo.await.unwrap();
    proxy.await.unwrap();
}

#[tokio::test]
async fn pipes_are_bounded_reused_and_a_direction_without_one_copies() {
    tokio::time::timeout(STUCK, async {
        // Three tunnels want six pipes and get three: the other directions
        // copy. Two empty pipes are kept. Three directions of 200 000
        // bytes spliced: a pool past its limit would splice more.
        let pipes = pool(3, 2);
        echo_tunnels(pipes.clone()).await;
        assert_eq!((pipes.open(), pipes.idle()), (2, 2));
        assert_eq!(pipes.spliced(), 600_000);

        // The next tunnels start on the kept pipes (and one new one).
        echo_tunnels(pipes.clone()).await;
        assert_eq!((pipes.open(), pipes.idle()), (2, 2));
        assert_eq!(pipes.spliced(), 1_200_000);
    })
    .await
    .expect("stuck");
}

#[cfg(target_os = "linux")]
#[test]
fn the_default_pool_leaves_most_descriptors_to_sockets() {
    let pipes = Pipes::default();
    assert!(pipes.max_open() > 0, "splice exists on Linux");
    assert!(pipes.max_open() <= 4096);
    assert_eq!((pipes.open(), pipes.idle(), pipes.spliced()), (0, 0, 0));
}

/// A client sends `abc`, an out-of-band `X` (TCP urgent data) and `def`,
/// with its end right after (`fin`) or, once those arrived, 100 000 bytes
/// more then its end. splice(2) stops at the urgent mark: the tunnel goes
/// on by copying, leaves the out-of-band byte out as a copying tunnel
/// does, and loses nothing past it.
async fn an_urgent_byte_is_left_out_and_nothing_after_it_is_lost(mode: Mode) {
    const M: usize = 100_000;
    for fin in [true, false] {
        tokio::time::timeout(STUCK, async {
            let tail = Bytes::from_static(b"tail ");
            let (addr, backends, proxy) = proxy(mode, tail.clone()).await;
            let mut client = TcpStream::connect(addr).await.unwrap();
            let (mut backend, _) = backends.accept().await.unwrap();

            client.write_all(b"abc").await.unwrap();
            socket2::SockRef::from(&client)
                .send_out_of_band(b"X")
                .unwrap();
            client.write_all(b"def").await.unwrap();
            let more = if fin { 0 } else { M };
            if fin {
                client.shutdown().await.unwrap();
            }
            let mut first = [0; 11];
            backend.read_exact(&mut first).await.unwrap();
            assert_eq!(&first, b"tail abcdef", "fin: {fin}");
            if !fin {
                // The tunnel is past the mark, with no end queued behind
                // it: what comes next still arrives.
                client.write_all(&pattern(0, M)).await.unwrap();
                client.shutdown().await.unwrap();
            }
            let (rest, end) = read_to_end_or_error(&mut backend, more).await;
            end.expect("a clean end of the upload");
            assert!(rest == pattern(0, more), "the bytes after the mark");
            backend.write_all(b"answer").await.unwrap();
            backend.shutdown().await.unwrap();
            let (answer, end) = read_to_end_or_error(&mut client, 6).await;
            end.expect("a clean end of the answer");
            assert_eq!(answer, b"answer");

            let proxied = proxy.await.unwrap();
            proxied.assert_pipes(mode, 6);
            let up = (tail.len() + 6 + more) as u64;
            assert_eq!(proxied.result.unwrap(), (up, 6), "fin: {fin}");
            assert_eq!(proxied.lingers, (None, None), "a clean end is no reset");
        })
        .await
        .expect("stuck");
    }
}

#[tokio::test]
async fn a_finished_direction_gives_its_pipe_back_while_the_other_goes_on() {
    tokio::time::timeout(STUCK, async {
        let pipes = pool(2, 2);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let backends = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let backend_addr = backends.local_addr().unwrap();
        let addr = listener.local_addr().unwrap();
        let proxy = tokio::spawn({
            let pipes = pipes.clone();
            async move {
                let (mut client, _) = listener.accept().await.unwrap();
                let mut backend = TcpStream::connect(backend_addr).await.unwrap();
                let config = TunnelConfig::default();
                splice_tunnel(&mut client, &mut backend, Bytes::new(), config, &pipes).await
            }
        });
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (mut backend, _) = backends.accept().await.unwrap();
        client.write_all(b"up").await.unwrap();
        client.shutdown().await.unwrap();
        let (upload, end) = read_to_end_or_error(&mut backend, 2).await;
        end.expect("a clean end of the upload");
        assert_eq!(upload, b"up");
        // The upload is over (this runtime has one thread: the proxy's
        // poll that passed the end on has returned): its pipe is back,
        // while the answer's is still in use.
        assert_eq!((pipes.open(), pipes.idle()), (2, 1));

        backend.write_all(b"down").await.unwrap();
        backend.shutdown().await.unwrap();
        let (answer, end) = read_to_end_or_error(&mut client, 4).await;
        end.expect("a clean end of the answer");
        assert_eq!(answer, b"down");
        assert_eq!(proxy.await.unwrap().unwrap(), (2, 4));
        assert_eq!((pipes.open(), pipes.idle(), pipes.spliced()), (2, 2, 6));
    })
    .await
    .expect("stuck");
}

/// Each test, run in each [`Mode`].
macro_rules! in_every_mode {
    ($($test:ident),* $(,)?) => {
        mod copy {
            $(#[tokio::test]
            async fn $test() {
                super::$test(super::Mode::Copy).await;
            })*
        }
        mod splice {
            $(#[tokio::test]
            async fn $test() {
                super::$test(super::Mode::Splice).await;
            })*
        }
        mod fallback {
            $(#[tokio::test]
            async fn $test() {
                super::$test(super::Mode::Fallback).await;
            })*
        }
    };
}

in_every_mode!(
    a_backend_reset_reaches_the_client_as_a_reset_after_its_bytes,
    a_client_reset_mid_upload_reaches_the_backend_as_a_reset,
    a_clean_end_stays_a_half_close_both_ways,
    a_failed_write_to_the_client_resets_the_backend,
    an_idle_tunnel_times_out_and_both_sides_see_a_reset,
    a_tunnel_busier_than_its_idle_timeout_runs_to_its_clean_end,
    a_backend_that_closes_early_ends_the_tunnel_with_both_sides_reset,
    an_urgent_byte_is_left_out_and_nothing_after_it_is_lost,
);

/// `splice_tunnel` between two Unix stream sockets (tokio's `UnixStream`
/// is a `SpliceStream` too): both ways, the tail first, clean ends, and the
/// bytes through the pipes.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_unix_socket_tunnel_is_spliced_both_ways() {
    use tokio::net::UnixStream;

    const UP: usize = 300_000;
    const DOWN: usize = 200_000;
    tokio::time::timeout(STUCK, async {
        let (mut client, mut proxy_client) = UnixStream::pair().unwrap();
        let (mut proxy_backend, mut backend) = UnixStream::pair().unwrap();
        let pipes = pool(2, 2);
        let proxy = {
            let pipes = pipes.clone();
            tokio::spawn(async move {
                let tail = Bytes::from_static(b"tail:");
                let config = TunnelConfig::default();
                let moved =
                    splice_tunnel(&mut proxy_client, &mut proxy_backend, tail, config, &pipes)
                        .await;
                drop((proxy_client, proxy_backend));
                moved
            })
        };
        let client_side = async {
            client.write_all(&pattern(0, UP)).await.unwrap();
            client.shutdown().await.unwrap();
            let mut answer = Vec::new();
            client.read_to_end(&mut answer).await.unwrap();
            answer
        };
        let backend_side = async {
            let mut upload = Vec::new();
            backend.read_to_end(&mut upload).await.unwrap();
            backend.write_all(&pattern(9, DOWN)).await.unwrap();
            backend.shutdown().await.unwrap();
            upload
        };
        let (answer, upload) = tokio::join!(client_side, backend_side);
        let mut expected = b"tail:".to_vec();
        expected.extend_from_slice(&pattern(0, UP));
        assert!(upload == expected, "the tail, then the upload");
        assert!(answer == pattern(9, DOWN), "the answer");
        let moved = proxy.await.unwrap().unwrap();
        assert_eq!(moved, ((UP + 5) as u64, DOWN as u64));
        assert_eq!(pipes.spliced(), (UP + DOWN) as u64, "all of it spliced");
        assert_eq!((pipes.open(), pipes.idle()), (2, 2));
    })
    .await
    .expect("stuck");
}
