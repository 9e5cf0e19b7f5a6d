//! Memory of idle connections: what a cleave server holds per connection
//! once the traffic is over, at thousands of connections at once.
//!
//! Two line-echo servers, each in a child process of its own (this binary
//! with `--role server --server mio|tokio`):
//!
//! - `mio`: cleave-mio [`Conns`] of `Conn<TcpStream, Framed<Lines>>` on one
//!   thread's `mio::Poll`;
//! - `tokio`: a task per connection on a current-thread runtime, with
//!   one `FrameReader` (a `Connection`: it reads the lines and writes the
//!   answers).
//!
//! For each server and scenario a fresh child starts. The parent asks it
//! (one command a line on its stdin, one answer a line on its stdout) for
//! its live heap bytes (a counting global allocator) and its VmRSS, opens N
//! connections on blocking std sockets, drives the scenario on every one
//! (nothing, a partial line, a 64-byte line echoed, a 16 KiB line echoed),
//! waits until the server has read every byte, and asks again. The table
//! shows the difference divided by N.
//!
//! Run: `cargo run --release -p cleave-benches --bin idle_memory`
//! (`-- --help` for the options).

use std::future::poll_fn;
use std::io::{self, BufRead, Read as _, Write as _};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cleave_benches::alloc::{live_heap, Counting};
use cleave_benches::process::{machine, raise_nofile, vm_rss, BoxError, ServerProcess, WAIT};
use cleave_mio::{Conn, Conns};
use cleave_proto::{Encoder, Framed, Lines};
use futures_util::StreamExt;

/// Descriptors each process needs beside its N sockets.
const FD_HEADROOM: u64 = 64;
/// Bytes of the `partial` scenario's unfinished line.
const PARTIAL: usize = 10;
/// Length of the `echoed` scenario's line, `\n` included.
const SHORT_LINE: usize = 64;
/// Length of the `frame16k` scenario's line, `\n` included.
const LONG_LINE: usize = 16 * 1024;

// ---------------------------------------------------------------------------
// Counting allocator
// ---------------------------------------------------------------------------

/// Every allocation counted, from the first: the heap figures.
#[global_allocator]
static GLOBAL: Counting<true> = Counting;

// ---------------------------------------------------------------------------
// What is measured
// ---------------------------------------------------------------------------

/// A server under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Server {
    Mio,
    Tokio,
}

impl Server {
    const ALL: [Server; 2] = [Server::Mio, Server::Tokio];

    fn name(self) -> &'static str {
        match self {
            Server::Mio => "mio",
            Server::Tokio => "tokio",
        }
    }

    fn parse(name: &str) -> Option<Server> {
        Server::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// What every connection does before it goes idle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    Silent,
    Partial,
    Echoed,
    Frame16k,
}

impl Scenario {
    const ALL: [Scenario; 4] = [
        Scenario::Silent,
        Scenario::Partial,
        Scenario::Echoed,
        Scenario::Frame16k,
    ];

    fn name(self) -> &'static str {
        match self {
            Scenario::Silent => "silent",
            Scenario::Partial => "partial",
            Scenario::Echoed => "echoed",
            Scenario::Frame16k => "frame16k",
        }
    }

    fn parse(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }

    /// What connection `id` sends.
    fn request(self, id: usize) -> Vec<u8> {
        let text = |len: usize| (0..len).map(move |j| b'a' + ((id + j) % 26) as u8);
        match self {
            Scenario::Silent => Vec::new(),
            Scenario::Partial => text(PARTIAL).collect(),
            Scenario::Echoed => text(SHORT_LINE - 1).chain([b'\n']).collect(),
            Scenario::Frame16k => text(LONG_LINE - 1).chain([b'\n']).collect(),
        }
    }

    /// Whether the request is a whole line that comes back.
    fn echoes(self) -> bool {
        matches!(self, Scenario::Echoed | Scenario::Frame16k)
    }
}

// ---------------------------------------------------------------------------
// The server process
// ---------------------------------------------------------------------------

