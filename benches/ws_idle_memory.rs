//! Memory of idle WebSocket connections: what a WebSocket echo server
//! holds per connection once the traffic is over, at thousands of
//! connections at once.
//!
//! The servers, each in a child process of its own (this binary with
//! `--role server --server NAME`), each a task per connection on a
//! current-thread tokio runtime:
//!
//! - `cleave`: cleave-tokio, the opening handshake on `http1::Server`,
//!   then the connection switched to `WebSocket` (the echo of
//!   `examples/websocket.rs`, written out here), the upgrade request
//!   dropped once answered;
//! - `cleave-kept-request`: the same, the request kept to the connection's
//!   end (a local of the connection's async fn): its head is a view of the
//!   receive buffer, which keeps that block (what an application that
//!   holds on to a `Request` pays);
//! - `cleave-deflate`, `cleave-deflate-no-takeover` (feature `deflate`):
//!   `cleave` with permessage-deflate, with context takeover and without
//!   (`no_context_takeover` and `peer_no_context_takeover`);
//! - `tungstenite`: tokio-tungstenite's `accept_async`, then every text or
//!   binary message sent back. (tokio-tungstenite 0.28 has no
//!   permessage-deflate, so there is no `tungstenite-deflate`.)
//!
//! For each server and scenario a fresh child starts. The parent asks it
//! (one command a line on its stdin, one answer a line on its stdout) for
//! its live heap bytes (a counting global allocator) and its VmRSS, opens N
//! connections on blocking std sockets, does the opening handshake on each
//! by hand (a fixed `Sec-WebSocket-Key`; for the deflate servers an offer
//! of `permessage-deflate; client_max_window_bits`), drives the scenario
//! (nothing; a 64-byte text message; a 1 MiB binary message; a compressible
//! 16 KiB text, for the deflate servers), masked, uncompressed, reading
//! every echo whole and checking it, waits until the server has read every
//! byte and every connection waits for its next message, and asks again.
//! The table shows the difference divided by N.
//!
//! Run: `cargo run --release -p cleave-benches --features deflate --bin ws_idle_memory`
//! (`-- --help` for the options).

use std::future::poll_fn;
use std::io::{self, BufRead, Read as _, Write as _};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use cleave_benches::alloc::{live_heap, Counting};
use cleave_benches::process::{machine, raise_nofile, vm_rss, BoxError, ServerProcess, WAIT};
use cleave_proto::http1::{Request, Server as Http1Server, ServerEvent};
use cleave_proto::websocket::{self, AcceptConfig, Kind, WebSocket, WsConfig, WsEvent};
use cleave_proto::{ConnConfig, ConnError, Frame, RecvBufConfig};
use cleave_tokio::Connection;
use futures_util::{SinkExt as _, StreamExt as _};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::tungstenite::Message;

/// Descriptors each process needs beside its N sockets.
const FD_HEADROOM: u64 = 64;
/// Payload of the `echoed` scenario's text message.
const SHORT: usize = 64;
/// Payload of the `after_1mib` scenario's binary message.
const LARGE: usize = 1 << 20;
/// Payload of the `compressible` scenario's text message.
const COMPRESSIBLE: usize = 16 * 1024;
/// The client's key (RFC 6455, section 1.3's example) and the accept value
/// it must come back with.
const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";
/// What a client offers the deflate servers.
const DEFLATE_OFFER: &str = "permessage-deflate; client_max_window_bits";
/// The client's masking key (fixed: the bytes on the wire are the same for
/// every connection).
const MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

// ---------------------------------------------------------------------------
// Counting allocator
// ---------------------------------------------------------------------------

/// Every allocation counted, from the first: the heap figures.
#[global_allocator]
static GLOBAL: Counting<true> = Counting;

/// The machine's `MemAvailable` (`/proc/meminfo`); the most there is if
/// unknown.
fn mem_available() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(u64::MAX, |kib| kib * 1024)
}

// ---------------------------------------------------------------------------
// What is measured
// ---------------------------------------------------------------------------

/// A server under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Server {
    Cleave,
    CleaveKeptRequest,
    CleaveDeflate,
    CleaveDeflateNoTakeover,
    Tungstenite,
}

