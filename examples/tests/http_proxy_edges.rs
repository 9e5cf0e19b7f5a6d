//! The demo's per-request HTTP proxy at its edges (`http_proxy::serve`,
//! as the demo wires it, and the demo binary in its `--listen` mode)
//! against real peers on 127.0.0.1: declined upgrades, backends that
//! close kept connections or never answer, streamed responses, clients
//! that leave, and first requests the router's sniffer refuses.
//!
//! The tests that run the demo binary need the examples built first
//! (`cargo build -p cleave-examples --examples`), as fd_exhaustion's do.

#![allow(dead_code)]

#[path = "support/http1_servers.rs"]
mod servers;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use cleave_examples::http_proxy;
use cleave_proto::route::{HostPattern, Match, Router};
use cleave_proto::{ConnConfig, Event, Session, SessionConfig, Timeouts};
use cleave_tokio::SessionReader;
use futures_util::StreamExt;

// ------------------------------------------------------------ helpers

/// What a backend saw, line by line, for the test to look at.
type Log = Arc<Mutex<Vec<String>>>;

/// A backend on a thread of its own: `handler` gets every connection (on
/// a thread each). Stops accepting when dropped, or after 30 s.
struct StdBackend {
    addr: SocketAddr,
    log: Log,
    stop: Arc<AtomicBool>,
}

impl Drop for StdBackend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl StdBackend {
    fn start<F>(handler: F) -> Self
    where
        F: Fn(TcpStream, &Log) + Send + Sync + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let log: Log = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let handler = Arc::new(handler);
        let (log2, stop2) = (log.clone(), stop.clone());
        thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(30);
            while !stop2.load(Ordering::SeqCst) && Instant::now() < deadline {
                match listener.accept() {
                    Ok((socket, _)) => {
                        socket.set_nonblocking(false).unwrap();
                        socket
                            .set_read_timeout(Some(Duration::from_secs(15)))
                            .unwrap();
                        let (handler, log) = (handler.clone(), log2.clone());
                        thread::spawn(move || handler(socket, &log));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Self { addr, log, stop }
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

fn note(log: &Log, line: impl Into<String>) {
    log.lock().unwrap().push(line.into());
}

/// The next request head on `socket` (`buf` keeps what was read past
/// it); `None` at the end of the stream or on an error.
fn read_head(socket: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = buf[..end + 4].to_vec();
            buf.drain(..end + 4);
            return Some(head);
        }
        let mut chunk = [0u8; 16384];
        match socket.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// What a client reads within `wait`, and whether the stream ended
/// (a FIN or a reset) in that time.
fn read_for(socket: &mut TcpStream, wait: Duration) -> (Vec<u8>, bool) {
    read_until(socket, wait, |_| false)
}

/// Reads until `done` says so, the stream ends, or `wait` passes.
fn read_until(
    socket: &mut TcpStream,
    wait: Duration,
    done: impl Fn(&[u8]) -> bool,
) -> (Vec<u8>, bool) {
    socket
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let start = Instant::now();
    let (mut got, mut buf) = (Vec::new(), [0u8; 16384]);
    while start.elapsed() < wait && !done(&got) {
        match socket.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return (got, true),
        }
    }
    (got, false)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn count(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle)
        .count()
}

/// The demo's HTTP path in this process: a `Session` routes the first
/// bytes, then `http_proxy::serve` routes every request by its Host
/// (the wiring of `examples/tests/http_routing.rs`). `hosts[i]` routes
/// to `backends[i]`; target 0 is also the fallback.
fn in_process_proxy(
    runtime: &tokio::runtime::Runtime,
    hosts: &[&str],
    backends: Vec<Option<SocketAddr>>,
) -> SocketAddr {
    in_process_proxy_with(runtime, hosts, backends, ConnConfig::default())
}

/// As [`in_process_proxy`], each client connection with `config`.
fn in_process_proxy_with(
    runtime: &tokio::runtime::Runtime,
    hosts: &[&str],
    backends: Vec<Option<SocketAddr>>,
    config: ConnConfig,
) -> SocketAddr {
    let mut router = Router::new(0usize);
    for (i, host) in hosts.iter().enumerate() {
        router = router.rule(Match::HttpHost(HostPattern::new(host)), i);
    }
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    runtime.spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let (router, backends) = (router.clone(), backends.clone());
            tokio::spawn(async move {
                let session = Session::tunnel(router.clone(), SessionConfig::default());
                let mut events = SessionReader::with_config(socket, session, config);
                while let Some(Ok(event)) = events.next().await {
                    if let Event::Routed(_) = event {
                        let client = http_proxy::routed(events, router);
                        let _ = http_proxy::serve(client, &backends).await;
                        return;
                    }
                }
            });
        }
    });
    addr
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The demo binary, killed when dropped.
struct Demo {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        path.is_file(),
        "{} missing: build the examples first (cargo build -p cleave-examples --examples)",
        path.display()
    );
    path
}

