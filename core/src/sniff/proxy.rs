//! The PROXY protocol header (v1 and v2) a load balancer puts before the
//! client's bytes, telling who the client really is.
//!
//! ```text
//!   v1:  PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\r\n      (at most 107 bytes)
//!   v2:  \r\n\r\n\0\r\nQUIT\n | ver/cmd | family | length (2) | addresses | TLVs
//! ```
//!
//! Unlike the other sniffers, a PROXY header is consumed: a
//! [`Session`](crate::Session) takes it off the stream, records it, and
//! sniffs what follows. v2 TLVs are read: ALPN, authority, CRC32C (checked
//! against the header), unique id, SSL (with its sub-TLVs) and netns; the
//! rest are kept raw.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::error::{Error, InvalidInput, Limit, ProxyField};
use crate::sniff::{Reader, Sniff};

/// Default byte budget of [`sniff`]: 4 KiB. A v2 header with every TLV
/// haproxy sends is under 300 bytes; the format allows 64 KiB.
pub const DEFAULT_MAX_HEADER: usize = 4 * 1024;

/// The v2 signature.
pub const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// The v1 signature: five bytes decide (proxy-protocol.txt, section 2.2:
/// "if ... the 5 first characters match ... "PROXY" then the protocol
/// must be parsed as version 1"); a space must follow.
const V1_SIGNATURE: &[u8] = b"PROXY";
const V1_PREFIX: &[u8] = b"PROXY ";

/// CRC32C (Castagnoli), slice-by-16, its tables built at compile time.
static CRC32C: crc::Crc<u32, crc::Table<16>> =
    crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISCSI);
const V1_MAX: usize = 107;

/// The command of a PROXY header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    /// The connection is relayed for a client: the addresses are its.
    Proxy,
    /// The proxy speaks for itself (a health check): no client addresses.
    Local,
}

/// The transport of the relayed connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Not said (v1 `UNKNOWN`, v2 `UNSPEC`).
    Unspecified,
    /// TCP, or a Unix stream socket.
    Stream,
    /// UDP, or a Unix datagram socket.
    Datagram,
}

/// The addresses of the relayed connection.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Addresses {
    /// None given (v1 `UNKNOWN`, v2 `UNSPEC` or `LOCAL`).
    Unknown,
    /// IPv4 or IPv6 addresses and ports.
    Inet {
        /// The client.
        source: SocketAddr,
        /// The address the client connected to.
        destination: SocketAddr,
    },
    /// Unix socket paths (NUL padding removed).
    Unix {
        /// The client's path.
        source: Bytes,
        /// The path it connected to.
        destination: Bytes,
    },
}

/// The v2 SSL TLV: how the client connected to the proxy.
#[non_exhaustive]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ssl {
    /// The client bit field (`PP2_CLIENT_SSL` 0x01, `CERT_CONN` 0x02,
    /// `CERT_SESS` 0x04).
    pub client: u8,
    /// 0 if the client presented a certificate that was verified.
    pub verify: u32,
    /// The TLS version (`PP2_SUBTYPE_SSL_VERSION`), e.g. `TLSv1.3`.
    pub version: Option<String>,
    /// The client certificate's common name.
    pub common_name: Option<String>,
    /// The cipher.
    pub cipher: Option<String>,
    /// The certificate's signature algorithm.
    pub sig_alg: Option<String>,
    /// The certificate's key algorithm.
    pub key_alg: Option<String>,
}

/// What a PROXY header says.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyHeader {
    /// 1 or 2.
    pub version: u8,
    /// PROXY or LOCAL (v1 is always PROXY).
    pub command: Command,
    /// The relayed transport.
    pub transport: Transport,
    /// The relayed addresses.
    pub addresses: Addresses,
    /// `PP2_TYPE_ALPN`.
    pub alpn: Option<Bytes>,
    /// `PP2_TYPE_AUTHORITY`: the host name the client asked for.
    pub authority: Option<String>,
    /// `PP2_TYPE_UNIQUE_ID`.
    pub unique_id: Option<Bytes>,
    /// `PP2_TYPE_SSL`.
    pub ssl: Option<Ssl>,
    /// `PP2_TYPE_NETNS`.
    pub netns: Option<String>,
    /// Whether a `PP2_TYPE_CRC32C` TLV was present (and so checked: a
    /// header whose checksum does not match is refused).
    pub checksum_verified: bool,
    /// Other TLVs, raw: (type, value).
    pub other_tlvs: Vec<(u8, Bytes)>,
}

