//! HTTP proxying per request, for the demo: after the router recognised
//! HTTP, every request on the client's keep-alive connection goes to the
//! backend its own Host routes to ([`Routed`]), over a keep-alive
//! connection of the proxy's to that backend ([`Client`]); responses come
//! back in order. A request is never sent to the backend of the one
//! before it.
//!
//! ```text
//!   client ── Connection<Routed<usize>> ── Head{target} ─> backend[target]: Connection<Client>
//!                                          Data / End  ─> the same backend (re-chunked if chunked)
//!          <─ response head, body, end ───────────────── backend[target]
//! ```
//!
//! A WebSocket upgrade is passed, by default: the request goes to its
//! backend like any other, and after the backend's 101 the two sockets are
//! tunnelled. For the targets [`serve_with`] is told to, the proxy
//! terminates it instead: it answers the handshake itself, and bridges the
//! messages to the backend as lines (a message out as a line, a line back
//! as a text message): a WebSocket front for a line protocol.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use cleave_proto::http1::{
    self, Body, Client, ClientEvent, Headers, PerRequest, Request, Routed, RoutedEvent,
};
use cleave_proto::{Bytes, BytesMut, Frame, Protocol};
use cleave_tokio::{tunnel, ConnError, Connection, Reset};
use futures_util::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// Any error of the proxy's.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What one client connection moved: requests, bytes up and down.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Moved {
    /// Requests forwarded.
    pub requests: u64,
    /// Bytes sent to backends.
    pub up: u64,
    /// Bytes sent to the client.
    pub down: u64,
}

/// A body's bytes as they go out: as they came for a Content-Length body,
/// as chunks again for a chunked one.
fn body_piece(data: Bytes, chunked: bool) -> Result<Frame, BoxError> {
    Ok(if chunked {
        http1::chunk(data)?
    } else {
        Frame::from(data)
    })
}

/// The last chunk with the trailers that came.
fn last_chunk(trailers: Option<&Headers>) -> Result<Bytes, BoxError> {
    let fields: Vec<(&str, &[u8])> = trailers.map_or_else(Vec::new, |t| {
        t.iter().map(|h| (h.name(), h.value())).collect()
    });
    Ok(http1::last_chunk(&fields)?)
}

/// Proxies the requests of `client` (whose first bytes the router saw as
/// HTTP: nothing was taken from its buffer) one by one, each to
/// `backends[target]` for the target its Host routes to; `None` there
/// (or a backend that refuses the connection) answers 502. Ends when the
/// client ends, asks to close, or after a protocol switch (then the two
/// sockets are tunnelled).
///
/// Each response goes to the client as it comes (a streamed response, an
/// interim 103, are not held back). A backend connection gets the
/// client's idle timeout: a backend that does not answer in that time is
/// a 504 to the client, one that fails before its answer a 502. A
/// request that is safe to send again (GET, HEAD, OPTIONS, no body) on a
/// kept backend connection that turns out closed (a server may close an
/// idle connection between responses, RFC 9112 section 9.6) is sent again
/// once, on a new connection. While a response is awaited the client's
/// end is not taken for its leaving: a client that half-closes after its
/// requests still gets their responses; the idle timeout bounds the wait.
///
/// # Errors
///
/// The client's or a backend's I/O errors, and protocol errors (a
/// refused request is answered with its status first).
pub async fn serve<S>(
    client: Connection<S, Routed<usize>>,
    backends: &[Option<SocketAddr>],
) -> Result<Moved, BoxError>
where
    S: AsyncRead + AsyncWrite + Reset + Unpin,
{
    serve_with(client, backends, &[]).await
}

