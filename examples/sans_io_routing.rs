//! Content routing without I/O: first flights captured from real clients
//! (openssl, curl, Python, ssh, and haproxy's PROXY headers in front of a
//! client) are fed by hand, in random pieces, into a `Conn` running a
//! `Session` and its `Router`; the program prints what each connection was
//! recognised as and where it was sent. Last, a client that sends nothing:
//! the connection knows its deadline before the first byte, and the
//! router sends it to the fallback by the clock. (The same session, driven
//! by tokio, is the `demo` proxy.)
//!
//! ```text
//! cargo run --example sans_io_routing            # seed 1
//! cargo run --example sans_io_routing -- 7       # other pieces, same decisions
//! ```

use std::time::Duration;

use cleave_proto::conn::Conn;
use cleave_proto::route::{Facts, HostPattern, Match, Router};
use cleave_proto::{Event, ProxyMode, Session, SessionConfig};

/// The captured first flights (see core/tests/fixtures/README.md).
const FLIGHTS: [(&str, &[u8]); 8] = [
    (
        "openssl s_client",
        include_bytes!("../core/tests/fixtures/tls_openssl_sni_alpn.bin"),
    ),
    (
        "curl https",
        include_bytes!("../core/tests/fixtures/tls_curl.bin"),
    ),
    (
        "python ssl",
        include_bytes!("../core/tests/fixtures/tls_python.bin"),
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
        "haproxy v1 + client",
        include_bytes!("../core/tests/fixtures/proxy_v1_tcp4.bin"),
    ),
    (
        "haproxy v2 + TLVs",
        include_bytes!("../core/tests/fixtures/proxy_v2_tlvs.bin"),
    ),
];

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

fn router() -> Router<&'static str> {
    Router::new("default-backend")
        .rule(
            Match::TlsServerName(HostPattern::new("*.example.org")),
            "tls: api pool",
        )
        .rule(
            Match::TlsServerName(HostPattern::new("example.com")),
            "tls: web pool",
        )
        .rule(
            Match::HttpUpgrade(Some("websocket".into())),
            "websocket gateway",
        )
        .rule(
            Match::HttpHost(HostPattern::new("example.com")),
            "http: web pool",
        )
        .rule(Match::Prefix("SSH-".into()), "ssh bastion")
}

fn main() -> Result<(), cleave_proto::Error> {
    let seed = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1u64);
    let mut rng = XorShift(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let config = SessionConfig::default().proxy(ProxyMode::Optional);

    for (client, flight) in FLIGHTS {
        // The driver's clock: any monotonic reading; here, 1 ms a piece.
        let mut now = Duration::ZERO;
        let mut conn = Conn::new(Session::tunnel(router(), config), now);
        let (mut pieces, mut tunnelled, mut proxy_len) = (0, 0, 0);
        let mut rest = flight;
        let mut notes = Vec::new();
        while !rest.is_empty() {
            let n = 1 + rng.below(rest.len().min(96));
            now += Duration::from_millis(1);
            conn.feed(&rest[..n], now)?;
            rest = &rest[n..];
            pieces += 1;
            while let Some(event) = conn.poll_event()? {
                match event {
                    Event::Proxy { header, len } => {
                        proxy_len = len;
                        notes.push(format!(
                            "PROXY v{} from {}",
                            header.version,
                            header.source().map_or("?".into(), |s| s.to_string())
                        ));
                        if let Some(authority) = header.authority {
                            notes.push(format!("authority {authority}"));
                        }
                    }
                    Event::Routed(decision) => {
                        let seen = match &decision.facts {
                            Facts::Tls(hello) => format!(
                                "TLS, SNI {:?}, ALPN {:?}",
                                hello.server_name.as_deref().unwrap_or("-"),
                                hello
                                    .alpn
                                    .iter()
                                    .map(|p| String::from_utf8_lossy(p).into_owned())
                                    .collect::<Vec<_>>()
                            ),
                            Facts::Http(head) => format!(
                                "HTTP {} {} Host {}",
                                head.method(),
                                head.path(),
                                head.host().unwrap_or("-")
                            ),
                            Facts::Prefix => "a known prefix".into(),
                            _ => "nothing known".into(),
                        };
                        notes.push(seen);
                        notes.push(format!("=> {} ({:?})", decision.target, decision.reason));
                    }
                    Event::Tunnel(bytes) => tunnelled += bytes.len(),
                    _ => {}
                }
            }
        }
        println!("{client:<22} {} bytes in {pieces} pieces", flight.len());
        for note in notes {
            println!("    {note}");
        }
        println!(
            "    {proxy_len} bytes of PROXY header taken, {tunnelled} tunnelled to the backend"
        );
        assert_eq!(
            proxy_len + tunnelled,
            flight.len(),
            "every byte accounted for"
        );
    }

    // A client that connects and sends nothing: the deadline is known at
    // once, and at it the router decides without a byte. (Behind a PROXY
    // header the router starts after the header: there, the connection's
    // own opening timeout, `Timeouts::opening`, ends a silent client.)
    let start = Duration::from_secs(1000);
    let mut conn = Conn::new(Session::tunnel(router(), SessionConfig::default()), start);
    let deadline = conn.poll_timeout().expect("the router's inspect delay");
    println!(
        "{:<22} 0 bytes; routing deadline {:?} after the start",
        "silent client",
        deadline - start
    );
    conn.handle_timeout(deadline);
    while let Some(event) = conn.poll_event()? {
        if let Event::Routed(decision) = event {
            println!("    => {} ({:?})", decision.target, decision.reason);
        }
    }
    Ok(())
}