/// `demo --listen 127.0.0.1:0 ARGS...`, and the address it listens on.
fn demo(args: &[String]) -> Demo {
    let mut child = Command::new(example("demo"))
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        while let Some(Ok(line)) = lines.next() {
            if let Some(addr) = line.strip_prefix("proxy listening on ") {
                let _ = tx.send(addr.parse::<SocketAddr>().unwrap());
            }
        }
    });
    let addr = match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(addr) => addr,
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the demo did not say where it listens");
        }
    };
    Demo { child, addr }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let socket = TcpStream::connect(addr).unwrap();
    socket
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    socket
}

/// A keep-alive backend that answers every request `200` with a body
/// naming itself, the request line and the Host it got (bodies of
/// requests are not expected).
fn naming_backend(name: &'static str) -> StdBackend {
    StdBackend::start(move |mut socket, log| {
        let mut buf = Vec::new();
        while let Some(head) = read_head(&mut socket, &mut buf) {
            let head = text(&head);
            let line = head.lines().next().unwrap_or_default().to_owned();
            note(log, line.clone());
            let body = format!("{name}: {line}");
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            if socket.write_all(answer.as_bytes()).is_err() {
                return;
            }
        }
    })
}

// ------------------------------------------------------------ tests

/// A backend that declines an upgrade (`curl --http2 http://...` sends
/// `Upgrade: h2c`) answers it as any request, keeping the connection
/// (RFC 9110, section 7.8: a server may ignore Upgrade). The proxy
/// relays that answer, which keeps the connection, so the client sends
/// its next request on it: the proxy must answer it, not close.
#[test]
fn a_declined_upgrade_leaves_the_keep_alive_connection_open() {
    let app = servers::tokio_server(); // the http1 example: declines, resumes
    let rt = runtime();
    let proxy = in_process_proxy(&rt, &["a.test"], vec![Some(app.addr)]);
    let mut client = connect(proxy);
    client
        .write_all(
            b"GET / HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade, HTTP2-Settings\r\n\
              Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n",
        )
        .unwrap();
    let (first, _) = read_until(&mut client, Duration::from_secs(5), |g| {
        g.ends_with(b"hello\n")
    });
    let first = text(&first);
    assert!(
        first.starts_with("HTTP/1.1 200 OK\r\n") && !first.contains("Connection: close"),
        "{first:?}"
    );
    // The answer keeps the connection: the next request goes on it.
    let _ = client.write_all(b"GET /host HTTP/1.1\r\nHost: a.test\r\n\r\n");
    let (second, closed) = read_until(&mut client, Duration::from_secs(5), |g| {
        g.ends_with(b"a.test\n")
    });
    rt.shutdown_background();
    assert!(
        text(&second).ends_with("a.test\n"),
        "after a 200 that kept the connection, the next request got {:?} \
         (connection closed: {closed}): the proxy ended the client's connection \
         after the declined upgrade",
        text(&second)
    );
}

