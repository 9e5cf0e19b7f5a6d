//! The opening handshake (RFC 6455, section 4), both roles: a server
//! checks an upgrade request and writes the 101 that accepts it (or the
//! 400/426 that refuses it); a client writes the upgrade request and checks
//! the answer. Subprotocols and extensions are chosen here, once, so the
//! frames that follow never negotiate anything.
//!
//! Both roles work on heads the HTTP/1.1 module already parsed
//! ([`Request`] from a [`Server`](crate::http1::Server)'s `Head` event,
//! [`Response`] from a [`Client`](crate::http1::Client)'s), so the framing
//! rules of HTTP (one Host, no smuggling) are checked before anything here.

use alloc::string::String;
use alloc::vec::Vec;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use bytes::Bytes;
use sha1::{Digest, Sha1};

use crate::error::{Error, InvalidInput, WsField};
use crate::http1::chars::is_token;
use crate::http1::{Body, Headers, Request, Response, Version};

#[cfg(feature = "deflate")]
use super::deflate::{DeflateConfig, DeflateParams};
use super::Entropy;

/// The GUID RFC 6455 (section 1.3) appends to the key: only a WebSocket
/// server knows to do so, which is what the accept value proves.
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The only version of the protocol there is (RFC 6455, section 4.1).
const VERSION: &[u8] = b"13";

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

/// The accept value a server answers a `Sec-WebSocket-Key` with:
/// base64(SHA-1(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")), 28 ASCII
/// bytes (RFC 6455, section 4.2.2). `key` is the header's value as sent
/// (its base64 text, not the bytes it decodes to).
///
/// ```
/// use cleave_proto::websocket::accept_key;
///
/// assert_eq!(&accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="), b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
/// ```
#[must_use]
pub fn accept_key(key: &[u8]) -> [u8; 28] {
    let mut sha1 = Sha1::new();
    sha1.update(key);
    sha1.update(GUID);
    let digest = sha1.finalize();
    let mut out = [0u8; 28];
    // 20 bytes are exactly 28 base64 characters (with one `=`): the slice
    // always fits, so the error cannot happen.
    let _written = STANDARD.encode_slice(digest, &mut out);
    out
}

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

/// What a handshake settled, on either side: the subprotocol and the
/// extension both ends now speak.
#[derive(Clone, Debug, Default)]
pub struct Negotiated {
    protocol: Option<String>,
    #[cfg(feature = "deflate")]
    deflate: Option<DeflateParams>,
}

