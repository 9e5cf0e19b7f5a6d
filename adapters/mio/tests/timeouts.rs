//! Timeouts through cleave-mio, over loopback TCP: a silent client ended
//! by the idle or the opening timeout, a trickling one by the frame
//! timeout, and a routing proxy on one poll loop, built like the demo,
//! that closes a thousand silent and a thousand trickling clients by their
//! timeouts (and the backend connections of those it routed) while it
//! serves a normal client.
//!
//! The tests here run one at a time: the proxy's counts the process's
//! descriptors.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use cleave_mio::{Conn, ConnError};
use cleave_proto::route::{Match, Router, RouterConfig};
use cleave_proto::{
    ConnConfig, Error, Framed, Lines, Protocol, Session, SessionConfig, Timeout, Timeouts,
};
use mio::net::TcpStream;
use mio::{Events, Poll, Token};

#[path = "support/proxy.rs"]
mod proxy;

use proxy::{Proxy, Stats, CLIENTS, REQUEST, RESPONSE};

/// A poll that found nothing for this long means the test is stuck.
const STALLED: Duration = Duration::from_secs(20);
/// The blocking sockets' timeouts, and the longest wait for the proxy: a
/// safety net, never what a test asserts.
const STUCK: Duration = Duration::from_secs(30);

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// One accepted connection and its client.
fn pair() -> (TcpStream, std::net::TcpStream) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    client.set_read_timeout(Some(STUCK)).unwrap();
    client.set_write_timeout(Some(STUCK)).unwrap();
    let (server, _) = listener.accept().unwrap();
    server.set_nonblocking(true).unwrap();
    (TcpStream::from_std(server), client)
}

/// Drives `conn` on a poll loop of its own, waking it at its deadline,
/// until it is finished; returns its events and its first error.
fn run_to_the_end<P: Protocol>(
    conn: &mut Conn<TcpStream, P>,
) -> (Vec<P::Event>, Result<(), ConnError>) {
    let mut poll = Poll::new().unwrap();
    conn.register(poll.registry(), Token(0)).unwrap();
    let (mut events, mut out, mut first) = (Events::with_capacity(8), Vec::new(), Ok(()));
    for _ in 0..10_000 {
        if conn.is_finished() {
            return (out, first);
        }
        let timeout = conn
            .deadline()
            .map_or(STALLED, |d| d.saturating_duration_since(Instant::now()));
        poll.poll(&mut events, Some(timeout)).unwrap();
        let result = if events.is_empty() {
            assert!(conn.deadline().is_some(), "the loop stalled");
            conn.on_timeout(&mut out)
        } else {
            events
                .iter()
                .try_for_each(|event| conn.on_event(event, &mut out).map(drop))
        };
        if first.is_ok() {
            first = result;
        }
        conn.update_registration(poll.registry(), Token(0)).unwrap();
    }
    panic!("no end after 10 000 polls");
}

fn timeouts(timeouts: Timeouts) -> ConnConfig {
    ConnConfig::default().timeouts(timeouts)
}

/// `SO_LINGER` of the connection's socket: zero once it was reset.
fn linger<P: Protocol>(conn: &Conn<TcpStream, P>) -> Option<Duration> {
    socket2::SockRef::from(conn.get_ref()).linger().unwrap()
}

#[test]
fn a_silent_client_is_ended_by_the_idle_timeout() {
    let _serial = one_at_a_time();
    let (server, mut client) = pair();
    let idle = Timeouts::default().idle(Some(Duration::from_millis(100)));
    let mut conn = Conn::with_config(server, Framed::new(Lines::new()), timeouts(idle));
    // Known before the first byte, with no first poll.
    assert_eq!(
        conn.deadline(),
        Some(conn.started() + Duration::from_millis(100))
    );

    let (lines, result) = run_to_the_end(&mut conn);
    assert!(lines.is_empty());
    assert!(
        matches!(
            result,
            Err(ConnError::Protocol(Error::TimedOut(Timeout::Idle)))
        ),
        "{result:?}"
    );
    assert_eq!(conn.deadline(), None, "nothing runs once it ended");
    // Nothing was left half read: a clean end, not a reset.
    assert_eq!(linger(&conn), None);
    drop(conn);
    let mut rest = Vec::new();
    assert_eq!(client.read_to_end(&mut rest).unwrap(), 0);
}

#[test]
fn a_silent_client_is_ended_by_the_opening_timeout_before_the_inspect_delay() {
    let _serial = one_at_a_time();
    let (server, mut client) = pair();
    let router = Router::with_config(
        "fallback",
        RouterConfig::default().inspect_delay(Duration::from_secs(60)),
    )
    .rule(Match::Http, "web");
    let session = Session::tunnel(router, SessionConfig::default());
    let opening = Timeouts::default().opening(Some(Duration::from_millis(100)));
    let mut conn = Conn::with_config(server, session, timeouts(opening));
    // The earlier of the opening timeout and the inspect delay.
    assert_eq!(
        conn.deadline(),
        Some(conn.started() + Duration::from_millis(100))
    );

    let (events, result) = run_to_the_end(&mut conn);
    assert!(events.is_empty(), "routed: {events:?}");
    assert!(
        matches!(
            result,
            Err(ConnError::Protocol(Error::TimedOut(Timeout::Opening)))
        ),
        "{result:?}"
    );
    assert_eq!(linger(&conn), None);
    drop(conn);
    let mut rest = Vec::new();
    assert_eq!(client.read_to_end(&mut rest).unwrap(), 0);
}

