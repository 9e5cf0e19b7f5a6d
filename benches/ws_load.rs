//! WebSocket echo over loopback under load: the `ws_echo_server` example
//! (cleave's `http1::Server` for the handshake, then `websocket::WebSocket`
//! on cleave-tokio) beside tokio-tungstenite 0.28 and fastwebsockets 0.10
//! doing the same work, every text or binary message sent back, each on a
//! tokio runtime with one worker per core and no permessage-deflate.
//!
//! - `tungstenite`: `accept_async`, then every message fed back, the
//!   answers to what arrived together written with one flush (what
//!   `StreamExt::forward` does in tokio-tungstenite's own echo server,
//!   and what the example does).
//! - `fastwebsockets`: its upgrade on hyper's server, auto-close and
//!   auto-pong on, a `FragmentCollector` so whole messages come back,
//!   `write_frame` for each (it writes at once), run `unconstrained` as in
//!   its own echo server.
//!
//! Each server runs in a process of its own, so that its CPU time
//! (`utime + stime` from `/proc/<pid>/stat`, before and after) is its
//! own. The load comes from this process (tokio-tungstenite's client,
//! masked frames; its CPU is not counted): 64 connections, each after
//! its handshake keeping a window of messages in flight for the run's
//! duration, then waiting for the last echoes, every echo's bytes checked.
//!
//! - A: 32-byte text messages, up to 16 in flight per connection;
//! - B: 16 KiB binary messages, up to 4 in flight per connection.
//!
//! The servers take turns run by run; the table gives the median messages
//! per second and server CPU per message, and cleave's ratios to each.
//! The client shares the machine with the server: on two cores, messages
//! per second say how the cores were split as much as how fast the server
//! is; CPU per message is the figure to compare.
//!
//! ```text
//! cargo build --release -p cleave-examples --example ws_echo_server
//! cargo bench -p cleave-benches --bench ws_load                    # 3 runs of 5 s each
//! cargo bench -p cleave-benches --bench ws_load -- --runs 5 --duration 10
//! ```
//!
//! Without the example built, it says so and does nothing.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cleave_benches::process::machine;
use futures_util::{FutureExt, SinkExt, StreamExt};
use http_body_util::Empty;
use hyper::{Request, Response};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;

/// Boxed errors for the server roles.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The role that makes this binary the tokio-tungstenite server.
const SERVE_TUNGSTENITE: &str = "--serve-tungstenite";

/// The role that makes this binary the fastwebsockets server.
const SERVE_FASTWEBSOCKETS: &str = "--serve-fastwebsockets";

/// Connections per run.
const CONNECTIONS: usize = 64;

/// Longest a run may take past its duration (the last echoes, the
/// handshakes) before it is given up as stuck.
const STUCK: Duration = Duration::from_secs(60);

// ----- the servers of this binary -----

/// A tokio runtime with one worker per core, as `#[tokio::main]` builds.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

/// Binds `addr` and says where on the first line, as the example does.
async fn listen(name: &str, addr: &str) -> Result<TcpListener, BoxError> {
    let listener = TcpListener::bind(addr).await?;
    println!("{name} WebSocket echo on ws://{}/", listener.local_addr()?);
    std::io::stdout().flush()?;
    Ok(listener)
}

/// tokio-tungstenite on `addr`, one task per connection, until killed.
fn serve_tungstenite(addr: &str) -> Result<(), BoxError> {
    runtime()?.block_on(async {
        let listener = listen("tokio-tungstenite", addr).await?;
        loop {
            let (socket, _) = listener.accept().await?;
            tokio::spawn(async move {
                // A client that breaks off is its own business.
                let _ = echo_tungstenite(socket).await;
            });
        }
    })
}

/// One tokio-tungstenite connection: the handshake, then every text or
/// binary message fed back, flushed once nothing more is waiting (pings
/// and the close are answered by tungstenite itself on the next flush or
/// read).
async fn echo_tungstenite(socket: TcpStream) -> Result<(), BoxError> {
    socket.set_nodelay(true)?;
    let mut ws = tokio_tungstenite::accept_async(socket).await?;
    while let Some(first) = ws.next().await {
        let mut next = Some(first);
        while let Some(message) = next {
            if let message @ (Message::Text(_) | Message::Binary(_)) = message? {
                ws.feed(message).await?;
            }
            next = ws.next().now_or_never().flatten();
        }
        ws.flush().await?;
    }
    Ok(())
}

/// fastwebsockets on `addr`: hyper's server for the upgrade, one task per
/// connection, until killed.
fn serve_fastwebsockets(addr: &str) -> Result<(), BoxError> {
    runtime()?.block_on(async {
        let listener = listen("fastwebsockets", addr).await?;
        loop {
            let (socket, _) = listener.accept().await?;
            socket.set_nodelay(true)?;
            tokio::spawn(async move {
                let io = hyper_util::rt::TokioIo::new(socket);
                let service = hyper::service::service_fn(upgrade_fastwebsockets);
                // A client that breaks off is its own business.
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .with_upgrades()
                    .await;
            });
        }
    })
}

