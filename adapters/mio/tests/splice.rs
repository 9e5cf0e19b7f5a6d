//! `Tunnel` on a mio poll loop, over loopback TCP, between a blocking
//! client and a blocking backend in threads: the tail first, a reset on
//! one side reaches the other as a reset after the bytes that made it, a
//! clean end stays a half-close, a failed write resets the backend, a
//! backend that closes early ends the tunnel with both sides reset (and
//! one that resets while the client uploads gives the client its bytes,
//! then a reset), an
//! idle tunnel times out with both sides reset, TCP urgent data (where
//! splice(2) stops) loses nothing after it, and pipes are bounded and
//! reused.
//!
//! Every tunnel test runs two ways ([`Mode`]): with pipes to lease (the
//! kernel moves the bytes, and the test checks that it did) and with none
//! (each direction copies).

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::thread;
use std::time::{Duration, Instant};

use cleave_mio::{Pipes, PipesConfig, Side, Tunnel};
use cleave_proto::Bytes;
use mio::net::TcpStream;
use mio::{Events, Poll, Token};

#[path = "support/net.rs"]
mod net;
use net::{accept, connect, listen, pattern, read_to_end_or_error, reset, STUCK};

/// How the proxy's tunnel moves its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// With pipes to lease: splice(2).
    Splice,
    /// With a pool that opens no pipe: copies.
    Fallback,
}

impl Mode {
    fn pipes(self) -> Pipes {
        let max_open = match self {
            Mode::Splice => 2,
            Mode::Fallback => 0,
        };
        pool(max_open, 2)
    }
}

fn pool(max_open: usize, max_idle: usize) -> Pipes {
    Pipes::new(
        PipesConfig::default()
            .max_open(Some(max_open))
            .max_idle(max_idle),
    )
}

/// What the proxy saw.
#[derive(Debug)]
struct Proxied {
    /// The tunnel's result, its error reduced to its kind.
    result: Result<(u64, u64), io::ErrorKind>,
    /// `SO_LINGER` of the client and the backend socket at the end.
    lingers: [Option<Duration>; 2],
}

/// How the proxy runs its tunnel.
#[derive(Clone, Copy)]
struct Setup<'a> {
    pipes: &'a Pipes,
    tail: &'a [u8],
    idle: Option<Duration>,
    budget: Option<usize>,
}

impl<'a> Setup<'a> {
    fn new(pipes: &'a Pipes) -> Self {
        Self {
            pipes,
            tail: b"",
            idle: None,
            budget: None,
        }
    }
}

/// Accepts one client on `listener`, connects to `backend`, and runs a
/// `Tunnel` between them on a poll loop until it is finished; then drops
/// both sockets.
fn proxy(listener: std::net::TcpListener, backend: SocketAddr, setup: Setup<'_>) -> Proxied {
    proxy_watching(listener, backend, setup, &mut || {})
}

/// As [`proxy`], calling `watch` after every turn of the poll loop.
fn proxy_watching(
    listener: std::net::TcpListener,
    backend: SocketAddr,
    setup: Setup<'_>,
    watch: &mut dyn FnMut(),
) -> Proxied {
    let (client, _) = listener.accept().unwrap();
    let backend = std::net::TcpStream::connect(backend).unwrap();
    tunnel(client, backend, setup, watch)
}