/// Connections accepted so far.
static ACCEPTED: AtomicU64 = AtomicU64::new(0);
/// Connections open now.
static OPEN: AtomicU64 = AtomicU64::new(0);
/// Connections waiting for bytes with nothing left to do: for mio, all of
/// them while the loop waits in `poll` (0 while it handles events); for
/// tokio, the tasks whose last poll was `Pending`.
static IDLE: AtomicU64 = AtomicU64::new(0);
/// Bytes read from all connections so far.
static BYTES_READ: AtomicU64 = AtomicU64::new(0);
/// Connections that failed (or accepts that did).
static ERRORS: AtomicU64 = AtomicU64::new(0);
/// `size_of_val` of the tokio server's connection task (0 until one came).
static TASK_FUTURE: AtomicU64 = AtomicU64::new(0);

/// The per-connection types and their sizes.
fn sizes() -> Vec<(&'static str, usize)> {
    vec![
        (
            "cleave_mio::Conn<mio::net::TcpStream, cleave_proto::Framed<cleave_proto::Lines>>",
            size_of::<Conn<mio::net::TcpStream, Framed<Lines>>>(),
        ),
        (
            "cleave_proto::WriteQueue",
            size_of::<cleave_proto::WriteQueue>(),
        ),
        ("cleave_proto::RecvBuf", size_of::<cleave_proto::RecvBuf>()),
        (
            "cleave_proto::Framed<cleave_proto::Lines>",
            size_of::<Framed<Lines>>(),
        ),
        (
            "cleave_proto::Conn<cleave_proto::Framed<cleave_proto::Lines>>",
            size_of::<cleave_proto::Conn<Framed<Lines>>>(),
        ),
        (
            "cleave_tokio::FrameReader<tokio::net::TcpStream, cleave_proto::Lines>",
            size_of::<cleave_tokio::FrameReader<tokio::net::TcpStream, Lines>>(),
        ),
        (
            "cleave_tokio::Writer<tokio::net::tcp::OwnedWriteHalf>",
            size_of::<cleave_tokio::Writer<tokio::net::tcp::OwnedWriteHalf>>(),
        ),
        (
            "cleave_proto::Session<usize>",
            size_of::<cleave_proto::Session<usize>>(),
        ),
        (
            "the tokio server's connection task (its future, size_of_val)",
            TASK_FUTURE.load(Relaxed) as usize,
        ),
    ]
}

/// The child: starts the server on a thread of its own, says `READY addr`,
/// then answers `STATS`, `SIZES` and `QUIT` on stdin until it ends.
fn server_main(server: Server) -> Result<(), BoxError> {
    raise_nofile()?;
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    // A burst of connects must not overflow the accept queue (std asks for
    // 128); listening again only changes the backlog.
    // SAFETY: the descriptor is this listener's, open for the call.
    if unsafe { libc::listen(listener.as_raw_fd(), 4096) } != 0 {
        return Err(io::Error::last_os_error().into());
    }
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let (ready, started) = mpsc::channel();
    std::thread::Builder::new()
        .name(format!("{} server", server.name()))
        .spawn(move || {
            let served = match server {
                Server::Mio => serve_mio(listener, ready),
                Server::Tokio => serve_tokio(listener, ready),
            };
            if let Err(e) = served {
                eprintln!("idle_memory: the {} server failed: {e}", server.name());
                std::process::exit(2);
            }
        })?;
    started.recv_timeout(WAIT)?;

    let mut out = io::stdout().lock();
    writeln!(out, "READY {addr}")?;
    out.flush()?;
    let mut stdin = io::stdin().lock();
    let mut command = String::new();
    loop {
        command.clear();
        if stdin.read_line(&mut command)? == 0 {
            break;
        }
        match command.trim() {
            "STATS" => writeln!(
                out,
                "STATS {} {} {} {} {} {} {}",
                live_heap(),
                vm_rss(),
                ACCEPTED.load(Relaxed),
                OPEN.load(Relaxed),
                IDLE.load(Relaxed),
                BYTES_READ.load(Relaxed),
                ERRORS.load(Relaxed),
            )?,
            "SIZES" => {
                for (name, size) in sizes() {
                    writeln!(out, "SIZE {size} {name}")?;
                }
                writeln!(out, "END")?;
            }
            "QUIT" => break,
            other => writeln!(out, "ERROR unknown command {other:?}")?,
        }
        out.flush()?;
    }
    // The server thread serves for ever; the process ends with it.
    std::process::exit(0);
}

const LISTENER: mio::Token = mio::Token(0);

