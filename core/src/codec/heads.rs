//! [`Heads`]: HTTP/1.x request heads as frames, for a protocol switch
//! after a head (an Upgrade, a CONNECT).
//!
//! It reads heads with the resumable HTTP sniffer's parser (httparse and
//! the Host checks of [`sniff::http`](crate::sniff::http)), so a routed
//! connection and a framed one agree on what a head is.

use bytes::Bytes;

use crate::decoder::{Cut, Decoder, Latch, Step};
use crate::error::{Error, HttpField, InvalidInput};
use crate::recv_buf::RecvBuf;
use crate::sniff::http::{self, Sniffer, DEFAULT_MAX_HEAD, DEFAULT_MAX_HEADERS};
use crate::sniff::Sniff;

/// A decoder of request heads, for a [`Session`](crate::Session) that
/// takes an HTTP request's head as a frame, then switches to raw bytes on
/// an upgrade ([`is_upgrade_head`](crate::sniff::http::is_upgrade_head)).
///
/// Each item is one whole head, `\r\n\r\n` included, as a `Bytes` view of
/// the buffer. Bodies are not framed: use it for a protocol switch, not for
/// requests with bodies.
#[derive(Clone, Debug)]
pub struct Heads {
    max_head: usize,
    max_headers: usize,
    /// The sniffer of the head being read, and the stream offset where that
    /// head starts: a head trickled in pieces is looked at once.
    sniffer: Sniffer,
    start: u64,
    latch: Latch,
}

impl Default for Heads {
    fn default() -> Self {
        Self {
            max_head: DEFAULT_MAX_HEAD,
            max_headers: DEFAULT_MAX_HEADERS,
            sniffer: Sniffer::new(),
            start: 0,
            latch: Latch::default(),
        }
    }
}

impl Heads {
    /// A decoder with limits on bytes and headers per head.
    ///
    /// # Errors
    ///
    /// As [`RouterConfig::http_limits`](crate::route::RouterConfig::http_limits).
    pub fn new(max_head: usize, max_headers: usize) -> Result<Self, Error> {
        http::check_limits(max_head, max_headers)?;
        Ok(Self {
            max_head,
            max_headers,
            sniffer: Sniffer::new(),
            start: 0,
            latch: Latch::default(),
        })
    }

    fn step(&mut self, buf: &RecvBuf) -> Step {
        if buf.offset() != self.start {
            // A new head (or another buffer): start over.
            self.sniffer = Sniffer::new();
            self.start = buf.offset();
        }
        match self
            .sniffer
            .sniff(buf.peek(), self.max_head, self.max_headers)
        {
            &Sniff::Match { len, .. } => Step::Frame(Cut {
                skip: 0,
                len,
                trail: 0,
            }),
            Sniff::NeedMore => Step::NeedMore,
            Sniff::NoMatch => self.latch.failed(Error::InvalidInput {
                kind: InvalidInput::Http(HttpField::Head),
                offset: buf.offset(),
            }),
            Sniff::Invalid(e) => {
                let e = e.clone().shifted(buf.offset());
                self.latch.failed(e)
            }
        }
    }
}

impl Decoder for Heads {
    type Item = Bytes;

    /// # Errors
    ///
    /// [`HttpField::Head`] when the bytes are not a request head, and
    /// [`Limit::SniffBudget`](crate::Limit::SniffBudget) past the limits; final.
    fn decode(&mut self, buf: &mut RecvBuf) -> Result<Option<Bytes>, Error> {
        self.latch.check()?;
        let step = self.step(buf);
        self.latch.answer(step, buf)
    }

    fn decode_eof(&mut self, buf: &mut RecvBuf) -> Result<Option<Bytes>, Error> {
        self.latch.check()?;
        let step = self.step(buf);
        self.latch.answer_eof(step, buf)
    }
}
