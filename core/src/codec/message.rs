//! Typed prost messages over varint-delimited frames (feature `prost`).
//!
//! ```text
//!   ┌───────────────────────┬──────────────────────────────────────┐
//!   │ LEB128 length, 1-10 B │ a protobuf message (length bytes)    │
//!   └───────────────────────┴──────────────────────────────────────┘
//! ```
//!
//! This is protobuf's length-delimited stream, as prost's
//! `encode_length_delimited` writes it and protosocket-prost sends it.
//! [`ProstCodec`] cuts frames with [`Varint`] (so a malformed length is an
//! error within its 10 bytes, where protosocket-prost waits for more) and
//! decodes each from the `Bytes` frame, so the fields a message declares
//! as `bytes::Bytes` (`#[prost(bytes = "bytes")]`, or prost-build's
//! `bytes(..)`) are views of the receive buffer, not copies (unless the
//! buffer copies small frames out: see
//! [`RecvBufConfig::copy_frames_up_to`](crate::RecvBufConfig::copy_frames_up_to)).

use alloc::boxed::Box;
use bytes::{Bytes, BytesMut};
use core::fmt;
use core::marker::PhantomData;

use crate::codec::varint::{Varint, VarintConfig};
use crate::decoder::{Decoder, Latch};
use crate::encoder::{refuse, Encoder, Frame};
use crate::error::{Error, InvalidInput, Unencodable};
use crate::recv_buf::RecvBuf;

/// A frame whose payload prost could not decode as the expected message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadMessage {
    /// Why prost refused it.
    pub error: prost::DecodeError,
    /// The payload (without its length), as received.
    pub payload: Bytes,
    /// Stream offset of the frame's first byte (its length).
    pub offset: u64,
}

impl fmt::Display for BadMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the {}-byte frame at offset {} is not a valid message: {}",
            self.payload.len(),
            self.offset,
            self.error
        )
    }
}

/// Decoder and encoder of prost messages `M`, each behind its varint
/// length.
///
/// ```
/// use cleave_proto::codec::message::ProstCodec;
/// use cleave_proto::{Decoder, Encoder, RecvBuf};
///
/// #[derive(Clone, PartialEq, prost::Message)]
/// struct Ping {
///     #[prost(uint64, tag = "1")]
///     id: u64,
/// }
///
/// let mut codec = ProstCodec::<Ping>::new();
/// let frame = codec.encode(Ping { id: 7 })?;
/// assert_eq!([frame.head(), &frame.body()[..]].concat(), [2, 0x08, 7]);
///
/// let mut buf = RecvBuf::new();
/// buf.feed(&[2, 0x08, 7, 2, 0x08])?;
/// assert_eq!(codec.decode(&mut buf)?, Some(Ping { id: 7 }));
/// assert_eq!(codec.decode(&mut buf)?, None); // the second is not all here
/// # Ok::<(), cleave_proto::Error>(())
/// ```
///
/// A payload prost refuses is a final [`InvalidInput::Message`] error; the
/// frame has been taken off the buffer by then, and
/// [`take_bad_message`](Self::take_bad_message) hands it back with prost's
/// reason.
///
/// One difference from protosocket-prost, which reads the length with the
/// message (`decode_length_delimited`) and so spends a level of prost's
/// nesting budget on it: a message nested exactly 100 deep is taken here
/// and refused there (both refuse one nested deeper). Reading it that way
/// costs 14% on small messages.
pub struct ProstCodec<M> {
    frames: Varint,
    latch: Latch,
    bad: Option<Box<BadMessage>>,
    message: PhantomData<fn() -> M>,
}

impl<M> fmt::Debug for ProstCodec<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProstCodec")
            .field("message", &core::any::type_name::<M>())
            .field("frames", &self.frames)
            .field("latch", &self.latch)
            .field("bad", &self.bad)
            .finish()
    }
}

impl<M> Clone for ProstCodec<M> {
    fn clone(&self) -> Self {
        Self {
            frames: self.frames.clone(),
            latch: self.latch.clone(),
            bad: self.bad.clone(),
            message: PhantomData,
        }
    }
}

