//! The TLS ClientHello: server name (SNI), ALPN protocols and versions.
//!
//! ```text
//!   record:    type 22 | version (2) | length (2) | fragment ...
//!   handshake: type 1  | length (3)  | ClientHello body ...   (may span records)
//!   body:      legacy_version | random (32) | session_id | cipher_suites
//!              | compression_methods | extensions (server_name 0, ALPN 16,
//!                supported_versions 43, ...)
//! ```
//!
//! The hello may arrive in any pieces and may be split across several
//! handshake records: the sniffer waits for all of it (within its budget)
//! and then parses it whole.

use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use crate::error::{Error, InvalidInput, Limit, TlsField};
use crate::sniff::{Reader, Sniff};

/// Default byte budget of [`sniff`]: 16 KiB of handshake plus record
/// headers. A ClientHello fits in one 16 KiB record; post-quantum key shares
/// make some about 1.8 KiB, padded ones 512 bytes.
pub const DEFAULT_MAX_HELLO: usize = 16 * 1024 + 5 * 4;

const HANDSHAKE: u8 = 22;
const CLIENT_HELLO: u8 = 1;
const MAX_RECORD: usize = 16 * 1024 + 256;

/// What a ClientHello says.
#[non_exhaustive]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientHello {
    /// The version in the first record header (usually 0x0301).
    pub record_version: u16,
    /// The hello's legacy_version (0x0303 for TLS 1.2 and 1.3).
    pub legacy_version: u16,
    /// The host name of the server_name extension, as sent; `None`
    /// without one, or when the client gave an IP address there (ignored,
    /// as rustls ignores it).
    pub server_name: Option<String>,
    /// The ALPN protocol names, in the client's order.
    pub alpn: Vec<Bytes>,
    /// The supported_versions extension, in the client's order (TLS 1.3
    /// clients list 0x0304).
    pub supported_versions: Vec<u16>,
}

impl ClientHello {
    /// Whether the client offers TLS 1.3.
    #[must_use]
    pub fn offers_tls13(&self) -> bool {
        self.supported_versions.contains(&0x0304)
    }

    /// Whether the client offers the ALPN protocol `name`.
    #[must_use]
    pub fn offers_alpn(&self, name: &[u8]) -> bool {
        self.alpn.iter().any(|p| &p[..] == name)
    }
}

fn malformed<T>(field: TlsField, offset: usize) -> Sniff<T> {
    Sniff::Invalid(Error::InvalidInput {
        kind: InvalidInput::Tls(field),
        offset: offset as u64,
    })
}

/// Sniffs a ClientHello at the start of `data`, reading at most `max_len`
/// bytes.
///
/// `NoMatch` when the first bytes are not a TLS handshake record (type 22,
/// major version 3);
/// `Invalid` when they are but a length does not add up, the message is not
/// a ClientHello, or the hello is longer than `max_len`.
///
/// The record layer's minor version is not looked at: RFC 8446, section
/// 5.1, says a ClientHello's `legacy_record_version` must be ignored, and
/// rustls and OpenSSL answer hellos whose records say 0x0300 to 0x03ff.
///
/// For a connection whose bytes arrive in pieces, a [`Sniffer`] gives the
/// same answers while looking at each byte only once.
///
/// ```
/// use cleave_proto::sniff::{tls, Sniff};
///
/// let hello = include_bytes!("../../tests/fixtures/tls_curl.bin");
/// match tls::sniff(hello, tls::DEFAULT_MAX_HELLO) {
///     Sniff::Match { facts, len } => {
///         assert_eq!(facts.server_name.as_deref(), Some("example.com"));
///         assert!(facts.offers_alpn(b"h2"));
///         assert_eq!(len, hello.len());
///     }
///     other => panic!("{other:?}"),
/// }
/// assert_eq!(tls::sniff(&hello[..100], tls::DEFAULT_MAX_HELLO), Sniff::NeedMore);
/// assert_eq!(tls::sniff(b"GET / HTTP/1.1\r\n", tls::DEFAULT_MAX_HELLO), Sniff::NoMatch);
/// ```
#[must_use]
pub fn sniff(data: &[u8], max_len: usize) -> Sniff<ClientHello> {
    let mut sniffer = Sniffer::new();
    sniffer.sniff(data, max_len);
    sniffer.answer
}

