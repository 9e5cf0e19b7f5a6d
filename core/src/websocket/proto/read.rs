//! Reading: each frame's header checked against the role, the message
//! in progress and the limits; payloads unmasked in place and handed out
//! as views of the receive buffer, whole or in pieces; text checked as it
//! comes; compressed messages inflated.

#[cfg(feature = "deflate")]
use bytes::BytesMut;

use super::{at, bad, over, Kind, Message, Part, Reading, WebSocket, WsEvent};
use crate::conn::Wire;
use crate::error::{Error, InvalidInput, Limit, WsField};
use crate::websocket::close;
use crate::websocket::frame::{self, Head, OpCode};
use crate::websocket::Role;

impl WebSocket {
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
    pub(super) fn read(&mut self, wire: &mut Wire<'_>) -> Result<Option<WsEvent>, Error> {
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
    pub(super) fn small_message(&mut self, wire: &mut Wire<'_>) -> Option<WsEvent> {
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
}
