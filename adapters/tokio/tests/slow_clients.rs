//! A routing proxy built as the demo's is (`Session` + `Router` with a
//! fallback backend, `ConnConfig` timeouts, then `tunnel_with` and its idle
//! timeout), on loopback, under a thousand silent clients and a thousand
//! clients that send an HTTP request head one byte a second: every one
//! is closed by a timeout, every backend connection made for them is
//! closed too, the process's descriptors come back to where they were,
//! and a normal client is served all along.
//!
//! Silent clients are routed to the fallback by the router's inspect
//! delay, then their tunnel idles out; trickling ones never finish their
//! head, and the frame timeout ends them before the inspect delay.
//!
//! This binary holds this one test: it counts the descriptors of the whole
//! process.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cleave_proto::route::{HostPattern, Match, Router, RouterConfig};
use cleave_proto::{ConnConfig, Event, Session, SessionConfig, Timeouts};
use cleave_tokio::{tunnel_with, SessionReader, TunnelConfig};
use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinHandle;

const SILENT: usize = 1000;
const TRICKLING: usize = 1000;
/// The trickling clients' pace.
const TRICKLE: Duration = Duration::from_secs(1);
/// A wait this long means something is stuck: never what a test asserts.
const STUCK: Duration = Duration::from_secs(30);

/// The request head the trickling clients never finish, and the normal
/// client sends at once.
const HEAD: &[u8] = b"GET / HTTP/1.1\r\nHost: example.com\r\nUser-Agent: slow\r\n\r\n";

const WEB: usize = 0;
const FALLBACK: usize = 1;

/// The proxy's timeouts: the demo's defaults (no opening timeout, frame
/// 2 s, idle 60 s), but for the tunnel idle timeout, 1 s instead of
/// 300 s so that the test ends. The frame timeout is shorter than the
/// inspect delay, so a head that trickles in is cut off before the router
/// gives up on it.
fn timeouts() -> Timeouts {
    Timeouts::default()
        .frame(Some(Duration::from_secs(2)))
        .idle(Some(Duration::from_secs(60)))
        .tunnel_idle(Some(Duration::from_secs(1)))
}

/// The demo's router shape, with the default inspect delay (5 s).
fn router() -> Router<usize> {
    let config = RouterConfig::default();
    Router::with_config(FALLBACK, config)
        .rule(Match::HttpHost(HostPattern::new("example.com")), WEB)
}

/// Counts a task while it runs.
struct Running(Arc<AtomicUsize>);