/// The upgrade's answer, the echo spawned to run once it is written.
async fn upgrade_fastwebsockets(
    mut request: Request<hyper::body::Incoming>,
) -> Result<Response<Empty<Bytes>>, fastwebsockets::WebSocketError> {
    let (response, upgrade) = fastwebsockets::upgrade::upgrade(&mut request)?;
    tokio::spawn(async move {
        let _ = tokio::task::unconstrained(echo_fastwebsockets(upgrade)).await;
    });
    Ok(response)
}

/// One fastwebsockets connection: every whole text or binary message
/// written back, pings and the close answered by the library.
async fn echo_fastwebsockets(
    upgrade: fastwebsockets::upgrade::UpgradeFut,
) -> Result<(), fastwebsockets::WebSocketError> {
    let mut ws = upgrade.await?;
    ws.set_auto_close(true);
    ws.set_auto_pong(true);
    let mut ws = fastwebsockets::FragmentCollector::new(ws);
    loop {
        let frame = ws.read_frame().await?;
        match frame.opcode {
            fastwebsockets::OpCode::Close => return Ok(()),
            fastwebsockets::OpCode::Text | fastwebsockets::OpCode::Binary => {
                ws.write_frame(frame).await?;
            }
            _ => {}
        }
    }
}

// ----- the load -----

/// What the connections of a run send.
#[derive(Clone, Copy)]
struct Scenario {
    name: &'static str,
    /// Binary messages of `size` bytes, or text of 32.
    binary: bool,
    size: usize,
    /// Messages in flight per connection, at most.
    window: u64,
}

const SCENARIOS: [Scenario; 2] = [
    Scenario {
        name: "A: 32 B text, 16 in flight",
        binary: false,
        size: 32,
        window: 16,
    },
    Scenario {
        name: "B: 16 KiB binary, 4 in flight",
        binary: true,
        size: 16 << 10,
        window: 4,
    },
];

type ClientWs = WebSocketStream<TcpStream>;

/// The messages of one connection: text `CCCC:SSS…` (its number and the
/// message's, 32 bytes), or binary: the connection's pattern with the
/// message's number in its first 8 bytes.
struct Messages {
    scenario: Scenario,
    id: usize,
    pattern: Vec<u8>,
    text: String,
}

