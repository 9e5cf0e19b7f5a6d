//! An HTTP/1.1 server on one thread's `mio::Poll`: a `cleave_mio::Conn`
//! over cleave's `http1::Server` per connection, answering with the same
//! application as `http1_server` (see `cleave_examples::http1`).
//!
//! ```text
//! cargo run --example http1_mio_server                               # on 127.0.0.1:8080
//! cargo run --example http1_mio_server -- --listen 127.0.0.1:7000
//! curl -i http://127.0.0.1:8080/
//! ```
//!
//! The answers to the requests one readiness event brought are queued in
//! order and written at once; a connection asks for `WRITABLE` only while
//! answers wait for the socket, and stops reading while its write queue
//! is full (a client that pipelines without reading holds no more than
//! that).

use std::net::SocketAddr;
use std::process::ExitCode;

use cleave_examples::http1::{BoxError, MioServer};

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
                println!("http1_mio_server [--listen ADDR]   (default {DEFAULT_LISTEN})");
                return Ok(None);
            }
            other => return Err(format!("unknown argument {other} (see --help)").into()),
        }
    }
    Ok(Some(listen))
}

fn run(args: &[String]) -> Result<(), BoxError> {
    let Some(addr) = listen_addr(args)? else {
        return Ok(());
    };
    // The stop handle is for a server embedded in a program; this one runs
    // until it is killed.
    let (server, _stop) = MioServer::bind(addr)?;
    println!(
        "serving HTTP/1.1 on http://{}/ (one thread); ^C to stop",
        server.local_addr()?
    );
    server.run()?;
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("http1_mio_server: {e}");
            ExitCode::FAILURE
        }
    }
}