impl ProxyHeader {
    fn new(version: u8, command: Command, transport: Transport, addresses: Addresses) -> Self {
        Self {
            version,
            command,
            transport,
            addresses,
            alpn: None,
            authority: None,
            unique_id: None,
            ssl: None,
            netns: None,
            checksum_verified: false,
            other_tlvs: Vec::new(),
        }
    }

    /// The client's address, when the header gives one.
    pub fn source(&self) -> Option<SocketAddr> {
        match self.addresses {
            Addresses::Inet { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn malformed<T>(field: ProxyField, offset: usize) -> Sniff<T> {
    Sniff::Invalid(Error::InvalidInput {
        kind: InvalidInput::Proxy(field),
        offset: offset as u64,
    })
}

/// Sniffs a PROXY header (v1 or v2) at the start of `data`, reading at most
/// `max_len` bytes; `len` of a match is the header's length.
///
/// ```
/// use cleave_proto::sniff::{proxy, Sniff};
///
/// let data = b"PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\r\nGET / HTTP/1.1\r\n";
/// match proxy::sniff(data, proxy::DEFAULT_MAX_HEADER) {
///     Sniff::Match { facts, len } => {
///         assert_eq!(facts.source(), Some("192.0.2.1:56324".parse().unwrap()));
///         assert_eq!(&data[len..], b"GET / HTTP/1.1\r\n");
///     }
///     other => panic!("{other:?}"),
/// }
/// ```
#[must_use]
pub fn sniff(data: &[u8], max_len: usize) -> Sniff<ProxyHeader> {
    let mut sniffer = Sniffer::new();
    sniffer.sniff(data, max_len);
    sniffer.answer
}

/// The PROXY header sniffer for one connection, resumable: each call looks
/// only at the bytes that arrived since the last one (the search for a v1
/// line's end goes on where it stopped; a v2 header is parsed once its
/// declared length has arrived).
///
/// Give it the connection's first bytes so far on every call (each call's
/// `data` extends the last one's) with the same `max_len`; its answers are
/// those of [`sniff`] on the same bytes. `data` shorter than last time
/// starts it over, and so does a smaller `max_len` than the bytes it
/// has looked at.
#[derive(Clone, Debug)]
pub struct Sniffer {
    /// Leading bytes found to be the v1 prefix or the v2 signature.
    checked: usize,
    /// Bytes of a v1 line searched for its end.
    scanned: usize,
    /// No progress before `data` is this long.
    wait: usize,
    /// The longest `data` seen.
    seen: usize,
    examined: u64,
    answer: Sniff<ProxyHeader>,
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
            checked: 0,
            scanned: 0,
            wait: 0,
            seen: 0,
            examined: 0,
            answer: Sniff::NeedMore,
        }
    }

    /// The answer for `data`, the connection's first bytes so far: as
    /// [`sniff`]`(data, max_len)`, once final kept.
    #[inline]
    pub fn sniff(&mut self, data: &[u8], max_len: usize) -> &Sniff<ProxyHeader> {
        // Shorter data, or a smaller budget than the bytes already looked
        // at (a caller that changed `max_len`): start over.
        if data.len() < self.seen || self.scanned > data.len().min(max_len) {
            *self = Self::new();
        }
        self.seen = data.len();
        if self.answer.is_need_more() && data.len() >= self.wait.min(max_len) {
            self.answer = self.step(data, max_len);
        }
        &self.answer
    }

    /// The last answer given (need more before the first call).
    pub fn answer(&self) -> &Sniff<ProxyHeader> {
        &self.answer
    }

    /// Bytes looked at so far: a measure of the work done, linear in the
    /// input whatever its pieces.
    pub fn examined(&self) -> u64 {
        self.examined
    }

    #[inline(never)]
    fn step(&mut self, data: &[u8], max_len: usize) -> Sniff<ProxyHeader> {
        // Read no further than the budget, so the answer does not depend on
        // how much more has arrived; undecided at the budget is over it.
        let window = &data[..data.len().min(max_len)];
        let answer = match window.first() {
            None => Sniff::NeedMore,
            Some(b'P') => self.v1(window),
            Some(b'\r') => self.v2(window, max_len),
            Some(_) => Sniff::NoMatch,
        };
        match answer {
            Sniff::NeedMore if data.len() >= max_len => over_budget(max_len),
            answer => answer,
        }
    }

    /// Whether `data` starts with (a piece of) `prefix`, comparing only
    /// the bytes not compared before: `Some(true)` all of it, `Some(false)`
    /// a piece, `None` not.
    fn starts(&mut self, data: &[u8], prefix: &[u8]) -> Option<bool> {
        let n = data.len().min(prefix.len());
        if n > self.checked {
            self.examined += (n - self.checked) as u64;
            if data[self.checked..n] != prefix[self.checked..n] {
                return None;
            }
            self.checked = n;
        }
        Some(n == prefix.len())
    }

    fn v1(&mut self, data: &[u8]) -> Sniff<ProxyHeader> {
        match self.starts(data, V1_SIGNATURE) {
            None => return Sniff::NoMatch,
            Some(false) => return Sniff::NeedMore,
            Some(true) => {}
        }
        // "PROXY" is a v1 header from here on: without its space, a
        // malformed one.
        match data.get(V1_SIGNATURE.len()) {
            None => return Sniff::NeedMore,
            Some(b' ') => {}
            Some(_) => return malformed(ProxyField::V1, V1_SIGNATURE.len()),
        }
        let window = &data[..data.len().min(V1_MAX)];
        let mut from = self.scanned.max(V1_PREFIX.len());
        self.examined += (window.len() - from) as u64;
        let end = loop {
            let Some(lf) = memchr::memchr(b'\n', &window[from..]).map(|i| from + i) else {
                self.scanned = window.len();
                self.wait = window.len() + 1;
                return if window.len() >= V1_MAX {
                    malformed(ProxyField::V1, 0)
                } else {
                    Sniff::NeedMore
                };
            };
            // The line ends in CRLF. A bare LF is malformed, except in an
            // UNKNOWN line, whose bytes before its CRLF are ignored.
            if window[lf - 1] == b'\r' {
                break lf - 1;
            }
            if !is_unknown(&window[V1_PREFIX.len()..lf]) {
                return malformed(ProxyField::V1, lf);
            }
            from = lf + 1;
            self.scanned = from;
        };
        self.examined += end as u64;
        match parse_v1(&data[V1_PREFIX.len()..end]) {
            Some(header) => Sniff::Match {
                facts: header,
                len: end + 2,
            },
            None => malformed(ProxyField::V1, V1_PREFIX.len()),
        }
    }

    fn v2(&mut self, data: &[u8], max_len: usize) -> Sniff<ProxyHeader> {
        match self.starts(data, V2_SIGNATURE) {
            None => return Sniff::NoMatch,
            Some(false) => return Sniff::NeedMore,
            Some(true) => {}
        }
        if data.len() < 16 {
            self.wait = 16;
            return Sniff::NeedMore;
        }
        self.examined += 4;
        let total = 16 + usize::from(u16::from_be_bytes([data[14], data[15]]));
        if total > max_len {
            return Sniff::Invalid(Error::LimitExceeded {
                limit: Limit::SniffBudget,
                max: max_len as u64,
                attempted: total as u64,
                offset: 0,
            });
        }
        if data.len() < total {
            self.wait = total;
            return Sniff::NeedMore;
        }
        self.examined += total as u64;
        match parse_v2(&data[..total]) {
            Ok(header) => Sniff::Match {
                facts: header,
                len: total,
            },
            Err((field, offset)) => malformed(field, offset),
        }
    }
}

/// Whether a v1 line (after "PROXY ") says UNKNOWN: the word, then its
/// end or anything after a space or a line-end byte ("the receiver must
/// ignore anything presented before the CRLF is found", section 2.1).
fn is_unknown(line: &[u8]) -> bool {
    line.strip_prefix(b"UNKNOWN")
        .is_some_and(|rest| matches!(rest.first(), None | Some(b' ' | b'\r' | b'\n')))
}

fn parse_v1(line: &[u8]) -> Option<ProxyHeader> {
    if is_unknown(line) {
        // "The receiver must ignore anything presented before the CRLF
        // is found": whatever bytes they are.
        return Some(ProxyHeader::new(
            1,
            Command::Proxy,
            Transport::Unspecified,
            Addresses::Unknown,
        ));
    }
    let line = core::str::from_utf8(line).ok()?;
    let mut parts = line.split(' ');
    let protocol = parts.next()?;
    let (src, dst, sport, dport) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let (source, destination): (IpAddr, IpAddr) = match protocol {
        "TCP4" => (
            src.parse::<Ipv4Addr>().ok()?.into(),
            dst.parse::<Ipv4Addr>().ok()?.into(),
        ),
        "TCP6" => (
            src.parse::<Ipv6Addr>().ok()?.into(),
            dst.parse::<Ipv6Addr>().ok()?.into(),
        ),
        _ => return None,
    };
    let addresses = Addresses::Inet {
        source: SocketAddr::new(source, port(sport)?),
        destination: SocketAddr::new(destination, port(dport)?),
    };
    Some(ProxyHeader::new(
        1,
        Command::Proxy,
        Transport::Stream,
        addresses,
    ))
}

/// A decimal port: digits only, no leading zero (but "0" itself).
fn port(text: &str) -> Option<u16> {
    let digits_only = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let no_leading_zero = text == "0" || !text.starts_with('0');
    if digits_only && no_leading_zero {
        text.parse().ok()
    } else {
        None
    }
}

fn over_budget<T>(max_len: usize) -> Sniff<T> {
    Sniff::Invalid(Error::LimitExceeded {
        limit: Limit::SniffBudget,
        max: max_len as u64,
        attempted: max_len as u64 + 1,
        offset: 0,
    })
}

/// Parses a whole v2 header; the error names the part and its offset.
fn parse_v2(header: &[u8]) -> Result<ProxyHeader, (ProxyField, usize)> {
    let bad_header = (ProxyField::V2Header, 12);
    let (version, command) = (header[12] >> 4, header[12] & 0x0f);
    let command = match (version, command) {
        (2, 0) => Command::Local,
        (2, 1) => Command::Proxy,
        _ => return Err(bad_header),
    };
    if command == Command::Local {
        // "The receiver must accept this connection as valid and must use
        // the real connection endpoints and discard the protocol block
        // including the family (which is ignored)." Whatever the family,
        // transport, addresses or TLVs say, a health check is a health
        // check.
        return Ok(ProxyHeader::new(
            2,
            command,
            Transport::Unspecified,
            Addresses::Unknown,
        ));
    }
    // The family and the transport together: seven values are defined,
    // and "other values ... must be rejected as invalid by receivers"
    // (UNSPEC with a transport, a family with none).
    let (family, transport) = match header[13] {
        0x00 => (0, Transport::Unspecified),
        0x11 | 0x21 | 0x31 => (header[13] >> 4, Transport::Stream),
        0x12 | 0x22 | 0x32 => (header[13] >> 4, Transport::Datagram),
        _ => return Err((ProxyField::V2Header, 13)),
    };
    let address_len = match family {
        0 => 0,
        1 => 12,
        2 => 36,
        _ => 216,
    };
    let mut body = Reader::new(&header[16..]);
    let addresses = body.take(address_len).ok_or((ProxyField::V2Address, 16))?;
    let addresses = match family {
        0 => Addresses::Unknown,
        1 | 2 => inet(addresses),
        _ => Addresses::Unix {
            source: unix_path(&addresses[..108]),
            destination: unix_path(&addresses[108..]),
        },
    };
    let mut out = ProxyHeader::new(2, command, transport, addresses);
    let mut crc_at = None;
    let tlv_error = |r: &Reader<'_>| (ProxyField::V2Tlv, header.len() - r.rest().len());
    while !body.is_empty() {
        let at = header.len() - body.rest().len();
        let kind = body.u8().ok_or(tlv_error(&body))?;
        let value = body.block16().ok_or(tlv_error(&body))?.rest();
        match kind {
            0x01 => out.alpn = Some(Bytes::copy_from_slice(value)),
            0x02 => out.authority = Some(text(value).ok_or((ProxyField::V2Tlv, at))?),
            0x03 if value.len() == 4 => crc_at = Some(at + 3),
            0x03 => return Err((ProxyField::V2Tlv, at)),
            0x04 => {}
            0x05 if value.len() <= 128 => out.unique_id = Some(Bytes::copy_from_slice(value)),
            0x05 => return Err((ProxyField::V2Tlv, at)),
            0x20 => out.ssl = Some(ssl(value).ok_or((ProxyField::V2Tlv, at))?),
            0x30 => out.netns = Some(text(value).ok_or((ProxyField::V2Tlv, at))?),
            _ => out.other_tlvs.push((kind, Bytes::copy_from_slice(value))),
        }
    }
    if let Some(at) = crc_at {
        let expected =
            u32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]]);
        let mut digest = CRC32C.digest();
        digest.update(&header[..at]);
        digest.update(&[0; 4]);
        digest.update(&header[at + 4..]);
        if digest.finalize() != expected {
            return Err((ProxyField::V2Checksum, at));
        }
        out.checksum_verified = true;
    }
    Ok(out)
}