impl Messages {
    fn new(scenario: Scenario, id: usize) -> Self {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64 ^ id as u64;
        let pattern = (0..scenario.size)
            .map(|_| {
                // xorshift: bytes that differ connection by connection.
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        Self {
            scenario,
            id,
            pattern,
            text: String::new(),
        }
    }

    fn text(&mut self, seq: u64) -> &str {
        self.text.clear();
        let _ = write!(self.text, "{:04}:{seq:027}", self.id);
        &self.text
    }

    fn message(&mut self, seq: u64) -> Message {
        if self.scenario.binary {
            let mut data = self.pattern.clone();
            data[..8].copy_from_slice(&seq.to_le_bytes());
            Message::Binary(data.into())
        } else {
            Message::Text(self.text(seq).to_owned().into())
        }
    }

    /// Whether `echo` is message `seq` as sent.
    fn check(&mut self, seq: u64, echo: Option<Result<Message, tungstenite::Error>>) -> bool {
        match echo {
            Some(Ok(Message::Binary(data))) if self.scenario.binary => {
                data.len() == self.pattern.len()
                    && data[..8] == seq.to_le_bytes()
                    && data[8..] == self.pattern[8..]
            }
            Some(Ok(Message::Text(text))) if !self.scenario.binary => {
                text.as_str() == self.text(seq)
            }
            _ => false,
        }
    }
}

/// A client connection, its handshake done (no extension offered, none
/// accepted).
async fn connect(addr: SocketAddr) -> Result<ClientWs, String> {
    let socket = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    socket.set_nodelay(true).map_err(|e| e.to_string())?;
    let (ws, response) = tokio_tungstenite::client_async(format!("ws://{addr}/"), socket)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    if response.headers().contains_key("sec-websocket-extensions") {
        return Err("the server accepted an extension none offered".into());
    }
    Ok(ws)
}

/// One connection's load: up to the window in flight until `stop`, then
/// the last echoes. Returns the connection and how many messages came back
/// (each checked).
async fn drive(
    mut ws: ClientWs,
    scenario: Scenario,
    id: usize,
    stop: Arc<AtomicBool>,
) -> Result<(ClientWs, u64), String> {
    let fail = |e: tungstenite::Error| format!("connection {id}: {e}");
    let mut messages = Messages::new(scenario, id);
    let (mut sent, mut echoed) = (0u64, 0u64);
    loop {
        if !stop.load(Ordering::Relaxed) && sent - echoed < scenario.window {
            while sent - echoed < scenario.window {
                ws.feed(messages.message(sent)).await.map_err(fail)?;
                sent += 1;
            }
            ws.flush().await.map_err(fail)?;
        }
        if echoed == sent {
            return Ok((ws, echoed));
        }
        // One echo, then every one already here.
        let mut echo = ws.next().await;
        loop {
            if !messages.check(echoed, echo) {
                return Err(format!(
                    "connection {id}: echo {echoed} is not what was sent"
                ));
            }
            echoed += 1;
            if echoed == sent {
                break;
            }
            match ws.next().now_or_never() {
                Some(next) => echo = next,
                None => break,
            }
        }
    }
}

/// The close handshake, its answer read (errors ignored: the figures are
/// taken).
async fn close(mut ws: ClientWs) {
    if ws.close(None).await.is_ok() {
        while let Some(Ok(_)) = ws.next().await {}
    }
}

// ----- the comparison -----

/// A server process, killed when dropped.
struct Server {
    name: &'static str,
    child: Child,
    addr: SocketAddr,
}

impl Server {
    /// Starts `command` and reads its address from its first line
    /// (`... ws://ADDR/ ...`).
    fn start(name: &'static str, mut command: Command) -> Result<Self, String> {
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{name}: {e}"))?;
        let mut line = String::new();
        let read = match child.stdout.take() {
            Some(stdout) => BufReader::new(stdout).read_line(&mut line),
            None => Ok(0),
        };
        let addr = line
            .split("ws://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .and_then(|addr| addr.parse().ok());
        match (read, addr) {
            (Ok(_), Some(addr)) => Ok(Self { name, child, addr }),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("{name} said {line:?}, not its address"))
            }
        }
    }

    /// Seconds of CPU the process has used, user and system.
    fn cpu(&self) -> Result<f64, String> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .map_err(|e| e.to_string())?;
        // The fields after the command's closing parenthesis: state is
        // the first, utime the 12th, stime the 13th.
        let rest = stat.rsplit_once(')').ok_or("bad stat")?.1;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
        let (user, system) = ticks(11).zip(ticks(12)).ok_or("bad stat")?;
        // SAFETY: sysconf only reads a setting of the system.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        Ok((user + system) as f64 / per_second.max(1) as f64)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one run gave.
struct Run {
    messages: u64,
    seconds: f64,
    cpu: f64,
}

/// One run of `scenario` against `server` for `seconds`: the handshakes,
/// then the server's CPU from the load's start to its last echo.
async fn run(server: &Server, scenario: Scenario, seconds: f64) -> Result<Run, String> {
    let name = server.name;
    let handshakes: Vec<_> = (0..CONNECTIONS)
        .map(|_| tokio::spawn(connect(server.addr)))
        .collect();
    let mut connections = Vec::with_capacity(CONNECTIONS);
    for handshake in handshakes {
        let ws = handshake.await.map_err(|e| e.to_string())?;
        connections.push(ws.map_err(|e| format!("{name}: {e}"))?);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let before = server.cpu()?;
    let began = Instant::now();
    let loads: Vec<_> = connections
        .into_iter()
        .enumerate()
        .map(|(id, ws)| tokio::spawn(drive(ws, scenario, id, Arc::clone(&stop))))
        .collect();
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut messages = 0;
    let mut done = Vec::with_capacity(CONNECTIONS);
    for load in loads {
        let (ws, echoed) = load
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("{name}: {e}"))?;
        messages += echoed;
        done.push(ws);
    }
    let seconds = began.elapsed().as_secs_f64();
    let cpu = server.cpu()? - before;
    let closing: Vec<_> = done.into_iter().map(|ws| tokio::spawn(close(ws))).collect();
    for closed in closing {
        closed.await.map_err(|e| e.to_string())?;
    }
    if messages == 0 {
        return Err(format!("{name}: no message came back"));
    }
    Ok(Run {
        messages,
        seconds,
        cpu,
    })
}

/// `run`, given up on if stuck.
async fn run_bounded(server: &Server, scenario: Scenario, seconds: f64) -> Result<Run, String> {
    let limit = Duration::from_secs_f64(seconds) + STUCK;
    tokio::time::timeout(limit, run(server, scenario, seconds))
        .await
        .map_err(|_| format!("{}: stuck in {}", server.name, scenario.name))?
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The runs' options: `--runs N`, `--duration SECONDS`.
fn options(args: &[String]) -> Result<(usize, u64), String> {
    let (mut runs, mut seconds) = (3usize, 5u64);
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let value = args.next().and_then(|v| v.parse::<u64>().ok());
        match (arg.as_str(), value) {
            ("--runs", Some(n)) => runs = usize::try_from(n).unwrap_or(usize::MAX),
            ("--duration", Some(n)) => seconds = n,
            _ => return Err(format!("{arg}: expected --runs N or --duration SECONDS")),
        }
    }
    Ok((runs.max(1), seconds.max(1)))
}

/// Where cargo put the example: `target/release/examples/`, beside this
/// binary's `target/release/deps/`.
fn example_path() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    exe.parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join("examples").join("ws_echo_server"))
        .ok_or_else(|| "no target directory".into())
}

