//! [`WebSocket`]: the protocol a [`Conn`](crate::Conn) drives once the
//! opening handshake is done.

use alloc::boxed::Box;
use bytes::Bytes;
#[cfg(feature = "deflate")]
use bytes::BytesMut;

use crate::conn::{Close, Phase, Protocol, Wire};
use crate::encoder::Frame;
use crate::error::{Error, InvalidInput, Limit, Refusal, Timeout, WsField};
use crate::recv_buf::RecvBuf;
use crate::websocket::close::{self, CloseFrame};
use crate::websocket::config::WsConfig;
#[cfg(feature = "deflate")]
use crate::websocket::deflate::{Deflate, DeflateConfig, DeflateParams};
use crate::websocket::frame::{self, Head, OpCode};
use crate::websocket::utf8::Utf8;
use crate::websocket::{Entropy, Role};

mod encode;
mod read;

/// What a message holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// UTF-8 text (checked).
    Text,
    /// Bytes.
    Binary,
}

/// A piece of a message: one frame of a fragmented message, or a piece of
/// a large frame handed out as it arrives
/// ([`WsConfig::stream_above`]). Text pieces may split a code point; the
/// message as a whole is checked UTF-8.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// The message's kind (from its first frame).
    pub kind: Kind,
    /// The bytes: a view of the receive buffer.
    pub data: Bytes,
    /// Whether this is the message's last piece.
    pub last: bool,
}

/// What a [`WebSocket`] reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WsEvent {
    /// A whole text message (checked UTF-8): a view of the receive buffer
    /// when it came in one frame (no copy), or the inflated message when
    /// it was compressed.
    Text(Bytes),
    /// A whole binary message, as for [`Text`](Self::Text).
    Binary(Bytes),
    /// A piece of a message that came in several frames, or of a frame
    /// larger than [`WsConfig::stream_above`].
    /// [`Assembler`](crate::websocket::Assembler) makes whole messages of
    /// them with one copy.
    Part(Part),
    /// A ping (answered already), when [`WsConfig::pings`] asks for it.
    Ping(Bytes),
    /// A pong, when [`WsConfig::pings`] asks for it.
    Pong(Bytes),
    /// The peer's close frame. The close handshake is done: the answer
    /// (an echo of the code) is queued unless this side closed first, the
    /// write side shuts once it is out, and no event follows.
    Close(CloseFrame),
}

/// Where the close handshake is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Closing {
    /// Neither side closed.
    Open,
    /// This side sent its close; the peer's is awaited.
    Sent,
    /// Both closes are done (or the stream ended, or failed).
    Done,
}

/// A reply waiting for room.
#[derive(Debug)]
enum Owed {
    /// A ping's answer (urgent lane).
    Pong(Frame),
}

/// The frame being read.
#[derive(Clone, Copy, Debug)]
struct Reading {
    head: Head,
    /// Payload bytes already unmasked (and checked, for text) in place.
    seen: u64,
    /// Payload bytes already handed out (a streamed frame).
    taken: u64,
    /// Whether the frame is handed out in pieces.
    streaming: bool,
    /// The text check as it was at `taken`: where it goes back to when
    /// the bytes seen are masked again ([`WebSocket::remask`]).
    checked: Utf8,
}

/// The message being read, across its frames.
#[derive(Clone, Copy, Debug)]
struct Message {
    kind: Kind,
    /// Payload bytes so far (inflated, when compressed).
    len: u64,
    /// Whether it was compressed (RSV1 on its first frame).
    compressed: bool,
    /// Whether it is handed out in pieces (fragmented, or streamed).
    parts: bool,
}

