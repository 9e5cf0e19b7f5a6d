//! A line protocol over real TCP with tokio: a server reads lines with a
//! `FrameReader<_, Lines>` and answers each on the same connection (same
//! task, answers batched into one write), with idle and frame timeouts; a
//! client sends its lines cut into random pieces, then reads and prints
//! the answers.
//!
//! ```text
//! cargo run --example line_protocol            # seed 1
//! cargo run --example line_protocol -- 42      # other pieces, same answers
//! ```
//!
//! The server understands `PING`, `ECHO <text>`, `ADD <a> <b>` and `UPPER
//! <text>`; anything else gets `ERR`. However the socket cuts the stream,
//! the same lines come out and the same answers go back.

use std::time::Duration;

use cleave_proto::{Bytes, ConnConfig, Encoder, Lines, LinesConfig, Timeouts};
use cleave_tokio::FrameReader;
use futures_util::StreamExt;
use tokio::net::{TcpListener, TcpStream};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the client says, one line each.
const REQUESTS: [&str; 8] = [
    "PING",
    "ECHO hello, cleave",
    "ADD 40 2",
    "UPPER quiet words",
    "ADD 1 lots",
    "ECHO a line\r",
    "WHAT",
    "PING",
];

/// A small deterministic generator, so a seed always gives the same cuts.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// The protocol: one answer per request line.
fn answer(line: &[u8]) -> String {
    let line = String::from_utf8_lossy(line);
    let (command, rest) = line.split_once(' ').unwrap_or((&line, ""));
    match command {
        "PING" => "PONG".into(),
        "ECHO" => rest.into(),
        "UPPER" => rest.to_uppercase(),
        "ADD" => {
            let mut numbers = rest.split(' ').map(str::parse::<i64>);
            match (numbers.next(), numbers.next(), numbers.next()) {
                (Some(Ok(a)), Some(Ok(b)), None) => (a + b).to_string(),
                _ => "ERR ADD wants two integers".into(),
            }
        }
        _ => format!("ERR unknown command {command:?}"),
    }
}

/// Serves one connection: every line read gets its answer.
async fn serve(socket: TcpStream) -> Result<usize, BoxError> {
    // At most 1 KiB a line, `\r` stripped, UTF-8 checked.
    let config = LinesConfig::default()
        .max_length(1024)
        .strip_cr(true)
        .utf8(true);
    // A client silent for 10 s, or 5 s into a line it does not finish, is
    // let go: the stream ends with `Error::TimedOut`.
    let timeouts = Timeouts::default()
        .idle(Some(Duration::from_secs(10)))
        .frame(Some(Duration::from_secs(5)));
    let conn = ConnConfig::default().timeouts(timeouts);
    let mut lines = FrameReader::with_config(socket, Lines::with_config(config), conn);
    let mut encoder = Lines::new();
    let mut answered = 0;

    while let Some(line) = lines.next().await {
        // A peer's bad line (too long, not UTF-8, cut by the end of the
        // stream) is a typed error: stop serving this connection.
        let line = line?;
        let reply = Bytes::from(answer(&line));
        // The answer's frame (the line and a `\n`) goes into the queue: a
        // method call, no I/O unless the queue is full (1024 writes / 128 KiB
        // by default), when it writes first to make room. The answers to
        // lines that arrived together go out in one write, before the
        // connection reads again.
        lines.send(encoder.encode(reply)?).await?;
        answered += 1;
    }
    // No more requests: the last answers, then the end of our side.
    lines.close().await?;
    Ok(answered)
}

/// Sends the requests in random pieces, then reads the answers on the same
/// connection, and prints them.
async fn client(addr: std::net::SocketAddr, seed: u64) -> Result<usize, BoxError> {
    let socket = TcpStream::connect(addr).await?;
    socket.set_nodelay(true)?; // so small pieces go out as they are
    let mut conn = FrameReader::new(socket, Lines::new());

    let wire: Vec<u8> = REQUESTS
        .iter()
        .flat_map(|r| r.bytes().chain(*b"\n"))
        .collect();
    let mut rng = XorShift(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut rest = &wire[..];
    let mut sizes = Vec::new();
    while !rest.is_empty() {
        let n = 1 + rng.below(rest.len().min(12));
        conn.send(Bytes::copy_from_slice(&rest[..n])).await?;
        conn.flush().await?; // this piece on its own
        sizes.push(n);
        rest = &rest[n..];
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    conn.close().await?; // no more requests
    println!("client sent {} bytes in pieces of {sizes:?}", wire.len());

    let mut answers = Vec::new();
    while let Some(reply) = conn.next().await {
        answers.push(reply?);
    }
    for (request, reply) in REQUESTS.iter().zip(&answers) {
        let request = format!("{request:?}");
        println!("  {request:<22} -> {:?}", String::from_utf8_lossy(reply));
    }
    Ok(answers.len())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let seed = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1u64);
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    println!("server on {addr}");

    let server = tokio::spawn(async move {
        let (socket, peer) = listener.accept().await?;
        println!("server: connection from {peer}");
        serve(socket).await
    });
    let run = async {
        let received = client(addr, seed).await?;
        let answered = server.await??;
        Ok::<_, BoxError>((received, answered))
    };
    let (received, answered) = tokio::time::timeout(Duration::from_secs(10), run).await??;
    println!("server answered {answered} lines, client read {received} answers");
    if received != REQUESTS.len() || answered != REQUESTS.len() {
        return Err("a request went unanswered".into());
    }
    Ok(())
}