/// Runs a tunnel between the proxy's two sockets to its end, calling
/// `watch` after every turn of the poll loop.
fn tunnel(
    client: std::net::TcpStream,
    backend: std::net::TcpStream,
    setup: Setup<'_>,
    watch: &mut dyn FnMut(),
) -> Proxied {
    client.set_nonblocking(true).unwrap();
    backend.set_nonblocking(true).unwrap();
    let (client, backend) = (TcpStream::from_std(client), TcpStream::from_std(backend));
    let tail = Bytes::copy_from_slice(setup.tail);
    let mut tunnel = Tunnel::new(client, backend, tail, setup.pipes).idle(setup.idle);
    if let Some(budget) = setup.budget {
        tunnel.set_budget(budget);
    }
    let mut poll = Poll::new().unwrap();
    tunnel
        .register(poll.registry(), Token(0), Token(1))
        .unwrap();
    let mut events = Events::with_capacity(16);
    // The most one write moves: a pipe's contents (one fill) at the
    // kernel's default size, a copy buffer where no pipe is leased, or the
    // tail.
    let pipe = Pipes::default()
        .lease()
        .map_or(0, |lease| lease.pipe_size());
    let one_write = if setup.pipes.max_open() > 0 {
        pipe
    } else {
        16 * 1024
    };
    let one_write = one_write.max(setup.tail.len());
    let started = Instant::now();
    while !tunnel.is_finished() {
        assert!(started.elapsed() < STUCK, "the tunnel is stuck");
        let wait = tunnel.deadline().map_or(STUCK, |deadline| {
            deadline.saturating_duration_since(Instant::now())
        });
        poll.poll(&mut events, Some(wait)).unwrap();
        for event in &events {
            let side = if event.token() == Token(0) {
                Side::Client
            } else {
                Side::Backend
            };
            let mut more = within_budget(&mut tunnel, setup.budget, one_write, |t| {
                t.on_event(side, event)
            });
            while more {
                more = within_budget(&mut tunnel, setup.budget, one_write, Tunnel::on_ready);
            }
        }
        tunnel.on_timeout(Instant::now());
        watch();
    }
    let result = match tunnel.result().expect("finished") {
        Ok(written) => Ok(*written),
        Err(e) => Err(e.kind()),
    };
    let linger = |s: &TcpStream| socket2::SockRef::from(s).linger().unwrap();
    let lingers = [linger(tunnel.client()), linger(tunnel.backend())];
    tunnel.deregister(poll.registry()).unwrap();
    drop(tunnel); // the sockets close, dropped, not shut down
    Proxied { result, lingers }
}

/// Calls `step` on `tunnel`, checking that neither direction moved
/// `budget` bytes plus one write in it (a write under way when the budget
/// runs out is finished: `one_write` is the most one moves); what `step`
/// returned.
fn within_budget(
    tunnel: &mut Tunnel<TcpStream, TcpStream>,
    budget: Option<usize>,
    one_write: usize,
    step: impl FnOnce(&mut Tunnel<TcpStream, TcpStream>) -> bool,
) -> bool {
    let before = tunnel.written();
    let more = step(tunnel);
    if let Some(budget) = budget {
        let after = tunnel.written();
        let moved = (after.0 - before.0, after.1 - before.1);
        let most = (budget + one_write) as u64;
        assert!(
            moved.0 < most && moved.1 < most,
            "{moved:?} bytes moved in one call, budget {budget} and one write of {one_write}"
        );
    }
    more
}

/// Writes `chunk` until a write fails; the error.
fn write_until_error(socket: &mut std::net::TcpStream, limit: usize) -> io::Error {
    let chunk = pattern(0, 16 * 1024);
    let mut sent = 0;
    loop {
        match socket.write(&chunk) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return e,
        }
        assert!(sent < limit, "the stream goes on after its peer is gone");
    }
}

fn is_reset_or_broken_pipe(kind: io::ErrorKind) -> bool {
    matches!(
        kind,
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
    )
}

/// In `Splice` mode at least `spliced` bytes went through the pipes, in
/// `Fallback` none did; either way every pipe is back or closed.
fn assert_pipes(pipes: &Pipes, mode: Mode, spliced: u64) {
    match mode {
        Mode::Splice => assert!(
            pipes.spliced() >= spliced,
            "{} bytes spliced, {spliced} expected",
            pipes.spliced()
        ),
        Mode::Fallback => assert_eq!((pipes.open(), pipes.spliced()), (0, 0)),
    }
    assert_eq!(pipes.open(), pipes.idle(), "a pipe left in use");
}

