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

    // ----- reading -----

    fn rsv1_allowed(&self) -> bool {
        #[cfg(feature = "deflate")]
        {
            self.deflate.is_some()
        }
        #[cfg(not(feature = "deflate"))]
        {
            false
        }
    }

    /// Checks a new frame's header against the role, the message in
    /// progress and the limits, and starts reading it.
    fn start(&mut self, head: Head, max_buffered: usize) -> Result<(), Error> {
        let masked = head.mask.is_some();
        if masked != (self.role == Role::Server) {
            return Err(bad(WsField::Mask));
        }
        // A frame read whole that the buffer cannot hold would wait for
        // ever: too big. Control frames are always read whole.
        let whole = (head.head_len as u64).saturating_add(head.len);
        if head.opcode.is_control() {
            if whole > max_buffered as u64 {
                return Err(over(Limit::Buffer, max_buffered as u64, whole));
            }
            self.reading = Some(Reading {
                head,
                seen: 0,
                taken: 0,
                streaming: false,
                checked: self.utf8,
            });
            return Ok(());
        }
        let kind = match (head.opcode, self.message) {
            (OpCode::Continuation, Some(message)) if !head.rsv1 => message.kind,
            (OpCode::Continuation, _) if head.rsv1 => return Err(bad(WsField::Reserved)),
            (OpCode::Text, None) => Kind::Text,
            (OpCode::Binary, None) => Kind::Binary,
            _ => return Err(bad(WsField::Continuation)),
        };
        if head.len > self.config.get_max_frame() {
            return Err(over(
                Limit::FrameLength,
                self.config.get_max_frame(),
                head.len,
            ));
        }
        let compressed = self.message.map_or(head.rsv1, |m| m.compressed);
        // A compressed message's limit counts what it inflates to, which
        // the inflater bounds; its frames' lengths say nothing of that.
        let so_far = self.message.map_or(0, |m| m.len);
        if !compressed && so_far.saturating_add(head.len) > self.config.get_max_message() {
            let attempted = so_far.saturating_add(head.len);
            return Err(over(
                Limit::MessageLength,
                self.config.get_max_message(),
                attempted,
            ));
        }
        let streaming = !compressed && head.len > self.config.get_stream_above();
        // Read whole: compressed, or not above `stream_above`.
        if !streaming && whole > max_buffered as u64 {
            return Err(over(Limit::Buffer, max_buffered as u64, whole));
        }
        // Streamed: the header stays in the buffer until the first piece
        // goes with it, so a header that fills the buffer would wait for
        // ever for a payload byte that cannot come.
        if streaming && head.head_len >= max_buffered {
            return Err(over(
                Limit::Buffer,
                max_buffered as u64,
                head.head_len as u64 + 1,
            ));
        }
        let message = self.message.get_or_insert(Message {
            kind,
            len: 0,
            compressed,
            parts: false,
        });
        message.parts |= streaming || !head.fin;
        self.reading = Some(Reading {
            head,
            seen: 0,
            taken: 0,
            streaming,
            checked: self.utf8,
        });
        Ok(())
    }

    /// Unmasks (and checks, for text) the payload bytes that arrived since
    /// the last call, in place.
    fn unmask_new(&mut self, wire: &mut Wire<'_>) -> Result<u64, Error> {
        let Some(reading) = &mut self.reading else {
            return Ok(0);
        };
        // The header is still in the buffer until the first piece of the
        // payload is split off.
        let at = if reading.taken == 0 {
            reading.head.head_len
        } else {
            0
        };
        let buffered = wire.recv().len().saturating_sub(at) as u64;
        // Payload bytes in the buffer, from `taken` on.
        let have = buffered.min(reading.head.len - reading.taken);
        let upto = reading.taken + have;
        if upto > reading.seen {
            let from = at + usize::try_from(reading.seen - reading.taken).unwrap_or(usize::MAX);
            let to = at + usize::try_from(have).unwrap_or(usize::MAX);
            let bytes = wire.recv().peek_mut().get_mut(from..to).unwrap_or_default();
            if let Some(key) = reading.head.mask {
                frame::apply_mask(bytes, key, reading.seen);
            }
            let text = !reading.head.opcode.is_control()
                && self
                    .message
                    .is_some_and(|m| m.kind == Kind::Text && !m.compressed);
            let valid = !text || self.utf8.feed(bytes).is_ok();
            // Counted as seen even when invalid: `restore` masks again
            // what was unmasked, so the bytes left are those that came.
            reading.seen = upto;
            if !valid {
                return Err(Error::InvalidInput {
                    kind: InvalidInput::Utf8,
                    offset: 0,
                });
            }
        }
        Ok(have)
    }

    /// The next event, or `Ok(None)` for more bytes.
    fn read(&mut self, wire: &mut Wire<'_>) -> Result<Option<WsEvent>, Error> {
        loop {
            // Where the bytes not consumed start: the frame at fault (or
            // the rest of a streamed one).
            let here = wire.recv().offset();
            if self.reading.is_none() {
                let parsed = frame::parse(wire.recv().peek(), self.rsv1_allowed());
                let Some(head) = parsed.map_err(|e| at(e, here))? else {
                    let recv = wire.recv();
                    if recv.is_full() {
                        // A header longer than the buffer (a limit under
                        // 14 bytes) would wait for ever.
                        let max = recv.config().get_max_buffered() as u64;
                        return Err(at(over(Limit::Buffer, max, max + 1), here));
                    }
                    return self.at_end(wire);
                };
                if let Some(event) = self.whole_message(wire, &head) {
                    return Ok(Some(event));
                }
                let max_buffered = wire.recv().config().get_max_buffered();
                self.start(head, max_buffered).map_err(|e| at(e, here))?;
            }
            let have = self.unmask_new(wire).map_err(|e| at(e, here))?;
            let Some(reading) = self.reading else {
                continue;
            };
            if reading.streaming {
                if have == 0 && reading.head.len > reading.taken {
                    return self.at_end(wire);
                }
                return self
                    .stream_piece(wire, reading, have)
                    .map(Some)
                    .map_err(|e| at(e, here));
            }
            if have < reading.head.len {
                return self.at_end(wire);
            }
            // A rule the whole frame broke: the error is at its start.
            let event = self
                .whole_frame(wire, reading.head)
                .map_err(|e| at(e, here))?;
            if event.is_some() || self.owed.is_some() {
                return Ok(event);
            }
        }
    }

    /// The commonest frames of all, read from their first bytes: a whole
    /// text or binary message of at most 64 KiB - 1 (FIN, no reserved
    /// bit, a 7-bit or 16-bit length), masked as the role wants, within
    /// the limits, in the buffer, between messages. Unmasked, checked and
    /// split off at once; `None` for anything else, which [`frame::parse`]
    /// reads and checks in full (invalid text too: masked again, it goes
    /// the long way, which finds the error at its place).
    #[inline(always)]
    fn small_message(&mut self, wire: &mut Wire<'_>) -> Option<WsEvent> {
        let server = self.role == Role::Server;
        let config = &self.config;
        let data = wire.recv().peek_mut();
        let (&b0, &b1) = (data.first()?, data.get(1)?);
        let text = match b0 {
            0x81 => true,
            0x82 => false,
            _ => return None,
        };
        let masked = b1 & 0x80 != 0;
        if masked != server {
            return None;
        }
        let (len, at) = match b1 & 0x7F {
            127 => return None,
            126 => match *data.get(2..4)? {
                [a, b] => (usize::from(u16::from_be_bytes([a, b])), 4),
                _ => return None,
            },
            short => (usize::from(short), 2),
        };
        let limit = config
            .get_max_frame()
            .min(config.get_max_message())
            .min(config.get_stream_above());
        if len as u64 > limit {
            return None;
        }
        let head_len = if masked { at + 4 } else { at };
        let (head, payload) = data.get_mut(..head_len + len)?.split_at_mut(head_len);
        let key = match *head {
            [.., k0, k1, k2, k3] if masked => Some([k0, k1, k2, k3]),
            _ => None,
        };
        if let Some(key) = key {
            frame::apply_mask(payload, key, 0);
        }
        if text && simdutf8::basic::from_utf8(payload).is_err() {
            if let Some(key) = key {
                frame::apply_mask(payload, key, 0);
            }
            return None;
        }
        let data = wire.recv().split_frame(head_len, len, 0);
        Some(if text {
            WsEvent::Text(data)
        } else {
            WsEvent::Binary(data)
        })
    }

    /// The common case at once: a whole single-frame message, in the
    /// buffer, within the limits, uncompressed, between messages:
    /// unmasked, checked and split off with no state kept. `None` for
    /// anything else (and for text that is not UTF-8: masked again, it
    /// goes the long way, which finds the error at its place).
    #[inline]
    fn whole_message(&mut self, wire: &mut Wire<'_>, head: &Head) -> Option<WsEvent> {
        let kind = match head.opcode {
            OpCode::Text => Kind::Text,
            OpCode::Binary => Kind::Binary,
            _ => return None,
        };
        let fits = head.len <= self.config.get_max_frame()
            && head.len <= self.config.get_max_message()
            && head.len <= self.config.get_stream_above();
        let masked = head.mask.is_some() == (self.role == Role::Server);
        if !(head.fin && !head.rsv1 && fits && masked && self.message.is_none()) {
            return None;
        }
        let len = usize::try_from(head.len).ok()?;
        let payload = wire
            .recv()
            .peek_mut()
            .get_mut(head.head_len..head.head_len.checked_add(len)?)?;
        if let Some(key) = head.mask {
            frame::apply_mask(payload, key, 0);
        }
        if kind == Kind::Text && simdutf8::basic::from_utf8(payload).is_err() {
            if let Some(key) = head.mask {
                frame::apply_mask(payload, key, 0);
            }
            return None;
        }
        let data = wire.recv().split_frame(head.head_len, len, 0);
        Some(match kind {
            Kind::Text => WsEvent::Text(data),
            Kind::Binary => WsEvent::Binary(data),
        })
    }

    /// The next piece of a streamed frame.
    fn stream_piece(
        &mut self,
        wire: &mut Wire<'_>,
        reading: Reading,
        have: u64,
    ) -> Result<WsEvent, Error> {
        let skip = if reading.taken == 0 {
            reading.head.head_len
        } else {
            0
        };
        let n = usize::try_from(have).unwrap_or(usize::MAX);
        let taken = reading.taken + have;
        let frame_done = taken == reading.head.len;
        let last = frame_done && reading.head.fin;
        // Judged before the piece is consumed: refused, it stays.
        let kind = self.add_to_message(have, last)?;
        let data = wire.recv().split_frame(skip, n, 0);
        self.reading = if frame_done {
            None
        } else {
            // Every byte seen is taken: the text check is at `taken`.
            Some(Reading {
                taken,
                checked: self.utf8,
                ..reading
            })
        };
        Ok(WsEvent::Part(Part { kind, data, last }))
    }

    /// Counts `len` more bytes of the current message; at its end checks
    /// that its text ended on a code point. Returns the kind.
    fn add_to_message(&mut self, len: u64, last: bool) -> Result<Kind, Error> {
        let Some(message) = &mut self.message else {
            return Err(bad(WsField::Continuation));
        };
        message.len = message.len.saturating_add(len);
        let kind = message.kind;
        if last {
            self.message = None;
            if kind == Kind::Text && self.utf8.end().is_err() {
                return Err(Error::InvalidInput {
                    kind: InvalidInput::Utf8,
                    offset: 0,
                });
            }
        }
        Ok(kind)
    }

    /// A whole frame, unmasked in the buffer. What may refuse it is
    /// judged while its bytes are still there (refused, they stay: `fail`
    /// masks them again), then it is consumed.
    fn whole_frame(&mut self, wire: &mut Wire<'_>, head: Head) -> Result<Option<WsEvent>, Error> {
        let (at, len) = (
            head.head_len,
            usize::try_from(head.len).unwrap_or(usize::MAX),
        );
        fn payload<'w>(wire: &'w mut Wire<'_>, at: usize, len: usize) -> &'w [u8] {
            let bytes = wire.recv().peek();
            bytes.get(at..at.saturating_add(len)).unwrap_or_default()
        }
        if head.opcode.is_control() {
            if head.opcode == OpCode::Close {
                close::check(payload(wire, at, len))?;
            }
            self.reading = None;
            let payload = wire.recv().split_frame(at, len, 0);
            return self.control(wire, head.opcode, payload);
        }
        let Some(message) = self.message else {
            return Err(bad(WsField::Continuation));
        };
        if message.compressed {
            let event = self.inflate(head.fin, payload(wire, at, len))?;
            self.reading = None;
            wire.recv().split_frame(at + len, 0, 0);
            return Ok(event);
        }
        let kind = self.add_to_message(head.len, head.fin)?;
        self.reading = None;
        let payload = wire.recv().split_frame(at, len, 0);
        Ok(Some(if message.parts {
            WsEvent::Part(Part {
                kind,
                data: payload,
                last: head.fin,
            })
        } else {
            match kind {
                Kind::Text => WsEvent::Text(payload),
                Kind::Binary => WsEvent::Binary(payload),
            }
        }))
    }

    /// A frame of a compressed message: inflated; the message comes out
    /// whole at its end.
    #[cfg(feature = "deflate")]
    fn inflate(&mut self, fin: bool, payload: &[u8]) -> Result<Option<WsEvent>, Error> {
        let max = usize::try_from(self.config.get_max_message()).unwrap_or(usize::MAX);
        let Some(deflate) = &mut self.deflate else {
            return Err(bad(WsField::Reserved));
        };
        let before = self.inflated.len();
        deflate.inflate(payload, fin, &mut self.inflated, max)?;
        let kind = self.message.map_or(Kind::Binary, |m| m.kind);
        if kind == Kind::Text && self.utf8.feed(&self.inflated[before..]).is_err() {
            return Err(Error::InvalidInput {
                kind: InvalidInput::Utf8,
                offset: 0,
            });
        }
        let added = (self.inflated.len() - before) as u64;
        self.add_to_message(added, fin)?;
        if !fin {
            return Ok(None);
        }
        let whole = self.inflated.split().freeze();
        // A large message's room goes with it.
        self.inflated = BytesMut::new();
        if let Some(deflate) = &mut self.deflate {
            deflate.release_idle();
        }
        Ok(Some(match kind {
            Kind::Text => WsEvent::Text(whole),
            Kind::Binary => WsEvent::Binary(whole),
        }))
    }

    #[cfg(not(feature = "deflate"))]
    fn inflate(&mut self, _fin: bool, _payload: &[u8]) -> Result<Option<WsEvent>, Error> {
        Err(bad(WsField::Reserved))
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