impl Running {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(count.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A listener with a backlog for a thousand clients at once.
fn listen() -> TcpListener {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    socket.listen(4096).unwrap()
}

/// The proxy's side of one connection, as the demo's: route, connect,
/// tunnel with the connection's tunnel idle timeout.
async fn serve(client: TcpStream, backends: [SocketAddr; 2]) {
    let session = Session::tunnel(router(), SessionConfig::default());
    let config = ConnConfig::default().timeouts(timeouts());
    let mut events = SessionReader::with_config(client, session, config);
    let mut backend = None;
    while let Some(event) = events.next().await {
        // A timeout ends the stream with an error; the socket was shut
        // down or set to reset, and goes when `events` is dropped.
        let Ok(event) = event else { return };
        match event {
            Event::Routed(decision) => {
                let Ok(socket) = TcpStream::connect(backends[decision.target]).await else {
                    return;
                };
                backend = Some(socket);
            }
            Event::Tunnel(tail) => {
                let (mut client, conn) = events.into_parts();
                let idle = conn.timeouts().get_tunnel_idle();
                let Some(mut backend) = backend else { return };
                let config = TunnelConfig::default().idle(idle);
                let _ = tunnel_with(&mut client, &mut backend, tail, config).await;
                return;
            }
            _ => {}
        }
    }
}

/// What a backend saw.
#[derive(Default)]
struct Backend {
    accepted: AtomicUsize,
    closed: AtomicUsize,
}

/// The fallback: holds each connection until the proxy closes it.
async fn fallback(listener: TcpListener, seen: Arc<Backend>, running: Arc<AtomicUsize>) {
    while let Ok((mut socket, _)) = listener.accept().await {
        seen.accepted.fetch_add(1, Ordering::SeqCst);
        let (seen, running) = (seen.clone(), Running::new(&running));
        tokio::spawn(async move {
            let _running = running;
            let mut buf = [0; 1024];
            loop {
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            seen.closed.fetch_add(1, Ordering::SeqCst);
        });
    }
}

/// The web backend: one request head, one answer, then the end.
async fn web(listener: TcpListener, seen: Arc<Backend>, running: Arc<AtomicUsize>) {
    while let Ok((mut socket, _)) = listener.accept().await {
        seen.accepted.fetch_add(1, Ordering::SeqCst);
        let (seen, running) = (seen.clone(), Running::new(&running));
        tokio::spawn(async move {
            let _running = running;
            let mut head = Vec::new();
            let mut buf = [0; 1024];
            while !head.ends_with(b"\r\n\r\n") {
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            if head.ends_with(b"\r\n\r\n") {
                let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
                let _ = socket.write_all(answer).await;
                let _ = socket.shutdown().await;
                let _ = socket.read_to_end(&mut Vec::new()).await;
            }
            seen.closed.fetch_add(1, Ordering::SeqCst);
        });
    }
}

/// How a slow client's connection ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The proxy closed it (a FIN or a reset) before any answer.
    Closed,
    /// It got an answer: it was served, not cut off.
    Answered,
    /// Nothing happened within the safety net.
    Stuck,
}

/// Reads until the proxy closes the connection.
async fn wait_for_the_end(socket: &mut tokio::net::tcp::OwnedReadHalf) -> End {
    let mut buf = [0; 256];
    match socket.read(&mut buf).await {
        Ok(0) | Err(_) => End::Closed,
        Ok(_) => End::Answered,
    }
}

async fn silent(proxy: SocketAddr) -> End {
    let Ok(socket) = TcpStream::connect(proxy).await else {
        return End::Stuck;
    };
    let (mut read, _write) = socket.into_split();
    tokio::time::timeout(STUCK, wait_for_the_end(&mut read))
        .await
        .unwrap_or(End::Stuck)
}

async fn trickling(proxy: SocketAddr) -> End {
    let Ok(socket) = TcpStream::connect(proxy).await else {
        return End::Stuck;
    };
    let (mut read, mut write) = socket.into_split();
    let send = async move {
        for byte in HEAD {
            if write.write_all(&[*byte]).await.is_err() {
                break;
            }
            tokio::time::sleep(TRICKLE).await;
        }
        // Whatever happened, the reader says how it ended.
        std::future::pending::<()>().await;
    };
    let end = async {
        tokio::select! {
            end = wait_for_the_end(&mut read) => end,
            () = send => End::Stuck,
        }
    };
    tokio::time::timeout(STUCK, end).await.unwrap_or(End::Stuck)
}

/// One normal request, sent at once: it must be answered.
async fn normal(proxy: SocketAddr) -> io::Result<bool> {
    let mut socket = TcpStream::connect(proxy).await?;
    socket.write_all(HEAD).await?;
    socket.shutdown().await?;
    let mut answer = Vec::new();
    socket.read_to_end(&mut answer).await?;
    Ok(answer.starts_with(b"HTTP/1.1 200 OK\r\n") && answer.ends_with(b"\r\n\r\nok"))
}

/// Descriptors open in this process, where the OS says (Linux).
fn open_descriptors() -> Option<usize> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count())
}

/// Raises the soft descriptor limit to the hard one; returns the limit.
#[cfg(unix)]
fn raise_descriptor_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given; the resource is valid.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads the struct it is given; raising the soft
        // limit up to the hard one is always allowed.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        }
    }
    // `rlim_t` is not `u64` on every unix.
    #[allow(clippy::useless_conversion)]
    Some(u64::try_from(limit.rlim_cur).unwrap_or(u64::MAX))
}

#[cfg(not(unix))]
fn raise_descriptor_limit() -> Option<u64> {
    None
}

/// How many silent and trickling clients fit the descriptor limit: a
/// silent client takes four descriptors in this process (its socket, the
/// proxy's, the proxy's backend socket, the backend's), a trickling one
/// two.
fn clients_that_fit() -> (usize, usize) {
    let Some(limit) = raise_descriptor_limit() else {
        return (SILENT, TRICKLING);
    };
    let spare = 256;
    let room = usize::try_from(limit.saturating_sub(spare)).unwrap_or(usize::MAX);
    let needed = SILENT * 4 + TRICKLING * 2;
    if needed <= room {
        return (SILENT, TRICKLING);
    }
    let (silent, trickling) = (SILENT * room / needed, TRICKLING * room / needed);
    println!(
        "note: the descriptor limit is {limit}: {silent} silent and {trickling} trickling \
         clients instead of {SILENT} and {TRICKLING}"
    );
    (silent, trickling)
}