fn a_backend_reset_reaches_the_client_as_a_reset_after_its_bytes(mode: Mode) {
    const N: usize = 1000;
    let (listener, addr) = listen();
    let (backends, backend_addr) = listen();
    let tail = b"GET / HTTP/1.1\r\n\r\n";
    let backend = thread::spawn(move || {
        let mut socket = accept(&backends);
        // The tail first; a reset before it arrived would fail the
        // proxy's connect, not the tunnel.
        let mut request = vec![0; tail.len()];
        socket.read_exact(&mut request).unwrap();
        socket.write_all(&pattern(0, N)).unwrap();
        reset(socket);
        request
    });
    let client = thread::spawn(move || read_to_end_or_error(&mut connect(addr), N));

    let pipes = mode.pipes();
    let setup = Setup {
        tail,
        ..Setup::new(&pipes)
    };
    let proxied = proxy(listener, backend_addr, setup);
    assert_eq!(backend.join().unwrap(), tail);
    let (got, end) = client.join().unwrap();
    assert!(
        got == pattern(0, N),
        "{} bytes, not the {N} sent",
        got.len()
    );
    let kind = end.expect_err("a clean end of stream after a reset").kind();
    assert_eq!(kind, io::ErrorKind::ConnectionReset);
    assert_eq!(proxied.result, Err(io::ErrorKind::ConnectionReset));
    assert_eq!(proxied.lingers, [Some(Duration::ZERO); 2]);
    assert_pipes(&pipes, mode, N as u64);
}

fn a_client_reset_mid_upload_reaches_the_backend_as_a_reset(mode: Mode) {
    const N: usize = 100_000;
    let (listener, addr) = listen();
    let (backends, backend_addr) = listen();
    let backend = thread::spawn(move || read_to_end_or_error(&mut accept(&backends), N));
    let client = thread::spawn(move || {
        let mut socket = connect(addr);
        socket.write_all(&pattern(0, N)).unwrap();
        reset(socket); // what the kernel still holds is dropped
    });

    let pipes = mode.pipes();
    let proxied = proxy(listener, backend_addr, Setup::new(&pipes));
    client.join().unwrap();
    // All that arrived, in order, then a reset: never a clean end.
    let (got, end) = backend.join().unwrap();
    assert!(got == pattern(0, got.len()), "bytes lost or reordered");
    let kind = end.expect_err("a clean end of stream after a reset").kind();
    assert_eq!(
        kind,
        io::ErrorKind::ConnectionReset,
        "after {} bytes",
        got.len()
    );
    assert_eq!(proxied.result, Err(io::ErrorKind::ConnectionReset));
    assert_eq!(proxied.lingers, [Some(Duration::ZERO); 2]);
    assert_pipes(&pipes, mode, got.len() as u64);
}

fn a_clean_end_stays_a_half_close_both_ways(mode: Mode, budget: Option<usize>) {
    let pipes = mode.pipes();
    clean_tunnel(&pipes, budget);
    assert_pipes(&pipes, mode, (100_000 + 50_000) as u64);
}

/// A tunnel of 300 tail bytes and 100 000 up, then 50 000 down after the
/// client's end, on `pipes`: everything arrives, both ends stay clean.
fn clean_tunnel(pipes: &Pipes, budget: Option<usize>) {
    const M: usize = 100_000;
    const K: usize = 50_000;
    let tail = pattern(0, 300);
    let (listener, addr) = listen();
    let (backends, backend_addr) = listen();
    let backend = thread::spawn(move || {
        let mut socket = accept(&backends);
        let (upload, end) = read_to_end_or_error(&mut socket, 300 + M);
        end.expect("a clean end of the upload");
        // Only after the client's end: the answer crosses the half-close.
        socket.write_all(&pattern(7, K)).unwrap();
        socket.shutdown(Shutdown::Write).unwrap();
        upload
    });
    let client = thread::spawn(move || {
        let mut socket = connect(addr);
        socket.write_all(&pattern(300, M)).unwrap();
        socket.shutdown(Shutdown::Write).unwrap(); // FIN; the answer still comes
        read_to_end_or_error(&mut socket, K)
    });

    let setup = Setup {
        tail: &tail,
        budget,
        ..Setup::new(pipes)
    };
    let proxied = proxy(listener, backend_addr, setup);
    let upload = backend.join().unwrap();
    let (answer, end) = client.join().unwrap();
    assert!(upload == pattern(0, 300 + M), "the tail, then the upload");
    end.expect("a clean end of the answer");
    assert!(answer == pattern(7, K), "the answer");
    assert_eq!(proxied.result, Ok(((300 + M) as u64, K as u64)));
    assert_eq!(proxied.lingers, [None; 2], "a clean end is no reset");
}

