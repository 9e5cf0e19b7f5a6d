//! [`SliceFrame`]: a message sent from a borrowed payload, built straight
//! into the write queue's run buffer.

use bytes::BytesMut;

#[cfg(feature = "deflate")]
use crate::encoder::Frame;
use crate::encoder::INLINE_FRAMING;
use crate::error::{Refusal, Rejected};
use crate::websocket::frame::{self, OpCode};
use crate::write::{Lane, Push, Ticket, WriteQueue};

/// A whole message to push whose payload is borrowed: from
/// [`WebSocket::message_slice`](crate::websocket::WebSocket::message_slice).
///
/// Pushed, its header is written into the lane's run buffer and its
/// payload copied after it (a client's masked there, in the same pass):
/// one copy, and no
/// [`Bytes`](bytes::Bytes) made or dropped. For small messages that is
/// what the queue does with a `Bytes` payload anyway (it copies pushes
/// below [`coalesce_below`](crate::WriteQueueConfig::coalesce_below)), less
/// two reference-count updates; a large payload held as `Bytes` is better
/// sent with [`message`](crate::websocket::WebSocket::message), which does
/// not copy it. A refused push gives the frame back, to push again.
#[derive(Debug)]
#[must_use = "a frame does nothing until it is pushed"]
pub struct SliceFrame<'a>(Inner<'a>);

#[derive(Debug)]
enum Inner<'a> {
    /// The header still to write, the payload still the caller's.
    Copy(Copied<'a>),
    /// A compressed message: the payload is a new buffer already.
    #[cfg(feature = "deflate")]
    Frame(Frame),
}

#[derive(Debug)]
struct Copied<'a> {
    /// The message's opcode (a final frame, uncompressed).
    opcode: OpCode,
    mask: Option<[u8; 4]>,
    payload: &'a [u8],
}

impl<'a> SliceFrame<'a> {
    /// A whole message of `opcode` whose header is written when it is
    /// pushed, masked with `mask` (a client's).
    pub(crate) fn copied(opcode: OpCode, mask: Option<[u8; 4]>, payload: &'a [u8]) -> Self {
        Self(Inner::Copy(Copied {
            opcode,
            mask,
            payload,
        }))
    }

    /// A frame built already (a compressed message).
    #[cfg(feature = "deflate")]
    pub(crate) fn built(frame: Frame) -> Self {
        Self(Inner::Frame(frame))
    }
}

impl Copied<'_> {
    fn len(&self) -> usize {
        frame::head_len(self.payload.len(), self.mask.is_some()) + self.payload.len()
    }

    /// Writes the header and the payload (masked, for a client) at the end
    /// of `run`. The header is made here, not when the frame was: a
    /// `Copied` stays three words (a header carried from one to the other
    /// is sixteen bytes zeroed, written and moved twice).
    #[inline(always)]
    fn fill(self, run: &mut BytesMut) {
        let first = 0x80 | self.opcode.bits();
        // The header of a 7- or 16-bit length as a copy of a constant
        // length, which is a move, where a length known only at run time
        // is a call to `memcpy`.
        let len = self.payload.len();
        match (u8::try_from(len), u16::try_from(len), self.mask) {
            (Ok(short @ 0..=125), _, None) => run.extend_from_slice(&[first, short]),
            (Ok(short @ 0..=125), _, Some([k0, k1, k2, k3])) => {
                run.extend_from_slice(&[first, 0x80 | short, k0, k1, k2, k3]);
            }
            (_, Ok(mid), None) => {
                let [l0, l1] = mid.to_be_bytes();
                run.extend_from_slice(&[first, 126, l0, l1]);
            }
            (_, Ok(mid), Some([k0, k1, k2, k3])) => {
                let [l0, l1] = mid.to_be_bytes();
                run.extend_from_slice(&[first, 0x80 | 126, l0, l1, k0, k1, k2, k3]);
            }
            _ => {
                let mut head = [0; INLINE_FRAMING];
                let n = frame::write(&mut head, true, false, self.opcode, len, self.mask);
                run.extend_from_slice(&head[..n]);
            }
        }
        let at = run.len();
        run.extend_from_slice(self.payload);
        if let Some(key) = self.mask {
            frame::apply_mask(&mut run[at..], key, 0);
        }
    }
}

impl Push for SliceFrame<'_> {
    #[inline(always)]
    fn push_into(
        self,
        queue: &mut WriteQueue,
        lane: Lane,
    ) -> Result<Ticket, Rejected<Self, Refusal>> {
        match self.0 {
            Inner::Copy(copied) => {
                let len = copied.len();
                queue
                    .push_filled(lane, copied, len, Copied::fill)
                    .map_err(|refused| {
                        let (error, copied) = refused.into_parts();
                        Rejected::new(error, Self(Inner::Copy(copied)))
                    })
            }
            #[cfg(feature = "deflate")]
            Inner::Frame(frame) => frame.push_into(queue, lane).map_err(|refused| {
                let (error, frame) = refused.into_parts();
                Rejected::new(error, Self(Inner::Frame(frame)))
            }),
        }
    }

    fn wire_len(&self) -> usize {
        match &self.0 {
            Inner::Copy(copied) => copied.len(),
            #[cfg(feature = "deflate")]
            Inner::Frame(frame) => frame.len(),
        }
    }
}