/// The mio server: one `Poll`, the connections in `Conns`, every line
/// echoed.
fn serve_mio(listener: std::net::TcpListener, ready: mpsc::Sender<()>) -> Result<(), BoxError> {
    let mut listener = mio::net::TcpListener::from_std(listener);
    let mut poll = mio::Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, mio::Interest::READABLE)?;
    let mut conns: Conns<mio::net::TcpStream, Framed<Lines>> = Conns::starting_at(mio::Token(1));
    let mut events = mio::Events::with_capacity(1024);
    let mut lines = Vec::new();
    let mut encoder = Lines::new();
    ready.send(())?;
    loop {
        match poll.poll(&mut events, None) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            polled => polled?,
        }
        IDLE.store(0, Relaxed);
        for event in &events {
            if event.token() == LISTENER {
                let accepted = conns.accept(&listener, poll.registry(), |socket, _| {
                    socket.set_nodelay(true).ok()?;
                    Some(Conn::new(socket, Framed::new(Lines::new())))
                })?;
                ACCEPTED.fetch_add(accepted.added as u64, Relaxed);
                ERRORS.fetch_add((accepted.failed + accepted.refused) as u64, Relaxed);
            } else if let Some(conn) = conns.get_mut(event.token()) {
                let token = event.token();
                let echoed = echo_mio(conn, event, &mut lines, &mut encoder);
                if !matches!(
                    echoed.map(|()| conns.settle(poll.registry(), token)),
                    Ok(Ok(_))
                ) {
                    ERRORS.fetch_add(1, Relaxed);
                    conns.take(token); // dropped: the socket closes
                }
            }
            OPEN.store(conns.len() as u64, Relaxed);
        }
        IDLE.store(conns.len() as u64, Relaxed);
    }
}

/// One event of one mio connection: read, push every line back, write.
fn echo_mio(
    conn: &mut Conn<mio::net::TcpStream, Framed<Lines>>,
    event: &mio::event::Event,
    lines: &mut Vec<cleave_proto::Bytes>,
    encoder: &mut Lines,
) -> Result<(), BoxError> {
    let mut outcome = conn.on_event(event, lines);
    loop {
        for line in lines.drain(..) {
            if let Err(rejected) = conn.conn_mut().push(encoder.encode(line)?) {
                conn.on_writable()?;
                conn.conn_mut()
                    .push(rejected.into_value())
                    .map_err(|rejected| rejected.into_parts().0)?;
            }
        }
        let read = outcome?;
        BYTES_READ.fetch_add(read.read as u64, Relaxed);
        if read.eof {
            conn.close();
        }
        if !read.more {
            break;
        }
        conn.on_writable()?;
        outcome = conn.on_readable(lines);
    }
    conn.on_writable()?;
    Ok(())
}

/// The tokio server: a current-thread runtime, a task per connection.
fn serve_tokio(listener: std::net::TcpListener, ready: mpsc::Sender<()>) -> Result<(), BoxError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    runtime.block_on(accept_tokio(listener, ready))
}

async fn accept_tokio(
    listener: std::net::TcpListener,
    ready: mpsc::Sender<()>,
) -> Result<(), BoxError> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    ready.send(())?;
    loop {
        let (socket, _) = listener.accept().await?;
        socket.set_nodelay(true)?;
        ACCEPTED.fetch_add(1, Relaxed);
        OPEN.fetch_add(1, Relaxed);
        let task = async move {
            if echo_tokio(socket).await.is_err() {
                ERRORS.fetch_add(1, Relaxed);
            }
            OPEN.fetch_sub(1, Relaxed);
        };
        TASK_FUTURE.store(size_of_val(&task) as u64, Relaxed);
        tokio::spawn(task);
    }
}

/// One tokio connection, as the README's example: every line that arrived
/// together is queued, then written at once.
async fn echo_tokio(socket: tokio::net::TcpStream) -> Result<(), BoxError> {
    let mut lines = cleave_tokio::FrameReader::new(socket, Lines::new());
    let mut encoder = Lines::new();
    let mut counted = 0;
    let mut parked = false;
    // `lines.next()`, adding what it read to BYTES_READ also while it
    // waits (bytes read = consumed + buffered), and counted in IDLE while
    // it waits.
    while let Some(line) = poll_fn(|cx| {
        let polled = lines.poll_next_unpin(cx);
        let buf = lines.conn().recv_buf();
        let read = buf.offset() + buf.len() as u64;
        BYTES_READ.fetch_add(read - counted, Relaxed);
        counted = read;
        if polled.is_pending() != parked {
            parked = polled.is_pending();
            match parked {
                true => IDLE.fetch_add(1, Relaxed),
                false => IDLE.fetch_sub(1, Relaxed),
            };
        }
        polled
    })
    .await
    {
        lines.send(encoder.encode(line?)?).await?;
        while let Some(line) = lines.next_buffered() {
            lines.send(encoder.encode(line?)?).await?;
        }
        lines.flush().await?;
    }
    lines.close().await?;
    Ok(())
}