/// Two IPv4 or IPv6 addresses (4 or 16 bytes each, `bytes.len()` is 12 or
/// 36) and two ports.
fn inet(bytes: &[u8]) -> Addresses {
    let n = (bytes.len() - 4) / 2;
    let ip = |b: &[u8]| -> IpAddr {
        match <[u8; 4]>::try_from(b) {
            Ok(v4) => IpAddr::from(v4),
            Err(_) => IpAddr::from(<[u8; 16]>::try_from(b).unwrap_or([0; 16])),
        }
    };
    let port = |b: &[u8]| u16::from_be_bytes([b[0], b[1]]);
    Addresses::Inet {
        source: SocketAddr::new(ip(&bytes[..n]), port(&bytes[2 * n..])),
        destination: SocketAddr::new(ip(&bytes[n..2 * n]), port(&bytes[2 * n + 2..])),
    }
}

fn unix_path(field: &[u8]) -> Bytes {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    Bytes::copy_from_slice(&field[..end])
}

fn text(bytes: &[u8]) -> Option<String> {
    core::str::from_utf8(bytes).ok().map(String::from)
}

fn ssl(value: &[u8]) -> Option<Ssl> {
    let mut r = Reader::new(value);
    let mut out = Ssl {
        client: r.u8()?,
        verify: r.u32()?,
        ..Ssl::default()
    };
    while !r.is_empty() {
        let kind = r.u8()?;
        let value = r.block16()?.rest();
        // The text sub-TLVs must be text; any other (a newer, binary one)
        // is skipped, as the spec asks of unknown TLVs.
        let field = match kind {
            0x21 => &mut out.version,
            0x22 => &mut out.common_name,
            0x23 => &mut out.cipher,
            0x24 => &mut out.sig_alg,
            0x25 => &mut out.key_alg,
            _ => continue,
        };
        *field = Some(text(value)?);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_strict_decimals() {
        assert_eq!(port("443"), Some(443));
        assert_eq!(port("0"), Some(0));
        assert_eq!(port("0443"), None);
        assert_eq!(port("+1"), None);
        assert_eq!(port("65536"), None);
        assert_eq!(port(""), None);
    }
}
