//! The WebSocket echo server on cleave-mio: one thread, one `mio::Poll`,
//! every connection a `cleave_mio::Conn` whose protocol is first the
//! opening handshake (`http1::Server`), then `websocket::WebSocket` on the
//! same buffer: the echo application of `cleave_examples::websocket`.
//!
//! ```text
//! cargo run --release --example ws_echo_mio_server                     # on 127.0.0.1:9002
//! cargo run --release --example ws_echo_mio_server -- --listen 127.0.0.1:7000
//! AUTOBAHN_SERVER=ws_echo_mio_server scripts/autobahn.sh server
//! ```

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;

use cleave_examples::websocket::{serve_mio, BoxError};

/// Where it listens unless told.
const DEFAULT_LISTEN: &str = "127.0.0.1:9002";

fn run(args: &[String]) -> Result<(), BoxError> {
    let mut listen = DEFAULT_LISTEN.to_owned();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => listen = args.next().ok_or("--listen ADDR")?.clone(),
            "--help" | "-h" => {
                println!("ws_echo_mio_server [--listen ADDR]   (default {DEFAULT_LISTEN})");
                return Ok(());
            }
            other => return Err(format!("unknown argument {other} (see --help)").into()),
        }
    }
    let listener = std::net::TcpListener::bind(&listen)?;
    println!(
        "WebSocket echo (mio) on ws://{}/ ; ^C to stop",
        listener.local_addr()?
    );
    // Never stopped: ^C ends the process.
    let stop = AtomicBool::new(false);
    serve_mio(listener, &stop, drop)?;
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ws_echo_mio_server: {e}");
            ExitCode::FAILURE
        }
    }
}
