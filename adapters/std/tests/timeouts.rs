//! The connection's timeouts through `Stream` over loopback TCP: a silent
//! client ended by the opening or idle timeout, a trickling one by the
//! frame timeout; and a thread-per-connection routing server, built like
//! the demo, that a thousand silent clients and a thousand slow HTTP heads
//! leave with every descriptor and backend connection closed, while a
//! normal client is served throughout.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use cleave_proto::route::{HostPattern, Match, Router, RouterConfig};
use cleave_proto::{
    Bytes, ConnConfig, Encoder, Error, Event, Framed, Lines, Session, SessionConfig, Timeout,
    Timeouts,
};
use cleave_std::{ConnError, Stream};

/// The tests here count the process's descriptors: one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    (client, server)
}

fn lines(socket: TcpStream, timeouts: Timeouts) -> Stream<TcpStream, Framed<Lines>> {
    let config = ConnConfig::default().timeouts(timeouts);
    Stream::with_config(socket, Framed::new(Lines::new()), config)
}

/// The error `recv` ends with.
fn ended(stream: &mut Stream<TcpStream, Framed<Lines>>) -> ConnError {
    let mut encoder = Lines::new();
    loop {
        match stream.recv() {
            Ok(Some(line)) => {
                stream.send(encoder.encode(line).unwrap()).unwrap();
                stream.flush().unwrap();
            }
            Ok(None) => panic!("the stream ended without an error"),
            Err(e) => return e,
        }
    }
}

/// Everything the client reads until the end, and how it ended.
fn read_all(client: &mut TcpStream) -> (Vec<u8>, io::Result<()>) {
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    let end = client.read_to_end(&mut got).map(drop);
    (got, end)
}

#[test]
fn a_silent_client_is_ended_by_the_opening_timeout() {
    let _serial = serial();
    let (mut client, server) = pair();
    // The caller's own read timeout, shorter: the connection's deadline
    // takes its place, so no `ConnError::TimedOut` comes first.
    server
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let opening = Timeouts::default().opening(Some(Duration::from_millis(200)));
    let mut stream = lines(server, opening);
    match ended(&mut stream) {
        ConnError::Protocol(Error::TimedOut(Timeout::Opening)) => {}
        other => panic!("{other:?}"),
    }
    assert!(stream.conn().is_finished());
    // Nothing was left in the buffer: a clean end, already shut down.
    let (got, end) = read_all(&mut client);
    assert!(got.is_empty() && end.is_ok(), "{got:?} {end:?}");
    // Final: the same error again, without reading.
    assert!(matches!(
        stream.recv(),
        Err(ConnError::Protocol(Error::TimedOut(Timeout::Opening)))
    ));
}

#[test]
fn a_client_that_goes_silent_is_ended_by_the_idle_timeout() {
    let _serial = serial();
    let (mut client, server) = pair();
    let idle = Timeouts::default().idle(Some(Duration::from_millis(200)));
    let mut stream = lines(server, idle);
    client.write_all(b"hello\n").unwrap(); // then nothing
    match ended(&mut stream) {
        ConnError::Protocol(Error::TimedOut(Timeout::Idle)) => {}
        other => panic!("{other:?}"),
    }
    drop(stream);
    let (got, end) = read_all(&mut client);
    assert_eq!(got, b"hello\n", "the answer, then a clean end");
    assert!(end.is_ok(), "{end:?}");
}

#[test]
fn a_trickling_client_is_ended_by_the_frame_timeout() {
    let _serial = serial();
    let (client, server) = pair();
    // A byte every 20 ms keeps the idle timeout away, but the line never
    // completes in time.
    let timeouts = Timeouts::default()
        .idle(Some(Duration::from_secs(2)))
        .frame(Some(Duration::from_millis(200)));
    let mut stream = lines(server, timeouts);
    let stop = Arc::new(AtomicBool::new(false));
    let trickle = {
        let (mut client, stop) = (client.try_clone().unwrap(), stop.clone());
        thread::spawn(move || {
            for _ in 0..1000 {
                if stop.load(Ordering::SeqCst) || client.write_all(b"x").is_err() {
                    return;
                }
                thread::sleep(Duration::from_millis(20));
            }
        })
    };
    match ended(&mut stream) {
        ConnError::Protocol(Error::TimedOut(Timeout::Frame)) => {}
        other => panic!("{other:?}"),
    }
    // The peer left half a line: the end is a reset, not an answer.
    drop(stream);
    let (got, end) = read_all(&mut client.try_clone().unwrap());
    stop.store(true, Ordering::SeqCst);
    trickle.join().unwrap();
    assert!(got.is_empty());
    assert_eq!(end.unwrap_err().kind(), io::ErrorKind::ConnectionReset);
}

