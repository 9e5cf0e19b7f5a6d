//! What the application sends: messages, fragments, pings, pongs and
//! the close, each a frame to push on the connection's queue.

use bytes::{Bytes, BytesMut};

use super::{control_len, Closing, Kind, WebSocket};
use crate::encoder::{self, Frame, INLINE_FRAMING};
use crate::error::{Error, Misuse, Unencodable};
use crate::websocket::close;
use crate::websocket::frame::{self, OpCode};
use crate::websocket::slice::SliceFrame;

impl WebSocket {
    /// A whole message as one frame to push: the payload is not copied
    /// for a server (the header is inline framing); a client must mask it:
    /// in place when the `Bytes` is the only handle to its memory (a
    /// buffer built for this message), else into a copy, so that no other
    /// holder sees masked bytes. With permessage-deflate negotiated the message
    /// is compressed (unless shorter than `DeflateConfig::min_size`, with
    /// the `deflate` feature).
    ///
    /// With context takeover, each compressed frame refers to the ones
    /// made before it: push every frame this makes, in the order it made
    /// them, on one lane. A frame dropped (a push refused and not retried)
    /// or sent out of order leaves the peer unable to inflate what
    /// follows.
    ///
    /// # Errors
    ///
    /// [`Unencodable::WsClosed`](crate::Unencodable::WsClosed) once this
    /// side made its close ([`close`](Self::close)): no data frame may
    /// follow it; [`Unencodable::WsFragment`](crate::Unencodable::WsFragment)
    /// while a message sent in parts is unfinished. After the peer's close
    /// the messages before it may still be answered: the protocol's echo
    /// of that close goes after them, and the queue takes nothing more
    /// once it is queued.
    #[inline]
    pub fn message(&mut self, kind: Kind, payload: Bytes) -> Result<Frame, Error> {
        self.may_start()?;
        let opcode = data_opcode(kind);
        #[cfg(feature = "deflate")]
        if let Some(deflate) = self
            .deflate
            .as_mut()
            .filter(|_| payload.len() >= self.deflate_min)
        {
            let compressed = deflate.compress(&payload);
            return Ok(self.frame(true, true, opcode, compressed));
        }
        Ok(self.frame(true, false, opcode, payload))
    }

    /// Whether a new message may start: no close made, no message sent
    /// in parts unfinished.
    #[inline(always)]
    fn may_start(&self) -> Result<(), Error> {
        if self.closed {
            return Err(unencodable(Unencodable::WsClosed));
        }
        if self.sending {
            return Err(unencodable(Unencodable::WsFragment));
        }
        Ok(())
    }