/// Sends `bytes` one at a time, `every` apart, until one cannot be sent;
/// returns how many went out and why it stopped.
fn trickle(
    mut socket: std::net::TcpStream,
    bytes: &[u8],
    every: Duration,
) -> (usize, io::Result<()>) {
    for (sent, byte) in bytes.iter().enumerate() {
        if let Err(e) = socket.write_all(&[*byte]) {
            return (sent, Err(e));
        }
        thread::sleep(every);
    }
    (bytes.len(), Ok(()))
}

#[test]
fn a_trickling_client_is_ended_by_the_frame_timeout_with_a_reset() {
    let _serial = one_at_a_time();
    let (server, client) = pair();
    // A line that would take 20 s to complete, a byte every 20 ms: the idle
    // timeout never runs out, the frame timeout does.
    let line = vec![b'x'; 1000];
    let trickler = thread::spawn(move || trickle(client, &line, Duration::from_millis(20)));
    let slow = Timeouts::default()
        .idle(Some(Duration::from_secs(1)))
        .frame(Some(Duration::from_millis(200)));
    let mut conn = Conn::with_config(server, Framed::new(Lines::new()), timeouts(slow));

    let (lines, result) = run_to_the_end(&mut conn);
    assert!(lines.is_empty());
    assert!(
        matches!(
            result,
            Err(ConnError::Protocol(Error::TimedOut(Timeout::Frame)))
        ),
        "{result:?}"
    );
    // The peer left half a line: it must not take the end for an answer.
    assert_eq!(linger(&conn), Some(Duration::ZERO));
    drop(conn); // the RST
    let (sent, end) = trickler.join().unwrap();
    assert!(sent < 1000, "the whole line went out");
    let kind = end.expect_err("the trickler was cut off").kind();
    assert!(
        matches!(
            kind,
            io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
        ),
        "{kind:?}"
    );
}

/// The process's open descriptors, where the OS says (Linux).
fn descriptors() -> Option<usize> {
    std::fs::read_dir("/proc/self/fd").ok().map(Iterator::count)
}

/// Raises the soft descriptor limit towards `wanted` (up to the hard
/// limit); returns the limit in force.
fn raise_descriptor_limit(wanted: u64) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return u64::MAX; // unknown: try
        }
        if limit.rlim_cur < wanted && limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: wanted.min(limit.rlim_max),
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    limit.rlim_cur
}

/// How many clients of each kind the descriptor limit holds: per silent
/// and trickling pair, their two sockets, the proxy's two, and for the
/// silent one the proxy's connection to the fallback and the fallback's.
fn clients_that_fit(wanted: usize) -> usize {
    const EACH: u64 = 6;
    const SPARE: u64 = 256;
    let limit = raise_descriptor_limit(EACH * wanted as u64 + SPARE);
    let fit = usize::try_from(limit.saturating_sub(SPARE) / EACH).unwrap_or(usize::MAX);
    if fit < wanted {
        eprintln!(
            "timeouts: {limit} descriptors hold {fit} clients of each kind, not {wanted}: \
             running {fit} (raise the hard limit, ulimit -Hn, to run them all)"
        );
    }
    fit.min(wanted)
}

fn connect(addr: SocketAddr) -> std::net::TcpStream {
    let socket = std::net::TcpStream::connect(addr).unwrap();
    socket.set_read_timeout(Some(STUCK)).unwrap();
    socket.set_write_timeout(Some(STUCK)).unwrap();
    socket.set_nodelay(true).unwrap();
    socket
}

/// `count` clients that connect and never send a byte; returns once the
/// proxy has ended every one (a clean end: they left nothing unread).
fn silent_clients(addr: SocketAddr, count: usize, connected: Arc<AtomicUsize>) {
    let sockets: Vec<_> = (0..count)
        .map(|_| {
            let socket = connect(addr);
            connected.fetch_add(1, Ordering::AcqRel);
            socket
        })
        .collect();
    for mut socket in sockets {
        let mut buf = [0; 64];
        let n = socket.read(&mut buf).expect("a clean end");
        assert_eq!(n, 0, "a silent client was sent bytes");
    }
}