/// Only a WebSocket upgrade is passed. A backend that would take
/// `Upgrade: h2c` (it answers 101 to any head that offers it) gets the
/// request without the offer, so it answers 200, and the client's next
/// request, for another Host, goes to that Host's backend: after a 101
/// the proxy would have tunnelled HTTP/2 streams for any authority to
/// the first.
#[test]
fn an_h2c_upgrade_is_not_passed_and_the_next_request_is_routed_by_its_host() {
    let h2c = StdBackend::start(|mut socket, log| {
        let mut buf = Vec::new();
        while let Some(head) = read_head(&mut socket, &mut buf) {
            let head = text(&head);
            note(log, head.clone());
            let answer: &[u8] = if head.to_ascii_lowercase().contains("upgrade: h2c") {
                b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"
            } else {
                b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nwww"
            };
            if socket.write_all(answer).is_err() {
                return;
            }
        }
    });
    let admin = naming_backend("admin");
    let rt = runtime();
    let proxy = in_process_proxy(
        &rt,
        &["www.test", "admin.test"],
        vec![Some(h2c.addr), Some(admin.addr)],
    );
    let mut client = connect(proxy);
    client
        .write_all(
            b"GET / HTTP/1.1\r\nHost: www.test\r\nConnection: Upgrade, HTTP2-Settings\r\n\
              Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n",
        )
        .unwrap();
    let (first, _) = read_until(&mut client, Duration::from_secs(5), |g| g.ends_with(b"www"));
    assert!(
        text(&first).starts_with("HTTP/1.1 200 OK\r\n"),
        "{:?}",
        text(&first)
    );
    client
        .write_all(b"GET /x HTTP/1.1\r\nHost: admin.test\r\n\r\n")
        .unwrap();
    let (second, _) = read_until(&mut client, Duration::from_secs(5), |g| {
        g.ends_with(b"GET /x HTTP/1.1")
    });
    assert!(
        text(&second).ends_with("admin: GET /x HTTP/1.1"),
        "{:?}",
        text(&second)
    );
    // `websocket` and `h2c` in two Upgrade fields: not a WebSocket
    // upgrade alone, so neither is passed.
    let mut client = connect(proxy);
    client
        .write_all(
            b"GET / HTTP/1.1\r\nHost: www.test\r\nConnection: Upgrade\r\n\
              Upgrade: websocket\r\nUpgrade: h2c\r\nSec-WebSocket-Version: 13\r\n\
              Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        )
        .unwrap();
    let (third, _) = read_until(&mut client, Duration::from_secs(5), |g| g.ends_with(b"www"));
    rt.shutdown_background();
    assert!(
        text(&third).starts_with("HTTP/1.1 200 OK\r\n"),
        "{:?}",
        text(&third)
    );
    let seen = h2c.log();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for head in seen {
        let head = head.to_ascii_lowercase();
        assert!(
            head.starts_with("get / http/1.1\r\nhost: www.test\r\n")
                && !head.contains("upgrade: h2c")
                && !head.contains("http2-settings:"),
            "the backend saw the offer: {head:?}"
        );
    }
}

/// A backend ends a keep-alive connection between responses (its idle
/// timeout: 100 ms here), which any HTTP/1.1 server may do (RFC 9112,
/// section 9.6). The client's next request, on its own connection to the
/// proxy that is still open, must still be answered: nothing of it was
/// sent on a connection that worked (the core's `Client::pending` says to
/// resend such requests).
#[test]
fn a_request_after_the_backend_closed_an_idle_connection_is_answered() {
    let backend = StdBackend::start(|mut socket, log| {
        let mut buf = Vec::new();
        if read_head(&mut socket, &mut buf).is_some() {
            note(log, "request");
            let _ = socket.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            // Keep-alive timeout of 100 ms, then the close.
            thread::sleep(Duration::from_millis(100));
        }
    });
    let rt = runtime();
    let proxy = in_process_proxy(&rt, &["a.test"], vec![Some(backend.addr)]);
    let mut client = connect(proxy);
    let request = b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
    client.write_all(request).unwrap();
    let (first, _) = read_until(&mut client, Duration::from_secs(5), |g| g.ends_with(b"ok"));
    assert!(text(&first).starts_with("HTTP/1.1 200 OK"), "{first:?}");
    thread::sleep(Duration::from_millis(500));
    let _ = client.write_all(request);
    let (second, closed) = read_until(&mut client, Duration::from_secs(5), |g| g.ends_with(b"ok"));
    rt.shutdown_background();
    assert!(
        text(&second).starts_with("HTTP/1.1 200 OK"),
        "the second request got {:?} (connection closed: {closed}); the backend saw {:?}",
        text(&second),
        backend.log()
    );
}

/// A streamed response (server-sent events: a chunked body whose chunks
/// come as events happen): what the backend sent must reach the client
/// while the response goes on, not when it ends.
#[test]
fn a_streamed_response_reaches_the_client_as_it_comes() {
    let backend = StdBackend::start(|mut socket, _log| {
        let mut buf = Vec::new();
        if read_head(&mut socket, &mut buf).is_some() {
            let _ = socket.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                  Transfer-Encoding: chunked\r\n\r\n9\r\ndata: 1\n\n\r\n",
            );
            // The next event comes 6 s later, then the end.
            thread::sleep(Duration::from_secs(6));
            let _ = socket.write_all(b"9\r\ndata: 2\n\n\r\n0\r\n\r\n");
        }
    });
    let rt = runtime();
    let proxy = in_process_proxy(&rt, &["a.test"], vec![Some(backend.addr)]);
    let mut client = connect(proxy);
    client
        .write_all(b"GET /events HTTP/1.1\r\nHost: a.test\r\nAccept: text/event-stream\r\n\r\n")
        .unwrap();
    let (got, _) = read_until(&mut client, Duration::from_secs(3), |g| {
        count(g, b"data: 1") > 0
    });
    rt.shutdown_background();
    assert!(
        count(&got, b"data: 1") == 1,
        "3 s after the backend sent the response head and its first event, the client \
         had {:?}",
        text(&got)
    );
}

