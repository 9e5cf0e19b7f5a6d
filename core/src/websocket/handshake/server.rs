//! The server's side of the opening handshake: an upgrade request
//! checked, and the 101 that accepts it or the 400/426 that refuses it.

use alloc::string::String;
use alloc::vec::Vec;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use bytes::Bytes;

use crate::error::{Error, WsField};
use crate::http1::{Body, Headers, Request, Version};

use super::{
    accept_key, check_extra_headers, check_protocols, elements, has_token, invalid,
    is_resource_name, only, Negotiated, VERSION,
};
#[cfg(feature = "deflate")]
use crate::websocket::deflate::{DeflateConfig, DeflateParams};

/// The answer to a request whose `Sec-WebSocket-Version` is not 13 (RFC
/// 6455, section 4.4): the version the server speaks, and the `Upgrade`
/// that RFC 9110 (section 15.5.22) requires on a 426.
const UPGRADE_REQUIRED: &[u8] = b"HTTP/1.1 426 Upgrade Required\r\n\
    Sec-WebSocket-Version: 13\r\n\
    Upgrade: websocket\r\n\
    Connection: Upgrade, close\r\n\
    Content-Length: 0\r\n\r\n";

/// The answer to any other request that is not a WebSocket handshake.
const BAD_REQUEST: &[u8] = b"HTTP/1.1 400 Bad Request\r\n\
    Connection: close\r\n\
    Content-Length: 0\r\n\r\n";

/// What a server accepts: the subprotocols it speaks, in its order of
/// preference, permessage-deflate (with the `deflate` feature), and extra
/// fields for the 101 (a `Set-Cookie`, say).
///
/// ```
/// use cleave_proto::websocket::AcceptConfig;
///
/// let config = AcceptConfig::default()
///     .protocols(["v2.chat", "v1.chat"])
///     .header("Set-Cookie", b"session=1");
/// # let _ = config;
/// ```
#[derive(Clone, Debug, Default)]
pub struct AcceptConfig {
    protocols: Vec<String>,
    headers: Vec<(String, Vec<u8>)>,
    #[cfg(feature = "deflate")]
    deflate: Option<DeflateConfig>,
}

impl AcceptConfig {
    /// The subprotocols the server speaks, the one it prefers first: of
    /// those the client offers, it chooses the first in this list. Each
    /// must be a token (RFC 6455, section 4.1), checked by [`accept`].
    /// None (the default): the server chooses none, whatever is offered.
    #[must_use]
    pub fn protocols<I>(mut self, protocols: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.protocols = protocols.into_iter().map(Into::into).collect();
        self
    }

    /// One more field for the 101 response, after the handshake's own.
    /// It may not be one the handshake writes (`Upgrade`, `Connection`,
    /// `Host`, `Sec-WebSocket-*`) nor frame a body; [`accept`] checks.
    #[must_use]
    pub fn header(mut self, name: &str, value: &[u8]) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Accepts permessage-deflate (RFC 7692) when a client offers it, with
    /// these parameters. Without it (the default) every extension offer
    /// is declined.
    #[cfg(feature = "deflate")]
    #[must_use]
    pub fn deflate(mut self, config: DeflateConfig) -> Self {
        self.deflate = Some(config);
        self
    }
}

/// A request [`accept`] took: the 101 to send, and what it settled.
#[derive(Clone, Debug)]
pub struct Accepted {
    response: Bytes,
    negotiated: Negotiated,
}

impl Accepted {
    /// The 101 response head: push it, then switch the connection to the
    /// WebSocket protocol (the bytes after the request stay in the buffer
    /// for it).
    #[must_use]
    pub fn response(&self) -> &Bytes {
        &self.response
    }

    /// The subprotocol chosen, if any.
    #[must_use]
    pub fn protocol(&self) -> Option<&str> {
        self.negotiated.protocol()
    }

    /// The permessage-deflate parameters accepted, if any.
    #[cfg(feature = "deflate")]
    #[must_use]
    pub fn deflate(&self) -> Option<DeflateParams> {
        self.negotiated.deflate()
    }

