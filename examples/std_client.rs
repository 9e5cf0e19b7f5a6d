//! A blocking client with cleave-std: a writer thread sends the requests
//! in small pieces through a `WriteHandle`, while the main thread reads the
//! answers with a `Stream` on a clone of the same socket.
//!
//! ```text
//! cargo run --example std_client                      # against a built-in server
//! cargo run --example std_server -- 127.0.0.1:7000 &   # or against std_server
//! cargo run --example std_client -- 127.0.0.1:7000
//! ```
//!
//! Without an address, the example starts a line server of its own (one
//! `Stream` per connection, on a thread) on a 127.0.0.1 ephemeral port. The
//! client checks that every request got its answer, in order.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use cleave_proto::{Bytes, ConnConfig, Encoder, Framed, Lines, Timeouts, WriteQueueConfig};
use cleave_std::{spawn_writer, Stream};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long the client waits for an answer before it gives up.
const PATIENCE: Duration = Duration::from_secs(10);

/// The requests and the answers a server of the line protocol gives.
const EXCHANGES: [(&str, &str); 6] = [
    ("PING", "PONG"),
    (
        "ECHO hello from a blocking client",
        "hello from a blocking client",
    ),
    ("ADD 20 22", "42"),
    ("UPPER said quietly", "SAID QUIETLY"),
    ("ADD one two", "ERR ADD wants two integers"),
    ("PING", "PONG"),
];

/// The connection's timeouts: give up when the server stays silent.
fn patience() -> ConnConfig {
    ConnConfig::default().timeouts(Timeouts::default().idle(Some(PATIENCE)))
}

/// The client: sends in pieces on the writer thread, reads on this one.
fn client(addr: SocketAddr) -> Result<(), BoxError> {
    let socket = TcpStream::connect(addr)?;
    socket.set_nodelay(true)?; // so small pieces go out as they are

    // One socket, two clones: the writer thread writes one (and shuts the
    // sending side down when its queue is closed), a Stream reads the
    // other.
    let (handle, writer) = spawn_writer(socket.try_clone()?, WriteQueueConfig::default());
    let mut answers = Stream::with_config(socket, Framed::new(Lines::new()), patience());

    let sender = thread::spawn(move || -> Result<usize, BoxError> {
        let mut pieces = 0;
        for (request, _) in EXCHANGES {
            // The line and its delimiter, sent in pieces of at most 5
            // bytes, each written before the next is queued.
            let line = Bytes::from(format!("{request}\n"));
            for start in (0..line.len()).step_by(5) {
                handle.send(line.slice(start..line.len().min(start + 5)))?;
                handle.flush()?;
                pieces += 1;
                thread::sleep(Duration::from_millis(1));
            }
        }
        handle.close()?; // everything written, no more requests: a FIN
        Ok(pieces)
    });

    let mut got = Vec::new();
    while let Some(answer) = answers.recv()? {
        got.push(answer);
    }
    let pieces = sender.join().map_err(|_| "the sender panicked")??;
    writer.join().map_err(|_| "the writer thread panicked")??;
    println!(
        "client sent {} requests in {pieces} pieces",
        EXCHANGES.len()
    );

    for ((request, expected), answer) in EXCHANGES.iter().zip(&got) {
        let answer = String::from_utf8_lossy(answer);
        let request = format!("{request:?}");
        println!("  {request:<36} -> {answer:?}");
        if answer != *expected {
            return Err(format!("expected {expected:?}").into());
        }
    }
    if got.len() != EXCHANGES.len() {
        return Err(format!("{} answers for {} requests", got.len(), EXCHANGES.len()).into());
    }
    Ok(())
}

/// The built-in server: one connection, lines in, answers out, on one
/// `Stream`.
fn serve_one(listener: TcpListener) -> Result<(), BoxError> {
    let (socket, _) = listener.accept()?;
    let mut lines = Stream::with_config(socket, Framed::new(Lines::new()), patience());
    let mut encoder = Lines::new();
    while let Some(line) = lines.recv()? {
        let line = String::from_utf8_lossy(&line).into_owned();
        let (command, rest) = line.split_once(' ').unwrap_or((&line, ""));
        let answer = match command {
            "PING" => "PONG".to_string(),
            "ECHO" => rest.to_string(),
            "UPPER" => rest.to_uppercase(),
            "ADD" => match rest
                .split_once(' ')
                .map(|(a, b)| (a.parse::<i64>(), b.parse::<i64>()))
            {
                Some((Ok(a), Ok(b))) => a.saturating_add(b).to_string(),
                _ => "ERR ADD wants two integers".to_string(),
            },
            _ => format!("ERR unknown command {command:?}"),
        };
        lines.send(encoder.encode(answer.into())?)?;
        lines.flush()?;
    }
    lines.close()?; // and a FIN
    Ok(())
}

fn main() -> Result<(), BoxError> {
    match std::env::args().nth(1) {
        Some(addr) => {
            let addr = addr.parse()?;
            client(addr)
        }
        None => {
            let listener = TcpListener::bind("127.0.0.1:0")?;
            let addr = listener.local_addr()?;
            println!("built-in server on {addr}");
            let server = thread::spawn(move || serve_one(listener));
            client(addr)?;
            server.join().map_err(|_| "the server panicked")??;
            println!("done");
            Ok(())
        }
    }
}
