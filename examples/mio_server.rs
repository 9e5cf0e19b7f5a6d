//! A line server on one thread's `mio::Poll`, serving thousands of
//! connections at once with cleave-mio's `Conn`.
//!
//! ```text
//! cargo run --release --example mio_server                     # 5000 clients
//!                        (fewer, said on stderr, if the descriptor limit is lower)
//! cargo run --release --example mio_server -- --clients 20000
//! cargo run --release --example mio_server -- --listen 127.0.0.1:7000
//! ```
//!
//! Each line gets an answer: `PING` → `PONG`, `ADD a b` → the sum,
//! anything else → its length. Lines are cut with `Lines` (at most 1 KiB),
//! answers encoded with it and queued; a connection asks for `WRITABLE`
//! only while answers wait for the socket. A client that sends nothing for
//! a minute, or takes 5 s to finish a line, is dropped (the connection's
//! idle and frame timeouts, checked once a second).
//!
//! The built-in run connects every client first, so that all of them are
//! open at once, then each sends its lines in small pieces, half-closes,
//! and checks every answer. Clients and server share the process, two
//! descriptors a client: it raises its soft descriptor limit to the hard
//! one, and runs fewer clients (saying so) when that is still too low.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use cleave_mio::{Conn, ConnError, Conns, ReadOutcome};
use cleave_proto::{Bytes, ConnConfig, Encoder, Error, Framed, Lines, LinesConfig, Timeouts};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const LISTENER: Token = Token(0);
const FIRST_CONN: Token = Token(1);
const LINES_PER_CLIENT: usize = 16;
const CLIENT_THREADS: usize = 4;
/// How often the loop looks for connections whose deadline passed.
const SWEEP: Duration = Duration::from_secs(1);

fn answer(line: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(line);
    let mut words = text.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some("PING"), None, _) => b"PONG".to_vec(),
        (Some("ADD"), Some(a), Some(b)) => match (a.parse::<i64>(), b.parse::<i64>()) {
            (Ok(a), Ok(b)) => a.saturating_add(b).to_string().into_bytes(),
            _ => b"ERR not numbers".to_vec(),
        },
        _ => format!("LEN {}", line.len()).into_bytes(),
    }
}

/// What the server saw.
#[derive(Debug, Default)]
struct Served {
    connections: usize,
    peak_open: usize,
    lines: usize,
    bytes_in: usize,
    bytes_out: usize,
    errors: usize,
    /// Connections ended by their idle or frame timeout.
    timed_out: usize,
}

/// The server: one thread, one `Poll`, the connections in cleave-mio's
/// `Conns` (a slab by token). Serves until `stop_after` connections have
/// come and gone (for ever with `None`).
fn serve(mut listener: TcpListener, stop_after: Option<usize>) -> io::Result<Served> {
    let mut poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut conns = Conns::starting_at(FIRST_CONN);
    let mut events = Events::with_capacity(1024);
    let mut lines = Vec::new();
    let mut encoder = Lines::new();
    let mut served = Served::default();
    let mut closed = 0usize;
    let lines_config = LinesConfig::default().max_length(1024).strip_cr(true);
    // The demo's choices: a minute of silence, or 5 s for one line.
    let timeouts = Timeouts::default()
        .idle(Some(Duration::from_secs(60)))
        .frame(Some(Duration::from_secs(5)));
    let config = ConnConfig::default().timeouts(timeouts);
    let mut next_sweep = Instant::now() + SWEEP;

    while stop_after.is_none_or(|n| closed < n) {
        poll.poll(
            &mut events,
            Some(next_sweep.saturating_duration_since(Instant::now())),
        )?;
        for event in &events {
            if event.token() == LISTENER {
                let accepted = conns.accept(&listener, poll.registry(), |socket, _peer| {
                    // Answers go out as they are ready: no waiting for the
                    // client's acknowledgement (Nagle).
                    socket.set_nodelay(true).ok()?;
                    let lines = Framed::new(Lines::with_config(lines_config));
                    Some(Conn::with_config(socket, lines, config))
                })?;
                served.connections += accepted.added;
                served.errors += accepted.failed + accepted.refused;
                served.peak_open = served.peak_open.max(conns.len());
                continue;
            }
            let token = event.token();
            let Some(conn) = conns.get_mut(token) else {
                continue;
            };
            let outcome = conn.on_event(event, &mut lines);
            let handled = handle(conn, outcome, &mut lines, &mut encoder, &mut served);
            closed += settle(&mut conns, poll.registry(), token, handled, &mut served);
        }
        if Instant::now() >= next_sweep {
            // The connections whose timeout ran out are ended.
            let now = Instant::now();
            let due: Vec<Token> = conns
                .iter()
                .filter(|(_, conn)| conn.deadline().is_some_and(|d| d <= now))
                .map(|(token, _)| token)
                .collect();
            for token in due {
                let Some(conn) = conns.get_mut(token) else {
                    continue;
                };
                let outcome = conn.on_timeout(&mut lines).map(|()| ReadOutcome::default());
                let handled = handle(conn, outcome, &mut lines, &mut encoder, &mut served);
                closed += settle(&mut conns, poll.registry(), token, handled, &mut served);
            }
            next_sweep = now + SWEEP;
        }
    }
    Ok(served)
}