impl Server {
    const ALL: [Server; 5] = [
        Server::Cleave,
        Server::CleaveKeptRequest,
        Server::CleaveDeflate,
        Server::CleaveDeflateNoTakeover,
        Server::Tungstenite,
    ];

    fn name(self) -> &'static str {
        match self {
            Server::Cleave => "cleave",
            Server::CleaveKeptRequest => "cleave-kept-request",
            Server::CleaveDeflate => "cleave-deflate",
            Server::CleaveDeflateNoTakeover => "cleave-deflate-no-takeover",
            Server::Tungstenite => "tungstenite",
        }
    }

    fn parse(name: &str) -> Option<Server> {
        Server::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether it negotiates permessage-deflate (and the client offers it).
    fn deflates(self) -> bool {
        matches!(
            self,
            Server::CleaveDeflate | Server::CleaveDeflateNoTakeover
        )
    }

    /// Whether `extensions` (the 101's `Sec-WebSocket-Extensions`) is what
    /// this server answers the client's offer with.
    fn answers(self, extensions: Option<&str>) -> bool {
        let no_takeover = |ext: &str| {
            ext.contains("server_no_context_takeover") && ext.contains("client_no_context_takeover")
        };
        match (self, extensions) {
            (Server::Cleave | Server::CleaveKeptRequest | Server::Tungstenite, None) => true,
            (Server::CleaveDeflate, Some(ext)) => {
                ext.starts_with("permessage-deflate") && !ext.contains("no_context_takeover")
            }
            (Server::CleaveDeflateNoTakeover, Some(ext)) => {
                ext.starts_with("permessage-deflate") && no_takeover(ext)
            }
            _ => false,
        }
    }

    /// Whether it keeps the upgrade request to the connection's end.
    fn keeps_request(self) -> bool {
        self == Server::CleaveKeptRequest
    }

    /// Whether this build has it (the deflate servers need the feature).
    fn available(self) -> bool {
        cfg!(feature = "deflate") || !self.deflates()
    }

    /// What the deflate servers accept.
    #[cfg(feature = "deflate")]
    fn deflate_config(self) -> Option<websocket::DeflateConfig> {
        let config = websocket::DeflateConfig::default();
        match self {
            Server::CleaveDeflate => Some(config),
            Server::CleaveDeflateNoTakeover => Some(
                config
                    .no_context_takeover(true)
                    .peer_no_context_takeover(true),
            ),
            Server::Cleave | Server::CleaveKeptRequest | Server::Tungstenite => None,
        }
    }
}

/// What every connection does before it goes idle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    Idle,
    Echoed,
    After1Mib,
    Compressible,
}

impl Scenario {
    const ALL: [Scenario; 4] = [
        Scenario::Idle,
        Scenario::Echoed,
        Scenario::After1Mib,
        Scenario::Compressible,
    ];

    fn name(self) -> &'static str {
        match self {
            Scenario::Idle => "idle",
            Scenario::Echoed => "echoed",
            Scenario::After1Mib => "after_1mib",
            Scenario::Compressible => "compressible",
        }
    }

    fn parse(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether `server` is measured in it (the compressible text only
    /// where it is compressed).
    fn applies_to(self, server: Server) -> bool {
        self != Scenario::Compressible || server.deflates()
    }

    /// The message every connection sends, if any.
    fn message(self) -> Option<(Kind, Vec<u8>)> {
        match self {
            Scenario::Idle => None,
            Scenario::Echoed => Some((
                Kind::Text,
                (0..SHORT).map(|j| b'a' + (j % 26) as u8).collect(),
            )),
            Scenario::After1Mib => Some((Kind::Binary, noise(LARGE))),
            Scenario::Compressible => Some((Kind::Text, records(COMPRESSIBLE))),
        }
    }
}

/// `len` bytes that do not compress (xorshift64).
fn noise(len: usize) -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// `len` bytes of JSON lines, as a chatty application sends them
/// (ASCII: any cut is UTF-8).
fn records(len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 128);
    let mut seq = 0u32;
    while out.len() < len {
        let _ = writeln!(
            out,
            r#"{{"seq":{seq},"sensor":"temperature-probe-{:02}","reading":{}.{},"unit":"celsius","status":"ok"}}"#,
            seq % 16,
            18 + seq % 7,
            seq % 10
        );
        seq += 1;
    }
    out.truncate(len);
    out
}