    /// What the handshake settled, as the client's
    /// [`check`](super::ClientHandshake::check) gives it.
    #[must_use]
    pub fn negotiated(&self) -> &Negotiated {
        &self.negotiated
    }
}

/// Why a request is not a WebSocket handshake: the version, which has its
/// own answer (426), or anything else (400).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refused {
    Malformed,
    Version,
}

/// Checks a request from a [`Server`](crate::http1::Server)'s `Head`
/// event as a WebSocket opening handshake (RFC 6455, section 4.2.1),
/// chooses the subprotocol (the first of the server's that the client
/// offers, across all its `Sec-WebSocket-Protocol` fields) and the
/// extension (permessage-deflate, if configured and offered; other offers
/// are declined), and writes the 101 that accepts it.
///
/// The request must be a GET in HTTP/1.1 with a Host, an `Upgrade` with
/// the token `websocket` and a `Connection` with the token `upgrade` (both
/// without case), one `Sec-WebSocket-Key` that is the base64 of 16 bytes,
/// one `Sec-WebSocket-Version: 13`, and no body (its bytes would come
/// before the frames and mean nothing).
///
/// ```
/// use cleave_proto::http1::{Server, ServerEvent};
/// use cleave_proto::websocket::{accept, AcceptConfig};
/// use cleave_proto::Conn;
/// use std::time::Duration;
///
/// let mut conn = Conn::new(Server::new(), Duration::ZERO);
/// let request = b"GET /chat HTTP/1.1\r\nHost: example.com\r\nUpgrade: websocket\r\n\
///     Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
///     Sec-WebSocket-Protocol: chat, superchat\r\nSec-WebSocket-Version: 13\r\n\r\n";
/// conn.feed(request, Duration::ZERO)?;
/// let Some(ServerEvent::Head(request)) = conn.poll_event()? else { panic!() };
/// let accepted = accept(&request, &AcceptConfig::default().protocols(["chat"]))?;
/// assert_eq!(accepted.protocol(), Some("chat"));
/// assert_eq!(accepted.response(), "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
///     Connection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\
///     Sec-WebSocket-Protocol: chat\r\n\r\n");
/// # Ok::<(), cleave_proto::Error>(())
/// ```
///
/// # Errors
///
/// [`InvalidInput::WebSocket`](crate::InvalidInput::WebSocket)`(`[`WsField::Handshake`]`)` at offset 0
/// for a request that is not a WebSocket handshake: answer it with
/// [`refusal`]. `Misuse::InvalidConfig` for a configured subprotocol that
/// is not a token (or twice), or an extra header the handshake writes
/// itself; `Misuse::Unencodable` for an extra header that cannot be sent.
pub fn accept(request: &Request, config: &AcceptConfig) -> Result<Accepted, Error> {
    check_protocols(&config.protocols)?;
    check_extra_headers(&config.headers)?;
    let key = check_request(request).map_err(|_| invalid(WsField::Handshake))?;
    let negotiated = Negotiated {
        protocol: choose_protocol(request.headers(), &config.protocols),
        #[cfg(feature = "deflate")]
        deflate: config.deflate.as_ref().and_then(|deflate| {
            DeflateParams::negotiate(
                request.headers().get_all("sec-websocket-extensions"),
                deflate,
            )
        }),
    };
    let response = switching_protocols(&accept_key(key), &negotiated, &config.headers)?;
    Ok(Accepted {
        response,
        negotiated,
    })
}

