//! The simplest protocols: [`Framed`] (a decoder's frames), [`Raw`] (the
//! bytes as they come, for a tunnel) and [`WriteOnly`] (nothing read, for
//! a write half).

use bytes::Bytes;

use crate::conn::{Phase, Protocol, Wire};
use crate::decoder::Decoder;
use crate::error::Error;

/// A [`Decoder`] as a [`Protocol`]: its events are the decoder's items.
///
/// At the end of the stream the decoder's
/// [`decode_eof`](Decoder::decode_eof) runs, so an incomplete last frame
/// comes back as [`Error::Truncated`] with its bytes. The opening lasts
/// until the first frame.
///
/// ```
/// use cleave_proto::conn::{Conn, Framed};
/// use cleave_proto::Lines;
/// use core::time::Duration;
///
/// let mut lines = Conn::new(Framed::new(Lines::new()), Duration::ZERO);
/// lines.feed(b"one\ntw", Duration::ZERO)?;
/// assert_eq!(lines.poll_event()?, Some("one".into()));
/// assert_eq!(lines.poll_event()?, None); // need more
/// lines.feed(b"o\n", Duration::ZERO)?;
/// lines.handle_eof(Duration::ZERO);
/// assert_eq!(lines.poll_event()?, Some("two".into()));
/// assert_eq!(lines.poll_event()?, None);
/// assert!(lines.is_finished());
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Framed<D> {
    decoder: D,
    phase: Phase,
}

impl<D: Decoder> Framed<D> {
    /// Frames cut by `decoder`.
    pub fn new(decoder: D) -> Self {
        Self {
            decoder,
            phase: Phase::Opening,
        }
    }

    /// The decoder.
    #[must_use]
    pub fn decoder(&self) -> &D {
        &self.decoder
    }

    /// The decoder, to reconfigure it between frames.
    pub fn decoder_mut(&mut self) -> &mut D {
        &mut self.decoder
    }

    /// The decoder.
    #[must_use]
    pub fn into_decoder(self) -> D {
        self.decoder
    }
}

impl<D: Decoder> Protocol for Framed<D> {
    type Event = D::Item;

    #[inline]
    fn poll_event(&mut self, wire: &mut Wire<'_>) -> Result<Option<D::Item>, Error> {
        let decoded = if wire.eof {
            self.decoder.decode_eof(wire.recv)
        } else {
            self.decoder.decode(wire.recv)
        };
        match decoded {
            Ok(Some(item)) => {
                self.phase = Phase::Framing;
                Ok(Some(item))
            }
            Ok(None) => {
                if wire.eof {
                    self.phase = Phase::Done;
                }
                Ok(None)
            }
            Err(e) => {
                self.phase = Phase::Done;
                Err(e)
            }
        }
    }

    #[inline]
    fn phase(&self) -> Phase {
        self.phase
    }
}

/// The bytes as they come, each read as one `Bytes` (a view of the
/// receive buffer, not a copy): a raw tunnel after a protocol switch.
#[derive(Clone, Copy, Debug, Default)]
pub struct Raw {
    done: bool,
}

impl Raw {
    /// A raw protocol.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
}

impl Protocol for Raw {
    type Event = Bytes;

    fn poll_event(&mut self, wire: &mut Wire<'_>) -> Result<Option<Bytes>, Error> {
        if !wire.recv.is_empty() {
            return Ok(Some(wire.recv.take_tail()));
        }
        if wire.eof {
            self.done = true;
        }
        Ok(None)
    }

    fn phase(&self) -> Phase {
        if self.done {
            Phase::Done
        } else {
            Phase::Tunnel
        }
    }
}

/// Reads nothing: a connection that only writes (a socket's write half, a
/// stream the peer never answers on). The connection never asks for a
/// read, gives no event, and is over once its queue is closed and written.
///
/// ```
/// use cleave_proto::conn::{Conn, WriteOnly};
/// use cleave_proto::Bytes;
/// use core::time::Duration;
///
/// let mut out = Conn::new(WriteOnly, Duration::ZERO);
/// assert!(!out.wants_read());
/// out.push(Bytes::from_static(b"hello"))?;
/// assert!(out.wants_write());
/// # Ok::<(), cleave_proto::Rejected<Bytes, cleave_proto::Refusal>>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOnly;

impl Protocol for WriteOnly {
    type Event = core::convert::Infallible;

    fn poll_event(&mut self, _: &mut Wire<'_>) -> Result<Option<Self::Event>, Error> {
        Ok(None)
    }

    fn phase(&self) -> Phase {
        Phase::Done
    }
}