/// `count` clients that send an HTTP request head a byte a second, the
/// head far too long to complete before the frame timeout; returns once
/// the proxy has cut every one off.
fn trickling_clients(addr: SocketAddr, count: usize, connected: Arc<AtomicUsize>) {
    const EVERY: Duration = Duration::from_secs(1);
    let mut head = b"GET /slow HTTP/1.1\r\nHost: example.com\r\nX-Padding: ".to_vec();
    head.extend_from_slice(&[b'x'; 300]);
    head.extend_from_slice(b"\r\n\r\n");
    let mut sockets: Vec<Option<_>> = (0..count)
        .map(|_| {
            let socket = connect(addr);
            socket.set_nonblocking(true).unwrap();
            connected.fetch_add(1, Ordering::AcqRel);
            Some(socket)
        })
        .collect();
    let rounds = head.len() + (STUCK.as_millis() / EVERY.as_millis()) as usize;
    for round in 0..rounds {
        let mut open = 0;
        for slot in &mut sockets {
            let Some(socket) = slot else { continue };
            let mut buf = [0; 64];
            let mut closed = match socket.read(&mut buf) {
                Ok(0) => true,
                Ok(_) => false,
                Err(e) => e.kind() != io::ErrorKind::WouldBlock,
            };
            if !closed && round < head.len() {
                closed = socket.write(&head[round..=round]).is_err();
            }
            if closed {
                *slot = None;
            } else {
                open += 1;
            }
        }
        if open == 0 {
            return;
        }
        thread::sleep(EVERY);
    }
    let open = sockets.iter().flatten().count();
    panic!("{open} trickling clients were never cut off");
}

/// Requests and checks the web backend's answer, again and again, from
/// when every other client is connected until `over`; returns how many
/// were answered and the failures.
fn normal_client(
    addr: SocketAddr,
    connected: Arc<AtomicUsize>,
    all: usize,
    over: Arc<AtomicBool>,
) -> (usize, Vec<String>) {
    let waiting = Instant::now();
    while connected.load(Ordering::Acquire) < all {
        assert!(
            waiting.elapsed() < STUCK,
            "the other clients never connected"
        );
        thread::sleep(Duration::from_millis(1));
    }
    let (mut served, mut failures) = (0, Vec::new());
    while !over.load(Ordering::Acquire) {
        let mut socket = connect(addr);
        let mut answer = Vec::new();
        let done = socket
            .write_all(REQUEST)
            .and_then(|()| socket.read_to_end(&mut answer));
        match done {
            Ok(_) if answer == RESPONSE => served += 1,
            Ok(_) => failures.push(format!("answer {:?}", String::from_utf8_lossy(&answer))),
            Err(e) => failures.push(e.to_string()),
        }
        thread::sleep(Duration::from_millis(20));
    }
    (served, failures)
}

#[test]
fn a_proxy_closes_silent_and_trickling_clients_by_their_timeouts_and_serves_the_rest() {
    let _serial = one_at_a_time();
    let count = clients_that_fit(1000);
    if count == 0 {
        eprintln!("timeouts: no descriptors to spare for the proxy's test; skipped");
        return;
    }
    let stats = Arc::new(Stats::default());
    let stop = Arc::new(AtomicBool::new(false));
    let (ready, proxy_addr) = mpsc::channel();
    let proxy = {
        let (stats, stop) = (stats.clone(), stop.clone());
        thread::spawn(move || {
            let proxy = Proxy::new(stats);
            ready.send(proxy.addr(CLIENTS)).unwrap();
            proxy.run(&stop);
        })
    };
    let addr = proxy_addr.recv().unwrap();
    let baseline = descriptors();

    let connected = Arc::new(AtomicUsize::new(0));
    let over = Arc::new(AtomicBool::new(false));
    let silent = {
        let connected = connected.clone();
        thread::spawn(move || silent_clients(addr, count, connected))
    };
    let trickling = {
        let connected = connected.clone();
        thread::spawn(move || trickling_clients(addr, count, connected))
    };
    let normal = {
        let over = over.clone();
        thread::spawn(move || normal_client(addr, connected, 2 * count, over))
    };
    silent.join().unwrap();
    trickling.join().unwrap();
    over.store(true, Ordering::Release);
    let (served, failures) = normal.join().unwrap();

    // Every connection the proxy held is closed: its clients', its own to
    // the backends, and the backends' from it.
    let waiting = Instant::now();
    while stats.open() != [0; 3] {
        assert!(
            waiting.elapsed() < STUCK,
            "still open (clients, upstreams, backends): {:?}",
            stats.open()
        );
        thread::sleep(Duration::from_millis(10));
    }
    if let Some(baseline) = baseline {
        assert_eq!(descriptors(), Some(baseline), "descriptors left open");
    }
    stop.store(true, Ordering::Release);
    proxy.join().unwrap();

    assert!(failures.is_empty(), "the normal client: {failures:?}");
    assert!(served > 0, "the normal client was never served");
    let ends = stats.ends.lock().unwrap();
    let timed_out = |which| ends.iter().filter(|end| **end == Some(which)).count();
    let untimed = ends.iter().filter(|end| end.is_none()).count();
    eprintln!(
        "timeouts: {count} silent and {count} trickling clients: {} by the tunnel idle \
         timeout, {} by the frame timeout; {served} requests served meanwhile",
        timed_out(Timeout::TunnelIdle),
        timed_out(Timeout::Frame),
    );
    // Every storm client was ended by a timeout, and no normal one.
    assert_eq!(ends.len() - untimed, 2 * count);
    assert_eq!(untimed, served);
    // The silent clients were routed to the fallback (and its connections
    // closed with them).
    assert!(stats.echoed.load(Ordering::Acquire) >= count);
}
