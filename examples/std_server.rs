//! A line protocol server on blocking std sockets, a thread per
//! connection, with cleave-std's `Stream`: each thread reads lines, queues
//! the answers to all the lines that arrived together, and writes them
//! with one vectored write. The connection's timeouts hang up on a client
//! that stays silent, or takes too long over a line.
//!
//! ```text
//! cargo run --example std_server                     # built-in run: server and 8 clients
//! cargo run --example std_server -- 127.0.0.1:7000   # serve until stopped
//! ```
//!
//! The built-in run starts the server on a 127.0.0.1 ephemeral port and 8
//! clients, each sending the requests cut into random pieces and checking
//! every answer. The server understands `PING`, `ECHO <text>`, `ADD <a>
//! <b>` and `UPPER <text>`; anything else gets `ERR`. `std_client` speaks
//! to it too.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use cleave_proto::{ConnConfig, Encoder, Error, Framed, Lines, LinesConfig, Timeouts};
use cleave_std::{ConnError, Stream};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long a connection may stay silent before the server hangs up.
const IDLE: Duration = Duration::from_secs(10);

/// How long a line may take to arrive once it started.
const LINE: Duration = Duration::from_secs(5);

/// How many clients the built-in run starts.
const CLIENTS: u64 = 8;

/// What each client says, one line each.
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
                (Some(Ok(a)), Some(Ok(b)), None) => a.saturating_add(b).to_string(),
                _ => "ERR ADD wants two integers".into(),
            }
        }
        _ => format!("ERR unknown command {command:?}"),
    }
}

/// Serves one connection on its own thread: every line read gets its
/// answer. Returns how many lines it answered.
fn serve(socket: TcpStream) -> Result<usize, BoxError> {
    // At most 1 KiB a line, `\r` stripped, UTF-8 checked.
    let decoder = LinesConfig::default()
        .max_length(1024)
        .strip_cr(true)
        .utf8(true);
    // The timeouts run from now, before the first byte.
    let timeouts = Timeouts::default().idle(Some(IDLE)).frame(Some(LINE));
    let config = ConnConfig::default().timeouts(timeouts);
    let protocol = Framed::new(Lines::with_config(decoder));
    let mut lines = Stream::with_config(socket, protocol, config);
    let mut encoder = Lines::new();
    let mut answered = 0;
    loop {
        let line = match lines.recv() {
            Ok(Some(line)) => line,
            Ok(None) => break, // the client is done
            // Silent for too long, or too slow over a line: the socket was
            // shut down (or reset, mid-line) already.
            Err(ConnError::Protocol(Error::TimedOut(timeout))) => {
                println!("server: hung up, {timeout}");
                return Ok(answered);
            }
            // A bad line (too long, not UTF-8, cut by the end of the
            // stream) or a reset: a typed error, stop serving.
            Err(e) => return Err(e.into()),
        };
        // Queued: a method call, no I/O unless the queue is full.
        lines.send(encoder.encode(answer(&line).into())?)?;
        answered += 1;
        // Answer the lines already read without waiting for the socket...
        while let Some(line) = lines.recv_buffered()? {
            lines.send(encoder.encode(answer(&line).into())?)?;
            answered += 1;
        }
        // ...then write all their answers at once.
        lines.flush()?;
    }
    lines.close()?; // what is left, then a FIN
    Ok(answered)
}

/// Accepts `connections` connections (all, if `None`), each served on a
/// thread of its own.
fn run_server(listener: TcpListener, connections: Option<u64>) -> Result<usize, BoxError> {
    let mut threads = Vec::new();
    for (n, socket) in listener.incoming().enumerate() {
        let socket = socket?;
        let peer = socket.peer_addr()?;
        threads.push(thread::spawn(move || {
            let result = serve(socket);
            match &result {
                Ok(answered) => println!("server: {peer} done, {answered} lines answered"),
                Err(e) => println!("server: {peer} dropped: {e}"),
            }
            result
        }));
        if connections == Some(n as u64 + 1) {
            break;
        }
    }
    let mut answered = 0;
    for thread in threads {
        answered += thread.join().map_err(|_| "a server thread panicked")??;
    }
    Ok(answered)
}

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

/// One client of the built-in run: sends the requests in random pieces,
/// then reads the answers and checks them.
fn client(addr: SocketAddr, seed: u64) -> Result<(), BoxError> {
    let mut socket = TcpStream::connect(addr)?;
    socket.set_nodelay(true)?; // so small pieces go out as they are
    socket.set_read_timeout(Some(IDLE))?;
    let wire: Vec<u8> = REQUESTS
        .iter()
        .flat_map(|r| r.bytes().chain(*b"\n"))
        .collect();
    let mut rng = XorShift(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut rest = &wire[..];
    while !rest.is_empty() {
        let n = 1 + rng.below(rest.len().min(12));
        socket.write_all(&rest[..n])?;
        rest = &rest[n..];
        thread::sleep(Duration::from_millis(1));
    }
    socket.shutdown(Shutdown::Write)?; // no more requests

    let mut answers = String::new();
    socket.read_to_string(&mut answers)?;
    let expected: String = REQUESTS
        .iter()
        .map(|r| answer(r.trim_end_matches('\r').as_bytes()) + "\n")
        .collect();
    if answers != expected {
        return Err(format!("client {seed}: got {answers:?}, expected {expected:?}").into());
    }
    Ok(())
}

fn main() -> Result<(), BoxError> {
    if let Some(addr) = std::env::args().nth(1) {
        let listener = TcpListener::bind(&addr)?;
        println!("serving on {}", listener.local_addr()?);
        run_server(listener, None)?;
        return Ok(());
    }

    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    println!("server on {addr}, {CLIENTS} clients");
    let server = thread::spawn(move || run_server(listener, Some(CLIENTS)));
    let clients: Vec<_> = (1..=CLIENTS)
        .map(|seed| thread::spawn(move || client(addr, seed)))
        .collect();
    for client in clients {
        client.join().map_err(|_| "a client panicked")??;
    }
    let answered = server.join().map_err(|_| "the server panicked")??;
    println!("every client got its {} answers right", REQUESTS.len());
    if answered != REQUESTS.len() * CLIENTS as usize {
        return Err(format!("the server answered {answered} lines").into());
    }
    Ok(())
}