// ---------------------------------------------------------------------------
// The client: this process
// ---------------------------------------------------------------------------

/// What the server says about itself.
#[derive(Clone, Copy, Debug)]
struct Stats {
    heap: u64,
    rss: u64,
    accepted: u64,
    open: u64,
    idle: u64,
    bytes_read: u64,
    errors: u64,
}

/// The child's [`Stats`].
fn stats(child: &mut ServerProcess) -> Result<Stats, BoxError> {
    let numbers = child.stats()?;
    let [heap, rss, accepted, open, idle, bytes_read, errors] = numbers[..] else {
        return Err(format!("STATS gave {numbers:?}").into());
    };
    Ok(Stats {
        heap,
        rss,
        accepted,
        open,
        idle,
        bytes_read,
        errors,
    })
}

/// One line of the table.
struct Row {
    server: Server,
    scenario: Scenario,
    connections: usize,
    heap_per_conn: f64,
    rss_per_conn: f64,
}

/// One server and scenario: a fresh child, N connections, the difference.
fn measure(
    server: Server,
    scenario: Scenario,
    connections: usize,
) -> Result<(Row, Vec<(String, usize)>), BoxError> {
    let (mut child, addr) = ServerProcess::spawn(server.name())?;
    let before = stats(&mut child)?;
    let mut sockets = Vec::with_capacity(connections);
    let mut echo = Vec::new();
    let mut expected = 0u64;
    for id in 0..connections {
        let failed = |e: io::Error| format!("connection {id}: {e}");
        let mut socket = TcpStream::connect_timeout(&addr, WAIT).map_err(failed)?;
        socket.set_nodelay(true)?;
        socket.set_read_timeout(Some(WAIT))?;
        socket.set_write_timeout(Some(WAIT))?;
        let request = scenario.request(id);
        socket.write_all(&request).map_err(failed)?;
        expected += request.len() as u64;
        if scenario.echoes() {
            echo.resize(request.len(), 0);
            socket.read_exact(&mut echo).map_err(failed)?;
            if echo != request {
                return Err(format!("connection {id}: the echo differs").into());
            }
        }
        sockets.push(socket);
    }
    // The echoes prove the lines were handled; the counters prove the rest
    // was read, and that every connection is set up and waits (a tokio
    // task's first poll makes its buffer, for one).
    let deadline = Instant::now() + WAIT;
    let after = loop {
        let stats = stats(&mut child)?;
        if stats.errors > 0 {
            return Err(format!("the {} server had {} errors", server.name(), stats.errors).into());
        }
        let n = connections as u64;
        if stats.accepted == n && stats.open == n && stats.idle == n && stats.bytes_read == expected
        {
            break stats;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{} {}: after {} s the server has accepted {}, open {}, idle {}, read {} of {expected} bytes",
                server.name(),
                scenario.name(),
                WAIT.as_secs(),
                stats.accepted,
                stats.open,
                stats.idle,
                stats.bytes_read
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let sizes = child.sizes()?;
    drop(sockets);
    child.stop()?;
    let per_conn = |after: u64, before: u64| (after as f64 - before as f64) / connections as f64;
    let row = Row {
        server,
        scenario,
        connections,
        heap_per_conn: per_conn(after.heap, before.heap),
        rss_per_conn: per_conn(after.rss, before.rss),
    };
    Ok((row, sizes))
}

// ---------------------------------------------------------------------------
// Options and output
// ---------------------------------------------------------------------------

const HELP: &str = "\
idle_memory: heap and RSS per idle server connection, after traffic.

Options:
  --connections N                         default: 10000
  --server mio|tokio|all                  default: all
  --scenario silent|partial|echoed|frame16k|all   default: all
      silent: connect only; partial: 10 bytes, no newline;
      echoed: a 64 B line echoed; frame16k: a 16 KiB line echoed
";

struct Options {
    /// `Some` in the child: the server to run.
    role_server: Option<Server>,
    servers: Vec<Server>,
    scenarios: Vec<Scenario>,
    connections: usize,
}

fn options() -> Result<Options, BoxError> {
    let mut o = Options {
        role_server: None,
        servers: Server::ALL.to_vec(),
        scenarios: Scenario::ALL.to_vec(),
        connections: 10_000,
    };
    let mut role = None;
    let mut server = None;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut args = args.iter().map(String::as_str);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} takes a value"));
        match arg {
            "--help" | "-h" => {
                print!("{HELP}");
                std::process::exit(0);
            }
            "--role" => role = Some(value()?),
            "--server" => server = Some(value()?),
            "--scenario" => {
                o.scenarios = match value()? {
                    "all" => Scenario::ALL.to_vec(),
                    name => vec![Scenario::parse(name).ok_or(format!("unknown scenario {name}"))?],
                };
            }
            "--connections" => {
                o.connections = value()?
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or("--connections takes a positive number")?;
            }
            other => return Err(format!("unknown option {other} (see --help)").into()),
        }
    }
    match server {
        None | Some("all") => {}
        Some(name) => {
            o.servers = vec![Server::parse(name).ok_or(format!("unknown server {name}"))?]
        }
    }
    match role {
        None => {}
        Some("server") if o.servers.len() == 1 => o.role_server = Some(o.servers[0]),
        Some(role) => {
            return Err(format!("--role {role}: only `--role server --server mio|tokio`").into())
        }
    }
    Ok(o)
}

