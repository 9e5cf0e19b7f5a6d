//! A request/response service over prost messages on tokio: each
//! connection's `Request`s are cut and decoded by a `FrameReader` over
//! `ProstCodec<Request>` (protobuf's varint-delimited stream), every
//! request is handled in a task of its own, and each task answers through
//! its clone of the connection's `WriteHandle` (`spawn_writer`), framing
//! its `Response` with `ProstCodec<Response>`. Requests that take longer
//! (`Delay`) are answered after quicker ones sent behind them, so answers
//! go out of order; the `id` in every message is what ties an answer to
//! its request. Bytes that are not a request end that connection (with
//! cleave's typed error, and prost's reason, logged); the others go on.
//!
//! ```text
//! cargo run --example rpc_server                 # on 127.0.0.1, a free port (printed)
//! cargo run --example rpc_server -- 7000         # on 127.0.0.1:7000
//! cargo run --example rpc_client -- ADDR 1000    # in another terminal
//! ```
//!
//! The messages are declared in Rust with prost's derives (no `.proto`
//! file, no build script):
//!
//! ```text
//!   Request  { id: u64, op: Sum { values: [i64] } | Echo(bytes) | Delay { ms: u32 } }
//!   Response { id: u64, outcome: Sum(i64) | Echo(bytes) | Delayed(u32) | Error(string) }
//! ```
//!
//! An echoed payload arrives without a copy (prost decodes `bytes` fields
//! as views of the connection's receive buffer) and is copied once, when
//! prost encodes the answer into its own buffer.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use cleave_proto::codec::message::{BadMessage, ProstCodec};
use cleave_proto::{Bytes, Encoder, WriteQueueConfig};
use cleave_tokio::{spawn_writer, ConnError, FrameReader, WriteHandle};
use futures_util::StreamExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Requests of one connection answered at once, at most.
const IN_FLIGHT: usize = 256;

/// Any error, for `main` and the client.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The longest `Delay` the server waits for; a longer one is answered
/// with an `Error`.
pub const MAX_DELAY_MS: u32 = 10_000;

/// A request: its id (the client's choice, echoed in the response) and
/// what to do.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Request {
    /// Ties the response to this request.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// What to do; a request without one is answered with an `Error`.
    #[prost(oneof = "Op", tags = "2, 3, 4")]
    pub op: Option<Op>,
}

/// What a request asks for.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Op {
    /// Add these numbers up (answered at once).
    #[prost(message, tag = "2")]
    Sum(Numbers),
    /// Send these bytes back (answered at once).
    #[prost(bytes = "bytes", tag = "3")]
    Echo(Bytes),
    /// Wait this long, then answer.
    #[prost(message, tag = "4")]
    Delay(Delay),
}

/// The numbers of a `Sum`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Numbers {
    /// Zigzag varints, packed.
    #[prost(sint64, repeated, tag = "1")]
    pub values: Vec<i64>,
}

/// How long a `Delay` waits.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Delay {
    /// Milliseconds, at most [`MAX_DELAY_MS`].
    #[prost(uint32, tag = "1")]
    pub ms: u32,
}

/// A response: the id of the request it answers, and the outcome.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Response {
    /// The request's id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// What came of it.
    #[prost(oneof = "Outcome", tags = "2, 3, 4, 5")]
    pub outcome: Option<Outcome>,
}

/// What came of a request.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Outcome {
    /// The sum of a `Sum`'s numbers.
    #[prost(sint64, tag = "2")]
    Sum(i64),
    /// An `Echo`'s bytes.
    #[prost(bytes = "bytes", tag = "3")]
    Echo(Bytes),
    /// A `Delay` waited this many milliseconds.
    #[prost(uint32, tag = "4")]
    Delayed(u32),
    /// The request could not be done (no op, a sum that overflows, a delay
    /// over the limit, an answer too long to send).
    #[prost(string, tag = "5")]
    Error(String),
}

/// Does what `request` asks (waiting, for a `Delay`) and makes its answer.
pub async fn handle(request: Request) -> Response {
    let outcome = match request.op {
        Some(Op::Sum(numbers)) => match numbers
            .values
            .iter()
            .try_fold(0i64, |sum, &value| sum.checked_add(value))
        {
            Some(sum) => Outcome::Sum(sum),
            None => Outcome::Error("the sum overflows an i64".into()),
        },
        Some(Op::Echo(payload)) => Outcome::Echo(payload),
        Some(Op::Delay(Delay { ms })) if ms <= MAX_DELAY_MS => {
            tokio::time::sleep(Duration::from_millis(ms.into())).await;
            Outcome::Delayed(ms)
        }
        Some(Op::Delay(Delay { ms })) => {
            Outcome::Error(format!("a delay of {ms} ms is over {MAX_DELAY_MS} ms"))
        }
        None => Outcome::Error("no op".into()),
    };
    Response {
        id: request.id,
        outcome: Some(outcome),
    }
}