impl Negotiated {
    /// The subprotocol chosen, if any.
    #[must_use]
    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    /// The permessage-deflate parameters agreed on, if the extension is in
    /// use.
    #[cfg(feature = "deflate")]
    #[must_use]
    pub fn deflate(&self) -> Option<DeflateParams> {
        self.deflate
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
    /// [`check`](ClientHandshake::check) gives it.
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
/// [`InvalidInput::WebSocket`]`(`[`WsField::Handshake`]`)` at offset 0
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

/// Whether a request target names a resource as RFC 6455 (sections 3
/// and 4.2.1) asks: a path (`/` and an optional query), or an absolute
/// `http`, `https`, `ws` or `wss` URI holding one; not `*`, not an
/// authority alone (`host:port`), not another scheme; and no fragment
/// ("fragment identifiers ... MUST NOT be used", section 3).
fn is_resource_name(target: &str) -> bool {
    if target.contains('#') {
        return false;
    }
    if target.starts_with('/') {
        return true;
    }
    let Some((scheme, rest)) = target.split_once("://") else {
        return false;
    };
    ["http", "https", "ws", "wss"]
        .iter()
        .any(|s| s.eq_ignore_ascii_case(scheme))
        && !rest.is_empty()
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

/// What a client asks for: the subprotocols it offers (in its order of
/// preference), extra request fields (an `Origin`, a cookie, credentials),
/// and a permessage-deflate offer (with the `deflate` feature).
///
/// ```
/// use cleave_proto::websocket::ConnectConfig;
///
/// let config = ConnectConfig::default()
///     .protocols(["v2.chat", "v1.chat"])
///     .header("Origin", b"https://example.com");
/// # let _ = config;
/// ```
#[derive(Clone, Debug, Default)]
pub struct ConnectConfig {
    protocols: Vec<String>,
    headers: Vec<(String, Vec<u8>)>,
    #[cfg(feature = "deflate")]
    deflate: Option<DeflateConfig>,
}

impl ConnectConfig {
    /// The subprotocols to offer, the preferred first: distinct tokens
    /// (RFC 6455, section 4.1), checked by [`ClientHandshake::new`].
    #[must_use]
    pub fn protocols<I>(mut self, protocols: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.protocols = protocols.into_iter().map(Into::into).collect();
        self
    }

    /// One more field for the request, after the handshake's own. It may
    /// not be one the handshake writes (`Host`, `Upgrade`, `Connection`,
    /// `Sec-WebSocket-*`) nor frame a body; [`ClientHandshake::new`]
    /// checks.
    #[must_use]
    pub fn header(mut self, name: &str, value: &[u8]) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Offers permessage-deflate (RFC 7692) with these parameters.
    #[cfg(feature = "deflate")]
    #[must_use]
    pub fn deflate(mut self, config: DeflateConfig) -> Self {
        self.deflate = Some(config);
        self
    }
}

/// A client's side of the handshake, between the request it sent and the
/// answer: what that answer must say.
///
/// ```
/// use cleave_proto::http1::{Client, ClientEvent};
/// use cleave_proto::websocket::{ClientHandshake, ConnectConfig};
/// use cleave_proto::Conn;
/// use std::time::Duration;
///
/// let mut entropy = |buf: &mut [u8]| buf.fill(7); // the OS's randomness, in an adapter
/// let (handshake, request) =
///     ClientHandshake::new("example.com", "/chat", &ConnectConfig::default(), &mut entropy)?;
/// assert!(request.starts_with(b"GET /chat HTTP/1.1\r\nHost: example.com\r\n"));
///
/// let mut client = Client::new();
/// client.expect_upgrade("GET"); // the request went out
/// let mut conn = Conn::new(client, Duration::ZERO);
/// conn.feed(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
///     Sec-WebSocket-Accept: CdXSYUsvsaMthlEXWDNURGWA/1o=\r\n\r\n", Duration::ZERO)?;
/// let Some(ClientEvent::Head(response)) = conn.poll_event()? else { panic!() };
/// let negotiated = handshake.check(&response)?;
/// assert_eq!(negotiated.protocol(), None);
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ClientHandshake {
    accept: [u8; 28],
    protocols: Vec<String>,
    #[cfg(feature = "deflate")]
    deflate: Option<DeflateConfig>,
}

impl ClientHandshake {
    /// Writes the upgrade request (RFC 6455, section 4.1): `GET target
    /// HTTP/1.1` with `Host`, `Upgrade: websocket`, `Connection: Upgrade`,
    /// a `Sec-WebSocket-Key` from 16 bytes of `entropy`,
    /// `Sec-WebSocket-Version: 13`, the subprotocols and the extension
    /// offered, then the extra fields. Returns the state that checks the
    /// answer, and the request to send; record it on the
    /// [`Client`](crate::http1::Client) with `expect_upgrade("GET")`.
    ///
    /// # Errors
    ///
    /// `Misuse::InvalidConfig` for a subprotocol that is not a token (or
    /// twice) or an extra header the handshake writes itself;
    /// [`Unencodable::WsTarget`](crate::Unencodable::WsTarget) for an
    /// empty `host` or a `target` that is not a resource name (what
    /// [`accept`] refuses); `Misuse::Unencodable` for a target or a field
    /// that cannot be sent otherwise (as [`request`](crate::http1::request)).
    pub fn new(
        host: &str,
        target: &str,
        config: &ConnectConfig,
        entropy: &mut dyn Entropy,
    ) -> Result<(Self, Bytes), Error> {
        if host.is_empty() || !is_resource_name(target) {
            return Err(Error::Misuse(crate::error::Misuse::Unencodable(
                crate::error::Unencodable::WsTarget,
            )));
        }
        check_protocols(&config.protocols)?;
        check_extra_headers(&config.headers)?;
        let mut nonce = [0u8; 16];
        entropy.fill(&mut nonce);
        let mut key = [0u8; 24];
        // 16 bytes are exactly 24 base64 characters: it always fits.
        let _written = STANDARD.encode_slice(nonce, &mut key);

        let protocols = config.protocols.join(", ");
        let mut fields: Vec<(&str, &[u8])> = Vec::with_capacity(7 + config.headers.len());
        fields.push(("Host", host.as_bytes()));
        fields.push(("Upgrade", b"websocket"));
        fields.push(("Connection", b"Upgrade"));
        fields.push(("Sec-WebSocket-Key", &key));
        fields.push(("Sec-WebSocket-Version", VERSION));
        if !protocols.is_empty() {
            fields.push(("Sec-WebSocket-Protocol", protocols.as_bytes()));
        }
        #[cfg(feature = "deflate")]
        let offer = config.deflate.as_ref().map(DeflateParams::offer);
        #[cfg(feature = "deflate")]
        if let Some(offer) = &offer {
            fields.push(("Sec-WebSocket-Extensions", offer.as_bytes()));
        }
        fields.extend(
            config
                .headers
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_slice())),
        );
        let request = crate::http1::request("GET", target, &fields, Body::Empty)?;

        let handshake = Self {
            accept: accept_key(&key),
            protocols: config.protocols.clone(),
            #[cfg(feature = "deflate")]
            deflate: config.deflate.clone(),
        };
        Ok((handshake, request))
    }

    /// Checks the server's answer, from a [`Client`](crate::http1::Client)'s
    /// `Head` event (RFC 6455, section 4.1): a 101 with `Upgrade:
    /// websocket`, a `Connection` with the token `upgrade`, the
    /// `Sec-WebSocket-Accept` that proves the server read this key, at
    /// most a subprotocol that was offered, and no extension that was not
    /// (permessage-deflate, with parameters its offer allows).
    ///
    /// # Errors
    ///
    /// [`InvalidInput::WebSocket`] at offset 0: [`WsField::Handshake`] for
    /// a status other than 101, a missing or wrong `Upgrade`,
    /// `Connection` or `Sec-WebSocket-Accept`; [`WsField::Negotiation`]
    /// for a subprotocol or an extension that was not offered. Either
    /// way the connection must be closed.
    pub fn check(&self, response: &Response) -> Result<Negotiated, Error> {
        let headers = response.headers();
        let mut upgrade = elements(headers.get_all("upgrade"));
        let upgraded = response.status() == 101
            && upgrade
                .next()
                .is_some_and(|u| u.eq_ignore_ascii_case(b"websocket"))
            && upgrade.next().is_none()
            && has_token(headers.get_all("connection"), b"upgrade")
            && only(headers, "sec-websocket-accept") == Some(&self.accept[..]);
        if !upgraded {
            return Err(invalid(WsField::Handshake));
        }
        #[cfg(not(feature = "deflate"))]
        no_extension(headers)?;
        Ok(Negotiated {
            protocol: self.chosen_protocol(headers)?,
            #[cfg(feature = "deflate")]
            deflate: self.chosen_deflate(headers)?,
        })
    }

    /// The server's subprotocol: none, or one of those offered (one
    /// field, one value).
    fn chosen_protocol(&self, headers: &Headers) -> Result<Option<String>, Error> {
        let mut fields = headers.get_all("sec-websocket-protocol");
        let Some(chosen) = fields.next() else {
            return Ok(None);
        };
        if fields.next().is_some() {
            return Err(invalid(WsField::Negotiation));
        }
        self.protocols
            .iter()
            .find(|p| p.as_bytes() == chosen)
            .map(|p| Some(p.clone()))
            .ok_or_else(|| invalid(WsField::Negotiation))
    }

    /// The server's extension: none, or permessage-deflate if it was
    /// offered. Only one was ever offered, so it comes in one field.
    #[cfg(feature = "deflate")]
    fn chosen_deflate(&self, headers: &Headers) -> Result<Option<DeflateParams>, Error> {
        let mut fields = headers.get_all("sec-websocket-extensions");
        let Some(chosen) = fields.next() else {
            return Ok(None);
        };
        match &self.deflate {
            Some(offered) if fields.next().is_none() => {
                DeflateParams::from_response(chosen, offered).map(Some)
            }
            _ => Err(invalid(WsField::Negotiation)),
        }
    }
}

/// Without the `deflate` feature nothing is offered: any extension in an
/// answer is one the server may not choose.
#[cfg(not(feature = "deflate"))]
fn no_extension(headers: &Headers) -> Result<(), Error> {
    match headers.get("sec-websocket-extensions") {
        Some(_) => Err(invalid(WsField::Negotiation)),
        None => Ok(()),
    }
}

#[cold]
fn invalid(field: WsField) -> Error {
    Error::InvalidInput {
        kind: InvalidInput::WebSocket(field),
        offset: 0,
    }
}

/// The elements of a comma-separated list spread over several fields
/// (RFC 9110, section 5.6.1), without the whitespace around them; empty
/// ones skipped, as a recipient must.
fn elements<'a>(
    fields: impl Iterator<Item = &'a [u8]> + 'a,
) -> impl Iterator<Item = &'a [u8]> + 'a {
    fields
        .flat_map(|value| value.split(|&b| b == b','))
        .map(trim)
        .filter(|e| !e.is_empty())
}