/// The demo's `--idle-timeout` ("no byte either way, before the
/// tunnel"): a backend that never answers a request leaves the client's
/// connection with no byte either way; after the idle timeout (1 s here)
/// the proxy must end it (or answer 504), not hold it for ever.
#[test]
fn demo_idle_timeout_ends_a_connection_whose_backend_never_answers() {
    let hang = StdBackend::start(|mut socket, log| {
        let mut buf = Vec::new();
        if read_head(&mut socket, &mut buf).is_some() {
            note(log, "request");
            // Never answers; waits (at most 12 s) for the proxy to leave.
            socket
                .set_read_timeout(Some(Duration::from_secs(12)))
                .unwrap();
            let mut byte = [0u8; 1];
            let _ = socket.read(&mut byte);
        }
    });
    let demo = demo(&[
        "--route".into(),
        format!("host:hang.test={}", hang.addr),
        "--idle-timeout".into(),
        "1s".into(),
    ]);
    let mut client = connect(demo.addr);
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: hang.test\r\n\r\n")
        .unwrap();
    let started = Instant::now();
    let (got, closed) = read_for(&mut client, Duration::from_secs(6));
    assert_eq!(hang.log(), ["request"]);
    assert!(
        closed || text(&got).starts_with("HTTP/1.1 5"),
        "with --idle-timeout 1s, the client's connection was still open after {:?} \
         with no byte either way (got {:?})",
        started.elapsed(),
        text(&got)
    );
}

