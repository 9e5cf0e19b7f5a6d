//! The demo: a content-routing TCP proxy built from cleave's `Session` and
//! `Router` and cleave-tokio's `SessionReader` (a `Connection` over the
//! session, with the connection's timeouts) and `splice_tunnel` (the
//! tunnel moved by the kernel with splice(2) on Linux, with the tunnel idle
//! timeout), driven by 200 clients (by default), 32 at a time, with a
//! table of what happened.
//!
//! ```text
//! cargo run --release --example demo                       # built-in run
//! cargo run --release --example demo -- --connections 1000
//! cargo run --release --example demo -- --listen 127.0.0.1:8443 \
//!     --route 'sni:*.example.com=127.0.0.1:9001' \
//!     --route host:example.com=127.0.0.1:9002 \
//!     --route 'prefix:LINE =127.0.0.1:9003' --fallback 127.0.0.1:9004 \
//!     --frame-timeout 2s --idle-timeout 60s --tunnel-idle-timeout 300s
//! ```
//!
//! The built-in run starts, in one process on 127.0.0.1 ephemeral ports,
//! the proxy and four backends:
//!
//! - `tls`: chosen by the ClientHello's SNI (`*.example.com` or
//!   `example.com`). It counts bytes and does not terminate TLS: the
//!   clients replay ClientHellos captured from openssl and curl, then send
//!   a payload, and the backend says how many bytes it got.
//! - `web`: chosen by the HTTP Host `example.com`. A tiny HTTP/1.1
//!   responder: one request head, one `200 OK` with a Content-Length body.
//! - `lines`: chosen by the prefix `LINE `. Replies `OK <n>` to line n.
//! - `echo`: the fallback, a raw tunnel to an echo server (it gets binary
//!   streams and the ClientHellos no rule matches).
//!
//! Each client checks that its answer came from the backend it should have
//! reached, and measures its connection's latency (connect to last byte).
//!
//! Timeouts (each can be set or turned off with a flag, see `--help`):
//! no opening timeout (a silent client goes to the fallback when the
//! router's 5 s inspect delay runs out), 2 s for a head or frame the client
//! started, 60 s idle before the tunnel, 300 s idle in the tunnel. A client
//! a timeout ends is shut down cleanly, or reset if it left half a frame.
//! A head begun but unfinished when the inspect delay runs out goes to the
//! per-request proxy, not to the fallback. A client silent for the whole
//! delay does go to the fallback, raw, with whatever it sends after: with
//! Host routes in front of a fallback that speaks HTTP, set an opening
//! timeout below the delay (`--opening-timeout 4s`), so that such a client
//! is cut instead.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cleave_examples::http_proxy;
use cleave_proto::http1::Http1Config;
use cleave_proto::route::{Decision, Facts, HostPattern, Match, Router, RouterConfig};
use cleave_proto::sniff::{http, Sniff};
use cleave_proto::{
    Bytes, ConnConfig, Encoder, Error, Event, Heads, Lines, Session, SessionConfig, Timeouts,
};
use cleave_tokio::{splice_tunnel, FrameReader, Pipes, SessionReader, TunnelConfig};
use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const USAGE: &str = "\
cleave demo: a content-routing TCP proxy (cleave Session + Router, cleave-tokio)

USAGE:
    demo [--connections N]       built-in run: proxy, backends and N clients
                                 (default 200) in one process, then a table
    demo --listen ADDR [--route KIND:MATCH=ADDR]... [--fallback ADDR]
                                 only the proxy, on ADDR, until killed

ROUTES (first match wins, in the order given):
    --route sni:PATTERN=ADDR     TLS ClientHello server name, e.g. *.example.com
    --route host:PATTERN=ADDR    HTTP/1.x Host (port ignored), e.g. example.com;
                                 a WebSocket upgrade is passed to ADDR
    --route ws-lines:PATTERN=ADDR  HTTP/1.x Host; a WebSocket upgrade is answered
                                 by the proxy, its messages sent to ADDR as lines
    --route prefix:TEXT=ADDR     connections that start with TEXT
    --fallback ADDR              everything else (without it: closed)