/// As [`serve`], terminating the WebSocket upgrades routed to the targets
/// in `terminate_ws`: the proxy answers the handshake and bridges the
/// messages to the target's backend as lines.
///
/// # Errors
///
/// As [`serve`].
pub async fn serve_with<S>(
    client: Connection<S, Routed<usize>>,
    backends: &[Option<SocketAddr>],
    terminate_ws: &[usize],
) -> Result<Moved, BoxError>
where
    S: AsyncRead + AsyncWrite + Reset + Unpin,
{
    let mut proxy = Proxy::new(client, backends);
    while let Some(event) = proxy.next_event().await? {
        let step = match event {
            RoutedEvent::Head {
                request, target, ..
            } => {
                if is_websocket(&request) && terminate_ws.contains(&target) {
                    let addr = backends.get(target).copied().flatten();
                    return terminate(proxy.client, request, addr, proxy.moved).await;
                }
                proxy.forward_head(request, target).await?
            }
            RoutedEvent::Data(data) => proxy.forward_data(data).await?,
            RoutedEvent::Trailers(t) => {
                proxy.trailers = Some(t);
                Then::Next
            }
            RoutedEvent::End => proxy.finish_request().await?,
            RoutedEvent::Misdirected { .. } => {
                proxy.refuse(421).await?;
                Then::Done
            }
        };
        match step {
            Then::Next => {}
            Then::Done => return Ok(proxy.moved),
            Then::Switch(target) => return proxy.tunnel(target).await,
        }
    }
    Ok(proxy.moved)
}

/// One client connection's proxying: the client, the connections to its
/// backends, the request being forwarded.
struct Proxy<'b, S> {
    client: Connection<S, Routed<usize>>,
    backends: &'b [Option<SocketAddr>],
    /// The open connection to each backend, kept between requests.
    open: Vec<Option<Connection<TcpStream, Client>>>,
    moved: Moved,
    /// The client's idle timeout, which the backend connections get too.
    idle: Option<Duration>,
    /// The request being forwarded.
    current: Option<Forward>,
    /// The trailers of the current request's chunked body.
    trailers: Option<Headers>,
    /// A client event read while waiting for a backend's answer to
    /// `Expect: 100-continue`.
    early: Option<Option<Result<RoutedEvent<usize>, ConnError>>>,
}

/// What the proxy does after an event.
enum Then {
    /// Reads the client's next event.
    Next,
    /// Ends: the client was answered and its connection closed (or it
    /// closes on its own).
    Done,
    /// Tunnels the client to this target's backend (a 101, a 2xx to
    /// CONNECT).
    Switch(usize),
}