/// A client that leaves while its request is at the backend: its end
/// cannot be told from a half-close whose responses are still owed, so
/// the proxy waits for the backend, but no longer than the idle timeout
/// (1 s here): then it closes its connection to the backend, which is
/// not kept waiting until it answers.
#[test]
fn a_client_that_leaves_before_the_response_releases_the_backend() {
    let backend = StdBackend::start(|mut socket, log| {
        let mut buf = Vec::new();
        if read_head(&mut socket, &mut buf).is_some() {
            note(log, "request");
            let started = Instant::now();
            socket
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut byte = [0u8; 1];
            match socket.read(&mut byte) {
                Ok(0) | Err(_) if started.elapsed() < Duration::from_secs(9) => {
                    note(log, format!("proxy left after {:?}", started.elapsed()))
                }
                _ => note(log, "still connected after 10 s"),
            }
        }
    });
    let rt = runtime();
    let idle = Timeouts::default().idle(Some(Duration::from_secs(1)));
    let config = ConnConfig::default().timeouts(idle);
    let proxy = in_process_proxy_with(&rt, &["a.test"], vec![Some(backend.addr)], config);
    let mut client = connect(proxy);
    client
        .write_all(b"GET /slow HTTP/1.1\r\nHost: a.test\r\n\r\n")
        .unwrap();
    thread::sleep(Duration::from_millis(300));
    drop(client); // the client gives up
    let deadline = Instant::now() + Duration::from_secs(4);
    while backend.log().len() < 2 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    let log = backend.log();
    rt.shutdown_background();
    assert!(
        log.len() == 2 && log[1].starts_with("proxy left"),
        "4 s after the client closed, with a 1 s idle timeout, the backend saw {log:?}: \
         the proxy still holds its request open"
    );
}

/// The demo routes the connection's first request with the router's
/// sniffer, and only what the sniffer saw as HTTP goes to the
/// per-request proxy; the rest is tunnelled raw to the fallback. A first
/// head with two Host fields, which the proxy answers 400 on any later
/// request (smuggling-strict), goes raw to the fallback instead, and
/// every request after it on the connection with it, whatever its Host.
#[test]
fn demo_first_request_with_two_hosts_is_refused_not_tunnelled_to_the_fallback() {
    let (a, b, fallback) = (
        naming_backend("a"),
        naming_backend("b"),
        naming_backend("fallback"),
    );
    let demo = demo(&[
        "--route".into(),
        format!("host:a.test={}", a.addr),
        "--route".into(),
        format!("host:b.test={}", b.addr),
        "--fallback".into(),
        fallback.addr.to_string(),
    ]);
    // The same head as a second request: 400, connection closed.
    let mut client = connect(demo.addr);
    client
        .write_all(
            b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n\
              GET /one HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n",
        )
        .unwrap();
    let (got, _) = read_until(&mut client, Duration::from_secs(3), |g| {
        count(g, b"HTTP/1.1 400") > 0
    });
    assert!(text(&got).contains("HTTP/1.1 400"), "{:?}", text(&got));
    // As the first request.
    let mut client = connect(demo.addr);
    client
        .write_all(
            b"GET /one HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n\
              GET /admin HTTP/1.1\r\nHost: b.test\r\n\r\n",
        )
        .unwrap();
    let (got, _) = read_for(&mut client, Duration::from_secs(2));
    assert!(
        text(&got).starts_with("HTTP/1.1 400") && fallback.log().is_empty(),
        "the client got {:?}; the fallback backend served {:?}",
        text(&got),
        fallback.log()
    );
}

