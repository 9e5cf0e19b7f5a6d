//! The WebSocket examples against real peers over loopback: the tokio echo
//! server (`cleave_examples::websocket::serve_tokio`) answers Python's
//! `websockets` and `wsproto` and tokio-tungstenite as clients; the client
//! (`websocket::connect`) talks to echo servers written with each of them.
//! The Python peers are the scripts in `tests/peers/`.
//!
//! Every exchange is checked byte for byte: texts with non-ASCII, binary
//! messages around each length encoding (0, 125, 126, 65 535, 65 536,
//! 1 MiB, and one above the size the echo takes whole, so streamed),
//! fragmented messages (one with a ping between its fragments), pings,
//! the close handshake both ways, and text that is not UTF-8 (the server
//! closes with 1007). Raw bytes check the close code of each broken rule
//! and the answers to refused handshakes.
//!
//! A peer that is not installed skips its test (it says so), unless the
//! environment variable `CI` is set: then the test fails. Every process a
//! test starts is killed when the test ends, passing or failing.

use std::future::Future;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use cleave_examples::websocket::{connect_with, serve_tokio, ws_config, BoxError};
use cleave_proto::websocket::{close_code, Assembler, Kind, WebSocket, WsEvent};
use cleave_proto::{Bytes, Frame};
use cleave_tokio::Connection;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::{Frame as TFrame, Utf8Bytes};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// A bound on a hang, not a measure: every peer answers at once.
const WAIT: Duration = Duration::from_secs(60);

/// The binary sizes sent: each side of the 7-bit, 16-bit and 64-bit
/// lengths, a 1 MiB frame (the largest the echo takes whole), and a
/// larger one (handed out and echoed in pieces).
const SIZES: [usize; 8] = [0, 1, 125, 126, 65_535, 65_536, 1 << 20, (3 << 20) + 5];

/// The text sent first.
const TEXT: &str = "héllo wörld ✓ 🦀";

/// Bytes of length `n` that differ from one size to the next.
fn payload(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i.wrapping_mul(31) ^ (i >> 8) ^ n) as u8)
        .collect()
}

// ----- the server under test -----

/// A server running in this process, on a runtime of its own, until
/// dropped.
struct Running {
    addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Running {
    fn drop(&mut self) {
        // The tasks (listener and connections) end with the runtime.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Starts `serve` on a listener on a free port of 127.0.0.1.
fn serving<F>(serve: impl FnOnce(tokio::net::TcpListener) -> F) -> Running
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let runtime = runtime();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    runtime.spawn(serve(listener));
    Running {
        addr,
        runtime: Some(runtime),
    }
}

/// The example's tokio echo server.
fn echo_server() -> Running {
    serving(serve_tokio)
}

/// A runtime for a server or a test's own client.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `task` on `runtime`, failing with `what` should it hang.
fn bounded<T>(runtime: &tokio::runtime::Runtime, what: &str, task: impl Future<Output = T>) -> T {
    runtime
        .block_on(async { tokio::time::timeout(WAIT, task).await })
        .unwrap_or_else(|_| panic!("{what}: no answer within {WAIT:?}"))
}

// ----- peers: presence, processes -----

/// Whether `tool` is an executable file on the `PATH`.
fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(tool).is_file()))
}