/// The TLS sniffer for one connection, resumable: each call looks only at
/// the bytes that arrived since the last one, so a hello trickled in
/// one-byte records costs linear work, not quadratic.
///
/// Give it the connection's first bytes so far on every call (each call's
/// `data` extends the last one's) with the same `max_len`; its answers are
/// those of [`sniff`] on the same bytes. `data` shorter than last time
/// starts it over.
///
/// ```
/// use cleave_proto::sniff::{tls, Sniff};
///
/// let hello = include_bytes!("../../tests/fixtures/tls_curl.bin");
/// let mut sniffer = tls::Sniffer::new();
/// for end in 1..hello.len() {
///     assert_eq!(sniffer.sniff(&hello[..end], tls::DEFAULT_MAX_HELLO), &Sniff::NeedMore);
/// }
/// assert!(matches!(sniffer.sniff(hello, tls::DEFAULT_MAX_HELLO), Sniff::Match { .. }));
/// // Each byte looked at about once, not once per call.
/// assert!(sniffer.examined() < 3 * hello.len() as u64);
/// ```
#[derive(Clone, Debug)]
pub struct Sniffer {
    /// Where the next record header starts.
    at: usize,
    /// Records read whole, and the handshake bytes they carried.
    records: usize,
    gathered: usize,
    /// The handshake message's first four bytes (type and length), as far
    /// as gathered.
    first: [u8; 4],
    /// The handshake message's length, once its header is gathered.
    needed: Option<usize>,
    /// The length of the record at `at`, once its header is checked.
    pending: Option<usize>,
    /// No progress before `data` is this long (the end of the record or
    /// record header being waited for).
    wait: usize,
    /// The longest `data` seen.
    seen: usize,
    examined: u64,
    answer: Sniff<ClientHello>,
}

impl Default for Sniffer {
    fn default() -> Self {
        Self::new()
    }
}

impl Sniffer {
    /// A sniffer that has seen nothing.
    #[must_use]
    pub fn new() -> Self {
        Self {
            at: 0,
            records: 0,
            gathered: 0,
            first: [0; 4],
            needed: None,
            pending: None,
            wait: 0,
            seen: 0,
            examined: 0,
            answer: Sniff::NeedMore,
        }
    }

    /// The answer for `data`, the connection's first bytes so far: as
    /// [`sniff`]`(data, max_len)`, once final kept.
    #[inline]
    pub fn sniff(&mut self, data: &[u8], max_len: usize) -> &Sniff<ClientHello> {
        if data.len() < self.seen {
            *self = Self::new();
        }
        self.seen = data.len();
        if self.answer.is_need_more() && data.len() >= self.wait {
            self.answer = self.step(data, max_len);
        }
        &self.answer
    }

    /// The last answer given (need more before the first call).
    pub fn answer(&self) -> &Sniff<ClientHello> {
        &self.answer
    }

    /// Bytes looked at so far (record headers, the hello's bytes when they
    /// are joined and parsed): a measure of the work done, linear in the
    /// input whatever its pieces.
    pub fn examined(&self) -> u64 {
        self.examined
    }