/// After a connection was handled: its registration brought up to date;
/// or, finished or failed, it is removed and closed. Returns 1 when it
/// was.
fn settle(
    conns: &mut Conns<TcpStream, Framed<Lines>>,
    registry: &mio::Registry,
    token: Token,
    handled: Result<(), BoxError>,
    served: &mut Served,
) -> usize {
    match handled.map(|()| conns.settle(registry, token)) {
        Ok(Ok(None)) => 0,
        Ok(Ok(Some(_finished))) => 1,
        Err(e) => {
            match e.downcast_ref::<ConnError>() {
                Some(ConnError::Protocol(Error::TimedOut(_))) => served.timed_out += 1,
                _ => served.errors += 1,
            }
            conns.take(token); // dropped: the socket closes
            1
        }
        Ok(Err(_)) => {
            served.errors += 1;
            conns.take(token);
            1
        }
    }
}

/// What one readiness event (or timeout) of one connection brought:
/// answers queued for the lines, the write side closed at the client's
/// end, and everything written that the socket takes.
fn handle(
    conn: &mut Conn<TcpStream, Framed<Lines>>,
    mut outcome: Result<ReadOutcome, ConnError>,
    lines: &mut Vec<Bytes>,
    encoder: &mut Lines,
    served: &mut Served,
) -> Result<(), BoxError> {
    loop {
        for line in lines.drain(..) {
            served.lines += 1;
            let frame = encoder.encode(Bytes::from(answer(&line)))?;
            served.bytes_out += frame.len();
            if let Err(rejected) = conn.conn_mut().push(frame) {
                // Full: write what we can, then the connection is too slow
                // a reader for its answers; refuse the rest with an error.
                conn.on_writable()?;
                conn.conn_mut().push(rejected.into_value())?;
            }
        }
        // A bad line, a timeout, a failed socket: drop the connection.
        let read = outcome?;
        served.bytes_in += read.read;
        if read.eof {
            conn.close(); // the client is done: answer, then end
        }
        if !read.more {
            break;
        }
        // The read budget ran out: answer what came, then read on.
        conn.on_writable()?;
        outcome = conn.on_readable(lines);
    }
    conn.on_writable()?; // the answers just queued
    Ok(())
}

/// A listener whose accept queue holds a burst of thousands of connects
/// (mio's `bind` asks for 1024; a connect the queue drops waits a second
/// for its SYN to be sent again).
fn listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        None,
    )?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(8192)?;
    socket.set_nonblocking(true)?;
    Ok(TcpListener::from_std(socket.into()))
}

/// One client thread: connects all its clients, then sends each one's
/// lines in pieces of 1 to 16 bytes, half-closes, checks the answers.
fn clients(addr: SocketAddr, ids: Vec<usize>) -> Result<usize, BoxError> {
    let mut sockets = Vec::with_capacity(ids.len());
    for _ in &ids {
        let socket = std::net::TcpStream::connect(addr)?;
        socket.set_nodelay(true)?;
        sockets.push(socket);
    }
    let requests: Vec<Vec<u8>> = ids
        .iter()
        .map(|id| {
            (0..LINES_PER_CLIENT)
                .map(|i| match i % 3 {
                    0 => "PING\r\n".to_string(),
                    1 => format!("ADD {id} {i}\n"),
                    _ => format!("client {id} says {}\n", "x".repeat(i)),
                })
                .collect::<String>()
                .into_bytes()
        })
        .collect();
    let mut sent = vec![0usize; ids.len()];
    let mut piece = 1;
    while sent.iter().zip(&requests).any(|(s, r)| *s < r.len()) {
        for (i, socket) in sockets.iter_mut().enumerate() {
            let end = (sent[i] + piece).min(requests[i].len());
            socket.write_all(&requests[i][sent[i]..end])?;
            sent[i] = end;
        }
        piece = piece % 16 + 1;
    }
    let mut checked = 0;
    for (i, socket) in sockets.iter_mut().enumerate() {
        socket.shutdown(Shutdown::Write)?;
        let mut answers = String::new();
        socket.read_to_string(&mut answers)?;
        let expected: String = String::from_utf8(requests[i].clone())?
            .lines()
            .map(|l| format!("{}\n", String::from_utf8_lossy(&answer(l.as_bytes()))))
            .collect();
        if answers != expected {
            return Err(format!("client {}: answers differ", ids[i]).into());
        }
        checked += LINES_PER_CLIENT;
    }
    Ok(checked)
}