// ---------------------------------------------------- the routing server

/// Where the routing server sends a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// A line protocol the server answers itself.
    Lines,
    /// The local backend, through a raw tunnel.
    Backend,
}

/// The router's inspect delay: a silent client goes to the backend then.
const INSPECT_DELAY: Duration = Duration::from_secs(4);

/// The server's timeouts: the frame timeout ends a head that trickles in
/// (from its first byte) well before the inspect delay (from the start)
/// would route it, the tunnel idle timeout a silent client once routed.
fn timeouts() -> Timeouts {
    Timeouts::default()
        .opening(Some(Duration::from_secs(8)))
        .frame(Some(Duration::from_millis(2500)))
        .idle(Some(Duration::from_secs(5)))
        .tunnel_idle(Some(Duration::from_millis(800)))
}

fn router() -> Router<Target> {
    let config = RouterConfig::default().inspect_delay(INSPECT_DELAY);
    Router::with_config(Target::Backend, config)
        .rule(Match::Prefix("LINE ".into()), Target::Lines)
        .rule(
            Match::HttpHost(HostPattern::new("example.com")),
            Target::Backend,
        )
}

/// A listener on 127.0.0.1 whose backlog holds a burst of connections
/// (std's holds 128: past it, a connection waits a SYN retransmission).
fn listener() -> TcpListener {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    socket.bind(&addr.into()).unwrap();
    socket.listen(4096).unwrap();
    socket.into()
}

/// Server threads are many and do little: a small stack each.
fn spawn_small<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<T> {
    thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(f)
        .expect("a thread")
}

/// How the server's connections ended.
#[derive(Debug, Default)]
struct Tally {
    lines_served: AtomicUsize,
    tunnels_done: AtomicUsize,
    tunnels_idle: AtomicUsize,
    timed_out_frame: AtomicUsize,
    timed_out_other: AtomicUsize,
    failures: Mutex<Vec<String>>,
}

impl Tally {
    fn failed(&self, what: impl std::fmt::Display) {
        self.failures.lock().unwrap().push(what.to_string());
    }
}

/// An accept loop: a thread (small stack) per connection, until `stop`
/// and a last connection to wake it. Returns every thread it started.
fn accept_loop(
    listener: TcpListener,
    stop: Arc<AtomicBool>,
    serve: impl Fn(TcpStream) + Clone + Send + 'static,
) -> JoinHandle<Vec<JoinHandle<()>>> {
    thread::spawn(move || {
        let mut threads = Vec::new();
        for socket in listener.incoming() {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let Ok(socket) = socket else { continue };
            let serve = serve.clone();
            threads.push(spawn_small(move || serve(socket)));
        }
        threads
    })
}

/// The backend's connections: how many it had, how many are open.
#[derive(Debug, Default)]
struct Backend {
    total: AtomicUsize,
    live: AtomicUsize,
}