/// WebSocket frames and messages, one role, as a [`Protocol`]: the
/// events are [`WsEvent`]s.
///
/// It unmasks a client's frames in place in the receive buffer and hands
/// payloads out as views of it (a message in one frame is one `Bytes`,
/// never copied); checks text as UTF-8 as it arrives (an invalid sequence
/// fails as soon as it is certain, even inside a frame still arriving);
/// answers pings with pongs and a close with a close, on the urgent lane,
/// by itself; fails the connection on any broken rule with the close code
/// that fits ([`close_code_for`](crate::websocket::close_code_for)) and a
/// typed error.
///
/// ```
/// use cleave_proto::conn::Conn;
/// use cleave_proto::websocket::{WebSocket, WsConfig, WsEvent};
/// use cleave_proto::Bytes;
/// use core::time::Duration;
///
/// let mut conn = Conn::new(WebSocket::server(WsConfig::default()), Duration::ZERO);
/// // RFC 6455, section 5.7: a masked "Hello" from a client, then a ping.
/// conn.feed(b"\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58", Duration::ZERO)?;
/// conn.feed(b"\x89\x80\x01\x02\x03\x04", Duration::ZERO)?;
/// assert_eq!(conn.poll_event()?, Some(WsEvent::Text(Bytes::from_static(b"Hello"))));
/// assert_eq!(conn.poll_event()?, None); // the ping was answered: a pong is queued
/// assert_eq!(conn.queue().len(), 2);
/// # Ok::<(), cleave_proto::Error>(())
/// ```
pub struct WebSocket {
    role: Role,
    config: WsConfig,
    reading: Option<Reading>,
    message: Option<Message>,
    utf8: Utf8,
    closing: Closing,
    /// A message is being sent in parts ([`part`](Self::part)): only its
    /// continuations (and control frames) may go until its last.
    sending: bool,
    /// The application made this side's close ([`close`](Self::close)):
    /// no data frame may follow it. (After the peer's close, answers to
    /// the messages before it may still be made: the protocol's echo of
    /// the close goes after them, and the queue closes then.)
    closed: bool,
    /// The stream ended, or reading failed: no event comes.
    done: bool,
    /// A reply that found no room in the queue: nothing more is read until
    /// it is queued.
    owed: Option<Owed>,
    entropy: Option<Box<dyn Entropy + Send>>,
    #[cfg(feature = "deflate")]
    deflate: Option<Box<Deflate>>,
    /// Messages shorter than this are sent uncompressed.
    #[cfg(feature = "deflate")]
    deflate_min: usize,
    /// A compressed message inflated so far.
    #[cfg(feature = "deflate")]
    inflated: BytesMut,
}

impl core::fmt::Debug for WebSocket {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WebSocket")
            .field("role", &self.role)
            .field("config", &self.config)
            .field("closing", &self.closing)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

fn bad(field: WsField) -> Error {
    Error::InvalidInput {
        kind: InvalidInput::WebSocket(field),
        offset: 0,
    }
}

impl WebSocket {
    fn new(role: Role, config: WsConfig, entropy: Option<Box<dyn Entropy + Send>>) -> Self {
        Self {
            role,
            config,
            reading: None,
            message: None,
            utf8: Utf8::default(),
            closing: Closing::Open,
            sending: false,
            closed: false,
            done: false,
            owed: None,
            entropy,
            #[cfg(feature = "deflate")]
            deflate: None,
            #[cfg(feature = "deflate")]
            deflate_min: 0,
            #[cfg(feature = "deflate")]
            inflated: BytesMut::new(),
        }
    }

    /// The server's side: reads masked frames, sends unmasked ones.
    #[must_use]
    pub fn server(config: WsConfig) -> Self {
        Self::new(Role::Server, config, None)
    }

    /// The client's side: reads unmasked frames, masks what it sends with
    /// keys drawn from `entropy`.
    #[must_use]
    pub fn client(config: WsConfig, entropy: impl Entropy + Send + 'static) -> Self {
        Self::new(Role::Client, config, Some(Box::new(entropy)))
    }

    /// Compresses and inflates messages with the negotiated
    /// permessage-deflate `params` (from the handshake).
    #[cfg(feature = "deflate")]
    #[must_use]
    pub fn with_deflate(mut self, params: DeflateParams, config: &DeflateConfig) -> Self {
        self.deflate = Some(Box::new(Deflate::new(self.role, params, config)));
        self.deflate_min = config.get_min_size();
        self
    }

    /// Which end this is.
    #[must_use]
    pub fn role(&self) -> Role {
        self.role
    }

    /// The limits.
    #[must_use]
    pub fn config(&self) -> &WsConfig {
        &self.config
    }