/// Descriptors the built-in run needs besides two per client (its socket
/// and the server's): the listener, the poll, the threads, stdio.
const SPARE_DESCRIPTORS: u64 = 64;

/// Raises this process's soft limit on open descriptors to its hard limit
/// (no privilege needed) and returns the limit now in force, or `None` where
/// there is none to read.
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

/// How many clients the built-in run can hold open at once: `wanted`, or
/// fewer when the descriptor limit is lower (said on stderr), or an error
/// naming the limit when `--clients` asked for more than fits.
fn clients_that_fit(wanted: usize, asked: bool) -> Result<usize, BoxError> {
    let Some(limit) = raise_descriptor_limit() else {
        return Ok(wanted);
    };
    let fit = usize::try_from(limit.saturating_sub(SPARE_DESCRIPTORS) / 2).unwrap_or(usize::MAX);
    if wanted <= fit {
        return Ok(wanted);
    }
    let why = format!(
        "{wanted} clients need {} open descriptors (two each), and this process may open {limit}",
        2 * wanted as u64 + SPARE_DESCRIPTORS
    );
    if asked || fit == 0 {
        return Err(
            format!("{why}; raise the limit (ulimit -n) or ask for --clients {fit}").into(),
        );
    }
    eprintln!("mio_server: {why}: running {fit} clients (raise it with ulimit -n)");
    Ok(fit)
}

fn run(args: &[String]) -> Result<(), BoxError> {
    let mut count = 5000usize;
    let mut asked = false;
    let mut listen = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--clients" => {
                count = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .ok_or("--clients N")?;
                asked = true;
            }
            "--listen" => listen = Some(args.next().ok_or("--listen ADDR")?.parse::<SocketAddr>()?),
            "--help" | "-h" => {
                println!("mio_server [--clients N] | [--listen ADDR]");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other} (see --help)").into()),
        }
    }
    if let Some(addr) = listen {
        println!("serving lines on {addr} (one thread); ^C to stop");
        serve(listener(addr)?, None)?;
        return Ok(());
    }

    // Clients and server share this process: two descriptors a client.
    let count = clients_that_fit(count, asked)?;
    let listener = listener("127.0.0.1:0".parse()?)?;
    let addr = listener.local_addr()?;
    let started = Instant::now();
    let server = std::thread::spawn(move || serve(listener, Some(count)));
    let threads: Vec<_> = (0..CLIENT_THREADS)
        .map(|t| {
            let ids: Vec<usize> = (t..count).step_by(CLIENT_THREADS).collect();
            std::thread::spawn(move || clients(addr, ids))
        })
        .collect();
    let mut checked = 0;
    for thread in threads {
        checked += thread.join().map_err(|_| "a client thread panicked")??;
    }
    let served = server.join().map_err(|_| "the server panicked")??;
    let seconds = started
        .elapsed()
        .max(Duration::from_millis(1))
        .as_secs_f64();
    println!(
        "one server thread, {CLIENT_THREADS} client threads, on 127.0.0.1:{}",
        addr.port()
    );
    println!("connections served   {:>10}", served.connections);
    println!("open at once (peak)  {:>10}", served.peak_open);
    println!(
        "lines answered       {:>10}   ({checked} checked by the clients)",
        served.lines
    );
    println!(
        "bytes in / out       {:>10} / {}",
        served.bytes_in, served.bytes_out
    );
    println!("errors               {:>10}", served.errors);
    println!("timed out            {:>10}", served.timed_out);
    println!(
        "wall time            {seconds:>10.2} s   ({:.0} lines/s)",
        served.lines as f64 / seconds
    );
    if served.errors + served.timed_out > 0 || checked != served.lines {
        return Err("some connections failed".into());
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mio_server: {e}");
            ExitCode::FAILURE
        }
    }
}