impl<M> Default for ProstCodec<M> {
    fn default() -> Self {
        Self::with_config(VarintConfig::default())
    }
}

impl<M> ProstCodec<M> {
    /// A codec with [`Varint`]'s default configuration (messages up to
    /// 8 MiB, minimal lengths only).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A codec whose frames are cut with `config`. prost's own readers
    /// accept lengths that are not minimally encoded; so does
    /// [`VarintConfig::allow_non_minimal`].
    #[must_use]
    pub fn with_config(config: VarintConfig) -> Self {
        Self {
            frames: Varint::with_config(config),
            latch: Latch::default(),
            bad: None,
            message: PhantomData,
        }
    }

    /// The frame configuration.
    #[must_use]
    pub fn config(&self) -> &VarintConfig {
        self.frames.config()
    }

    /// The frame prost refused, with its reason, once (after
    /// [`InvalidInput::Message`]).
    pub fn take_bad_message(&mut self) -> Option<BadMessage> {
        self.bad.take().map(|bad| *bad)
    }
}

impl<M: prost::Message + Default> ProstCodec<M> {
    #[inline(always)]
    fn next(&mut self, buf: &mut RecvBuf, eof: bool) -> Result<Option<M>, Error> {
        self.latch.check()?;
        let offset = buf.offset();
        let frame = if eof {
            self.frames.decode_eof(buf)?
        } else {
            self.frames.decode(buf)?
        };
        let Some(frame) = frame else {
            return Ok(None);
        };
        // The payload alone: prost's nesting budget is all the message's.
        // protosocket-prost reads the length with the message
        // (`decode_length_delimited`), which spends one level of the
        // budget on it: a message nested exactly 100 deep is taken here
        // and refused there. Reading it that way costs 14% on a 48-byte
        // message.
        match M::decode(frame.clone()) {
            Ok(message) => Ok(Some(message)),
            Err(error) => Err(self.refuse(error, frame, offset)),
        }
    }

    #[cold]
    #[inline(never)]
    fn refuse(&mut self, error: prost::DecodeError, payload: Bytes, offset: u64) -> Error {
        self.bad = Some(Box::new(BadMessage {
            error,
            payload,
            offset,
        }));
        let e = Error::InvalidInput {
            kind: InvalidInput::Message,
            offset,
        };
        self.latch.failed(e.clone());
        e
    }
}

impl<M: prost::Message + Default> Decoder for ProstCodec<M> {
    type Item = M;

    /// # Errors
    ///
    /// [`Varint`]'s, and [`InvalidInput::Message`] for a payload prost
    /// cannot decode as `M`.
    #[inline]
    fn decode(&mut self, buf: &mut RecvBuf) -> Result<Option<M>, Error> {
        self.next(buf, false)
    }

    fn decode_eof(&mut self, buf: &mut RecvBuf) -> Result<Option<M>, Error> {
        self.next(buf, true)
    }
}

impl<M: prost::Message> Encoder for ProstCodec<M> {
    type Item = M;

    /// Encodes `message` into a buffer of exactly its length, and frames it
    /// with its varint length inline: on the wire, the bytes of prost's
    /// `encode_length_delimited`.
    ///
    /// prost encodes a message nested to any depth, but its decoders (this
    /// codec's, protosocket-prost's) refuse one nested 100 deep or more;
    /// such a message is sent, and refused by the peer. Telling would take
    /// a walk over the message that prost does not offer.
    ///
    /// # Errors
    ///
    /// [`Unencodable::TooLong`] for a message over the frame limit.
    fn encode(&mut self, message: M) -> Result<Frame, Error> {
        let len = message.encoded_len();
        let max = self.frames.config().get_max_frame_length();
        if len as u64 > max {
            return Err(*refuse(Unencodable::TooLong {
                len: len as u64,
                max,
            }));
        }
        let mut body = BytesMut::with_capacity(len);
        message.encode_raw(&mut body);
        self.frames.encode(body.freeze())
    }
}
