//! What a request head says (`RequestHead`), and the checks of its Host a
//! router relies on.

use alloc::string::String;

use bytes::Bytes;

use crate::error::HttpField;
use crate::http1::host::{absolute_authority, is_host, is_target_authority, is_target_form};

/// What a request head says: one copy of the head, and where each part
/// is in it (one allocation, however many headers).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestHead {
    head: Bytes,
    method: Span,
    path: Span,
    version: u8,
    host: Option<Span>,
    upgrade: Option<Span>,
    connection: Option<Span>,
    /// Some `Connection` line lists `upgrade` (the lines of a list field
    /// combine, RFC 9110 section 5.3).
    upgrade_listed: bool,
}

/// Where a part is in the head.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Span {
    at: usize,
    len: usize,
}

impl RequestHead {
    fn text(&self, span: Span) -> &str {
        // Every span was checked to be UTF-8 when it was made.
        core::str::from_utf8(&self.head[span.at..span.at + span.len]).unwrap_or_default()
    }

    /// The method, as sent.
    pub fn method(&self) -> &str {
        self.text(self.method)
    }

    /// The request target, as sent.
    pub fn path(&self) -> &str {
        self.text(self.path)
    }

    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub fn version(&self) -> u8 {
        self.version
    }

    /// The host the request is for, port included if sent: the Host
    /// header, trimmed, or, when there is none, the authority of an
    /// absolute-form request target (`GET http://example.com/ HTTP/1.0`).
    ///
    /// The sniffer refuses a head whose Host is repeated, is not a
    /// `host[:port]`, or is not the authority its target names
    /// ([`HttpField::Host`](crate::HttpField::Host)), so this is the host a server will take this
    /// request to be for.
    ///
    /// It is this one request's: the sniffer reads the first head of a
    /// connection, and a router decides once per connection. A keep-alive
    /// client can send its next request on the same connection for another
    /// host, which no sniffer sees; a router that must not pass such a
    /// request to this request's backend needs per-request routing (HTTP
    /// body framing), or a backend that checks each Host itself.
    pub fn host(&self) -> Option<&str> {
        self.host.map(|s| self.text(s))
    }

    /// The (first) Upgrade header, trimmed.
    pub fn upgrade(&self) -> Option<&str> {
        self.upgrade.map(|s| self.text(s))
    }

    /// The first Connection header, trimmed.
    pub fn connection(&self) -> Option<&str> {
        self.connection.map(|s| self.text(s))
    }

    /// The whole head as it was sent.
    pub fn as_bytes(&self) -> &Bytes {
        &self.head
    }

    /// Whether the request asks to switch protocols, as cleave's HTTP/1.1
    /// server reads it: a `Connection` line lists `upgrade`, an `Upgrade`
    /// header names the protocol, and the request is HTTP/1.1 (a server
    /// ignores Upgrade in HTTP/1.0, RFC 9110 section 7.8).
    pub fn is_upgrade(&self) -> bool {
        self.upgrade_listed && self.upgrade.is_some() && self.version == 1
    }

    /// The host without its port, lowercased: what routing compares. An
    /// IPv6 literal comes without its brackets (`[::1]:8080` gives `::1`).
    /// A trailing dot is kept here; [`HostPattern`](crate::route::HostPattern)
    /// ignores it when it compares. Nothing is rewritten on the wire: the
    /// backend sees the Host as the client sent it.
    pub fn host_name(&self) -> Option<String> {
        let host = self.host()?;
        let name = match host.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(v6),
            None => host.rsplit_once(':').map_or(host, |(name, _)| name),
        };
        Some(name.to_ascii_lowercase())
    }
}

/// The head's facts, or what goes wrong with its target or Host, and where.
pub(super) fn head_of(
    request: &httparse::Request<'_, '_>,
    head: &[u8],
) -> Result<RequestHead, (HttpField, usize)> {
    // Where a slice httparse handed out sits in the head.
    let span = |part: &[u8]| Span {
        at: part.as_ptr() as usize - head.as_ptr() as usize,
        len: part.len(),
    };
    let text = |value: &[u8]| core::str::from_utf8(value).ok().map(|_| span(value));

    // One pass over the headers; the names' lengths sort them first.
    let (mut host, mut upgrade, mut connection) = (None, None, None);
    let mut upgrade_listed = false;
    for h in request.headers.iter() {
        let name = h.name.as_bytes();
        let value = h.value.trim_ascii();
        match name.len() {
            4 if name.eq_ignore_ascii_case(b"host") => {
                if host.is_some() {
                    return Err((HttpField::Host, span(value).at)); // servers disagree on which counts
                }
                host = Some(value);
            }
            7 if upgrade.is_none() && name.eq_ignore_ascii_case(b"upgrade") => {
                upgrade = text(value)
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                upgrade_listed |= crate::http1::framing::elements(value)
                    .any(|token| token.eq_ignore_ascii_case(b"upgrade"));
                if connection.is_none() {
                    connection = text(value);
                }
            }
            _ => {}
        }
    }
    let path = request.path.unwrap_or_default();
    let method = request.method.unwrap_or_default();

    // The target's form, as a server judges it (a target another parser
    // may read with another authority is refused there).
    if !is_target_form(method.as_bytes(), path.as_bytes()) {
        return Err((HttpField::RequestLine, span(path.as_bytes()).at));
    }
    // The Host: a host[:port], and the target's authority when the target
    // names one.
    if let Some(value) = host {
        if !is_host(value) {
            return Err((HttpField::Host, span(value).at));
        }
    }
    let authority = if method == "CONNECT" {
        Some(path.as_bytes())
    } else {
        absolute_authority(path.as_bytes())
    };
    let host = match (host, authority) {
        (_, Some(authority)) if !is_target_authority(authority, method == "CONNECT") => {
            return Err((HttpField::RequestLine, span(path.as_bytes()).at))
        }
        (Some(host), Some(authority)) if !host.eq_ignore_ascii_case(authority) => {
            return Err((HttpField::Host, span(host).at))
        }
        (Some(host), _) => Some(host),
        (None, authority) => authority,
    };

    Ok(RequestHead {
        head: Bytes::copy_from_slice(head),
        method: span(method.as_bytes()),
        path: span(path.as_bytes()),
        version: request.version.unwrap_or_default(),
        host: host.map(span),
        upgrade,
        connection,
        upgrade_listed,
    })
}