/// A first head the router's sniffer does not take as HTTP (httparse
/// refuses it: `HTTP/1.2`, two spaces after the method, HTTP/2's preface)
/// falls back, and the demo sends it to the per-request proxy, which
/// answers it with its status and closes: never raw to the fallback,
/// where it and every request after it would pass every Host rule.
#[test]
fn demo_first_head_httparse_refuses_is_answered_not_tunnelled_to_the_fallback() {
    let (a, fallback) = (naming_backend("a"), naming_backend("fallback"));
    let demo = demo(&[
        "--route".into(),
        format!("host:a.test={}", a.addr),
        "--fallback".into(),
        fallback.addr.to_string(),
    ]);
    let heads: [&[u8]; 3] = [
        b"GET /admin HTTP/1.2\r\nHost: admin.test\r\n\r\nGET /x HTTP/1.1\r\nHost: admin.test\r\n\r\n",
        b"GET  /admin HTTP/1.1\r\nHost: admin.test\r\n\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    ];
    for head in heads {
        let mut client = connect(demo.addr);
        client.write_all(head).unwrap();
        let (got, _) = read_for(&mut client, Duration::from_secs(2));
        let got = text(&got);
        assert!(
            got.starts_with("HTTP/1.1 4") || got.starts_with("HTTP/1.1 5"),
            "{:?}: the client got {got:?}",
            text(head)
        );
    }
    assert!(
        fallback.log().is_empty(),
        "the fallback served {:?}",
        fallback.log()
    );
    // Not HTTP (a whole first line that names no HTTP version, an SSH
    // banner): the fallback's, raw, as before. (The backend answers what
    // ends with an empty line.)
    let mut client = connect(demo.addr);
    client
        .write_all(b"SSH-2.0-OpenSSH_9.6 Debian\r\n\r\n")
        .unwrap();
    let (got, _) = read_until(&mut client, Duration::from_secs(3), |g| {
        g.ends_with(b"Debian")
    });
    assert!(
        text(&got).ends_with("fallback: SSH-2.0-OpenSSH_9.6 Debian"),
        "{:?}",
        text(&got)
    );
}

/// A first request within the proxy's own HTTP limits (100 header
/// fields, a 32 KiB head: `Http1Config`'s defaults, which the per-request
/// proxy applies to every later request) but past the sniffer's defaults
/// (64 fields, 8 KiB) is routed by its Host (`--route host:a.test`
/// promises it to a.test's backend); it went raw to the fallback. One
/// past the proxy's limits (a field line over 8 KiB) is refused with 431,
/// as a later request would be, and never reaches the fallback.
#[test]
fn demo_first_request_with_many_headers_goes_to_its_hosts_backend() {
    let (a, fallback) = (naming_backend("a"), naming_backend("fallback"));
    let demo = demo(&[
        "--route".into(),
        format!("host:a.test={}", a.addr),
        "--fallback".into(),
        fallback.addr.to_string(),
    ]);
    let fields: String = (0..70).map(|i| format!("X-Field-{i}: {i}\r\n")).collect();
    let half = "b".repeat(4608);
    let big = format!("X-Big-1: {half}\r\nX-Big-2: {half}\r\n");
    for (what, extra) in [("70 header fields", fields), ("a 9 KiB head", big)] {
        let mut client = connect(demo.addr);
        let request = format!("GET /big HTTP/1.1\r\nHost: a.test\r\n{extra}\r\n");
        client.write_all(request.as_bytes()).unwrap();
        let (got, _) = read_until(&mut client, Duration::from_secs(3), |g| {
            g.ends_with(b"GET /big HTTP/1.1")
        });
        assert!(
            text(&got).contains("a: GET /"),
            "a request for Host a.test with {what} got {:?}; a.test's backend saw {:?}, \
             the fallback {:?}",
            text(&got),
            a.log(),
            fallback.log()
        );
    }
    let mut client = connect(demo.addr);
    let line = format!("X-Long: {}\r\n", "b".repeat(9 * 1024));
    let request = format!("GET /long HTTP/1.1\r\nHost: a.test\r\n{line}\r\n");
    client.write_all(request.as_bytes()).unwrap();
    let (got, _) = read_for(&mut client, Duration::from_secs(2));
    assert!(
        text(&got).starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n")
            && fallback.log().is_empty(),
        "a 9 KiB field line got {:?}; the fallback served {:?}",
        text(&got),
        fallback.log()
    );
}

/// A backend that refuses the connection (nothing listens at its
/// address): the client gets a 502, not a connection dropped without a
/// word.
#[test]
fn a_backend_that_refuses_the_connection_is_a_502() {
    let closed = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let rt = runtime();
    let proxy = in_process_proxy(&rt, &["a.test"], vec![Some(closed)]);
    let mut client = connect(proxy);
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
        .unwrap();
    let (got, closed) = read_for(&mut client, Duration::from_secs(3));
    rt.shutdown_background();
    assert!(
        text(&got).starts_with("HTTP/1.1 502 Bad Gateway\r\n") && closed,
        "got {:?} (closed: {closed})",
        text(&got)
    );
}
