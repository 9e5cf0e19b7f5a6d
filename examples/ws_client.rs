//! A WebSocket client on tokio: the handshake on cleave's `http1::Client`,
//! then `websocket::WebSocket` in the client role (masks from the
//! operating system).
//!
//! ```text
//! cargo run --example ws_client -- --message hello       # to the echo server on 127.0.0.1:9001
//! cargo run --release --example ws_client -- --autobahn  # every case of a wstest fuzzingserver
//! ```
//!
//! With `--autobahn` it asks the Autobahn|Testsuite fuzzingserver for its
//! case count, echoes every case, then asks it to write its reports
//! (`scripts/autobahn.sh client`).

use std::process::ExitCode;

use cleave_examples::websocket::{connect, echo_until_closed, BoxError};
use cleave_proto::websocket::{close_code, Kind, WsEvent};
use cleave_proto::Bytes;
use futures_util::StreamExt;

/// What to do.
struct Args {
    addr: String,
    message: String,
    autobahn: bool,
}

fn parse(args: &[String]) -> Result<Option<Args>, BoxError> {
    let mut parsed = Args {
        addr: "127.0.0.1:9001".into(),
        message: "hello".into(),
        autobahn: false,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--addr" => parsed.addr = args.next().ok_or("--addr HOST:PORT")?.clone(),
            "--message" => parsed.message = args.next().ok_or("--message TEXT")?.clone(),
            "--autobahn" => parsed.autobahn = true,
            "--help" | "-h" => {
                println!("ws_client [--addr HOST:PORT] [--message TEXT | --autobahn]");
                return Ok(None);
            }
            other => return Err(format!("unknown argument {other} (see --help)").into()),
        }
    }
    Ok(Some(parsed))
}

/// Sends one message and prints the answer.
async fn once(addr: &str, message: &str) -> Result<(), BoxError> {
    let mut conn = connect(addr, addr, "/").await?;
    let frame = conn
        .conn_mut()
        .protocol_mut()
        .message(Kind::Text, Bytes::from(message.to_owned()))?;
    conn.send(frame).await?;
    conn.flush().await?;
    if let Some(event) = conn.next().await {
        println!("{:?}", event?);
    }
    let close = conn
        .conn_mut()
        .protocol_mut()
        .close(close_code::NORMAL, "done")?;
    conn.send(close).await?;
    conn.flush().await?;
    while let Some(event) = conn.next().await {
        if let WsEvent::Close(frame) = event? {
            println!("closed: {:?}", frame.code);
        }
    }
    Ok(())
}

/// Autobahn's client run: the case count, every case, the reports.
async fn autobahn(addr: &str) -> Result<(), BoxError> {
    let mut conn = connect(addr, addr, "/getCaseCount").await?;
    let mut count = 0;
    while let Some(event) = conn.next().await {
        if let WsEvent::Text(text) = event? {
            count = std::str::from_utf8(&text)?.trim().parse()?;
        }
    }
    for case in 1..=count {
        let target = format!("/runCase?case={case}&agent=cleave");
        match connect(addr, addr, &target).await {
            Ok(mut conn) => {
                let _ = echo_until_closed(&mut conn).await;
            }
            Err(e) => eprintln!("case {case}: {e}"),
        }
    }
    let mut conn = connect(addr, addr, "/updateReports?agent=cleave").await?;
    while let Some(event) = conn.next().await {
        event?;
    }
    println!("{count} cases run");
    Ok(())
}

async fn run(args: &[String]) -> Result<(), BoxError> {
    let Some(args) = parse(args)? else {
        return Ok(());
    };
    if args.autobahn {
        autobahn(&args.addr).await
    } else {
        once(&args.addr, &args.message).await
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ws_client: {e}");
            ExitCode::FAILURE
        }
    }
}
