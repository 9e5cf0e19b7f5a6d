//! A line protocol over real TCP with tokio: a server reads lines with a
//! `FrameReader<_, Lines>` and answers each with a same-task `Writer`; a
//! client sends its lines cut into random pieces and prints the answers.
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

use cleave_proto::{Bytes, Encoder, Lines, LinesConfig};
use cleave_tokio::{FrameReader, Writer};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
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
async fn serve(mut socket: TcpStream) -> Result<usize, BoxError> {
    let (read, write) = socket.split();
    // At most 1 KiB a line, `\r` stripped, UTF-8 checked.
    let config = LinesConfig::default()
        .max_length(1024)
        .strip_cr(true)
        .utf8(true);
    let mut lines = FrameReader::new(read, Lines::with_config(config));
    let mut writer = Writer::new(write);
    let mut encoder = Lines::new();
    let mut answered = 0;

    while let Some(line) = lines.next().await {
        // A peer's bad line (too long, not UTF-8, cut by the end of the
        // stream) is a typed error: stop serving this connection.
        let mut line = line?;
        loop {
            let reply = Bytes::from(answer(&line));
            // The answer's frame (the line and a `\n`) goes into the queue:
            // a method call, no I/O unless the queue is full (1024 writes /
            // 128 KiB by default), when it writes first to make room.
            writer.send_frame(encoder.encode(reply)?).await?;
            answered += 1;
            // Answer the lines already read without waiting for the socket,
            // then write all their answers at once.
            match lines.next_buffered() {
                Some(next) => line = next?,
                None => break,
            }
        }
        writer.flush().await?;
    }
    writer.shutdown().await?;
    Ok(answered)
}

/// Sends the requests in random pieces and prints what comes back.
async fn client(addr: std::net::SocketAddr, seed: u64) -> Result<usize, BoxError> {
    let mut socket = TcpStream::connect(addr).await?;
    socket.set_nodelay(true)?; // so small pieces go out as they are
    let (read, mut write) = socket.split();

    let wire: Vec<u8> = REQUESTS
        .iter()
        .flat_map(|r| r.bytes().chain(*b"\n"))
        .collect();
    let send = async {
        let mut rng = XorShift(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut rest = &wire[..];
        let mut sizes = Vec::new();
        while !rest.is_empty() {
            let n = 1 + rng.below(rest.len().min(12));
            write.write_all(&rest[..n]).await?;
            sizes.push(n);
            rest = &rest[n..];
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        write.shutdown().await?; // no more requests
        println!("client sent {} bytes in pieces of {sizes:?}", wire.len());
        Ok::<_, BoxError>(())
    };
    let receive = async {
        let mut answers = Vec::new();
        let mut replies = FrameReader::new(read, Lines::new());
        while let Some(reply) = replies.next().await {
            answers.push(reply?);
        }
        Ok::<_, BoxError>(answers)
    };
    let ((), answers) = tokio::try_join!(send, receive)?;
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