impl<'b, S> Proxy<'b, S>
where
    S: AsyncRead + AsyncWrite + Reset + Unpin,
{
    fn new(client: Connection<S, Routed<usize>>, backends: &'b [Option<SocketAddr>]) -> Self {
        let idle = client.conn().timeouts().get_idle();
        Self {
            client,
            backends,
            open: backends.iter().map(|_| None).collect(),
            moved: Moved::default(),
            idle,
            current: None,
            trailers: None,
            early: None,
        }
    }

    /// The client's next event; `None` once it ended. A request the codec
    /// refused is answered with its status (and the connection closed)
    /// before its error is returned.
    async fn next_event(&mut self) -> Result<Option<RoutedEvent<usize>>, BoxError> {
        let next = match self.early.take() {
            Some(early) => early,
            None => self.client.next().await,
        };
        match next {
            None => Ok(None),
            Some(Ok(event)) => Ok(Some(event)),
            Some(Err(ConnError::Protocol(e))) => {
                if let Some(status) = http1::status_for(&e) {
                    self.refuse(status).await?;
                }
                Err(e.into())
            }
            Some(Err(e)) => Err(e.into()),
        }
    }

    /// Answers the client with `status` and no body, and closes its
    /// connection.
    async fn refuse(&mut self, status: u16) -> Result<(), BoxError> {
        let reason = match status {
            421 => "Misdirected Request",
            502 => "Bad Gateway",
            504 => "Gateway Timeout",
            _ => crate::http1::reason(status),
        };
        let close: [(&str, &[u8]); 1] = [("Connection", b"close")];
        let head = http1::response(status, reason, &close, Body::Empty)?;
        self.client.send(head).await?;
        self.client.close().await?;
        Ok(())
    }

    /// Sends a request's head to `target`'s backend (502 to the client if
    /// there is none to reach); with `Expect: 100-continue`, relays the
    /// backend's interim answer, or its final one (then the client's
    /// connection closes).
    async fn forward_head(&mut self, request: Request, target: usize) -> Result<Then, BoxError> {
        let reused = self.open.get(target).is_some_and(Option::is_some);
        // No address, or none that takes a connection: 502.
        let connected = connect_backend(&mut self.open, self.backends, target, self.idle).await;
        let Some(backend) = connected.ok().flatten() else {
            self.refuse(502).await?;
            return Ok(Then::Done);
        };
        // Only a WebSocket upgrade is passed: after another (an `h2c`),
        // the tunnel would carry requests for any authority to this
        // backend. Its offer is taken out, and the backend's answer is an
        // ordinary one.
        let head = if request.is_upgrade() && !is_websocket(&request) {
            let asked = backend.conn_mut().protocol_mut();
            if request.keep_alive() {
                asked.expect_response(request.method());
            } else {
                asked.expect_last_response(request.method());
            }
            without_upgrade(&request)
        } else {
            backend
                .conn_mut()
                .protocol_mut()
                .expect_response_to(&request);
            request.as_bytes().clone()
        };
        self.moved.up += head.len() as u64;
        let safe = matches!(request.method(), "GET" | "HEAD" | "OPTIONS")
            && request.body() == Body::Empty
            && !request.is_upgrade();
        // A kept connection the backend closed may refuse the head: the
        // answer (none) decides at the request's end.
        let sent = backend.send(head.clone()).await;
        let expects_continue = request.expects_continue();
        self.current = Some(Forward {
            target,
            chunked: request.body() == Body::Chunked,
            head,
            request,
            again: reused && safe,
            failed: sent.is_err(),
        });
        self.moved.requests += 1;
        if !expects_continue {
            return Ok(Then::Next);
        }
        // RFC 9110, section 10.1.1: the head goes on at once (the client
        // may wait for a 100 before its body), and the backend's answer
        // comes back as it comes.
        backend.flush().await?;
        tokio::select! {
            event = self.client.next() => self.early = Some(event),
            event = backend.next() => match event {
                Some(Ok(ClientEvent::Interim(response))) => {
                    self.moved.down += response.as_bytes().len() as u64;
                    self.client.send(response.into_bytes()).await?;
                    self.client.flush().await?;
                }
                // A final answer before the body: relayed, then the
                // client's connection closes (its body, if it comes, is
                // not read).
                Some(Ok(first)) => {
                    relay_response(backend, &mut self.client, &mut self.moved, Some(first))
                        .await
                        .map_err(Relay::into_error)?;
                    self.client.close().await?;
                    return Ok(Then::Done);
                }
                Some(Err(e)) => return Err(e.into()),
                None => return Err("the backend closed before its response".into()),
            },
        }
        Ok(Then::Next)
    }

    /// A piece of the current request's body, to its backend (re-chunked
    /// if chunked). After a failed send the body is not sent: the client
    /// is answered 502 at the request's end.
    async fn forward_data(&mut self, data: Bytes) -> Result<Then, BoxError> {
        let f = self.current.as_mut().ok_or("body outside a request")?;
        let backend = self.open[f.target].as_mut().ok_or("no backend")?;
        self.moved.up += data.len() as u64;
        if !f.failed && backend.send(body_piece(data, f.chunked)?).await.is_err() {
            f.failed = true;
        }
        Ok(Then::Next)
    }

    /// The current request's end: its last chunk (and trailers) to the
    /// backend, then the backend's answer relayed to the client. A safe
    /// request whose kept connection turned out closed goes once more on
    /// a new one; a backend that answered nothing gets the client a 502
    /// (a 504 if it timed out).
    async fn finish_request(&mut self) -> Result<Then, BoxError> {
        let f = self.current.take().ok_or("end outside a request")?;
        let target = f.target;
        let backend = self.open[target].as_mut().ok_or("no backend")?;
        let mut sent = if f.failed {
            Err(ConnError::Io(io::ErrorKind::BrokenPipe.into()))
        } else if f.chunked {
            backend
                .send(last_chunk(self.trailers.take().as_ref())?)
                .await
                .map(drop)
        } else {
            Ok(())
        };
        if sent.is_ok() {
            sent = backend.flush().await;
        }
        let mut relayed = match sent {
            Ok(()) => relay_response(backend, &mut self.client, &mut self.moved, None).await,
            Err(e) => Err(Relay::NoAnswer(e.into())),
        };
        if f.again && matches!(relayed, Err(Relay::NoAnswer(_))) {
            // The kept connection was closed: once more, on a new one.
            self.open[target] = None;
            relayed = match connect_backend(&mut self.open, self.backends, target, self.idle).await
            {
                Ok(Some(fresh)) => f.send_again(fresh, &mut self.client, &mut self.moved).await,
                Ok(None) => Err(Relay::NoAnswer("no backend".into())),
                Err(e) => Err(Relay::NoAnswer(e.into())),
            };
        }
        match relayed {
            Ok(After::KeepAlive) => Ok(Then::Next),
            Ok(After::ClientCloses) => {
                self.client.close().await?;
                Ok(Then::Done)
            }
            Ok(After::Switch) => Ok(Then::Switch(target)),
            Err(Relay::NoAnswer(e)) => {
                // Nothing of a response reached the client: it gets one,
                // and the connection closes.
                self.open[target] = None;
                self.refuse(if is_timeout(&e) { 504 } else { 502 }).await?;
                Ok(Then::Done)
            }
            Err(Relay::Cut(e)) => Err(e),
        }
    }

    /// After a protocol switch: the client and `target`'s backend
    /// tunnelled until either ends.
    async fn tunnel(mut self, target: usize) -> Result<Moved, BoxError> {
        let backend = self.open[target].take().ok_or("no backend")?;
        let (mut backend_io, backend_conn) = backend.into_parts();
        let (mut client_io, client_conn) = self.client.into_parts();
        // Bytes either side already read past the heads go first: the
        // backend's to the client, the client's to the backend.
        let early = client_conn.recv_buf().peek().to_vec();
        let late = backend_conn.recv_buf().peek().to_vec();
        if !late.is_empty() {
            tokio::io::AsyncWriteExt::write_all(&mut client_io, &late).await?;
        }
        let (up, down) = tunnel(&mut client_io, &mut backend_io, Bytes::from(early)).await?;
        self.moved.up += up;
        self.moved.down += down + late.len() as u64;
        Ok(self.moved)
    }
}

