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
use sha1::{Digest, Sha1};

use crate::error::{Error, InvalidInput, WsField};
use crate::http1::chars::is_token;
use crate::http1::Headers;

#[cfg(feature = "deflate")]
use super::deflate::DeflateParams;

mod client;
mod server;
#[cfg(test)]
mod tests;

pub use client::{ClientHandshake, ConnectConfig};
pub use server::{accept, refusal, AcceptConfig, Accepted};

/// The GUID RFC 6455 (section 1.3) appends to the key: only a WebSocket
/// server knows to do so, which is what the accept value proves.
pub(super) const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The only version of the protocol there is (RFC 6455, section 4.1).
pub(super) const VERSION: &[u8] = b"13";

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

#[cold]
pub(super) fn invalid(field: WsField) -> Error {
    Error::InvalidInput {
        kind: InvalidInput::WebSocket(field),
        offset: 0,
    }
}

/// The elements of a comma-separated list spread over several fields
/// (RFC 9110, section 5.6.1), without the whitespace around them; empty
/// ones skipped, as a recipient must.
pub(super) fn elements<'a>(
    fields: impl Iterator<Item = &'a [u8]> + 'a,
) -> impl Iterator<Item = &'a [u8]> + 'a {
    fields.flat_map(crate::http1::framing::elements)
}

/// Whether a list holds `token`, compared without case.
pub(super) fn has_token<'a>(fields: impl Iterator<Item = &'a [u8]> + 'a, token: &[u8]) -> bool {
    elements(fields).any(|e| e.eq_ignore_ascii_case(token))
}

/// The value of a field that may appear once: `None` if it is missing or
/// repeated (RFC 6455, section 11.3).
pub(super) fn only<'a>(headers: &'a Headers, name: &'a str) -> Option<&'a [u8]> {
    let mut fields = headers.get_all(name);
    let value = fields.next()?;
    fields.next().is_none().then_some(value)
}

/// Subprotocols must be distinct tokens (RFC 6455, section 4.1): anything
/// else could not be read back from the comma-separated list.
pub(super) fn check_protocols(protocols: &[String]) -> Result<(), Error> {
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
pub(super) fn check_extra_headers(headers: &[(String, Vec<u8>)]) -> Result<(), Error> {
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

/// Whether a request target names a resource as RFC 6455 (sections 3
/// and 4.2.1) asks: a path (`/` and an optional query), or an absolute
/// `http`, `https`, `ws` or `wss` URI holding one; not `*`, not an
/// authority alone (`host:port`), not another scheme; and no fragment
/// ("fragment identifiers ... MUST NOT be used", section 3).
pub(super) fn is_resource_name(target: &str) -> bool {
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
