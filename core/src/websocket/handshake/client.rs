//! The client's side of the opening handshake: the upgrade request
//! written, and the answer checked.

use alloc::string::String;
use alloc::vec::Vec;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use bytes::Bytes;

use crate::error::{Error, WsField};
use crate::http1::{Body, Headers, Response};

use super::{
    accept_key, check_extra_headers, check_protocols, elements, has_token, invalid,
    is_resource_name, only, Negotiated, VERSION,
};
#[cfg(feature = "deflate")]
use crate::websocket::deflate::{DeflateConfig, DeflateParams};
use crate::websocket::Entropy;

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
    /// [`accept`](super::accept) refuses), or an absolute `ws` or `wss`
    /// one: a client sends a path or an absolute `http` or `https` URI
    /// (RFC 6455, section 4.1), though a server takes all four;
    /// `Misuse::Unencodable` for a target or a field
    /// that cannot be sent otherwise (as [`request`](crate::http1::request)).
    pub fn new(
        host: &str,
        target: &str,
        config: &ConnectConfig,
        entropy: &mut dyn Entropy,
    ) -> Result<(Self, Bytes), Error> {
        let ws_scheme = target.split_once("://").is_some_and(|(scheme, _)| {
            scheme.eq_ignore_ascii_case("ws") || scheme.eq_ignore_ascii_case("wss")
        });
        if host.is_empty() || !is_resource_name(target) || ws_scheme {
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
    /// [`InvalidInput::WebSocket`](crate::InvalidInput::WebSocket) at offset 0: [`WsField::Handshake`] for
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