fn a_failed_write_to_the_client_resets_the_backend(mode: Mode) {
    let (listener, addr) = listen();
    let (backends, backend_addr) = listen();
    // The client ends its side and goes away before anything flows: the
    // tunnel reads its end (and half-closes the backend), then a write to
    // it fails once its kernel has answered with a reset.
    drop(connect(addr));
    let backend = thread::spawn(move || write_until_error(&mut accept(&backends), 64 << 20));

    let pipes = mode.pipes();
    let proxied = proxy(listener, backend_addr, Setup::new(&pipes));
    let error = backend.join().unwrap();
    assert!(is_reset_or_broken_pipe(error.kind()), "{error}");
    let kind = proxied.result.expect_err("a failed write is an error");
    assert!(is_reset_or_broken_pipe(kind), "{kind:?}");
    // The error the backend sees cannot tell a reset from a close after a
    // half-close: that the tunnel set both sockets to reset on close is
    // what says it.
    assert_eq!(proxied.lingers, [Some(Duration::ZERO); 2]);
    assert_pipes(&pipes, mode, 0);
}

fn a_backend_that_closes_early_ends_the_tunnel_with_both_sides_reset(mode: Mode) {
    let (listener, addr) = listen();
    let (backends, backend_addr) = listen();
    let backend = thread::spawn(move || {
        let mut socket = accept(&backends);
        let mut hello = [0; 5];
        socket.read_exact(&mut hello).unwrap();
        socket.write_all(b"bye").unwrap();
        // A clean close while the client still uploads: the tunnel's next
        // writes to it fail.
        hello
    });
    let client = thread::spawn(move || {
        let socket = connect(addr);
        let mut reader = socket.try_clone().unwrap();
        let answer = thread::spawn(move || read_to_end_or_error(&mut reader, 3));
        let mut writer = socket;
        let error = write_until_error(&mut writer, 64 << 20);
        (answer.join().unwrap(), error)
    });

    let pipes = mode.pipes();
    let setup = Setup {
        tail: b"hello",
        ..Setup::new(&pipes)
    };
    let proxied = proxy(listener, backend_addr, setup);
    assert_eq!(&backend.join().unwrap(), b"hello");
    let ((got, end), error) = client.join().unwrap();
    // What arrived of the answer (a reset may overtake it: the kernel
    // drops what its socket had not handed out), then the end or a reset.
    assert!(b"bye".starts_with(&got), "{got:?}");
    if let Err(e) = end {
        assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}");
    }
    assert!(is_reset_or_broken_pipe(error.kind()), "{error}");
    let kind = proxied.result.expect_err("the upload failed");
    assert!(is_reset_or_broken_pipe(kind), "{kind:?}");
    assert_eq!(proxied.lingers, [Some(Duration::ZERO); 2]);
    assert_pipes(&pipes, mode, 0);
}

fn an_idle_tunnel_times_out_and_both_sides_see_a_reset(mode: Mode) {
    let (listener, addr) = listen();
    let (backends, backend_addr) = listen();
    let backend = thread::spawn(move || {
        let mut socket = accept(&backends);
        let mut hello = [0; 5];
        socket.read_exact(&mut hello).unwrap();
        socket.write_all(b"hi").unwrap();
        // Then nobody says anything.
        (hello, read_to_end_or_error(&mut socket, 0))
    });
    let client = thread::spawn(move || {
        let mut socket = connect(addr);
        let mut hi = [0; 2];
        socket.read_exact(&mut hi).unwrap();
        (hi, read_to_end_or_error(&mut socket, 0))
    });

    let pipes = mode.pipes();
    let setup = Setup {
        tail: b"hello",
        idle: Some(Duration::from_millis(200)),
        ..Setup::new(&pipes)
    };
    let proxied = proxy(listener, backend_addr, setup);
    assert_eq!(proxied.result, Err(io::ErrorKind::TimedOut));
    assert_eq!(proxied.lingers, [Some(Duration::ZERO); 2]);
    let (hello, (got, end)) = backend.join().unwrap();
    assert_eq!((&hello, got.len()), (b"hello", 0));
    assert_eq!(end.unwrap_err().kind(), io::ErrorKind::ConnectionReset);
    let (hi, (got, end)) = client.join().unwrap();
    assert_eq!((&hi, got.len()), (b"hi", 0));
    assert_eq!(end.unwrap_err().kind(), io::ErrorKind::ConnectionReset);
    // What this is about is the timeout. The two bytes may go as the ones
    // `Lease::fill` takes when it looks for an urgent mark: they can come
    // between a splice that found nothing and that look (seen once, on a
    // loaded machine), and then they are copied. Every pipe is still back.
    assert_pipes(&pipes, mode, 0);
}