    /// A whole message as one frame to push, from a payload the caller
    /// keeps: pushed, the header and the payload are copied into the write
    /// queue's run buffer, a client's payload masked in the same pass (its
    /// one copy). For messages built in a buffer the caller reuses, and
    /// for small ones, whose payloads the queue copies anyway: no
    /// [`Bytes`] is made or dropped. With permessage-deflate negotiated the
    /// message is compressed as by [`message`](Self::message), and the same
    /// rule on order applies.
    ///
    /// ```
    /// use std::time::Duration;
    /// use cleave_proto::websocket::{Kind, WebSocket, WsConfig};
    /// use cleave_proto::Conn;
    ///
    /// let mut conn = Conn::new(WebSocket::server(WsConfig::default()), Duration::ZERO);
    /// let mut reply = String::new();
    /// for n in 0..3 {
    ///     reply.clear();
    ///     reply.push_str("tick ");
    ///     reply.push(char::from(b'0' + n));
    ///     let frame = conn.protocol_mut().message_slice(Kind::Text, reply.as_bytes())?;
    ///     conn.push(frame).expect("room");
    /// }
    /// let mut slices = [&[][..]; 4];
    /// let n = conn.poll_transmit_slices(&mut slices);
    /// let out = slices[..n].concat();
    /// assert_eq!(&out[..8], b"\x81\x06tick 0");
    /// assert_eq!(out.len(), 3 * 8);
    /// # Ok::<(), cleave_proto::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`message`](Self::message).
    #[inline]
    pub fn message_slice<'a>(
        &mut self,
        kind: Kind,
        payload: &'a [u8],
    ) -> Result<SliceFrame<'a>, Error> {
        self.may_start()?;
        let opcode = data_opcode(kind);
        #[cfg(feature = "deflate")]
        if let Some(deflate) = self
            .deflate
            .as_mut()
            .filter(|_| payload.len() >= self.deflate_min)
        {
            let compressed = deflate.compress(payload);
            return Ok(SliceFrame::built(
                self.frame(true, true, opcode, compressed),
            ));
        }
        Ok(SliceFrame::copied(opcode, self.draw_mask(), payload))
    }

    /// One frame of a message sent in pieces (never compressed): `first`
    /// on the first (which says the kind), `last` on the last. Between
    /// the first and the last, only this message's parts (and control
    /// frames) may go.
    ///
    /// # Errors
    ///
    /// [`Unencodable::WsClosed`](crate::Unencodable::WsClosed) once this
    /// side made its close; [`Unencodable::WsFragment`](crate::Unencodable::WsFragment)
    /// for a first part while another message sent in parts is
    /// unfinished, or a later part with no message started.
    pub fn part(
        &mut self,
        kind: Kind,
        payload: Bytes,
        first: bool,
        last: bool,
    ) -> Result<Frame, Error> {
        if self.closed {
            return Err(unencodable(Unencodable::WsClosed));
        }
        if first == self.sending {
            return Err(unencodable(Unencodable::WsFragment));
        }
        self.sending = !last;
        let opcode = if first {
            data_opcode(kind)
        } else {
            OpCode::Continuation
        };
        Ok(self.frame(last, false, opcode, payload))
    }

    /// A ping to push.
    ///
    /// # Errors
    ///
    /// [`Unencodable::TooLong`](crate::Unencodable::TooLong) past 125 bytes.
    pub fn ping(&mut self, payload: Bytes) -> Result<Frame, Error> {
        control_len(payload.len())?;
        Ok(self.frame(true, false, OpCode::Ping, payload))
    }

    /// A pong to push: the answer to a [`WsEvent::Ping`](super::WsEvent::Ping) (with its
    /// payload) when [`auto_pong`](crate::websocket::WsConfig::auto_pong)
    /// is off, or an unsolicited one (a heartbeat, RFC 6455 section 5.5.3).
    /// Push it on the urgent lane, and not after a close.
    ///
    /// # Errors
    ///
    /// [`Unencodable::TooLong`](crate::Unencodable::TooLong) past 125 bytes.
    pub fn pong(&mut self, payload: Bytes) -> Result<Frame, Error> {
        control_len(payload.len())?;
        Ok(self.frame(true, false, OpCode::Pong, payload))
    }

    /// The close frame to push to start the close handshake: `code` (one
    /// that may be sent, see [`is_sendable`](crate::websocket::is_sendable))
    /// and a reason of at most 123 bytes. From then on the events end with
    /// the peer's answer ([`WsEvent::Close`](super::WsEvent::Close)), and
    /// no message or part is made (`WsClosed`). Push the frame it
    /// returns, on the bulk lane after the messages before it: the
    /// protocol counts it as sent, and answers the peer's close only by
    /// ending the write side.
    ///
    /// Once the peer's close came, the protocol answers it itself (after
    /// the messages queued before it), as it closes a connection that
    /// failed: there is no close left to send then.
    ///
    /// # Errors
    ///
    /// [`Unencodable::TooLong`](crate::Unencodable::TooLong) for a long
    /// reason, [`InvalidConfig`](crate::Misuse::InvalidConfig) for a code
    /// that may not be sent,
    /// [`Unencodable::WsClosed`](crate::Unencodable::WsClosed) once a
    /// close was made or the close handshake is over.
    pub fn close(&mut self, code: u16, reason: &str) -> Result<Frame, Error> {
        if !close::is_sendable(code) {
            return Err(Error::invalid_config(
                "close code",
                u64::from(code),
                "1000-1003, 1007-1014 or 3000-4999",
            ));
        }
        control_len(2 + reason.len())?;
        if self.closing != Closing::Open {
            return Err(unencodable(Unencodable::WsClosed));
        }
        self.closing = Closing::Sent;
        self.closed = true;
        Ok(self.close_frame(Some(code), reason.as_bytes()))
    }

    pub(super) fn close_frame(&mut self, code: Option<u16>, reason: &[u8]) -> Frame {
        let mut payload = BytesMut::with_capacity(2 + reason.len());
        if let Some(code) = code {
            payload.extend_from_slice(&code.to_be_bytes());
            payload.extend_from_slice(reason);
        }
        self.frame(true, false, OpCode::Close, payload.freeze())
    }

    /// A client's mask for its next frame (a server's frames have none).
    #[inline]
    fn draw_mask(&mut self) -> Option<[u8; 4]> {
        self.entropy.as_mut().map(|entropy| {
            let mut key = [0; 4];
            entropy.fill(&mut key);
            key
        })
    }

    /// A frame: the header inline; a client's payload masked (in place
    /// when no one else holds it, else into a copy).
    #[inline]
    pub(super) fn frame(&mut self, fin: bool, rsv1: bool, opcode: OpCode, payload: Bytes) -> Frame {
        let mask = self.draw_mask();
        let mut head = [0; INLINE_FRAMING];
        let n = frame::write(&mut head, fin, rsv1, opcode, payload.len(), mask);
        let body = match mask {
            Some(key) => {
                // Masked in place when the payload is ours alone (a buffer
                // the caller built and handed over); else into a copy,
                // so no one else's bytes change.
                let mut masked = payload
                    .try_into_mut()
                    .unwrap_or_else(|shared| BytesMut::from(&shared[..]));
                frame::apply_mask(&mut masked, key, 0);
                masked.freeze()
            }
            None => payload,
        };
        // Inline as it is: no variable-length copy of the header.
        Frame::from_parts(
            encoder::Part::inline(head, n),
            body,
            encoder::Part::inline([0; INLINE_FRAMING], 0),
        )
    }
}

/// The opcode of a message's first frame.
#[inline(always)]
fn data_opcode(kind: Kind) -> OpCode {
    match kind {
        Kind::Text => OpCode::Text,
        Kind::Binary => OpCode::Binary,
    }
}

fn unencodable(why: Unencodable) -> Error {
    Error::Misuse(Misuse::Unencodable(why))
}
