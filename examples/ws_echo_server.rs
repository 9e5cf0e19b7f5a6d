//! A WebSocket echo server on tokio: cleave's `http1::Server` for the
//! opening handshake, then `websocket::WebSocket` on the same connection
//! (the bytes after the request stay in the buffer), each message sent
//! back as it came. Pings are answered and the close handshake done by
//! the protocol itself.
//!
//! ```text
//! cargo run --release --example ws_echo_server                      # on 127.0.0.1:9001
//! cargo run --release --example ws_echo_server --features deflate  # with permessage-deflate
//! cargo run --release --example ws_echo_server -- --listen 127.0.0.1:7000
//! ```
//!
//! `scripts/autobahn.sh` runs the Autobahn|Testsuite against it.

use std::net::SocketAddr;
use std::process::ExitCode;

use cleave_examples::websocket::{serve_tokio, BoxError};

/// Where it listens unless told.
const DEFAULT_LISTEN: &str = "127.0.0.1:9001";

/// The address from `--listen ADDR`, or the default.
fn listen_addr(args: &[String]) -> Result<Option<SocketAddr>, BoxError> {
    let mut listen = DEFAULT_LISTEN.parse()?;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => listen = args.next().ok_or("--listen ADDR")?.parse()?,
            "--help" | "-h" => {
                println!("ws_echo_server [--listen ADDR]   (default {DEFAULT_LISTEN})");
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
        "WebSocket echo on ws://{}/ ; ^C to stop",
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
            eprintln!("ws_echo_server: {e}");
            ExitCode::FAILURE
        }
    }
}