fn a_tunnel_busier_than_its_idle_timeout_runs_to_its_clean_end(mode: Mode) {
    const BYTES: usize = 40;
    let (listener, addr) = listen();
    let (backends, backend_addr) = listen();
    let backend = thread::spawn(move || {
        let mut socket = accept(&backends);
        let (got, end) = read_to_end_or_error(&mut socket, BYTES);
        end.expect("a clean end of the upload");
        socket.shutdown(Shutdown::Write).unwrap();
        got
    });
    let client = thread::spawn(move || {
        let mut socket = connect(addr);
        for i in 0..BYTES {
            socket.write_all(&pattern(i, 1)).unwrap();
            thread::sleep(Duration::from_millis(25));
        }
        socket.shutdown(Shutdown::Write).unwrap();
        read_to_end_or_error(&mut socket, 0)
    });

    let pipes = mode.pipes();
    let setup = Setup {
        // Far longer than the gaps between the client's bytes, and far
        // shorter than the whole upload.
        idle: Some(Duration::from_millis(500)),
        ..Setup::new(&pipes)
    };
    let proxied = proxy(listener, backend_addr, setup);
    assert_eq!(backend.join().unwrap(), pattern(0, BYTES));
    let (answer, end) = client.join().unwrap();
    assert!(answer.is_empty());
    end.expect("a clean end");
    assert_eq!(proxied.result, Ok((BYTES as u64, 0)));
    assert_eq!(proxied.lingers, [None; 2]);
    assert_pipes(&pipes, mode, BYTES as u64);
}

/// Shuts `ours` down, lets `theirs` read the end and close, and reads
/// theirs: the connection is closed both ways.
fn close_both_ways(ours: &mut std::net::TcpStream, mut theirs: std::net::TcpStream) {
    ours.shutdown(Shutdown::Write).unwrap();
    assert_eq!(theirs.read(&mut [0; 1]).unwrap(), 0);
    drop(theirs);
    assert_eq!(ours.read(&mut [0; 1]).unwrap(), 0);
    if cfg!(any(
        target_os = "linux",
        target_os = "android",
        target_os = "macos"
    )) {
        let again = ours.shutdown(Shutdown::Write);
        assert_eq!(again.unwrap_err().kind(), io::ErrorKind::NotConnected);
    }
}

/// The proxy half-closed its backend socket before the switch, and the
/// backend closed in turn: the connection is closed both ways, and a second
/// shutdown says `NotConnected`. Bytes the client still sent cannot reach
/// the backend: that is an error, not hidden by the shutdown being done.
fn a_backend_closed_both_ways_before_the_tunnel_fails_a_late_upload(mode: Mode) {
    let (listener, addr) = listen();
    let (backends, backend_addr) = listen();
    let mut client = connect(addr);
    let (proxy_client, _) = listener.accept().unwrap();
    let mut proxy_backend = connect(backend_addr);
    let backend = accept(&backends);
    client.write_all(b"late").unwrap();
    client.shutdown(Shutdown::Write).unwrap();
    close_both_ways(&mut proxy_backend, backend);

    let pipes = mode.pipes();
    let proxied = tunnel(proxy_client, proxy_backend, Setup::new(&pipes), &mut || {});
    let kind = proxied.result.expect_err("the backend is gone");
    assert!(is_reset_or_broken_pipe(kind), "{kind:?}");
    let (got, _) = read_to_end_or_error(&mut client, 0);
    assert!(got.is_empty());
    assert_pipes(&pipes, mode, 0);
}

