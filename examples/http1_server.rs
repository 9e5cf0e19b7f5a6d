//! An HTTP/1.1 server on tokio: a `cleave_tokio::Connection` over cleave's
//! `http1::Server` per connection, answering with the shared application
//! of `cleave_examples::http1` (`GET /`, `GET /chunked`, `POST /echo`,
//! `GET /host`, `HEAD`, else 404).
//!
//! ```text
//! cargo run --example http1_server                               # on 127.0.0.1:8080
//! cargo run --example http1_server -- --listen 127.0.0.1:7000
//! curl -i http://127.0.0.1:8080/chunked
//! curl --data-binary hello http://127.0.0.1:8080/echo
//! ```
//!
//! Each connection is one task. The answers to the requests that arrived
//! together (pipelined) are queued in order, then written with one flush.
//! A request the codec refuses (request smuggling, a limit) gets its
//! status with `Connection: close`, and the connection closes.

use std::net::SocketAddr;
use std::process::ExitCode;

use cleave_examples::http1::{serve_tokio, BoxError};

/// Where it listens unless told.
const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// The address from `--listen ADDR`, or the default.
fn listen_addr(args: &[String]) -> Result<Option<SocketAddr>, BoxError> {
    let mut listen = DEFAULT_LISTEN.parse()?;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => listen = args.next().ok_or("--listen ADDR")?.parse()?,
            "--help" | "-h" => {
                println!("http1_server [--listen ADDR]   (default {DEFAULT_LISTEN})");
                return Ok(None);
            }
            other => return Err(format!("unknown argument {other} (see --help)").into()),
        }
    }
    Ok(Some(listen))
}

async fn run(args: &[String]) -> Result<(), BoxError> {
    let Some(addr) = listen_addr(args)? else {
        return Ok(());
    };
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!(
        "serving HTTP/1.1 on http://{}/ ; ^C to stop",
        listener.local_addr()?
    );
    serve_tokio(listener).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("http1_server: {e}");
            ExitCode::FAILURE
        }
    }
}