/// Whether `first`, what a connection sent before it was routed, may
/// start an HTTP request: after any empty lines, a method (a token), then
/// a space and a line not ended yet or one that names an `HTTP/` version;
/// or a method not ended yet. A protocol whose first line is whole and
/// names no `HTTP/` (an SSH banner, a PROXY v1 line) is not one, nor a
/// TLS record, nor a silent client (nothing sent).
///
/// For a router's fallback: bytes that may be a request the sniffer did
/// not take (a head httparse refuses, or one unfinished when the inspect
/// delay ran out) belong to the per-request proxy, which answers them,
/// not to a raw tunnel that would carry every later request too.
///
/// ```
/// use cleave_examples::http_proxy::may_start_request;
///
/// assert!(may_start_request(b"GET /admin HTTP/1.2\r\nHost: a\r\n\r\n"));
/// assert!(may_start_request(b"\r\nGET /adm")); // unfinished, after an empty line
/// assert!(may_start_request(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
/// assert!(!may_start_request(b"SSH-2.0-OpenSSH_9.6 Debian\r\n"));
/// assert!(!may_start_request(b"\x16\x03\x01\x02\x00"));
/// assert!(!may_start_request(b""));
/// ```
pub fn may_start_request(first: &[u8]) -> bool {
    // Empty lines before a request line are skipped (RFC 9112, section
    // 2.2), by the sniffer and the server alike.
    let start = first
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(first.len());
    let first = &first[start..];
    let line_end = first.iter().position(|&b| b == b'\n');
    let line = &first[..line_end.unwrap_or(first.len())];
    let method_end = line.iter().position(|&b| b == b' ').unwrap_or(line.len());
    let method = &line[..method_end];
    let token = |b: &u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b);
    if method.is_empty() || !method.iter().all(token) {
        return false;
    }
    if method_end == line.len() {
        return line_end.is_none();
    }
    line_end.is_none() || line.windows(6).any(|w| w == b" HTTP/")
}