/// The backend: echoes until the end, then closes.
fn backend(
    stop: Arc<AtomicBool>,
    counts: Arc<Backend>,
) -> (SocketAddr, JoinHandle<Vec<JoinHandle<()>>>) {
    let listener = listener();
    let addr = listener.local_addr().unwrap();
    let threads = accept_loop(listener, stop, move |mut socket| {
        counts.total.fetch_add(1, Ordering::SeqCst);
        counts.live.fetch_add(1, Ordering::SeqCst);
        let mut buf = [0u8; 1024];
        loop {
            match socket.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if socket.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        drop(socket);
        counts.live.fetch_sub(1, Ordering::SeqCst);
    });
    (addr, threads)
}

/// One connection of the routing server: route, then answer lines or
/// tunnel to the backend.
fn serve(socket: TcpStream, backend: SocketAddr, tally: &Tally) {
    let config = ConnConfig::default().timeouts(timeouts());
    let session = Session::tunnel(router(), SessionConfig::default());
    let mut stream = Stream::with_config(socket, session, config);
    let routed = loop {
        match stream.recv() {
            Ok(Some(Event::Routed(decision))) => break decision.target,
            Ok(Some(_)) => {}
            Ok(None) => return,
            Err(ConnError::Protocol(Error::TimedOut(Timeout::Frame))) => {
                tally.timed_out_frame.fetch_add(1, Ordering::SeqCst);
                return;
            }
            Err(ConnError::Protocol(Error::TimedOut(_))) => {
                tally.timed_out_other.fetch_add(1, Ordering::SeqCst);
                return;
            }
            Err(e) => return tally.failed(format!("routing: {e}")),
        }
    };
    match routed {
        Target::Lines => serve_lines(stream.switch(|_| Framed::new(Lines::new())), tally),
        Target::Backend => {
            let tail = match stream.recv() {
                Ok(Some(Event::Tunnel(tail))) => tail,
                other => return tally.failed(format!("no tunnel: {other:?}")),
            };
            let (client, conn) = stream.into_parts();
            let idle = conn.timeouts().get_tunnel_idle();
            let ended = TcpStream::connect(backend).and_then(|b| tunnel(client, tail, b, idle));
            match ended {
                Ok(idle) => {
                    let count = if idle {
                        &tally.tunnels_idle
                    } else {
                        &tally.tunnels_done
                    };
                    count.fetch_add(1, Ordering::SeqCst);
                }
                Err(e) => tally.failed(format!("tunnel: {e}")),
            }
        }
    }
}

/// The line protocol: `OK <line>` for each line.
fn serve_lines(mut lines: Stream<TcpStream, Framed<Lines>>, tally: &Tally) {
    let mut encoder = Lines::new();
    loop {
        match lines.recv() {
            Ok(Some(line)) => {
                let answer = Bytes::from([&b"OK "[..], &line].concat());
                if let Err(e) = lines
                    .send(encoder.encode(answer).unwrap())
                    .and_then(|_| lines.flush())
                {
                    return tally.failed(format!("lines: {e}"));
                }
            }
            Ok(None) => {
                tally.lines_served.fetch_add(1, Ordering::SeqCst);
                if let Err(e) = lines.close() {
                    tally.failed(format!("lines: {e}"));
                }
                return;
            }
            Err(ConnError::Protocol(Error::TimedOut(_))) => {
                tally.timed_out_other.fetch_add(1, Ordering::SeqCst);
                return;
            }
            Err(e) => return tally.failed(format!("lines: {e}")),
        }
    }
}

/// When the last byte went through a tunnel, either way.
struct Activity {
    base: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn touch(&self) {
        let now = self.base.elapsed().as_millis() as u64;
        self.last_ms.fetch_max(now, Ordering::SeqCst);
    }

    /// What is left of `idle` since the last byte.
    fn left(&self, idle: Duration) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::SeqCst));
        (last + idle).saturating_sub(self.base.elapsed())
    }
}

/// A raw tunnel, the plain way: a thread each way copying until the end,
/// both ended when no byte went either way for `idle` (honoured with read
/// timeouts). Returns whether the idle timeout ended it.
fn tunnel(
    client: TcpStream,
    tail: Bytes,
    backend: TcpStream,
    idle: Option<Duration>,
) -> io::Result<bool> {
    (&backend).write_all(&tail)?;
    let (client, backend) = (Arc::new(client), Arc::new(backend));
    let activity = Arc::new(Activity {
        base: Instant::now(),
        last_ms: AtomicU64::new(0),
    });
    let down = {
        let (from, to, activity) = (backend.clone(), client.clone(), activity.clone());
        spawn_small(move || pump(&from, &to, idle, &activity))
    };
    let up = pump(&client, &backend, idle, &activity);
    let down = down
        .join()
        .map_err(|_| io::Error::other("a pump panicked"))?;
    Ok(up? | down?)
}