    #[inline(never)]
    fn step(&mut self, data: &[u8], max_len: usize) -> Sniff<ClientHello> {
        let first = data.first().copied();
        // Read no further than the budget, so the answer does not depend on
        // how much more has arrived.
        let data = &data[..data.len().min(max_len)];
        if self.records == 0 {
            // Looks like TLS? A handshake record of major version 3; the
            // minor version is ignored (RFC 8446, section 5.1).
            self.examined += data.len().min(2) as u64;
            match data {
                // A zero budget: a handshake byte is already past it.
                [] => match first {
                    None => return Sniff::NeedMore,
                    Some(HANDSHAKE) => return over_budget(1, max_len),
                    Some(_) => return Sniff::NoMatch,
                },
                [t, ..] if *t != HANDSHAKE => return Sniff::NoMatch,
                [_, major, ..] if *major != 3 => return Sniff::NoMatch,
                _ => {}
            }
        }
        // Gather the handshake message from as many records as it spans.
        loop {
            let at = self.at;
            if at + 5 > data.len() {
                // Before two bytes, the next byte may still say "not TLS":
                // no final answer yet, unless the budget hides that byte.
                self.wait = if data.len() < 2 { 0 } else { at + 5 };
                if data.len() < 2 && max_len >= 2 {
                    return Sniff::NeedMore;
                }
                return need_more(at + 5, max_len);
            }
            let len = match self.pending.take() {
                Some(len) => len,
                None => {
                    let header = &data[at..at + 5];
                    self.examined += 5;
                    let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
                    if header[0] != HANDSHAKE || header[1] != 3 {
                        return malformed(TlsField::Record, at);
                    }
                    if len == 0 || len > MAX_RECORD {
                        return malformed(TlsField::Record, at + 3);
                    }
                    len
                }
            };
            let end = at + 5 + len;
            if end > data.len() {
                // Its header is checked; wait for the rest of it.
                self.pending = Some(len);
                self.wait = end;
                return need_more(end, max_len);
            }
            // The record is whole: take what it carries.
            let payload = &data[at + 5..end];
            let take = 4usize.saturating_sub(self.gathered).min(len);
            for (i, &b) in payload[..take].iter().enumerate() {
                self.first[self.gathered + i] = b;
            }
            self.examined += take as u64;
            self.gathered += len;
            self.records += 1;
            self.at = end;
            if self.needed.is_none() && self.gathered >= 4 {
                if self.first[0] != CLIENT_HELLO {
                    return malformed(TlsField::Handshake, 5);
                }
                let [_, a, b, c] = self.first;
                let body = usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c);
                self.needed = Some(4 + body);
            }
            if let Some(needed) = self.needed {
                if self.gathered >= needed {
                    return self.finish(data, needed);
                }
                if end >= max_len {
                    return over_budget(needed, max_len);
                }
            }
        }
    }

    /// All of the hello is here: joins its records (if it spans several)
    /// and parses it, once.
    fn finish(&mut self, data: &[u8], needed: usize) -> Sniff<ClientHello> {
        let at = self.at;
        let message: Cow<'_, [u8]> = if self.records == 1 {
            Cow::Borrowed(&data[5..at])
        } else {
            let mut joined = Vec::with_capacity(self.gathered);
            let mut r = 0;
            while r < at {
                // Each header was checked as its record arrived.
                let Some(&[_, _, _, hi, lo]) = data.get(r..r + 5) else {
                    return malformed(TlsField::Record, r);
                };
                let end = r + 5 + usize::from(u16::from_be_bytes([hi, lo]));
                let Some(payload) = data.get(r + 5..end) else {
                    return malformed(TlsField::Record, r);
                };
                joined.extend_from_slice(payload);
                r = end;
            }
            self.examined += joined.len() as u64;
            Cow::Owned(joined)
        };
        if message.len() > needed {
            // Another handshake message shares the last record: not what a
            // client sends first.
            return malformed(TlsField::Handshake, at);
        }
        self.examined += (needed - 4) as u64;
        match parse_hello(&message[4..needed]) {
            Ok(mut hello) => {
                hello.record_version = u16::from_be_bytes([data[1], data[2]]);
                Sniff::Match {
                    facts: hello,
                    len: at,
                }
            }
            Err(field) => malformed(field, 9),
        }
    }
}

fn need_more<T>(upto: usize, max_len: usize) -> Sniff<T> {
    if upto > max_len {
        over_budget(upto, max_len)
    } else {
        Sniff::NeedMore
    }
}

fn over_budget<T>(attempted: usize, max_len: usize) -> Sniff<T> {
    Sniff::Invalid(Error::LimitExceeded {
        limit: Limit::SniffBudget,
        max: max_len as u64,
        attempted: attempted as u64,
        offset: 0,
    })
}

/// Parses a ClientHello body; the error names the part that was wrong.
fn parse_hello(body: &[u8]) -> Result<ClientHello, TlsField> {
    let mut r = Reader::new(body);
    let hello = TlsField::ClientHello;
    let legacy_version = r.u16().ok_or(hello)?;
    r.take(32).ok_or(hello)?;
    let session = r.block8().ok_or(hello)?;
    let suites = r.block16().ok_or(hello)?;
    let compression = r.block8().ok_or(hello)?;
    if session.rest().len() > 32 || suites.rest().is_empty() || suites.rest().len() % 2 != 0 {
        return Err(hello);
    }
    if compression.rest().is_empty() {
        return Err(hello);
    }
    let mut out = ClientHello {
        legacy_version,
        ..ClientHello::default()
    };
    if r.is_empty() {
        return Ok(out); // no extensions: an old client
    }
    let mut extensions = r.block16().ok_or(TlsField::Extension)?;
    if !r.is_empty() {
        return Err(hello);
    }
    let mut seen = [0u64; 1024];
    while !extensions.is_empty() {
        let kind = extensions.u16().ok_or(TlsField::Extension)?;
        let mut data = extensions.block16().ok_or(TlsField::Extension)?;
        let (word, bit) = (usize::from(kind / 64), kind % 64);
        if seen[word] & (1 << bit) != 0 {
            return Err(TlsField::Extension);
        }
        seen[word] |= 1 << bit;
        match kind {
            0 => out.server_name = server_name(&mut data)?,
            16 => out.alpn = alpn(&mut data)?,
            43 => out.supported_versions = versions(&mut data)?,
            _ => {}
        }
    }
    Ok(out)
}