// ---------------------------------------------------------------------------
// The server process
// ---------------------------------------------------------------------------

/// Connections accepted so far.
static ACCEPTED: AtomicU64 = AtomicU64::new(0);
/// Connections open now.
static OPEN: AtomicU64 = AtomicU64::new(0);
/// Opening handshakes done (the 101 written).
static HANDSHAKES: AtomicU64 = AtomicU64::new(0);
/// Messages echoed (written and flushed).
static ECHOED: AtomicU64 = AtomicU64::new(0);
/// Connections waiting for their next message: the tasks whose last poll
/// of the message stream was `Pending`.
static IDLE: AtomicU64 = AtomicU64::new(0);
/// Bytes read from all connections so far.
static BYTES_READ: AtomicU64 = AtomicU64::new(0);
/// Connections that failed (or accepts that did).
static ERRORS: AtomicU64 = AtomicU64::new(0);
/// `size_of_val` of the server's connection task (0 until one came).
static TASK_FUTURE: AtomicU64 = AtomicU64::new(0);

/// The per-connection types and their sizes.
fn sizes(server: Server) -> Vec<(String, usize)> {
    type Tcp = tokio::net::TcpStream;
    let mut sizes = vec![
        (
            "cleave_proto::websocket::WebSocket".to_string(),
            size_of::<WebSocket>(),
        ),
        (
            "cleave_proto::Conn<WebSocket>".to_string(),
            size_of::<cleave_proto::Conn<WebSocket>>(),
        ),
        (
            "cleave_tokio::Connection<tokio::net::TcpStream, WebSocket>".to_string(),
            size_of::<Connection<Tcp, WebSocket>>(),
        ),
        (
            "cleave_tokio::Connection<tokio::net::TcpStream, http1::Server>".to_string(),
            size_of::<Connection<Tcp, Http1Server>>(),
        ),
        (
            "tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>".to_string(),
            size_of::<tokio_tungstenite::WebSocketStream<Tcp>>(),
        ),
        (
            "the future of `serve_cleave` (the example's handshake and echo)".to_string(),
            future_size2(serve_cleave),
        ),
        (
            "the future of `serve_tungstenite`".to_string(),
            future_size1(serve_tungstenite),
        ),
    ];
    let task = TASK_FUTURE.load(Relaxed) as usize;
    if task > 0 {
        sizes.push((
            format!(
                "the {} connection task (its future, size_of_val)",
                server.name()
            ),
            task,
        ));
    }
    sizes
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
            if let Err(e) = serve(server, listener, ready) {
                eprintln!("ws_idle_memory: the {} server failed: {e}", server.name());
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
                "STATS {} {} {} {} {} {} {} {} {}",
                live_heap(),
                vm_rss(),
                ACCEPTED.load(Relaxed),
                OPEN.load(Relaxed),
                HANDSHAKES.load(Relaxed),
                ECHOED.load(Relaxed),
                IDLE.load(Relaxed),
                BYTES_READ.load(Relaxed),
                ERRORS.load(Relaxed),
            )?,
            "SIZES" => {
                for (name, size) in sizes(server) {
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

/// A current-thread runtime, a task per connection.
fn serve(
    server: Server,
    listener: std::net::TcpListener,
    ready: mpsc::Sender<()>,
) -> Result<(), BoxError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        ready.send(())?;
        loop {
            let (socket, _) = listener.accept().await?;
            socket.set_nodelay(true)?;
            ACCEPTED.fetch_add(1, Relaxed);
            OPEN.fetch_add(1, Relaxed);
            // The serving future is made inside the task's block: a future
            // made outside and awaited inside would be held twice.
            match server {
                Server::Tungstenite => spawn_counted(async move {
                    let served = serve_tungstenite(socket).await;
                    count_end(served.is_ok());
                }),
                cleave => spawn_counted(async move {
                    let served = serve_cleave(cleave, socket).await;
                    count_end(served.is_ok());
                }),
            }
        }
    })
}

