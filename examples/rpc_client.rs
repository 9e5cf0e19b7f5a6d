//! The client of `rpc_server`: it pipelines N requests (ids 1..=N, a mix
//! of `Sum`, `Echo` and `Delay`) on one connection without waiting for
//! any answer, reads the answers as they come, matches each to its request
//! by id, and checks it (the sum right, the echo equal, the delay the one
//! asked for). It reports how many answers came back out of order, and
//! fails (a non-zero exit) on any wrong answer, an id answered twice or
//! never asked, or an id not answered.
//!
//! An answer is out of order when it arrives after the answer to a later
//! request. The server handles each request in a task of its own on a
//! multi-threaded runtime, so even answers that take no time come back in
//! an order of their own; and a `Delay` waits while the quick requests
//! sent right behind it are answered.
//!
//! ```text
//! cargo run --example rpc_server                  # prints its address
//! cargo run --example rpc_client -- ADDR 1000     # 1000 requests to it
//! cargo run --example rpc_client                  # its own server, in-process on port 0
//! ```
//!
//! Without an address the client starts the server in this process, on
//! 127.0.0.1 and a free port, and sends it COUNT requests (1000 unless
//! told: `cargo run --example rpc_client -- - 5000` sends 5000): one
//! command that runs both ends, for CI.
//!
//! Requests go out through a spawned writer (`spawn_writer`), each one a
//! `ProstCodec<Request>` frame, while this task reads the answers with a
//! `FrameReader` over `ProstCodec<Response>`. After the last request the
//! client shuts its side down; the server answers what is in flight and
//! closes, so the end of the stream says every answer is in.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use cleave_proto::codec::message::ProstCodec;
use cleave_proto::{Encoder, WriteQueueConfig};
use cleave_tokio::{spawn_writer, FrameReader};
use futures_util::StreamExt;
use tokio::net::{TcpListener, TcpStream};

// The messages and the server, for the in-process mode (the server's
// `main` is its own example's).
#[allow(dead_code)]
#[path = "rpc_server.rs"]
pub mod rpc_server;

use rpc_server::{BoxError, Delay, Numbers, Op, Outcome, Request, Response};

/// Requests sent unless told.
const DEFAULT_COUNT: u64 = 1000;

/// How long the whole exchange may take before the client gives up.
const GIVE_UP: Duration = Duration::from_secs(60);

/// Request `id` of the mix: every tenth (from 1) a `Delay` of 10 to 50 ms
/// (request 1 waits 50), the other odd ones an `Echo` of up to 700
/// bytes, the even ones a `Sum` of up to 16 numbers (none for some).
pub fn request(id: u64) -> Request {
    let op = if id % 10 == 1 {
        Op::Delay(Delay {
            ms: 50 - 10 * ((id / 10) % 5) as u32,
        })
    } else if id % 2 == 1 {
        let len = (id * 37 % 701) as usize;
        Op::Echo((0..len).map(|i| (id as usize + i) as u8).collect())
    } else {
        let signed = id as i64;
        let values = (0..signed % 17)
            .map(|k| (signed * 1_000_003 + k * 7919) * if k % 2 == 0 { 1 } else { -1 })
            .collect();
        Op::Sum(Numbers { values })
    };
    Request { id, op: Some(op) }
}

/// Whether `outcome` is the right answer to `request`: the exact sum (an
/// `Error` if it does not fit an i64), the same bytes, the delay asked
/// for, an `Error` for a request without an op.
pub fn verdict(request: &Request, outcome: Option<&Outcome>) -> Result<(), String> {
    let right = match (&request.op, outcome) {
        (Some(Op::Sum(numbers)), Some(Outcome::Sum(sum))) => {
            i128::from(*sum) == numbers.values.iter().map(|&v| i128::from(v)).sum::<i128>()
        }
        (Some(Op::Sum(numbers)), Some(Outcome::Error(_))) => {
            let exact: i128 = numbers.values.iter().map(|&v| i128::from(v)).sum();
            i64::try_from(exact).is_err()
        }
        (Some(Op::Echo(sent)), Some(Outcome::Echo(back))) => sent == back,
        (Some(Op::Delay(Delay { ms })), Some(Outcome::Delayed(waited))) => ms == waited,
        (None, Some(Outcome::Error(_))) => true,
        _ => false,
    };
    if right {
        Ok(())
    } else {
        Err(format!(
            "request {}: {:?} answered with {outcome:?}",
            request.id, request.op
        ))
    }
}

/// What came back for a set of requests.
#[derive(Debug, Default)]
pub struct Report {
    /// Requests answered (once, rightly or not).
    pub answered: usize,
    /// Answers that arrived after the answer to a later request.
    pub out_of_order: usize,
    /// Wrong answers, answers to ids never asked or answered before.
    pub wrong: Vec<String>,
    /// Ids never answered, in order.
    pub missing: Vec<u64>,
}