/// The routed connection for a client the router saw as HTTP.
pub fn routed<S>(
    client: Connection<S, impl Protocol>,
    router: cleave_proto::route::Router<usize>,
) -> Connection<S, Routed<usize>>
where
    S: AsyncRead + AsyncWrite + Reset + Unpin,
{
    client.switch(|_| Routed::new(router, PerRequest::Follow))
}

/// `request`'s head without its `Upgrade` and `HTTP2-Settings` fields:
/// it no longer offers to switch (its `Connection` may still name them;
/// a field a `Connection` names and the head lacks changes nothing).
fn without_upgrade(request: &Request) -> Bytes {
    let whole = request.as_bytes();
    // The request line, as it came: everything before the fields.
    let fields = request.headers().as_bytes();
    let line_end = (fields.as_ptr() as usize)
        .checked_sub(whole.as_ptr() as usize)
        .filter(|&at| at <= whole.len())
        .unwrap_or(whole.len());
    let mut head = BytesMut::with_capacity(whole.len());
    head.extend_from_slice(&whole[..line_end]);
    for header in request.headers().iter() {
        let name = header.name();
        if name.eq_ignore_ascii_case("upgrade") || name.eq_ignore_ascii_case("http2-settings") {
            continue;
        }
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(header.value());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    head.freeze()
}

/// Whether a request asks to switch to WebSocket, and to nothing else:
/// one `Upgrade` field, `websocket`, and no `HTTP2-Settings`. A second
/// `Upgrade` field (`h2c`) would be merged with the first by a backend
/// that reads the fields as a list.
fn is_websocket(request: &Request) -> bool {
    request.is_upgrade()
        && upgrades_to_websocket_alone(request.headers())
        && request.headers().get("http2-settings").is_none()
}

/// One `Upgrade` field, and it is `websocket`.
fn upgrades_to_websocket_alone(headers: &Headers) -> bool {
    let mut upgrades = headers.get_all("upgrade");
    upgrades
        .next()
        .is_some_and(|upgrade| upgrade.eq_ignore_ascii_case(b"websocket"))
        && upgrades.next().is_none()
}

mod relay;
mod terminate;

use relay::{connect_backend, is_timeout, relay_response, After, Forward, Relay};
use terminate::terminate;

#[cfg(test)]
mod tests {
    use super::may_start_request;

    #[test]
    fn what_may_start_a_request() {
        for may in [
            &b"G"[..],
            b"GET",
            b"GET ",
            b"GET /a",
            b"GET  /a HTTP/1.1\r\nHost: a\r\n\r\n",
            b"GET /a HTTP/1.2\r\n",
            b"M-SEARCH * HTTP/1.1\r\n",
            b"\r\n\r\nGET / HTTP/1.1\r\n",
            b"\nGET",
        ] {
            assert!(may_start_request(may), "{:?}", String::from_utf8_lossy(may));
        }
        for not in [
            &b""[..],
            b"\r\n",
            b" GET / HTTP/1.1\r\n",
            b"SSH-2.0-OpenSSH_9.6\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n",
            b"HELLO\r\n",
            b"\x16\x03\x01",
            b"\r\n\r\n\x00\r\nQUIT\n",
            b"GE\x00T / HTTP/1.1",
        ] {
            assert!(
                !may_start_request(not),
                "{:?}",
                String::from_utf8_lossy(not)
            );
        }
    }
}