/// The size of the future an async fn of two arguments returns.
fn future_size2<A, B, F>(_: fn(A, B) -> F) -> usize {
    size_of::<F>()
}

/// The size of the future an async fn of one argument returns.
fn future_size1<A, F>(_: fn(A) -> F) -> usize {
    size_of::<F>()
}

/// Spawns one connection's task, noting its size.
fn spawn_counted(task: impl std::future::Future<Output = ()> + Send + 'static) {
    TASK_FUTURE.store(size_of_val(&task) as u64, Relaxed);
    tokio::spawn(task);
}

/// Counts a connection's end, and its failure.
fn count_end(ok: bool) {
    if !ok {
        ERRORS.fetch_add(1, Relaxed);
    }
    OPEN.fetch_sub(1, Relaxed);
}

/// Whether one connection is counted in [`IDLE`].
#[derive(Debug, Default)]
struct Parked(bool);

impl Parked {
    fn set(&mut self, pending: bool) {
        if pending != self.0 {
            self.0 = pending;
            match pending {
                true => IDLE.fetch_add(1, Relaxed),
                false => IDLE.fetch_sub(1, Relaxed),
            };
        }
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        self.set(false);
    }
}

/// The buffer of `examples/websocket.rs`: room for a 1 MiB frame (and a
/// compressed frame of up to 16 MiB, inflated whole).
fn conn_config() -> ConnConfig {
    let recv = RecvBufConfig::default()
        .max_buffered((16 << 20) + (64 << 10))
        .expect("a valid limit");
    ConnConfig::default().recv_buf(recv)
}

/// What the server accepts: any subprotocol-less client, and
/// permessage-deflate for the deflate servers.
fn accept_config(server: Server) -> AcceptConfig {
    let config = AcceptConfig::default();
    #[cfg(feature = "deflate")]
    if let Some(deflate) = server.deflate_config() {
        return config.deflate(deflate);
    }
    let _ = server;
    config
}

/// The protocol for an accepted handshake.
fn protocol(server: Server, accepted: &websocket::Accepted) -> WebSocket {
    let ws = WebSocket::server(WsConfig::default());
    #[cfg(feature = "deflate")]
    if let (Some(params), Some(config)) = (accepted.deflate(), server.deflate_config()) {
        return ws.with_deflate(params, &config);
    }
    let _ = (server, accepted);
    ws
}

/// The opening handshake's request, once its head and end came.
async fn upgrade_request(
    conn: &mut Connection<tokio::net::TcpStream, Http1Server>,
) -> Result<Option<Request>, ConnError> {
    let mut request = None;
    while let Some(event) = conn.next().await {
        match event? {
            ServerEvent::Head(head) => request = Some(head),
            ServerEvent::End => return Ok(request),
            ServerEvent::Data(_) | ServerEvent::Trailers(_) => {}
        }
    }
    Ok(None)
}

/// The frame that echoes `event`, as `examples/websocket.rs`'s `Echo`
/// (`in_message`: the next piece starts a message).
fn answer(
    ws: &mut WebSocket,
    in_message: &mut bool,
    event: WsEvent,
) -> Result<Option<Frame>, cleave_proto::Error> {
    Ok(match event {
        WsEvent::Text(text) => Some(ws.message(Kind::Text, text)?),
        WsEvent::Binary(data) => Some(ws.message(Kind::Binary, data)?),
        WsEvent::Part(part) => {
            let first = !*in_message;
            *in_message = !part.last;
            Some(ws.part(part.kind, part.data, first, part.last)?)
        }
        WsEvent::Ping(_) | WsEvent::Pong(_) | WsEvent::Close(_) => None,
    })
}