fn trim(mut value: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = value {
        value = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = value {
        value = rest;
    }
    value
}

/// Whether a list holds `token`, compared without case.
fn has_token<'a>(fields: impl Iterator<Item = &'a [u8]> + 'a, token: &[u8]) -> bool {
    elements(fields).any(|e| e.eq_ignore_ascii_case(token))
}

/// The value of a field that may appear once: `None` if it is missing or
/// repeated (RFC 6455, section 11.3).
fn only<'a>(headers: &'a Headers, name: &'a str) -> Option<&'a [u8]> {
    let mut fields = headers.get_all(name);
    let value = fields.next()?;
    fields.next().is_none().then_some(value)
}

/// Subprotocols must be distinct tokens (RFC 6455, section 4.1): anything
/// else could not be read back from the comma-separated list.
fn check_protocols(protocols: &[String]) -> Result<(), Error> {
    for (i, protocol) in protocols.iter().enumerate() {
        let repeated = protocols
            .get(..i)
            .is_some_and(|before| before.contains(protocol));
        if !is_token(protocol.as_bytes()) || repeated {
            return Err(Error::invalid_config(
                "protocols",
                i as u64,
                "distinct tokens (RFC 6455, section 4.1)",
            ));
        }
    }
    Ok(())
}

/// An extra field may not be one the handshake writes: a second
/// `Upgrade` or `Sec-WebSocket-Accept` would make the handshake say two
/// things. (The encoder refuses the framing fields.)
fn check_extra_headers(headers: &[(String, Vec<u8>)]) -> Result<(), Error> {
    for (i, (name, _)) in headers.iter().enumerate() {
        let reserved = ["host", "upgrade", "connection"]
            .iter()
            .any(|r| name.eq_ignore_ascii_case(r))
            || name
                .get(..14)
                .is_some_and(|p| p.eq_ignore_ascii_case("sec-websocket-"));
        if reserved {
            return Err(Error::invalid_config(
                "header",
                i as u64,
                "a field the handshake does not write itself",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Misuse;
    use crate::http1::{Client, ClientEvent, Server, ServerEvent};
    use crate::Conn;
    use alloc::format;
    use alloc::string::ToString;
    use core::time::Duration;

    const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

    fn parse_request(bytes: &[u8]) -> Request {
        let mut conn = Conn::new(Server::new(), Duration::ZERO);
        conn.feed(bytes, Duration::ZERO).unwrap();
        match conn.poll_event().unwrap() {
            Some(ServerEvent::Head(request)) => request,
            other => panic!("not a request head: {other:?}"),
        }
    }

    fn parse_response(bytes: &[u8]) -> Response {
        let mut client = Client::new();
        client.expect_upgrade("GET");
        let mut conn = Conn::new(client, Duration::ZERO);
        conn.feed(bytes, Duration::ZERO).unwrap();
        match conn.poll_event().unwrap() {
            Some(ClientEvent::Head(response)) => response,
            other => panic!("not a response head: {other:?}"),
        }
    }

    /// A valid request with `fields` in place of the handshake's own
    /// (each `(name, None)` removes one, `(name, Some(value))` replaces
    /// or adds it), after a request line.
    fn request_with(line: &str, fields: &[(&str, Option<&str>)]) -> Request {
        let mut all: Vec<(String, String)> = [
            ("Host", "server.example.com"),
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Key", KEY),
            ("Sec-WebSocket-Version", "13"),
        ]
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
        for (name, value) in fields {
            let at = all.iter().position(|(n, _)| n.eq_ignore_ascii_case(name));
            match (at, value) {
                (Some(at), Some(v)) => all[at].1 = v.to_string(),
                (Some(at), None) => drop(all.remove(at)),
                (None, Some(v)) => all.push((name.to_string(), v.to_string())),
                (None, None) => {}
            }
        }
        let mut text = format!("{line}\r\n");
        for (name, value) in all {
            text += &format!("{name}: {value}\r\n");
        }
        text += "\r\n";
        parse_request(text.as_bytes())
    }

    fn valid(fields: &[(&str, Option<&str>)]) -> Request {
        request_with("GET /chat HTTP/1.1", fields)
    }

    fn is_handshake_error(result: &Result<Accepted, Error>) -> bool {
        matches!(
            result,
            Err(Error::InvalidInput {
                kind: InvalidInput::WebSocket(WsField::Handshake),
                offset: 0
            })
        )
    }

    #[test]
    fn accept_key_is_the_rfc_example() {
        assert_eq!(&accept_key(KEY.as_bytes()), b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn accepts_a_valid_request() {
        let accepted = accept(&valid(&[]), &AcceptConfig::default()).unwrap();
        assert_eq!(
            accepted.response(),
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"
        );
        assert_eq!(accepted.protocol(), None);
        let response = parse_response(accepted.response());
        assert!(response.switches());
    }

    #[test]
    fn refuses_each_missing_or_wrong_requirement() {
        let config = AcceptConfig::default();
        let refused: &[(&str, Request)] = &[
            ("POST", request_with("POST /chat HTTP/1.1", &[])),
            ("HTTP/1.0", request_with("GET /chat HTTP/1.0", &[])),
            ("no Upgrade", valid(&[("Upgrade", None)])),
            ("Upgrade: h2c", valid(&[("Upgrade", Some("h2c"))])),
            (
                "Upgrade: websockets",
                valid(&[("Upgrade", Some("websockets"))]),
            ),
            ("no Connection", valid(&[("Connection", None)])),
            (
                "Connection: keep-alive",
                valid(&[("Connection", Some("keep-alive"))]),
            ),
            (
                "Connection: upgrades",
                valid(&[("Connection", Some("upgrades"))]),
            ),
            ("no key", valid(&[("Sec-WebSocket-Key", None)])),
            ("empty key", valid(&[("Sec-WebSocket-Key", Some(""))])),
            // 15 and 17 bytes, not base64, unpadded, non-canonical bits.
            (
                "short key",
                valid(&[("Sec-WebSocket-Key", Some("AAAAAAAAAAAAAAAAAAAA"))]),
            ),
            (
                "long key",
                valid(&[("Sec-WebSocket-Key", Some("AAAAAAAAAAAAAAAAAAAAAAA="))]),
            ),
            (
                "not base64",
                valid(&[("Sec-WebSocket-Key", Some("!!!!!!!!!!!!!!!!!!!!!!=="))]),
            ),
            (
                "unpadded",
                valid(&[("Sec-WebSocket-Key", Some("dGhlIHNhbXBsZSBub25jZQ"))]),
            ),
            (
                "trailing bits",
                valid(&[("Sec-WebSocket-Key", Some("dGhlIHNhbXBsZSBub25jZR=="))]),
            ),
            ("no version", valid(&[("Sec-WebSocket-Version", None)])),
            ("version 8", valid(&[("Sec-WebSocket-Version", Some("8"))])),
            (
                "version 13, 8",
                valid(&[("Sec-WebSocket-Version", Some("13, 8"))]),
            ),
            ("a body", valid(&[("Content-Length", Some("3"))])),
        ];
        for (what, request) in refused {
            assert!(is_handshake_error(&accept(request, &config)), "{what}");
        }
    }

    #[test]
    fn refuses_repeated_key_and_version() {
        let key = KEY.as_bytes();
        let two_keys = format!(
            "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Key: {KEY}\r\n\
             Sec-WebSocket-Version: 13\r\n\r\n"
        );
        let request = parse_request(two_keys.as_bytes());
        assert_eq!(request.headers().get("sec-websocket-key"), Some(key));
        assert!(is_handshake_error(&accept(
            &request,
            &AcceptConfig::default()
        )));
        let two_versions = format!(
            "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\
             Sec-WebSocket-Version: 13\r\n\r\n"
        );
        let request = parse_request(two_versions.as_bytes());
        assert!(is_handshake_error(&accept(
            &request,
            &AcceptConfig::default()
        )));
        assert!(refusal(&request).starts_with(b"HTTP/1.1 426 "));
    }

    #[test]
    fn a_body_of_length_zero_is_no_body() {
        assert!(accept(
            &valid(&[("Content-Length", Some("0"))]),
            &AcceptConfig::default()
        )
        .is_ok());
    }

    #[test]
    fn refusal_is_426_for_the_version_only() {
        let response = parse_response(&refusal(&valid(&[("Sec-WebSocket-Version", Some("8"))])));
        assert_eq!(response.status(), 426);
        assert_eq!(
            response.headers().get("sec-websocket-version"),
            Some(&b"13"[..])
        );
        assert_eq!(response.headers().get("content-length"), Some(&b"0"[..]));
        assert!(!response.keep_alive());

        for request in [
            valid(&[("Sec-WebSocket-Key", None)]),
            valid(&[("Connection", Some("keep-alive"))]),
            request_with("POST / HTTP/1.1", &[("Sec-WebSocket-Version", Some("8"))]),
        ] {
            let response = parse_response(&refusal(&request));
            assert_eq!(response.status(), 400);
            assert_eq!(response.headers().get("sec-websocket-version"), None);
            assert_eq!(response.headers().get("content-length"), Some(&b"0"[..]));
            assert!(!response.keep_alive());
        }
    }

    #[test]
    fn tokens_are_compared_without_case() {
        let request = parse_request(
            format!(
                "GET / HTTP/1.1\r\nhost: a\r\nupgrade: WebSocket\r\nCONNECTION: UPGRADE\r\n\
                 sec-websocket-key: {KEY}\r\nSEC-WEBSOCKET-VERSION: 13\r\n\r\n"
            )
            .as_bytes(),
        );
        assert!(accept(&request, &AcceptConfig::default()).is_ok());
    }

    #[test]
    fn tokens_are_found_in_lists() {
        let config = AcceptConfig::default();
        for (upgrade, connection) in [
            ("websocket", "keep-alive, Upgrade"),
            ("h2c, websocket", "Upgrade,keep-alive"),
            ("websocket", "keep-alive , upgrade ,"),
        ] {
            let request = valid(&[("Upgrade", Some(upgrade)), ("Connection", Some(connection))]);
            assert!(
                accept(&request, &config).is_ok(),
                "{upgrade} / {connection}"
            );
        }
    }

    #[test]
    fn chooses_the_servers_preferred_protocol_among_the_offered() {
        let config = AcceptConfig::default().protocols(["v3", "v2", "v1"]);
        let cases: &[(&[&str], Option<&str>)] = &[
            (&["v1, v2"], Some("v2")),
            (&["v1", "v3"], Some("v3")),
            (&["v1,,  v0"], Some("v1")),
            (&["V2, v4"], None),
            (&[], None),
        ];
        for (offers, chosen) in cases {
            let mut text = format!(
                "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                 Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n"
            );
            for offer in *offers {
                text += &format!("Sec-WebSocket-Protocol: {offer}\r\n");
            }
            text += "\r\n";
            let accepted = accept(&parse_request(text.as_bytes()), &config).unwrap();
            assert_eq!(accepted.protocol(), *chosen, "{offers:?}");
            let response = parse_response(accepted.response());
            let field = response.headers().get("sec-websocket-protocol");
            assert_eq!(field, chosen.map(str::as_bytes), "{offers:?}");
        }
        let request = valid(&[("Sec-WebSocket-Protocol", Some("v1"))]);
        assert_eq!(
            accept(&request, &AcceptConfig::default())
                .unwrap()
                .protocol(),
            None
        );
    }

    #[test]
    fn extra_headers_follow_the_handshakes_own() {
        let config = AcceptConfig::default().header("Set-Cookie", b"a=1");
        let accepted = accept(&valid(&[]), &config).unwrap();
        assert!(accepted.response().ends_with(
            b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSet-Cookie: a=1\r\n\r\n"
        ));
    }

    #[test]
    fn refuses_bad_configuration() {
        let is_config = |e: Error| matches!(e, Error::Misuse(Misuse::InvalidConfig { .. }));
        let request = valid(&[]);
        for config in [
            AcceptConfig::default().protocols(["a b"]),
            AcceptConfig::default().protocols([""]),
            AcceptConfig::default().protocols(["a", "b", "a"]),
            AcceptConfig::default().header("Sec-WebSocket-Accept", b"x"),
            AcceptConfig::default().header("connection", b"close"),
        ] {
            assert!(
                is_config(accept(&request, &config).unwrap_err()),
                "{config:?}"
            );
        }
        let config = AcceptConfig::default().header("X-Evil", b"1\r\nUpgrade: h2c");
        assert!(matches!(
            accept(&request, &config),
            Err(Error::Misuse(Misuse::Unencodable(_)))
        ));

        let mut entropy = |buf: &mut [u8]| buf.fill(0);
        for config in [
            ConnectConfig::default().protocols(["chat", "chat"]),
            ConnectConfig::default().protocols(["a,b"]),
            ConnectConfig::default().header("Host", b"elsewhere"),
            ConnectConfig::default().header("sec-websocket-key", b"x"),
        ] {
            let e = ClientHandshake::new("a", "/", &config, &mut entropy).unwrap_err();
            assert!(is_config(e), "{config:?}");
        }
        let e = ClientHandshake::new("a", "/a b", &ConnectConfig::default(), &mut entropy);
        assert!(matches!(e, Err(Error::Misuse(Misuse::Unencodable(_)))));
    }

    #[test]
    fn the_key_comes_from_the_entropy() {
        let mut entropy = |buf: &mut [u8]| {
            for (b, i) in buf.iter_mut().zip(0u8..) {
                *b = i;
            }
        };
        let (_, request) =
            ClientHandshake::new("a", "/", &ConnectConfig::default(), &mut entropy).unwrap();
        let request = parse_request(&request);
        // base64 of the bytes 0 to 15.
        assert_eq!(
            request.headers().get("sec-websocket-key"),
            Some(&b"AAECAwQFBgcICQoLDA0ODw=="[..])
        );
    }

    /// The client's request through the server's parser and `accept`, the
    /// 101 through the client's parser and `check`.
    fn round_trip(
        connect: &ConnectConfig,
        server: &AcceptConfig,
    ) -> (Request, Accepted, Result<Negotiated, Error>) {
        let mut counter = 0u8;
        let mut entropy = |buf: &mut [u8]| {
            for b in buf {
                counter = counter.wrapping_add(37);
                *b = counter;
            }
        };
        let (handshake, request) =
            ClientHandshake::new("example.com:8080", "/chat?room=1", connect, &mut entropy)
                .unwrap();
        let request = parse_request(&request);
        let accepted = accept(&request, server).unwrap();
        let negotiated = handshake.check(&parse_response(accepted.response()));
        (request, accepted, negotiated)
    }

    #[test]
    fn round_trip_with_and_without_protocols() {
        let connect = ConnectConfig::default()
            .protocols(["v1.chat", "v2.chat"])
            .header("Origin", b"https://example.com");
        let server = AcceptConfig::default().protocols(["v2.chat", "v1.chat"]);
        let (request, accepted, negotiated) = round_trip(&connect, &server);
        assert_eq!(request.target(), "/chat?room=1");
        assert_eq!(request.host(), Some("example.com:8080"));
        assert_eq!(
            request.headers().get("origin"),
            Some(&b"https://example.com"[..])
        );
        assert_eq!(
            request.headers().get("sec-websocket-protocol"),
            Some(&b"v1.chat, v2.chat"[..])
        );
        assert_eq!(accepted.protocol(), Some("v2.chat"));
        assert_eq!(negotiated.unwrap().protocol(), Some("v2.chat"));

        let (request, accepted, negotiated) =
            round_trip(&ConnectConfig::default(), &AcceptConfig::default());
        assert_eq!(request.headers().get("sec-websocket-protocol"), None);
        assert_eq!(request.headers().get("sec-websocket-extensions"), None);
        assert_eq!(accepted.protocol(), None);
        assert_eq!(negotiated.unwrap().protocol(), None);
    }

    fn answer(handshake: &ClientHandshake, head: &str) -> Result<Negotiated, Error> {
        handshake.check(&parse_response(head.as_bytes()))
    }

    fn field_of(result: Result<Negotiated, Error>) -> Option<WsField> {
        match result {
            Err(Error::InvalidInput {
                kind: InvalidInput::WebSocket(field),
                offset: 0,
            }) => Some(field),
            _ => None,
        }
    }

    #[test]
    fn check_refuses_what_the_server_may_not_answer() {
        let mut entropy = |buf: &mut [u8]| buf.fill(1);
        let config = ConnectConfig::default().protocols(["chat"]);
        let (handshake, request) = ClientHandshake::new("a", "/", &config, &mut entropy).unwrap();
        let request = parse_request(&request);
        let key = request.headers().get("sec-websocket-key").unwrap();
        let good = core::str::from_utf8(&accept_key(key)).unwrap().to_string();
        let head = |fields: &str| format!("HTTP/1.1 101 Switching Protocols\r\n{fields}\r\n");
        let ok = format!(
            "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {good}\r\n"
        );

        assert!(answer(&handshake, &head(&ok)).is_ok());
        let upper = format!(
            "UPGRADE: WebSocket\r\nconnection: keep-alive, upgrade\r\n\
             sec-websocket-accept: {good}\r\n"
        );
        assert!(answer(&handshake, &head(&upper)).is_ok());
        let chat = format!("{ok}Sec-WebSocket-Protocol: chat\r\n");
        assert_eq!(
            answer(&handshake, &head(&chat)).unwrap().protocol(),
            Some("chat")
        );

        let handshake_errors = [
            ok.replace(&good, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
            ok.replace(&good, &good.to_lowercase()),
            format!("{ok}Sec-WebSocket-Accept: {good}\r\n"),
            ok.replace("Upgrade: websocket\r\n", ""),
            ok.replace("Upgrade: websocket", "Upgrade: websocket, h2c"),
            ok.replace("Connection: Upgrade", "Connection: keep-alive"),
            ok.replace(&format!("Sec-WebSocket-Accept: {good}\r\n"), ""),
        ];
        for fields in &handshake_errors {
            assert_eq!(
                field_of(answer(&handshake, &head(fields))),
                Some(WsField::Handshake),
                "{fields}"
            );
        }
        for status in [
            format!("HTTP/1.1 200 OK\r\n{ok}Content-Length: 0\r\n\r\n"),
            format!("HTTP/1.1 426 Upgrade Required\r\n{ok}Content-Length: 0\r\n\r\n"),
        ] {
            assert_eq!(
                field_of(answer(&handshake, &status)),
                Some(WsField::Handshake),
                "{status}"
            );
        }

        let negotiation_errors = [
            format!("{ok}Sec-WebSocket-Protocol: superchat\r\n"),
            format!("{ok}Sec-WebSocket-Protocol: Chat\r\n"),
            format!("{ok}Sec-WebSocket-Protocol: chat, chat\r\n"),
            format!("{ok}Sec-WebSocket-Protocol: chat\r\nSec-WebSocket-Protocol: chat\r\n"),
            format!("{ok}Sec-WebSocket-Extensions: x-unknown\r\n"),
            format!("{ok}Sec-WebSocket-Extensions: permessage-deflate\r\n"),
        ];
        for fields in &negotiation_errors {
            assert_eq!(
                field_of(answer(&handshake, &head(fields))),
                Some(WsField::Negotiation),
                "{fields}"
            );
        }
    }

    #[test]
    fn a_protocol_answered_to_no_offer_is_refused() {
        let mut entropy = |buf: &mut [u8]| buf.fill(2);
        let (handshake, request) =
            ClientHandshake::new("a", "/", &ConnectConfig::default(), &mut entropy).unwrap();
        let key = parse_request(&request)
            .headers()
            .get("sec-websocket-key")
            .map(accept_key)
            .unwrap();
        let key = core::str::from_utf8(&key).unwrap().to_string();
        let head = format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Accept: {key}\r\nSec-WebSocket-Protocol: chat\r\n\r\n"
        );
        assert_eq!(
            field_of(answer(&handshake, &head)),
            Some(WsField::Negotiation)
        );
    }

    #[cfg(feature = "deflate")]
    mod deflate {
        use super::*;

        fn deflate_config() -> DeflateConfig {
            DeflateConfig::new()
        }

        #[test]
        fn round_trip_with_deflate() {
            let connect = ConnectConfig::default().deflate(deflate_config());
            let server =
                AcceptConfig::default().deflate(deflate_config().no_context_takeover(true));
            let (request, accepted, negotiated) = round_trip(&connect, &server);
            let offer = request.headers().get("sec-websocket-extensions").unwrap();
            assert!(offer.starts_with(b"permessage-deflate"));
            let params = accepted.deflate().unwrap();
            assert!(params.server_no_context_takeover);
            let response = parse_response(accepted.response());
            let answer = response.headers().get("sec-websocket-extensions").unwrap();
            assert_eq!(answer, params.to_header().as_bytes());
            assert_eq!(negotiated.unwrap().deflate(), Some(params));
        }

        #[test]
        fn deflate_needs_both_sides() {
            let offering = ConnectConfig::default().deflate(deflate_config());
            let (_, accepted, negotiated) = round_trip(&offering, &AcceptConfig::default());
            assert_eq!(accepted.deflate(), None);
            let response = parse_response(accepted.response());
            assert_eq!(response.headers().get("sec-websocket-extensions"), None);
            assert_eq!(negotiated.unwrap().deflate(), None);

            let accepting = AcceptConfig::default().deflate(deflate_config());
            let (request, accepted, negotiated) = round_trip(&ConnectConfig::default(), &accepting);
            assert_eq!(request.headers().get("sec-websocket-extensions"), None);
            assert_eq!(accepted.deflate(), None);
            assert_eq!(negotiated.unwrap().deflate(), None);
        }

        #[test]
        fn the_server_skips_other_extensions() {
            let request = valid(&[(
                "Sec-WebSocket-Extensions",
                Some("x-webkit-deflate-frame, permessage-deflate; client_max_window_bits"),
            )]);
            let config = AcceptConfig::default().deflate(deflate_config());
            assert!(accept(&request, &config).unwrap().deflate().is_some());
            let request = valid(&[("Sec-WebSocket-Extensions", Some("x-webkit-deflate-frame"))]);
            let accepted = accept(&request, &config).unwrap();
            assert_eq!(accepted.deflate(), None);
            assert!(!accepted.response().windows(10).any(|w| w == b"Extensions"));
        }

        #[test]
        fn check_refuses_an_extension_not_offered() {
            let mut entropy = |buf: &mut [u8]| buf.fill(3);
            let config = ConnectConfig::default().deflate(deflate_config());
            let (handshake, request) =
                ClientHandshake::new("a", "/", &config, &mut entropy).unwrap();
            let key = parse_request(&request)
                .headers()
                .get("sec-websocket-key")
                .map(accept_key);
            let key = core::str::from_utf8(&key.unwrap()).unwrap().to_string();
            let head = |extensions: &str| {
                format!(
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
                     Connection: Upgrade\r\nSec-WebSocket-Accept: {key}\r\n{extensions}\r\n"
                )
            };
            let deflate = "Sec-WebSocket-Extensions: permessage-deflate\r\n";
            assert!(answer(&handshake, &head(deflate))
                .unwrap()
                .deflate()
                .is_some());
            for extensions in [
                "Sec-WebSocket-Extensions: x-unknown\r\n".to_string(),
                "Sec-WebSocket-Extensions: permessage-deflate, x-unknown\r\n".to_string(),
                format!("{deflate}{deflate}"),
            ] {
                assert_eq!(
                    field_of(answer(&handshake, &head(&extensions))),
                    Some(WsField::Negotiation),
                    "{extensions}"
                );
            }
        }
    }
}