fn run() -> Result<(), BoxError> {
    let o = options()?;
    if let Some(server) = o.role_server {
        return server_main(server);
    }
    // Each process holds one end of every connection: N sockets each.
    let limit = raise_nofile()?;
    let need = o.connections as u64 + FD_HEADROOM;
    if need > limit {
        return Err(format!(
            "--connections {} needs {need} descriptors in each process (client and server), \
             but RLIMIT_NOFILE (hard) is {limit}: at most --connections {} fits",
            o.connections,
            limit.saturating_sub(FD_HEADROOM)
        )
        .into());
    }

    let began = Instant::now();
    let mut rows = Vec::new();
    let mut sizes: Vec<(String, usize)> = Vec::new();
    for &server in &o.servers {
        for &scenario in &o.scenarios {
            let started = Instant::now();
            let (row, reported) = measure(server, scenario, o.connections)?;
            eprintln!(
                "{} {}: {} connections, {:.0} heap B/conn, {:.0} RSS B/conn, {:.2} s",
                server.name(),
                scenario.name(),
                o.connections,
                row.heap_per_conn,
                row.rss_per_conn,
                started.elapsed().as_secs_f64()
            );
            rows.push(row);
            for (name, size) in reported {
                match sizes.iter_mut().find(|(n, _)| *n == name) {
                    Some(known) => known.1 = known.1.max(size),
                    None => sizes.push((name, size)),
                }
            }
        }
    }

    println!("# idle connection memory\n");
    println!("- machine: {}", machine());
    println!("- each server in its own process on one thread; the client: blocking std sockets");
    println!(
        "- heap: live bytes of the server's allocator (asked for; malloc's own overhead not in it); \
         RSS: its VmRSS. Both after the connections went idle minus before they came, per connection; \
         kernel socket buffers are in neither"
    );
    println!();
    println!("| server | scenario | connections | heap B/conn | RSS B/conn |");
    println!("|---|---|---|---|---|");
    for row in &rows {
        println!(
            "| {} | {} | {} | {:.0} | {:.0} |",
            row.server.name(),
            row.scenario.name(),
            row.connections,
            row.heap_per_conn,
            row.rss_per_conn
        );
    }
    println!();
    println!("| per-connection type | size_of |");
    println!("|---|---|");
    for (name, size) in sizes.iter().filter(|(_, size)| *size > 0) {
        println!("| `{name}` | {size} B |");
    }
    eprintln!("total: {:.2} s", began.elapsed().as_secs_f64());
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("idle_memory: {e}");
            ExitCode::FAILURE
        }
    }
}
