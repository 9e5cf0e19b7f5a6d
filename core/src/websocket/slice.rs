//! [`SliceFrame`]: a message sent from a borrowed payload, built straight
//! into the write queue's run buffer.

use bytes::BytesMut;

#[cfg(feature = "deflate")]
use crate::encoder::Frame;
use crate::encoder::INLINE_FRAMING;
use crate::error::{Refusal, Rejected};
use crate::websocket::frame;
use crate::write::{Lane, Push, Ticket, WriteQueue};

/// A whole message to push whose payload is borrowed: from
/// [`WebSocket::message_slice`](crate::websocket::WebSocket::message_slice).
///
/// Pushed, its header and payload are copied into the lane's run buffer
/// (a client's payload masked there, in the same pass): one copy, and no
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
    /// The header made, the payload still the caller's.
    Copy(Copied<'a>),
    /// A compressed message: the payload is a new buffer already.
    #[cfg(feature = "deflate")]
    Frame(Frame),
}

#[derive(Debug)]
struct Copied<'a> {
    head: [u8; INLINE_FRAMING],
    head_len: u8,
    mask: Option<[u8; 4]>,
    payload: &'a [u8],
}

impl<'a> SliceFrame<'a> {
    /// A frame whose header `frame::write` made in `head`.
    pub(crate) fn copied(
        head: [u8; INLINE_FRAMING],
        head_len: usize,
        mask: Option<[u8; 4]>,
        payload: &'a [u8],
    ) -> Self {
        debug_assert!(head_len <= frame::MAX_HEAD);
        #[allow(clippy::cast_possible_truncation)] // at most 14
        let head_len = head_len as u8;
        Self(Inner::Copy(Copied {
            head,
            head_len,
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
        usize::from(self.head_len) + self.payload.len()
    }

    /// Writes the header and the payload (masked, for a client) at the end
    /// of `run`.
    #[inline(always)]
    fn fill(self, run: &mut BytesMut) {
        // The common lengths as constants: a copy of 2 or 6 bytes is a
        // move, where a length known only at run time is a call.
        match self.head_len {
            2 => run.extend_from_slice(&self.head[..2]),
            6 => run.extend_from_slice(&self.head[..6]),
            n => run.extend_from_slice(&self.head[..usize::from(n)]),
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
