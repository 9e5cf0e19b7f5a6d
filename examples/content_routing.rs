//! Content routing over real TCP with tokio: an accept loop gives each
//! connection a `SessionReader` (a `Connection` over `Session::tunnel`,
//! PROXY header optional); on `Routed` it connects to the chosen backend,
//! on `Tunnel(tail)` it splices client and backend with
//! `cleave_tokio::tunnel`.
//!
//! ```text
//! cargo run --example content_routing
//! ```
//!
//! The backends are small in-process servers that count what they receive
//! and say so. The clients replay first flights captured from real
//! programs (openssl, curl, Python, ssh, haproxy; see
//! core/tests/fixtures/README.md), then close their sending side; each
//! prints where its connection went and what the backend saw. No TLS is
//! terminated: the ClientHellos are only read for their SNI.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use cleave_proto::route::{Facts, HostPattern, Match, Router};
use cleave_proto::{Event, ProxyMode, Session, SessionConfig};
use cleave_tokio::{tunnel, SessionReader};
use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The captured first flights (see core/tests/fixtures/README.md).
const FLIGHTS: [(&str, &[u8]); 9] = [
    (
        "openssl s_client",
        include_bytes!("../core/tests/fixtures/tls_openssl_sni_alpn.bin"),
    ),
    (
        "openssl, split records",
        include_bytes!("../core/tests/fixtures/tls_openssl_split_records.bin"),
    ),
    (
        "python ssl",
        include_bytes!("../core/tests/fixtures/tls_python.bin"),
    ),
    (
        "openssl, no SNI",
        include_bytes!("../core/tests/fixtures/tls_openssl_no_sni.bin"),
    ),
    (
        "curl http",
        include_bytes!("../core/tests/fixtures/http_curl_get.bin"),
    ),
    (
        "curl websocket",
        include_bytes!("../core/tests/fixtures/http_curl_upgrade.bin"),
    ),
    (
        "ssh",
        include_bytes!("../core/tests/fixtures/ssh_openssh.bin"),
    ),
    (
        "haproxy v1 + payload",
        include_bytes!("../core/tests/fixtures/proxy_v1_tcp4.bin"),
    ),
    (
        "haproxy v2 TLVs + payload",
        include_bytes!("../core/tests/fixtures/proxy_v2_tlvs.bin"),
    ),
];

/// The backends, by name.
const BACKENDS: [&str; 6] = ["tls-web", "tls-api", "websocket", "http", "ssh", "default"];

fn router() -> Router<&'static str> {
    Router::new("default")
        .rule(
            Match::TlsServerName(HostPattern::new("*.example.org")),
            "tls-api",
        )
        .rule(
            Match::TlsServerName(HostPattern::new("*.example.com")),
            "tls-web",
        )
        .rule(
            Match::TlsServerName(HostPattern::new("example.com")),
            "tls-web",
        )
        .rule(Match::HttpUpgrade(Some("websocket".into())), "websocket")
        .rule(Match::HttpHost(HostPattern::new("example.com")), "http")
        .rule(Match::Prefix("SSH-".into()), "ssh")
}

/// A backend: reads until the client is done, then says what it got.
async fn backend(name: &'static str, listener: TcpListener) {
    loop {
        let Ok((mut socket, _)) = listener.accept().await else {
            return;
        };
        tokio::spawn(async move {
            let mut data = Vec::new();
            if socket.read_to_end(&mut data).await.is_ok() {
                let reply = format!("{name} got {} bytes: {}", data.len(), preview(&data));
                let _ = socket.write_all(reply.as_bytes()).await;
                let _ = socket.shutdown().await;
            }
        });
    }
}

/// The start of what a backend received: text if it is text, else hex.
fn preview(data: &[u8]) -> String {
    let head = &data[..data.len().min(24)];
    let line = head
        .split(|&b| b == b'\r' || b == b'\n')
        .next()
        .unwrap_or(head);
    if !line.is_empty() && line.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        format!("{:?}...", String::from_utf8_lossy(line))
    } else {
        let hex: Vec<_> = head[..head.len().min(6)]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("binary {}...", hex.join(" "))
    }
}

/// One line about what the router learned.
fn describe(facts: &Facts) -> String {
    match facts {
        Facts::Tls(hello) => format!(
            "TLS ClientHello, SNI {}",
            hello.server_name.as_deref().unwrap_or("(none)")
        ),
        Facts::Http(head) => format!(
            "HTTP {} {}, Host {}{}",
            head.method(),
            head.path(),
            head.host().unwrap_or("(none)"),
            if head.is_upgrade() { ", upgrade" } else { "" }
        ),
        Facts::Prefix => "a known prefix".into(),
        _ => "nothing known".into(),
    }
}

/// The proxy's side of one connection: route, connect, tunnel.
async fn proxy(
    client: TcpStream,
    backends: Arc<HashMap<&'static str, SocketAddr>>,
) -> Result<(), BoxError> {
    let config = SessionConfig::default().proxy(ProxyMode::Optional);
    let mut events = SessionReader::new(client, Session::tunnel(router(), config));
    let mut backend = None;
    while let Some(event) = events.next().await {
        match event? {
            Event::Proxy { header, len } => println!(
                "  proxy: PROXY v{} header ({len} bytes), client really {}",
                header.version,
                header.source().map_or("unknown".into(), |s| s.to_string())
            ),
            Event::Routed(decision) => {
                println!(
                    "  proxy: {} => {} ({:?})",
                    describe(&decision.facts),
                    decision.target,
                    decision.reason
                );
                let addr = backends.get(decision.target).ok_or("no such backend")?;
                backend = Some(TcpStream::connect(addr).await?);
            }
            Event::Tunnel(tail) => {
                // The bytes read so far (all but a PROXY header) go first,
                // then the two sockets are spliced until both sides finish.
                let (mut client, _conn) = events.into_parts();
                let mut backend = backend.ok_or("tunnel before routing")?;
                tunnel(&mut client, &mut backend, tail).await?;
                return Ok(());
            }
            _ => {}
        }
    }
    Ok(())
}

/// Replays one first flight and returns what the backend answered.
async fn replay(addr: SocketAddr, flight: &[u8]) -> Result<String, BoxError> {
    let mut socket = TcpStream::connect(addr).await?;
    socket.write_all(flight).await?;
    socket.shutdown().await?; // nothing more: the backend answers at the end
    let mut reply = String::new();
    socket.read_to_string(&mut reply).await?;
    Ok(reply)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    // The backends, each on its own ephemeral port.
    let mut backends = HashMap::new();
    for name in BACKENDS {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        backends.insert(name, listener.local_addr()?);
        tokio::spawn(backend(name, listener));
    }
    let backends = Arc::new(backends);

    // The proxy's accept loop.
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    println!("proxy on {addr}");
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let backends = backends.clone();
            tokio::spawn(async move {
                if let Err(e) = proxy(client, backends).await {
                    println!("  proxy: connection failed: {e}");
                }
            });
        }
    });

    // The clients, one after the other so the output reads in order.
    let mut failures = 0;
    for (client, flight) in FLIGHTS {
        println!("{client} ({} bytes)", flight.len());
        match tokio::time::timeout(Duration::from_secs(5), replay(addr, flight)).await {
            Ok(Ok(reply)) => println!("  client: backend says: {reply}"),
            Ok(Err(e)) => {
                failures += 1;
                println!("  client: failed: {e}");
            }
            Err(_) => {
                failures += 1;
                println!("  client: timed out");
            }
        }
    }
    if failures > 0 {
        return Err(format!("{failures} connections failed").into());
    }
    Ok(())
}