/// Waits (within the safety net) until `done` holds.
async fn wait_until(mut done: impl FnMut() -> bool) -> bool {
    let waited = tokio::time::timeout(STUCK, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    waited.await.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_trickling_clients_are_all_closed_by_their_timeouts() {
    let (silent_clients, trickling_clients) = clients_that_fit();

    let (web_listener, fallback_listener, proxy_listener) = (listen(), listen(), listen());
    let backends = [
        web_listener.local_addr().unwrap(),
        fallback_listener.local_addr().unwrap(),
    ];
    let proxy = proxy_listener.local_addr().unwrap();
    let (web_seen, fallback_seen) = (Arc::new(Backend::default()), Arc::new(Backend::default()));
    let (proxied, backend_tasks) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut started: Vec<JoinHandle<()>> = vec![
        tokio::spawn(web(web_listener, web_seen.clone(), backend_tasks.clone())),
        tokio::spawn(fallback(
            fallback_listener,
            fallback_seen.clone(),
            backend_tasks.clone(),
        )),
    ];
    let proxied_count = proxied.clone();
    started.push(tokio::spawn(async move {
        while let Ok((client, _)) = proxy_listener.accept().await {
            let running = Running::new(&proxied_count);
            tokio::spawn(async move {
                let _running = running;
                serve(client, backends).await;
            });
        }
    }));
    // Let the accept loops reach their first wait, then count.
    tokio::task::yield_now().await;
    let baseline = open_descriptors();

    // A normal client, served all along.
    let stop = Arc::new(AtomicBool::new(false));
    let normal_client = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let (mut served, mut failed) = (0, Vec::new());
            while !stop.load(Ordering::SeqCst) {
                match tokio::time::timeout(STUCK, normal(proxy)).await {
                    Ok(Ok(true)) => served += 1,
                    other => failed.push(format!("{other:?}")),
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (served, failed)
        })
    };

    let silent: Vec<_> = (0..silent_clients)
        .map(|_| tokio::spawn(silent(proxy)))
        .collect();
    let trickling: Vec<_> = (0..trickling_clients)
        .map(|_| tokio::spawn(trickling(proxy)))
        .collect();
    for (kind, clients) in [("silent", silent), ("trickling", trickling)] {
        let mut ends = Vec::new();
        for client in clients {
            ends.push(client.await.unwrap());
        }
        let closed = ends.iter().filter(|e| **e == End::Closed).count();
        let other: Vec<_> = ends.iter().filter(|e| **e != End::Closed).collect();
        assert_eq!(closed, ends.len(), "{kind} clients not closed: {other:?}");
    }

    stop.store(true, Ordering::SeqCst);
    let (served, failed) = normal_client.await.unwrap();
    assert!(failed.is_empty(), "the normal client failed: {failed:?}");
    assert!(served > 0, "the normal client was never served");

    // Every proxy connection is over, and every backend connection closed.
    assert!(
        wait_until(|| proxied.load(Ordering::SeqCst) == 0).await,
        "{} proxy connections left",
        proxied.load(Ordering::SeqCst)
    );
    assert!(
        wait_until(|| backend_tasks.load(Ordering::SeqCst) == 0).await,
        "{} backend connections left",
        backend_tasks.load(Ordering::SeqCst)
    );
    let fallback_accepted = fallback_seen.accepted.load(Ordering::SeqCst);
    assert_eq!(
        fallback_accepted, silent_clients,
        "each silent client was routed to the fallback"
    );
    assert_eq!(
        fallback_seen.closed.load(Ordering::SeqCst),
        fallback_accepted
    );
    assert_eq!(
        web_seen.closed.load(Ordering::SeqCst),
        web_seen.accepted.load(Ordering::SeqCst)
    );
    assert_eq!(
        web_seen.accepted.load(Ordering::SeqCst),
        served,
        "only the normal client reached the web backend"
    );

    if let Some(baseline) = baseline {
        let back = wait_until(|| open_descriptors().is_some_and(|n| n <= baseline)).await;
        assert!(
            back,
            "descriptors: {baseline} before, {:?} after",
            open_descriptors()
        );
    }
    for task in started {
        task.abort();
    }
}