/// Copies `from` into `to` until the end (then half-closes `to`), or until
/// the tunnel is idle (then shuts both down). Returns whether it was idle.
fn pump(
    from: &TcpStream,
    to: &TcpStream,
    idle: Option<Duration>,
    activity: &Activity,
) -> io::Result<bool> {
    let mut buf = [0u8; 4096];
    loop {
        if let Some(idle) = idle {
            let left = activity.left(idle);
            if left.is_zero() {
                let _ = from.shutdown(Shutdown::Both);
                let _ = to.shutdown(Shutdown::Both);
                return Ok(true);
            }
            from.set_read_timeout(Some(left))?;
        }
        match (&mut &*from).read(&mut buf) {
            Ok(0) => {
                let _ = to.shutdown(Shutdown::Write);
                return Ok(false);
            }
            Ok(n) => {
                (&mut &*to).write_all(&buf[..n])?;
                activity.touch();
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => {
                let _ = from.shutdown(Shutdown::Both);
                let _ = to.shutdown(Shutdown::Both);
                return Err(e);
            }
        }
    }
}

/// The process's open descriptors, where the system says (Linux).
fn descriptors() -> Option<usize> {
    if cfg!(target_os = "linux") {
        Some(std::fs::read_dir("/proc/self/fd").ok()?.count())
    } else {
        None
    }
}

/// Raises the soft descriptor limit towards `wanted` (at most the hard
/// limit); returns the limit now.
#[cfg(unix)]
fn descriptor_limit(wanted: u64) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < wanted {
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

#[cfg(not(unix))]
fn descriptor_limit(wanted: u64) -> u64 {
    wanted
}

/// Waits (at most ten seconds) until `condition` holds.
fn wait_for(what: impl Fn() -> String, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "never reached: {}",
            what()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// Whether the server closed this client's connection: the end of the
/// stream, or a reset. The socket does not block.
fn is_closed(socket: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    match socket.read(&mut buf) {
        Ok(0) => true,
        Ok(n) => panic!("{n} bytes for a client that sent nothing whole"),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
        Err(_) => true,
    }
}

/// A normal line client and a normal tunnelled client, one exchange
/// each. Panics if either is not served right.
fn normal_exchange(addr: SocketAddr, n: usize) {
    let patience = Some(Duration::from_secs(10));
    let mut line = TcpStream::connect(addr).unwrap();
    line.set_read_timeout(patience).unwrap();
    line.write_all(format!("LINE hello {n}\n").as_bytes())
        .unwrap();
    line.shutdown(Shutdown::Write).unwrap();
    let mut answer = String::new();
    line.read_to_string(&mut answer).unwrap();
    assert_eq!(answer, format!("OK LINE hello {n}\n"));

    let mut raw = TcpStream::connect(addr).unwrap();
    raw.set_read_timeout(patience).unwrap();
    let wire = [&[0u8, 1, 2][..], format!("echo {n}").as_bytes()].concat();
    raw.write_all(&wire).unwrap();
    raw.shutdown(Shutdown::Write).unwrap();
    let mut echoed = Vec::new();
    raw.read_to_end(&mut echoed).unwrap();
    assert_eq!(echoed, wire, "through the backend and back");
}

#[test]
fn silent_and_trickling_clients_are_closed_by_their_timeouts_while_others_are_served() {
    let _serial = serial();
    // Per pair of attackers, a silent one and a trickling one: their two
    // sockets here, the server's two, and the silent one's tunnel to the
    // backend, both ends.
    const WANTED: usize = 1000;
    const PER_PAIR: usize = 6;
    let limit = descriptor_limit((WANTED * PER_PAIR + 512) as u64);
    let clients = WANTED.min((limit as usize).saturating_sub(512) / PER_PAIR);
    if clients < WANTED {
        println!(
            "note: the descriptor limit is {limit}: {clients} silent and {clients} trickling \
             clients instead of {WANTED}"
        );
    }
    let baseline = descriptors();

    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Backend::default());
    let (backend_addr, backends) = backend(stop.clone(), counts.clone());
    let tally = Arc::new(Tally::default());
    let listener = listener();
    let addr = listener.local_addr().unwrap();
    let servers = {
        let tally = tally.clone();
        accept_loop(listener, stop.clone(), move |socket| {
            serve(socket, backend_addr, &tally)
        })
    };
    let listening = descriptors();

    // Normal clients, before, during and after the attack.
    let attack = Arc::new(AtomicBool::new(false));
    let normal_stop = Arc::new(AtomicBool::new(false));
    let normal = {
        let (attack, normal_stop) = (attack.clone(), normal_stop.clone());
        thread::spawn(move || {
            let (mut served, mut during) = (0, 0);
            while !normal_stop.load(Ordering::SeqCst) {
                let under_attack = attack.load(Ordering::SeqCst);
                normal_exchange(addr, served);
                served += 1;
                if under_attack && attack.load(Ordering::SeqCst) {
                    during += 1;
                }
                thread::sleep(Duration::from_millis(10));
            }
            (served, during)
        })
    };

    // A trickling client sends the first byte of its head at once, then
    // one a second as long as it is open: the head would take a minute.
    // Closed sockets are looked for every 100 ms.
    let head = b"GET /slow HTTP/1.1\r\nHost: example.com\r\nUser-Agent: trickle\r\n\r\n";
    let connect = |first: &[u8]| {
        let mut socket = TcpStream::connect(addr).unwrap();
        socket.write_all(first).unwrap();
        socket.set_nonblocking(true).unwrap();
        socket
    };
    let mut silent: Vec<TcpStream> = (0..clients).map(|_| connect(b"")).collect();
    let mut trickling: Vec<TcpStream> = (0..clients).map(|_| connect(&head[..1])).collect();
    attack.store(true, Ordering::SeqCst);
    let mut sent = vec![1usize; clients];
    let mut silent_open = vec![true; clients];
    let mut trickling_open = vec![true; clients];
    let started = Instant::now();
    let mut round = 0u32;
    while silent_open.contains(&true) || trickling_open.contains(&true) {
        round += 1;
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "still open after 30 s: {} silent, {} trickling; {tally:?}",
            silent_open.iter().filter(|&&o| o).count(),
            trickling_open.iter().filter(|&&o| o).count(),
        );
        for (socket, open) in silent.iter_mut().zip(&mut silent_open) {
            *open = *open && !is_closed(socket);
        }
        for ((socket, open), sent) in trickling.iter_mut().zip(&mut trickling_open).zip(&mut sent) {
            if !*open || is_closed(socket) {
                *open = false;
                continue;
            }
            if round % 10 == 0 && *sent < head.len() {
                match socket.write(&head[*sent..*sent + 1]) {
                    Ok(n) => *sent += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(_) => *open = false,
                }
            }
        }
        thread::sleep(Duration::from_millis(100));
    }
    attack.store(false, Ordering::SeqCst);
    assert!(
        sent.iter().all(|&n| n < head.len()),
        "a trickled head completed"
    );

    normal_stop.store(true, Ordering::SeqCst);
    let (served, during) = normal.join().expect("every normal client was served right");
    assert!(during > 0, "no normal client served during the attack");

    // Every server-side socket is closed, the backends' too, while the
    // clients here still hold theirs.
    let live = || counts.live.load(Ordering::SeqCst);
    wait_for(
        || format!("{} backend connections live", live()),
        || live() == 0,
    );
    if let Some(listening) = listening {
        let held = silent.len() + trickling.len();
        wait_for(
            || {
                format!(
                    "{:?} descriptors, {listening} + {held} expected",
                    descriptors()
                )
            },
            || descriptors() == Some(listening + held),
        );
    }
    drop((silent, trickling));

    stop.store(true, Ordering::SeqCst);
    for addr in [addr, backend_addr] {
        drop(TcpStream::connect(addr).unwrap()); // wakes the accept loop
    }
    for threads in [servers.join().unwrap(), backends.join().unwrap()] {
        for thread in threads {
            thread.join().unwrap();
        }
    }
    wait_for(
        || format!("{:?} descriptors, {baseline:?} before", descriptors()),
        || descriptors() == baseline,
    );

    let failures = tally.failures.lock().unwrap();
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(tally.timed_out_frame.load(Ordering::SeqCst), clients);
    assert_eq!(tally.timed_out_other.load(Ordering::SeqCst), 0);
    // The silent clients reached the backend, and were ended by the
    // tunnel idle timeout; the normal ones were served.
    let idle = tally.tunnels_idle.load(Ordering::SeqCst);
    let done = tally.tunnels_done.load(Ordering::SeqCst);
    assert!(idle >= clients, "{idle} tunnels ended idle");
    assert_eq!(idle + done, clients + served);
    assert_eq!(counts.total.load(Ordering::SeqCst), clients + served);
    assert_eq!(tally.lines_served.load(Ordering::SeqCst), served);
}