/// One request's task: handles it, frames the answer and queues it on the
/// connection's shared writer.
async fn answer(request: Request, answers: WriteHandle) {
    let mut codec = ProstCodec::<Response>::new();
    let response = handle(request).await;
    let id = response.id;
    let frame = match codec.encode(response) {
        Ok(frame) => frame,
        // Over the frame limit (an echo of a request near it): say so
        // instead.
        Err(e) => {
            let refusal = Response {
                id,
                outcome: Some(Outcome::Error(format!("the answer cannot be sent: {e}"))),
            };
            match codec.encode(refusal) {
                Ok(frame) => frame,
                Err(_) => return,
            }
        }
    };
    // Waits while the queue is full (backpressure on the handlers). It
    // fails only once the connection is closed (after malformed input, or
    // a write error): nobody to answer then.
    let _ = answers.send(frame).await;
}

/// Why a connection was ended by the server.
#[derive(Debug)]
pub enum Failure {
    /// The peer sent bytes that are not a request: cleave's typed error
    /// (a bad varint length, a frame over the limit, a payload that is not
    /// a `Request`, a stream cut inside a frame) and, for a payload prost
    /// refused, that frame and prost's reason.
    Malformed {
        /// What the `FrameReader` reported.
        error: ConnError,
        /// The refused frame, if prost refused one.
        bad: Option<BadMessage>,
    },
    /// Writing the answers failed.
    Write(io::Error),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Malformed { error, bad: None } => {
                write!(f, "malformed input, connection closed: {error}")
            }
            Self::Malformed {
                error,
                bad: Some(bad),
            } => write!(f, "malformed input, connection closed: {error} ({bad})"),
            Self::Write(e) => write!(f, "writing answers failed: {e}"),
        }
    }
}

impl std::error::Error for Failure {}

/// Serves one connection until the peer ends its side (then the answers
/// still in flight go out, and the server closes too) or sends something
/// that is not a request (then what is queued goes out, and the server
/// closes at once). Returns how many requests it read.
///
/// # Errors
///
/// [`Failure::Malformed`] after bytes that are not a request,
/// [`Failure::Write`] if the answers could not be written.
pub async fn serve_connection(socket: TcpStream) -> Result<u64, Failure> {
    let (read, write) = socket.into_split();
    // Answers go through a spawned writer: every request task pushes
    // into the one queue through its clone of the handle.
    let (answers, writer) = spawn_writer(write, WriteQueueConfig::default());
    // A `FrameReader` drives a whole connection; the read half joined
    // with a sink is one that only reads.
    let half = tokio::io::join(read, tokio::io::sink());
    let mut requests = FrameReader::new(half, ProstCodec::<Request>::new());
    let mut count = 0u64;
    // At most `IN_FLIGHT` requests are answered at once: a client that
    // sends and does not read fills the queue, the handlers wait for room,
    // and then reading waits for a handler, so the socket pushes back.
    let in_flight = Arc::new(Semaphore::new(IN_FLIGHT));
    while let Some(request) = requests.next().await {
        match request {
            Ok(request) => {
                count += 1;
                let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
                    break;
                };
                let answers = answers.clone();
                tokio::spawn(async move {
                    answer(request, answers).await;
                    drop(permit);
                });
            }
            Err(error) => {
                // Errors are final: stop reading, and close. Answers queued
                // by now go out first; the tasks still running find the
                // queue closed.
                let bad = requests.decoder_mut().take_bad_message();
                let _ = answers.close().await;
                drop(answers);
                let _ = writer.await;
                return Err(Failure::Malformed { error, bad });
            }
        }
    }
    // The peer is done sending. The writer closes the connection once the
    // last handle is gone: when the last request in flight is answered.
    drop(answers);
    match writer.await {
        Ok(Ok(())) => Ok(count),
        Ok(Err(e)) => Err(Failure::Write(e)),
        Err(e) => Err(Failure::Write(io::Error::other(e))),
    }
}

/// Accepts connections on `listener` and serves each in a task of its
/// own, logging how each one ended. An accept error (out of descriptors,
/// say) is printed and accepting goes on after a pause.
///
/// # Errors
///
/// None: it serves until it is dropped.
pub async fn serve(listener: TcpListener) -> io::Result<()> {
    loop {
        let (socket, peer) = cleave_examples::accept::next(&listener, "rpc_server").await;
        tokio::spawn(async move {
            match serve_connection(socket).await {
                Ok(count) => println!("rpc_server: {peer}: {count} requests answered"),
                Err(failure) => eprintln!("rpc_server: {peer}: {failure}"),
            }
        });
    }
}

/// The port from the first argument, 0 (any free one) if none.
fn port(args: &[String]) -> Result<u16, BoxError> {
    match args {
        [] => Ok(0),
        [port] => Ok(port.parse()?),
        _ => Err("usage: rpc_server [PORT]".into()),
    }
}

async fn run(args: &[String]) -> Result<(), BoxError> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port(args)?));
    let listener = TcpListener::bind(addr).await?;
    println!(
        "rpc_server: listening on {} ; ^C to stop",
        listener.local_addr()?
    );
    serve(listener).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rpc_server: {e}");
            ExitCode::FAILURE
        }
    }
}