    /// Whether this side sent its close (and takes no more messages).
    #[must_use]
    pub fn is_closing(&self) -> bool {
        self.closing != Closing::Open
    }

    /// A whole control frame: a ping answered, a close handled.
    fn control(
        &mut self,
        wire: &mut Wire<'_>,
        opcode: OpCode,
        payload: Bytes,
    ) -> Result<Option<WsEvent>, Error> {
        match opcode {
            OpCode::Ping => {
                // Answered unless the peer closed (RFC 6455, section
                // 5.5.2): after a close of ours too, since only data may
                // not follow it (section 5.5.1), and the peer, which has
                // not seen it yet, may wait for its pong.
                if self.config.get_auto_pong() && self.closing != Closing::Done {
                    let pong = self.frame(true, false, OpCode::Pong, payload.clone());
                    self.reply(wire, pong);
                }
                // Without auto-pong the application answers: it sees them.
                let visible = self.config.get_pings() || !self.config.get_auto_pong();
                Ok(visible.then_some(WsEvent::Ping(payload)))
            }
            OpCode::Pong => Ok(self.config.get_pings().then_some(WsEvent::Pong(payload))),
            _ => {
                let frame = close::parse(&payload)?;
                if self.closing == Closing::Open {
                    // After the answers to the messages before it.
                    let echo = self.close_frame(frame.code, &[]);
                    wire.farewell(echo);
                } else {
                    wire.close_write();
                }
                self.closing = Closing::Done;
                Ok(Some(WsEvent::Close(frame)))
            }
        }
    }

    /// Queues a pong on the urgent lane; `false` when it must wait for
    /// room (a peer that pings and does not read): it is owed, and
    /// reading waits for it to go. A closed queue (the write side shut or
    /// failed) will never take it: it is dropped, and reading goes on.
    // Off the path of data frames, as the pings it answers.
    #[inline(never)]
    fn reply(&mut self, wire: &mut Wire<'_>, pong: Frame) -> bool {
        match wire.reply(pong) {
            Ok(_) => true,
            Err(refused) => match refused.into_parts() {
                (Refusal::Full(_), pong) => {
                    self.owed = Some(Owed::Pong(pong));
                    false
                }
                (Refusal::Closed, _) => true,
            },
        }
    }

    /// No complete event in the buffer: wait, or at the end of the stream
    /// finish (cleanly between frames, with the bytes of a cut frame
    /// otherwise).
    fn at_end(&mut self, wire: &mut Wire<'_>) -> Result<Option<WsEvent>, Error> {
        if !wire.is_eof() {
            return Ok(None);
        }
        self.done = true;
        if wire.recv().is_empty() && self.reading.is_none() && self.message.is_none() {
            return Ok(None);
        }
        self.restore(wire);
        let offset = wire.recv().offset();
        Err(Error::Truncated {
            partial: wire.recv().take_tail(),
            offset,
        })
    }

    /// Masks again what was unmasked of a frame left in the buffer, so
    /// that the bytes handed back (an error's, the end's) are the bytes
    /// that arrived; reading stops there.
    fn restore(&mut self, wire: &mut Wire<'_>) {
        self.remask(wire.recv());
        self.reading = None;
    }

    /// Masks again what was unmasked of the frame in the buffer and
    /// forgets having seen it (the text check goes back too): the buffer
    /// holds the bytes that arrived, and reading on unmasks them again.
    fn remask(&mut self, recv: &mut RecvBuf) {
        let Some(reading) = &mut self.reading else {
            return;
        };
        if let Some(key) = reading.head.mask {
            let at = if reading.taken == 0 {
                reading.head.head_len
            } else {
                0
            };
            let len = usize::try_from(reading.seen - reading.taken).unwrap_or(usize::MAX);
            if let Some(bytes) = recv.peek_mut().get_mut(at..at.saturating_add(len)) {
                frame::apply_mask(bytes, key, reading.taken);
            }
        }
        reading.seen = reading.taken;
        self.utf8 = reading.checked;
    }