/// One cleave connection: `examples/websocket.rs`'s
/// `serve_tokio_connection`, counting what the parent waits for.
async fn serve_cleave(server: Server, socket: tokio::net::TcpStream) -> Result<(), ConnError> {
    let mut http = Connection::with_config(socket, Http1Server::new(), conn_config());
    let Some(request) = upgrade_request(&mut http).await? else {
        return http.close().await;
    };
    let accepted = match websocket::accept(&request, &accept_config(server)) {
        Ok(accepted) => accepted,
        Err(_) => {
            http.send(websocket::refusal(&request)).await?;
            return http.close().await;
        }
    };
    http.send(accepted.response().clone()).await?;
    http.flush().await?;
    HANDSHAKES.fetch_add(1, Relaxed);
    let ws = protocol(server, &accepted);
    // `cleave-kept-request` keeps the request and the answer to the end;
    // the others drop them here (examples/websocket.rs does the handshake
    // in a function of its own for this). The request's head is a view of the receive buffer: kept,
    // it keeps that buffer's block.
    if !server.keeps_request() {
        drop(accepted);
        drop(request);
    }
    let mut conn = http.switch(|_| ws);
    let mut in_message = false;
    let mut parked = Parked::default();
    let mut counted = 0;
    // `conn.next()`, adding what the connection read to BYTES_READ (read =
    // consumed + buffered) and counted in IDLE while it waits.
    while let Some(first) = poll_fn(|cx| {
        let polled = conn.poll_next_unpin(cx);
        let buf = conn.conn().recv_buf();
        let read = buf.offset() + buf.len() as u64;
        BYTES_READ.fetch_add(read - counted, Relaxed);
        counted = read;
        parked.set(polled.is_pending());
        polled
    })
    .await
    {
        let mut next = Some(first);
        let mut messages = 0;
        while let Some(event) = next {
            // An error: the protocol queued its close; write it and stop.
            let Ok(event) = event else {
                return conn.close().await;
            };
            let whole = matches!(event, WsEvent::Text(_) | WsEvent::Binary(_))
                || matches!(&event, WsEvent::Part(part) if part.last);
            if let Some(frame) = answer(conn.conn_mut().protocol_mut(), &mut in_message, event)? {
                conn.send(frame).await?;
                messages += u64::from(whole);
            }
            next = conn.next_buffered();
        }
        conn.flush().await?;
        ECHOED.fetch_add(messages, Relaxed);
    }
    conn.close().await
}