/// The same with nothing left to send: the tunnel's own shutdown of the
/// backend is done, not an error, and the client's end reaches the client.
fn a_closed_backend_and_an_ended_client_end_the_tunnel_cleanly(mode: Mode) {
    let (listener, addr) = listen();
    let (backends, backend_addr) = listen();
    let mut client = connect(addr);
    let (proxy_client, _) = listener.accept().unwrap();
    let mut proxy_backend = connect(backend_addr);
    let backend = accept(&backends);
    client.shutdown(Shutdown::Write).unwrap();
    close_both_ways(&mut proxy_backend, backend);

    let pipes = mode.pipes();
    let proxied = tunnel(proxy_client, proxy_backend, Setup::new(&pipes), &mut || {});
    assert_eq!(proxied.result, Ok((0, 0)));
    assert_eq!(proxied.lingers, [None; 2]);
    let (got, end) = read_to_end_or_error(&mut client, 0);
    assert!(got.is_empty());
    end.expect("a clean end");
    assert_pipes(&pipes, mode, 0);
}

/// A client sends `abc`, an out-of-band `X` (TCP urgent data) and `def`,
/// with its end right after (`fin`) or, once those arrived, 100 000 bytes
/// more then its end. splice(2) stops at the urgent mark: the tunnel goes
/// on by copying, leaves the out-of-band byte out as a copying tunnel
/// does, and loses nothing past it.
fn an_urgent_byte_is_left_out_and_nothing_after_it_is_lost(mode: Mode) {
    const M: usize = 100_000;
    for fin in [true, false] {
        let (listener, addr) = listen();
        let (backends, backend_addr) = listen();
        let more = if fin { 0 } else { M };
        let (arrived, wait) = std::sync::mpsc::channel();
        let backend = thread::spawn(move || {
            let mut socket = accept(&backends);
            let mut first = [0; 11];
            socket.read_exact(&mut first).unwrap();
            arrived.send(()).unwrap();
            let (rest, end) = read_to_end_or_error(&mut socket, more);
            end.expect("a clean end of the upload");
            socket.write_all(b"answer").unwrap();
            socket.shutdown(Shutdown::Write).unwrap();
            (first, rest)
        });
        let client = thread::spawn(move || {
            let mut socket = connect(addr);
            socket.write_all(b"abc").unwrap();
            socket2::SockRef::from(&socket)
                .send_out_of_band(b"X")
                .unwrap();
            socket.write_all(b"def").unwrap();
            if !fin {
                // Once the tunnel is past the mark, with no end queued
                // behind it: what comes next still arrives.
                wait.recv().unwrap();
                socket.write_all(&pattern(0, M)).unwrap();
            }
            socket.shutdown(Shutdown::Write).unwrap();
            read_to_end_or_error(&mut socket, 6)
        });

        let pipes = mode.pipes();
        let setup = Setup {
            tail: b"tail ",
            ..Setup::new(&pipes)
        };
        let proxied = proxy(listener, backend_addr, setup);
        let (first, rest) = backend.join().unwrap();
        assert_eq!(&first, b"tail abcdef", "fin: {fin}");
        assert!(rest == pattern(0, more), "the bytes after the mark");
        let (answer, end) = client.join().unwrap();
        end.expect("a clean end of the answer");
        assert_eq!(answer, b"answer");
        let up = (5 + 6 + more) as u64;
        assert_eq!(proxied.result, Ok((up, 6)), "fin: {fin}");
        assert_eq!(proxied.lingers, [None; 2], "a clean end is no reset");
        assert_pipes(&pipes, mode, 6);
    }
}

/// Each test, run in each [`Mode`].
macro_rules! in_every_mode {
    ($($test:ident $(($($arg:expr),*))?),* $(,)?) => {
        mod splice {
            $(#[test]
            fn $test() {
                super::$test(super::Mode::Splice $($(, $arg)*)?);
            })*
        }
        mod fallback {
            $(#[test]
            fn $test() {
                super::$test(super::Mode::Fallback $($(, $arg)*)?);
            })*
        }
    };
}

in_every_mode!(
    a_backend_reset_reaches_the_client_as_a_reset_after_its_bytes,
    a_client_reset_mid_upload_reaches_the_backend_as_a_reset,
    a_clean_end_stays_a_half_close_both_ways(None),
    a_failed_write_to_the_client_resets_the_backend,
    a_backend_that_closes_early_ends_the_tunnel_with_both_sides_reset,
    an_idle_tunnel_times_out_and_both_sides_see_a_reset,
    a_tunnel_busier_than_its_idle_timeout_runs_to_its_clean_end,
    a_backend_closed_both_ways_before_the_tunnel_fails_a_late_upload,
    a_closed_backend_and_an_ended_client_end_the_tunnel_cleanly,
    an_urgent_byte_is_left_out_and_nothing_after_it_is_lost,
);