fn compare(args: &[String]) -> Result<(), String> {
    let (runs, seconds) = options(args)?;
    let example = example_path()?;
    if !example.exists() {
        println!(
            "ws_load: skipped, {} is not built \
             (cargo build --release -p cleave-examples --example ws_echo_server)",
            example.display()
        );
        return Ok(());
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cleave = Command::new(&example);
    cleave.args(["--listen", "127.0.0.1:0"]);
    let mut tungstenite = Command::new(&exe);
    tungstenite.args([SERVE_TUNGSTENITE, "127.0.0.1:0"]);
    let mut fastwebsockets = Command::new(&exe);
    fastwebsockets.args([SERVE_FASTWEBSOCKETS, "127.0.0.1:0"]);
    let servers = [
        Server::start("cleave ws_echo_server", cleave)?,
        Server::start("tokio-tungstenite", tungstenite)?,
        Server::start("fastwebsockets", fastwebsockets)?,
    ];
    let client = runtime().map_err(|e| e.to_string())?;
    let began = Instant::now();
    // results[scenario][server]: the runs.
    let mut results: Vec<[Vec<Run>; 3]> = SCENARIOS.iter().map(|_| Default::default()).collect();
    client.block_on(async {
        for scenario in SCENARIOS {
            for server in &servers {
                run_bounded(server, scenario, 1.0).await?; // warm-up
            }
        }
        for _ in 0..runs {
            for (scenario, results) in SCENARIOS.iter().zip(&mut results) {
                for (server, results) in servers.iter().zip(results.iter_mut()) {
                    results.push(run_bounded(server, *scenario, seconds as f64).await?);
                }
            }
        }
        Ok::<(), String>(())
    })?;
    print_table(&servers, &results, runs, seconds);
    eprintln!("total: {:.0} s", began.elapsed().as_secs_f64());
    Ok(())
}

fn print_table(servers: &[Server; 3], results: &[[Vec<Run>; 3]], runs: usize, seconds: u64) {
    println!(
        "\n{CONNECTIONS} connections on 127.0.0.1, {seconds} s a run, median of {runs} runs; \
         {}\n",
        machine()
    );
    println!(
        "| scenario | server | messages/s (min-max) | server CPU per message | server CPU, cores |"
    );
    println!("|---|---|---|---|---|");
    let mut ratios = Vec::new();
    for (scenario, results) in SCENARIOS.iter().zip(results) {
        let mut figures = Vec::new();
        for (server, runs) in servers.iter().zip(results) {
            let rates: Vec<f64> = runs.iter().map(|r| r.messages as f64 / r.seconds).collect();
            let lo = rates.iter().copied().fold(f64::MAX, f64::min);
            let hi = rates.iter().copied().fold(0.0, f64::max);
            let rate = median(rates);
            let cpu = median(
                runs.iter()
                    .map(|r| r.cpu / r.messages as f64 * 1e6)
                    .collect(),
            );
            let cores = median(runs.iter().map(|r| r.cpu / r.seconds).collect());
            println!(
                "| {} | {} | {rate:.0} ({lo:.0}-{hi:.0}) | {cpu:.2} µs | {cores:.2} |",
                scenario.name, server.name
            );
            figures.push((rate, cpu));
        }
        ratios.push((scenario.name, figures));
    }
    println!();
    for (scenario, figures) in ratios {
        let cleave = figures[0];
        for (server, other) in servers.iter().zip(&figures).skip(1) {
            println!(
                "{scenario}: cleave / {}: {:.2}x the messages per second, \
                 {:.2}x the CPU per message",
                server.name,
                cleave.0 / other.0,
                cleave.1 / other.1
            );
        }
    }
}

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let role = |name: &str| match args.as_slice() {
        [first, addr] if first == name => Some(addr.clone()),
        _ => None,
    };
    let outcome = if let Some(addr) = role(SERVE_TUNGSTENITE) {
        serve_tungstenite(&addr).map_err(|e| e.to_string())
    } else if let Some(addr) = role(SERVE_FASTWEBSOCKETS) {
        serve_fastwebsockets(&addr).map_err(|e| e.to_string())
    } else {
        compare(&args)
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ws_load: {e}");
            ExitCode::FAILURE
        }
    }
}