/// Whether Python can import `module`.
fn has_module(module: &str) -> bool {
    on_path("python3")
        && Command::new("python3")
            .args(["-c", &format!("import {module}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
}

/// Whether Python and `module` are there: `false` (the test returns)
/// after saying which is missing; a panic instead under CI.
fn require_python(module: &str) -> bool {
    if has_module(module) {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "python3 with {module} not installed (CI is set: the interop peers must be)"
    );
    println!("skipped: python3 with {module} not installed");
    false
}

/// A script in `tests/peers/`.
fn peer_script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/peers")
        .join(name)
}

/// `python3 script args...`, printing UTF-8 whatever the locale.
fn python(script: &str, args: &[&str]) -> Command {
    let mut command = Command::new("python3");
    command
        .arg(peer_script(script))
        .args(args)
        .env("PYTHONIOENCODING", "utf-8")
        .stdin(Stdio::null());
    command
}

/// A process that is killed (and reaped) when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Proc {
    /// Starts `command` with its stdout piped.
    fn spawn(command: &mut Command) -> Self {
        Self(command.stdout(Stdio::piped()).spawn().unwrap())
    }

    /// Its first line of output: the port a Python server listens on.
    fn port(&mut self) -> (u16, BufReader<ChildStdout>) {
        let mut out = BufReader::new(self.0.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("no port from the server: {line:?}"));
        (port, out)
    }

    /// Runs `command` to its end (the peer bounds each of its own waits;
    /// this bounds the whole) and gives its output, checking that it
    /// succeeded.
    fn run(command: &mut Command) -> String {
        let mut proc = Self(
            command
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let (done, finished) = mpsc::channel();
        let mut stdout = proc.0.stdout.take().unwrap();
        let mut stderr = proc.0.stderr.take().unwrap();
        // Each pipe read on its own: a full one would stall the peer.
        let errors = thread::spawn(move || {
            let mut err = String::new();
            let _ = stderr.read_to_string(&mut err);
            err
        });
        thread::spawn(move || {
            let mut out = String::new();
            let _ = stdout.read_to_string(&mut out);
            let _ = done.send((out, errors.join().unwrap_or_default()));
        });
        let (out, err) = finished
            .recv_timeout(WAIT * 2)
            .unwrap_or_else(|_| panic!("{command:?} did not finish within {:?}", WAIT * 2));
        let status = proc.0.wait().unwrap();
        assert!(
            status.success(),
            "{command:?} failed ({status}):\n{err}\nafter printing:\n{out}"
        );
        out
    }
}

// ----- Python clients against the echo server -----

#[test]
fn websockets_client_against_the_echo_server() {
    if !require_python("websockets") {
        return;
    }
    let server = echo_server();
    let url = format!("ws://{}/", server.addr);
    let got = Proc::run(&mut python("ws_websockets_client.py", &[&url]));
    assert_eq!(
        got,
        "text True héllo wörld ✓ 🦀\n\
         binary 0 bytes True\n\
         binary 1 bytes True\n\
         binary 125 bytes True\n\
         binary 126 bytes True\n\
         binary 65535 bytes True\n\
         binary 65536 bytes True\n\
         binary 1048576 bytes True\n\
         binary 3145733 bytes True\n\
         fragmented text fragmented ✓\n\
         fragmented binary b'\\x00\\x01\\xff'\n\
         pong True\n\
         text after the ping\n\
         closed 1000 ''\n\
         invalid byte closed 1007\n\
         surrogate closed 1007\n\
         cut code point closed 1007\n\
         first fragment echoed b'ok \\xe2\\x82'\n\
         invalid across fragments closed 1007\n"
    );
}

#[test]
fn wsproto_client_against_the_echo_server() {
    if !require_python("wsproto") {
        return;
    }
    let server = echo_server();
    let port = server.addr.port().to_string();
    let got = Proc::run(&mut python("ws_wsproto_client.py", &[&port]));
    assert_eq!(
        got,
        "text True héllo wörld ✓ 🦀\n\
         binary 0 True\n\
         binary 1 True\n\
         binary 125 True\n\
         binary 126 True\n\
         binary 65535 True\n\
         binary 65536 True\n\
         binary 1048576 True\n\
         fragmented text fragmented ✓\n\
         fragmented binary b'abcd' [\"Pong b'mid'\"]\n\
         Pong b'are you there?'\n\
         CloseConnection 1000 ''\n\
         then EOF\n\
         invalid byte CloseConnection 1007\n\
         cut code point CloseConnection 1007\n\
         first fragment echoed TextMessage 'ok ' False\n\
         invalid across fragments CloseConnection 1007\n"
    );
}

// ----- tokio-tungstenite as a client of the echo server -----

type TClient = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A message as a line: small payloads in full, large ones by length.
fn describe(message: &Message) -> String {
    match message {
        Message::Text(text) => format!("text {}", text.as_str()),
        Message::Binary(data) => binary_line(data),
        Message::Ping(data) => format!("ping {:?}", String::from_utf8_lossy(data)),
        Message::Pong(data) => format!("pong {:?}", String::from_utf8_lossy(data)),
        Message::Close(Some(frame)) => {
            format!(
                "close {} {:?}",
                u16::from(frame.code),
                frame.reason.as_str()
            )
        }
        Message::Close(None) => "close none".to_owned(),
        Message::Frame(_) => "a raw frame".to_owned(),
    }
}

fn binary_line(data: &[u8]) -> String {
    if data.len() <= 16 {
        format!("binary {data:?}")
    } else {
        format!("binary of {} bytes", data.len())
    }
}

/// A raw frame (tungstenite masks it, as a client's).
fn raw(data: &'static [u8], opcode: OpCode, fin: bool) -> Message {
    Message::Frame(TFrame::message(Bytes::from_static(data), opcode, fin))
}

const TEXT_FRAME: OpCode = OpCode::Data(Data::Text);
const BINARY_FRAME: OpCode = OpCode::Data(Data::Binary);
const CONTINUATION: OpCode = OpCode::Data(Data::Continue);

/// A tokio-tungstenite client, split so that it reads while it sends (a
/// large echo comes back while the message is still going out).
struct Tungstenite {
    tx: SplitSink<TClient, Message>,
    rx: SplitStream<TClient>,
}

impl Tungstenite {
    async fn connect(addr: SocketAddr) -> Result<(Self, u16), BoxError> {
        let (ws, response) = tokio_tungstenite::connect_async(format!("ws://{addr}/")).await?;
        let (tx, rx) = ws.split();
        Ok((Self { tx, rx }, response.status().as_u16()))
    }

    /// Sends `sends` while reading, until `want` messages came or the
    /// stream ended (a failure after the close frame is its end: the
    /// server may reset once it closed).
    async fn round(&mut self, sends: Vec<Message>, want: usize) -> Result<Vec<Message>, BoxError> {
        let Self { tx, rx } = self;
        let send = async {
            for message in sends {
                tx.send(message).await?;
            }
            Ok::<_, tungstenite::Error>(())
        };
        let receive = async {
            let mut got = Vec::new();
            while got.len() < want {
                let closed = got.iter().any(|m| matches!(m, Message::Close(_)));
                match rx.next().await {
                    Some(Ok(message)) => got.push(message),
                    Some(Err(_)) if closed => break,
                    Some(Err(e)) => return Err(e),
                    None => break,
                }
            }
            Ok(got)
        };
        let (sent, got) = tokio::join!(send, receive);
        let got = got?;
        // Sending after the server closed may fail: the close says why.
        if !got.iter().any(|m| matches!(m, Message::Close(_))) {
            sent?;
        }
        Ok(got)
    }

    /// [`round`](Self::round), described.
    async fn lines(&mut self, sends: Vec<Message>, want: usize) -> Result<Vec<String>, BoxError> {
        let got = self.round(sends, want).await?;
        Ok(got.iter().map(describe).collect())
    }
}

/// The message set, from tokio-tungstenite: one line per message read.
async fn tungstenite_session(addr: SocketAddr) -> Result<Vec<String>, BoxError> {
    let (mut ws, status) = Tungstenite::connect(addr).await?;
    let mut lines = vec![format!("status {status}")];
    lines.extend(ws.lines(vec![Message::text(TEXT)], 1).await?);
    for n in SIZES {
        let data = payload(n);
        let got = ws.round(vec![Message::binary(data.clone())], 1).await?;
        lines.push(match &got[..] {
            [Message::Binary(echo)] if echo[..] == data[..] => format!("binary {n} equal"),
            other => format!(
                "binary {n}: {:?}",
                other.iter().map(describe).collect::<Vec<_>>()
            ),
        });
    }
    let fragments = vec![
        raw("frag".as_bytes(), TEXT_FRAME, false),
        raw("men".as_bytes(), CONTINUATION, false),
        raw("ted ✓".as_bytes(), CONTINUATION, true),
    ];
    lines.extend(ws.lines(fragments, 1).await?);
    // A ping between the fragments: its pong comes before the message.
    let fragments = vec![
        raw(b"ab", BINARY_FRAME, false),
        Message::Ping(Bytes::from_static(b"mid")),
        raw(b"cd", CONTINUATION, true),
    ];
    lines.extend(ws.lines(fragments, 2).await?);
    let ping = Message::Ping(Bytes::from_static(b"are you there?"));
    lines.extend(ws.lines(vec![ping], 1).await?);
    let close = Message::Close(Some(CloseFrame {
        code: close_code::NORMAL.into(),
        reason: Utf8Bytes::from_static("done ✓"),
    }));
    lines.extend(ws.lines(vec![close], usize::MAX).await?);
    // Text that is not UTF-8, one connection each: closed with 1007.
    // (Invalid text across fragments is in `broken_frames`: there the
    // second fragment waits for the echo of the first.)
    let invalid: [(&str, Vec<Message>); 3] = [
        ("invalid byte", vec![raw(b"\xff\xfe", TEXT_FRAME, true)]),
        ("surrogate", vec![raw(b"ok \xed\xa0\x80", TEXT_FRAME, true)]),
        (
            "cut code point",
            vec![raw(b"ok \xe2\x82", TEXT_FRAME, true)],
        ),
    ];
    for (name, frames) in invalid {
        let (mut ws, _) = Tungstenite::connect(addr).await?;
        let got = ws.lines(frames, usize::MAX).await?;
        lines.push(format!("{name}: {}", got.join(", ")));
    }
    Ok(lines)
}

#[test]
fn tungstenite_client_against_the_echo_server() {
    let server = echo_server();
    let runtime = runtime();
    let lines = bounded(
        &runtime,
        "tokio-tungstenite against the echo server",
        tungstenite_session(server.addr),
    )
    .unwrap();
    let mut expected = vec!["status 101".to_owned(), format!("text {TEXT}")];
    expected.extend(SIZES.map(|n| format!("binary {n} equal")));
    expected.extend(
        [
            "text fragmented ✓",
            "pong \"mid\"",
            "binary [97, 98, 99, 100]",
            "pong \"are you there?\"",
            "close 1000 \"\"",
            "invalid byte: close 1007 \"\"",
            "surrogate: close 1007 \"\"",
            "cut code point: close 1007 \"\"",
        ]
        .map(String::from),
    );
    assert_eq!(lines, expected);
}

// ----- the client against echo servers -----

/// The client from `websocket::connect`, and the pieces of a message
/// being read.
struct Client {
    conn: Connection<TcpStream, WebSocket>,
    parts: Assembler,
}

impl Client {
    /// Connects to `addr`; with `pings`, the protocol hands pings and
    /// pongs out as events too (it answers pings either way).
    async fn connect(addr: SocketAddr, pings: bool) -> Result<Self, BoxError> {
        let host = addr.to_string();
        let conn = connect_with(&host, &host, "/", ws_config().pings(pings)).await?;
        Ok(Self {
            conn,
            parts: Assembler::new(),
        })
    }

    fn ws(&mut self) -> &mut WebSocket {
        self.conn.conn_mut().protocol_mut()
    }

    /// Sends `frames` and flushes.
    async fn send(&mut self, frames: Vec<Frame>) -> Result<(), BoxError> {
        for frame in frames {
            self.conn.send(frame).await?;
        }
        self.conn.flush().await?;
        Ok(())
    }

    /// The next whole message (its pieces joined), control frame, or the
    /// end, as a line.
    async fn next(&mut self) -> Result<String, BoxError> {
        loop {
            let Some(event) = self.conn.next().await else {
                return Ok("end".to_owned());
            };
            let (kind, data) = match event? {
                WsEvent::Text(text) => (Kind::Text, text),
                WsEvent::Binary(data) => (Kind::Binary, data),
                WsEvent::Part(part) => match self.parts.push(part) {
                    Some(whole) => whole,
                    None => continue,
                },
                WsEvent::Ping(data) => {
                    return Ok(format!("ping {:?}", String::from_utf8_lossy(&data)))
                }
                WsEvent::Pong(data) => {
                    return Ok(format!("pong {:?}", String::from_utf8_lossy(&data)))
                }
                WsEvent::Close(frame) => {
                    let reason = std::str::from_utf8(&frame.reason)?;
                    return Ok(format!("close {:?} {reason:?}", frame.code));
                }
            };
            return Ok(match kind {
                Kind::Text => format!("text {}", std::str::from_utf8(&data)?),
                Kind::Binary => binary_line(&data),
            });
        }
    }

    /// Sends a whole message; the echo as a line.
    async fn echo(&mut self, kind: Kind, data: &[u8]) -> Result<String, BoxError> {
        let frame = self
            .ws()
            .message(kind, Bytes::copy_from_slice(data))
            .unwrap();
        self.send(vec![frame]).await?;
        self.next().await
    }
}

/// The message set, from the client, against an echo server at `addr`
/// (which answers "ping me" with a ping, then a text once the pong came,
/// and "close me" with a close 4000): one line per event read.
async fn client_session(addr: SocketAddr) -> Result<Vec<String>, BoxError> {
    let mut lines = Vec::new();
    for pings in [false, true] {
        lines.push(format!("-- pings shown: {pings}"));
        let mut client = Client::connect(addr, pings).await?;
        lines.push(client.echo(Kind::Text, TEXT.as_bytes()).await?);
        for n in SIZES {
            let data = payload(n);
            let frame = client
                .ws()
                .message(Kind::Binary, Bytes::from(data.clone()))
                .unwrap();
            client.send(vec![frame]).await?;
            // Compared here: a megabyte in a failed assertion helps no one.
            let mut assembler = Assembler::new();
            let echo = loop {
                match client.conn.next().await.ok_or("the server closed")?? {
                    WsEvent::Binary(echo) => break echo,
                    WsEvent::Part(part) => {
                        if let Some((_, echo)) = assembler.push(part) {
                            break echo;
                        }
                    }
                    other => return Err(format!("binary {n}: {other:?}").into()),
                }
            };
            let same = if echo[..] == data[..] {
                "equal"
            } else {
                "differs"
            };
            lines.push(format!("binary {n} {same}"));
        }
        let ws = client.ws();
        let frames = vec![
            ws.part(Kind::Text, Bytes::from("frag"), true, false)
                .unwrap(),
            ws.part(Kind::Text, Bytes::from("men"), false, false)
                .unwrap(),
            ws.part(Kind::Text, Bytes::from("ted ✓"), false, true)
                .unwrap(),
        ];
        client.send(frames).await?;
        lines.push(client.next().await?);
        let ws = client.ws();
        let frames = vec![
            ws.part(Kind::Binary, Bytes::from_static(b"\x00\x01"), true, false)
                .unwrap(),
            ws.part(Kind::Binary, Bytes::new(), false, false).unwrap(),
            ws.part(Kind::Binary, Bytes::from_static(b"\xff"), false, true)
                .unwrap(),
        ];
        client.send(frames).await?;
        lines.push(client.next().await?);
        // The server's ping is answered by the protocol; the server says
        // when the pong came.
        lines.push(client.echo(Kind::Text, b"ping me").await?);
        if pings {
            lines.push(client.next().await?);
            let ping = client.ws().ping(Bytes::from_static(b"are you there?"))?;
            client.send(vec![ping]).await?;
            lines.push(client.next().await?);
            // A ping between the fragments of a message.
            let ws = client.ws();
            let frames = vec![
                ws.part(Kind::Binary, Bytes::from_static(b"ab"), true, false)
                    .unwrap(),
                ws.ping(Bytes::from_static(b"mid"))?,
                ws.part(Kind::Binary, Bytes::from_static(b"cd"), false, true)
                    .unwrap(),
            ];
            client.send(frames).await?;
            lines.push(client.next().await?);
            lines.push(client.next().await?);
        }
        let close = client.ws().close(close_code::NORMAL, "done ✓")?;
        client.send(vec![close]).await?;
        lines.push(client.next().await?);
        lines.push(client.next().await?);
    }
    lines.push("-- closed by the server".to_owned());
    let mut client = Client::connect(addr, false).await?;
    lines.push(client.echo(Kind::Text, b"close me").await?);
    lines.push(client.next().await?);
    Ok(lines)
}

/// What [`client_session`] reads from every echo server.
fn client_transcript() -> Vec<String> {
    let mut lines = Vec::new();
    for pings in [false, true] {
        lines.push(format!("-- pings shown: {pings}"));
        lines.push(format!("text {TEXT}"));
        lines.extend(SIZES.map(|n| format!("binary {n} equal")));
        lines.push("text fragmented ✓".to_owned());
        lines.push("binary [0, 1, 255]".to_owned());
        if pings {
            lines.push("ping \"from the server\"".to_owned());
        }
        lines.push("text pong: from the server".to_owned());
        if pings {
            lines.push("pong \"are you there?\"".to_owned());
            lines.push("pong \"mid\"".to_owned());
            lines.push("binary [97, 98, 99, 100]".to_owned());
        }
        lines.push("close Some(1000) \"done ✓\"".to_owned());
        lines.push("end".to_owned());
    }
    lines.push("-- closed by the server".to_owned());
    lines.push("close Some(4000) \"server bye\"".to_owned());
    lines.push("end".to_owned());
    lines
}

/// Runs [`client_session`] against the server on `port`.
fn run_client(peer: &str, port: u16) -> Vec<String> {
    let runtime = runtime();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    bounded(&runtime, peer, client_session(addr)).unwrap_or_else(|e| panic!("{peer}: {e}"))
}

#[test]
fn client_against_websockets_server() {
    if !require_python("websockets") {
        return;
    }
    let mut server = Proc::spawn(&mut python("ws_websockets_server.py", &[]));
    let (port, _out) = server.port();
    assert_eq!(run_client("websockets", port), client_transcript());
}

#[test]
fn client_against_wsproto_server() {
    if !require_python("wsproto") {
        return;
    }
    let mut server = Proc::spawn(&mut python("ws_wsproto_server.py", &[]));
    let (port, _out) = server.port();
    assert_eq!(run_client("wsproto", port), client_transcript());
}

/// A tokio-tungstenite echo server with the Python servers' two orders.
async fn tungstenite_server(listener: tokio::net::TcpListener) {
    while let Ok((socket, _)) = listener.accept().await {
        tokio::spawn(async move {
            // A client that breaks off is its own business.
            let _ = tungstenite_echo(socket).await;
        });
    }
}

async fn tungstenite_echo(socket: TcpStream) -> Result<(), tungstenite::Error> {
    let mut ws = tokio_tungstenite::accept_async(socket).await?;
    while let Some(message) = ws.next().await {
        match message? {
            Message::Text(text) if text.as_str() == "ping me" => {
                ws.send(Message::Ping(Bytes::from_static(b"from the server")))
                    .await?;
            }
            Message::Text(text) if text.as_str() == "close me" => {
                let close = CloseFrame {
                    code: 4000.into(),
                    reason: Utf8Bytes::from_static("server bye"),
                };
                ws.close(Some(close)).await?;
            }
            message @ (Message::Text(_) | Message::Binary(_)) => ws.send(message).await?,
            Message::Pong(data) => {
                let text = format!("pong: {}", String::from_utf8_lossy(&data));
                ws.send(Message::text(text)).await?;
            }
            // Its pong is queued: out now.
            Message::Ping(_) => ws.flush().await?,
            Message::Close(_) | Message::Frame(_) => {}
        }
    }
    Ok(())
}

#[test]
fn client_against_tungstenite_server() {
    let server = serving(tungstenite_server);
    let port = server.addr.port();
    assert_eq!(run_client("tokio-tungstenite", port), client_transcript());
}

// ----- raw bytes: broken frames and refused handshakes -----

/// A handshake the echo server accepts (the key of RFC 6455, 1.3).
const UPGRADE: &[u8] = b"GET / HTTP/1.1\r\nHost: raw.test\r\nUpgrade: websocket\r\n\
    Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
    Sec-WebSocket-Version: 13\r\n\r\n";

/// Its 101.
const SWITCHING: &[u8] = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
    Connection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";

/// A client's frame: the first byte (FIN, RSV, opcode) as given, the
/// payload masked.
fn masked(first: u8, payload: &[u8]) -> Vec<u8> {
    let key = [0x37, 0xfa, 0x21, 0x3d];
    let mut frame = vec![first];
    match payload.len() {
        n @ 0..=125 => frame.push(0x80 | n as u8),
        n @ 126..=0xffff => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    frame.extend_from_slice(&key);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
    frame
}

/// The next byte of `from`, or `None` at the end.
fn byte(from: &mut impl Read) -> Option<u8> {
    let mut byte = [0];
    let n = from
        .read(&mut byte)
        .unwrap_or_else(|e| panic!("reading the server's answer: {e}"));
    (n == 1).then_some(byte[0])
}

fn exact(from: &mut impl Read, n: usize) -> Vec<u8> {
    (0..n)
        .map(|_| byte(from).expect("the server closed inside a frame"))
        .collect()
}

/// The server's next (unmasked) frame in `from` as a line (a close by
/// its code), or `None` at the end.
fn frame(from: &mut impl Read) -> Option<String> {
    let first = byte(from)?;
    let second = byte(from).expect("the server closed inside a frame");
    assert_eq!(second & 0x80, 0, "a server's frame is masked");
    let len = match second & 0x7f {
        126 => usize::from(u16::from_be_bytes(exact(from, 2).try_into().unwrap())),
        127 => usize::try_from(u64::from_be_bytes(exact(from, 8).try_into().unwrap())).unwrap(),
        n => usize::from(n),
    };
    let payload = exact(from, len);
    Some(match (first, &payload[..]) {
        (0x88, [hi, lo, reason @ ..]) => format!(
            "close {} {:?}",
            u16::from_be_bytes([*hi, *lo]),
            String::from_utf8_lossy(reason)
        ),
        (first, payload) => format!("{first:#04x} {payload:?}"),
    })
}

/// A client of raw bytes on a blocking socket (every read bounded).
struct Raw(std::net::TcpStream);

impl Raw {
    fn connect(addr: SocketAddr) -> Self {
        let socket = std::net::TcpStream::connect(addr).unwrap();
        socket.set_read_timeout(Some(WAIT)).unwrap();
        Self(socket)
    }

    /// Connects and does the handshake: the 101 read, nothing after it.
    fn upgraded(addr: SocketAddr) -> Self {
        let mut raw = Self::connect(addr);
        raw.write(UPGRADE);
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            head.push(raw.byte().expect("the server closed during the handshake"));
        }
        assert_eq!(
            String::from_utf8_lossy(&head),
            String::from_utf8_lossy(SWITCHING)
        );
        raw
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.write_all(bytes).unwrap();
    }

    /// The next byte, or `None` at the end.
    fn byte(&mut self) -> Option<u8> {
        byte(&mut self.0)
    }

    /// The server's next frame as a line, or `None` at the end.
    fn frame(&mut self) -> Option<String> {
        frame(&mut self.0)
    }

    /// The server's frames until it closes.
    fn frames(&mut self) -> Vec<String> {
        std::iter::from_fn(|| self.frame()).collect()
    }

    /// Everything the server says until it closes.
    fn rest(&mut self) -> Vec<u8> {
        let mut answer = Vec::new();
        self.0
            .read_to_end(&mut answer)
            .unwrap_or_else(|e| panic!("reading the server's answer: {e}"));
        answer
    }
}

/// Broken frames, each sent after the handshake (and after the echo of
/// the frames before it), with what the server answers each with.
type Steps = (&'static str, Vec<Vec<u8>>, &'static [&'static str]);

/// The close that answers a broken rule.
const PROTOCOL_ERROR: &str = "close 1002 \"\"";

fn broken_frames() -> Vec<Steps> {
    let long_ping = [b'p'; 126];
    // A header that announces a frame above the 16 MiB limit, no payload.
    let mut too_big = vec![0x82, 0x80 | 127];
    too_big.extend_from_slice(&((16u64 << 20) + 1).to_be_bytes());
    too_big.extend_from_slice(&[1, 2, 3, 4]);
    vec![
        ("unmasked", vec![b"\x81\x02hi".to_vec()], &[PROTOCOL_ERROR]),
        (
            "RSV1, no extension",
            vec![masked(0xc1, b"hi")],
            &[PROTOCOL_ERROR],
        ),
        ("RSV2", vec![masked(0xa1, b"hi")], &[PROTOCOL_ERROR]),
        (
            "unknown opcode",
            vec![masked(0x83, b"hi")],
            &[PROTOCOL_ERROR],
        ),
        (
            "a ping of 126 bytes",
            vec![masked(0x89, &long_ping)],
            &[PROTOCOL_ERROR],
        ),
        (
            "a fragmented ping",
            vec![masked(0x09, b"hi")],
            &[PROTOCOL_ERROR],
        ),
        (
            "a continuation first",
            vec![masked(0x80, b"hi")],
            &[PROTOCOL_ERROR],
        ),
        (
            "a text inside a fragmented message",
            vec![masked(0x01, b"a"), masked(0x81, b"b")],
            &["0x01 [97]", PROTOCOL_ERROR],
        ),
        (
            "invalid UTF-8 across fragments",
            vec![masked(0x01, b"ok \xe2\x82"), masked(0x80, b"\x28")],
            &["0x01 [111, 107, 32, 226, 130]", "close 1007 \"\""],
        ),
        (
            "a close of one byte",
            vec![masked(0x88, b"\x03")],
            &[PROTOCOL_ERROR],
        ),
        (
            "a close with 1005",
            vec![masked(0x88, b"\x03\xed")],
            &[PROTOCOL_ERROR],
        ),
        (
            "a close with 999",
            vec![masked(0x88, b"\x03\xe7")],
            &[PROTOCOL_ERROR],
        ),
        (
            "a close whose reason is not UTF-8",
            vec![masked(0x88, b"\x03\xe8\xff")],
            &["close 1007 \"\""],
        ),
        (
            "a frame over the limit",
            vec![too_big],
            &["close 1009 \"\""],
        ),
        (
            "a close with 3000",
            vec![masked(0x88, b"\x0b\xb8bye")],
            &["close 3000 \"\""],
        ),
        (
            "a close with no code",
            vec![masked(0x88, b"")],
            &["0x88 []"],
        ),
        (
            "a message, then a close",
            vec![masked(0x82, b"\x00\xff"), masked(0x88, b"\x03\xe8")],
            &["0x82 [0, 255]", "close 1000 \"\""],
        ),
    ]
}

#[test]
fn broken_frames_get_their_close_code() {
    let server = echo_server();
    for (name, steps, expected) in broken_frames() {
        let mut raw = Raw::upgraded(server.addr);
        let mut got = Vec::new();
        for (i, step) in steps.iter().enumerate() {
            if i > 0 {
                // The answer to the step before, first.
                got.extend(raw.frame());
            }
            raw.write(step);
        }
        got.extend(raw.frames());
        assert_eq!(got, expected, "{name}");
    }
}

#[test]
fn a_close_never_overtakes_the_data_frames_queued_before_it() {
    let server = echo_server();
    let mut wrong = Vec::new();
    for (name, steps, expected) in broken_frames() {
        if steps.len() < 2 {
            continue;
        }
        // All in one write: the echo is still queued when the close comes.
        let mut raw = Raw::upgraded(server.addr);
        raw.write(&steps.concat());
        let got = raw.frames();
        if got != expected {
            wrong.push(format!("{name}: {got:?}, not {expected:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn frames_sent_with_the_request_are_answered_after_the_101() {
    let server = echo_server();
    let cases: [(&str, Vec<u8>, &str); 4] = [
        ("a text", masked(0x81, b"hi"), "0x81 [104, 105]"),
        ("a ping", masked(0x89, b"hi"), "0x8a [104, 105]"),
        ("a close", masked(0x88, b"\x03\xe8"), "close 1000 \"\""),
        ("an unmasked frame", b"\x81\x02hi".to_vec(), PROTOCOL_ERROR),
    ];
    let mut wrong = Vec::new();
    for (name, frames, expected) in cases {
        let mut raw = Raw::connect(server.addr);
        raw.write(&[UPGRADE, &frames].concat());
        let head = exact(&mut raw.0, SWITCHING.len());
        // Past a wrong head, nothing more to read is certain to come.
        let first = if head == SWITCHING { raw.frame() } else { None };
        if head != SWITCHING || first.as_deref() != Some(expected) {
            wrong.push(format!("{name}: {} then {first:?}", head.escape_ascii()));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn refused_handshakes_get_400_or_426() {
    let bad_request = "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
    let upgrade_required = "HTTP/1.1 426 Upgrade Required\r\nSec-WebSocket-Version: 13\r\n\
                            Upgrade: websocket\r\nConnection: Upgrade, close\r\n\
                            Content-Length: 0\r\n\r\n";
    let upgrade = std::str::from_utf8(UPGRADE).unwrap();
    let cases = [
        (
            "version 8",
            upgrade.replace("Version: 13", "Version: 8"),
            upgrade_required,
        ),
        (
            "no version",
            upgrade.replace("Sec-WebSocket-Version: 13\r\n", ""),
            upgrade_required,
        ),
        (
            "a key of 15 bytes",
            upgrade.replace("dGhlIHNhbXBsZSBub25jZQ==", "dGhlIHNhbXBsZSBub25jZQ"),
            bad_request,
        ),
        ("a POST", upgrade.replace("GET", "POST"), bad_request),
        (
            "no Upgrade",
            upgrade.replace("Upgrade: websocket\r\n", ""),
            bad_request,
        ),
        (
            "a plain GET",
            "GET / HTTP/1.1\r\nHost: a\r\n\r\n".to_owned(),
            bad_request,
        ),
    ];
    let server = echo_server();
    for (name, request, expected) in cases {
        let mut raw = Raw::connect(server.addr);
        raw.write(request.as_bytes());
        let answer = raw.rest();
        assert_eq!(String::from_utf8_lossy(&answer), expected, "{name}");
    }
}