#[test]
fn a_small_budget_hands_back_often_and_loses_nothing() {
    for mode in [Mode::Splice, Mode::Fallback] {
        a_clean_end_stays_a_half_close_both_ways(mode, Some(1000));
    }
}

#[test]
fn a_finished_direction_gives_its_pipe_back_while_the_other_goes_on() {
    let pipes = pool(2, 2);
    let (listener, addr) = listen();
    let (backends, backend_addr) = listen();
    let (answer, go) = std::sync::mpsc::channel();
    let backend = thread::spawn(move || {
        let mut socket = accept(&backends);
        let (upload, end) = read_to_end_or_error(&mut socket, 2);
        end.expect("a clean end of the upload");
        // Only once the proxy saw its pipe back.
        go.recv().unwrap();
        socket.write_all(b"down").unwrap();
        socket.shutdown(Shutdown::Write).unwrap();
        upload
    });
    let client = thread::spawn(move || {
        let mut socket = connect(addr);
        socket.write_all(b"up").unwrap();
        socket.shutdown(Shutdown::Write).unwrap();
        read_to_end_or_error(&mut socket, 4)
    });

    let mut answered = false;
    let proxied = proxy_watching(listener, backend_addr, Setup::new(&pipes), &mut || {
        // The upload is over: its pipe is back, while the answer's is in
        // use.
        if !answered && pipes.idle() == 1 {
            assert_eq!(pipes.open(), 2);
            answer.send(()).unwrap();
            answered = true;
        }
    });
    assert!(answered, "the upload's pipe came back only at the end");
    assert_eq!(proxied.result, Ok((2, 4)));
    assert_eq!(backend.join().unwrap(), b"up");
    let (got, end) = client.join().unwrap();
    end.expect("a clean end of the answer");
    assert_eq!(got, b"down");
    assert_eq!((pipes.open(), pipes.idle(), pipes.spliced()), (2, 2, 6));
}

#[test]
fn pipes_are_bounded_reused_and_a_direction_without_one_copies() {
    // One pipe for two directions: one splices, the other copies; the
    // pipe is kept, empty, for the next tunnel, which starts on it.
    let pipes = pool(1, 1);
    clean_tunnel(&pipes, None);
    assert_eq!((pipes.open(), pipes.idle()), (1, 1));
    // The upload leased the pipe when the tunnel was made: its 100 000
    // bytes are spliced (the tail is written from user space), the
    // answer's 50 000 copied. A pool past its limit would splice those too.
    assert_eq!(pipes.spliced(), 100_000);
    clean_tunnel(&pipes, None);
    assert_eq!((pipes.open(), pipes.idle()), (1, 1));
    assert_eq!(pipes.spliced(), 200_000);
}

#[cfg(target_os = "linux")]
#[test]
fn the_default_pool_leaves_most_descriptors_to_sockets() {
    let pipes = Pipes::default();
    assert!(pipes.max_open() > 0, "splice exists on Linux");
    assert!(pipes.max_open() <= 4096);
    assert_eq!((pipes.open(), pipes.idle(), pipes.spliced()), (0, 0, 0));
}