TIMEOUTS (a duration: 300ms, 5s, 2m; or off), in both modes:
    --opening-timeout D          until the connection is routed (default off:
                                 a silent client goes to the fallback when
                                 the router's 5 s inspect delay runs out,
                                 raw, with all it sends after; below 5s if
                                 the fallback speaks HTTP behind Host routes)
    --frame-timeout D            for a head or frame the client started
                                 (default 2s; a head still unfinished at
                                 the inspect delay goes to the HTTP proxy,
                                 never raw to the fallback)
    --idle-timeout D             no byte either way, before the tunnel (and an
                                 HTTP backend's answer: then 504)
                                 (default 60s)
    --tunnel-idle-timeout D      no byte either way in the tunnel
                                 (default 300s)

    --help                       this text";

/// The timeouts when no flag says otherwise (see `USAGE`).
fn default_timeouts() -> Timeouts {
    Timeouts::default()
        .opening(None)
        .frame(Some(Duration::from_secs(2)))
        .idle(Some(Duration::from_secs(60)))
        .tunnel_idle(Some(Duration::from_secs(300)))
}

/// Routes of the built-in run, which are also the client kinds.
const ROUTES: [&str; 4] = ["tls", "web", "lines", "echo"];
const TLS: usize = 0;
const WEB: usize = 1;
const LINES: usize = 2;
const ECHO: usize = 3;

/// ClientHellos whose SNI a `tls` rule matches, and some no rule matches.
const HELLOS_TLS: [&[u8]; 3] = [
    include_bytes!("../core/tests/fixtures/tls_openssl_sni_alpn.bin"), // example.com
    include_bytes!("../core/tests/fixtures/tls_curl.bin"),             // example.com
    include_bytes!("../core/tests/fixtures/tls_openssl_split_records.bin"), // split.example.com
];
const HELLOS_OTHER: [&[u8]; 2] = [
    include_bytes!("../core/tests/fixtures/tls_python.bin"), // api.example.org
    include_bytes!("../core/tests/fixtures/tls_openssl_no_sni.bin"),
];
/// curl's `GET /path?q=1` with `Host: example.com:40105`.
const CURL_GET: &[u8] = include_bytes!("../core/tests/fixtures/http_curl_get.bin");

/// Each client connection must finish within this.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);
/// Clients running at once in the built-in run.
const CONCURRENCY: usize = 32;

// ---------------------------------------------------------------- the proxy

/// Counters of one route, kept by the proxy.
#[derive(Debug, Default)]
struct Counters {
    connections: AtomicU64,
    up: AtomicU64,
    down: AtomicU64,
    errors: AtomicU64,
}

/// Where a route goes.
#[derive(Debug)]
struct Backend {
    name: String,
    /// `None`: no fallback was given; such connections are closed.
    addr: Option<SocketAddr>,
    /// WebSocket upgrades routed here are terminated by the proxy and
    /// bridged to the backend as lines (`ws-lines:` routes); otherwise
    /// they are passed.
    terminate_ws: bool,
    counters: Counters,
}

/// The router's limits: an HTTP head as long and with as many fields as
/// the per-request proxy's parser takes ([`Http1Config`]'s defaults) is
/// recognised whole, within a budget that holds it.
fn router_config() -> Result<RouterConfig, BoxError> {
    let http = Http1Config::default();
    Ok(RouterConfig::default()
        .budget(http.get_max_head() + 1)
        .http_limits(
            http.get_max_head(),
            http.get_max_headers().min(http::MAX_HEADERS),
        )?)
}

/// Whether a connection goes through the per-request HTTP proxy: the
/// router saw an HTTP head, or one its sniffer refused (a Host it does
/// not take, a head over its limits). The proxy's parser then answers
/// each request, a refusal with its status (400, 431): such a stream
/// must not go to the fallback raw, where its requests would pass every
/// Host rule. A TLS record (0x16) that was refused is not HTTP.
///
/// So does a fallback that got what may be a request the sniffer did not
/// take ([`http_proxy::may_start_request`]): a head httparse refuses (`HTTP/1.2`, two
/// spaces, HTTP/2's preface), or one begun but not finished when the
/// inspect delay ran out (a client silent for most of it). Tunnelled raw,
/// such a connection would take every later request to the fallback.
fn is_http(decision: &Decision<usize>, first: &[u8]) -> bool {
    use cleave_proto::{InvalidInput, Limit};
    match &decision.malformed {
        _ if matches!(decision.facts, Facts::Http(_)) => true,
        Some(Error::InvalidInput {
            kind: InvalidInput::Http(_),
            ..
        }) => true,
        Some(Error::LimitExceeded {
            limit: Limit::SniffBudget,
            ..
        }) => first.first() != Some(&0x16),
        _ => decision.rule.is_none() && http_proxy::may_start_request(first),
    }
}

/// The proxy's shared state: the router (its targets index `backends`).
#[derive(Debug)]
struct Proxy {
    router: Router<usize>,
    backends: Vec<Backend>,
    /// Connections that failed before they were routed.
    unrouted: Counters,
    /// Each client connection's buffer, queue and timeouts.
    config: ConnConfig,
    active: AtomicUsize,
    /// Print one line per connection (the `--listen` mode).
    log: bool,
}

/// What the proxy learned about one connection.
#[derive(Debug, Default)]
struct Trace {
    route: Option<usize>,
    why: String,
}

impl Proxy {
    /// Routes one connection and tunnels it to its backend.
    async fn handle(self: Arc<Self>, client: TcpStream, peer: SocketAddr) {
        self.active.fetch_add(1, Ordering::SeqCst);
        let started = Instant::now();
        let mut trace = Trace::default();
        let result = self.serve(client, &mut trace).await;
        let counters = trace
            .route
            .and_then(|r| self.backends.get(r))
            .map_or(&self.unrouted, |b| &b.counters);
        let name = trace
            .route
            .and_then(|r| self.backends.get(r))
            .map_or("-", |b| b.name.as_str());
        match &result {
            Ok((up, down)) => {
                counters.connections.fetch_add(1, Ordering::Relaxed);
                counters.up.fetch_add(*up, Ordering::Relaxed);
                counters.down.fetch_add(*down, Ordering::Relaxed);
            }
            Err(_) => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        if self.log || result.is_err() {
            let took = started.elapsed().as_secs_f64() * 1e3;
            match result {
                Ok((up, down)) => println!(
                    "{peer} => {name} ({}): {up} B up, {down} B down, {took:.1} ms",
                    trace.why
                ),
                Err(e) => println!("{peer} => {name} ({}): error: {e}", trace.why),
            }
        }
        self.active.fetch_sub(1, Ordering::SeqCst);
    }

    /// The drive loop: events until the hand-off, then a raw tunnel.
    async fn serve(&self, client: TcpStream, trace: &mut Trace) -> Result<(u64, u64), BoxError> {
        client.set_nodelay(true)?;
        let session = Session::tunnel(self.router.clone(), SessionConfig::default());
        let mut events = SessionReader::with_config(client, session, self.config);
        let mut backend = None;
        while let Some(event) = events.next().await {
            // A timeout ends the stream with `Error::TimedOut`: the client
            // was shut down (or reset) and is dropped on return.
            match event? {
                Event::Routed(decision) => {
                    trace.route = Some(decision.target);
                    trace.why = format!("{}, {:?}", describe(&decision.facts), decision.reason);
                    if is_http(&decision, events.conn().recv_buf().peek()) {
                        // HTTP: every request goes where its own Host
                        // routes, not where the first one did.
                        let addrs: Vec<_> = self.backends.iter().map(|b| b.addr).collect();
                        let terminate: Vec<usize> = (0..self.backends.len())
                            .filter(|&i| self.backends[i].terminate_ws)
                            .collect();
                        let client = http_proxy::routed(events, self.router.clone());
                        let moved = http_proxy::serve_with(client, &addrs, &terminate).await?;
                        return Ok((moved.up, moved.down));
                    }
                    let target = self.backends.get(decision.target).ok_or("bad target")?;
                    let addr = target.addr.ok_or("no route matched and no --fallback")?;
                    let socket = TcpStream::connect(addr).await?;
                    socket.set_nodelay(true)?;
                    backend = Some(socket);
                }
                Event::Tunnel(tail) => {
                    // What was read while sniffing goes first, then the two
                    // sockets are spliced until both directions are done, or
                    // neither says anything for the tunnel idle timeout. The
                    // kernel moves the bytes (splice(2) through pipes from the
                    // process's pool; a copy where there is none): the stream
                    // harness shows it takes a third of a copy's CPU on bulk
                    // tunnels and no more on small writes.
                    let (mut client, conn) = events.into_parts();
                    let mut backend = backend.ok_or("tunnel before routing")?;
                    let idle = conn.timeouts().get_tunnel_idle();
                    let config = TunnelConfig::default().idle(idle);
                    let pipes = Pipes::global();
                    let moved = splice_tunnel(&mut client, &mut backend, tail, config, pipes);
                    return Ok(moved.await?);
                }
                _ => {}
            }
        }
        Err("the connection ended before it was routed".into())
    }
}

/// A few words about what the router saw.
fn describe(facts: &Facts) -> String {
    match facts {
        Facts::Tls(hello) => format!("TLS SNI {}", hello.server_name.as_deref().unwrap_or("-")),
        Facts::Http(head) => format!("HTTP Host {}", head.host().unwrap_or("-")),
        Facts::Prefix => "prefix".into(),
        _ => "unknown".into(),
    }
}

/// The accept loop: one task per connection.
async fn accept_loop(listener: TcpListener, proxy: Arc<Proxy>) {
    loop {
        match listener.accept().await {
            Ok((client, peer)) => {
                tokio::spawn(proxy.clone().handle(client, peer));
            }
            Err(e) => {
                // Out of file descriptors, say: wait, then go on.
                eprintln!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

// ------------------------------------------------------- the command line

/// A `--route` rule, and the backend address it names.
struct RouteArg {
    spec: String,
    when: Match,
    addr: String,
    /// A `ws-lines:` route: WebSocket terminated, bridged as lines.
    terminate_ws: bool,
}

enum Command {
    Help,
    Demo {
        connections: usize,
        timeouts: Timeouts,
    },
    Listen {
        listen: String,
        routes: Vec<RouteArg>,
        fallback: Option<String>,
        timeouts: Timeouts,
    },
}

/// A timeout flag's value: `off`, or a number with `ms`, `s` or `m`.
fn parse_timeout(flag: &str, value: &str) -> Result<Option<Duration>, String> {
    if value == "off" {
        return Ok(None);
    }
    let bad = || format!("{flag} wants a duration such as 300ms, 5s, 2m or off, not {value:?}");
    let (number, unit) = value
        .find(|c: char| !c.is_ascii_digit())
        .map_or((value, ""), |at| value.split_at(at));
    let n: u64 = number.parse().map_err(|_| bad())?;
    match unit {
        "ms" => Ok(Some(Duration::from_millis(n))),
        "s" => Ok(Some(Duration::from_secs(n))),
        "m" => Ok(Some(Duration::from_secs(n.saturating_mul(60)))),
        _ => Err(bad()),
    }
}

/// The timeouts, as a line.
fn describe_timeouts(t: &Timeouts) -> String {
    let show = |d: Option<Duration>| d.map_or("off".to_owned(), |d| format!("{d:?}"));
    format!(
        "timeouts: opening {}, frame {}, idle {}, tunnel idle {}",
        show(t.get_opening()),
        show(t.get_frame()),
        show(t.get_idle()),
        show(t.get_tunnel_idle())
    )
}

fn parse_route(spec: &str) -> Result<RouteArg, String> {
    let bad = || {
        format!(
            "bad --route {spec:?}: want sni:PATTERN=ADDR, host:PATTERN=ADDR, \
             ws-lines:PATTERN=ADDR or prefix:TEXT=ADDR"
        )
    };
    let (kind, rest) = spec.split_once(':').ok_or_else(bad)?;
    let (pattern, addr) = rest.rsplit_once('=').ok_or_else(bad)?;
    if pattern.is_empty() || addr.is_empty() {
        return Err(bad());
    }
    let when = match kind {
        "sni" => Match::TlsServerName(HostPattern::new(pattern)),
        "host" | "ws-lines" => Match::HttpHost(HostPattern::new(pattern)),
        "prefix" => Match::Prefix(Bytes::from(pattern.to_owned())),
        _ => return Err(bad()),
    };
    Ok(RouteArg {
        spec: match kind {
            "prefix" => format!("{kind}:{pattern:?}"),
            _ => format!("{kind}:{pattern}"),
        },
        when,
        addr: addr.to_owned(),
        terminate_ws: kind == "ws-lines",
    })
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Command, String> {
    let (mut listen, mut fallback, mut connections) = (None, None, None);
    let mut routes = Vec::new();
    let mut timeouts = default_timeouts();
    while let Some(arg) = args.next() {
        // `--flag value` or `--flag=value`.
        let (flag, mut inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_owned(), Some(value.to_owned()))
            }
            _ => (arg, None),
        };
        let mut value = || {
            inline
                .take()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value (see --help)"))
        };
        match flag.as_str() {
            "--help" | "-h" => return Ok(Command::Help),
            "--listen" => listen = Some(value()?),
            "--route" => routes.push(parse_route(&value()?)?),
            "--fallback" => fallback = Some(value()?),
            "--connections" => {
                let n = value()?;
                let n: usize = n
                    .parse()
                    .map_err(|_| format!("--connections wants a number, not {n:?}"))?;
                connections = Some(n.max(1));
            }
            "--opening-timeout" => timeouts = timeouts.opening(parse_timeout(&flag, &value()?)?),
            "--frame-timeout" => timeouts = timeouts.frame(parse_timeout(&flag, &value()?)?),
            "--idle-timeout" => timeouts = timeouts.idle(parse_timeout(&flag, &value()?)?),
            "--tunnel-idle-timeout" => {
                timeouts = timeouts.tunnel_idle(parse_timeout(&flag, &value()?)?);
            }
            _ => return Err(format!("unknown argument {flag:?} (see --help)")),
        }
    }
    match listen {
        Some(listen) => Ok(Command::Listen {
            listen,
            routes,
            fallback,
            timeouts,
        }),
        None if !routes.is_empty() || fallback.is_some() => {
            Err("--route and --fallback need --listen (see --help)".into())
        }
        None => Ok(Command::Demo {
            connections: connections.unwrap_or(200),
            timeouts,
        }),
    }
}

async fn resolve(addr: &str) -> Result<SocketAddr, BoxError> {
    let found = tokio::net::lookup_host(addr).await?.next();
    Ok(found.ok_or_else(|| format!("{addr} resolves to nothing"))?)
}

fn backend(name: impl Into<String>, addr: Option<SocketAddr>) -> Backend {
    Backend {
        name: name.into(),
        addr,
        terminate_ws: false,
        counters: Counters::default(),
    }
}

/// `--listen`: only the proxy, with the routes of the command line.
async fn listen_mode(
    listen: String,
    routes: Vec<RouteArg>,
    fallback: Option<String>,
    timeouts: Timeouts,
) -> Result<(), BoxError> {
    let fallback_addr = match &fallback {
        Some(addr) => Some(resolve(addr).await?),
        None => None,
    };
    let mut backends = vec![backend("fallback", fallback_addr)];
    let mut router = Router::with_config(0, router_config()?);
    for route in routes {
        let addr = resolve(&route.addr).await?;
        println!("route {:<28} => {addr}", route.spec);
        router = router.rule(route.when, backends.len());
        backends.push(Backend {
            terminate_ws: route.terminate_ws,
            ..backend(route.spec, Some(addr))
        });
    }
    match fallback_addr {
        Some(addr) => println!("fallback {:<25} => {addr}", ""),
        None => println!("no fallback: connections no route matches are closed"),
    }
    println!("{}", describe_timeouts(&timeouts));
    let listener = TcpListener::bind(&listen).await?;
    println!("proxy listening on {}", listener.local_addr()?);
    let proxy = Arc::new(Proxy {
        router,
        backends,
        unrouted: Counters::default(),
        config: ConnConfig::default().timeouts(timeouts),
        active: AtomicUsize::new(0),
        log: true,
    });
    accept_loop(listener, proxy).await;
    Ok(())
}

// ---------------------------------------------------------- the backends

async fn bind() -> Result<(TcpListener, SocketAddr), BoxError> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

/// Runs `serve` on every connection `listener` accepts.
async fn serve_all<F, Fut>(listener: TcpListener, serve: F)
where
    F: Fn(TcpStream) -> Fut,
    Fut: std::future::Future<Output = Result<(), BoxError>> + Send + 'static,
{
    while let Ok((socket, _)) = listener.accept().await {
        let _ = socket.set_nodelay(true);
        let task = serve(socket);
        tokio::spawn(async move {
            if let Err(e) = task.await {
                eprintln!("backend: {e}");
            }
        });
    }
}

/// `tls`: counts the bytes until the client is done, says how many.
async fn tls_counter(mut socket: TcpStream) -> Result<(), BoxError> {
    let (mut total, mut buf) = (0usize, vec![0; 16 * 1024]);
    loop {
        match socket.read(&mut buf).await? {
            0 => break,
            n => total += n,
        }
    }
    socket
        .write_all(format!("tls {total}\n").as_bytes())
        .await?;
    socket.shutdown().await?;
    Ok(())
}

/// `web`: one request head (cut by cleave's `Heads` decoder), one answer:
/// `GET /size/N` gets N bytes, anything else 1 KiB.
async fn web(socket: TcpStream, body: Bytes) -> Result<(), BoxError> {
    let mut heads = FrameReader::new(socket, Heads::default());
    let head = heads.next().await.ok_or("no request")??;
    let path = match http::sniff(&head, head.len(), http::MAX_HEADERS) {
        Sniff::Match { facts, .. } => facts.path().to_owned(),
        _ => return Err("not a request head".into()),
    };
    let len = path
        .strip_prefix("/size/")
        .and_then(|n| n.parse().ok())
        .unwrap_or(1024usize)
        .min(body.len());
    let status = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
    );
    heads.send(Bytes::from(status)).await?;
    heads.send(body.slice(..len)).await?; // a view of the shared body: no copy
    heads.close().await?; // written, then a FIN

    // Read whatever else comes until the client closes, so it gets no reset.
    let (mut socket, _) = heads.into_parts();
    tokio::io::copy(&mut socket, &mut tokio::io::sink()).await?;
    Ok(())
}

/// `lines`: `OK <n>` for the n-th line, answers written in batches.
async fn line_service(socket: TcpStream) -> Result<(), BoxError> {
    let mut lines = FrameReader::new(socket, Lines::new());
    let (mut encoder, mut n) = (Lines::new(), 0u64);
    while let Some(line) = lines.next().await {
        line?;
        n += 1;
        let frame = encoder.encode(Bytes::from(format!("OK {n}")))?;
        // Queued; written first if the queue is full. The answers to lines
        // that arrived together go out in one write, before the next read.
        lines.send(frame).await?;
    }
    lines.close().await?;
    Ok(())
}

/// `echo`: the fallback, bytes back as they come.
async fn echo(mut socket: TcpStream) -> Result<(), BoxError> {
    let (mut read, mut write) = socket.split();
    tokio::io::copy(&mut read, &mut write).await?;
    write.shutdown().await?;
    Ok(())
}

// ----------------------------------------------------------- the clients

/// A small deterministic generator.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn range(&mut self, low: usize, high: usize) -> usize {
        low + (self.next() % (high - low) as u64) as usize
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// One client connection's result: (bytes up, bytes down).
type Traffic = Result<(u64, u64), BoxError>;

async fn connect(proxy: SocketAddr) -> Result<TcpStream, BoxError> {
    let socket = TcpStream::connect(proxy).await?;
    socket.set_nodelay(true)?;
    Ok(socket)
}

/// A ClientHello a `tls` rule matches and a payload; the backend must
/// count them all.
async fn tls_client(proxy: SocketAddr, rng: &mut XorShift) -> Traffic {
    let hello = HELLOS_TLS[rng.range(0, HELLOS_TLS.len())];
    let len = rng.range(2 * 1024, 32 * 1024);
    let payload = rng.bytes(len);
    let mut socket = connect(proxy).await?;
    socket.write_all(hello).await?;
    socket.write_all(&payload).await?;
    socket.shutdown().await?;
    let mut reply = String::new();
    socket.read_to_string(&mut reply).await?;
    let sent = hello.len() + payload.len();
    if reply != format!("tls {sent}\n") {
        return Err(format!("tls: sent {sent} bytes, backend said {reply:?}").into());
    }
    Ok((sent as u64, reply.len() as u64))
}

/// One GET with Host example.com; checks the status and the body's length.
async fn web_client(proxy: SocketAddr, rng: &mut XorShift) -> Traffic {
    let (request, want) = if rng.range(0, 4) == 0 {
        (CURL_GET.to_vec(), 1024) // curl's own request: the default answer
    } else {
        let n = rng.range(1024, 32 * 1024);
        let head = format!("GET /size/{n} HTTP/1.1\r\nHost: example.com\r\nUser-Agent: cleave-demo\r\nAccept: */*\r\n\r\n");
        (head.into_bytes(), n)
    };
    let mut socket = connect(proxy).await?;
    socket.write_all(&request).await?;
    socket.shutdown().await?;
    let mut response = Vec::new();
    socket.read_to_end(&mut response).await?;
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("web: no response head")?;
    let (head, body) = (
        String::from_utf8_lossy(&response[..split]),
        &response[split + 4..],
    );
    let length = format!("Content-Length: {want}\r\n");
    if !head.starts_with("HTTP/1.1 200 OK\r\n") || !head.contains(length.trim_end()) {
        return Err(format!("web: unexpected head {head:?}").into());
    }
    if body.len() != want || !body.starts_with(b"web") {
        return Err(format!("web: body of {} bytes, wanted {want}", body.len()).into());
    }
    Ok((request.len() as u64, response.len() as u64))
}

/// `LINE <i> ...` lines, sent while the answers are read; each must be
/// `OK <i+1>`, in order.
async fn lines_client(proxy: SocketAddr, rng: &mut XorShift) -> Traffic {
    let count = rng.range(20, 200);
    let mut wire = Vec::new();
    for i in 0..count {
        let pad = rng.range(8, 90);
        wire.extend_from_slice(format!("LINE {i} {}\n", "x".repeat(pad)).as_bytes());
    }
    // One connection sends and reads: the lines in a few pieces, as an
    // interactive client would, then the end; then the replies.
    let mut conn = FrameReader::new(connect(proxy).await?, Lines::new());
    for piece in wire.chunks(1000) {
        conn.send(Bytes::copy_from_slice(piece)).await?;
        conn.flush().await?;
    }
    conn.close().await?;
    let (mut replies, mut down) = (0, 0);
    while let Some(reply) = conn.next().await {
        let reply = reply?;
        replies += 1;
        down += reply.len() as u64 + 1;
        if reply != format!("OK {replies}").as_bytes() {
            return Err(format!("lines: reply {replies} is {reply:?}").into());
        }
    }
    if replies != count {
        return Err(format!("lines: {count} lines, {replies} replies").into());
    }
    Ok((wire.len() as u64, down))
}

/// Bytes no rule matches (a binary stream, or a ClientHello for another
/// name); the echo must give them all back.
async fn echo_client(proxy: SocketAddr, rng: &mut XorShift) -> Traffic {
    let mut payload = match rng.range(0, 3) {
        0 => HELLOS_OTHER[rng.range(0, HELLOS_OTHER.len())].to_vec(),
        _ => b"\0RAW".to_vec(),
    };
    let extra = rng.range(2 * 1024, 32 * 1024);
    payload.extend(rng.bytes(extra));
    let mut socket = connect(proxy).await?;
    let (mut read, mut write) = socket.split();
    let send = async {
        write.write_all(&payload).await?;
        write.shutdown().await?;
        Ok::<_, BoxError>(())
    };
    let receive = async {
        let mut back = Vec::with_capacity(payload.len());
        read.read_to_end(&mut back).await?;
        Ok::<_, BoxError>(back)
    };
    let ((), back) = tokio::try_join!(send, receive)?;
    if back != payload {
        return Err(format!(
            "echo: sent {} bytes, got {} back",
            payload.len(),
            back.len()
        )
        .into());
    }
    Ok((payload.len() as u64, back.len() as u64))
}

/// One connection of the built-in run.
#[derive(Debug)]
struct Outcome {
    route: usize,
    up: u64,
    down: u64,
    latency: Duration,
    error: Option<String>,
}

async fn run_client(proxy: SocketAddr, i: usize) -> Outcome {
    let route = i % ROUTES.len();
    let mut rng = XorShift::new(i as u64 + 1);
    let started = Instant::now();
    let work = async {
        match route {
            TLS => tls_client(proxy, &mut rng).await,
            WEB => web_client(proxy, &mut rng).await,
            LINES => lines_client(proxy, &mut rng).await,
            _ => echo_client(proxy, &mut rng).await,
        }
    };
    let result = match tokio::time::timeout(CONNECTION_TIMEOUT, work).await {
        Ok(result) => result,
        Err(_) => Err("timed out".into()),
    };
    let latency = started.elapsed();
    match result {
        Ok((up, down)) => Outcome {
            route,
            up,
            down,
            latency,
            error: None,
        },
        Err(e) => Outcome {
            route,
            up: 0,
            down: 0,
            latency,
            error: Some(e.to_string()),
        },
    }
}

// ------------------------------------------------------- the built-in run

/// Starts the backends and the proxy; returns the proxy's address and it.
async fn start(timeouts: Timeouts) -> Result<(SocketAddr, Arc<Proxy>), BoxError> {
    let (tls, tls_addr) = bind().await?;
    let (web_listener, web_addr) = bind().await?;
    let (lines, lines_addr) = bind().await?;
    let (echo_listener, echo_addr) = bind().await?;
    let body = Bytes::from(b"web ".repeat(16 * 1024)); // 64 KiB, shared by every answer
    tokio::spawn(serve_all(tls, tls_counter));
    tokio::spawn(serve_all(web_listener, move |s| web(s, body.clone())));
    tokio::spawn(serve_all(lines, line_service));
    tokio::spawn(serve_all(echo_listener, echo));

    let router = Router::with_config(ECHO, router_config()?)
        .rule(Match::TlsServerName(HostPattern::new("*.example.com")), TLS)
        .rule(Match::TlsServerName(HostPattern::new("example.com")), TLS)
        .rule(Match::HttpHost(HostPattern::new("example.com")), WEB)
        .rule(Match::Prefix("LINE ".into()), LINES);
    let addrs = [tls_addr, web_addr, lines_addr, echo_addr];
    let backends = ROUTES
        .iter()
        .zip(addrs)
        .map(|(name, addr)| backend(*name, Some(addr)))
        .collect();
    let proxy = Arc::new(Proxy {
        router,
        backends,
        unrouted: Counters::default(),
        config: ConnConfig::default().timeouts(timeouts),
        active: AtomicUsize::new(0),
        log: false,
    });
    let (listener, addr) = bind().await?;
    tokio::spawn(accept_loop(listener, proxy.clone()));
    Ok((addr, proxy))
}

fn human_bytes(n: u64) -> String {
    match n {
        n if n < 1024 => format!("{n} B"),
        n if n < 1024 * 1024 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{:.2} MiB", n as f64 / (1024.0 * 1024.0)),
    }
}

fn percentile(sorted: &[Duration], q: f64) -> String {
    match sorted.len() {
        0 => "-".into(),
        n => {
            let at = ((n - 1) as f64 * q).round() as usize;
            format!("{:.2} ms", sorted[at].as_secs_f64() * 1e3)
        }
    }
}

/// Prints the table; returns the number of errors.
fn report(outcomes: &[Outcome], proxy: &Proxy, wall: Duration) -> u64 {
    println!(
        "{:<6} | {:>5} | {:>10} | {:>10} | {:>12} | {:>8} | {:>8} | {:>6}",
        "route", "conns", "bytes up", "bytes down", "throughput", "p50", "p99", "errors"
    );
    println!("{}", "-".repeat(85));
    let mut total_errors = 0;
    let rows = (0..ROUTES.len()).map(Some).chain([None]);
    for route in rows {
        let mine: Vec<_> = outcomes
            .iter()
            .filter(|o| route.is_none_or(|r| o.route == r))
            .collect();
        let mut latencies: Vec<_> = mine.iter().map(|o| o.latency).collect();
        latencies.sort();
        let (up, down) = mine.iter().fold((0, 0), |(u, d), o| (u + o.up, d + o.down));
        let mut errors = mine.iter().filter(|o| o.error.is_some()).count() as u64;
        // What the proxy itself counted must agree with the clients.
        let counters = match route {
            Some(r) => vec![&proxy.backends[r].counters],
            None => proxy.backends.iter().map(|b| &b.counters).collect(),
        };
        let get = |f: fn(&Counters) -> &AtomicU64| {
            counters
                .iter()
                .map(|c| f(c).load(Ordering::Relaxed))
                .sum::<u64>()
        };
        errors += get(|c| &c.errors);
        if route.is_none() {
            errors += proxy.unrouted.errors.load(Ordering::Relaxed);
        }
        let clients = (mine.len() as u64, up, down);
        if errors == 0 && (get(|c| &c.connections), get(|c| &c.up), get(|c| &c.down)) != clients {
            println!("  (the proxy's counts for this route differ from the clients')");
            errors += 1;
        }
        let throughput = (up + down) as f64 / wall.as_secs_f64() / (1024.0 * 1024.0);
        println!(
            "{:<6} | {:>5} | {:>10} | {:>10} | {:>12} | {:>8} | {:>8} | {:>6}",
            route.map_or("total", |r| ROUTES[r]),
            mine.len(),
            human_bytes(up),
            human_bytes(down),
            format!("{throughput:.1} MiB/s"),
            percentile(&latencies, 0.50),
            percentile(&latencies, 0.99),
            errors
        );
        if route.is_none() {
            total_errors = errors;
        }
    }
    for o in outcomes.iter().filter(|o| o.error.is_some()).take(5) {
        println!("error on a {} connection: {:?}", ROUTES[o.route], o.error);
    }
    total_errors
}

async fn demo_mode(connections: usize, timeouts: Timeouts) -> Result<u64, BoxError> {
    let (addr, proxy) = start(timeouts).await?;
    println!(
        "proxy on {addr}; backends: tls (SNI *.example.com, example.com), web (Host example.com),"
    );
    println!("lines (prefix \"LINE \"), echo (fallback). The tls backend does not terminate TLS:");
    println!("clients replay ClientHellos captured from openssl and curl, then send a payload,");
    println!("and the backend counts the bytes.");
    println!("{}", describe_timeouts(&timeouts));
    println!("running {connections} connections, {CONCURRENCY} at a time...\n");

    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..CONCURRENCY.min(connections))
        .map(|_| {
            let next = next.clone();
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= connections {
                        return outcomes;
                    }
                    outcomes.push(run_client(addr, i).await);
                }
            })
        })
        .collect();
    let mut outcomes = Vec::with_capacity(connections);
    for worker in workers {
        outcomes.extend(worker.await?);
    }
    let wall = started.elapsed();
    // The proxy counts a connection when its tunnel ends, just after the
    // client saw its last byte: wait for the last ones.
    let deadline = Instant::now() + Duration::from_secs(2);
    while proxy.active.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let errors = report(&outcomes, &proxy, wall);
    println!(
        "\n{connections} connections in {:.2} s; latency is connect to last byte; throughput is bytes both ways over the run's wall time",
        wall.as_secs_f64()
    );
    Ok(errors)
}

#[tokio::main]
async fn main() -> ExitCode {
    let command = match parse_args(std::env::args().skip(1)) {
        Ok(command) => command,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let result = match command {
        Command::Help => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Command::Listen {
            listen,
            routes,
            fallback,
            timeouts,
        } => listen_mode(listen, routes, fallback, timeouts)
            .await
            .map(|()| 0),
        Command::Demo {
            connections,
            timeouts,
        } => demo_mode(connections, timeouts).await,
    };
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(errors) => {
            eprintln!("{errors} errors");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