/// A socket that adds what it reads to [`BYTES_READ`].
#[derive(Debug)]
struct Counted(tokio::net::TcpStream);

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.0).poll_read(cx, buf);
        BYTES_READ.fetch_add((buf.filled().len() - before) as u64, Relaxed);
        polled
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// One tokio-tungstenite connection: the handshake, then every text or
/// binary message sent back (pings and closes it answers itself).
async fn serve_tungstenite(socket: tokio::net::TcpStream) -> Result<(), BoxError> {
    let mut ws = tokio_tungstenite::accept_async(Counted(socket)).await?;
    HANDSHAKES.fetch_add(1, Relaxed);
    let mut parked = Parked::default();
    while let Some(message) = poll_fn(|cx| {
        let polled = ws.poll_next_unpin(cx);
        parked.set(polled.is_pending());
        polled
    })
    .await
    {
        match message? {
            message @ (Message::Text(_) | Message::Binary(_)) => {
                ws.send(message).await?;
                ECHOED.fetch_add(1, Relaxed);
            }
            Message::Close(_) => break,
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The client: this process
// ---------------------------------------------------------------------------

/// The opening handshake's request.
fn upgrade(server: Server) -> Vec<u8> {
    let mut request = format!(
        "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n"
    );
    if server.deflates() {
        request.push_str("Sec-WebSocket-Extensions: ");
        request.push_str(DEFLATE_OFFER);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    request.into_bytes()
}

/// A client's frame: FIN, the opcode, the payload masked with [`MASK`],
/// RSV1 clear (uncompressed, which permessage-deflate allows).
fn client_frame(kind: Kind, payload: &[u8]) -> Vec<u8> {
    let opcode = match kind {
        Kind::Text => 0x1,
        Kind::Binary => 0x2,
    };
    let mut frame = Vec::with_capacity(payload.len() + 14);
    frame.push(0x80 | opcode);
    match payload.len() {
        len @ 0..=125 => frame.push(0x80 | len as u8),
        len @ 126..=0xffff => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(len as u16).to_be_bytes());
        }
        len => {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    frame.extend_from_slice(&MASK);
    frame.extend(payload.iter().zip(MASK.iter().cycle()).map(|(b, k)| b ^ k));
    frame
}

/// Reads the 101 and checks it; returns its `Sec-WebSocket-Extensions`
/// value, if any. The server sends nothing after the 101 until it is
/// spoken to, so reading until the blank line reads nothing more.
fn read_upgrade(socket: &mut TcpStream, buf: &mut Vec<u8>) -> Result<Option<String>, BoxError> {
    buf.clear();
    let mut chunk = [0u8; 512];
    while !buf.ends_with(b"\r\n\r\n") {
        let n = socket.read(&mut chunk)?;
        if n == 0 {
            return Err("the server closed during the handshake".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > 16 * 1024 {
            return Err("a response head past 16 KiB".into());
        }
    }
    let head = std::str::from_utf8(buf)?;
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default();
    if !status.starts_with("HTTP/1.1 101 ") {
        return Err(format!("the handshake was answered with {status:?}").into());
    }
    let mut accept = None;
    let mut extensions = None;
    for line in lines.filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':').ok_or("a header line without `:`")?;
        if name.eq_ignore_ascii_case("sec-websocket-accept") {
            accept = Some(value.trim());
        } else if name.eq_ignore_ascii_case("sec-websocket-extensions") {
            extensions = Some(value.trim().to_string());
        }
    }
    if accept != Some(ACCEPT) {
        return Err(format!("Sec-WebSocket-Accept {accept:?}, not {ACCEPT}").into());
    }
    Ok(extensions)
}

/// Reads one server frame whole into `raw`; returns its first byte and the
/// length of its header.
fn read_frame(socket: &mut TcpStream, raw: &mut Vec<u8>) -> Result<(u8, usize), BoxError> {
    raw.clear();
    raw.resize(2, 0);
    socket.read_exact(raw)?;
    let (b0, b1) = (raw[0], raw[1]);
    if b1 & 0x80 != 0 {
        return Err("a masked frame from the server".into());
    }
    let extra = match b1 & 0x7f {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    raw.resize(2 + extra, 0);
    socket.read_exact(&mut raw[2..])?;
    let len = match extra {
        0 => u64::from(b1 & 0x7f),
        2 => u64::from(u16::from_be_bytes([raw[2], raw[3]])),
        _ => u64::from_be_bytes(raw[2..10].try_into()?),
    };
    let head = raw.len();
    raw.resize(head + usize::try_from(len)?, 0);
    socket.read_exact(&mut raw[head..])?;
    Ok((b0, head))
}

/// The payload of a compressed echo, inflated by a client-side cleave
/// `WebSocket` fed the frame (sans-IO, no socket).
#[cfg(feature = "deflate")]
fn inflate_echo(extensions: Option<&str>, raw: &[u8]) -> Result<Vec<u8>, BoxError> {
    use websocket::{DeflateConfig, DeflateParams};
    let config = DeflateConfig::default();
    debug_assert_eq!(DeflateParams::offer(&config), DEFLATE_OFFER);
    let answer = extensions.ok_or("a compressed echo without permessage-deflate")?;
    let params = DeflateParams::from_response(answer.as_bytes(), &config)?;
    let ws = WebSocket::client(WsConfig::default(), |buf: &mut [u8]| buf.fill(0))
        .with_deflate(params, &config);
    let mut conn = cleave_proto::Conn::with_config(ws, conn_config(), Duration::ZERO);
    conn.feed(raw, Duration::ZERO)?;
    match conn.poll_event()? {
        Some(WsEvent::Text(data) | WsEvent::Binary(data)) => Ok(data.to_vec()),
        other => Err(format!("the compressed echo decoded as {other:?}").into()),
    }
}

#[cfg(not(feature = "deflate"))]
fn inflate_echo(_extensions: Option<&str>, _raw: &[u8]) -> Result<Vec<u8>, BoxError> {
    Err("a compressed echo (RSV1) from a server that offered no deflate".into())
}

/// Reads the echo of `payload` whole and checks it.
fn check_echo(
    socket: &mut TcpStream,
    kind: Kind,
    payload: &[u8],
    extensions: Option<&str>,
    raw: &mut Vec<u8>,
) -> Result<(), BoxError> {
    let (b0, head) = read_frame(socket, raw)?;
    let opcode = match kind {
        Kind::Text => 0x1,
        Kind::Binary => 0x2,
    };
    if (b0 & 0x8f) != (0x80 | opcode) || (b0 & 0x30) != 0 {
        return Err(format!("an echo that starts with {b0:#04x}").into());
    }
    let compressed = b0 & 0x40 != 0;
    let same = match compressed {
        false => &raw[head..] == payload,
        true => inflate_echo(extensions, raw)? == payload,
    };
    if !same {
        return Err(format!("the echo differs (compressed: {compressed})").into());
    }
    Ok(())
}

/// What the server says about itself.
#[derive(Clone, Copy, Debug)]
struct Stats {
    heap: u64,
    rss: u64,
    accepted: u64,
    open: u64,
    handshakes: u64,
    echoed: u64,
    idle: u64,
    bytes_read: u64,
    errors: u64,
}

/// The child's [`Stats`].
fn stats(child: &mut ServerProcess) -> Result<Stats, BoxError> {
    let numbers = child.stats()?;
    let [heap, rss, accepted, open, handshakes, echoed, idle, bytes_read, errors] = numbers[..]
    else {
        return Err(format!("STATS gave {numbers:?}").into());
    };
    Ok(Stats {
        heap,
        rss,
        accepted,
        open,
        handshakes,
        echoed,
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
    min_available: u64,
) -> Result<(Row, Vec<(String, usize)>), BoxError> {
    let upgrade = upgrade(server);
    let message = scenario.message();
    let frame = message
        .as_ref()
        .map(|(kind, payload)| client_frame(*kind, payload));
    let per_conn = (upgrade.len() + frame.as_ref().map_or(0, Vec::len)) as u64;
    let (mut child, addr) = ServerProcess::spawn(server.name())?;
    let before = stats(&mut child)?;
    let mut sockets = Vec::with_capacity(connections);
    let mut buf = Vec::new();
    for id in 0..connections {
        if id % 64 == 0 {
            let available = mem_available();
            if available < min_available {
                return Err(format!(
                    "{} {}: stopped at connection {id} of {connections}: MemAvailable is {} MiB, \
                     below --min-available-mib {} (the server holds {} MiB); try fewer --connections",
                    server.name(),
                    scenario.name(),
                    available >> 20,
                    min_available >> 20,
                    stats(&mut child)?.rss >> 20,
                )
                .into());
            }
        }
        let failed = |e: BoxError| format!("connection {id}: {e}");
        let mut connect = || -> Result<TcpStream, BoxError> {
            let mut socket = TcpStream::connect_timeout(&addr, WAIT)?;
            socket.set_nodelay(true)?;
            socket.set_read_timeout(Some(WAIT))?;
            socket.set_write_timeout(Some(WAIT))?;
            socket.write_all(&upgrade)?;
            let extensions = read_upgrade(&mut socket, &mut buf)?;
            if !server.answers(extensions.as_deref()) {
                return Err(format!("Sec-WebSocket-Extensions: {extensions:?}").into());
            }
            if let (Some(frame), Some((kind, payload))) = (&frame, &message) {
                socket.write_all(frame)?;
                check_echo(&mut socket, *kind, payload, extensions.as_deref(), &mut buf)?;
            }
            Ok(socket)
        };
        sockets.push(connect().map_err(failed)?);
    }
    // The echoes prove the messages were handled; the counters prove that
    // everything sent was read and that every connection waits for its
    // next message.
    let n = connections as u64;
    let expected_echoes = if message.is_some() { n } else { 0 };
    let expected_bytes = per_conn * n;
    let deadline = Instant::now() + WAIT;
    let after = loop {
        let stats = stats(&mut child)?;
        if stats.errors > 0 {
            return Err(format!("the {} server had {} errors", server.name(), stats.errors).into());
        }
        if stats.accepted == n
            && stats.open == n
            && stats.handshakes == n
            && stats.echoed == expected_echoes
            && stats.idle == n
            && stats.bytes_read == expected_bytes
        {
            break stats;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{} {}: after {} s the server has accepted {}, open {}, handshakes {}, \
                 echoed {} of {expected_echoes}, idle {}, read {} of {expected_bytes} bytes",
                server.name(),
                scenario.name(),
                WAIT.as_secs(),
                stats.accepted,
                stats.open,
                stats.handshakes,
                stats.echoed,
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
ws_idle_memory: heap and RSS per idle WebSocket server connection, after traffic.

Options:
  --connections N          default: 10000
  --server NAME[,NAME]|all default: all
      cleave, cleave-kept-request (the same, the upgrade request kept to the
      end), cleave-deflate,
      cleave-deflate-no-takeover (feature `deflate`),
      tungstenite (tokio-tungstenite 0.28: no permessage-deflate)
  --scenario NAME[,NAME]|all   default: all
      idle: the handshake only; echoed: a 64 B text message echoed;
      after_1mib: a 1 MiB binary message (incompressible) echoed;
      compressible: a 16 KiB JSON-lines text echoed (deflate servers only)
  --min-available-mib N    default: 2048
      a run stops (and fails) when the machine's MemAvailable falls below
      this: a server that keeps 2 MiB per connection needs 20 GiB at 10000
";

struct Options {
    /// `Some` in the child: the server to run.
    role_server: Option<Server>,
    servers: Vec<Server>,
    scenarios: Vec<Scenario>,
    connections: usize,
    /// The parent stops a run when the machine's `MemAvailable` falls
    /// below this many bytes.
    min_available: u64,
}

fn options() -> Result<Options, BoxError> {
    let mut o = Options {
        role_server: None,
        servers: Server::ALL.into_iter().filter(|s| s.available()).collect(),
        scenarios: Scenario::ALL.to_vec(),
        connections: 10_000,
        min_available: 2048 << 20,
    };
    let mut role = None;
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
            "--server" => {
                o.servers = match value()? {
                    "all" => Server::ALL.into_iter().filter(|s| s.available()).collect(),
                    names => names
                        .split(',')
                        .map(|name| match Server::parse(name) {
                            Some(server) if server.available() => Ok(server),
                            Some(_) => Err(format!("{name} needs the `deflate` feature")),
                            None => Err(format!("unknown server {name}")),
                        })
                        .collect::<Result<_, _>>()?,
                };
            }
            "--scenario" => {
                o.scenarios = match value()? {
                    "all" => Scenario::ALL.to_vec(),
                    names => names
                        .split(',')
                        .map(|name| Scenario::parse(name).ok_or(format!("unknown scenario {name}")))
                        .collect::<Result<_, _>>()?,
                };
            }
            "--connections" => {
                o.connections = value()?
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or("--connections takes a positive number")?;
            }
            "--min-available-mib" => {
                let mib: u64 = value()?
                    .parse()
                    .map_err(|_| "--min-available-mib takes a number")?;
                o.min_available = mib << 20;
            }
            other => return Err(format!("unknown option {other} (see --help)").into()),
        }
    }
    match role {
        None => {}
        Some("server") if o.servers.len() == 1 => o.role_server = Some(o.servers[0]),
        Some(role) => {
            return Err(format!("--role {role}: only `--role server --server NAME`").into())
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
        for &scenario in o.scenarios.iter().filter(|s| s.applies_to(server)) {
            let started = Instant::now();
            let (row, reported) = measure(server, scenario, o.connections, o.min_available)?;
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

    println!("# idle WebSocket connection memory\n");
    println!("- machine: {}", machine());
    println!(
        "- each server in its own process, a task per connection on a current-thread tokio \
         runtime; the client: blocking std sockets, masked uncompressed frames"
    );
    println!(
        "- heap: live bytes of the server's allocator (asked for; malloc's own overhead not in it); \
         RSS: its VmRSS. Both after the connections went idle minus before they came, per connection; \
         kernel socket buffers are in neither"
    );
    println!(
        "- the client offers `{DEFLATE_OFFER}` to the deflate servers and sends uncompressed \
         (RSV1 clear): their compressors are made (every echo is compressed), their inflaters never"
    );
    println!("- tokio-tungstenite 0.28 has no permessage-deflate: no tungstenite-deflate row");
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
    for (name, size) in &sizes {
        println!("| `{name}` | {size} B |");
    }
    eprintln!("total: {:.2} s", began.elapsed().as_secs_f64());
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ws_idle_memory: {e}");
            ExitCode::FAILURE
        }
    }
}
