//! The read side as an adapter sees it: a buffer to read into and a state
//! machine to poll.

use core::time::Duration;

use crate::decoder::Decoder;
use crate::error::Error;
use crate::recv_buf::{RecvBuf, RecvBufConfig};
use crate::session::{Event, Session};

/// What an I/O adapter reads into and polls: a [`RecvBuf`] and the state
/// machine that turns its bytes into events.
///
/// A [`Session`] is one (routing, framing, tunnelling); [`Framed`] is a
/// plain decoder over its own buffer. An adapter written against this
/// trait drives either, the same way:
///
/// ```text
///   read into recv_buf() (spare_mut + commit) ─┐
///   end of stream ──> handle_eof()             ├─> poll_event(now) until Ok(None)
///   deadline() passed ─────────────────────────┘
/// ```
///
/// `now` is the time since the connection began, on any clock the adapter
/// likes; only sessions with a routing deadline look at it.
pub trait Inbound {
    /// What comes out.
    type Event;

    /// The buffer to read into.
    fn recv_buf(&mut self) -> &mut RecvBuf;

    /// The peer will send nothing more.
    fn handle_eof(&mut self);

    /// The next event, if the bytes so far make one.
    ///
    /// # Errors
    ///
    /// The state machine's typed, final error; the unconsumed bytes stay in
    /// [`recv_buf`](Self::recv_buf), except at the end of the stream, where
    /// an incomplete frame's bytes come inside [`Error::Truncated`].
    fn poll_event(&mut self, now: Duration) -> Result<Option<Self::Event>, Error>;

    /// When to call [`poll_event`](Self::poll_event) again even if nothing
    /// arrives, as time since the connection began.
    fn deadline(&self) -> Option<Duration> {
        None
    }

    /// Whether the stream is over: no event will come any more (it ended,
    /// or failed: [`poll_event`](Self::poll_event) then gives its error
    /// again). Nothing more needs to be read.
    fn is_closed(&self) -> bool;
}

impl<T: Clone, D: Decoder> Inbound for Session<T, D> {
    type Event = Event<T, D::Item>;

    fn recv_buf(&mut self) -> &mut RecvBuf {
        Session::recv_buf(self)
    }

    fn handle_eof(&mut self) {
        Session::handle_eof(self);
    }

    fn poll_event(&mut self, now: Duration) -> Result<Option<Self::Event>, Error> {
        Session::poll_event(self, now)
    }

    fn deadline(&self) -> Option<Duration> {
        Session::deadline(self)
    }

    fn is_closed(&self) -> bool {
        Session::is_closed(self)
    }
}

/// A decoder and the buffer it cuts from, as one [`Inbound`]: its events
/// are the decoder's items.
///
/// At the end of the stream the decoder's
/// [`decode_eof`](Decoder::decode_eof) runs, so an incomplete last frame
/// comes back as [`Error::Truncated`] with its bytes.
///
/// ```
/// use cleave_proto::{Framed, Inbound, Lines};
/// use core::time::Duration;
///
/// let mut lines = Framed::new(Lines::new());
/// lines.recv_buf().feed(b"one\ntw")?;
/// assert_eq!(lines.poll_event(Duration::ZERO)?, Some("one".into()));
/// assert_eq!(lines.poll_event(Duration::ZERO)?, None); // need more
/// lines.recv_buf().feed(b"o\n")?;
/// lines.handle_eof();
/// assert_eq!(lines.poll_event(Duration::ZERO)?, Some("two".into()));
/// assert_eq!(lines.poll_event(Duration::ZERO)?, None);
/// assert!(lines.is_closed());
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Debug)]
pub struct Framed<D> {
    buf: RecvBuf,
    decoder: D,
    eof: bool,
    done: bool,
    /// The decoder failed (its error is final and comes back each call).
    failed: bool,
}

impl<D: Decoder> Framed<D> {
    /// `decoder` over a buffer with the default limits.
    pub fn new(decoder: D) -> Self {
        Self::with_config(decoder, RecvBufConfig::default())
    }

    /// `decoder` over a buffer with the given limits.
    pub fn with_config(decoder: D, config: RecvBufConfig) -> Self {
        Self::from_parts(RecvBuf::with_config(config), decoder)
    }

    /// `decoder` over an existing buffer (bytes read before a protocol
    /// switch, say).
    pub fn from_parts(buf: RecvBuf, decoder: D) -> Self {
        Self {
            buf,
            decoder,
            eof: false,
            done: false,
            failed: false,
        }
    }

    /// The decoder.
    pub fn decoder(&self) -> &D {
        &self.decoder
    }

    /// The decoder, to reconfigure it between frames.
    pub fn decoder_mut(&mut self) -> &mut D {
        &mut self.decoder
    }

    /// The buffer (with the bytes not decoded yet) and the decoder.
    pub fn into_parts(self) -> (RecvBuf, D) {
        (self.buf, self.decoder)
    }
}

impl<D: Decoder> Inbound for Framed<D> {
    type Event = D::Item;

    fn recv_buf(&mut self) -> &mut RecvBuf {
        &mut self.buf
    }

    fn handle_eof(&mut self) {
        self.eof = true;
    }

    fn poll_event(&mut self, _now: Duration) -> Result<Option<D::Item>, Error> {
        if self.done {
            return Ok(None);
        }
        let decoded = if self.eof {
            self.decoder.decode_eof(&mut self.buf)
        } else {
            self.decoder.decode(&mut self.buf)
        };
        let decoded = decoded.inspect_err(|_| self.failed = true)?;
        if decoded.is_none() && self.eof {
            self.done = true;
        }
        Ok(decoded)
    }

    fn is_closed(&self) -> bool {
        self.done || self.failed
    }
}