    /// Everything but the fast path of `poll_event`.
    #[inline(never)]
    fn poll_slow(&mut self, wire: &mut Wire<'_>) -> Result<Option<WsEvent>, Error> {
        if let Some(Owed::Pong(pong)) = self.owed.take() {
            // Still owed after a close of ours; not once the peer closed.
            if self.closing != Closing::Done && !self.reply(wire, pong) {
                return Ok(None);
            }
        }
        if self.done {
            return Ok(None);
        }
        match self.read(wire) {
            Ok(Some(WsEvent::Close(frame))) => {
                self.done = true;
                Ok(Some(WsEvent::Close(frame)))
            }
            Ok(event) => Ok(event),
            Err(e) => Err(self.fail(wire, e)),
        }
    }

    /// Fails the connection: the close that fits `error` goes out at the
    /// next write, after the application's answers to the messages before
    /// the error (unless a close went out already), and the write side
    /// shuts after it.
    fn fail(&mut self, wire: &mut Wire<'_>, error: Error) -> Error {
        self.restore(wire);
        if self.closing == Closing::Open && !matches!(error, Error::Truncated { .. }) {
            let close = self.close_frame(Some(close::close_code_for(&error)), &[]);
            wire.farewell(close);
        } else {
            wire.close_write();
        }
        self.closing = Closing::Done;
        self.done = true;
        error
    }
}

/// `error` (made without a place) placed at `offset` in the stream.
fn at(error: Error, offset: u64) -> Error {
    match error {
        Error::InvalidInput { kind, .. } => Error::InvalidInput { kind, offset },
        Error::LimitExceeded {
            limit,
            max,
            attempted,
            ..
        } => Error::LimitExceeded {
            limit,
            max,
            attempted,
            offset,
        },
        other => other,
    }
}

fn over(limit: Limit, max: u64, attempted: u64) -> Error {
    Error::LimitExceeded {
        limit,
        max,
        attempted,
        offset: 0,
    }
}

fn control_len(len: usize) -> Result<(), Error> {
    if len > 125 {
        return Err(Error::Misuse(crate::error::Misuse::Unencodable(
            crate::error::Unencodable::TooLong {
                len: len as u64,
                max: 125,
            },
        )));
    }
    Ok(())
}

impl Protocol for WebSocket {
    type Event = WsEvent;

    /// The fast path first (a protocol inside another is polled here
    /// alone), then the long way.
    #[inline]
    fn poll_event(&mut self, wire: &mut Wire<'_>) -> Result<Option<WsEvent>, Error> {
        if let Some(event) = self.poll_fast(wire) {
            return Ok(Some(event));
        }
        self.poll_slow(wire)
    }

    /// The commonest case, inlined into the caller's loop: a small whole
    /// message between messages, with nothing owed.
    #[inline(always)]
    fn poll_fast(&mut self, wire: &mut Wire<'_>) -> Option<WsEvent> {
        if self.owed.is_none() && !self.done && self.reading.is_none() && self.message.is_none() {
            self.small_message(wire)
        } else {
            None
        }
    }

    /// A timeout ends the connection with a close 1001 (going away) after
    /// the messages queued before it, unless a close went out already,
    /// then a clean end: the close says why, so even a frame left half
    /// read is no reset.
    fn on_timeout(&mut self, wire: &mut Wire<'_>, timeout: Timeout) -> Close {
        self.restore(wire);
        if self.closing == Closing::Open {
            let code = close::close_code_for(&Error::TimedOut(timeout));
            let close = self.close_frame(Some(code), &[]);
            wire.farewell(close);
        }
        self.closing = Closing::Done;
        self.done = true;
        Close::Clean
    }

    /// Drops the zlib state that no message needs between messages (a
    /// direction without context takeover), unless a compressed message
    /// is half read.
    fn release_idle(&mut self) {
        #[cfg(feature = "deflate")]
        if let Some(deflate) = &mut self.deflate {
            deflate.release_idle();
        }
    }

    fn waits_for_room(&self) -> bool {
        self.owed.is_some()
    }

    /// A frame half read is masked again in the buffer.
    fn hand_back(&mut self, recv: &mut RecvBuf) {
        self.remask(recv);
    }

    fn phase(&self) -> Phase {
        // Done once the last answer is queued.
        if self.done && self.owed.is_none() {
            Phase::Done
        } else {
            Phase::Framing
        }
    }
}
