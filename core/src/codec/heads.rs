//! [`Heads`]: HTTP/1.x request heads as frames, for a protocol switch
//! after a head (an Upgrade, a CONNECT).
//!
//! It reads heads with the HTTP/1.1 server's head parser
//! ([`http1`](crate::http1)), with its strict checks: a head a
//! [`Server`](crate::http1::Server) would refuse is refused here too.

use bytes::Bytes;

use crate::decoder::{Cut, Decoder, Latch, Step};
use crate::error::{Error, HttpField, InvalidInput};
use crate::http1::reader::{empty_lines, HeadReader};
use crate::http1::{Body, Http1Config};
use crate::recv_buf::RecvBuf;
use crate::sniff::http::{check_limits, DEFAULT_MAX_HEAD, DEFAULT_MAX_HEADERS};

/// The head parser's largest `max_head`.
const MAX_HEAD: usize = u32::MAX as usize;

/// A decoder of request heads, for a [`Session`](crate::Session) that
/// takes an HTTP request's head as a frame, then switches to raw bytes on
/// an upgrade ([`is_upgrade_head`](crate::sniff::http::is_upgrade_head)).
///
/// Each item is one whole head, `\r\n\r\n` included, as a `Bytes` view of
/// the buffer (empty lines before it are skipped). Bodies are not framed,
/// so a head that announces one (a Transfer-Encoding, a Content-Length
/// other than 0) is refused ([`HttpField::UnframedBody`]):
/// its body would be taken for the next head or the switched protocol's
/// first bytes. For requests with bodies, use
/// [`http1::Server`](crate::http1::Server).
#[derive(Clone, Debug)]
pub struct Heads {
    config: Http1Config,
    reader: HeadReader,
    latch: Latch,
}

impl Default for Heads {
    fn default() -> Self {
        // The sniffer's defaults are within the head parser's ranges.
        Self::new(DEFAULT_MAX_HEAD, DEFAULT_MAX_HEADERS).unwrap_or_else(|_| Self {
            config: Http1Config::default(),
            reader: HeadReader::default(),
            latch: Latch::default(),
        })
    }
}

impl Heads {
    /// A decoder with limits on bytes and headers per head. Empty lines
    /// before a head (skipped, RFC 9112 section 2.2) count toward
    /// `max_head` on their own, as for a [`Server`](crate::http1::Server).
    /// A `max_head` past the head parser's range (4 GiB) is taken as
    /// that range: no buffer holds such a head anyway.
    ///
    /// # Errors
    ///
    /// As [`RouterConfig::http_limits`](crate::route::RouterConfig::http_limits).
    pub fn new(max_head: usize, max_headers: usize) -> Result<Self, Error> {
        check_limits(max_head, max_headers)?;
        let max_head = max_head.min(MAX_HEAD);
        let config = Http1Config::default()
            .max_head(max_head)?
            .max_headers(max_headers)?
            .max_line(max_head.max(16))?;
        Ok(Self {
            config,
            reader: HeadReader::default(),
            latch: Latch::default(),
        })
    }

    fn step(&mut self, buf: &RecvBuf) -> Step {
        match self.reader.poll(buf, &self.config) {
            Ok(Some((skip, _, body))) if !matches!(body, Body::Empty | Body::Length(0)) => {
                self.latch.failed(Error::InvalidInput {
                    kind: InvalidInput::Http(HttpField::UnframedBody),
                    offset: buf.offset() + skip as u64,
                })
            }
            Ok(Some((skip, len, _))) => Step::Frame(Cut {
                skip,
                len,
                trail: 0,
            }),
            Ok(None) => Step::NeedMore,
            Err(e) => self.latch.failed(e),
        }
    }
}

impl Decoder for Heads {
    type Item = Bytes;

    /// # Errors
    ///
    /// What the HTTP/1.1 server refuses in a head
    /// ([`InvalidInput::Http`](crate::InvalidInput::Http) with the
    /// [`HttpField`](crate::HttpField)), and
    /// [`Limit::HeadLength`](crate::Limit::HeadLength) or
    /// [`Limit::HeaderCount`](crate::Limit::HeaderCount) past the limits;
    /// final.
    fn decode(&mut self, buf: &mut RecvBuf) -> Result<Option<Bytes>, Error> {
        self.latch.check()?;
        let step = self.step(buf);
        self.latch.answer(step, buf)
    }

    /// As `decode`; empty lines after the last head are skipped, as a
    /// server skips them: alone, they end the stream cleanly; before a
    /// head cut short, the truncated head is what is reported (its bytes
    /// and offset), as a server reports it.
    fn decode_eof(&mut self, buf: &mut RecvBuf) -> Result<Option<Bytes>, Error> {
        self.latch.check()?;
        let step = self.step(buf);
        if matches!(step, Step::NeedMore) {
            let blank = empty_lines(buf.peek(), &self.config);
            buf.advance(blank)?;
        }
        self.latch.answer_eof(step, buf)
    }
}
