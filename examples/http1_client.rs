//! An HTTP/1.1 client on tokio: a `cleave_tokio::Connection` over cleave's
//! `http1::Client`, sending every request on one connection at once
//! (pipelined), then printing each response's status and body in order.
//!
//! ```text
//! cargo run --example http1_server &
//! cargo run --example http1_client -- http://127.0.0.1:8080/ http://127.0.0.1:8080/chunked
//! cargo run --example http1_client -- --post 'some data' http://127.0.0.1:8080/echo
//! ```
//!
//! Only `http://IP:PORT/path` URLs, all to the same server: one
//! connection carries them all.

use std::net::SocketAddr;
use std::process::ExitCode;

use cleave_examples::http1::{fetch, Ask, BoxError};

/// What the command line asks for.
#[derive(Debug, Default)]
struct Args {
    /// `--post DATA`: POST it to every URL instead of a GET.
    post: Option<String>,
    urls: Vec<String>,
}

fn parse_args(args: &[String]) -> Result<Option<Args>, BoxError> {
    let mut parsed = Args::default();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--post" => parsed.post = Some(args.next().ok_or("--post DATA")?.clone()),
            "--help" | "-h" => return Ok(None),
            url => parsed.urls.push(url.to_owned()),
        }
    }
    if parsed.urls.is_empty() {
        return Err("no URL (see --help)".into());
    }
    Ok(Some(parsed))
}

/// `http://IP:PORT/path` as its authority (for Host), address and
/// origin-form target.
fn split_url(url: &str) -> Result<(&str, SocketAddr, &str), BoxError> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: only http:// URLs"))?;
    let (authority, target) = match rest.find('/') {
        Some(slash) => rest.split_at(slash),
        None => (rest, "/"),
    };
    let addr = authority
        .parse()
        .map_err(|_| format!("{url}: the host must be IP:PORT"))?;
    Ok((authority, addr, target))
}

async fn run(args: &[String]) -> Result<(), BoxError> {
    let Some(args) = parse_args(args)? else {
        println!("http1_client [--post DATA] http://IP:PORT/path [URL...]");
        return Ok(());
    };
    let mut targets = Vec::with_capacity(args.urls.len());
    let mut server = None;
    for url in &args.urls {
        let (authority, addr, target) = split_url(url)?;
        if server.is_some_and(|(_, a)| a != addr) {
            return Err("all URLs must name the same server (one connection)".into());
        }
        server = Some((authority, addr));
        targets.push(target);
    }
    let (host, addr) = server.ok_or("no URL")?;
    let asks: Vec<Ask<'_>> = targets
        .iter()
        .map(|target| match &args.post {
            Some(data) => Ask::post(target, data.as_bytes()),
            None => Ask::get(target),
        })
        .collect();
    let answers = fetch(addr, host, &asks).await?;
    for (ask, answer) in asks.iter().zip(&answers) {
        println!("{} {} -> {}", ask.method, ask.target, answer.status);
        let body = String::from_utf8_lossy(&answer.body);
        print!("{body}");
        if !body.is_empty() && !body.ends_with('\n') {
            println!();
        }
        for (name, value) in &answer.trailers {
            println!("(trailer) {name}: {}", String::from_utf8_lossy(value));
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("http1_client: {e}");
            ExitCode::FAILURE
        }
    }
}