/// The response to a request [`accept`] refused, to send before closing:
/// `426 Upgrade Required` with `Sec-WebSocket-Version: 13` when the
/// version was the problem (RFC 6455, section 4.4), else `400 Bad
/// Request`; both with `Connection: close` and `Content-Length: 0`.
///
/// It tells which by running `accept`'s checks again, in the same order:
/// the version is the problem when the request is otherwise an upgrade to
/// `websocket` (GET, HTTP/1.1, Host, `Upgrade`, `Connection`) and its
/// `Sec-WebSocket-Version` is missing, repeated or not 13. A request
/// `accept` takes gets a 400 too: call this only after it refused.
///
/// ```
/// use cleave_proto::http1::{Server, ServerEvent};
/// use cleave_proto::websocket::{accept, refusal, AcceptConfig};
/// use cleave_proto::Conn;
/// use std::time::Duration;
///
/// let mut conn = Conn::new(Server::new(), Duration::ZERO);
/// let request = b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
///     Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n";
/// conn.feed(request, Duration::ZERO)?;
/// let Some(ServerEvent::Head(request)) = conn.poll_event()? else { panic!() };
/// assert!(accept(&request, &AcceptConfig::default()).is_err());
/// let answer = refusal(&request);
/// assert!(answer.starts_with(b"HTTP/1.1 426 Upgrade Required\r\nSec-WebSocket-Version: 13\r\n"));
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[must_use]
pub fn refusal(request: &Request) -> Bytes {
    Bytes::from_static(match check_request(request) {
        Err(Refused::Version) => UPGRADE_REQUIRED,
        _ => BAD_REQUEST,
    })
}

/// RFC 6455, section 4.2.1, in order; on success the key as sent.
fn check_request(request: &Request) -> Result<&[u8], Refused> {
    let headers = request.headers();
    let upgrade_to_websocket = request.method() == "GET"
        && request.version() == Version::Http11
        && is_resource_name(request.target())
        && request.host().is_some_and(|host| !host.is_empty())
        && has_token(headers.get_all("upgrade"), b"websocket")
        && has_token(headers.get_all("connection"), b"upgrade");
    if !upgrade_to_websocket {
        return Err(Refused::Malformed);
    }
    if only(headers, "sec-websocket-version") != Some(VERSION) {
        return Err(Refused::Version);
    }
    let key = only(headers, "sec-websocket-key").ok_or(Refused::Malformed)?;
    if !is_nonce(key) {
        return Err(Refused::Malformed);
    }
    // The server parses nothing after an upgrade request (it did for this
    // one: the checks above imply it), and nothing may come between the
    // request and the first frame.
    if !request.is_upgrade() || !matches!(request.body(), Body::Empty | Body::Length(0)) {
        return Err(Refused::Malformed);
    }
    Ok(key)
}

/// Whether a `Sec-WebSocket-Key` is the base64 of 16 bytes: 24 characters
/// with their padding, canonical.
fn is_nonce(key: &[u8]) -> bool {
    let mut nonce = [0u8; 18];
    key.len() == 24 && STANDARD.decode_slice(key, &mut nonce) == Ok(16)
}

/// The first of the server's subprotocols that the client offers.
fn choose_protocol(headers: &Headers, preferred: &[String]) -> Option<String> {
    preferred
        .iter()
        .find(|p| elements(headers.get_all("sec-websocket-protocol")).any(|o| o == p.as_bytes()))
        .cloned()
}

/// The 101 head.
fn switching_protocols(
    accept: &[u8; 28],
    negotiated: &Negotiated,
    extra: &[(String, Vec<u8>)],
) -> Result<Bytes, Error> {
    let mut fields: Vec<(&str, &[u8])> = Vec::with_capacity(5 + extra.len());
    fields.push(("Upgrade", b"websocket"));
    fields.push(("Connection", b"Upgrade"));
    fields.push(("Sec-WebSocket-Accept", accept));
    if let Some(protocol) = &negotiated.protocol {
        fields.push(("Sec-WebSocket-Protocol", protocol.as_bytes()));
    }
    #[cfg(feature = "deflate")]
    let extension = negotiated.deflate.as_ref().map(DeflateParams::to_header);
    #[cfg(feature = "deflate")]
    if let Some(extension) = &extension {
        fields.push(("Sec-WebSocket-Extensions", extension.as_bytes()));
    }
    fields.extend(extra.iter().map(|(n, v)| (n.as_str(), v.as_slice())));
    crate::http1::response(101, "Switching Protocols", &fields, Body::Empty)
}