/// A `Tunnel` between two Unix stream sockets (mio's `UnixStream` is a
/// `Socket` too, without a reset): both ways, the tail first, clean ends,
/// every byte through the pipes.
#[cfg(target_os = "linux")]
#[test]
fn a_unix_socket_tunnel_is_spliced_both_ways() {
    use std::os::unix::net::UnixStream as StdUnix;

    const UP: usize = 300_000;
    const DOWN: usize = 200_000;
    let (mut client, proxy_client) = StdUnix::pair().unwrap();
    let (proxy_backend, mut backend) = StdUnix::pair().unwrap();
    for socket in [&client, &backend] {
        socket.set_read_timeout(Some(STUCK)).unwrap();
        socket.set_write_timeout(Some(STUCK)).unwrap();
    }
    proxy_client.set_nonblocking(true).unwrap();
    proxy_backend.set_nonblocking(true).unwrap();
    let client_side = thread::spawn(move || {
        client.write_all(&pattern(0, UP)).unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).unwrap();
        answer
    });
    let backend_side = thread::spawn(move || {
        let mut upload = Vec::new();
        backend.read_to_end(&mut upload).unwrap();
        backend.write_all(&pattern(9, DOWN)).unwrap();
        backend.shutdown(Shutdown::Write).unwrap();
        upload
    });

    let pipes = pool(2, 2);
    let (c, b) = (
        mio::net::UnixStream::from_std(proxy_client),
        mio::net::UnixStream::from_std(proxy_backend),
    );
    let mut tunnel = Tunnel::new(c, b, Bytes::from_static(b"tail:"), &pipes);
    let mut poll = Poll::new().unwrap();
    tunnel
        .register(poll.registry(), Token(0), Token(1))
        .unwrap();
    let mut events = Events::with_capacity(16);
    let started = Instant::now();
    while !tunnel.is_finished() {
        assert!(started.elapsed() < STUCK, "the tunnel is stuck");
        poll.poll(&mut events, Some(STUCK)).unwrap();
        for event in &events {
            let side = if event.token() == Token(0) {
                Side::Client
            } else {
                Side::Backend
            };
            let mut more = tunnel.on_event(side, event);
            while more {
                more = tunnel.on_ready();
            }
        }
    }
    let moved = tunnel.result().unwrap().as_ref().unwrap();
    assert_eq!(*moved, ((UP + 5) as u64, DOWN as u64));
    tunnel.deregister(poll.registry()).unwrap();
    drop(tunnel);

    let mut expected = b"tail:".to_vec();
    expected.extend_from_slice(&pattern(0, UP));
    assert!(
        backend_side.join().unwrap() == expected,
        "the tail, then the upload"
    );
    assert!(
        client_side.join().unwrap() == pattern(9, DOWN),
        "the answer"
    );
    assert_eq!(pipes.spliced(), (UP + DOWN) as u64, "all of it spliced");
    assert_eq!((pipes.open(), pipes.idle()), (2, 2));
}

/// A backend answers half a response then resets, while the client is
/// uploading. In one `on_ready`, the up direction's write to the backend
/// takes the reset's error: the down direction must not then read the
/// half and (the error taken) an end of stream, and pass a FIN on to the
/// client. The client reads the half, then a reset.
fn a_backend_reset_during_an_upload_reaches_the_client_as_a_reset(max_open: usize) {
    let (listener, addr) = listen();
    let (backends, backend_addr) = listen();
    let mut client = connect(addr);
    let (proxy_client, _) = listener.accept().unwrap();
    let proxy_backend = connect(backend_addr);
    let mut backend = accept(&backends);
    backend.write_all(b"half").unwrap();
    reset(backend); // RST after half a response
    client.write_all(b"upload").unwrap();
    thread::sleep(Duration::from_millis(100)); // all of it arrives

    proxy_client.set_nonblocking(true).unwrap();
    proxy_backend.set_nonblocking(true).unwrap();
    let pipes = Pipes::new(PipesConfig::default().max_open(Some(max_open)));
    let mut tunnel = Tunnel::new(
        TcpStream::from_std(proxy_client),
        TcpStream::from_std(proxy_backend),
        Bytes::new(),
        &pipes,
    );
    // Both sockets start ready: one call tries both directions.
    for _ in 0..10 {
        if tunnel.is_finished() {
            break;
        }
        tunnel.on_ready();
    }
    let result = format!("{:?}", tunnel.result());
    drop(tunnel); // both set to reset on close

    let (got, end) = read_to_end_or_error(&mut client, 4);
    assert!(
        got == b"half" && end.is_err(),
        "the client read {:?} then {end:?}; the tunnel: {result}",
        String::from_utf8_lossy(&got)
    );
}

#[test]
fn splice_a_backend_reset_during_an_upload_reaches_the_client_as_a_reset() {
    a_backend_reset_during_an_upload_reaches_the_client_as_a_reset(2);
}

#[test]
fn copy_a_backend_reset_during_an_upload_reaches_the_client_as_a_reset() {
    a_backend_reset_during_an_upload_reaches_the_client_as_a_reset(0);
}