/// The server_name extension, read as rustls 0.23 reads it: a non-empty
/// list that fills the extension exactly (a byte after the list is
/// refused, as rustls and OpenSSL refuse it); exactly one `host_name`
/// (a second one is refused: the two could name different servers; a list
/// without one too); and a name type other than `host_name` ends the list,
/// its bytes and any after it ignored (the RFC 6066 format cannot skip an
/// entry of unknown type; rustls ignores them, OpenSSL refuses the hello,
/// and either way no other host name is read from them). An IP address
/// given as the host name (RFC 6066 forbids it, some clients send it) is
/// ignored, as rustls ignores it: the hello has no server name then.
fn server_name(data: &mut Reader<'_>) -> Result<Option<String>, TlsField> {
    let field = TlsField::ServerName;
    let mut list = data.block16().ok_or(field)?;
    if !data.is_empty() || list.is_empty() {
        return Err(field);
    }
    let (mut name, mut seen) = (None, false);
    while !list.is_empty() {
        if list.u8().ok_or(field)? != 0 {
            break;
        }
        let value = list.block16().ok_or(field)?.rest();
        if seen {
            return Err(field);
        }
        seen = true;
        if is_ip_address(value) {
            continue;
        }
        if !is_dns_name(value) {
            return Err(field);
        }
        name = Some(value.iter().map(|&b| char::from(b)).collect());
    }
    if seen {
        Ok(name)
    } else {
        Err(field)
    }
}

/// An IPv4 or IPv6 address in text (what rustls takes for one).
fn is_ip_address(value: &[u8]) -> bool {
    core::str::from_utf8(value).is_ok_and(|text| text.parse::<core::net::IpAddr>().is_ok())
}

/// A DNS host name as rustls (pki-types 1.16) takes one: labels of
/// letters, digits, `-` and `_`, 1-63 bytes each, not starting or ending
/// with `-`; 253 bytes in all with an optional trailing dot; and a last
/// label that is no number (decimal, or hex after `0x`), so that no IPv4
/// address in another form (`0x7f.0.0.1`) passes for a name (RFC 6066
/// allows no literal addresses; WHATWG's "ends in a number").
fn is_dns_name(name: &[u8]) -> bool {
    let labels = name.strip_suffix(b".").unwrap_or(name);
    let label_ok = |label: &[u8]| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && label[0] != b'-'
            && label[label.len() - 1] != b'-'
    };
    let is_number = |label: &[u8]| match label {
        [b'0', b'x' | b'X', hex @ ..] => hex.iter().all(u8::is_ascii_hexdigit),
        _ => label.iter().all(u8::is_ascii_digit),
    };
    !labels.is_empty()
        && name.len() <= 253
        && labels.split(|&b| b == b'.').all(label_ok)
        && !labels.rsplit(|&b| b == b'.').next().is_some_and(is_number)
}

fn alpn(data: &mut Reader<'_>) -> Result<Vec<Bytes>, TlsField> {
    let field = TlsField::Alpn;
    let mut list = data.block16().ok_or(field)?;
    if !data.is_empty() || list.is_empty() {
        return Err(field);
    }
    let mut out = Vec::new();
    while !list.is_empty() {
        let name = list.block8().ok_or(field)?.rest();
        if name.is_empty() {
            return Err(field);
        }
        out.push(Bytes::copy_from_slice(name));
    }
    Ok(out)
}

fn versions(data: &mut Reader<'_>) -> Result<Vec<u16>, TlsField> {
    let field = TlsField::SupportedVersions;
    let mut list = data.block8().ok_or(field)?;
    if !data.is_empty() || list.is_empty() || list.rest().len() % 2 != 0 {
        return Err(field);
    }
    let mut out = Vec::new();
    while let Some(v) = list.u16() {
        out.push(v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names() {
        assert!(is_dns_name(b"example.com"));
        assert!(is_dns_name(b"a_b.example.com."));
        assert!(!is_dns_name(b"10.0.0.1"));
        assert!(!is_dns_name(b"-bad.example"));
        assert!(!is_dns_name(b"sp ace.example"));
        assert!(!is_dns_name(b""));
        assert!(!is_dns_name(&[b'a'; 64]));
    }
}
