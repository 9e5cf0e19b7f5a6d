//! Sniffers: they look at the first bytes of a connection, without
//! consuming them, and say what protocol they see and what they learned.
//!
//! | sniffer                          | matches                         | learns                                  |
//! |----------------------------------|---------------------------------|-----------------------------------------|
//! | [`tls::sniff`]                   | a TLS ClientHello               | SNI, ALPN, legacy and supported versions |
//! | [`http::sniff`]                  | an HTTP/1.x request head        | method, path, Host, Upgrade, Connection |
//! | [`proxy::sniff`]                 | a PROXY protocol v1 or v2 header| addresses, TLVs (checked CRC32C)        |
//! | [`prefix::sniff`]                | a literal prefix                | that it is there                        |
//!
//! Every sniffer is a pure function of the bytes seen so far, from the
//! start of the connection (or from the end of a PROXY header): give it
//! more bytes and it either keeps its answer or turns "need more" into a
//! final one. So any split of the input gives the same answer, and each
//! sniffer reads at most its byte budget.

pub mod http;
pub mod prefix;
pub mod proxy;
pub mod tls;

use crate::error::Error;

/// What a sniffer made of the bytes so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sniff<T> {
    /// The bytes could still become a match: wait for more.
    NeedMore,
    /// Matched: `len` bytes make up what was recognised (the records of the
    /// ClientHello, the request head, the PROXY header, the prefix).
    Match {
        /// What was learned.
        facts: T,
        /// Bytes recognised, from the start.
        len: usize,
    },
    /// The bytes are not this protocol.
    NoMatch,
    /// The bytes are this protocol but malformed, or longer than the
    /// sniffer's budget.
    Invalid(Error),
}

impl<T> Sniff<T> {
    /// Whether more bytes could change the answer.
    pub fn is_need_more(&self) -> bool {
        matches!(self, Self::NeedMore)
    }

    /// The facts, if it matched.
    pub fn facts(&self) -> Option<&T> {
        match self {
            Self::Match { facts, .. } => Some(facts),
            _ => None,
        }
    }
}

/// A big-endian cursor over a byte slice, for the parsers: every read is
/// checked, and a short read is the parser's `None`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub(crate) fn rest(&self) -> &'a [u8] {
        self.bytes
    }

    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.bytes.len() {
            return None;
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Some(head)
    }

    pub(crate) fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    pub(crate) fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A block with a length prefix of 1 or 2 bytes.
    pub(crate) fn block8(&mut self) -> Option<Reader<'a>> {
        let n = self.u8()?;
        self.take(usize::from(n)).map(Reader::new)
    }

    pub(crate) fn block16(&mut self) -> Option<Reader<'a>> {
        let n = self.u16()?;
        self.take(usize::from(n)).map(Reader::new)
    }
}