impl Report {
    /// Every request answered once, rightly.
    pub fn is_ok(&self) -> bool {
        self.wrong.is_empty() && self.missing.is_empty()
    }
}

/// Matches the answers (in the order they arrived) to the requests by id
/// and checks each.
pub fn check(requests: &[Request], answers: &[Response]) -> Report {
    let mut pending: HashMap<u64, &Request> = requests.iter().map(|r| (r.id, r)).collect();
    let mut report = Report::default();
    let mut latest = None;
    for answer in answers {
        match pending.remove(&answer.id) {
            Some(request) => {
                report.answered += 1;
                if let Err(wrong) = verdict(request, answer.outcome.as_ref()) {
                    report.wrong.push(wrong);
                }
            }
            None => report
                .wrong
                .push(format!("id {}: never asked, or answered twice", answer.id)),
        }
        // Ids go up in the order the requests were sent: an answer with a
        // lower id than one already in came back out of order.
        if latest.is_some_and(|latest| answer.id < latest) {
            report.out_of_order += 1;
        }
        latest = latest.max(Some(answer.id));
    }
    report.missing = pending.into_keys().collect();
    report.missing.sort_unstable();
    report
}

/// Sends `requests` on `socket`, all of them without waiting, shuts the
/// sending side down, and returns the answers in the order they arrived,
/// up to the server's end of the stream.
///
/// # Errors
///
/// Writing or reading failed, or an answer is not a valid `Response`.
pub async fn exchange(
    socket: TcpStream,
    requests: Vec<Request>,
) -> Result<Vec<Response>, BoxError> {
    let expected = requests.len();
    let (read, write) = socket.into_split();
    let (handle, writer) = spawn_writer(write, WriteQueueConfig::default());
    let sending = tokio::spawn(async move {
        let mut codec = ProstCodec::<Request>::new();
        for request in requests {
            let frame = codec.encode(request)?;
            // Waits only while the queue is full.
            handle.send(frame).await.map_err(|r| r.into_parts().0)?;
        }
        // Everything queued goes out, then a FIN: the server's signal
        // that no more requests come.
        handle.close().await?;
        Ok::<_, BoxError>(())
    });

    let half = tokio::io::join(read, tokio::io::sink());
    let mut responses = FrameReader::new(half, ProstCodec::<Response>::new());
    let mut answers = Vec::with_capacity(expected);
    while let Some(response) = responses.next().await {
        answers.push(response?);
    }
    sending.await??;
    writer.await??;
    Ok(answers)
}

/// Requests 1..=`count` to `addr` (or to a server started here when
/// `addr` is `None`), checked.
///
/// # Errors
///
/// The server could not be reached or started, or the exchange failed.
pub async fn run(addr: Option<SocketAddr>, count: u64) -> Result<Report, BoxError> {
    let addr = match addr {
        Some(addr) => addr,
        None => {
            let listener = TcpListener::bind("127.0.0.1:0").await?;
            let addr = listener.local_addr()?;
            println!("rpc_client: server started in-process on {addr}");
            tokio::spawn(rpc_server::serve(listener));
            addr
        }
    };
    let requests: Vec<Request> = (1..=count).map(request).collect();
    let socket = TcpStream::connect(addr).await?;
    let answers = exchange(socket, requests.clone()).await?;
    Ok(check(&requests, &answers))
}

/// `[ADDR [COUNT]]`: no address (or `-`) starts the server here.
fn parse(args: &[String]) -> Result<(Option<SocketAddr>, u64), BoxError> {
    let addr = match args.first().map(String::as_str) {
        None | Some("-") => None,
        Some(addr) => Some(addr.parse()?),
    };
    let count = match args.get(1) {
        None => DEFAULT_COUNT,
        Some(count) => count.parse()?,
    };
    if args.len() > 2 {
        return Err("usage: rpc_client [ADDR|-] [COUNT]".into());
    }
    Ok((addr, count))
}

async fn main_result(args: &[String]) -> Result<Report, BoxError> {
    let (addr, count) = parse(args)?;
    let report = tokio::time::timeout(GIVE_UP, run(addr, count)).await??;
    println!(
        "rpc_client: {count} requests, {} answered, {} out of order",
        report.answered, report.out_of_order
    );
    Ok(report)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match main_result(&args).await {
        Ok(report) if report.is_ok() => {
            println!("rpc_client: every answer right");
            ExitCode::SUCCESS
        }
        Ok(report) => {
            for wrong in report.wrong.iter().take(10) {
                eprintln!("rpc_client: wrong: {wrong}");
            }
            if !report.missing.is_empty() {
                eprintln!(
                    "rpc_client: {} ids not answered, the first {:?}",
                    report.missing.len(),
                    &report.missing[..report.missing.len().min(10)]
                );
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("rpc_client: {e}");
            ExitCode::FAILURE
        }
    }
}
